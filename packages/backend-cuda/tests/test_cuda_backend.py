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


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize(("spatial", "groups", "bias"), [(2, 1, False), (2, 2, True), (1, 1, True),
                                                         (3, 1, False)])
def test_convolutions_on_cudnn_match_the_gather(dtype, spatial, groups, bias):
    """cuDNN's forward, backward-data and backward-filter passes against burnish.jit's."""
    import importlib.util

    from burnish.cuda import cudnn
    from burnish.dtype import get_dtype
    from burnish.jit.backend.backend import JitBackend

    backend, reason = _cuda_or_reason()
    if backend is None:
        pytest.skip(f"needs an NVIDIA GPU with CuPy ({reason})")
    if cudnn.library() is None:
        if importlib.util.find_spec("nvidia.cudnn") is not None:
            pytest.fail(f"nvidia-cudnn is installed but not used: {cudnn.describe()}")
        pytest.skip(f"needs cuDNN (pip install nvidia-cudnn-cu12): {cudnn.describe()}")
    device = backend.default_device()
    runtime = backend.runtime(device)
    rng = np.random.default_rng(spatial)
    size = (9, 7, 5)[:spatial]
    x = rng.standard_normal((2, 4, *size)).astype(dtype)
    w = rng.standard_normal((6, 4 // groups, *(3,) * spatial)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype) if bias else None
    args = ((2,) * spatial, (1,) * spatial, (1,) * spatial, groups)
    px, pw = (Tensor.from_data(v, device=device)._prim for v in (x, w))
    pb = None if b is None else Tensor.from_data(b, device=device)._prim
    tolerance = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-10}[dtype]
    plans = runtime.convolutions().plans

    def check(kind, ours, theirs):
        # The plan's key starts with its pass and the (input, weight, output) shapes.
        assert any(plan is not None and key[0] == kind and key[2] == (
            px.shape, pw.shape, y.shape) for key, plan in plans.items()), \
            f"cuDNN did not take the convolution's {kind} pass"
        np.testing.assert_allclose(backend.into_data(ours, get_dtype(dtype)).to_numpy(),
                                   backend.into_data(theirs, get_dtype(dtype)).to_numpy(),
                                   rtol=tolerance, atol=tolerance)

    y = backend.conv(px, pw, pb, *args)
    check("forward", y, JitBackend.conv(backend, px, pw, pb, *args))
    # The input gradient is the transposed convolution of the output's (here y's) gradient...
    stride, padding, dilation = args[:3]
    extra = tuple((n + 2 * p - d * (k - 1) - 1) % s for n, k, s, p, d in zip(
        x.shape[2:], w.shape[2:], stride, padding, dilation))
    dx = backend.conv_transpose(y, pw, None, stride, padding, extra, dilation, groups)
    assert tuple(dx.shape) == x.shape
    check("data", dx, JitBackend.conv_transpose(backend, y, pw, None, stride, padding, extra,
                                                dilation, groups))
    # ... and the weight's gradient is cuDNN's backward-filter pass, against the protocol's
    # grouped convolution.
    dw = backend.conv_weight_grad(px, y, w.shape[2:], *args)
    assert tuple(dw.shape) == w.shape
    check("filter", dw, JitBackend.conv_weight_grad(backend, px, y, w.shape[2:], *args))


@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (6, 2), (2, 3, 4, 2, 3)])
def test_batch_norm_on_cudnn_matches_the_composition(shape):
    """cuDNN's batch normalisation and its backward pass against the protocol's composition."""
    from burnish.cuda import cudnn
    from burnish.dtype import get_dtype
    from burnish.jit.backend.backend import JitBackend

    backend, reason = _cuda_or_reason()
    if backend is None:
        pytest.skip(f"needs an NVIDIA GPU with CuPy ({reason})")
    if cudnn.library() is None:
        pytest.skip(f"needs cuDNN (pip install nvidia-cudnn-cu12): {cudnn.describe()}")
    device = backend.default_device()
    rng = np.random.default_rng(len(shape))
    f32 = get_dtype("float32")
    values = [rng.standard_normal(s).astype(np.float32) * 2 + 1
              for s in (shape, shape[1:2], shape[1:2], shape)]
    x, w, b, g = (Tensor.from_data(v, device=device)._prim for v in values)
    ours = backend.batch_norm(x, w, b, 1e-5, f32)
    plans = backend.runtime(device).convolutions().plans
    assert ("batch_norm", "float32", shape) in plans and plans["batch_norm", "float32", shape]
    theirs = JitBackend.batch_norm(backend, x, w, b, 1e-5, f32)
    grads = backend.batch_norm_backward(x, w, ours[1], ours[2], g, 1e-5, f32)
    expected = JitBackend.batch_norm_backward(backend, x, w, theirs[1], theirs[2], g, 1e-5, f32)
    for a, e in zip((*ours, *grads), (*theirs, *expected)):
        np.testing.assert_allclose(backend.into_data(a, f32).to_numpy(),
                                   backend.into_data(e, f32).to_numpy(), rtol=1e-4, atol=1e-4)
