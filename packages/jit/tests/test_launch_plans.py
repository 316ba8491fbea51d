"""Elementwise launch plans are cached per call signature: the same call on two backends whose
languages store a dtype differently must not share one."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor


def test_one_signature_on_two_languages(jit_backend):
    # bfloat16 is 2 bytes in OpenCL and 4 in WGSL: a shared plan once sized one backend's
    # output for the other's storage, and reading it overran the buffer.
    other_name = "rocm" if jit_backend.name == "wgpu" else "wgpu"
    try:
        other = bn.backend(other_name)
        other.devices()
    except Exception as error:  # no driver for the other backend
        pytest.skip(f"needs {other_name} as well ({error})")
    for backend in (other, jit_backend):
        device = backend.default_device()
        x = Tensor.from_data(np.ones((19, 13), np.float32), device=device).cast("bfloat16")
        assert x.to_numpy().astype(np.float64).sum() == 247.0
