"""Lion: the sign of an interpolated momentum, with decoupled weight decay."""

from __future__ import annotations

from burnish import Tensor
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State


class Lion(Optimizer):
    """Lion (Chen et al., 2023): ``c = beta_1 m + (1 - beta_1) g``;
    ``p = p (1 - lr weight_decay) - lr sign(c)``; ``m = beta_2 m + (1 - beta_2) g``, from
    ``m = 0``. Its steps are all of size ``lr``: use a rate 3 to 10 times below AdamW's."""

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.99, weight_decay: float = 0.0,
                 gradient_clipping: GradientClipping | None = None):
        super().__init__(gradient_clipping)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.weight_decay = weight_decay

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        m = state.get("momentum")
        if m is None:
            m = grad.zeros_like()
        direction = (m * self.beta_1 + grad * (1.0 - self.beta_1)).sign()
        state["momentum"] = m * self.beta_2 + grad * (1.0 - self.beta_2)
        if self.weight_decay:
            value = value * (1.0 - lr * self.weight_decay)
        return value - direction * lr
