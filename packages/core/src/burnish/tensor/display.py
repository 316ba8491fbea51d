"""How a tensor prints: its values (summarised when large), shape, device, backend and dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from burnish.tensor.tensor import Tensor

#: Tensors with more elements than this print a summary (first and last values of each dim).
SUMMARY_THRESHOLD = 1000


def format_tensor(tensor: Tensor) -> str:
    """Burn's layout::

        Tensor {
          data:
        [[3.0, 4.0],
         [5.0, 6.0]],
          shape:  [2, 2],
          device:  cpu:0,
          backend:  "ndarray",
          kind:  "Float",
          dtype:  "float32",
        }
    """
    values = tensor.to_numpy()
    float_format = _float
    if tensor.dtype.name == "bfloat16":
        # NumPy cannot find bfloat16's shortest text; its 8 significant bits need 3 digits.
        values = values.astype(np.float32)
        float_format = _bfloat
    data = np.array2string(
        values, separator=", ", threshold=SUMMARY_THRESHOLD, edgeitems=3,
        formatter={"bool": lambda v: "true" if v else "false", "float_kind": float_format},
    )
    return (
        "Tensor {\n"
        f"  data:\n{data},\n"
        f"  shape:  {tensor.shape},\n"
        f"  device:  {tensor.device},\n"
        f"  backend:  \"{tensor.backend.name}\",\n"
        f"  kind:  \"{tensor.kind.value.capitalize()}\",\n"
        f"  dtype:  \"{tensor.dtype.name}\",\n"
        "}"
    )


def _float(value: np.floating) -> str:
    """The shortest text that reads back as ``value`` in its dtype: ``3.0``, ``0.1``, ``1e-08``."""
    magnitude = abs(float(value))
    if magnitude != 0.0 and (magnitude >= 1e16 or magnitude < 1e-4) and np.isfinite(value):
        return np.format_float_scientific(value, unique=True, trim="-")
    return np.format_float_positional(value, unique=True, trim="0")


def _bfloat(value: np.floating) -> str:
    magnitude = abs(float(value))
    if magnitude != 0.0 and (magnitude >= 1e16 or magnitude < 1e-4) and np.isfinite(value):
        return np.format_float_scientific(value, precision=2, unique=True, trim="-")
    return np.format_float_positional(value, precision=3, unique=True, fractional=False,
                                      trim="0")
