"""ONNX's training operators (``ai.onnx.preview.training``) on burnish tensors: one step of
Adagrad, Adam and Momentum for any number of tensors, each returning the updated tensors and
their optimizer states."""

from __future__ import annotations

from collections.abc import Sequence

import burnish as bn
from burnish import Tensor


def _groups(tensors: Sequence[Tensor], count: int) -> list[list[Tensor]]:
    """The variadic inputs ``X1..Xn, G1..Gn, ...`` as ``count`` lists of n."""
    n = len(tensors) // count
    return [list(tensors[k * n:(k + 1) * n]) for k in range(count)]


def adagrad(rate: Tensor, step: Tensor, *tensors: Tensor, decay_factor: float = 0.0,
            epsilon: float = 0.0, norm_coefficient: float = 0.0) -> tuple[Tensor, ...]:
    """ONNX Adagrad: inputs ``X..., G..., H...``, outputs ``X_new..., H_new...``."""
    xs, gs, hs = _groups(tensors, 3)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        r = rate.cast(x.dtype) / (step.cast(x.dtype) * decay_factor + 1)
        regularized = x * norm_coefficient + g
        h = h + regularized * regularized
        new_x.append(x - r * regularized / (h.sqrt() + epsilon))
        new_h.append(h)
    return (*new_x, *new_h)


def adam(rate: Tensor, step: Tensor, *tensors: Tensor, alpha: float = 0.9,
         beta: float = 0.999, epsilon: float = 0.0, norm_coefficient: float = 0.0,
         norm_coefficient_post: float = 0.0) -> tuple[Tensor, ...]:
    """ONNX Adam: inputs ``X..., G..., V..., H...``, outputs ``X_new..., V_new...,
    H_new...``; the rate is bias-corrected once ``step`` is positive."""
    xs, gs, vs, hs = _groups(tensors, 4)
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        t = step.cast(x.dtype)
        r = rate.cast(x.dtype)
        corrected = r * (1 - beta ** t).sqrt() / (1 - alpha ** t)
        r = bn.where(step > 0, corrected, r)
        regularized = x * norm_coefficient + g
        v = v * alpha + regularized * (1 - alpha)
        h = h * beta + regularized * regularized * (1 - beta)
        updated = x - r * (v / (h.sqrt() + epsilon))
        new_x.append(updated * (1 - norm_coefficient_post))
        new_v.append(v)
        new_h.append(h)
    return (*new_x, *new_v, *new_h)


def momentum(rate: Tensor, step: Tensor, *tensors: Tensor, alpha: float, beta: float,
             mode: str = "standard", norm_coefficient: float = 0.0) -> tuple[Tensor, ...]:
    """ONNX Momentum (``standard`` or ``nesterov``): inputs ``X..., G..., V...``, outputs
    ``X_new..., V_new...``; the first step (``step`` 0) takes the whole gradient."""
    xs, gs, vs = _groups(tensors, 3)
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        r = rate.cast(x.dtype)
        regularized = x * norm_coefficient + g
        scale = bn.where(step > 0, Tensor.full_like(r, beta), r.ones_like())
        v = v * alpha + regularized * scale
        if mode == "nesterov":
            new_x.append(x - r * (regularized + v * alpha))
        else:
            new_x.append(x - r * v)
        new_v.append(v)
    return (*new_x, *new_v)
