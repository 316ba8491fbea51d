"""Quantization: quantize and dequantize against a NumPy reference for every scheme (value type,
granularity, mode, scale dtype), the rounding and packing rules, the layout ops, and every op
with a quantized operand against the same op on the dequantized values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from burnish import Tensor, float16, float32, int8, int32, uint8
from burnish.backend import AutodiffOps
from burnish.conformance.compare import accumulated_atol, assert_close, assert_equal, host
from burnish.conformance.samples import sample
from burnish.errors import DTypeError, ShapeError
from burnish.quantization import PerBlock, PerChannel, PerTensor, QuantScheme
from burnish.quantization import conv as qconv
from burnish.quantization import linear as qlinear
from burnish.quantization.scheme import channel_axis


@pytest.fixture(autouse=True)
def _integer_dtypes(require_dtype):
    """Quantized values are int8 or uint8, and the defaults compute with int32."""
    require_dtype(int8, uint8, int32)


SHAPE = (6, 16)
GRANULARITIES: tuple[PerTensor | PerChannel | PerBlock, ...] = (
    PerTensor(), PerChannel(1), PerBlock(8), PerBlock(2, axis=0))
SCHEMES = [QuantScheme(value, granularity, mode, scale)
           for value, granularity, mode, scale in itertools.product(
               ("int8", "uint8", "int4"), GRANULARITIES, ("symmetric", "affine"),
               (float32, float16))]


def scheme_id(scheme: QuantScheme) -> str:
    level = type(scheme.granularity).__name__
    if isinstance(scheme.granularity, PerBlock):
        level += f"{scheme.granularity.size}@{scheme.granularity.axis}"
    return f"{scheme.value}-{level}-{scheme.mode}-{scheme.scale_dtype}"


# -- the NumPy reference ---------------------------------------------------------------------


def _reduce(x: np.ndarray, scheme: QuantScheme, fn) -> np.ndarray:
    """``fn`` (np.max, np.min) over each group sharing a scale, in the scales' shape."""
    granularity = scheme.granularity
    if isinstance(granularity, PerTensor):
        return fn(x)
    axis = channel_axis(granularity, x.shape)
    if isinstance(granularity, PerChannel):
        return fn(x, axis=tuple(d for d in range(x.ndim) if d != axis))
    split = x.reshape(*x.shape[:axis], x.shape[axis] // granularity.size, granularity.size,
                      *x.shape[axis + 1:])
    return fn(split, axis=axis + 1)


def _expand(params: np.ndarray, scheme: QuantScheme, shape: tuple[int, ...]) -> np.ndarray:
    """Per-group parameters repeated to one per element."""
    granularity = scheme.granularity
    if isinstance(granularity, PerTensor):
        return np.broadcast_to(params, shape)
    axis = channel_axis(granularity, shape)
    if isinstance(granularity, PerChannel):
        return np.broadcast_to(params.reshape([n if d == axis else 1
                                               for d, n in enumerate(shape)]), shape)
    return np.repeat(params, granularity.size, axis=axis)


def reference_params(x: np.ndarray, scheme: QuantScheme) -> tuple[np.ndarray, np.ndarray]:
    """Scales (in the scheme's dtype) and zero points, computed in float32 as documented."""
    qmin, qmax = scheme.range
    if scheme.mode == "symmetric":
        largest = _reduce(np.abs(x), scheme, np.max)
        scales = (largest / np.float32(scheme.symmetric_limit)).astype(scheme.scale_dtype.numpy)
        scales = np.where(scales == 0, 1, scales).astype(scheme.scale_dtype.numpy)
        return scales, np.full(scales.shape, scheme.symmetric_zero, np.float32)
    low = np.minimum(_reduce(x, scheme, np.min), 0).astype(np.float32)
    high = np.maximum(_reduce(x, scheme, np.max), 0).astype(np.float32)
    scales = ((high - low) / np.float32(qmax - qmin)).astype(scheme.scale_dtype.numpy)
    scales = np.where(scales == 0, 1, scales).astype(scheme.scale_dtype.numpy)
    points = np.clip(qmin - np.rint(low / scales.astype(np.float32)), qmin, qmax)
    return scales, points.astype(np.float32)


def reference_ints(x: np.ndarray, scales: np.ndarray, points: np.ndarray,
                   scheme: QuantScheme) -> tuple[np.ndarray, np.ndarray]:
    """The integers for ``x`` with these parameters, and where ``x / scale`` lies so near a
    half that a last-bit difference in the division may round it either way."""
    qmin, qmax = scheme.range
    if scheme.mode == "symmetric":
        limit = scheme.symmetric_limit
        qmin, qmax = scheme.symmetric_zero - limit, scheme.symmetric_zero + limit
    ratio = x.astype(np.float32) / _expand(scales.astype(np.float32), scheme, x.shape)
    ints = np.clip(np.rint(ratio) + _expand(points, scheme, x.shape), qmin, qmax)
    near_half = np.abs(np.abs(ratio - np.floor(ratio)) - 0.5) < 1e-5 * np.maximum(1, abs(ratio))
    return ints, near_half


def _sample(scheme: QuantScheme, shape=SHAPE, key: object = 0) -> np.ndarray:
    x = sample(shape, float32, -3.0, 3.0, key=("quant", key))
    x[:, 3] = 0.0  # a column of zeros: an all-zero channel for PerChannel(1)
    x[1, 5] = 9.0  # an outlier
    return x


def _points(q, scheme: QuantScheme) -> np.ndarray:
    if q.zero_points is None:
        return np.full(tuple(q.scales.shape), scheme.symmetric_zero, np.float32)
    return host(q.zero_points).astype(np.float32)


# -- quantize and dequantize ------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES, ids=scheme_id)
def test_quantize_matches_numpy(device, require_dtype, scheme):
    require_dtype(scheme.storage_dtype, scheme.scale_dtype)
    x = _sample(scheme)
    q = Tensor.from_data(x, device, float32).quantize(scheme)
    assert tuple(q.shape) == SHAPE and q.scheme == scheme
    expected_scales, expected_points = reference_params(x, scheme)
    scales = host(q.scales, expected_scales.shape, scheme.scale_dtype)
    # A backend's float32 division may be off in its last bit (WGSL allows 2.5 ulp): scales
    # agree to float32's precision, or float16's last bit once rounded to it.
    rtol = 1e-6 if scheme.scale_dtype is float32 else 1e-3
    np.testing.assert_allclose(scales.astype(np.float64), expected_scales.astype(np.float64),
                               rtol=rtol)
    points = _points(q, scheme)
    assert np.array_equal(points, reference_params(x, scheme)[1] if scheme.mode == "symmetric"
                          else np.clip(scheme.range[0] - np.rint(
                              np.minimum(_reduce(x, scheme, np.min), 0) /
                              scales.astype(np.float32)), *scheme.range))
    # The integers from the scales the backend chose, exact but where x / scale is a near tie.
    ints, near_half = reference_ints(x, scales, points, scheme)
    got = host(q.int_values(), SHAPE)
    differ = got != ints
    assert not (differ & ~near_half).any(), \
        f"integers differ from the reference at {np.argwhere(differ & ~near_half).tolist()}"
    assert (np.abs(got - ints) <= 1).all()
    # The stored values: packed int4, or the integers in the storage dtype.
    stored = host(q.values)
    assert stored.dtype == scheme.storage_dtype.numpy
    if scheme.packed:
        nibbles = (got.astype(np.int64) & 15).reshape(-1, 2)
        assert np.array_equal(stored, nibbles[:, 0] | nibbles[:, 1] << 4)
    else:
        assert np.array_equal(stored, got)
    # dequantize: (q - zero_point) * scale, and within a step of x.
    back = q.dequantize()
    expanded_scales = _expand(scales.astype(np.float64), scheme, SHAPE)
    assert_close(back, (got - _expand(points, scheme, SHAPE)) * expanded_scales, float32)
    bound = expanded_scales * (0.5 if scheme.mode == "symmetric" else 1.0) * (1 + 1e-5)
    assert (np.abs(host(back) - x) <= bound + 1e-7).all()


@pytest.mark.parametrize("value", ["int8", "uint8", "int4"])
def test_rounding_is_half_to_even_then_clamped(device, value):
    scheme = QuantScheme(value)
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300.0, -300.0]], np.float32)
    scales = Tensor.from_data(np.array(1.0, np.float32), device, float32)
    q = Tensor.from_data(x, device, float32).quantize(scheme, scales=scales)
    limit = scheme.symmetric_limit
    expected = np.array([[0, 2, 2, 0, -2, -2, limit, -limit]])
    assert_equal(q.int_values(), expected + scheme.symmetric_zero)
    assert_close(q.dequantize(), expected.astype(np.float64), float32)


def test_int4_packing_layout(device):
    scheme = QuantScheme("int4", mode="affine")
    x = np.array([[1.0, -2.0, 7.0], [-8.0, 3.0, 0.0]], np.float32)
    scales = Tensor.from_data(np.array(1.0, np.float32), device, float32)
    points = Tensor.from_data(np.array(0, np.int8), device, scheme.zero_point_dtype)
    q = Tensor.from_data(x, device, float32).quantize(scheme, scales=scales, zero_points=points)
    # Row-major pairs, the even index in the low nibble, two's complement:
    # (1, -2) -> 0xE1, (7, -8) -> 0x87, (3, 0) -> 0x03.
    assert_equal(q.values, np.array([0xE1, 0x87, 0x03], np.uint8))
    assert_close(q.dequantize(), x.astype(np.float64), float32)
    # An odd count leaves the last high nibble zero.
    odd = Tensor.from_data(x[:, :1], device, float32).quantize(scheme, scales=scales,
                                                                zero_points=points)
    assert_equal(odd.values, np.array([0x81], np.uint8))
    assert_close(odd.transpose().dequantize(), x[:, :1].T.astype(np.float64), float32)


def test_all_zero_tensor_gets_unit_scales(device):
    for scheme in (QuantScheme(), QuantScheme("uint8", PerChannel(0), "affine")):
        q = Tensor.zeros((3, 4), device=device).quantize(scheme)
        assert_close(q.scales, np.ones(tuple(q.scales.shape)), float32)
        assert_close(q.dequantize(), np.zeros((3, 4)), float32)


@pytest.mark.parametrize("dtype", [float32, float16], ids=str)
def test_quantize_half_inputs_and_outputs(device, require_dtype, dtype):
    require_dtype(dtype)
    x = sample((4, 8), dtype, -2.0, 2.0, key="half")
    q = Tensor.from_data(x, device, dtype).quantize(QuantScheme(granularity=PerChannel(0)))
    scales = host(q.scales).astype(np.float64)
    ints, _ = reference_ints(x.astype(np.float32), host(q.scales), _points(q, q.scheme),
                             q.scheme)
    assert (np.abs(host(q.int_values()) - ints) <= 1).all()
    assert_close(q.dequantize(dtype), (ints * scales[:, None]), dtype)


def test_quantize_refuses_bad_input(device):
    x = Tensor.from_data(np.ones((4, 6), np.float32), device, float32)
    with pytest.raises(DTypeError, match="float tensor"):
        Tensor.from_data(np.ones((2, 2), np.int32), device).quantize(QuantScheme())
    with pytest.raises(ShapeError, match="blocks of 4 do not divide dim 1"):
        x.quantize(QuantScheme(granularity=PerBlock(4)))
    with pytest.raises(ShapeError, match="axis is out of range"):
        x.quantize(QuantScheme(granularity=PerChannel(2)))
    with pytest.raises(ShapeError, match=r"scales of shape \[2\] where the scheme needs \[4\]"):
        x.quantize(QuantScheme(granularity=PerChannel(0)),
                   scales=Tensor.from_data(np.ones(2, np.float32), device))
    with pytest.raises(DTypeError, match="unknown quantized value type"):
        QuantScheme("int3")


# -- layout ops --------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", [QuantScheme(), QuantScheme("int4", PerChannel(0), "affine"),
                                    QuantScheme("int8", PerBlock(4, axis=0)),
                                    QuantScheme("int4", PerBlock(8))], ids=scheme_id)
def test_layout_ops_follow_the_dequantized_values(device, scheme):
    x = sample((8, 16), float32, -2.0, 2.0, key="layout")
    q = Tensor.from_data(x, device, float32).quantize(scheme)
    d = host(q.dequantize()).astype(np.float64)
    assert_close(q.transpose().transpose().dequantize(), d, float32)
    assert_close(q.transpose().dequantize(), d.T, float32)
    assert_close(q.narrow(0, 4, 4).dequantize(), d[4:8], float32)
    assert_close(q.narrow(1, 8, 8).dequantize(), d[:, 8:16], float32)
    if isinstance(scheme.granularity, PerTensor):
        assert_close(q.reshape((4, 32)).dequantize(), d.reshape(4, 32), float32)
    else:
        with pytest.raises(ShapeError, match="scales follow dims"):
            q.reshape((4, 32))
    if isinstance(scheme.granularity, PerBlock):
        with pytest.raises(ShapeError, match="at multiples of"):
            q.narrow(channel_axis(scheme.granularity, (8, 16)), 1, 4)


def test_layout_ops_on_packed_int4_of_odd_sizes(device):
    x = sample((3, 5, 7), float32, -2.0, 2.0, key="permute")
    q = Tensor.from_data(x, device, float32).quantize(QuantScheme("int4", PerChannel(0)))
    d = host(q.dequantize()).astype(np.float64)
    p = q.permute((2, 0, 1))
    assert p.scheme.granularity == PerChannel(1)
    assert_close(p.dequantize(), d.transpose(2, 0, 1), float32)
    assert_close(q.permute((1, 2, 0)).dequantize(), d.transpose(1, 2, 0), float32)
    assert_close(q.narrow(2, 1, 3).dequantize(), d[:, :, 1:4], float32)


# -- ops with quantized operands ---------------------------------------------------------------

PAIRS = [
    (None, QuantScheme(granularity=PerChannel(1))),
    (QuantScheme(), QuantScheme(granularity=PerChannel(1))),
    (QuantScheme("uint8", mode="affine"), QuantScheme("int4", PerChannel(1), "affine")),
    (QuantScheme(granularity=PerChannel(0)), QuantScheme("int8", PerBlock(8, axis=0))),
    (None, QuantScheme("int4", PerBlock(16, axis=0), scale_dtype=float16)),
]


def _pair_id(pair) -> str:
    lhs, rhs = pair
    return f"{'float' if lhs is None else scheme_id(lhs)}@{scheme_id(rhs)}"


@pytest.mark.parametrize("pair", PAIRS, ids=_pair_id)
def test_matmul_and_linear_match_dequantized_products(device, require_dtype, pair):
    lhs_scheme, rhs_scheme = pair
    require_dtype(rhs_scheme.scale_dtype)
    x = sample((2, 5, 32), float32, -2.0, 2.0, key="lhs")
    w = sample((32, 6), float32, -1.0, 1.0, key="rhs")
    b = sample((6,), float32, key="bias")
    lhs = Tensor.from_data(x, device, float32)
    if lhs_scheme is not None:
        lhs = lhs.quantize(lhs_scheme)
    qw = Tensor.from_data(w, device, float32).quantize(rhs_scheme)
    left = host(lhs.dequantize() if lhs_scheme is not None else lhs).astype(np.float64)
    right = host(qw.dequantize()).astype(np.float64)
    assert_close(lhs @ qw, left @ right, float32)
    bias = Tensor.from_data(b, device, float32)
    assert_close(qlinear(lhs, qw, bias), left @ right + b, float32)


#: Products of two 8-bit operands whose scales factor out of the sums: what integer kernels
#: take (int8 and uint8, symmetric and affine, per tensor or per row times per tensor or per
#: column).
BYTE_PAIRS = [
    (QuantScheme(), QuantScheme(granularity=PerChannel(1))),
    (QuantScheme("uint8", mode="affine"), QuantScheme("uint8", PerChannel(1), "affine")),
    (QuantScheme("int8", PerChannel(-2), "affine"), QuantScheme("uint8")),
    (QuantScheme("uint8", PerChannel(-2)),
     QuantScheme("int8", mode="affine", scale_dtype=float16)),
]
#: (lhs shape, N): K and N no multiples of 4; a batched lhs; a long K with few rows; one large
#: enough for tiles.
BYTE_SHAPES = [((5, 37), 7), ((2, 5, 37), 7), ((3, 1029), 13), ((64, 130), 41)]


@pytest.mark.parametrize("shapes", BYTE_SHAPES, ids=str)
@pytest.mark.parametrize("pair", BYTE_PAIRS, ids=_pair_id)
def test_products_of_8_bit_operands_match_the_integer_reference(device, require_dtype, pair,
                                                                 shapes):
    from burnish.conformance.reference import quantized_product

    lhs_scheme, rhs_scheme = pair
    require_dtype(lhs_scheme.scale_dtype, rhs_scheme.scale_dtype)
    x_shape, n = shapes
    k = x_shape[-1]
    x = sample(x_shape, float32, -2.0, 3.0, key=("byte lhs", x_shape))
    w = sample((k, n), float32, -1.0, 1.0, key=("byte rhs", k, n))
    qx = Tensor.from_data(x, device, float32).quantize(lhs_scheme)
    qw = Tensor.from_data(w, device, float32).quantize(rhs_scheme)
    expected = quantized_product(qx, qw).astype(np.float64)
    # Integer kernels give the exact sums; the protocol's default (dequantize, then a float32
    # product) rounds as any float32 product of K terms does.
    magnitude = np.abs(host(qx.dequantize())).astype(np.float64) @ np.abs(
        host(qw.dequantize())).astype(np.float64)
    atol = accumulated_atol(float32, magnitude)
    assert_close(qx @ qw, expected, float32, atol=atol)
    b = sample((n,), float32, key="byte bias")
    assert_close(qlinear(qx, qw, Tensor.from_data(b, device, float32)), expected + b, float32,
                 atol=atol)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_matches_dequantized_conv(device, groups):
    from burnish import functional as F

    x = sample((2, 4, 7, 7), float32, -2.0, 2.0, key="conv x")
    w = sample((6, 4 // groups, 3, 3), float32, -1.0, 1.0, key=f"conv w {groups}")
    b = sample((6,), float32, key="conv b")
    qw = Tensor.from_data(w, device, float32).quantize(QuantScheme(granularity=PerChannel(0)))
    dense = Tensor.from_data(host(qw.dequantize()), device, float32)
    bias = Tensor.from_data(b, device, float32)
    # A float input, then 8-bit ones (affine uint8 and symmetric int8: integer kernels pad
    # with the zero point).
    for scheme in (None, QuantScheme("uint8", mode="affine"), QuantScheme("int8")):
        inp = Tensor.from_data(x, device, float32)
        if scheme is not None:
            inp = inp.quantize(scheme)
        float_input = inp.dequantize() if scheme is not None else inp
        expected = host(F.conv2d(float_input, dense, bias, stride=2, padding=1,
                                 groups=groups)).astype(np.float64)
        got = qconv(inp, qw, bias, stride=2, padding=1, groups=groups)
        assert_close(got, expected, float32)


def test_quantized_ops_refuse_bad_operands(device):
    qw = Tensor.from_data(np.ones((8, 4), np.float32), device).quantize(QuantScheme())
    with pytest.raises(ShapeError, match=r"\[2, 6\] and \[8, 4\]"):
        Tensor.from_data(np.ones((2, 6), np.float32), device) @ qw
    with pytest.raises(ShapeError, match="bias"):
        qlinear(Tensor.from_data(np.ones((2, 8), np.float32), device), qw,
                Tensor.from_data(np.ones(3, np.float32), device))
    with pytest.raises(DTypeError, match="float or quantized"):
        Tensor.from_data(np.ones((2, 8), np.int32), device) @ qw


def test_gradients_flow_to_the_float_operand(backend, device, grad_dtype):
    if not isinstance(backend, AutodiffOps):
        pytest.skip(f"backend {backend.name!r} has no autodiff; run with --backend "
                    f"autodiff+{backend.name}")
    w = sample((8, 3), float32, -1.0, 1.0, key="grad w")
    qw = Tensor.from_data(w, device, float32).quantize(QuantScheme(granularity=PerChannel(1)))
    x = Tensor.from_data(sample((2, 8), float32, key="grad x"), device, float32).require_grad()
    grads = (qlinear(x, qw) * 2.0).sum().backward()
    expected = 2.0 * np.ones((2, 3)) @ host(qw.dequantize()).astype(np.float64).T
    assert_close(x.grad(grads), expected, float32)
