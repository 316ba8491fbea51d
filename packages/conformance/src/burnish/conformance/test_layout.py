"""Layout: reshape, permute, expand, flip, repeat, cat, stack, split, chunk, narrow and the
squeeze family, on every dtype, contiguous or not."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.conformance.compare import assert_equal
from burnish.conformance.samples import ALL, LAYOUTS, ids, laid_out, sample

DTYPES = pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))

RESHAPES = [
    ((2, 3, 4), (6, 4)),
    ((2, 3, 4), (-1,)),
    ((2, 3, 4), (4, -1, 2)),
    ((24,), (2, 3, 4)),
    ((), (1, 1)),
    ((1,), ()),
    ((0, 3), (3, 0)),
    ((0, 3), (-1, 3)),
    ((1023, 257), (257, 1023)),
]


@pytest.mark.parametrize(("old", "new"), RESHAPES, ids=[f"{ids(p)[0]}-to-{p[1]}" for p in RESHAPES])
@DTYPES
def test_reshape(device, dtype, old, new):
    a = sample(old, dtype)
    assert_equal(Tensor.from_numpy(a, device).reshape(new), a.reshape(new), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_reshape_non_contiguous(device, dtype, layout):
    a = sample((3, 4, 2), dtype)
    x = laid_out(a, device, dtype, layout)
    assert_equal(x.reshape([4, 6]), a.reshape(4, 6), dtype)
    assert_equal(x.flatten(), a.reshape(-1), dtype)


@DTYPES
def test_flatten_squeeze_unsqueeze(device, dtype):
    a = sample((2, 1, 3, 1), dtype)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.flatten(1, 2), a.reshape(2, 3, 1), dtype)
    assert_equal(x.squeeze(), a.squeeze(), dtype)
    assert_equal(x.squeeze(1), a.squeeze(1), dtype)
    assert_equal(x.squeeze([1, -1]), a.reshape(2, 3), dtype)
    assert_equal(x.unsqueeze(0), a[None], dtype)
    assert_equal(x.unsqueeze(-1), a[..., None], dtype)
    assert_equal(x.unsqueeze_dims([0, 3]), a.reshape(1, 2, 1, 1, 3, 1), dtype)
    scalar = Tensor.from_numpy(sample((), dtype), device)
    assert scalar.flatten().shape == (1,)
    assert scalar.unsqueeze(0).shape == (1,)


PERMUTES = [((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (0, 2, 1)), ((2, 3), (1, 0)),
            ((2, 0, 3), (2, 1, 0)), ((1, 2, 3, 4), (3, 1, 0, 2)), ((5,), (0,))]


@pytest.mark.parametrize(("shape", "axes"), PERMUTES, ids=[f"{ids(p)[0]}-{p[1]}" for p in PERMUTES])
@DTYPES
def test_permute(device, dtype, shape, axes):
    a = sample(shape, dtype)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.permute(axes), a.transpose(axes), dtype)
    assert_equal(x.permute(*axes), a.transpose(axes), dtype)


@DTYPES
def test_permute_twice_and_transpose(device, dtype):
    a = sample((2, 3, 4), dtype)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.permute(1, 2, 0).permute(2, 0, 1), a, dtype)
    assert_equal(x.transpose(), a.swapaxes(-1, -2), dtype)
    assert_equal(x.T, a.swapaxes(-1, -2), dtype)
    assert_equal(x.swap_dims(0, 2), a.swapaxes(0, 2), dtype)
    assert_equal(x.permute(-1, 0, 1), a.transpose(2, 0, 1), dtype)


EXPANDS = [((3, 1), (3, 4)), ((1,), (2, 5)), ((), (2, 3)), ((2, 1, 3), (4, 2, 5, 3)),
           ((1, 3), (0, 3)), ((3, 1), (-1, 2))]


@pytest.mark.parametrize(("old", "new"), EXPANDS, ids=[f"{ids(p)[0]}-to-{p[1]}" for p in EXPANDS])
@DTYPES
def test_expand(device, dtype, old, new):
    a = sample(old, dtype)
    target = tuple(n if n != -1 else a.shape[i - (len(new) - a.ndim)]
                   for i, n in enumerate(new))
    x = Tensor.from_numpy(a, device)
    assert_equal(x.expand(new), np.broadcast_to(a, target), dtype)
    assert_equal(x.broadcast_to(new), np.broadcast_to(a, target), dtype)


@DTYPES
def test_expanded_then_reshaped_and_permuted(device, dtype):
    a = sample((3, 1), dtype)
    x = Tensor.from_numpy(a, device).expand((2, 3, 4))
    b = np.broadcast_to(a, (2, 3, 4))
    assert_equal(x.permute(2, 0, 1), b.transpose(2, 0, 1), dtype)
    assert_equal(x.reshape([6, 4]), b.reshape(6, 4), dtype)
    assert_equal(x[:, 1:, ::2], b[:, 1:, ::2], dtype)


FLIPS = [((5,), (0,)), ((3, 4), (0,)), ((3, 4), (1,)), ((3, 4), (0, 1)), ((2, 3, 4), (-1, 0)),
         ((0, 3), (0, 1))]


@pytest.mark.parametrize(("shape", "axes"), FLIPS, ids=[f"{ids(p)[0]}-{p[1]}" for p in FLIPS])
@DTYPES
def test_flip(device, dtype, shape, axes):
    a = sample(shape, dtype)
    assert_equal(Tensor.from_numpy(a, device).flip(axes), np.flip(a, axes), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_flip_non_contiguous(device, dtype, layout):
    a = sample((3, 4, 5), dtype)
    x = laid_out(a, device, dtype, layout)
    assert_equal(x.flip([0, 2]), np.flip(a, (0, 2)), dtype)


REPEATS = [((2, 3), (2, 1)), ((2, 3), (1, 3)), ((2, 3), (2, 2, 2)), ((3,), (0,)), ((), (3,)),
           ((1, 2), (3, 1))]


@pytest.mark.parametrize(("shape", "sizes"), REPEATS, ids=[f"{ids(p)[0]}-{p[1]}" for p in REPEATS])
@DTYPES
def test_repeat(device, dtype, shape, sizes):
    a = sample(shape, dtype)
    assert_equal(Tensor.from_numpy(a, device).repeat(sizes), np.tile(a, sizes), dtype)


@pytest.mark.parametrize("times", [0, 1, 3])
@DTYPES
def test_repeat_dim(device, dtype, times):
    a = sample((2, 3), dtype)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.repeat_dim(1, times), np.concatenate([a] * times or [a[:, :0]], axis=1), dtype)
    assert_equal(x.repeat_dim(0, times), np.concatenate([a] * times or [a[:0]], axis=0), dtype)


#: More inputs than one launch copies (an empty one among them): several launches.
_MANY_INPUTS: list[tuple[int, ...]] = [(2, n, 3) for n in [1] * 9 + [0] + [2] * 9]
CATS: list[tuple[list[tuple[int, ...]], int]] = [
    ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 5)], 1), ([(2, 3), (2, 3)], -1),
    ([(0, 3), (2, 3)], 0), ([(2, 2, 2)] * 5, 1), ([(4,)], 0), (_MANY_INPUTS, 1)]


@pytest.mark.parametrize(("shapes", "dim"), CATS, ids=[f"{len(s)}x-dim{d}" for s, d in CATS])
@DTYPES
def test_cat(device, dtype, shapes, dim):
    arrays = [sample(s, dtype, key=i) for i, s in enumerate(shapes)]
    out = burnish.cat([Tensor.from_numpy(a, device) for a in arrays], dim)
    assert_equal(out, np.concatenate(arrays, axis=dim), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_cat_non_contiguous(device, dtype, layout):
    a, b = sample((3, 4), dtype), sample((3, 4), dtype, key=1)
    out = burnish.cat([laid_out(a, device, dtype, layout), laid_out(b, device, dtype, layout)], 1)
    assert_equal(out, np.concatenate([a, b], axis=1), dtype)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@DTYPES
def test_stack(device, dtype, dim):
    arrays = [sample((2, 3), dtype, key=i) for i in range(3)]
    out = burnish.stack([Tensor.from_numpy(a, device) for a in arrays], dim)
    assert_equal(out, np.stack(arrays, axis=dim), dtype)


@DTYPES
def test_stack_zero_dim(device, dtype):
    arrays = [sample((), dtype, key=i) for i in range(4)]
    out = burnish.stack([Tensor.from_numpy(a, device) for a in arrays])
    assert_equal(out, np.stack(arrays), dtype)


SPLITS = [(2, 0), (3, 1), (4, 1), ([1, 2, 2], 0), ([0, 5], 0), (10, 1)]


@pytest.mark.parametrize(("size", "dim"), SPLITS, ids=[f"{s}-dim{d}" for s, d in SPLITS])
@DTYPES
def test_split(device, dtype, size, dim):
    a = sample((5, 7), dtype)
    parts = Tensor.from_numpy(a, device).split(size, dim)
    n = a.shape[dim]
    bounds = np.cumsum(size)[:-1] if isinstance(size, list) else np.arange(size, n, size)
    expected = np.split(a, bounds, axis=dim)
    assert len(parts) == len(expected)
    for part, want in zip(parts, expected):
        assert_equal(part, want, dtype)


@pytest.mark.parametrize(("chunks", "sizes"), [(1, [7]), (2, [4, 3]), (3, [3, 3, 1]),
                                               (7, [1] * 7), (9, [1] * 7)])
@DTYPES
def test_chunk(device, dtype, chunks, sizes):
    a = sample((2, 7), dtype)
    parts = Tensor.from_numpy(a, device).chunk(chunks, 1)
    assert [p.shape[1] for p in parts] == sizes
    start = 0
    for part, size in zip(parts, sizes):
        assert_equal(part, a[:, start:start + size], dtype)
        start += size


@pytest.mark.parametrize(("dim", "start", "length"), [(0, 1, 2), (1, 0, 5), (1, -3, 3),
                                                      (1, 2, 0), (-1, 4, 1)])
@DTYPES
def test_narrow(device, dtype, dim, start, length):
    a = sample((3, 5), dtype)
    index = [slice(None)] * 2
    begin = start % a.shape[dim] if start < 0 else start
    index[dim] = slice(begin, begin + length)
    assert_equal(Tensor.from_numpy(a, device).narrow(dim, start, length), a[tuple(index)], dtype)
