"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from burnish import Tensor
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State


class Sgd(Optimizer):
    """PyTorch's SGD: ``g += weight_decay * p``; with momentum ``buf = momentum * buf +
    (1 - dampening) * g`` (``buf = g`` on the first step) and ``g = buf`` (``g + momentum *
    buf`` with ``nesterov``); ``p -= lr * g``."""

    def __init__(self, momentum: float = 0.0, dampening: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0, gradient_clipping: GradientClipping | None = None):
        super().__init__(gradient_clipping)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov needs momentum > 0 and no dampening")
        self.momentum = momentum
        self.dampening = dampening
        self.nesterov = nesterov
        self.weight_decay = weight_decay

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        if self.weight_decay:
            grad = grad + value * self.weight_decay
        if self.momentum:
            buffer = state.get("momentum")
            if buffer is None:
                buffer = grad
            else:
                # The buffer is this optimizer's own: updated in place where the backend allows.
                buffer.mul_(self.momentum).add_(grad * (1.0 - self.dampening))
            state["momentum"] = buffer
            grad = grad + buffer * self.momentum if self.nesterov else buffer
        # ``value - grad * lr`` as ``grad * -lr + value`` into a tensor of our own: the same bits
        # (negation is exact), one full-size array fewer.
        return (grad * -lr).add_(value)
