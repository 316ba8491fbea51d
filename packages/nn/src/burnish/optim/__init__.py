"""burnish.optim: optimizers, gradient clipping and accumulation, LR schedules (burn-optim)."""

from burnish.optim.adam import Adam, AdamW
from burnish.optim.grads import GradientClipping, GradientsAccumulator, GradientsParams
from burnish.optim.optimizer import Optimizer
from burnish.optim.schedule import (
    ComposedLr,
    ConstantLr,
    CosineAnnealingLr,
    ExponentialLr,
    LinearLr,
    LrScheduler,
    NoamLr,
    SequentialLr,
    StepLr,
)
from burnish.optim.sgd import Sgd

__all__ = [
    "Adam", "AdamW", "ComposedLr", "ConstantLr", "CosineAnnealingLr", "ExponentialLr",
    "GradientClipping", "GradientsAccumulator", "GradientsParams", "LinearLr", "LrScheduler",
    "NoamLr", "Optimizer", "SequentialLr", "Sgd", "StepLr",
]
