"""examples/custom-training-loop: a short run on the shipped MNIST digits prints its
validation accuracy and saves a record that loads back into the model."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "custom-training-loop"


def mnist_model():
    """examples/mnist/model.py, the model the example trains."""
    spec = importlib.util.spec_from_file_location(
        "mnist_example_model", FOLDER.parent / "mnist" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_custom_training_loop(run, tmp_path, monkeypatch):
    monkeypatch.delenv("BURNISH_MNIST_DIR", raising=False)  # the copy shipped in burnish-train
    out = tmp_path / "model.safetensors"
    stdout = run(sys.executable, FOLDER / "custom-training-loop.py", "--limit", "320",
                 "--epochs", "1", "--out", out, cwd=FOLDER, timeout=300).stdout
    assert "training on 320 digits, validating on 80" in stdout, stdout
    epoch = re.search(r"^epoch 1/1: validation loss (\S+), accuracy (\S+)%", stdout, re.M)
    assert epoch, stdout
    loss, accuracy = float(epoch.group(1)), float(epoch.group(2))
    assert 0 < loss < 2.5 and 0 <= accuracy <= 100, stdout
    assert f"validation accuracy {accuracy:.2f}%; model saved to {out}" in stdout

    from burnish import record
    from burnish.data import MnistBatcher, MnistDataset

    saved = record.load(out)
    assert saved.metadata.user["accuracy"] == accuracy
    model = mnist_model().CnnConfig().init("ndarray").load_record(saved)
    weight = model.conv1.weight.val().to_numpy()
    np.testing.assert_array_equal(weight, saved.tensors["conv1"]["weight"].to_numpy())
    digits = MnistDataset("test", embedded=True)
    batch = MnistBatcher().batch([digits.get(i) for i in range(4)], "ndarray")
    assert model(batch.images).shape == [4, 10]
