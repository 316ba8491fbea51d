"""The pytorch-import example reads digits with the shipped PyTorch state_dict; where PyTorch is
installed, a state_dict it trains afresh gives the same logits in burnish as in PyTorch."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "pytorch-import"


def load_script(name: str) -> ModuleType:
    """A script of the example folder as a module (its name has a dash: no plain import)."""
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pytorch_import_reads_digits_with_the_shipped_weights(run, monkeypatch):
    assert (FOLDER / "mnist-cnn.pt").stat().st_size < 300_000
    monkeypatch.delenv("BURNISH_MNIST_DIR", raising=False)  # the copy shipped in burnish-train
    out = run(sys.executable, FOLDER / "pytorch-import.py", cwd=FOLDER, timeout=300).stdout
    assert "features.0.weight      conv1.weight" in out, out
    assert "loaded 8 of 8 parameters" in out, out
    assert len(re.findall(r"^label \d  predicted \d", out, re.MULTILINE)) == 10, out
    found = re.search(r"accuracy on 2,000 held-out test digits: ([\d.]+)%", out)
    assert found, out
    assert float(found.group(1)) > 90, out  # chance is 10%


def test_burnish_gives_pytorchs_logits(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from burnish.data.mnist import EMBEDDED_DIR

    train_torch = load_script("train_torch")
    example = load_script("pytorch-import")
    path = tmp_path / "mnist-cnn.pt"
    torch_model = train_torch.train(EMBEDDED_DIR, path, epochs=1)
    images, _ = train_torch.digits(EMBEDDED_DIR)
    images = images[-64:]
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(images)).numpy()
    from burnish import Tensor

    model = example.load_model(path, "ndarray")
    logits = model(Tensor.from_numpy(images, "ndarray")).to_numpy()
    np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-4)
