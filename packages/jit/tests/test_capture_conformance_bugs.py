"""Capture-layer bugs found by the conformance suite's ``--replay``, each as a minimal case
(each failed before its fix)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor


def started(name: str):
    """The default device of jit backend ``name``, or a skip naming the driver it needs (a
    failure where ``BURNISH_REQUIRE_BACKENDS`` names it, as in CI)."""
    try:
        return bn.backend(name).default_device()
    except Exception as error:
        wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
        message = f"{name} cannot run here ({type(error).__name__}: {error}); it needs " + {
            "wgpu": "a Vulkan driver (Linux without a GPU: apt install mesa-vulkan-drivers)",
            "rocm": "an OpenCL driver (pip install 'burnish-backend-rocm[pocl]')"}[name]
        if name in wanted or "all" in wanted:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.mark.parametrize("name", ["rocm", "wgpu"])
def test_a_returned_view_of_an_argument_views_the_new_argument(name):
    # A result that views an argument (a reshape launches nothing) is planned as a copy of
    # the buffer the recorded call's argument had; a replay with a new argument first moves
    # that old tensor out of the record's input buffer, then copies the old values out: every
    # replay returns the recorded call's values, silently.
    device = started(name)
    step = bn.capture(lambda x: (x.reshape([-1]), x * 2.0), strict=True)
    for i in range(5):
        x = Tensor.from_numpy(np.full((2, 3), float(i), np.float32), device)
        flat, doubled = step(x)
        np.testing.assert_array_equal(doubled.to_numpy(), np.full((2, 3), 2.0 * i))
        np.testing.assert_array_equal(flat.to_numpy(), np.full(6, float(i)),
                                      err_msg=f"call {i}, {step.stats()}")
    assert step.stats()[0]["replays"] == 2


def test_fusion_over_ndarray_is_captured():
    # Fusion binds the inner backend's methods when it is made; ndarray's recorder wraps the
    # methods on the instance while it records, so it sees none of the ops Fusion forwards:
    # every function captured on fusion+ndarray runs eagerly ("it returns an array that no
    # recorded operation made").
    device = bn.backend("fusion+ndarray").default_device()
    step = bn.capture(lambda x: x.exp() + 1.0, strict=True)
    x = Tensor.from_numpy(np.linspace(-1.0, 1.0, 6, dtype=np.float32), device)
    for _ in range(4):
        out = step(x)
    np.testing.assert_allclose(out.to_numpy(), np.exp(x.to_numpy()) + 1.0, rtol=1e-6)
    assert step.stats()[0]["replays"] >= 1, step.stats()


def test_a_float16_view_at_an_odd_offset_replays_on_wgpu():
    # A replay copies the bytes an argument views into the record's input buffer; for a
    # float16 view starting at an odd element those bytes start at an offset that is not a
    # multiple of 4, which WebGPU's buffer copies refuse (ValueError: source_offset).
    device = started("wgpu")
    step = bn.capture(lambda x: x * 2.0, strict=True)
    for i in range(5):
        base = Tensor.from_numpy(np.arange(8, dtype=np.float16) + i, device)
        out = step(base[1:])
        np.testing.assert_array_equal(out.to_numpy(), 2.0 * (np.arange(1, 8) + i))
    assert step.stats()[0]["replays"] == 2
