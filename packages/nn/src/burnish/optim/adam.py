"""Adam and AdamW: adaptive moments, with L2 or decoupled weight decay."""

from __future__ import annotations

import math

from burnish import Tensor
from burnish import functional as F
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
        if "moment_1" not in state:  # zero moments give the first step's exact values
            state["moment_1"], state["moment_2"] = value.zeros_like(), value.zeros_like()
        # The bias corrections folded into two scalars (PyTorch's arrangement), so that the
        # whole update is one op (one kernel on the GPU backends); the moments are this
        # optimizer's own tensors, updated in place.
        root = math.sqrt(1.0 - self.beta_2**t)
        return F.adam_step(value, grad, state["moment_1"], state["moment_2"],
                           beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon * root,
                           step_size=lr * root / (1.0 - self.beta_1**t))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam step (Burn's default decay, 1e-4)."""

    decoupled = True

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-8,
                 weight_decay: float = 1e-4, gradient_clipping: GradientClipping | None = None):
        super().__init__(beta_1, beta_2, epsilon, weight_decay, gradient_clipping)
