"""Capture-layer bugs found by the conformance suite's ``--replay``, each as a minimal case."""

from __future__ import annotations

import numpy as np

import burnish as bn
from burnish import Tensor


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
