"""Making tensors in generated code: constants, parameters, devices, dtypes and casts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish.nn import Param

#: burnish dtypes by the names generated code uses.
DTYPES = {dtype.name: dtype for dtype in bn.dtype.ALL_DTYPES}


def dtype(name: str) -> bn.DType:
    """The burnish dtype called ``name`` (``"float32"``, ``"int64"``, ``"bool"``...)."""
    return DTYPES[name]


def device_of(module: Any, *tensors: Any) -> bn.Device:
    """Where forward makes its constants: the first input's device, else the first
    parameter's, else the default device."""
    for tensor in tensors:
        if isinstance(tensor, Tensor):
            return tensor.device
    params = module.params() if hasattr(module, "params") else []
    return params[0].device if params else bn.default_device()


def const(values: Any, dtype_name: str, device: Any, shape: Sequence[int] | None = None
          ) -> Tensor:
    """A constant tensor of ``dtype_name`` from a scalar or a flat list (``shape`` given when
    it is not 1-d)."""
    target = DTYPES[dtype_name]
    numpy_type = np.float32 if dtype_name == "bfloat16" else np.dtype(
        "bool" if dtype_name == "bool" else dtype_name)
    array = np.array(values, dtype=numpy_type)
    if shape is not None:
        array = array.reshape(shape)
    return Tensor.from_data(array, device=device).cast(target)


def param(shape: Sequence[int], dtype_name: str, device: Any, frozen: bool = False) -> Param:
    """A parameter of ``shape`` (zeros until the imported weights are loaded); ``frozen``, it
    is recorded but never trained (an int or bool constant of the model, held as float32 and
    given its dtype by ``cast`` in forward)."""
    return Param(Tensor.zeros(list(shape), device, DTYPES[dtype_name]),
                 require_grad=not frozen)


def ints(tensor: Tensor | None) -> list[int] | None:
    """A small int tensor (a shape, axes) read as a Python list."""
    if tensor is None:
        return None
    return [int(v) for v in np.asarray(tensor.to_numpy()).reshape(-1)]


def floats(tensor: Tensor | None) -> list[float] | None:
    """A small float tensor (scales, a region) read as a Python list; None when empty."""
    if tensor is None or tensor.numel() == 0:
        return None
    return [float(v) for v in np.asarray(tensor.to_numpy()).reshape(-1)]


def scalar(tensor: Tensor | None) -> Any:
    """A one-element tensor read as a Python number (None stays None)."""
    if tensor is None:
        return None
    return np.asarray(tensor.to_numpy()).reshape(-1)[0].item()


#: The float8 formats whose casts saturate (ONNX's ``saturate`` attribute, on by default).
SATURATING = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def cast(x: Tensor, dtype_name: str, saturate: bool = True, round_mode: str = "up") -> Tensor:
    """ONNX Cast: floats to ints truncate toward zero, anything to bool is ``!= 0``; to a
    float8 format with ``saturate``, values beyond its largest finite one (infinities
    included) become that value, NaN stays NaN; without it they become NaN (or infinity
    where the format has one). To float8_e8m0fnu, see ``to_e8m0``."""
    target = DTYPES[dtype_name]
    if target is x.dtype:
        return x
    if target is bn.bool_ and x.kind is not bn.Kind.BOOL:
        return x != 0
    if target is bn.float8_e8m0fnu:
        return to_e8m0(x, saturate, round_mode)
    if saturate and dtype_name in SATURATING and x.kind is not bn.Kind.BOOL:
        largest = float(bn.dtype.finfo(target).max)
        if x.dtype.is_float:
            x = x.clamp(min=-largest, max=largest)
        elif float(bn.dtype.iinfo(x.dtype).max) > largest:
            x = x.clamp(min=-int(largest) if x.dtype.signed else 0, max=int(largest))
    return x.cast(target)


def cast_like(x: Tensor, like: Tensor, saturate: bool = True, round_mode: str = "up") -> Tensor:
    """ONNX CastLike: ``x`` in ``like``'s dtype."""
    return cast(x, like.dtype.name, saturate, round_mode)


def to_e8m0(x: Tensor, saturate: bool = True, round_mode: str = "up") -> Tensor:
    """ONNX's cast to float8_e8m0fnu: the power of two whose exponent is that of ``|x|`` as a
    float32, rounded ``"up"`` (any fraction bumps it), ``"down"`` or to ``"nearest"`` (ties
    to even); infinities and NaN become NaN, zero and float32 subnormals the smallest value
    (2**-127); with ``saturate`` no rounding passes the largest value (2**127). Computed on
    the host from the float32 bits (the dtype exists on the host backend only)."""
    bits = host(x.cast(bn.float32)).copy().view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "up":
        bump = (bits & 0x7FFFFF) > 0
    elif round_mode == "nearest":
        guard, rest = (bits & 0x400000) > 0, (bits & 0x3FFFFF) > 0
        bump = guard & (rest | (exponent > 0))
    elif round_mode == "down":
        bump = np.zeros(bits.shape, dtype=bool)
    else:
        raise ValueError(f"Cast round_mode {round_mode!r}: expected 'up', 'down' or 'nearest'")
    bump &= ~special
    if saturate:
        bump &= exponent != 0xFE
    codes = np.where(special, 0xFF, exponent + bump).astype(np.uint8)
    return Tensor.from_data(codes.view(bn.float8_e8m0fnu.numpy), device=x.device)


def bitcast(x: Tensor, dtype_name: str) -> Tensor:
    """ONNX BitCast: the bits of ``x`` read as ``dtype_name``, whose width must equal x's.
    Done on the host: no backend op reinterprets memory, and no gradient crosses it."""
    target = DTYPES[dtype_name]
    if target.bits != x.dtype.bits:
        raise bn.DTypeError(f"BitCast from {x.dtype} ({x.dtype.bits} bits) to {target} "
                            f"({target.bits} bits): the widths differ")
    array = host(x).copy().view(target.numpy)
    return Tensor.from_data(array, device=x.device)


def host(tensor: Tensor) -> np.ndarray:
    """A tensor's values on the host: for index computations whose result sizes depend on the
    data (NonZero, Compress, scatter positions); never for float math that gradients cross."""
    return np.asarray(tensor.to_numpy())
