"""The cuda backend: a clear message where CuPy or a GPU is missing; real ops where they exist
(the whole conformance suite runs on the GPU machine: pytest --pyargs burnish.conformance
--backend cuda)."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.errors import UnsupportedError


def _cuda_or_reason():
    try:
        backend = bn.backend("cuda")
        backend.devices()  # devices (and CuPy) are looked for on first use
        return backend, None
    except UnsupportedError as error:
        return None, str(error)


def test_missing_cupy_or_gpu_is_explained():
    backend, reason = _cuda_or_reason()
    if backend is not None:
        pytest.skip("a GPU and CuPy are present; the message for their absence is not shown")
    assert "cuda backend" in reason
    assert "pip install" in reason or "no NVIDIA GPU" in reason


def test_ops_and_cublas_matmul_on_the_gpu():
    backend, reason = _cuda_or_reason()
    if backend is None:
        pytest.skip(f"needs an NVIDIA GPU with CuPy ({reason})")
    device = backend.default_device()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    ta, tb = Tensor.from_data(a, device=device), Tensor.from_data(b, device=device)
    np.testing.assert_allclose((ta @ tb).to_numpy(), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose((ta.exp() + 1.0).to_numpy(), np.exp(a) + 1.0, rtol=1e-5)
    assert str(device) == "cuda:0"
