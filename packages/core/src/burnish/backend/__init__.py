"""The backend protocol: everything a backend implements, one file per kind of operation.

``Backend`` is the class a backend derives from. The methods marked abstract are required; all
others have defaults written through the required ones, which a backend overrides for speed.
"""

from __future__ import annotations

from burnish.backend.activation_ops import ActivationOps
from burnish.backend.attention_ops import AttentionOps
from burnish.backend.autodiff_ops import AutodiffOps
from burnish.backend.base import BackendBase, Primitive, Scalar
from burnish.backend.bool_ops import BoolOps
from burnish.backend.float_ops import FloatOps
from burnish.backend.int_ops import IntOps
from burnish.backend.layout_ops import LayoutOps, Ranges
from burnish.backend.module_ops import ModuleOps
from burnish.backend.numeric_ops import NumericOps
from burnish.backend.optim_ops import OptimOps
from burnish.backend.quant_ops import QuantizedPrimitive, QuantOps
from burnish.backend.recurrent_ops import RecurrentOps


class Backend(
    BackendBase, LayoutOps, NumericOps, FloatOps, IntOps, BoolOps, ModuleOps, ActivationOps,
    AttentionOps, OptimOps, RecurrentOps, QuantOps,
):
    """The whole protocol. Subclass it, implement the abstract methods, register it (plugins)."""

    def __repr__(self) -> str:
        return f"Backend({self.name})"


def required_ops() -> list[str]:
    """The names of the ops a backend must implement itself."""
    return sorted(Backend.__abstractmethods__)


__all__ = [
    "ActivationOps", "AttentionOps", "AutodiffOps", "Backend", "BackendBase", "BoolOps",
    "FloatOps", "IntOps", "LayoutOps", "ModuleOps", "NumericOps", "OptimOps", "Primitive",
    "QuantOps", "QuantizedPrimitive", "Ranges", "RecurrentOps", "Scalar", "required_ops",
]
