"""Real models exported from PyTorch (make_fixtures.py) match onnxruntime's outputs, on every
installed backend, built in memory and through the generated files."""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.onnx import convert

FIXTURES = Path(__file__).with_name("fixtures")
MODELS = ["mlp", "cnn", "resnet18", "transformer", "lstm"]
#: Plain backends only: decorators are covered by the training test.
BACKENDS = sorted(bn.registry.backend_infos())


def compare(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest error relative to the expected output's largest magnitude."""
    return float(np.abs(got - expected).max() / np.abs(expected).max())


@pytest.fixture(scope="module", params=MODELS)
def imported(request):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return request.param, convert(FIXTURES / f"{request.param}.onnx")


@pytest.mark.parametrize("backend", BACKENDS)
def test_matches_onnxruntime(imported, backend):
    name, result = imported
    try:
        device = bn.backend(backend).default_device()
    except bn.UnsupportedError as error:
        # Where BURNISH_REQUIRE_BACKENDS names the backend (CI: wgpu, rocm), it must run.
        required = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
        if backend in required or "all" in required:
            pytest.fail(f"{backend} cannot run here: {error} [BURNISH_REQUIRE_BACKENDS requires "
                        "it]", pytrace=False)
        pytest.skip(f"{backend} cannot run here: {error}")
    model = result.build(device)
    x = np.load(FIXTURES / f"{name}.input.npy")
    expected = np.load(FIXTURES / f"{name}.expected.npy")
    got = model(Tensor.from_data(x, device=device)).to_numpy()
    assert got.shape == expected.shape
    assert compare(got, expected) < 1e-4


def test_generated_files_give_the_same_outputs(imported, tmp_path):
    name, result = imported
    module_path, weights_path = result.write(tmp_path, name)
    spec = importlib.util.spec_from_file_location(f"generated_{name}", module_path)
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    loaded = module.load("ndarray")
    x = Tensor.from_data(np.load(FIXTURES / f"{name}.input.npy"))
    in_memory = result.build("ndarray")(x).to_numpy()
    from_files = loaded(x).to_numpy()
    np.testing.assert_array_equal(from_files, in_memory)
    source = module_path.read_text()
    assert "class Model(nn.Module):" in source and "def forward(" in source
    assert max(len(line) for line in source.splitlines()) <= 100
