"""Products and convolutions on NumPy's BLAS from burnish's threads: every layout BLAS
takes (and those it does not, which fall back), batches split across the threads, weight
gradients summed over the batch, and convolutions of 1 to 3 spatial dims against ndarray."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.cpu import blas
from burnish.cpu.blas import Gemm
from burnish.cpu.compiler import Compiler
from burnish.cpu.conv import NativeConv
from burnish.cpu.pool import NativePool


@pytest.fixture(scope="module")
def gemm() -> Gemm:
    found = Gemm(Compiler(), threads=2)
    if not found.available:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    return found


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_in_every_layout_blas_takes_match_float64(gemm, dtype, monkeypatch):
    monkeypatch.setattr(blas, "MIN_SPLIT_MACS", 0)  # every product split: through the C loop
    blas._plan.cache_clear()
    rng = np.random.default_rng(0)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for (m, k, n), ta, tb, batch in itertools.product(
            [(1, 1, 1), (3, 5, 7), (64, 288, 576), (257, 129, 3), (2, 600, 900), (0, 3, 4),
             (3, 0, 4)], (0, 1), (0, 1), [(), (3,), (2, 1)]):
        stored = rng.standard_normal((*batch, k, m) if ta else (*batch, m, k)).astype(dtype)
        a = stored.swapaxes(-1, -2) if ta else stored
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        b = b.T if tb else b
        out = np.full((*batch, m, n), np.nan, dtype)
        with gemm.guard:
            assert gemm.product(a, b, out) or (m * n == 1 and not batch)  # nothing to split
        if m * n == 1 and not batch:
            np.matmul(a, b, out=out)
        expected = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * max(1, k),
                                   err_msg=f"{(m, k, n)} ta={ta} tb={tb} batch={batch}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_with_a_bias_set_by_the_threads_match_float64(gemm, dtype, monkeypatch):
    """``product(..., bias=)``: each task sets its block to the bias before adding its product
    (every split, batch and layout); a bias it cannot take is refused, not misread."""
    rng = np.random.default_rng(2)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for split, ((m, k, n), ta, batch) in itertools.product(
            (0, None), [((3, 5, 7), 0, ()), ((64, 288, 576), 1, (3,)), ((257, 129, 3), 0, (2,)),
                        ((2, 600, 900), 1, ()), ((3, 0, 4), 0, ()), ((1, 4, 4), 0, ())]):
        if split is not None:  # every product split: each part its own block of the bias
            monkeypatch.setattr(blas, "MIN_SPLIT_MACS", split)
        else:
            monkeypatch.undo()
        blas._plan.cache_clear()
        stored = rng.standard_normal((*batch, k, m) if ta else (*batch, m, k)).astype(dtype)
        a = stored.swapaxes(-1, -2) if ta else stored
        b = rng.standard_normal((k, n)).astype(dtype)
        bias = rng.standard_normal(n).astype(dtype)
        out = np.full((*batch, m, n), np.nan, dtype)
        with gemm.guard:
            taken = gemm.product(a, b, out, bias=bias)
        if not taken:  # one product NumPy's matmul does with less Python
            assert not batch and split is None, (m, k, n)
            continue
        expected = a.astype(np.float64) @ b.astype(np.float64) + bias
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * max(1, k),
                                   err_msg=f"{(m, k, n)} ta={ta} batch={batch} split={split}")
    a, b = np.ones((4, 300, 300), np.float32), np.ones((300, 300), np.float32)
    out = np.zeros((4, 300, 300), np.float32)
    for bias in (np.ones(600, np.float32)[::2], np.ones(299, np.float32),
                 np.ones(300, np.float64)):
        assert not gemm.product(a, b, out, bias=bias)
    assert not gemm.product(a, b, out, beta=1.0, bias=np.ones(300, np.float32))
    assert not out.any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_of_few_rows_streamed_match_float64_and_blas(gemm, dtype, monkeypatch):
    """Blocks of 1 to 4 rows summed by the C loop with the right operand streamed (every
    block, whatever its size: ``STREAM_BYTES`` 0): every row count, both layouts of ``a``,
    column counts around the vector panels and past a block of columns, depths that are and
    are not whole blocks of rows, a bias, beta, a batch summed into one matrix;
    the same values on one and on two parts, and 5 rows still on BLAS."""
    monkeypatch.setattr(blas, "STREAM_BYTES", 0)
    rng = np.random.default_rng(3)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for (m, k, n), ta, split in itertools.product(
            [(1, 1, 1), (2, 7, 15), (3, 33, 16), (4, 64, 65), (2, 130, 129), (4, 9, 200),
             (1, 300, 64), (3, 37, 1043), (5, 20, 70)], (0, 1), (None, 0)):
        monkeypatch.setattr(blas, "MIN_SPLIT_MACS", 1 << 60 if split is None else split)
        blas._plan.cache_clear()
        stored = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        a = stored.T if ta else stored
        b = rng.standard_normal((k, n)).astype(dtype)
        bias = rng.standard_normal(n).astype(dtype)
        expected = a.astype(np.float64) @ b.astype(np.float64)
        out = np.full((m, n), np.nan, dtype)
        bound = gemm.bind(a, b, out, bias)
        with gemm.guard:
            bound()
        np.testing.assert_allclose(out, expected + bias, rtol=tol, atol=tol * max(1, k),
                                   err_msg=f"{(m, k, n)} ta={ta} split={split}")
        start = rng.standard_normal((m, n)).astype(dtype)
        again = start.copy()
        batch_a = np.stack([a, 2 * a])
        with gemm.guard:
            assert gemm.product(batch_a, b, again, accumulate=True, beta=0.5)
        np.testing.assert_allclose(again, 0.5 * start + 3 * expected, rtol=tol,
                                   atol=tol * max(1, k), err_msg=f"{(m, k, n)} accumulate")
    # the split changes no sum: each runs over k in order, on whichever thread
    a = rng.standard_normal((3, 257)).astype(dtype)
    b = rng.standard_normal((257, 300)).astype(dtype)
    outs = []
    for split in (1 << 60, 0):
        monkeypatch.setattr(blas, "MIN_SPLIT_MACS", split)
        blas._plan.cache_clear()
        out = np.empty((3, 300), dtype)
        with gemm.guard:
            gemm.bind(a, b, out, np.zeros(300, dtype))()
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_one_small_product_is_left_to_numpy(gemm):
    blas._plan.cache_clear()
    a, b = np.ones((8, 16), np.float32), np.ones((16, 8), np.float32)
    assert not gemm.product(a, b, np.empty((8, 8), np.float32))


def test_a_batch_summed_into_one_matrix_with_beta(gemm):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 40, 70)).astype(np.float32)
    b = rng.standard_normal((5, 30, 70)).astype(np.float32)
    out = rng.standard_normal((40, 30)).astype(np.float32)
    expected = out + np.einsum("bmk,bnk->mn", a, b)
    assert gemm.product(a, b.swapaxes(-1, -2), out, accumulate=True, beta=1.0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
    assert gemm.product(a, b.swapaxes(-1, -2), out, accumulate=True, beta=0.0)
    np.testing.assert_allclose(out, np.einsum("bmk,bnk->mn", a, b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("split", [False, True], ids=["one-call", "split"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_bias_starts_each_block_of_the_output(gemm, dtype, split, monkeypatch):
    # out = bias + a @ b, the bias broadcast over the rows, written by the C loop block by
    # block (split or not), eagerly and through a bound call; the output starts as NaN, so a
    # block the bias pass missed shows.
    if split:
        monkeypatch.setattr(blas, "MIN_SPLIT_MACS", 0)
    blas._plan.cache_clear()
    rng = np.random.default_rng(2)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for (m, k, n), batch, tb in itertools.product([(1, 3, 5), (37, 20, 11), (64, 96, 130)],
                                                  [(), (3,)], (0, 1)):
        a = rng.standard_normal((*batch, m, k)).astype(dtype)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        b = b.T if tb else b
        bias = rng.standard_normal(n).astype(dtype)
        expected = a.astype(np.float64) @ b.astype(np.float64) + bias
        for bound in (False, True):
            out = np.full((*batch, m, n), np.nan, dtype)
            with gemm.guard:
                if bound:
                    call = gemm.bind(a, b, out, bias)
                    assert call is not None
                    call()
                    call()  # a replay: the same result again, the bias not added twice
                else:
                    assert gemm.product(a, b, out, bias=bias)
            np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * k,
                                       err_msg=f"{(m, k, n)} batch={batch} bound={bound}")
    # Nothing to add up: the bias alone; a bias of the wrong length is refused.
    out = np.full((4, 3), np.nan, np.float32)
    bias = np.arange(3, dtype=np.float32)
    assert gemm.product(np.ones((4, 0), np.float32), np.ones((0, 3), np.float32), out,
                        bias=bias)
    np.testing.assert_array_equal(out, np.broadcast_to(bias, (4, 3)))
    assert not gemm.product(np.ones((4, 2), np.float32), np.ones((2, 3), np.float32), out,
                            bias=np.ones(4, np.float32))


def test_layouts_blas_cannot_take_are_refused(gemm):
    x = np.ones((4, 8), np.float32)
    assert not gemm.product(x[:, ::2], x[:4, :4], np.empty((4, 4), np.float32))  # stride 2
    assert not gemm.product(x[:, :4], x[:4, :4], np.empty((4, 4), np.float32).T)  # out column-major
    assert not gemm.product(x[:, :4], x[:4, :4].astype(np.float64), np.empty((4, 4)))


CASES = [  # (spatial size, kernel, stride, padding, dilation, groups, batch)
    ((9,), (3,), (2,), (1,), (1,), 1, 3),
    ((8, 7), (3, 3), (1, 1), (1, 1), (1, 1), 1, 4),
    ((8, 7), (3, 2), (2, 1), (0, 2), (1, 2), 2, 1),
    ((11, 10), (5, 5), (2, 3), (2, 1), (1, 1), 1, 2),
    ((4, 5, 6), (2, 3, 2), (1, 2, 1), (1, 0, 1), (2, 1, 1), 3, 2),
]


@pytest.mark.parametrize("case", CASES, ids=[str(c[:3]) for c in CASES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("block", [None, 8, "merged", "direct"],
                         ids=["whole", "line-blocks", "merged", "direct-rows"])
def test_convolutions_and_their_gradients_match_ndarray(case, dtype, block, monkeypatch):
    from burnish.cpu import conv as cpu_conv
    from burnish.cpu import direct

    if block == "direct":  # few input channels summed directly, one output row a task
        monkeypatch.setattr(direct, "FEW_BLOCK", 1)
    else:  # the patch matrices, whatever the channels
        monkeypatch.setattr(direct, "FEW_INNER", 0)
    if block == "merged":  # every batch's patch matrices side by side, output channels in parts
        monkeypatch.setattr(cpu_conv, "MERGE_TASKS", 1 << 30)
        monkeypatch.setattr(cpu_conv, "MERGE_CHANNELS", 1)
    elif isinstance(block, int):  # a task per output line: many blocks per sample
        monkeypatch.setattr(cpu_conv, "BLOCK", block)
    calls: list[str] = []
    for name in ("bind_forward", "weight_grad"):
        original = getattr(NativeConv, name)
        monkeypatch.setattr(NativeConv, name, lambda self, *args, _name=name, _f=original:
                            calls.append(_name) or _f(self, *args))
    size, kernel, stride, padding, dilation, groups, batch = case
    rng = np.random.default_rng(2)
    channels, out_channels = 2 * groups, 3 * groups
    x = rng.standard_normal((batch, channels, *size)).astype(dtype)
    w = rng.standard_normal((out_channels, channels // groups, *kernel)).astype(dtype)
    bias = rng.standard_normal(out_channels).astype(dtype)
    conv = {1: burnish.functional.conv1d, 2: burnish.functional.conv2d,
            3: burnish.functional.conv3d}[len(size)]
    results = {}
    for device in ("autodiff+ndarray", "autodiff+cpu"):
        tx, tw, tb = (Tensor.from_data(a, device=device).require_grad() for a in (x, w, bias))
        y = conv(tx, tw, tb, stride=stride, padding=padding, dilation=dilation, groups=groups)
        grads = (y * y).sum().backward()
        results[device] = [y.to_numpy()] + [t.grad(grads).to_numpy() for t in (tx, tw, tb)]
    tol = 1e-4 if dtype == "float32" else 1e-10
    for got, expected in zip(results["autodiff+cpu"], results["autodiff+ndarray"]):
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    # The forward pass and the input gradient (a transposed convolution), and the weight's.
    assert sorted(calls) == ["bind_forward", "bind_forward", "weight_grad"], calls


WINOGRAD_CASES = [  # (batch, channels, out channels, size, padding, groups, layout)
    (2, 16, 24, (9, 11), (1, 1), 1, "contiguous"),  # odd sizes: edge tiles of 1 row or column
    (3, 8, 8, (6, 5), (0, 0), 1, "contiguous"),  # no padding, one row of tiles per sample half
    (1, 6, 4, (7, 8), (2, 1), 2, "contiguous"),  # padding wider than a tile's reach, 2 groups
    (2, 5, 7, (40, 37), (1, 0), 1, "strided"),  # rows of tiles longer than a vector register
    (2, 4, 3, (3, 3), (1, 1), 1, "transposed"),  # one tile; the input read through its strides
    (2, 96, 80, (10, 9), (1, 1), 1, "contiguous"),  # output channels cut into parts
]


@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=[str(c) for c in WINOGRAD_CASES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("block", [None, 1], ids=["whole", "tiny-blocks"])
def test_winograd_convolutions_match_float64(gemm, case, dtype, block, monkeypatch):
    # Every 3x3 convolution at unit stride through the Winograd kernel (whatever its size),
    # against a float64 reference within the conformance suite's tolerance; tiny blocks: 16
    # tiles a block, so blocks end in the middle of rows of tiles; a second call (a replay)
    # gives the same result bit for bit.
    from burnish.conformance import reference
    from burnish.cpu import conv as cpu_conv

    monkeypatch.setattr(cpu_conv, "WINOGRAD_CHANNELS", 1)
    monkeypatch.setattr(cpu_conv, "WINOGRAD_POSITIONS", 1)
    if block is not None:
        monkeypatch.setattr(cpu_conv, "WINOGRAD_BLOCK", block)
    native = NativeConv(Compiler(), gemm)
    if dtype not in native.winograd:
        pytest.skip("no Winograd kernel for this BLAS")
    batch, channels, out_channels, size, padding, groups, layout = case
    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, (batch, channels, *size)).astype(dtype)
    if layout == "strided":
        x = np.repeat(x, 2, axis=3)[..., ::2]
    elif layout == "transposed":
        x = np.ascontiguousarray(x.swapaxes(2, 3)).swapaxes(2, 3)
    w = rng.uniform(-1, 1, (out_channels, channels // groups, 3, 3)).astype(dtype)
    bias = rng.uniform(-1, 1, out_channels).astype(dtype)
    out_size = tuple(n + 2 * p - 2 for n, p in zip(size, padding))
    size_of = x.dtype.itemsize
    words = cpu_conv.geometry(size, out_size, (3, 3), (1, 1), padding, (1, 1),
                              tuple(s // size_of for s in x.strides[2:]))
    assert cpu_conv._winograd_takes(words, batch, channels // groups, out_channels // groups,
                                    False)
    matrix = w.reshape(groups, out_channels // groups, -1)
    options = ((1, 1), padding, (1, 1), groups)
    expected = reference.conv(x, w, bias, *options)
    magnitude = reference.conv(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                               np.abs(bias.astype(np.float64)), *options)
    tol = 1e-5 if dtype == "float32" else 1e-13  # the conformance suite's relative tolerances
    for with_bias in (True, False):
        out = np.full((batch, out_channels, *out_size), np.nan, dtype)
        call = native.bind_forward(x, matrix, bias if with_bias else None, out, words, groups,
                                   False)
        with gemm.guard:
            call()
            first = out.copy()
            call()
        np.testing.assert_array_equal(out, first)
        want = expected if with_bias else expected - bias[:, None, None]
        assert np.abs(out - want).max() <= 1e-7 + tol * magnitude.max()


def test_winograd_takes_only_3x3_unit_stride_convolutions_with_enough_work():
    from burnish.cpu import conv as cpu_conv

    def words(kernel=(3, 3), stride=(1, 1), dilation=(1, 1), size=(56, 56)):
        out = tuple((n + 2 - d * (k - 1) - 1) // s + 1
                    for n, k, s, d in zip(size, kernel, stride, dilation))
        return cpu_conv.geometry(size, out, kernel, stride, (1, 1), dilation, (size[1], 1))

    assert cpu_conv._winograd_takes(words(), 2, 64, 64, False)
    assert not cpu_conv._winograd_takes(words(), 2, 64, 64, True)  # transposed
    assert not cpu_conv._winograd_takes(words(stride=(2, 2)), 2, 64, 64, False)
    assert not cpu_conv._winograd_takes(words(dilation=(1, 2)), 2, 64, 64, False)
    assert not cpu_conv._winograd_takes(words(kernel=(3, 1)), 2, 64, 64, False)
    assert not cpu_conv._winograd_takes(words(kernel=(5, 5)), 2, 64, 64, False)
    assert not cpu_conv._winograd_takes(words(), 2, 3, 64, False)  # an image's colours
    assert not cpu_conv._winograd_takes(words(size=(7, 7)), 2, 512, 512, False)  # 98 positions
    three = cpu_conv.geometry((4, 56, 56), (4, 56, 56), (3, 3, 3), (1, 1, 1), (1, 1, 1),
                              (1, 1, 1), (3136, 56, 1))
    assert not cpu_conv._winograd_takes(three, 2, 64, 64, False)  # 3 spatial dims


POOLS = [  # (spatial size, kernel, stride, padding, dilation, ceil_mode)
    ((9,), (3,), (2,), (1,), (1,), False),
    ((8, 7), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((8, 7), (3, 2), (2, 1), (1, 1), (2, 1), True),
    ((4, 5, 6), (2, 3, 2), (1, 2, 2), (1, 1, 0), (1, 1, 2), True),
    ((3, 150), (2, 3), (1, 2), (0, 1), (1, 1), False),  # lines past the C kernel's LINE (64)
    ((24, 40), (3, 2), (1, 2), (0, 0), (2, 1), False),  # inside: 400 outputs, two CHUNKs
    ((9, 10), (3, 3), (2, 2), (1, 1), (1, 1), False),  # ResNet's stem pool: padding, stride 2
    ((5, 6), (2, 3), (3, 2), (1, 1), (1, 1), True),  # ceil_mode
]


@pytest.mark.parametrize("case", POOLS, ids=[str(c[:3]) for c in POOLS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pooling_values_indices_and_gradients_match_ndarray(case, dtype, monkeypatch):
    calls: list[str] = []
    for name in ("forward", "backward"):
        original = getattr(NativePool, name)
        monkeypatch.setattr(NativePool, name, lambda self, *args, _name=name, _f=original:
                            calls.append(_name) or _f(self, *args))
    size, kernel, stride, padding, dilation, ceil_mode = case
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, *size)).astype(dtype)
    x.reshape(-1)[[5, 17]] = np.nan  # NaN wins its windows, as in the kernels
    results, weights = {}, None
    for device in ("autodiff+ndarray", "autodiff+cpu"):
        tx = Tensor.from_data(x, device=device).require_grad()
        y, index = burnish.functional.max_pool_with_indices(
            tx, kernel, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
        if weights is None:  # the same upstream gradient on both sides
            weights = rng.standard_normal(y.shape).astype(dtype)
        grads = (y * Tensor.from_data(weights, device=device)).sum().backward()
        results[device] = [y.to_numpy(), index.to_numpy(), tx.grad(grads).to_numpy()]
    # The values alone (inference: no indices kept, -inf where a window starts).
    values = burnish.functional.max_pool(Tensor.from_data(x, device="cpu"), kernel,
                                         stride=stride, padding=padding, dilation=dilation,
                                         ceil_mode=ceil_mode)
    results["autodiff+cpu"].append(values.to_numpy())
    results["autodiff+ndarray"].append(results["autodiff+ndarray"][0])
    for got, expected in zip(results["autodiff+cpu"], results["autodiff+ndarray"]):
        np.testing.assert_array_equal(got, expected)
    assert sorted(set(calls)) == ["backward", "forward"], calls


ATTENTION = [  # (batch, heads, seq_q, seq_k, head_dim, value_dim, mask shape or None, causal)
    (2, 3, 5, 7, 4, 6, None, False),
    (2, 3, 6, 6, 8, 8, None, True),
    (2, 2, 4, 9, 4, 3, (2, 1, 1, 9), False),
    (1, 2, 5, 5, 4, 4, (1, 2, 5, 5), True),
]


@pytest.mark.parametrize("case", ATTENTION, ids=[str(c) for c in ATTENTION])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_attention_and_its_gradients_match_ndarray(case, dtype, monkeypatch):
    from burnish.cpu import attention as cpu_attention

    calls: list[str] = []
    for name in ("forward", "backward"):
        original = getattr(cpu_attention.NativeAttention, name)
        monkeypatch.setattr(cpu_attention.NativeAttention, name,
                            lambda self, *args, _name=name, _f=original:
                            calls.append(_name) or _f(self, *args))
    monkeypatch.setattr(cpu_attention, "BLOCK", 8)  # several query blocks per head
    batch, heads, tq, tk, dk, dv, mask_shape, causal = case
    rng = np.random.default_rng(4)
    q = rng.standard_normal((batch, heads, tq, dk)).astype(dtype)
    k = rng.standard_normal((batch, heads, tk, dk)).astype(dtype)
    v = rng.standard_normal((batch, heads, tk, dv)).astype(dtype)
    mask = None if mask_shape is None else rng.random(mask_shape) < 0.4
    if mask is not None:
        mask[..., 0, :] = True  # a query with no key left: uniform weights, no NaN
    upstream = rng.standard_normal((batch, heads, tq, dv)).astype(dtype)
    results = {}
    for device in ("autodiff+ndarray", "autodiff+cpu"):
        tq_, tk_, tv_ = (Tensor.from_data(a, device=device).require_grad() for a in (q, k, v))
        tm = None if mask is None else Tensor.from_data(mask, device=device)
        out = burnish.functional.scaled_dot_product_attention(tq_, tk_, tv_, mask=tm,
                                                              causal=causal)
        grads = (out * Tensor.from_data(upstream, device=device)).sum().backward()
        results[device] = [out.to_numpy()] + [t.grad(grads).to_numpy() for t in (tq_, tk_, tv_)]
    tol = 1e-4 if dtype == "float32" else 1e-10
    for got, expected in zip(results["autodiff+cpu"], results["autodiff+ndarray"]):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    assert sorted(calls) == ["backward", "forward"], calls


RECURRENT = [  # seq, batch, hidden, threads (None: the runtime's), reverse
    (6, 3, 5, None, False),
    (6, 3, 5, 2, True),     # two threads on a layer too small to be split by default
    (4, 8, 128, None, True),
    (3, 2, 3, 3, False),    # more threads than blocks
    (0, 2, 4, None, False),
]


@pytest.mark.parametrize("case", RECURRENT, ids=[str(c) for c in RECURRENT])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_recurrent_layers_match_ndarray(case, dtype, monkeypatch):
    from burnish.cpu import recurrent as cpu_recurrent

    seq, batch, hidden, threads, reverse = case
    calls: list[int] = []
    original = cpu_recurrent.NativeRecurrent.bind
    monkeypatch.setattr(cpu_recurrent.NativeRecurrent, "bind",
                        lambda self, *args: calls.append(1) or original(self, *args))
    if threads is not None:  # the steps split in blocks of one unit and more
        monkeypatch.setattr(cpu_recurrent, "BLOCK_MACS", 1)
        monkeypatch.setattr(cpu_recurrent, "BLOCK_UNITS", 1)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((seq, batch, 4 * hidden)).astype(dtype)
    w = (rng.standard_normal((hidden, 4 * hidden)) / np.sqrt(hidden)).astype(dtype)
    h, c = (rng.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    bias = rng.standard_normal(3 * hidden).astype(dtype)
    results = {}
    for device in ("ndarray", "cpu"):
        if device == "cpu" and threads is not None:
            cpu = burnish.backend("cpu")
            runtime = cpu.runtime(cpu.default_device())
            monkeypatch.setattr(runtime.native_recurrent, "threads", threads)
        lstm = burnish.functional.lstm_sequence(*(Tensor.from_data(a, device=device)
                                                  for a in (x, w, h, c)), reverse)
        gru = burnish.functional.gru_sequence(
            Tensor.from_data(x[..., :3 * hidden], device=device),
            Tensor.from_data(np.ascontiguousarray(w[:, :3 * hidden].T), device=device)
            .transpose(), Tensor.from_data(bias, device=device),
            Tensor.from_data(h, device=device), reverse)
        # input gates whose last dim is not contiguous (the cell's strided loads)
        gates_last = Tensor.from_data(np.ascontiguousarray(x.transpose(2, 0, 1)),
                                      device=device).permute([1, 2, 0])
        strided = burnish.functional.lstm_sequence(
            gates_last, *(Tensor.from_data(a, device=device) for a in (w, h, c)), reverse)
        results[device] = [t.to_numpy() for t in (*lstm, *gru, *strided)]
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, expected in zip(results["cpu"], results["ndarray"]):
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    assert len(calls) == 3


def _recurrent_inputs(seq, batch, hidden, dtype, seed=6):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((seq, batch, 4 * hidden)).astype(dtype)
    w = (rng.standard_normal((hidden, 4 * hidden)) / np.sqrt(hidden)).astype(dtype)
    h, c = (rng.standard_normal((batch, hidden)).astype(dtype) for _ in range(2))
    bias = rng.standard_normal(3 * hidden).astype(dtype)
    return x, w, h, c, bias


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_recurrent_layers_are_the_same_on_any_thread_count(dtype, monkeypatch):
    """A layer's steps split in blocks (by its sizes alone) give the same bits on one thread,
    on several, and beside another layer (``NativeRecurrent.together``)."""
    cpu = burnish.backend("cpu")
    native = cpu.runtime(cpu.default_device()).native_recurrent
    if not native.entries:
        pytest.skip("no OpenBLAS")
    from burnish.cpu.recurrent import blocks

    seq, batch, hidden = 5, 8, 128
    assert blocks(batch, 4, hidden) > 1 and blocks(batch, 3, hidden) > 1
    x, w, h, c, bias = _recurrent_inputs(seq, batch, hidden, dtype)
    results = {}
    for threads in (1, 2, 3, "together"):
        monkeypatch.setattr(native, "threads", 2 if threads == "together" else threads)
        outputs = [np.empty((seq, batch, hidden), dtype) for _ in range(2)]
        states = [np.empty((batch, hidden), dtype) for _ in range(3)]
        lstm = native.bind(x, w, None, h, c, outputs[0], states[0], states[1], False)
        gru = native.bind(x[..., :3 * hidden], w[:, :3 * hidden], bias, h, None, outputs[1],
                          states[2], None, True)
        if threads == "together":
            both = native.together([lstm, gru])
            assert both is not None and len(both.layers) == 2
            both()
        else:
            assert lstm.threads == min(threads, blocks(batch, 4, hidden))
            lstm()
            gru()
        results[threads] = [*outputs, *states]
    for threads in (2, 3, "together"):
        for got, expected in zip(results[threads], results[1]):
            np.testing.assert_array_equal(got, expected)


def test_recurrent_layers_back_off_to_one_thread_after_a_slow_run(monkeypatch):
    """A run on two threads far slower than the fastest seen (a thread waited for a core):
    the next runs on one thread, then two again; the same bits every time."""
    from burnish.cpu import recurrent as cpu_recurrent

    cpu = burnish.backend("cpu")
    native = cpu.runtime(cpu.default_device()).native_recurrent
    if not native.entries or native.threads < 2:
        pytest.skip("no OpenBLAS, or one thread")
    monkeypatch.setattr(cpu_recurrent, "BACK_OFF_RUNS", 2)
    seq, batch, hidden = 4, 8, 128
    x, w, h, _, bias = _recurrent_inputs(seq, batch, hidden, "float32")
    out, last = np.empty((seq, batch, hidden), np.float32), np.empty((batch, hidden), np.float32)
    bound = native.bind(x[..., :3 * hidden], w[:, :3 * hidden], bias, h, None, out, last, None,
                        False)
    assert bound.threads == 2
    runs: list[str] = []
    parallel, alone = bound.call, bound.call_alone
    bound.call = lambda: runs.append("parallel") or parallel()
    bound.call_alone = lambda: runs.append("alone") or alone()
    monkeypatch.setattr(bound.pace, "fastest", 1e-12)  # every run on two threads is slow
    monkeypatch.setattr(bound.pace, "back_off", 0)
    results = []
    for _ in range(5):
        bound()
        results.append(out.copy())
    assert runs == ["parallel", "alone", "alone", "parallel", "alone"]
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])
    # A layer of the same sizes bound afresh (an eager call) goes on where this one is.
    again = native.bind(x[..., :3 * hidden], w[:, :3 * hidden], bias, h, None, out, last,
                        None, False)
    assert again.pace is bound.pace and again.pace.back_off == 1


def test_recurrent_layers_that_share_memory_do_not_run_together():
    cpu = burnish.backend("cpu")
    native = cpu.runtime(cpu.default_device()).native_recurrent
    if not native.entries or native.threads < 2:
        pytest.skip("no OpenBLAS, or one thread")
    seq, batch, hidden = 3, 2, 4
    x, w, h, c, _ = _recurrent_inputs(seq, batch, hidden, "float32")
    out, last_h, last_c = (np.empty((seq, batch, hidden), np.float32),
                           np.empty((batch, hidden), np.float32),
                           np.empty((batch, hidden), np.float32))
    first = native.bind(x, w, None, h, c, out, last_h, last_c, False)
    # The second starts from the first's final state: it must wait for it.
    after = native.bind(x, w, None, last_h, last_c, *(np.empty_like(a) for a in
                                                       (out, last_h, last_c)), False)
    assert native.together([first, after]) is None
    # Writing what the other reads (its input gates) is no better.
    overwrite = native.bind(np.zeros_like(x), w, None, h, c, x[:, :, :hidden], *(
        np.empty_like(a) for a in (last_h, last_c)), False)
    assert native.together([first, overwrite]) is None
    apart = native.bind(x, w, None, h, c, *(np.empty_like(a) for a in (out, last_h, last_c)),
                        True)
    assert native.together([first, apart]) is not None


def test_a_captured_bidirectional_layer_runs_its_directions_together(monkeypatch):
    """Both directions of a layer, independent, in one command of the replay; a layer that
    starts from another's final state after it; the replays' results are the eager ones."""
    from burnish.cpu import runtime as cpu_runtime

    cpu = burnish.backend("cpu")
    native = cpu.runtime(cpu.default_device()).native_recurrent
    if not native.entries or native.threads < 2:
        pytest.skip("no OpenBLAS, or one thread")
    programs = []
    original = cpu_runtime.CpuRuntime.program
    monkeypatch.setattr(cpu_runtime.CpuRuntime, "program",
                        lambda self, commands: programs.append(original(self, commands))
                        or programs[-1])
    F = burnish.functional
    seq, batch, hidden = 6, 8, 128
    x, w, h, c, _ = _recurrent_inputs(seq, batch, hidden, "float32")
    tensors = [Tensor.from_data(a, device="cpu") for a in (x, w, h, c)]

    def layers(x, w, h, c):
        half = x * 0.5
        forward, h1, c1 = F.lstm_sequence(x, w, h, c)
        backward, _, _ = F.lstm_sequence(half, w, h, c, reverse=True)
        after, h2, _ = F.lstm_sequence(x, w, h1, c1)  # reads the forward layer's state
        return forward, backward, after, h2

    eager = [t.to_numpy() for t in layers(*tensors)]
    captured = burnish.capture(layers)
    for _ in range(8):
        got = [t.to_numpy() for t in captured(*tensors)]
        for a, b in zip(got, eager):
            np.testing.assert_array_equal(a, b)
    assert captured.stats()[0]["replays"] >= 2, captured.stats()
    bound = [fn for fn, _ in programs[-1] if isinstance(fn, cpu_runtime.BoundLayers)]
    assert [len(b.layers) for b in bound] == [2, 1]
