"""Errors: wrong shapes, dtypes and devices raise burnish's exception types, and every message
names both sides."""

from __future__ import annotations

import re

import numpy as np
import pytest

import burnish
from burnish import Tensor, bool_, float16, float32, float64, int64
from burnish import functional as F
from burnish.conformance.compare import assert_equal
from burnish.conformance.foreign import ForeignBackend
from burnish.conformance.samples import ALL, sample
from burnish.dtype import get_dtype
from burnish.errors import (
    BackendNotInstalledError,
    DeviceError,
    DTypeError,
    ShapeError,
    UnsupportedError,
)

pytestmark = pytest.mark.requires_dtype(float32, int64, bool_)


def raises(kind, *parts: str):
    """``pytest.raises(kind)`` whose message must contain every one of ``parts``."""
    return pytest.raises(kind, match="".join(f"(?=[\\s\\S]*{re.escape(p)})" for p in parts))


def read(tensor: Tensor) -> None:
    """Read ``tensor``: an index out of bounds raises at the op or, where the backend checks
    on the device (``Backend.check_indices``), at the next read at the latest."""
    tensor.to_numpy()


def zeros(device, *shape, dtype=float32):
    return Tensor.zeros(shape, device, dtype)


@pytest.fixture(scope="module")
def foreign():
    return ForeignBackend().default_device()


# -- shapes ---------------------------------------------------------------------------------------

BINARY = ["add", "sub", "mul", "div", "remainder", "pow", "maximum", "equal", "greater"]


@pytest.mark.parametrize("op", BINARY)
def test_binary_shapes_must_broadcast(device, op):
    with raises(ShapeError, "[2, 3]", "[4]"):
        getattr(zeros(device, 2, 3), op)(zeros(device, 4))


def test_logic_shapes_must_broadcast(device):
    with raises(ShapeError, "[2, 3]", "[2]"):
        zeros(device, 2, 3, dtype=bool_) & zeros(device, 2, dtype=bool_)


@pytest.mark.parametrize(("lhs", "rhs"), [((2, 3), (4, 5)), ((3,), (4,)), ((2, 2, 3), (2, 4, 3))])
def test_matmul_inner_dims(device, lhs, rhs):
    with raises(ShapeError, str(list(lhs)), str(list(rhs))):
        zeros(device, *lhs) @ zeros(device, *rhs)


def test_matmul_batch_dims_must_broadcast(device):
    with raises(ShapeError, "[2]", "[3]"):
        zeros(device, 2, 3, 4) @ zeros(device, 3, 4, 5)


def test_matmul_of_scalars(device):
    with raises(ShapeError, "[]", "[3]"):
        zeros(device) @ zeros(device, 3)


def test_reshape_counts(device):
    with raises(ShapeError, "[2, 3]", "[4, 2]"):
        zeros(device, 2, 3).reshape([4, 2])
    with raises(ShapeError, "[2, 3]", "[-1, 4]"):
        zeros(device, 2, 3).reshape([-1, 4])


def test_expand(device):
    with raises(ShapeError, "[2, 3]", "[2, 4]"):
        zeros(device, 2, 3).expand([2, 4])
    with raises(ShapeError, "[2, 3]", "[3]"):
        zeros(device, 2, 3).expand([3])


def test_permute_needs_every_dim_once(device):
    with raises(ShapeError, "[0, 1]", "[2, 3, 4]"):
        zeros(device, 2, 3, 4).permute(0, 1)
    with raises(ShapeError, "[0, 0, 1]"):
        zeros(device, 2, 3, 4).permute(0, 0, 1)


@pytest.mark.parametrize("dim", [3, -4])
def test_dim_out_of_range(device, dim):
    with raises(ShapeError, f"dim {dim}", "3 dims"):
        zeros(device, 2, 3, 4).sum(dim)


def test_cat_and_stack_shapes(device):
    with raises(ShapeError, "[2, 3]", "[2, 4]"):
        burnish.cat([zeros(device, 2, 3), zeros(device, 2, 4)], 0)
    with raises(ShapeError, "[2, 3]", "[2, 4]"):
        burnish.stack([zeros(device, 2, 3), zeros(device, 2, 4)])
    with raises(ShapeError, "[3]", "[3, 1]"):
        burnish.cat([zeros(device, 3), zeros(device, 3, 1)], 0)
    with raises(ShapeError, "at least one"):
        burnish.cat([])


def test_getitem_out_of_bounds(device):
    with raises(ShapeError, "index 5", "size 4"):
        zeros(device, 4, 2)[5]
    with raises(ShapeError, "index -5", "size 4"):
        zeros(device, 4, 2)[-5]
    with raises(ShapeError, "3", "[4, 2]"):
        zeros(device, 4, 2)[0, 0, 0]


def test_setitem_and_slice_assign_shapes(device):
    x = zeros(device, 4, 3)
    with raises(ShapeError, "[2]", "[4, 3]"):
        x.slice_assign([slice(None)], zeros(device, 2))
    with raises(ShapeError, "[5]", "[3]"):
        x[0] = zeros(device, 5)


def test_slice_steps_and_ranges(device):
    with raises(ShapeError, "-1", "dim 0"):
        zeros(device, 4).slice([slice(None, None, -1)])
    with raises(ShapeError, "[1, 9]", "[4]"):
        zeros(device, 4).slice([(1, 9)])


def test_gather_and_scatter_shapes(device):
    x = zeros(device, 3, 4)
    with raises(ShapeError, "index 3", "size 3"):
        read(x.gather(0, Tensor.from_data([[3, 0, 0, 0]], device)))
    with raises(ShapeError, "index -1", "size 4"):
        read(x.gather(1, Tensor.from_data([[-1]], device)))
    with raises(ShapeError, "[2, 5]", "[3, 4]"):
        x.gather(0, Tensor.zeros((2, 5), device, int64))
    with raises(ShapeError, "[2, 2]", "[2, 3]"):
        x.scatter_add(0, Tensor.zeros((2, 2), device, int64), zeros(device, 2, 3))


def test_select_shapes(device):
    x = zeros(device, 3, 4)
    with raises(ShapeError, "index 4", "size 4"):
        read(x.select(1, [0, 4]))
    with raises(ShapeError, "[2, 2]"):
        x.select(0, Tensor.zeros((2, 2), device, int64))
    with raises(ShapeError, "[2, 4]", "[3, 4]"):
        x.select_add(0, [0, 1, 2], zeros(device, 2, 4))


def test_mask_shape(device):
    with raises(ShapeError, "[3]", "[2, 2]"):
        zeros(device, 2, 2).mask_fill(zeros(device, 3, dtype=bool_), 1.0)
    with raises(ShapeError, "[3]", "[2]"):
        burnish.where(zeros(device, 3, dtype=bool_), zeros(device, 2), 0.0)


def test_split_chunk_narrow(device):
    x = zeros(device, 5, 2)
    with raises(ShapeError, "[2, 2]", "5"):
        x.split([2, 2])
    with raises(ShapeError, "[4, 7)", "size 5"):
        x.narrow(0, 4, 3)
    with raises(ShapeError, "0"):
        x.chunk(0)


def test_squeeze_of_wide_dim(device):
    with raises(ShapeError, "dim 1", "[2, 3]", "size 3"):
        zeros(device, 2, 3).squeeze(1)


def test_reduction_of_empty(device):
    with raises(ShapeError, "[0, 3]"):
        zeros(device, 0, 3).max()
    with raises(ShapeError, "[0, 3]"):
        zeros(device, 0, 3).argmin(0)


# -- module ops -----------------------------------------------------------------------------------


def test_conv_weight_must_fit(device):
    x = zeros(device, 1, 4, 8, 8)
    with raises(ShapeError, "[1, 4, 8, 8]", "[2, 3, 3, 3]"):
        F.conv2d(x, zeros(device, 2, 3, 3, 3))
    with raises(ShapeError, "groups=3"):
        F.conv2d(x, zeros(device, 3, 1, 3, 3), groups=3)
    with raises(ShapeError, "[2]", "[3]"):
        F.conv2d(x, zeros(device, 2, 4, 3, 3), zeros(device, 3))
    with raises(ShapeError, "4 dims", "[2, 4, 3]"):
        F.conv2d(x, zeros(device, 2, 4, 3))


def test_conv_input_dims(device):
    with raises(ShapeError, "conv2d", "[4, 8, 8]"):
        F.conv2d(zeros(device, 4, 8, 8), zeros(device, 2, 4, 3, 3))
    with raises(ShapeError, "[3, 3]", "[2, 2]"):
        F.conv2d(zeros(device, 1, 1, 2, 2), zeros(device, 1, 1, 3, 3))


def test_conv_transpose_checks(device):
    x = zeros(device, 1, 4, 5)
    with raises(ShapeError, "[1, 4, 5]", "[3, 2, 3]"):
        F.conv_transpose1d(x, zeros(device, 3, 2, 3))
    with raises(ShapeError, "output_padding 2", "stride (2)"):
        F.conv_transpose1d(x, zeros(device, 4, 2, 3), stride=2, output_padding=2)


def test_pool_checks(device):
    x = zeros(device, 1, 1, 4, 4)
    with raises(ShapeError, "kernel [5, 5]", "[4, 4]"):
        F.max_pool2d(x, 5)
    with raises(ShapeError, "padding 2", "kernel size 3"):
        F.avg_pool2d(x, 3, padding=2)
    with raises(ShapeError, "stride", "-1"):
        F.avg_pool2d(x, 2, stride=-1)
    with raises(ShapeError, "[1, 1, 0, 4]"):
        F.adaptive_avg_pool2d(zeros(device, 1, 1, 0, 4), 2)


def test_interpolate_checks(device):
    x = zeros(device, 1, 1, 4, 4)
    with pytest.raises(ValueError, match="area"):
        F.interpolate(x, size=(2, 2), mode="area")
    with pytest.raises(ValueError, match="exactly one"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, size=2, align_corners=True)
    with raises(ShapeError, "interpolate", "[1, 4, 4]"):
        F.interpolate(zeros(device, 1, 4, 4), size=2)


def test_embedding_checks(device):
    weights = zeros(device, 5, 3)
    with raises(ShapeError, "index 5", "size 5"):
        read(F.embedding(weights, Tensor.from_data([0, 5], device)))
    with raises(ShapeError, "[5]"):
        F.embedding(zeros(device, 5), Tensor.from_data([0], device))


def test_unfold_checks(device):
    with raises(ShapeError, "[3, 3]", "[2, 2]"):
        F.unfold(zeros(device, 1, 1, 2, 2), 3)


# -- dtypes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["__add__", "__sub__", "__mul__", "matmul"])
def test_arithmetic_on_bools(device, op):
    x = zeros(device, 2, 2, dtype=bool_)
    with raises(DTypeError, "bool"):
        getattr(x, op)(x)


def test_logic_on_floats(device):
    x = zeros(device, 2)
    with raises(DTypeError, "float32", "int64"):
        x & Tensor.zeros((2,), device, int64)
    with raises(DTypeError, "float32"):
        x.logical_not()


def test_numeric_ops_on_bools(device):
    x = zeros(device, 2, dtype=bool_)
    with raises(DTypeError, "neg", "bool"):
        x.neg()
    with raises(DTypeError, "clamp", "bool"):
        x.clamp(0, 1)


def test_masks_must_be_bool(device):
    x = zeros(device, 2)
    with raises(DTypeError, "mask", "int64"):
        x.mask_fill(Tensor.zeros((2,), device, int64), 1.0)
    with raises(DTypeError, "mask", "float32"):
        burnish.where(x, x, x)


def test_indices_must_be_int(device):
    x = zeros(device, 3, 2)
    with raises(DTypeError, "indices", "float32"):
        x.gather(0, zeros(device, 3, 2))
    with raises(DTypeError, "indices", "float32"):
        x.select(0, zeros(device, 2))
    with raises(DTypeError, "indices", "float32"):
        F.embedding(x, zeros(device, 2))


@pytest.mark.requires_dtype(float64)
def test_conv_dtypes_must_match(device):
    with raises(DTypeError, "float32", "float64"):
        F.conv1d(zeros(device, 1, 1, 4), Tensor.zeros((1, 1, 2), device, float64))


def test_module_ops_need_floats(device):
    ints = Tensor.zeros((1, 1, 4, 4), device, int64)
    with raises(DTypeError, "conv2d", "int64"):
        F.conv2d(ints, Tensor.zeros((1, 1, 2, 2), device, int64))
    with raises(DTypeError, "max_pool2d", "int64"):
        F.max_pool2d(ints, 2)
    with raises(DTypeError, "interpolate", "int64"):
        F.interpolate(ints, size=2)


def test_unknown_dtype_names(device):
    with raises(DTypeError, "float8", "float32"):
        zeros(device, 2).cast("float8")


# Names, not DTypes: the plugin would skip a DType parameter the device lacks, and refusing it
# is exactly what is tested here.
@pytest.mark.parametrize("name", [d.name for d in ALL])
def test_each_dtype_works_or_is_refused(device, backend, name):
    dtype = get_dtype(name)
    if dtype in backend.dtypes(device):
        assert_equal(Tensor.zeros((2,), device, dtype), np.zeros(2, dtype.numpy), dtype)
        return
    with raises(UnsupportedError, dtype.name, backend.name):
        Tensor.zeros((2,), device, dtype)
    with raises(UnsupportedError, dtype.name, backend.name):
        zeros(device, 2).cast(dtype)


def test_foreign_backend_refuses_its_missing_dtypes(foreign):
    with raises(UnsupportedError, "float16", "foreign", "float32, int64, bool"):
        Tensor.zeros((2,), foreign, float16)


# -- devices --------------------------------------------------------------------------------------

OPERATIONS = {
    "add": lambda a, b: a + b,
    "compare": lambda a, b: a > b,
    "matmul": lambda a, b: a @ b,
    "cat": lambda a, b: burnish.cat([a, b]),
    "where": lambda a, b: burnish.where(a > 0, a, b),
    "maximum": lambda a, b: a.maximum(b),
    "slice_assign": lambda a, b: a.slice_assign([slice(0, 4)], b),
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_tensors_on_different_backends(device, foreign, name):
    mine = Tensor.from_data([1.0, 2.0, 3.0, 4.0], device)
    theirs = Tensor.from_data([1.0, 2.0, 3.0, 4.0], foreign)
    with raises(DeviceError, repr(device), repr(foreign)):
        OPERATIONS[name](mine, theirs)


def test_indices_on_another_backend(device, foreign):
    x = zeros(device, 3, 2)
    indices = Tensor.from_data([[0, 1]], foreign)
    with raises(DeviceError, repr(device), repr(foreign)):
        x.gather(0, indices)
    with raises(DeviceError, repr(device), repr(foreign)):
        x.mask_fill(Tensor.from_data([True, False], foreign), 1.0)


def test_conv_weight_on_another_backend(device, foreign):
    with raises(DeviceError, repr(device), repr(foreign)):
        F.conv1d(zeros(device, 1, 1, 4), Tensor.zeros((1, 1, 2), foreign, float32))


def test_tensors_on_two_devices_of_the_backend(backend, device):
    others = [d for d in backend.devices() if d != device]
    if not others:
        pytest.skip(f"backend {backend.name!r} has only one device ({device})")
    other = others[0]
    with raises(DeviceError, repr(device), repr(other)):
        zeros(device, 2) + Tensor.zeros((2,), other, float32)
    moved = Tensor.from_data([1.0, 2.0], device).to_device(other)
    assert moved.device == other and moved.tolist() == [1.0, 2.0]


def test_moving_between_backends_copies_values(device, foreign):
    values = sample((3, 4), float32)
    there = Tensor.from_numpy(values, device).to_device(foreign)
    assert there.device == foreign
    back = there.to_device(device)
    assert back.device == device and np.array_equal(back.to_numpy(), values)


def test_unknown_device_and_backend(backend):
    with raises(DeviceError, backend.name, "99"):
        burnish.Tensor.zeros((1,), f"{backend.name}:99")
    with raises(BackendNotInstalledError, "no-such-backend"):
        burnish.backend("no-such-backend")
