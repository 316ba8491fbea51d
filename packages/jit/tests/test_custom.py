"""Custom kernels: hand-written source or IR, called on tensors, and their errors."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.dtype import finfo
from burnish.errors import AutodiffError, DeviceError, DTypeError, ShapeError, UnsupportedError
from burnish.jit import ir
from burnish.jit.custom import Launch, custom_kernel

# out[row, col] = x[row, col] * scale + y[col]: a 2-d grid of 8x8 workgroups, info = rows, cols.
WGSL = """
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> info: array<i32>;

@compute @workgroup_size(8, 8, 1)
fn scale_add_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = i32(gid.y);
    let col = i32(gid.x);
    if (row >= info[0] || col >= info[1]) {
        return;
    }
    let i = row * info[1] + col;
    out[i] = x[i] * bitcast<f32>(info[2]) + y[col];
}
"""

OPENCL = """
__kernel void scale_add_row(__global float* out, __global const float* x,
                            __global const float* y, __global const int* info) {
    int row = get_global_id(1), col = get_global_id(0);
    if (row >= info[0] || col >= info[1]) return;
    int i = row * info[1] + col;
    out[i] = x[i] * as_float(info[2]) + y[col];
}
"""


def build_ir(k, out, x, y):
    row = k.let(k.group_id(1) * 8 + k.local_id(1), "row")
    col = k.let(k.group_id(0) * 8 + k.local_id(0), "col")
    with k.if_((row >= k.info(0)).or_(col >= k.info(1))):
        k.return_()
    i = k.let(row * k.info(1) + col, "i")
    scale = k.info(2).bitcast("f32").cast(ir.compute_type(out.dtype))
    k.store(out, i, x[i] * scale + y[col])


def plan(x, y, scale=0.5):
    rows, cols = x.dims()
    if y.dims() != [cols]:
        raise ShapeError(f"scale_add_row: y must have shape [{cols}], got {y.dims()}")
    word = int(np.array(scale, np.float32).view(np.int32))
    return Launch((rows, cols), x.dtype, info=[rows, cols, word],
                  groups=(-(-cols // 8), -(-rows // 8), 1))


hand_written = custom_kernel("scale_add_row", wgsl=WGSL, opencl=OPENCL, workgroup=(8, 8, 1),
                             dtypes=["float32"])(plan)
wgsl_only = custom_kernel("scale_add_row", wgsl=WGSL, workgroup=(8, 8, 1),
                          dtypes=["float32"])(plan)
in_the_ir = custom_kernel("scale_add_row", build=build_ir, workgroup=(8, 8, 1))(plan)


def _inputs(device, rows=19, cols=13, dtype="float32"):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = rng.standard_normal(cols).astype(np.float32)
    return (Tensor.from_data(x, device=device).cast(dtype),
            Tensor.from_data(y, device=device).cast(dtype), x, y)


@pytest.mark.parametrize("kernel", [hand_written, in_the_ir], ids=["source", "ir"])
def test_kernels_run_as_tensor_ops(jit_backend, kernel):
    x, y, hx, hy = _inputs(jit_backend.default_device())
    out = kernel(x, y)
    assert isinstance(out, Tensor) and out.device == x.device and out.dtype == x.dtype
    np.testing.assert_allclose(out.to_numpy(), hx * 0.5 + hy, rtol=1e-6)


def test_ir_kernels_take_every_float_dtype(jit_backend):
    device = jit_backend.default_device()
    for dtype in jit_backend.dtypes(device):
        if not dtype.is_float:
            continue
        x, y, hx, hy = _inputs(device, dtype=dtype)
        out = in_the_ir(x, y)
        assert out.dtype == dtype
        # Computed in float32 and rounded once to the dtype (float8's steps are up to 1/8 of
        # the value, float8_e8m0fnu's a factor of two): within one step of the dtype.
        expected = (x.to_numpy().astype(np.float32) * 0.5 + y.to_numpy().astype(np.float32)
                    ).astype(dtype.numpy).astype(np.float64)
        limits = finfo(dtype)
        np.testing.assert_allclose(out.to_numpy().astype(np.float64), expected,
                                   rtol=max(1e-2, float(limits.eps)),
                                   atol=float(limits.smallest_subnormal), err_msg=str(dtype))


def test_views_are_made_plain_first(jit_backend):
    x, y, hx, hy = _inputs(jit_backend.default_device(), rows=13, cols=13)
    xt = x.transpose()[1:, :]  # a strided view with an offset
    yf = y.flip([0])
    out = hand_written(xt, yf)
    np.testing.assert_allclose(out.to_numpy(), hx.T[1:] * 0.5 + hy[::-1], rtol=1e-6)


def test_a_language_the_kernel_lacks_is_a_clear_error(jit_backend):
    x, y, *_ = _inputs(jit_backend.default_device())
    if jit_backend.name == "wgpu":
        np.testing.assert_allclose(wgsl_only(x, y).to_numpy(), hand_written(x, y).to_numpy())
        return
    with pytest.raises(UnsupportedError, match=r"written in wgsl only.*'rocm' compiles opencl"):
        wgsl_only(x, y)


def test_wrong_dtype_is_a_clear_error(jit_backend):
    x, y, *_ = _inputs(jit_backend.default_device())
    with pytest.raises(DTypeError, match="takes float32; input 1 is int32"):
        hand_written(x, y.cast("int32"))


def test_the_launch_function_checks_shapes(jit_backend):
    x, y, *_ = _inputs(jit_backend.default_device())
    with pytest.raises(ShapeError, match=r"y must have shape \[13\], got \[5\]"):
        hand_written(x, y[:5])


def test_a_backend_outside_jit_is_a_clear_error():
    device = burnish.backend("ndarray").default_device()
    x = Tensor.from_data(np.ones((2, 2), np.float32), device=device)
    with pytest.raises(UnsupportedError, match="GPU backends of burnish.jit.*'ndarray'"):
        in_the_ir(x, x[0])


def test_inputs_on_two_backends_are_a_clear_error(jit_backend):
    x, y, *_ = _inputs(jit_backend.default_device())
    other = Tensor.from_data(y.to_numpy(), device=burnish.backend("ndarray").default_device())
    with pytest.raises(DeviceError, match="input 1 on ndarray"):
        in_the_ir(x, other)


def test_on_an_autodiff_backend_untracked_inputs_run_and_tracked_ones_raise(jit_backend):
    auto = burnish.backend(f"autodiff+{jit_backend.name}")
    x, y, hx, hy = _inputs(auto.default_device())
    out = in_the_ir(x, y)
    assert out.backend is auto and not out.is_require_grad()
    np.testing.assert_allclose(out.to_numpy(), hx * 0.5 + hy, rtol=1e-6)
    with pytest.raises(AutodiffError, match="has no gradient, and input 0 requires grad"):
        in_the_ir(x.require_grad(), y)
    in_the_ir(x.require_grad().detach(), y)


def test_source_shows_what_runs(jit_backend):
    x, y, *_ = _inputs(jit_backend.default_device())
    assert hand_written.source(x, y) == (WGSL if jit_backend.name == "wgpu" else OPENCL)
    generated = in_the_ir.source(x, y)
    assert "scale_add_row" in generated and generated not in (WGSL, OPENCL)


def test_empty_outputs_launch_nothing(jit_backend):
    x, y, *_ = _inputs(jit_backend.default_device(), rows=0)
    assert in_the_ir(x, y).dims() == [0, 13]


def test_definitions_are_checked():
    with pytest.raises(ValueError, match="give build="):
        custom_kernel("k")(plan)
    with pytest.raises(ValueError, match="say which with dtypes="):
        custom_kernel("k", wgsl=WGSL)(plan)
    with pytest.raises(ValueError, match="must be an identifier"):
        custom_kernel("my kernel", build=build_ir)(plan)
    assert hand_written.__name__ == "plan"
    assert "wgsl" in repr(hand_written) and "IR" in repr(in_the_ir)


def test_a_bad_launch_is_a_clear_error(jit_backend):
    x, y, *_ = _inputs(jit_backend.default_device())
    both = custom_kernel("k", build=build_ir)(
        lambda x, y: Launch(x.dims(), x.dtype, invocations=1, groups=1))
    with pytest.raises(ValueError, match="exactly one of"):
        both(x, y)
    not_a_launch = custom_kernel("k", build=build_ir)(lambda x, y: (x.dims(), x.dtype))
    with pytest.raises(TypeError, match="must return a Launch"):
        not_a_launch(x, y)
