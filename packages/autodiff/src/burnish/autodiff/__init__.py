"""burnish-autodiff: ``Autodiff(backend)`` gives any backend reverse-mode gradients."""

from burnish.autodiff.backend import Autodiff
from burnish.autodiff.checkpoint import STRATEGIES
from burnish.autodiff.gradients import Gradients

__all__ = ["STRATEGIES", "Autodiff", "Gradients"]
