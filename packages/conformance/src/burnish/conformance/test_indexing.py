"""Indexing: getitem, setitem, slice, slice_assign, select, select_add, gather, scatter_add,
mask_where, mask_fill and where."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor, bool_, float32, int64
from burnish.conformance.compare import assert_equal
from burnish.conformance.samples import ALL, LAYOUTS, NUMERIC, ids, laid_out, sample, whole

DTYPES = pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
NUMERIC_DTYPES = pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))

INDICES = [
    (1,),
    (-1,),
    (slice(1, 3),),
    (slice(None, None, 2), 2),
    (Ellipsis, 1),
    (0, Ellipsis, slice(1, None, 3)),
    (None, 1),
    (slice(None), None, -2),
    (slice(2, 1),),
    (slice(-10, 10),),
    (0, 1, 2),
]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
@DTYPES
def test_getitem(device, dtype, index):
    a = sample((4, 3, 5), dtype)
    assert_equal(Tensor.from_numpy(a, device)[index], a[index], dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_getitem_non_contiguous(device, dtype, layout):
    a = sample((4, 3, 5), dtype)
    x = laid_out(a, device, dtype, layout)
    assert_equal(x[1:, :, ::2], a[1:, :, ::2], dtype)
    assert_equal(x[..., 3], a[..., 3], dtype)
    assert_equal(x[1:, 0][::2], a[1:, 0][::2], dtype)


@pytest.mark.requires_dtype(int64)
@DTYPES
def test_getitem_with_int_tensor(device, dtype):
    a = sample((4, 3), dtype)
    x = Tensor.from_numpy(a, device)
    rows = np.array([3, 0, 0, 2])
    assert_equal(x[Tensor.from_numpy(rows, device)], a[rows], dtype)
    assert_equal(x[:, Tensor.from_numpy(np.array([2, 1]), device)], a[:, [2, 1]], dtype)


@DTYPES
def test_getitem_zero_dim_result(device, dtype):
    a = sample((2, 3), dtype)
    out = Tensor.from_numpy(a, device)[1, 2]
    assert out.shape == ()
    assert_equal(out, a[1, 2], dtype)


SETS = [
    ((0,), 5),
    ((slice(1, 3), slice(None, None, 2)), "tensor"),
    ((Ellipsis, 0), 1),
    ((-1, -1), 0),
    ((slice(None), 1), "row"),
]


@pytest.mark.parametrize(("index", "value"), SETS, ids=[repr(i) for i, _ in SETS])
@DTYPES
def test_setitem(device, dtype, index, value):
    a = sample((4, 3), dtype)
    x = Tensor.from_numpy(a, device)
    before = x.reshape([12])
    target = a[index]
    if value == "tensor" or value == "row":
        values = sample(np.shape(target), dtype, key=1)
        x[index] = Tensor.from_numpy(values, device)
    else:
        values = bool(value) if dtype is bool_ else value
        x[index] = values
    expected = a.copy()
    expected[index] = values
    assert_equal(x, expected, dtype)
    # Tensors are values: a tensor made from x before the assignment keeps its values.
    assert_equal(before, a.reshape(12), dtype)


SLICES = [
    [slice(1, 3)],
    [(1, 3), (0, 2)],
    [(-3, -1)],
    [slice(None), slice(1, None, 2)],
    [slice(0, 0)],
    [],
]


@pytest.mark.parametrize("ranges", SLICES, ids=[repr(r) for r in SLICES])
@DTYPES
def test_slice_and_slice_assign(device, dtype, ranges):
    a = sample((4, 5), dtype)
    index = tuple(r if isinstance(r, slice) else slice(*r) for r in ranges)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.slice(ranges), a[index], dtype)
    values = sample(a[index].shape, dtype, key=1)
    expected = a.copy()
    expected[index] = values
    assert_equal(x.slice_assign(ranges, Tensor.from_numpy(values, device)), expected, dtype)
    assert_equal(x, a, dtype)


@DTYPES
def test_slice_assign_broadcasts_values(device, dtype):
    a = sample((4, 5), dtype)
    x = Tensor.from_numpy(a, device)
    row = sample((5,), dtype, key=1)
    expected = a.copy()
    expected[1:3] = row
    assert_equal(x.slice_assign([slice(1, 3)], Tensor.from_numpy(row, device)), expected, dtype)
    expected = a.copy()
    expected[:, ::2] = 1
    assert_equal(x.slice_assign([slice(None), slice(None, None, 2)], True if dtype is bool_
                                else 1), expected, dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_slice_assign_non_contiguous(device, dtype, layout):
    a, b = sample((4, 6), dtype), sample((2, 3), dtype, key=1)
    x = laid_out(a, device, dtype, layout)
    out = x.slice_assign([slice(1, 3), slice(0, 6, 2)], laid_out(b, device, dtype, layout))
    expected = a.copy()
    expected[1:3, 0:6:2] = b
    assert_equal(out, expected, dtype)


SELECTS = [(0, [2, 0, 2]), (1, [1]), (1, []), (-1, [4, 3, 2, 1, 0, 0])]


@pytest.mark.requires_dtype(int64)
@pytest.mark.parametrize(("dim", "indices"), SELECTS, ids=[f"dim{d}-{i}" for d, i in SELECTS])
@DTYPES
def test_select(device, dtype, dim, indices):
    a = sample((3, 5), dtype)
    rows = np.array(indices, dtype=np.int64)
    out = Tensor.from_numpy(a, device).select(dim, Tensor.from_numpy(rows, device))
    assert_equal(out, np.take(a, rows, axis=dim), dtype)
    assert_equal(Tensor.from_numpy(a, device).select(dim, indices), np.take(a, rows, axis=dim),
                 dtype)


@pytest.mark.requires_dtype(int64)
@pytest.mark.parametrize(("dim", "indices"), SELECTS, ids=[f"dim{d}-{i}" for d, i in SELECTS])
@NUMERIC_DTYPES
def test_select_add_accumulates_repeats(device, dtype, dim, indices):
    a = whole((3, 5), dtype)
    rows = np.array(indices, dtype=np.int64)
    shape = list(a.shape)
    shape[dim] = len(rows)
    values = whole(shape, dtype, key=1)
    out = Tensor.from_numpy(a, device).select_add(dim, Tensor.from_numpy(rows, device),
                                                  Tensor.from_numpy(values, device))
    expected = np.moveaxis(a.astype(np.float64).copy(), dim, 0)
    np.add.at(expected, rows, np.moveaxis(values.astype(np.float64), dim, 0))
    assert_equal(out, np.moveaxis(expected, 0, dim).astype(dtype.numpy), dtype)


GATHERS = [((3, 4), 0, (5, 4)), ((3, 4), 1, (3, 6)), ((3, 4), 1, (2, 2)), ((2, 3, 4), 2, (2, 3, 1)),
           ((2, 3, 4), 0, (3, 3, 4)), ((3, 4), 0, (0, 4))]


@pytest.mark.requires_dtype(int64)
@pytest.mark.parametrize(("shape", "dim", "index_shape"), GATHERS,
                         ids=[f"{ids(g)[0]}-dim{g[1]}-{ids(g)[2]}" for g in GATHERS])
@DTYPES
def test_gather(device, dtype, shape, dim, index_shape):
    a = sample(shape, dtype)
    indices = sample(index_shape, int64, 0, shape[dim] - 1, key=1)
    out = Tensor.from_numpy(a, device).gather(dim, Tensor.from_numpy(indices, device))
    # The indices may be smaller than the tensor in the other dims: gather from that corner.
    corner = tuple(slice(0, n) if d != dim else slice(None) for d, n in enumerate(index_shape))
    assert_equal(out, np.take_along_axis(a[corner], indices, axis=dim), dtype)


@pytest.mark.requires_dtype(int64)
@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_gather_non_contiguous(device, dtype, layout):
    a = sample((4, 5), dtype)
    indices = sample((4, 3), int64, 0, 4, key=1)
    x = laid_out(a, device, dtype, layout)
    out = x.gather(1, laid_out(indices, device, int64, layout))
    assert_equal(out, np.take_along_axis(a, indices, axis=1), dtype)


@pytest.mark.requires_dtype(int64)
@pytest.mark.parametrize(("shape", "dim", "index_shape"), GATHERS,
                         ids=[f"{ids(g)[0]}-dim{g[1]}-{ids(g)[2]}" for g in GATHERS])
@NUMERIC_DTYPES
def test_scatter_add_accumulates_repeats(device, dtype, shape, dim, index_shape):
    a = whole(shape, dtype)
    indices = sample(index_shape, int64, 0, shape[dim] - 1, key=1)
    values = whole(index_shape, dtype, key=2)
    out = Tensor.from_numpy(a, device).scatter_add(dim, Tensor.from_numpy(indices, device),
                                                   Tensor.from_numpy(values, device))
    expected = a.astype(np.float64)
    grids = list(np.indices(index_shape))
    grids[dim] = indices
    np.add.at(expected, tuple(grids), values.astype(np.float64))
    assert_equal(out, expected.astype(dtype.numpy), dtype)


@pytest.mark.requires_dtype(bool_)
@pytest.mark.parametrize("mask_shape", [(3, 4), (4,), (3, 1), ()], ids=ids([(3, 4), (4,), (3, 1),
                                                                           ()]))
@DTYPES
def test_mask_where_and_mask_fill(device, dtype, mask_shape):
    a, b = sample((3, 4), dtype), sample((3, 4), dtype, key=1)
    mask = sample(mask_shape, bool_, key=2)
    x, m = Tensor.from_numpy(a, device), Tensor.from_numpy(mask, device)
    assert_equal(x.mask_where(m, Tensor.from_numpy(b, device)), np.where(mask, b, a), dtype)
    value = True if dtype is bool_ else (2.5 if dtype.is_float else 3)
    assert_equal(x.mask_fill(m, value), np.where(mask, np.array(value, dtype.numpy), a), dtype)


@pytest.mark.requires_dtype(bool_)
@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_where_non_contiguous(device, dtype, layout):
    a, b = sample((3, 4), dtype), sample((3, 4), dtype, key=1)
    mask = sample((3, 4), bool_, key=2)
    out = burnish.where(laid_out(mask, device, bool_, layout), laid_out(a, device, dtype, layout),
                        laid_out(b, device, dtype, layout))
    assert_equal(out, np.where(mask, a, b), dtype)


WHERE_SHAPES = [((2, 3), (2, 3), (2, 3)), ((2, 1), (3,), (2, 3)), ((), (2, 3), ()),
                ((4, 1, 3), (1, 2, 1), (3,)), ((0, 3), (3,), ())]


@pytest.mark.requires_dtype(bool_)
@pytest.mark.parametrize("shapes", WHERE_SHAPES, ids=["-".join(ids(s)) for s in WHERE_SHAPES])
@DTYPES
def test_where_broadcasts(device, dtype, shapes):
    mask = sample(shapes[0], bool_)
    a, b = sample(shapes[1], dtype, key=1), sample(shapes[2], dtype, key=2)
    out = burnish.where(Tensor.from_numpy(mask, device), Tensor.from_numpy(a, device),
                        Tensor.from_numpy(b, device))
    assert_equal(out, np.where(mask, a, b), dtype)


@pytest.mark.requires_dtype(bool_, int64, float32)
def test_where_with_scalars_and_promotion(device):
    mask = np.array([True, False, True])
    m = Tensor.from_numpy(mask, device)
    ints = Tensor.from_data([1, 2, 3], device)
    assert_equal(burnish.where(m, ints, 0), np.where(mask, [1, 2, 3], 0), int64)
    assert_equal(burnish.where(m, ints, 0.5), np.where(mask, [1.0, 2.0, 3.0], 0.5), float32)
    assert_equal(burnish.where(m, 1.5, -1.5), np.where(mask, 1.5, -1.5), float32)
    floats = Tensor.from_data([0.5, 0.5, 0.5], device)
    assert_equal(burnish.where(m, ints, floats), np.where(mask, [1.0, 2.0, 3.0], 0.5), float32)
