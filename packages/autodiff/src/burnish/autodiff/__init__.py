"""burnish-autodiff: ``Autodiff(backend)`` gives any backend reverse-mode gradients."""

from burnish.autodiff.backend import Autodiff
from burnish.autodiff.checkpoint import STRATEGIES
from burnish.autodiff.gradients import Gradients
from burnish.autodiff.graph import on_gradient_ready

__all__ = ["STRATEGIES", "Autodiff", "Gradients", "on_gradient_ready"]
