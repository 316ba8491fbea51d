"""burnish.optim: optimizers, gradient clipping and accumulation, LR schedules (burn-optim)."""

from burnish.optim.adagrad import AdaGrad
from burnish.optim.adam import Adam, AdamW
from burnish.optim.adan import Adan
from burnish.optim.grads import GradientClipping, GradientsAccumulator, GradientsParams
from burnish.optim.lion import Lion
from burnish.optim.muon import Muon, newton_schulz
from burnish.optim.optimizer import Optimizer
from burnish.optim.rmsprop import RmsProp
from burnish.optim.scaler import GradScaler
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
    "AdaGrad", "Adam", "AdamW", "Adan", "ComposedLr", "ConstantLr", "CosineAnnealingLr",
    "ExponentialLr", "GradScaler",
    "GradientClipping", "GradientsAccumulator", "GradientsParams", "LinearLr",
    "Lion", "LrScheduler", "Muon", "NoamLr", "Optimizer", "RmsProp", "SequentialLr", "Sgd",
    "StepLr", "newton_schulz",
]
