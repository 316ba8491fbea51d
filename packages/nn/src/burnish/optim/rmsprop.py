"""RmsProp: gradients divided by a running root mean square, optionally centered, with momentum."""

from __future__ import annotations

from burnish import Tensor
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State


class RmsProp(Optimizer):
    """PyTorch's RMSprop with Burn's defaults: ``g += weight_decay * p``;
    ``v = alpha v + (1 - alpha) g^2``; ``centered`` also keeps ``a = alpha a + (1 - alpha) g``
    and uses ``v - a^2``; ``d = g / (sqrt(v) + epsilon)``; with ``momentum``,
    ``buf = momentum buf + d`` and ``p -= lr * buf``, else ``p -= lr * d``."""

    def __init__(self, alpha: float = 0.99, epsilon: float = 1e-5, momentum: float = 0.0,
                 centered: bool = False, weight_decay: float = 0.0,
                 gradient_clipping: GradientClipping | None = None):
        super().__init__(gradient_clipping)
        self.alpha = alpha
        self.epsilon = epsilon
        self.momentum = momentum
        self.centered = centered
        self.weight_decay = weight_decay

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        if self.weight_decay:
            grad = grad + value * self.weight_decay
        square = _average(state.get("square_avg"), grad * grad, self.alpha)
        state["square_avg"] = square
        if self.centered:
            mean = _average(state.get("grad_avg"), grad, self.alpha)
            state["grad_avg"] = mean
            square = square - mean * mean
        step = grad / (square.sqrt() + self.epsilon)
        if self.momentum:
            buffer = state.get("momentum")
            step = step if buffer is None else buffer * self.momentum + step
            state["momentum"] = step
        return value - step * lr


def _average(previous: Tensor | None, new: Tensor, alpha: float) -> Tensor:
    """``alpha * previous + (1 - alpha) * new``, from zero."""
    return new * (1.0 - alpha) if previous is None else previous * alpha + new * (1.0 - alpha)
