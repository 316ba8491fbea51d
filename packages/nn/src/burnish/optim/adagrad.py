"""AdaGrad: steps divided by the root of every squared gradient so far."""

from __future__ import annotations

from burnish import Tensor
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State, step_count


class AdaGrad(Optimizer):
    """PyTorch's Adagrad with Burn's defaults: ``g += weight_decay * p``; ``s += g^2``;
    ``p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + epsilon)`` at step ``t`` (from 1)."""

    def __init__(self, lr_decay: float = 0.0, epsilon: float = 1e-5, weight_decay: float = 0.0,
                 gradient_clipping: GradientClipping | None = None):
        super().__init__(gradient_clipping)
        self.lr_decay = lr_decay
        self.epsilon = epsilon
        self.weight_decay = weight_decay

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        if self.weight_decay:
            grad = grad + value * self.weight_decay
        t = step_count(state, value)
        total = state.get("sum")
        total = grad * grad if total is None else total + grad * grad
        state["sum"] = total
        rate = lr / (1.0 + (t - 1) * self.lr_decay)
        return value - grad / (total.sqrt() + self.epsilon) * rate
