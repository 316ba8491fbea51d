"""Initializers: how a parameter's first values are drawn (Burn's ``Initializer`` enum)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from burnish import Distribution, Tensor
from burnish.device import Device
from burnish.dtype import DType
from burnish.nn.param import Param


@dataclass(frozen=True)
class Initializer:
    """Base of the initializers; ``Initializer.KaimingUniform(gain=...)`` and so on name them
    as Burn's enum does. ``fan_in`` and ``fan_out`` come from the layer (a linear layer's input
    and output sizes; a convolution's channels times its kernel size)."""

    kind: ClassVar[str] = ""
    kinds: ClassVar[dict[str, type[Initializer]]] = {}

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        Initializer.kinds[cls.kind] = cls
        setattr(Initializer, cls.__name__, cls)

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        """A tensor of ``shape`` drawn from this initializer."""
        raise NotImplementedError

    def init(self, shape: Sequence[int], device: Device | str | None = None,
             fan_in: int | None = None, fan_out: int | None = None,
             dtype: DType | str | None = None) -> Param:
        """A trainable parameter of ``shape`` drawn from this initializer."""
        return Param(self.tensor(shape, device, fan_in, fan_out, dtype))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Initializer:
        values = dict(values)
        kind = values.pop("kind", None)
        if kind not in Initializer.kinds:
            raise ValueError(f"unknown initializer {kind!r}; known: "
                             f"{', '.join(sorted(Initializer.kinds))}")
        return Initializer.kinds[kind](**values)


def _fan(op: str, fan: int | None) -> int:
    if fan is None:
        raise ValueError(f"{op} needs the layer's fan_in/fan_out")
    return fan


@dataclass(frozen=True)
class Constant(Initializer):
    kind: ClassVar[str] = "constant"
    value: float = 0.0

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        return Tensor.full(shape, float(self.value), device, dtype)


@dataclass(frozen=True)
class Zeros(Initializer):
    kind: ClassVar[str] = "zeros"

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        return Tensor.zeros(shape, device, dtype)


@dataclass(frozen=True)
class Ones(Initializer):
    kind: ClassVar[str] = "ones"

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        return Tensor.ones(shape, device, dtype)


@dataclass(frozen=True)
class Uniform(Initializer):
    kind: ClassVar[str] = "uniform"
    min: float = 0.0
    max: float = 1.0

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        return Tensor.random(shape, Distribution.uniform(self.min, self.max), device, dtype)


@dataclass(frozen=True)
class Normal(Initializer):
    kind: ClassVar[str] = "normal"
    mean: float = 0.0
    std: float = 1.0

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        return Tensor.random(shape, Distribution.normal(self.mean, self.std), device, dtype)


@dataclass(frozen=True)
class KaimingUniform(Initializer):
    """Uniform on ``±gain * sqrt(3 / fan)``, fan being fan_in (or fan_out when
    ``fan_out_only``)."""

    kind: ClassVar[str] = "kaiming_uniform"
    gain: float = math.sqrt(2.0)
    fan_out_only: bool = False

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        fan = _fan("kaiming", fan_out if self.fan_out_only else fan_in)
        bound = self.gain * math.sqrt(3.0 / fan)
        return Tensor.random(shape, Distribution.uniform(-bound, bound), device, dtype)


@dataclass(frozen=True)
class KaimingNormal(Initializer):
    """Normal with std ``gain / sqrt(fan)``."""

    kind: ClassVar[str] = "kaiming_normal"
    gain: float = math.sqrt(2.0)
    fan_out_only: bool = False

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        fan = _fan("kaiming", fan_out if self.fan_out_only else fan_in)
        std = self.gain / math.sqrt(fan)
        return Tensor.random(shape, Distribution.normal(0.0, std), device, dtype)


@dataclass(frozen=True)
class XavierUniform(Initializer):
    """Uniform on ``±gain * sqrt(6 / (fan_in + fan_out))``."""

    kind: ClassVar[str] = "xavier_uniform"
    gain: float = 1.0

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        total = _fan("xavier", fan_in) + _fan("xavier", fan_out)
        bound = self.gain * math.sqrt(6.0 / total)
        return Tensor.random(shape, Distribution.uniform(-bound, bound), device, dtype)


@dataclass(frozen=True)
class XavierNormal(Initializer):
    """Normal with std ``gain * sqrt(2 / (fan_in + fan_out))``."""

    kind: ClassVar[str] = "xavier_normal"
    gain: float = 1.0

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        total = _fan("xavier", fan_in) + _fan("xavier", fan_out)
        std = self.gain * math.sqrt(2.0 / total)
        return Tensor.random(shape, Distribution.normal(0.0, std), device, dtype)


@dataclass(frozen=True)
class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``gain``, over the first dim against the rest flattened
    (Saxe et al.): the Q of a QR of Gaussian draws, signs fixed by R's diagonal."""

    kind: ClassVar[str] = "orthogonal"
    gain: float = 1.0

    def tensor(self, shape: Sequence[int], device: Device | str | None = None,
               fan_in: int | None = None, fan_out: int | None = None,
               dtype: DType | str | None = None) -> Tensor:
        shape = list(shape)
        if len(shape) < 2:
            raise ValueError(f"orthogonal needs at least 2 dims, got shape {shape}")
        rows, cols = shape[0], math.prod(shape[1:])
        # Drawn with burnish's generator, so burnish.seed makes it reproducible; the QR runs
        # once, at init time, in float64 NumPy.
        draws = Tensor.random([rows, cols], Distribution.normal(0, 1), device, "float64")
        flat = draws.to_numpy()
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        values = (self.gain * q).reshape(shape)
        return Tensor.from_data(values, device, dtype or "float32")
