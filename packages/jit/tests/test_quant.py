"""Quantized products on integers (burnish.jit.kernels.quant): which operands take the integer
kernels (on stand-ins, no device needed), then on each GPU backend the products against
NumPy's exact int64 sums for int8 and uint8, symmetric and affine, per tensor and per channel,
on odd and batched shapes, through every kernel (plain, split, each tile shape), at the
inner-dim bound, with float16 results, weights packed once, and the fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.backend.quant_ops import QuantizedPrimitive
from burnish.conformance.reference import quantized_product
from burnish.dtype import int8, uint8
from burnish.jit import autotune
from burnish.jit.kernels import matmul as matmul_kernels
from burnish.jit.kernels import quant
from burnish.jit.tensor import JitTensor
from burnish.quantization import PerBlock, PerChannel, QuantScheme, linear
from burnish.tensor import core as _core

# -- dispatch, on stand-ins for device tensors -------------------------------------------------


class _Runtime:
    """What ``quant.takes`` asks of a runtime: how many buffers a kernel binds."""

    def __init__(self, max_buffers: int = 30):
        self.max_buffers = max_buffers


_RUNTIME = _Runtime()


def _values(shape, dtype=int8, runtime=_RUNTIME) -> JitTensor:
    return JitTensor(None, shape, dtype, None, runtime)  # type: ignore[arg-type]


def _quantized(shape, scheme=None, runtime=_RUNTIME) -> QuantizedPrimitive:
    scheme = scheme or QuantScheme()
    values = _values(shape, scheme.storage_dtype, runtime)
    points = _values((), scheme.zero_point_dtype, runtime) if scheme.mode == "affine" else None
    return QuantizedPrimitive(values, _values(()), points, scheme, tuple(shape))


AFFINE = QuantScheme("uint8", mode="affine")
LIMIT = (2**31 - 1) // (255 * 255)  # both operands affine


@pytest.mark.parametrize("lhs, rhs", [
    (_quantized((5, 7)), _quantized((7, 3))),
    (_quantized((2, 5, 7)), _quantized((7, 3), QuantScheme("uint8", PerChannel(1), "affine"))),
    (_quantized((5, 7), QuantScheme("uint8", PerChannel(0), "affine")),
     _quantized((7, 3), QuantScheme(granularity=PerChannel(-1)))),
    (_quantized((4, 5, 7), QuantScheme(granularity=PerChannel(-2))), _quantized((7, 3))),
    (_quantized((5, quant.MAX_INNER)), _quantized((quant.MAX_INNER, 3))),
    (_quantized((5, LIMIT), AFFINE), _quantized((LIMIT, 3), AFFINE)),
])
def test_two_8_bit_operands_with_factoring_scales_take_the_integer_kernels(lhs, rhs):
    assert quant.takes(lhs, rhs)


@pytest.mark.parametrize("lhs, rhs, why", [
    (_quantized((5, 7), QuantScheme("int4")), _quantized((7, 3)), "int4"),
    (_quantized((5, 8), QuantScheme(granularity=PerBlock(4))), _quantized((8, 3)), "blocks"),
    (_quantized((5, 7), QuantScheme(granularity=PerChannel(1))), _quantized((7, 3)),
     "lhs scaled along K"),
    (_quantized((5, 7)), _quantized((7, 3), QuantScheme(granularity=PerChannel(0))),
     "rhs scaled along K"),
    (_quantized((2, 5, 7)), _quantized((2, 7, 3)), "batched rhs"),
    (_quantized((0, 7)), _quantized((7, 3)), "empty"),
    (_quantized((5, quant.MAX_INNER + 1)), _quantized((quant.MAX_INNER + 1, 3)),
     "inner dim past int32's exact sums"),
    (_quantized((5, LIMIT + 1), AFFINE), _quantized((LIMIT + 1, 3), AFFINE),
     "zero points: the result could pass int32"),
    (_quantized((5, 7)), _quantized((7, 3), runtime=_Runtime()), "another device"),
    (_quantized((5, 7), runtime=_Runtime(6)), _quantized((7, 3), runtime=_Runtime(6)),
     "a runtime binding too few buffers"),
])
def test_other_operands_take_the_protocols_default(lhs, rhs, why):
    assert not quant.takes(lhs, rhs), why
    assert not quant.takes(_values((5, 7)), rhs), "a float operand"


def test_the_inner_bound_keeps_every_result_within_int32():
    symmetric, affine = _quantized((2, 2)), _quantized((2, 2), AFFINE)
    assert quant.inner_limit(symmetric, symmetric) == quant.MAX_INNER == 131071
    assert quant.inner_limit(affine, symmetric) == (2**31 - 1) // (255 * 128)
    assert quant.inner_limit(affine, affine) * 255 * 255 < 2**31


# -- on a device -------------------------------------------------------------------------------


@pytest.fixture
def counted(monkeypatch):
    """The integer products run (a list that grows by one per product)."""
    calls: list[int] = []
    run = quant.quantized_matmul
    monkeypatch.setattr(quant, "quantized_matmul",
                        lambda *args: (calls.append(1), run(*args))[1])
    return calls


SCHEMES = [
    (QuantScheme(), QuantScheme(granularity=PerChannel(1))),
    (QuantScheme("int8", PerChannel(0)), QuantScheme()),
    (QuantScheme("uint8", mode="affine"), QuantScheme("int8", PerChannel(1), mode="affine")),
    (QuantScheme("uint8"), QuantScheme("uint8", PerChannel(1), mode="affine")),
    (QuantScheme("int8", PerChannel(0), mode="affine", scale_dtype=bn.float16),
     QuantScheme("uint8", scale_dtype=bn.float16)),
]
#: (lhs shape, K, N): plain kernel, odd sizes, batched, one row and one column, the split
#: kernel (few rows, long K), tiles.
SHAPES = [((7, 13), 13, 5), ((2, 3, 70), 70, 33), ((1, 16), 16, 1), ((3, 1030), 1030, 7),
          ((37, 301), 301, 45)]


def _operands(device, schemes, x_shape, k, n, seed=3):
    if len(x_shape) > 2 and isinstance(schemes[0].granularity, PerChannel):
        x_shape = x_shape[1:]  # a per-row scheme's scales follow the rows of one matrix
    rng = np.random.default_rng(seed)
    x = Tensor.from_data(rng.standard_normal(x_shape, dtype=np.float32) * 3, device)
    w = Tensor.from_data(rng.standard_normal((k, n), dtype=np.float32), device)
    return x.quantize(schemes[0]), w.quantize(schemes[1])


@pytest.mark.parametrize("schemes", SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_products_match_numpys_int64_sums_exactly(jit_backend, schemes, shapes, counted):
    device = jit_backend.default_device()
    qx, qw = _operands(device, schemes, *shapes)
    expected = quantized_product(qx, qw)
    np.testing.assert_array_equal((qx @ qw).to_numpy(), expected)
    rng = np.random.default_rng(4)
    bias = Tensor.from_data(rng.standard_normal(shapes[2], dtype=np.float32), device)
    np.testing.assert_allclose(linear(qx, qw, bias).to_numpy(), expected + bias.to_numpy(),
                               rtol=1e-6, atol=1e-5)
    assert len(counted) == 2


@pytest.mark.parametrize("tiling", [t.name for t in matmul_kernels.TILINGS])
def test_every_tile_shape_gives_the_exact_sums(jit_backend, tiling, counted, monkeypatch):
    monkeypatch.setattr(autotune, "choose", lambda device, key, candidates, run, sync: tiling)
    device = jit_backend.default_device()
    # M, K, N cut tiles along every dim, K not a multiple of 4 nor of a tile's words.
    qx, qw = _operands(device, SCHEMES[2], (131, 150), 150, 70)
    np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))
    assert counted


def test_sums_at_the_inner_bound_stay_exact(jit_backend, counted):
    device = jit_backend.default_device()
    # Every product -127 * -127: the largest symmetric sums for this K.
    k = 8192
    x = Tensor.from_data(np.full((3, k), -1.0, np.float32), device).quantize()
    w = Tensor.from_data(np.full((k, 20), -1.0, np.float32), device).quantize()
    np.testing.assert_array_equal((x @ w).to_numpy(), quantized_product(x, w))
    # Both affine at the bound: every centred term 255 * -255, the result -65025 * K, while the
    # corrections' terms pass int32's range.
    k = LIMIT
    ones = Tensor.from_data(np.ones((), np.float32), device)
    zero = Tensor.from_data(np.zeros((), np.uint8), device, uint8)
    top = Tensor.from_data(np.full((), 255, np.uint8), device, uint8)
    xa = Tensor.from_data(np.full((2, k), 255.0, np.float32), device).quantize(
        AFFINE, scales=ones, zero_points=zero)
    wa = Tensor.from_data(np.full((k, 3), -255.0, np.float32), device).quantize(
        AFFINE, scales=ones, zero_points=top)
    expected = quantized_product(xa, wa)
    assert expected[0, 0] == np.float32(-65025 * k)
    np.testing.assert_array_equal((xa @ wa).to_numpy(), expected)
    # One affine operand at its bound: the first two terms' sum passes int32's range.
    k = quant.inner_limit(_quantized((1, 1), AFFINE), _quantized((1, 1)))
    xs = Tensor.from_data(np.full((2, k), 255.0, np.float32), device).quantize(
        AFFINE, scales=ones, zero_points=zero)
    ws = Tensor.from_data(np.full((k, 3), 127.0, np.float32), device).quantize(
        QuantScheme(), scales=ones)
    expected = quantized_product(xs, ws)
    assert expected[0, 0] == np.float32(255 * 127 * k)
    np.testing.assert_array_equal((xs @ ws).to_numpy(), expected)
    assert len(counted) == 3


def test_half_results_are_rounded_once_from_the_float32_values(jit_backend, require_f16):
    device = jit_backend.default_device()
    qx, qw = _operands(device, SCHEMES[0], (9, 40), 40, 24, seed=4)
    prim = jit_backend.quantized_matmul(qx.primitive, qw.primitive, bn.float16)
    got = _core.make(prim, device, bn.float16)
    assert got.dtype == bn.float16
    np.testing.assert_array_equal(got.to_numpy(), quantized_product(qx, qw).astype(np.float16))


@pytest.fixture
def require_f16(jit_backend):
    if bn.float16 not in jit_backend.dtypes(jit_backend.default_device()):
        pytest.skip(f"{jit_backend.name}'s device has no float16")


def test_weights_are_packed_once_per_buffer(jit_backend, monkeypatch):
    packs = []
    pack = quant.pack
    monkeypatch.setattr(quant, "pack", lambda src, shift, sums: (
        packs.append((src.shape, sums)), pack(src, shift, sums))[1])
    device = jit_backend.default_device()
    rng = np.random.default_rng(5)
    qw = Tensor.from_data(rng.standard_normal((64, 48), dtype=np.float32), device).quantize(
        QuantScheme("uint8", PerChannel(1), "affine"))
    for rows in (5, 16, 3):
        qx = Tensor.from_data(rng.standard_normal((rows, 64), dtype=np.float32),
                              device).quantize()
        np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))
    # the weights once (their 48 columns, with sums), each lhs (with sums: qw has zero points)
    assert packs == [((48, 64), True), ((5, 64), True), ((16, 64), True), ((3, 64), True)]


def test_int8_rows_of_whole_words_are_read_where_they_lie(jit_backend, monkeypatch):
    packs = []
    pack = quant.pack
    monkeypatch.setattr(quant, "pack", lambda src, shift, sums: (
        packs.append(src.shape), pack(src, shift, sums))[1])
    device = jit_backend.default_device()
    byte_words = jit_backend.runtime(device).byte_words
    assert byte_words is (jit_backend.name == "rocm")  # PoCL and GPUs: little-endian bytes
    rng = np.random.default_rng(8)
    qw = Tensor.from_data(rng.standard_normal((40, 9), dtype=np.float32), device).quantize(
        QuantScheme(granularity=PerChannel(1)))
    x = Tensor.from_data(rng.standard_normal((2, 6, 40), dtype=np.float32), device).quantize()
    (x @ qw).to_numpy()  # packs qw, once, before the counting starts
    cases = [
        (x, True),  # batched, contiguous
        (x.narrow(1, 2, 3), True),  # rows starting at a whole word
        (x.narrow(2, 0, 40).transpose(1, 2).transpose(1, 2), True),  # the same layout
        (x.narrow(2, 0, 40).narrow(1, 1, 4), True),
        (x.transpose(1, 2).transpose(1, 2).narrow(0, 1, 1), True),
    ]
    z = Tensor.from_data(rng.standard_normal((6, 48), dtype=np.float32), device).quantize()
    cases += [(z.narrow(1, 0, 40).narrow(0, 2, 3), True),  # rows 48 bytes apart, from row 2
              (z.narrow(1, 8, 40), True)]  # from byte 8 of each row
    y = Tensor.from_data(rng.standard_normal((5, 42), dtype=np.float32), device).quantize()
    cases += [(y.narrow(1, 1, 40), False),  # rows starting inside a word
              (y.narrow(1, 0, 40), False)]  # rows 42 bytes apart
    for qx, in_place in cases:
        packs.clear()
        np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))
        assert (packs == []) is (in_place and byte_words), (qx.shape, packs)
    # uint8 needs the shift, an affine rhs the rows' sums: packed
    for qx, rhs in [(x.dequantize().quantize(QuantScheme("uint8")), qw),
                    (x, qw.dequantize().quantize(AFFINE))]:
        packs.clear()
        np.testing.assert_array_equal((qx @ rhs).to_numpy(), quantized_product(qx, rhs))
        assert (6, 40) in packs or (12, 40) in packs


def test_views_are_packed_from_where_they_lie(jit_backend, counted):
    device = jit_backend.default_device()
    rng = np.random.default_rng(6)
    w = Tensor.from_data(rng.standard_normal((24, 41), dtype=np.float32), device)
    qw = w.quantize(QuantScheme(granularity=PerChannel(0))).permute((1, 0))
    x = Tensor.from_data(rng.standard_normal((3, 41, 6), dtype=np.float32), device)
    qx = x.quantize(QuantScheme("uint8", mode="affine")).permute((0, 2, 1))
    assert not qw.primitive.values.is_contiguous() and not qx.primitive.values.is_contiguous()
    np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))
    assert counted


def test_other_schemes_fall_back_to_the_default(jit_backend, monkeypatch):
    monkeypatch.setattr(quant, "quantized_matmul",
                        lambda *args: pytest.fail("integer path used"))
    device = jit_backend.default_device()
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


def test_the_generated_kernels_multiply_words_as_four_bytes(jit_backend):
    device = jit_backend.default_device()
    qx, qw = _operands(device, SCHEMES[2], (4, 9), 9, 5)
    (qx @ qw).to_numpy()
    runtime = jit_backend.runtime(device)
    keys = [key for key in runtime._kernels if isinstance(key, tuple) and key[0] ==
            "int8_words_matmul"]
    assert keys
    source = runtime.source_of(keys[-1])
    assert ("dot4I8Packed" if runtime.generator.language == "wgsl" else "dot4i8(") in source
