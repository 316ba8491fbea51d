"""Normalizer: per-feature standardisation, fitted on a training split and applied to any."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Normalizer:
    """``(x - mean) / std`` per feature, the statistics fitted on training data only.

    ``Normalizer.fit(data)`` measures each feature of ``data`` (an array ``[items, features...]``;
    the statistics are taken over ``axis``, by default the first, so there is one mean and one
    standard deviation per feature). ``normalizer(x)`` standardises arrays whose trailing shape
    matches the features (float32 out); ``normalizer.inverse(y)`` undoes it (to report
    predictions in the target's own units). A constant feature (std 0) is only centred, not
    divided. NaN values are left out of the statistics and stay NaN: fill missing values first.
    Raises ValueError when ``data`` has no item or a shape does not match the statistics.
    """

    def __init__(self, mean: np.ndarray | Sequence[float], std: np.ndarray | Sequence[float]):
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.asarray(std, dtype=np.float64)
        if self.mean.shape != self.std.shape:
            raise ValueError(f"mean of shape {self.mean.shape} but std of shape {self.std.shape}")
        # A constant feature is centred only: dividing by 0 would make it NaN.
        self.scale = np.where(self.std > 0, self.std, 1.0)

    @classmethod
    def fit(cls, data: np.ndarray, axis: int | tuple[int, ...] = 0) -> Normalizer:
        """The normalizer of ``data``'s features: mean and (population) std over ``axis``."""
        data = np.asarray(data, dtype=np.float64)
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        if data.ndim == 0 or any(data.shape[a] == 0 for a in axes):
            raise ValueError(f"cannot fit a normalizer on data of shape {data.shape}: no item")
        return cls(np.nanmean(data, axis=axis), np.nanstd(data, axis=axis))

    def _check(self, data: np.ndarray) -> np.ndarray:
        data = np.asarray(data, dtype=np.float64)
        ndim = self.mean.ndim
        if ndim and data.shape[data.ndim - ndim:] != self.mean.shape:
            raise ValueError(f"data of shape {data.shape} does not end with the normalizer's "
                             f"feature shape {self.mean.shape}")
        return data

    def __call__(self, data: np.ndarray) -> np.ndarray:
        """``(data - mean) / std``, float32."""
        return ((self._check(data) - self.mean) / self.scale).astype(np.float32)

    def inverse(self, data: np.ndarray) -> np.ndarray:
        """``data * std + mean``, float32: standardised values back in the original units."""
        return (self._check(data) * self.scale + self.mean).astype(np.float32)

    def __repr__(self) -> str:
        return f"Normalizer(mean={self.mean.tolist()}, std={self.std.tolist()})"
