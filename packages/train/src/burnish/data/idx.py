"""Reading IDX files (MNIST's format): a magic number, big-endian dimensions, then the values."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from .errors import DataError

# The third byte of the magic number names the element type; values are big-endian.
IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in the IDX file at ``path``, gzipped or plain (told by its first bytes).

    Raises DataError when the header is not IDX or the size disagrees with the dimensions."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return parse_idx(raw, str(path))


def parse_idx(raw: bytes, name: str = "<bytes>") -> np.ndarray:
    """The array stored in the IDX bytes ``raw`` (``name`` is for error messages)."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_DTYPES:
        raise DataError(f"{name} is not an IDX file (header {raw[:4].hex() or 'empty'})")
    dtype = IDX_DTYPES[raw[2]]
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{name} ends inside its header ({len(raw)} bytes, {ndim} dims)")
    shape = tuple(int(n) for n in np.frombuffer(raw, ">u4", ndim, 4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise DataError(
            f"{name} holds {len(raw)} bytes, but its shape {list(shape)} of {dtype} needs "
            f"{expected}"
        )
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))
