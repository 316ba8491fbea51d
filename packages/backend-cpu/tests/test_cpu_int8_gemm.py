"""The int8 product kernel: exact integer sums (against NumPy's int64 product of the same
integers) scaled as NumPy scales them, on shapes that are not multiples of its blocks, inner
dims whose sums pass 2^24, every combination of int8/uint8, per-tensor/per-channel and
symmetric/affine operands; the compiled kernel of this CPU and the portable C loop; and
``qx @ qw`` and quantized linear layers on backend ``cpu`` going through it."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.conformance.reference import quantized_product
from burnish.cpu import int8_gemm, quant_ops
from burnish.cpu.compiler import Compiler
from burnish.cpu.int8_gemm import MC, MR, NR, Int8Gemm
from burnish.quantization import PerBlock, PerChannel, QuantScheme, linear

SHAPES = [(1, 1, 1), (MR + 1, 7, NR - 1), (MC + 3, 2050, NR + 5), (2 * MC, 4, 2 * NR),
          (5, 3001, 70), (130, 65, 257)]


def _ints(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _expected(a, b, za, zb, sa, sb) -> tuple[np.ndarray, int]:
    sums = (a.astype(np.int64) - za[:, None]) @ (b.astype(np.int64) - zb[None, :])
    assert np.abs(sums).max() < 2 ** 31
    return sums.astype(np.int32).astype(np.float32) * (sa[:, None] * sb[None, :]), \
        int(np.abs(sums).max())


@pytest.fixture(scope="module", params=["native", "avx2", "portable"])
def kernel(request) -> Int8Gemm:
    if request.param == "native":
        return Int8Gemm(Compiler())
    found = Int8Gemm(Compiler(), at_most=request.param)
    if request.param == "avx2" and found.path != "avx2":
        pytest.skip(f"the compiler does not target AVX2 here (the kernel is {found.path})")
    return found


def test_the_native_kernel_names_the_instructions_it_was_built_for():
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text() if cpuinfo.exists() else ""
    native = Int8Gemm(Compiler())
    if " avx512_vnni" in flags and " avx512bw" in flags:
        assert native.path == "avx512-vnni"
    elif " avx2" in flags:
        assert native.path == "avx2"
    else:
        assert native.path == "portable"
    assert Int8Gemm(Compiler(), at_most="portable").path == "portable"
    with pytest.raises(ValueError, match="at_most is 'avx2' or 'portable', got 'sse'"):
        Int8Gemm(Compiler(), at_most="sse")


def test_products_are_exact_on_odd_shapes_and_long_inner_dims(kernel):
    rng = np.random.default_rng(0)
    largest = 0
    for (m, k, n), a_type, b_type, extreme in itertools.product(
            SHAPES, (np.int8, np.uint8), (np.int8, np.uint8), (False, True)):
        a, b = _ints(rng, a_type, (m, k)), _ints(rng, b_type, (k, n))
        if extreme:  # the values' ends, mostly: sums far from zero
            a = np.where(rng.random((m, k)) < 0.9, np.iinfo(a_type).min, a).astype(a_type)
            b = np.where(rng.random((k, n)) < 0.9, np.iinfo(b_type).min, b).astype(b_type)
        za = rng.integers(0, 40, m).astype(np.int32)
        zb = rng.integers(-20, 20, n).astype(np.int32) if b_type == np.int8 else \
            rng.integers(100, 160, n).astype(np.int32)
        sa = rng.uniform(0.01, 1, m).astype(np.float32)
        sb = rng.uniform(0.01, 1, n).astype(np.float32)
        out = np.full((m, n), np.nan, np.float32)
        kernel.product(a, kernel.pack(b), b_type == np.int8, za, zb, sa, sb, out)
        expected, biggest = _expected(a, b, za, zb, sa, sb)
        largest = max(largest, biggest)
        np.testing.assert_array_equal(out, expected, err_msg=f"{m}x{k}x{n} {a_type} {b_type}")
    assert largest > 2 ** 24  # sums float32 could not hold exactly


def test_products_read_any_strides_and_write_rows_of_a_wider_output(kernel):
    rng = np.random.default_rng(1)
    a = _ints(rng, np.int8, (40, 90))[::2, ::3]            # [20, 30], strided
    b = np.asfortranarray(_ints(rng, np.int8, (30, 45)))   # column-major
    zeros = np.zeros(45, np.int32)
    ones = np.ones(45, np.float32)
    wide = np.zeros((20, 50), np.float32)
    kernel.product(a, kernel.pack(b), True, zeros[:20], zeros, ones[:20], ones, wide[:, :45])
    expected, _ = _expected(a, b, zeros[:20], zeros, ones[:20], ones)
    np.testing.assert_array_equal(wide[:, :45], expected)
    assert not wide[:, 45:].any()


def test_an_inner_dim_past_the_int32_bound_is_refused(kernel):
    a = np.zeros((1, int8_gemm.MAX_INNER + 1), np.int8)
    b = np.zeros((int8_gemm.MAX_INNER + 1, 1), np.int8)
    one = np.ones(1, np.float32)
    zero = np.zeros(1, np.int32)
    with pytest.raises(ValueError, match="inner dim 32769 is longer than the kernel's 32768"):
        kernel.product(a, kernel.pack(b), True, zero, zero, one, one, np.empty((1, 1),
                                                                           np.float32))


SCHEMES = [
    (QuantScheme(), QuantScheme(granularity=PerChannel(1))),
    (QuantScheme("int8", PerChannel(0)), QuantScheme()),
    (QuantScheme("uint8", mode="affine"), QuantScheme("int8", PerChannel(1), mode="affine")),
    (QuantScheme("uint8"), QuantScheme("uint8", PerChannel(1), mode="affine")),
    (QuantScheme("int8", mode="affine", scale_dtype=burnish.float16),
     QuantScheme("uint8", scale_dtype=burnish.float16)),
]


@pytest.mark.parametrize("backend_name", ["cpu", "autodiff+cpu"])
@pytest.mark.parametrize("schemes", SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}")
def test_quantized_products_on_cpu_run_the_kernel_exactly(cpu, backend_name, schemes,
                                                          monkeypatch):
    calls = []
    monkeypatch.setattr(quant_ops, "_product",
                        lambda *args: (calls.append(1), _product(*args)))
    device = burnish.backend(backend_name).default_device()
    rng = np.random.default_rng(2)
    for x_shape, (k, n) in [((37, 1100), (1100, 45)), ((2, 3, 70), (70, 33))]:
        if len(x_shape) > 2 and isinstance(schemes[0].granularity, PerChannel):
            x_shape = x_shape[1:]  # a per-row scheme's scales follow the rows of one matrix
        x = Tensor.from_data(rng.standard_normal(x_shape, dtype=np.float32) * 3, device)
        w = Tensor.from_data(rng.standard_normal((k, n), dtype=np.float32), device)
        qx, qw = x.quantize(schemes[0]), w.quantize(schemes[1])
        expected = quantized_product(qx, qw)
        before = len(calls)
        np.testing.assert_array_equal((qx @ qw).to_numpy(), expected)
        bias = Tensor.from_data(rng.standard_normal(n, dtype=np.float32), device)
        np.testing.assert_allclose(linear(qx, qw, bias).to_numpy(), expected + bias.to_numpy(),
                                   rtol=1e-6, atol=1e-5)
        assert len(calls) == before + 2
        # the dequantized operands' float product agrees to float32's precision
        floats = qx.dequantize().to_numpy().astype(np.float64) @ \
            qw.dequantize().to_numpy().astype(np.float64)
        np.testing.assert_allclose(expected, floats, rtol=1e-4,
                                   atol=1e-5 * np.abs(floats).max())


_product = quant_ops._product


def test_weights_are_packed_once_per_buffer(cpu, monkeypatch):
    device = cpu.default_device()
    packs = []
    gemm = device.backend.runtime(device).int8_gemm
    original = gemm.pack
    monkeypatch.setattr(gemm, "pack", lambda b: (packs.append(b.shape), original(b))[1])
    rng = np.random.default_rng(3)
    qw = Tensor.from_data(rng.standard_normal((64, 48), dtype=np.float32), device).quantize(
        QuantScheme(granularity=PerChannel(1)))
    for _ in range(3):
        qx = Tensor.from_data(rng.standard_normal((5, 64), dtype=np.float32), device).quantize()
        qx @ qw
    assert packs == [(64, 48)]
    qx @ qw.transpose().transpose()  # the same buffer, seen through another layout: same bytes
    assert len(packs) <= 2


def test_inner_dims_past_the_kernels_run_burnish_jits_integer_kernels(cpu, monkeypatch):
    from burnish.cpu.backend import CpuBackend
    from burnish.jit.backend.quant_ops import JitQuantOps
    from burnish.jit.kernels import quant

    assert CpuBackend.quantized_matmul is quant_ops.CpuQuantOps.quantized_matmul
    assert CpuBackend.__mro__.index(quant_ops.CpuQuantOps) < \
        CpuBackend.__mro__.index(JitQuantOps)

    monkeypatch.setattr(quant_ops, "_product", lambda *args: pytest.fail("int8_gemm used"))
    calls = []
    run = quant.quantized_matmul
    monkeypatch.setattr(quant, "quantized_matmul", lambda *args: (calls.append(1), run(*args))[1])
    device = cpu.default_device()
    rng = np.random.default_rng(9)
    k = int8_gemm.MAX_INNER + 3  # within burnish.jit's bound with one affine operand
    x = Tensor.from_data(rng.standard_normal((3, k), dtype=np.float32), device)
    w = Tensor.from_data(rng.standard_normal((k, 5), dtype=np.float32), device)
    qx = x.quantize(QuantScheme("uint8", mode="affine"))
    qw = w.quantize(QuantScheme(granularity=PerChannel(1)))
    np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))
    assert calls == [1]


@pytest.mark.parametrize("schemes", [
    (QuantScheme("int4"), QuantScheme()),
    (QuantScheme(), QuantScheme("int8", PerBlock(16, axis=0))),
])
def test_other_schemes_take_the_protocols_default(cpu, schemes, monkeypatch):
    monkeypatch.setattr(quant_ops, "_product", lambda *args: pytest.fail("kernel used"))
    device = cpu.default_device()
    rng = np.random.default_rng(4)
    x = Tensor.from_data(rng.standard_normal((6, 32), dtype=np.float32), device)
    w = Tensor.from_data(rng.standard_normal((32, 8), dtype=np.float32), device)
    qx, qw = x.quantize(schemes[0]), w.quantize(schemes[1])
    expected = qx.dequantize().to_numpy() @ qw.dequantize().to_numpy()
    np.testing.assert_allclose((qx @ qw).to_numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((x @ qw).to_numpy(), x.to_numpy() @ qw.dequantize().to_numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scheme", [
    QuantScheme(), QuantScheme("uint8"), QuantScheme("uint8", mode="affine"),
    QuantScheme("int8", PerChannel(1), mode="affine"), QuantScheme("int8", PerChannel(0)),
    QuantScheme("uint8", PerChannel(2), scale_dtype=burnish.float16),
], ids=str)
def test_quantizing_on_cpu_gives_ndarrays_integers_in_one_pass(cpu, scheme, monkeypatch):
    calls = []
    monkeypatch.setattr(quant_ops, "_quantize", lambda *args: (calls.append(1), _quantize(*args)))
    rng = np.random.default_rng(5)
    data = rng.standard_normal((6, 40, 7), dtype=np.float32) * 4
    data[0, 0, :] = [0.5, 1.5, 2.5, -0.5, -1.5, 0.0, 3.0]  # halves round to even
    reference = Tensor.from_data(data, burnish.backend("ndarray").default_device())
    shape = data.shape if isinstance(scheme.granularity, PerChannel) and \
        scheme.granularity.axis == 2 else (6, 280)
    expected = reference.reshape(shape).quantize(scheme)
    scales = Tensor.from_data(expected.scales.to_numpy(), cpu.default_device())
    points = None if expected.zero_points is None else \
        Tensor.from_data(expected.zero_points.to_numpy(), cpu.default_device())
    x = Tensor.from_data(data, cpu.default_device()).reshape(shape)
    computed = x.quantize(scheme)
    given = x.quantize(scheme, scales=scales, zero_points=points)
    assert len(calls) == 2
    for q in (computed, given):
        assert q.values.dtype is scheme.storage_dtype
        np.testing.assert_array_equal(q.values.to_numpy(), expected.values.to_numpy())
    np.testing.assert_array_equal(computed.scales.to_numpy(), expected.scales.to_numpy())
    # a view (transposed, strided) is quantized as its elements
    view = x.reshape((6, 280)).transpose()[::3] if len(shape) == 2 else None
    if view is not None and not isinstance(scheme.granularity, PerChannel):
        np.testing.assert_array_equal(
            view.quantize(scheme).values.to_numpy(),
            Tensor.from_data(view.to_numpy(), reference.device).quantize(scheme).values.to_numpy())


_quantize = quant_ops._quantize


def test_a_quantized_linear_layer_on_cpu_runs_the_kernels_as_ndarray_computes_it(cpu,
                                                                               monkeypatch):
    from burnish import nn
    from burnish.nn.quant import Quantizer

    calls = []
    monkeypatch.setattr(quant_ops, "_product", lambda *args: (calls.append(1), _product(*args)))
    rng = np.random.default_rng(6)
    batches = [rng.standard_normal((16, 96), dtype=np.float32) for _ in range(2)]
    float_layer = nn.LinearConfig(96, 40).init(burnish.backend("ndarray").default_device())
    results = {}
    for name in ("ndarray", "cpu"):
        device = burnish.backend(name).default_device()
        layer = float_layer.to_device(device)
        quantized = Quantizer(QuantScheme("int8", PerChannel()),
                              activations=QuantScheme("uint8", mode="affine")).quantize(
            layer, [Tensor.from_data(b, device) for b in batches])
        results[name] = quantized(Tensor.from_data(batches[0][:5], device)).to_numpy()
    assert calls  # the cpu layer's product
    np.testing.assert_allclose(results["cpu"], results["ndarray"], rtol=1e-5, atol=1e-5)


def test_views_of_quantized_operands_run_the_kernel_exactly(cpu, monkeypatch):
    calls = []
    monkeypatch.setattr(quant_ops, "_product", lambda *args: (calls.append(1), _product(*args)))
    device = cpu.default_device()
    rng = np.random.default_rng(7)
    # weights stored [N, K] per row, used transposed; activations a narrowed transpose
    qw = Tensor.from_data(rng.standard_normal((9, 50), dtype=np.float32), device).quantize(
        QuantScheme("int8", PerChannel(0))).transpose()
    qx = Tensor.from_data(rng.standard_normal((50, 14), dtype=np.float32), device).quantize(
        QuantScheme("uint8", mode="affine")).transpose().narrow(0, 3, 9)
    np.testing.assert_array_equal((qx @ qw).to_numpy(), quantized_product(qx, qw))
    assert calls == [1]


CONV_SCHEMES = [
    (QuantScheme("uint8", mode="affine"), QuantScheme("int8", PerChannel(0))),
    (QuantScheme(), QuantScheme()),
    (QuantScheme("int8", mode="affine"), QuantScheme("uint8", PerChannel(0), mode="affine")),
    (QuantScheme("uint8"), QuantScheme("int8", PerChannel(0), mode="affine")),
]


@pytest.mark.parametrize("schemes", CONV_SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("window", [
    dict(stride=1, padding=1, dilation=1), dict(stride=2, padding=(0, 2), dilation=1),
    dict(stride=(1, 2), padding=2, dilation=2)], ids=["same", "strided", "dilated"])
def test_quantized_convolutions_run_the_kernel_on_the_patches(cpu, schemes, window,
                                                               monkeypatch):
    """Against the convolution of the dequantized operands (float64): the patches of the
    integers padded with the input's zero point (a real zero), one integer product."""
    from burnish.quantization import conv

    calls = []
    monkeypatch.setattr(quant_ops, "_conv_products",
                        lambda *args: (calls.append(1), _conv_products(*args)))
    device = cpu.default_device()
    rng = np.random.default_rng(5)
    x = Tensor.from_data(rng.standard_normal((2, 3, 9, 8), dtype=np.float32) + 0.5, device)
    w = Tensor.from_data(rng.standard_normal((5, 3, 3, 3), dtype=np.float32), device)
    bias = Tensor.from_data(rng.standard_normal(5, dtype=np.float32), device)
    qx, qw = x.quantize(schemes[0]), w.quantize(schemes[1])
    got = conv(qx, qw, bias, **window).to_numpy()
    assert calls == [1]
    reference = burnish.functional.conv(
        Tensor.from_data(qx.dequantize().to_numpy().astype(np.float64)),
        Tensor.from_data(qw.dequantize().to_numpy().astype(np.float64)),
        Tensor.from_data(bias.to_numpy().astype(np.float64)), **window).to_numpy()
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5 * np.abs(reference).max())


_conv_products = quant_ops._conv_products


def test_grouped_convolutions_take_the_default(cpu, monkeypatch):
    from burnish.quantization import conv

    monkeypatch.setattr(quant_ops, "_conv_products", lambda *args: pytest.fail("kernel used"))
    device = cpu.default_device()
    rng = np.random.default_rng(6)
    x = Tensor.from_data(rng.standard_normal((1, 4, 6, 6), dtype=np.float32), device)
    w = Tensor.from_data(rng.standard_normal((4, 2, 3, 3), dtype=np.float32), device)
    qx, qw = x.quantize(), w.quantize(QuantScheme(granularity=PerChannel(0)))
    expected = burnish.functional.conv(qx.dequantize(), qw.dequantize(), groups=2).to_numpy()
    np.testing.assert_allclose(conv(qx, qw, groups=2).to_numpy(), expected, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("scheme", [
    QuantScheme(), QuantScheme("uint8", mode="affine"), QuantScheme("uint8"),
    QuantScheme("int8", PerChannel(1), mode="affine", scale_dtype=burnish.float16)],
    ids=str)
def test_dequantizing_on_cpu_gives_ndarrays_floats_in_one_pass(cpu, scheme, monkeypatch):
    calls = []
    monkeypatch.setattr(quant_ops, "_dequantize",
                        lambda *args: (calls.append(1), _dequantize(*args)))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5, 70), dtype=np.float32) * 4
    q = Tensor.from_data(x, "ndarray").quantize(scheme)
    on_cpu = Tensor.from_data(x, cpu.default_device()).quantize(scheme)
    np.testing.assert_array_equal(on_cpu.int_values().to_numpy(), q.int_values().to_numpy())
    np.testing.assert_array_equal(on_cpu.dequantize().to_numpy(), q.dequantize().to_numpy())
    assert calls == [1]


_dequantize = quant_ops._dequantize
