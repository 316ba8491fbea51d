"""Adan: adaptive Nesterov momentum from the gradient and its change between steps."""

from __future__ import annotations

import math

from burnish import Tensor
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State, step_count


class Adan(Optimizer):
    """Adan (Xie et al., 2022), as its reference implementation: with ``d = g - g_prev``
    (0 on the first step), ``m = b1 m + (1 - b1) g``, ``n = b2 n + (1 - b2) d``,
    ``v = b3 v + (1 - b3) (g + b2 d)^2``;
    ``u = (m / (1 - b1^t) + b2 n / (1 - b2^t)) / (sqrt(v / (1 - b3^t)) + epsilon)``;
    ``p = (p - lr u) / (1 + lr weight_decay)`` (the proximal decay), or with ``no_prox``
    ``p = p (1 - lr weight_decay) - lr u``."""

    def __init__(self, beta_1: float = 0.98, beta_2: float = 0.92, beta_3: float = 0.99,
                 epsilon: float = 1e-8, weight_decay: float = 0.0, no_prox: bool = False,
                 gradient_clipping: GradientClipping | None = None):
        super().__init__(gradient_clipping)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.beta_3 = beta_3
        self.epsilon = epsilon
        self.weight_decay = weight_decay
        self.no_prox = no_prox

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        b1, b2, b3 = self.beta_1, self.beta_2, self.beta_3
        t = step_count(state, value)
        previous = state.get("previous_grad")
        diff = grad.zeros_like() if previous is None else grad - previous
        mixed = grad + diff * b2
        m, n, v = (state.get(key) for key in ("moment", "moment_diff", "moment_2"))
        m = grad * (1 - b1) if m is None else m * b1 + grad * (1 - b1)
        n = diff * (1 - b2) if n is None else n * b2 + diff * (1 - b2)
        v = mixed * mixed * (1 - b3) if v is None else v * b3 + mixed * mixed * (1 - b3)
        state.update(moment=m, moment_diff=n, moment_2=v, previous_grad=grad)
        denominator = v.sqrt() * (1.0 / math.sqrt(1 - b3**t)) + self.epsilon
        step = (m * (1.0 / (1 - b1**t)) + n * (b2 / (1 - b2**t))) / denominator
        if self.weight_decay and self.no_prox:
            value = value * (1.0 - lr * self.weight_decay)
        value = value - step * lr
        if self.weight_decay and not self.no_prox:
            value = value * (1.0 / (1.0 + lr * self.weight_decay))
        return value
