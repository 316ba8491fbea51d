"""Adam and AdamW: adaptive moments, with L2 or decoupled weight decay."""

from __future__ import annotations

import math
from typing import Any

from burnish import Tensor, cat
from burnish import functional as F
from burnish.dtype import float32, int64
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State, step_count


class Adam(Optimizer):
    """Adam (Kingma & Ba): ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p -= lr * m̂ / (sqrt(v̂) + epsilon)`` with bias-corrected moments; ``weight_decay`` adds
    ``weight_decay * p`` to the gradient (L2).

    ``capturable``: keep the step count and the bias corrections on the device (one count for
    the whole optimizer, in float32: exact for 16 million steps), so that a training step
    captured by ``burnish.capture`` replays them as they change; ``lr`` may then be a tensor
    too (a schedule's value passed into the captured step). It costs a few tiny kernels per
    step, and saving the state reads the count once. PyTorch's ``capturable`` flag is the same
    idea."""

    decoupled = False

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-8,
                 weight_decay: float = 0.0, gradient_clipping: GradientClipping | None = None,
                 capturable: bool = False):
        super().__init__(gradient_clipping)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay = weight_decay
        self.capturable = capturable
        #: The step count on the device (``capturable``), float32 ``[1]``.
        self.count: Tensor | None = None
        self._factors: Tensor | None = None  # this step's (epsilon, step size), once made

    def step(self, lr: float | Tensor, module: Any, grads: Any) -> Any:
        self._factors = None
        # Optimizer.step's lr is a float; Adam's may be a tensor (capturable steps).
        return super().step(lr, module, grads)  # type: ignore[arg-type]

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float | Tensor) -> Tensor:
        if self.weight_decay and not self.decoupled:
            grad = grad + value * self.weight_decay
        if self.weight_decay and self.decoupled:
            value = value * (1.0 - lr * self.weight_decay)
        if self.capturable:
            factors = self._device_factors(value, state, lr)
            if "moment_1" not in state:
                state["moment_1"], state["moment_2"] = value.zeros_like(), value.zeros_like()
            return F.adam_step(value, grad, state["moment_1"], state["moment_2"],
                               beta_1=self.beta_1, beta_2=self.beta_2, factors=factors)
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


    def _device_factors(self, value: Tensor, state: State, lr: float | Tensor) -> Tensor:
        """This step's ``(epsilon, step size)`` as a float32 tensor ``[2]`` on ``value``'s
        device, computed from the device's step count once per step."""
        previous = state.pop("step", None)  # a count saved by a host-counting Adam
        found = self._factors
        if found is not None and found.device == value.device:
            return found
        count = self.count
        if count is None or count.device != value.device:
            start = 0 if previous is None else \
                previous if isinstance(previous, int) else int(previous.item())
            count = Tensor.full([1], float(start), dtype=float32, device=value.device) \
                if count is None else count.to_device(value.device)
        count = self.count = count + 1.0
        corrected_1 = 1.0 - (count * _log(self.beta_1)).exp()
        root = (1.0 - (count * _log(self.beta_2)).exp()).sqrt()
        step_size = root / corrected_1 * lr
        if isinstance(lr, Tensor):
            step_size = step_size.cast(float32).reshape([1])
        self._factors = cat([root * self.epsilon, step_size])
        return self._factors

    def into_record(self) -> dict[str, Any]:
        tree = super().into_record()
        if self.capturable and self.count is not None:
            steps = Tensor.from_data([int(self.count.item())], dtype=int64)
            for entries in tree.values():
                entries.setdefault("step", steps)
        return tree


def _log(beta: float) -> float:
    return math.log(beta) if beta > 0 else -math.inf


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam step (Burn's default decay, 1e-4)."""

    decoupled = True

    def __init__(self, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-8,
                 weight_decay: float = 1e-4, gradient_clipping: GradientClipping | None = None,
                 capturable: bool = False):
        super().__init__(beta_1, beta_2, epsilon, weight_decay, gradient_clipping, capturable)
