"""Adam and AdamW: adaptive moments, with L2 or decoupled weight decay."""

from __future__ import annotations

import math

from burnish import Tensor
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State, step_count


class Adam(Optimizer):
    """Adam (Kingma & Ba): ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p -= lr * m̂ / (sqrt(v̂) + epsilon)`` with bias-corrected moments; ``weight_decay`` adds
    ``weight_decay * p`` to the gradient (L2)."""

    decoupled = False

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-8,
                 weight_decay: float = 0.0, gradient_clipping: GradientClipping | None = None):
        super().__init__(gradient_clipping)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay = weight_decay

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        if self.weight_decay and not self.decoupled:
            grad = grad + value * self.weight_decay
        if self.weight_decay and self.decoupled:
            value = value * (1.0 - lr * self.weight_decay)
        t = step_count(state, value)
        m = state.get("moment_1")
        v = state.get("moment_2")
        # The moments are this optimizer's own tensors: updated in place, as the backend allows
        # (PyTorch's arrangement; the same values as ``m * b1 + g * (1 - b1)``).
        if m is None:
            m = grad * (1.0 - self.beta_1)
        else:
            m.mul_(self.beta_1).add_(grad * (1.0 - self.beta_1))
        if v is None:
            v = grad * grad * (1.0 - self.beta_2)
        else:
            v.mul_(self.beta_2).add_((grad * grad).mul_(1.0 - self.beta_2))
        state["moment_1"], state["moment_2"] = m, v
        # lr m̂ / (sqrt(v̂) + eps) with the corrections folded into two scalars: five
        # full-size ops instead of seven (PyTorch's arrangement).
        root = math.sqrt(1.0 - self.beta_2**t)
        step_size = lr * root / (1.0 - self.beta_1**t)
        # ``value - step`` written as ``-step + value`` into the step's own memory: the same
        # bits (negation is exact), one full-size array fewer.
        return (m / v.sqrt().add_(self.epsilon * root)).mul_(-step_size).add_(value)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam step (Burn's default decay, 1e-4)."""

    decoupled = True

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-8,
                 weight_decay: float = 1e-4, gradient_clipping: GradientClipping | None = None):
        super().__init__(beta_1, beta_2, epsilon, weight_decay, gradient_clipping)
