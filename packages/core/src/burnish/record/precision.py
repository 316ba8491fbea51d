"""Precision settings: which float dtype a record's tensors are stored in, and loaded as."""

from __future__ import annotations

from typing import Any

from burnish.dtype import DType, float16, float32, float64, get_dtype
from burnish.errors import DTypeError, RecordError
from burnish.tensor_data import TensorData

#: A precision setting: ``"full"``, ``"half"``, or a float dtype (``"bfloat16"``, ``float32``).
Precision = str | DType


def setting_name(precision: Precision) -> str:
    """The name a precision setting is recorded under in a file's metadata."""
    return precision if precision in ("full", "half") else float_dtype(precision).name


def float_dtype(precision: Precision) -> DType:
    """The float dtype that an explicit dtype setting names; RecordError for anything else."""
    try:
        dtype = get_dtype(precision)
    except DTypeError:
        raise RecordError(
            f"unknown precision {precision!r}; use 'full', 'half' or a float dtype name"
        ) from None
    if not dtype.is_float:
        raise RecordError(f"precision {precision!r} is not a float dtype; ints are never converted")
    return dtype


def target_dtype(dtype: DType, precision: Precision, *, loading: bool) -> DType:
    """The dtype a tensor of ``dtype`` gets under ``precision``; ints and bools keep theirs.

    ``"half"`` turns float32 and float64 into float16 (float16 and bfloat16 are half already).
    ``"full"`` keeps every float on save, and gives float32 on load (the default float dtype,
    Burn's full precision). A dtype converts every float to that dtype.
    """
    if not dtype.is_float:
        return dtype
    if precision == "half":
        return float16 if dtype in (float32, float64) else dtype
    if precision == "full":
        return float32 if loading else dtype
    return float_dtype(precision)


def convert(tree: Any, precision: Precision, *, loading: bool) -> Any:
    """The tree with every float leaf converted as ``precision`` says (see ``target_dtype``)."""
    if isinstance(tree, dict):
        return {key: convert(value, precision, loading=loading) for key, value in tree.items()}
    if isinstance(tree, list):
        return [convert(value, precision, loading=loading) for value in tree]
    data: TensorData = tree
    dtype = target_dtype(data.dtype, precision, loading=loading)
    return data if dtype is data.dtype else data.convert(dtype)
