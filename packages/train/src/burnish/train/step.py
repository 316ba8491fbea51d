"""What a training or validation step returns, and the steps the Learner runs by default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from burnish import Tensor


@dataclass
class ClassificationOutput:
    """A classification step's result (Burn's ``ClassificationOutput``).

    ``loss`` is a scalar tensor (on the autodiff backend while training, so it can be
    backpropagated), ``output`` the logits ``[batch, classes]`` and ``targets`` the class indices
    ``[batch]`` (int).
    """

    loss: Tensor
    output: Tensor
    targets: Tensor

    @property
    def batch_size(self) -> int:
        return int(self.targets.shape[0])


@dataclass
class RegressionOutput:
    """A regression step's result: scalar ``loss``, ``output`` and ``targets`` of one shape."""

    loss: Tensor
    output: Tensor
    targets: Tensor

    @property
    def batch_size(self) -> int:
        return int(self.targets.shape[0])


class StepFn(Protocol):
    """A step: ``step(model, batch) -> output`` with ``output.loss`` a scalar tensor."""

    def __call__(self, model: Any, batch: Any) -> Any: ...


def classification_step(model: Any, batch: Any) -> ClassificationOutput:
    """The default step: ``model.forward_classification(batch)``, Burn's ``TrainStep``."""
    return model.forward_classification(batch)
