"""Checked decoding of one stored tensor (dtype name, shape, raw bytes) into TensorData."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from burnish.dtype import DType, get_dtype
from burnish.errors import DTypeError, RecordError
from burnish.tensor_data import TensorData

#: More dims than any real tensor has; a larger count is a corrupt or hostile file.
MAX_NDIM = 64


def check_dtype(name: Any, path: str) -> DType:
    """The DType a file names for tensor ``path``; RecordError for anything else."""
    if not isinstance(name, str):
        raise RecordError(f"tensor {path!r} has dtype {name!r}, not a dtype name")
    try:
        return get_dtype(name)
    except DTypeError as error:
        raise RecordError(f"tensor {path!r}: {error}") from None


def check_shape(shape: Any, path: str) -> tuple[int, ...]:
    """The shape a file gives tensor ``path`` as a tuple of ints; RecordError unless it is a list
    of at most MAX_NDIM non-negative ints."""
    if not isinstance(shape, list | tuple) or len(shape) > MAX_NDIM:
        raise RecordError(f"tensor {path!r} has shape {shape!r}, not a list of sizes")
    if not all(type(size) is int and size >= 0 for size in shape):
        raise RecordError(f"tensor {path!r} has shape {list(shape)!r} with a non-size entry")
    return tuple(shape)


def nbytes(dtype: DType, shape: tuple[int, ...]) -> int:
    """Byte count of a tensor; Python ints, so a hostile shape cannot overflow it."""
    return math.prod(shape) * dtype.itemsize


def decode_tensor(dtype_name: Any, shape: Any, data: Any, path: str) -> TensorData:
    """TensorData owning a copy of ``data`` (little-endian, C order), after checking every claim
    the file makes about it: the dtype is known, the shape is sane, the byte count matches (checked
    before anything is allocated) and bool bytes are 0 or 1."""
    dtype = check_dtype(dtype_name, path)
    dims = check_shape(shape, path)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RecordError(f"tensor {path!r} holds {type(data).__name__} where bytes belong")
    expected = nbytes(dtype, dims)
    if len(data) != expected:
        raise RecordError(
            f"tensor {path!r} ({dtype}, shape {list(dims)}) needs {expected} bytes, "
            f"the file holds {len(data)}"
        )
    array = np.frombuffer(data, dtype=dtype.numpy.newbyteorder("<")).reshape(dims)
    if dtype.is_bool and array.view(np.uint8).max(initial=0) > 1:
        raise RecordError(f"tensor {path!r} is bool but holds bytes other than 0 and 1")
    # A bytearray is this tensor's own buffer (safetensors hands out one per tensor): keep it.
    # Anything else may be a view of the whole file: copy it, so that the tensor is writable and
    # does not keep the file's bytes alive.
    owned = type(data) is bytearray
    return TensorData(array.astype(dtype.numpy, copy=not owned), dtype)


def encode_tensor(data: TensorData) -> tuple[str, list[int], bytes]:
    """(dtype name, shape, little-endian C-order bytes) of a tensor, as the formats store it."""
    return data.dtype.name, list(data.shape), data.as_bytes()
