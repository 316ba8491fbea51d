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


def cast(x: Tensor, dtype_name: str) -> Tensor:
    """ONNX Cast: floats to ints truncate toward zero, anything to bool is ``!= 0``."""
    target = DTYPES[dtype_name]
    if target is x.dtype:
        return x
    if target is bn.bool_ and x.kind is not bn.Kind.BOOL:
        return x != 0
    return x.cast(target)


def cast_like(x: Tensor, like: Tensor) -> Tensor:
    """ONNX CastLike: ``x`` in ``like``'s dtype."""
    return cast(x, like.dtype.name)


def host(tensor: Tensor) -> np.ndarray:
    """A tensor's values on the host: for index computations whose result sizes depend on the
    data (NonZero, Compress, scatter positions); never for float math that gradients cross."""
    return np.asarray(tensor.to_numpy())
