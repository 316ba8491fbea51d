"""Module quantization: ``Quantizer`` turns a model's Linear and Conv layers into quantized
ones (weights only, or weights and activations calibrated on sample batches), and ``save`` /
``load`` keep the integers in records."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from burnish import Tensor, record
from burnish import functional as F
from burnish.errors import RecordError
from burnish.nn.conv import PADDING_MODES, Conv
from burnish.nn.linear import Linear
from burnish.nn.module import Module
from burnish.nn.param import Param
from burnish.quantization import (
    PerBlock,
    PerChannel,
    PerTensor,
    QuantizedTensor,
    QuantScheme,
)
from burnish.quantization import conv as quantized_conv
from burnish.quantization import linear as quantized_linear
from burnish.record.tree import join

M = TypeVar("M", bound=Module)


class QuantizedLinear(Module):
    """``Linear`` with a quantized ``weight`` ``[d_input, d_output]``; with ``input_scheme``
    its input is quantized too (with the calibrated ``input_scales`` and
    ``input_zero_points``) before the product."""

    weight: QuantizedTensor
    bias: Param | None = None
    input_scheme: QuantScheme | None = None
    input_scales: Tensor | None = None
    input_zero_points: Tensor | None = None

    #: Records hold the calibrated input parameters beside the weight's parts.
    recorded_constants = ("input_scales", "input_zero_points")

    def forward(self, x: Tensor) -> Tensor:
        bias = None if self.bias is None else self.bias.val()
        return quantized_linear(_quantize_input(self, x), self.weight, bias)

    def __repr__(self) -> str:
        return _describe(self)


class QuantizedConv(Module):
    """``Conv`` (any number of spatial dims) with a quantized ``weight``; inputs quantized as
    ``QuantizedLinear``'s."""

    weight: QuantizedTensor
    bias: Param | None
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    padding_mode: str = "zeros"
    input_scheme: QuantScheme | None = None
    input_scales: Tensor | None = None
    input_zero_points: Tensor | None = None

    #: Records hold the calibrated input parameters beside the weight's parts.
    recorded_constants = ("input_scales", "input_zero_points")

    def forward(self, x: Tensor) -> Tensor:
        padding = self.padding
        if self.padding_mode != "zeros" and any(padding):
            pairs = [n for p in reversed(padding) for n in (p, p)]
            x = F.pad(x, pairs, mode=PADDING_MODES[self.padding_mode])
            padding = (0,) * len(padding)
        bias = None if self.bias is None else self.bias.val()
        return quantized_conv(_quantize_input(self, x), self.weight, bias, self.stride, padding,
                              self.dilation, self.groups)

    def __repr__(self) -> str:
        return _describe(self)


Quantized = QuantizedLinear | QuantizedConv


def _describe(layer: Quantized) -> str:
    inputs = "float inputs" if layer.input_scheme is None else f"inputs {layer.input_scheme}"
    bias = "" if layer.bias is None else ", bias"
    return (f"{type(layer).__name__}(weight {list(layer.weight.shape)}: {layer.weight.scheme}"
            f"{bias}; {inputs})")


def _quantize_input(layer: Quantized, x: Tensor) -> Tensor | QuantizedTensor:
    if layer.input_scheme is None:
        return x
    return x.quantize(layer.input_scheme, scales=layer.input_scales,
                      zero_points=layer.input_zero_points)


@dataclass(frozen=True)
class Quantizer:
    """How to quantize a model's ``Linear`` and ``Conv`` layers (others stay float).

    ``weights``: the weights' scheme. Its granularity is read per layer: ``PerChannel()`` is
    one scale per output feature or channel (axis 1 of a linear weight ``[d_input,
    d_output]``, axis 0 of a conv weight), ``PerBlock(size)`` blocks along the input dim
    (axis 0 of a linear weight, 1 of a conv weight), or per output channel for a layer whose
    input dim the size does not divide (an RGB model's first conv); the axes given are not
    used: each layer's scheme is on its ``weight.scheme``.
    ``activations``: ``None`` (weights only), or a per-tensor scheme for each layer's input,
    whose range comes from calibration batches: ``calibration="minmax"`` (the smallest and
    largest value seen) or ``"percentile"`` (the ``percentile``-th and ``100 - percentile``-th
    of each batch, averaged over the batches, which ignores rare outliers).
    """

    weights: QuantScheme = QuantScheme(granularity=PerChannel())
    activations: QuantScheme | None = None
    calibration: str = "minmax"
    percentile: float = 99.99

    def __post_init__(self) -> None:
        if self.calibration not in ("minmax", "percentile"):
            raise ValueError(f"calibration is 'minmax' or 'percentile', got "
                             f"{self.calibration!r}")
        if not 50.0 < self.percentile <= 100.0:
            raise ValueError(f"percentile lies in (50, 100], got {self.percentile}")
        if self.activations is not None and \
                not isinstance(self.activations.granularity, PerTensor):
            raise ValueError(f"activations are quantized per tensor; got "
                             f"{self.activations.granularity.describe()}")

    def quantize(self, module: M, calibration: Iterable[Any] | None = None,
                 forward: Callable[[Module, Any], Any] | None = None) -> M:
        """A copy of ``module`` whose Linear and Conv layers are quantized. With
        ``activations``, ``calibration`` is required: sample inputs (each passed as
        ``module(batch)``, or ``forward(module, batch)`` when given), run through the float
        model while each layer's inputs are observed. Raises ValueError when activations
        need calibration and none is given, or when no batch reached a layer."""
        if self.activations is None:
            return _replace(module, lambda layer, _: self._layer(layer, None))
        if calibration is None:
            raise ValueError("quantizing activations needs calibration batches: "
                             "quantize(model, calibration=[batch, ...])")
        observers: dict[str, _Observer] = {}

        def observe(layer: Module, path: str) -> Module:
            observers[path] = _Observer(layer, self)
            return observers[path]

        observed = _replace(module, observe)
        run = forward or (lambda model, batch: model(batch))
        for batch in calibration:
            run(observed, batch)
        unseen = [path for path, found in observers.items() if found.low is None]
        if unseen:
            raise ValueError(f"no calibration batch reached {', '.join(unseen)}")
        return _replace(module, lambda layer, path: self._layer(layer, observers[path]))

    def _layer(self, layer: Module, observer: _Observer | None) -> Module:
        if not isinstance(layer, Linear | Conv):
            raise TypeError(f"only Linear and Conv layers are quantized, not "
                            f"{type(layer).__name__}")
        is_linear = isinstance(layer, Linear)
        weight = layer.weight.val().detach()
        scheme = _layer_scheme(self.weights, tuple(weight.shape), is_linear)
        quantized = weight.quantize(scheme)
        bias = None if layer.bias is None else Param(layer.bias.val().detach(), layer.bias.id,
                                                     False)
        inputs: dict[str, Any] = {}
        if observer is not None and self.activations is not None:
            inputs = _input_params(self.activations, observer.range(), weight)
        if is_linear:
            return QuantizedLinear(quantized, bias, **inputs)
        conv: Conv = layer  # type: ignore[assignment]  # not a Linear
        return QuantizedConv(quantized, bias, conv.stride, conv.padding, conv.dilation,
                             conv.groups, conv.padding_mode, **inputs)


class _Observer(Module):
    """A layer run as it is, its inputs' range noted (calibration)."""

    def __init__(self, layer: Module, quantizer: Quantizer):
        self.layer = layer
        self.quantizer = quantizer
        self.low: float | None = None
        self.high: float | None = None
        self.lows: list[float] = []
        self.highs: list[float] = []

    def forward(self, x: Tensor) -> Tensor:
        values = x.to_numpy().astype(np.float32, copy=False).ravel()
        if self.quantizer.calibration == "minmax":
            low, high = float(values.min()), float(values.max())
            self.low = low if self.low is None else min(self.low, low)
            self.high = high if self.high is None else max(self.high, high)
        else:
            q = self.quantizer.percentile
            self.lows.append(float(np.percentile(values, 100.0 - q)))
            self.highs.append(float(np.percentile(values, q)))
            self.low, self.high = float(np.mean(self.lows)), float(np.mean(self.highs))
        return self.layer(x)

    def range(self) -> tuple[float, float]:
        assert self.low is not None and self.high is not None
        return self.low, self.high


def _layer_scheme(scheme: QuantScheme, shape: tuple[int, ...], is_linear: bool) -> QuantScheme:
    """The weight scheme with the layer's axes: per output channel, or blocks along the input
    dim (per output channel where the block size does not divide it)."""
    granularity = scheme.granularity
    output, inputs = (1, 0) if is_linear else (0, 1)
    if isinstance(granularity, PerChannel):
        granularity = PerChannel(output)
    elif isinstance(granularity, PerBlock):
        fits = shape[inputs] % granularity.size == 0
        granularity = PerBlock(granularity.size, inputs) if fits else PerChannel(output)
    return dataclasses.replace(scheme, granularity=granularity)


def _input_params(scheme: QuantScheme, observed: tuple[float, float], like: Tensor
                  ) -> dict[str, Any]:
    """The input's scheme, scales and zero points from an observed range, by the formulas of
    ``QuantScheme`` (as ``quantize`` computes them from a tensor's own range)."""
    low, high = min(observed[0], 0.0), max(observed[1], 0.0)
    qmin, qmax = scheme.range
    scale_dtype = scheme.scale_dtype.numpy
    if scheme.mode == "symmetric":
        scale = np.float32(max(-low, high)) / np.float32(scheme.symmetric_limit)
    else:
        scale = (np.float32(high) - np.float32(low)) / np.float32(qmax - qmin)
    stored = np.asarray(scale).astype(scale_dtype)
    stored = np.where(stored == 0, 1, stored).astype(scale_dtype)
    found: dict[str, Any] = {
        "input_scheme": scheme,
        "input_scales": Tensor.from_data(stored, device=like.device, dtype=scheme.scale_dtype),
    }
    if scheme.mode == "affine":
        point = np.clip(qmin - np.rint(np.float32(low) / stored.astype(np.float32)), qmin, qmax)
        found["input_zero_points"] = Tensor.from_data(
            np.asarray(point).astype(scheme.zero_point_dtype.numpy), device=like.device,
            dtype=scheme.zero_point_dtype)
    return found


def _replace(module: M, replace: Callable[[Any, str], Module],
             quantized: bool = False) -> M:
    """A copy of ``module`` with every Linear and Conv layer (and, with ``quantized``, every
    quantized one) replaced by ``replace(layer, path)``; containers are copied."""
    kinds: tuple[type, ...] = (Linear, Conv, QuantizedLinear, QuantizedConv) if quantized \
        else (Linear, Conv)

    def visit(value: Any, path: str) -> Any:
        if isinstance(value, kinds):
            return replace(value, path)
        if isinstance(value, Module):
            copy = object.__new__(type(value))
            for key, item in vars(value).items():
                copy.__dict__[key] = visit(item, join(path, key))
            return copy
        if isinstance(value, list):
            return [visit(item, join(path, str(i))) for i, item in enumerate(value)]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(visit(item, join(path, str(i))) for i, item in enumerate(value))
        if isinstance(value, dict):
            return {key: visit(item, join(path, key)) if isinstance(key, str) else item
                    for key, item in value.items()}
        return value

    return visit(module, "")


def _quantized_layers(module: Module) -> dict[str, Quantized]:
    found: dict[str, Quantized] = {}

    def visit(value: Any, path: str) -> None:
        if isinstance(value, QuantizedLinear | QuantizedConv):
            found[path] = value
        elif isinstance(value, Module):
            for key, item in vars(value).items():
                visit(item, join(path, key))
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                visit(item, join(path, str(i)))
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    visit(item, join(path, key))

    visit(module, "")
    return found


# -- records ------------------------------------------------------------------------------------


def save(module: Module, path: str | os.PathLike[str], format: str | None = None) -> Path:
    """Write ``module``'s record with its quantized layers' integers, scales and zero points
    (``<layer>.weight.values``, ``.weight.scales``, ``.weight.zero_points``,
    ``.input_scales``...) beside its float parameters, and each layer's schemes in the
    metadata (``"quantization"``). ``load`` reads it back."""
    schemes: dict[str, Any] = {}
    for layer_path, layer in _quantized_layers(module).items():
        weight = layer.weight
        schemes[layer_path] = {"weight": weight.scheme.to_dict(), "shape": list(weight.shape),
                               "input": None if layer.input_scheme is None else
                               layer.input_scheme.to_dict()}
    metadata = {"module": f"{type(module).__module__}.{type(module).__qualname__}",
                "quantization": schemes}
    # The parts are the module's own record (quantized tensors are recorded constants).
    return record.save(module.into_record(), path, format, "full", metadata)


def load(module: M, path: str | os.PathLike[str], format: str | None = None) -> M:
    """``module`` (the float model's architecture, or a quantized copy of it) with the layers
    the record at ``path`` quantized made quantized again, holding the record's integers,
    scales and zero points, and every float parameter loaded from it. Raises RecordError
    naming what does not fit: a layer the module lacks, a missing or mis-shaped part."""
    loaded = record.load(path, format)
    flat = record.flatten(loaded.tensors)
    schemes = loaded.metadata.user.get("quantization")
    if not isinstance(schemes, Mapping):
        raise RecordError(f"{path}: no 'quantization' metadata; save it with "
                          "burnish.nn.quant.save")

    def part(layer_path: str, name: str, like: Tensor, dtype: Any) -> Tensor:
        key = join(layer_path, name)
        if key not in flat:
            raise RecordError(f"{path}: the record has no {key!r}")
        return Tensor.from_data(flat[key].convert(dtype) if flat[key].dtype is not dtype
                                else flat[key], device=like.device, dtype=dtype)

    def rebuild(layer: Any, layer_path: str) -> Module:
        entry = schemes.get(layer_path)
        if entry is None:
            return layer
        try:
            scheme = QuantScheme.from_dict(entry["weight"])
            shape = [int(n) for n in entry["shape"]]
            input_scheme = None if entry["input"] is None else \
                QuantScheme.from_dict(entry["input"])
        except (KeyError, TypeError, ValueError) as error:
            raise RecordError(f"{path}: the quantization metadata of {layer_path!r} is "
                              f"malformed ({error})") from None
        like = layer.weight.val() if isinstance(layer, Linear | Conv) else layer.weight.values
        weight = QuantizedTensor.from_parts(
            part(layer_path, "weight.values", like, scheme.storage_dtype),
            part(layer_path, "weight.scales", like, scheme.scale_dtype),
            None if scheme.mode == "symmetric" else
            part(layer_path, "weight.zero_points", like, scheme.zero_point_dtype),
            scheme, shape)
        # The bias is a float parameter: load_record below fills it with the rest.
        bias = None if layer.bias is None else \
            Param(layer.bias.val().detach(), layer.bias.id, False)
        inputs: dict[str, Any] = {}
        if input_scheme is not None:
            inputs = {"input_scheme": input_scheme,
                      "input_scales": part(layer_path, "input_scales", like,
                                           input_scheme.scale_dtype)}
            if input_scheme.mode == "affine":
                inputs["input_zero_points"] = part(layer_path, "input_zero_points", like,
                                                   input_scheme.zero_point_dtype)
        if isinstance(layer, Linear | QuantizedLinear):
            return QuantizedLinear(weight, bias, **inputs)
        return QuantizedConv(weight, bias, layer.stride, layer.padding, layer.dilation,
                             layer.groups, layer.padding_mode, **inputs)

    quantized = _replace(module, rebuild, quantized=True)
    missing = [p for p in schemes if p not in _quantized_layers(quantized)]
    if missing:
        raise RecordError(f"{path}: the record quantizes {', '.join(missing)}, which "
                          f"{type(module).__name__} does not have")
    # The parts were read into the layers above, with their schemes' dtypes; the record's
    # other tensors (float parameters) fill the rest.
    return quantized.load_record(_dotted(flat))


def _dotted(flat: Mapping[str, Any]) -> dict[str, Any]:
    """A nested mapping from dotted keys (``layers.0.weight``)."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *parents, leaf = key.split(".")
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    return tree
