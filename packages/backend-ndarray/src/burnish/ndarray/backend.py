"""``NdArrayBackend``: burnish's CPU backend on NumPy, every op of the protocol, every dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.backend import Backend
from burnish.ndarray.activation_ops import NdArrayActivationOps
from burnish.ndarray.base import NdArrayBase
from burnish.ndarray.bool_ops import NdArrayBoolOps
from burnish.ndarray.float_ops import NdArrayFloatOps
from burnish.ndarray.int_ops import NdArrayIntOps
from burnish.ndarray.layout_ops import NdArrayLayoutOps
from burnish.ndarray.module_ops import NdArrayModuleOps
from burnish.ndarray.numeric_ops import NdArrayNumericOps
from burnish.ndarray.optim_ops import NdArrayOptimOps
from burnish.ndarray.quant_ops import NdArrayQuantOps

if TYPE_CHECKING:
    from burnish.device import Device
    from burnish.ndarray.capture import NdArrayCapturer


class NdArrayBackend(
    NdArrayBase, NdArrayLayoutOps, NdArrayNumericOps, NdArrayFloatOps, NdArrayIntOps,
    NdArrayBoolOps, NdArrayModuleOps, NdArrayActivationOps, NdArrayOptimOps, NdArrayQuantOps,
    Backend,
):
    """The default backend: primitives are ``np.ndarray``, on one device, ``cpu:0``.

    Synchronous and single-device, so ``sync`` and ``to_device`` have nothing to do. Random
    numbers come from one ``np.random.Generator`` per backend, reseeded by ``seed``.
    """

    name = "ndarray"
    values_on_host = True

    def capturer(self, device: Device) -> NdArrayCapturer:
        """Capture and replay of the protocol calls (``burnish.ndarray.capture``)."""
        found = self.__dict__.get("_capturer")
        if found is None:
            from burnish.ndarray.capture import NdArrayCapturer

            found = self.__dict__["_capturer"] = NdArrayCapturer(self)
        return found
