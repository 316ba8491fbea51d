"""Quantized products and quantization on cuda (burnish.cuda.quant_ops): which operands take
cuBLAS's int8 product and which are read in place (no GPU needed), then, on a GPU, the products
against NumPy's exact int64 sums on aligned and odd shapes, per tensor and per channel,
symmetric and affine, int8 and uint8, the fallbacks, and quantize against NumPy's integers.
The GPU tests skip without CuPy or a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.backend.quant_ops import QuantizedPrimitive
from burnish.conformance.reference import quantized_product
from burnish.cuda import quant_ops
from burnish.cuda.runtime import CudaRuntime
from burnish.dtype import float32, int8, uint8
from burnish.errors import UnsupportedError
from burnish.jit.tensor import JitTensor
from burnish.quantization import PerBlock, PerChannel, QuantScheme, linear
from burnish.tensor import core as _core

# -- dispatch, on stand-ins for device tensors -------------------------------------------------

_RUNTIME = object.__new__(CudaRuntime)  # what `takes` asks of a runtime is its type alone


def _values(shape, dtype=int8, strides=None, offset=0, runtime=_RUNTIME) -> JitTensor:
    return JitTensor(None, shape, dtype, None, runtime, strides, offset)  # type: ignore[arg-type]


def _quantized(shape, scheme=None, runtime=_RUNTIME) -> QuantizedPrimitive:
    scheme = scheme or QuantScheme()
    values = _values(shape, scheme.storage_dtype, runtime=runtime)
    return QuantizedPrimitive(values, _values(()), None, scheme, tuple(shape))


@pytest.mark.parametrize("lhs, rhs", [
    (_quantized((5, 7)), _quantized((7, 3))),
    (_quantized((2, 5, 7)), _quantized((7, 3), QuantScheme("uint8", PerChannel(1), "affine"))),
    (_quantized((5, 7), QuantScheme("uint8", PerChannel(0), "affine")),
     _quantized((7, 3), QuantScheme(granularity=PerChannel(-1)))),
    (_quantized((4, 5, 7), QuantScheme(granularity=PerChannel(-2))), _quantized((7, 3))),
])
def test_two_8_bit_operands_with_factoring_scales_take_cublas(lhs, rhs):
    assert quant_ops.takes(lhs, rhs)


@pytest.mark.parametrize("lhs, rhs, why", [
    (_quantized((5, 7), QuantScheme("int4")), _quantized((7, 3)), "int4"),
    (_quantized((5, 8), QuantScheme(granularity=PerBlock(4))), _quantized((8, 3)), "blocks"),
    (_quantized((5, 7), QuantScheme(granularity=PerChannel(1))), _quantized((7, 3)),
     "lhs scaled along K"),
    (_quantized((5, 7)), _quantized((7, 3), QuantScheme(granularity=PerChannel(0))),
     "rhs scaled along K"),
    (_quantized((2, 5, 7)), _quantized((2, 7, 3)), "batched rhs"),
    (_quantized((0, 7)), _quantized((7, 3)), "empty"),
    (_quantized((5, quant_ops.MAX_INNER + 1)), _quantized((quant_ops.MAX_INNER + 1, 3)),
     "inner dim past int32's exact sums"),
    (_quantized((5, 7)), _quantized((7, 3), runtime=object.__new__(CudaRuntime)),
     "another device"),
    (_quantized((5, 7), runtime=object()), _quantized((7, 3), runtime=object()),
     "not a cuda tensor"),
])
def test_other_operands_take_the_protocols_default(lhs, rhs, why):
    assert not quant_ops.takes(lhs, rhs), why
    assert not quant_ops.takes(_values((5, 7)), rhs), "a float operand"


def test_cublas_comes_first_and_burnish_jits_integer_kernels_next():
    from burnish.cuda.backend import CudaBackend
    from burnish.jit.backend.quant_ops import JitQuantOps

    order = CudaBackend.__mro__
    assert CudaBackend.quantized_matmul is quant_ops.CudaQuantOps.quantized_matmul
    # what CudaQuantOps leaves (products past MAX_PRODUCT) goes to the generated kernels
    assert order.index(quant_ops.CudaQuantOps) < order.index(JitQuantOps)


@pytest.mark.parametrize("schemes", [
    (QuantScheme(), QuantScheme(granularity=PerChannel(1))),
    (QuantScheme("uint8", mode="affine"), QuantScheme("int8", PerChannel(1), mode="affine")),
], ids=["symmetric", "affine"])
@pytest.mark.parametrize("shapes", [((7, 13), 13, 5), ((2, 37, 301), 301, 45)], ids=str)
def test_burnish_jits_integer_kernels_give_the_exact_sums_on_cuda(device, schemes, shapes):
    """What cuBLAS's path leaves (products past MAX_PRODUCT) runs on burnish.jit's generated
    kernels, ``__dp4a`` in CUDA C: called directly here, on small operands; then cuBLAS's path
    in the same runtime (the two paths' kernels once shared a cache key: whichever compiled
    first ran for both, and cuBLAS's products came out zero)."""
    from burnish.jit.kernels import quant as jit_quant

    x_shape, k, n = shapes
    rng = np.random.default_rng(7)
    qx = Tensor.from_data(rng.standard_normal(x_shape, dtype=np.float32) * 3, device).quantize(
        schemes[0])
    qw = Tensor.from_data(rng.standard_normal((k, n), dtype=np.float32), device).quantize(
        schemes[1])
    assert jit_quant.takes(qx.primitive, qw.primitive)
    prim = jit_quant.quantized_matmul(qx.primitive, qw.primitive, float32)
    got = _core.make(prim, device, float32).to_numpy()
    expected = quantized_product(qx, qw)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal((qx @ qw).to_numpy(), expected)


@pytest.mark.parametrize("shape, strides, offset, value, sums, expected", [
    ((8, 32), None, 0, "int8", False, True),
    ((8, 32), (48, 1), 16, "int8", False, True),  # rows of a wider, aligned buffer
    ((8, 30), None, 0, "int8", False, False),  # K not a multiple of 16
    ((8, 32), None, 8, "int8", False, False),  # start not 16-byte aligned
    ((8, 32), (40, 1), 0, "int8", False, False),  # rows not 16-byte aligned
    ((8, 32), (1, 8), 0, "int8", False, False),  # column-major
    ((8, 32), None, 0, "uint8", False, False),  # needs the shift to int8
    ((8, 32), None, 0, "int8", True, False),  # row sums wanted (an affine rhs)
])
def test_lhs_is_read_in_place_only_where_cublas_can(shape, strides, offset, value, sums,
                                                     expected):
    dtype = uint8 if value == "uint8" else int8
    a = _values(shape, dtype, strides, offset)
    assert quant_ops.direct(a, value, sums) is expected


def test_scales_travel_to_the_kernels_as_float32_bits():
    assert quant_ops._bits(1.0) == 0x3F800000
    assert quant_ops._bits(-128.0) == np.float32(-128.0).view(np.int32)
    assert quant_ops._round_up(1) == 16 and quant_ops._round_up(32) == 32


# -- on a GPU ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def device():
    try:
        backend = bn.backend("cuda")
        backend.devices()
    except UnsupportedError as error:
        pytest.skip(f"needs an NVIDIA GPU with CuPy ({error})")
    return backend.default_device()


SCHEMES = [
    (QuantScheme(), QuantScheme(granularity=PerChannel(1))),
    (QuantScheme("int8", PerChannel(0)), QuantScheme()),
    (QuantScheme("uint8", mode="affine"), QuantScheme("int8", PerChannel(1), mode="affine")),
    (QuantScheme("uint8"), QuantScheme("uint8", PerChannel(1), mode="affine")),
    (QuantScheme("int8", PerChannel(0), mode="affine", scale_dtype=bn.float16),
     QuantScheme("uint8", scale_dtype=bn.float16)),
]
#: (lhs shape, K, N): aligned (read in place), odd (padded), batched, a single row.
SHAPES = [((64, 128), 128, 96), ((7, 13), 13, 5), ((37, 1100), 1100, 45),
          ((2, 3, 70), 70, 33), ((1, 16), 16, 1)]


@pytest.mark.parametrize("schemes", SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_products_match_numpys_int64_sums_exactly(device, schemes, shapes, monkeypatch):
    calls = []
    epilogue = quant_ops._epilogue
    monkeypatch.setattr(quant_ops, "_epilogue",
                        lambda *args: (calls.append(1), epilogue(*args)))
    x_shape, k, n = shapes
    if len(x_shape) > 2 and isinstance(schemes[0].granularity, PerChannel):
        x_shape = x_shape[1:]  # a per-row scheme's scales follow the rows of one matrix
    rng = np.random.default_rng(3)
    x = Tensor.from_data(rng.standard_normal(x_shape, dtype=np.float32) * 3, device)
    w = Tensor.from_data(rng.standard_normal((k, n), dtype=np.float32), device)
    qx, qw = x.quantize(schemes[0]), w.quantize(schemes[1])
    expected = quantized_product(qx, qw)
    np.testing.assert_array_equal((qx @ qw).to_numpy(), expected)
    bias = Tensor.from_data(rng.standard_normal(n, dtype=np.float32), device)
    np.testing.assert_allclose(linear(qx, qw, bias).to_numpy(), expected + bias.to_numpy(),
                               rtol=1e-6, atol=1e-5)
    assert len(calls) == 2
    floats = qx.dequantize().to_numpy().astype(np.float64) @ \
        qw.dequantize().to_numpy().astype(np.float64)
    np.testing.assert_allclose(expected, floats, rtol=1e-4, atol=1e-5 * np.abs(floats).max())


def test_long_inner_dims_and_extreme_values_stay_exact(device):
    # every product -128 * -128: the largest sums int32 holds for this K
    k = 8192
    x = Tensor.from_data(np.full((3, k), -1.0, np.float32), device).quantize()
    w = Tensor.from_data(np.full((k, 20), -1.0, np.float32), device).quantize()
    assert int(x.int_values().to_numpy().min()) == -127
    np.testing.assert_array_equal((x @ w).to_numpy(), quantized_product(x, w))
    affine = QuantScheme("uint8", mode="affine")
    xa = Tensor.from_data(np.linspace(-1, 5, 3 * k, dtype=np.float32).reshape(3, k),
                          device).quantize(affine)
    np.testing.assert_array_equal((xa @ w).to_numpy(), quantized_product(xa, w))


def test_half_results_are_rounded_once_from_the_float32_values(device):
    rng = np.random.default_rng(4)
    x = Tensor.from_data(rng.standard_normal((9, 40), dtype=np.float32), device).quantize()
    w = Tensor.from_data(rng.standard_normal((40, 24), dtype=np.float32), device)
    qw = w.quantize(QuantScheme(granularity=PerChannel(1)))
    prim = x.backend.quantized_matmul(x.primitive, qw.primitive, bn.float16)
    got = _core.make(prim, device, bn.float16)
    assert got.dtype == bn.float16
    np.testing.assert_array_equal(got.to_numpy(),
                                  quantized_product(x, qw).astype(np.float16))


def test_weights_are_packed_once_per_buffer(device, monkeypatch):
    packs = []
    pack = quant_ops._pack
    monkeypatch.setattr(quant_ops, "_pack", lambda *args: (packs.append(args[1:4]),
                                                           pack(*args))[1])
    rng = np.random.default_rng(5)
    qw = Tensor.from_data(rng.standard_normal((64, 48), dtype=np.float32), device).quantize(
        QuantScheme(granularity=PerChannel(1)))
    for rows in (5, 16, 3):
        qx = Tensor.from_data(rng.standard_normal((rows, 64), dtype=np.float32),
                              device).quantize()
        np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))
    # the weights once ([48 -> 48 rows, 64 -> 64 columns]); the int8 aligned lhs never
    assert packs == [(48, 48, 64)]


def test_a_transposed_weight_view_is_packed_from_where_it_lies(device):
    rng = np.random.default_rng(6)
    w = Tensor.from_data(rng.standard_normal((24, 40), dtype=np.float32), device)
    qw = w.permute(1, 0).quantize(QuantScheme(granularity=PerChannel(1)))
    qx = Tensor.from_data(rng.standard_normal((6, 40), dtype=np.float32), device).quantize()
    np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))


def test_other_schemes_fall_back_to_the_default(device, monkeypatch):
    monkeypatch.setattr(quant_ops, "_epilogue", lambda *args: pytest.fail("int8 path used"))
    rng = np.random.default_rng(7)
    x = Tensor.from_data(rng.standard_normal((6, 32), dtype=np.float32), device)
    w = Tensor.from_data(rng.standard_normal((32, 10), dtype=np.float32), device)
    for lhs_scheme, rhs_scheme in [(QuantScheme(), QuantScheme("int4")),
                                   (QuantScheme(), QuantScheme(granularity=PerBlock(8, 0)))]:
        qx, qw = x.quantize(lhs_scheme), w.quantize(rhs_scheme)
        expected = qx.dequantize().to_numpy() @ qw.dequantize().to_numpy()
        np.testing.assert_allclose((qx @ qw).to_numpy(), expected, rtol=1e-5, atol=1e-5)
    qw = w.quantize(QuantScheme())
    np.testing.assert_allclose((x @ qw).to_numpy(), x.to_numpy() @ qw.dequantize().to_numpy(),
                               rtol=1e-5, atol=1e-5)


QUANTIZE_SCHEMES = [QuantScheme(), QuantScheme("uint8"), QuantScheme("uint8", mode="affine"),
                    QuantScheme("int8", PerChannel(1), mode="affine"),
                    QuantScheme("int8", PerChannel(0), scale_dtype=bn.float16)]


def _numpy_integers(x: np.ndarray, scales: np.ndarray, points, scheme, axis) -> np.ndarray:
    shape = [1] * x.ndim
    if axis is not None:
        shape[axis] = -1
    s = scales.astype(np.float32).reshape(shape if axis is not None else ())
    q = np.rint(x.astype(np.float32) / s)
    low, high = scheme.range
    if points is None:
        q = q + np.float32(scheme.symmetric_zero)
        low = scheme.symmetric_zero - scheme.symmetric_limit
        high = scheme.symmetric_zero + scheme.symmetric_limit
    else:
        q = q + points.astype(np.float32).reshape(shape if axis is not None else ())
    return np.clip(q, low, high).astype(scheme.storage_dtype.numpy)


@pytest.mark.parametrize("scheme", QUANTIZE_SCHEMES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_quantize_gives_numpys_integers_in_one_kernel(device, scheme, dtype, monkeypatch):
    launches = []
    launch = quant_ops._launch
    monkeypatch.setattr(quant_ops, "_launch",
                        lambda *args: (launches.append(args[2]), launch(*args)))
    rng = np.random.default_rng(8)
    data = (rng.standard_normal((33, 70)) * 4).astype(dtype)
    data[0, :4] = [0.5, 1.5, -2.5, 1000.0]  # ties to even, and a clamp
    x = Tensor.from_data(data, device)
    q = x.quantize(scheme)
    axis = 1 if isinstance(scheme.granularity, PerChannel) and scheme.granularity.axis == 1 \
        else (0 if isinstance(scheme.granularity, PerChannel) else None)
    points = None if q.zero_points is None else q.zero_points.to_numpy()
    np.testing.assert_array_equal(
        q.values.to_numpy(), _numpy_integers(data, q.scales.to_numpy(), points, scheme, axis))
    assert "quant_quantize" in launches
    if scheme.mode == "symmetric" and axis is None:
        # the scale from one kernel, without a read back to the host
        assert launches.count("quant_amax") == 1
        largest = np.float32(np.abs(data.astype(np.float32)).max())
        assert q.scales.to_numpy() == (largest / np.float32(127)).astype(
            scheme.scale_dtype.numpy)
    # a view is quantized as its elements
    view = x.permute(1, 0)[3:]
    expected = Tensor.from_data(view.to_numpy(), device).quantize(scheme)
    if axis is None or scheme.mode == "symmetric":
        np.testing.assert_array_equal(view.quantize(scheme).values.to_numpy(),
                                      expected.values.to_numpy())


def test_quantizing_zeros_gives_unit_scales(device):
    q = Tensor.from_data(np.zeros((4, 5), np.float32), device).quantize()
    assert q.scales.to_numpy() == np.float32(1.0)
    assert not q.values.to_numpy().any()


def test_the_result_is_float32_where_both_operands_are_quantized(device):
    x = Tensor.from_data(np.ones((2, 16), np.float32), device).quantize()
    assert (x @ x.dequantize().permute(1, 0).quantize()).dtype == float32
