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
    if tensor.dtype.name == "bfloat16":
        values = values.astype(np.float32)
    data = np.array2string(
        values, separator=", ", threshold=SUMMARY_THRESHOLD, edgeitems=3,
        floatmode="maxprec_equal" if values.dtype.kind == "f" else "maxprec",
        formatter={"bool": lambda v: "true" if v else "false"},
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
