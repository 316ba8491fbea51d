"""``Fusion`` as a backend decorator: names, devices, passing through on backends without a
fuser, composing with autodiff, threads."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import burnish as bn
from burnish.fusion import Fusion, launches, programs


def test_registry_names_and_identity():
    nd = bn.backend("ndarray")
    fused = bn.backend("fusion+ndarray")
    assert fused is Fusion(nd)
    assert fused.name == "fusion+ndarray" and fused.inner is nd
    device = fused.default_device()
    assert device.backend is fused and device.native == nd.default_device()
    assert fused.dtypes(device) == nd.dtypes(nd.default_device())


def test_without_a_fuser_ops_run_one_by_one():
    device = bn.backend("fusion+ndarray").default_device()
    x = bn.Tensor.from_data([[1.0, -2.0], [3.0, 0.5]], device=device)
    y = (x * 2).exp().sum()
    assert y.device == device
    np.testing.assert_allclose(y.to_data().to_numpy(), np.exp([[2, -4], [6, 1]]).sum(),
                               rtol=1e-6)
    assert programs(device) == [] and launches(device) is None


def test_fusion_wraps_only_backends():
    with pytest.raises(TypeError, match="Fusion wraps a backend, got str"):
        Fusion("wgpu")


def test_introspection_needs_a_fusion_device():
    with pytest.raises(ValueError, match="has no fusion layer"):
        programs(bn.backend("ndarray").default_device())


def test_autodiff_through_fusion(fused_backend):
    auto = bn.backend(f"autodiff+{fused_backend.name}")
    device = auto.default_device()
    values = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    x = bn.Tensor.from_data(values, device=device).require_grad()
    y = x * ((x / math.sqrt(2.0)).erf() + 1.0) / 2.0
    grads = (y * y).sum().backward()
    got = x.grad(grads).to_data().to_numpy()
    v = values.astype(np.float64)
    cdf = 0.5 * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))
    pdf = np.exp(-v * v / 2) / math.sqrt(2 * math.pi)
    gelu = v * cdf
    np.testing.assert_allclose(got, 2 * gelu * (cdf + v * pdf), rtol=1e-4, atol=1e-5)


def test_threads_share_a_device(device):
    results, errors = {}, []

    def work(i):
        try:
            x = bn.Tensor.from_data(np.full(100, i, dtype=np.float32), device=device)
            results[i] = ((x + 1.0) * 2.0).to_data().to_numpy()
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, got in results.items():
        np.testing.assert_array_equal(got, np.full(100, (i + 1) * 2, dtype=np.float32))


def test_the_ops_a_jit_fuser_never_records_are_protocol_ops():
    from burnish.fusion.backend import _FORWARDED
    from burnish.jit.fuser import JitFuser

    assert JitFuser.eager <= set(_FORWARDED), JitFuser.eager - set(_FORWARDED)
