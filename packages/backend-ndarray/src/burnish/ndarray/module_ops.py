"""Neural-network module ops on NumPy arrays: convolutions, pools, interpolation, embedding.

The convolutions live in ``conv.py``, the pools in ``pool.py`` and resizing in
``interpolate.py``; this module joins them into the protocol's ``ModuleOps``.
"""

from __future__ import annotations

import numpy as np

from burnish.backend.module_ops import ModuleOps
from burnish.ndarray.conv import ConvOps
from burnish.ndarray.interpolate import InterpolateOps
from burnish.ndarray.pool import PoolOps


class NdArrayModuleOps(ConvOps, PoolOps, InterpolateOps, ModuleOps):
    """Module ops; inputs are ``[batch, channels, *spatial]``, channels first."""

    def embedding(self, weights: np.ndarray, indices: np.ndarray) -> np.ndarray:
        return np.take(weights, indices, axis=0)
