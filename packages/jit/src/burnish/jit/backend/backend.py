"""``JitBackend``: the whole protocol from the mixins beside this module; a GPU backend
subclasses it and says how to find its devices (``JitBase._discover``)."""

from __future__ import annotations

from burnish.jit.backend.activation_ops import JitActivationOps
from burnish.jit.backend.attention_ops import JitAttentionOps
from burnish.jit.backend.base import JitBase
from burnish.jit.backend.bool_ops import JitBoolOps
from burnish.jit.backend.float_ops import JitFloatOps
from burnish.jit.backend.int_ops import JitIntOps
from burnish.jit.backend.layout_ops import JitLayoutOps
from burnish.jit.backend.module_ops import JitModuleOps
from burnish.jit.backend.numeric_ops import JitNumericOps
from burnish.jit.backend.optim_ops import JitOptimOps
from burnish.jit.backend.quant_ops import JitQuantOps
from burnish.jit.backend.recurrent_ops import JitRecurrentOps
from burnish.jit.backend.reduce_ops import JitReduceOps


class JitBackend(JitLayoutOps, JitNumericOps, JitReduceOps, JitFloatOps, JitIntOps, JitBoolOps,
                 JitModuleOps, JitActivationOps, JitAttentionOps, JitOptimOps, JitRecurrentOps,
                 JitQuantOps, JitBase):
    """Every op of the protocol as kernels of ``burnish.jit``, on any ``Runtime``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"
