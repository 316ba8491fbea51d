"""Position encodings: sinusoidal (added to embeddings) and rotary (RoPE, applied to q and k)."""

from __future__ import annotations

import numpy as np

from burnish import Device, Tensor, cat
from burnish.errors import ShapeError
from burnish.nn.config import Config
from burnish.nn.module import Module
from burnish.shape import show


def _check_even(d_model: int, op: str) -> None:
    if d_model % 2:
        raise ValueError(f"{op} needs an even d_model, got {d_model}")


def _check_input(x: Tensor, start: int, max_sequence_length: int, d_model: int, op: str) -> int:
    """The input's sequence length (dim -2), checked against the table."""
    if x.ndim < 2 or x.shape[-1] != d_model:
        raise ShapeError(f"{op}: input must be [..., seq, {d_model}], got {show(x.shape)}")
    seq = x.shape[-2]
    if start + seq > max_sequence_length:
        raise ShapeError(f"{op}: positions {start}..{start + seq - 1} pass the table's "
                         f"max_sequence_length {max_sequence_length}")
    return seq


class PositionalEncodingConfig(Config):
    d_model: int
    max_sequence_length: int = 5_000
    max_timescale: float = 10_000.0

    def init(self, device: Device | str | None = None) -> PositionalEncoding:
        _check_even(self.d_model, "PositionalEncoding")
        positions = np.arange(self.max_sequence_length, dtype=np.float64)[:, None]
        rates = self.max_timescale ** (-np.arange(0, self.d_model, 2) / self.d_model)
        table = np.empty((self.max_sequence_length, self.d_model))
        table[:, 0::2] = np.sin(positions * rates)
        table[:, 1::2] = np.cos(positions * rates)
        return PositionalEncoding(table)


class PositionalEncoding(Module):
    """Adds the sinusoids of "Attention Is All You Need" to ``[..., seq, d_model]`` inputs:
    ``pe[pos, 2i] = sin(pos / max_timescale^(2i / d_model))`` and ``cos`` at ``2i + 1``.

    The table is a constant (a NumPy array, never recorded nor trained), made into a tensor on
    the input's device and dtype at each call, so the module runs on any backend.
    """

    table: np.ndarray

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """``x`` plus the encodings of positions ``start, start + 1, ...``."""
        length, d_model = self.table.shape
        seq = _check_input(x, start, length, d_model, "positional encoding")
        return x + Tensor.from_data(self.table[start:start + seq], x.device, x.dtype)


class RotaryEncodingConfig(Config):
    d_model: int
    max_sequence_length: int = 4_096
    theta: float = 10_000.0

    def init(self, device: Device | str | None = None) -> RotaryEncoding:
        _check_even(self.d_model, "RotaryEncoding")
        positions = np.arange(self.max_sequence_length, dtype=np.float64)[:, None]
        angles = positions * self.theta ** (-np.arange(0, self.d_model, 2) / self.d_model)
        return RotaryEncoding(np.cos(angles), np.sin(angles))


class RotaryEncoding(Module):
    """Rotary position embedding (RoFormer, Su et al.), as Burn's ``RotaryEncoding``.

    Each pair of neighbouring features ``(x[2i], x[2i + 1])`` of a ``[..., seq, d_model]``
    input (usually one head's queries or keys, ``d_model`` being the head size) is rotated by
    the angle ``pos * theta^(-2i / d_model)``, so that the dot product of a rotated query and
    key depends on their distance only. Tables are NumPy constants, as in
    ``PositionalEncoding``.
    """

    cos: np.ndarray
    sin: np.ndarray

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """``x`` rotated for positions ``start, start + 1, ...`` (``start`` for decoding with
        a cache)."""
        length, half = self.cos.shape
        seq = _check_input(x, start, length, 2 * half, "rotary encoding")
        cos = Tensor.from_data(self.cos[start:start + seq, :, None], x.device, x.dtype)
        sin = Tensor.from_data(self.sin[start:start + seq, :, None], x.device, x.dtype)
        shape = x.dims()
        even, odd = x.reshape(shape[:-1] + [half, 2]).chunk(2, -1)
        rotated = cat([even * cos - odd * sin, even * sin + odd * cos], -1)
        return rotated.reshape(shape)
