"""GradScaler: loss scaling for float16 mixed precision (PyTorch's ``torch.amp.GradScaler``)."""

from __future__ import annotations

from typing import Any

from burnish import Tensor
from burnish.errors import BurnishError
from burnish.optim.grads import GradientsParams


class GradScaler:
    """Scales the loss so that float16 gradients do not underflow, and steps only on finite
    gradients.

    A step under ``burnish.autocast(burnish.float16)``::

        grads = scaler.scale(loss).backward()
        model = scaler.step(optimizer, lr, model, grads)   # unscales; skips on inf/NaN
        scaler.update()                                    # backs off or grows the scale

    ``step`` divides the gradients by the scale, then looks for inf or NaN in all of them with
    one read per device (a host synchronisation per step: the check is a reduction on the
    device, its one bool read once). If it finds any, the step is skipped (the module
    comes back unchanged, the optimizer's state untouched), and ``update`` multiplies the scale
    by ``backoff_factor``; after ``growth_interval`` steps in a row without one, ``update``
    multiplies it by ``growth_factor``. Gradient clipping, if the optimizer has it, sees the
    unscaled gradients. With bfloat16 (float32's range) no scaler is needed; ``enabled=False``
    makes every method pass through, so one loop serves both.

    Because of the read, a training step that uses it cannot be captured (``burnish.capture``)
    as one replay: capture the forward and backward and step outside.
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        if not (growth_factor > 1.0 and 0.0 < backoff_factor < 1.0):
            raise ValueError(f"GradScaler needs growth_factor > 1 and 0 < backoff_factor < 1, "
                             f"got {growth_factor} and {backoff_factor}")
        if growth_interval < 1 or not init_scale > 0.0:
            raise ValueError(f"GradScaler needs growth_interval >= 1 and init_scale > 0, got "
                             f"{growth_interval} and {init_scale}")
        self.enabled = bool(enabled)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._scale = float(init_scale)
        self._growth_tracker = 0  # steps in a row with finite gradients
        self._found_inf: bool | None = None  # this step's verdict, until update()
        self.skipped_steps = 0  # steps skipped so far (for logs)

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self.enabled else 1.0

    def scale(self, loss: Tensor) -> Tensor:
        """``loss * scale`` (``loss`` itself when disabled): call ``backward`` on this."""
        return loss * self._scale if self.enabled else loss

    def unscale(self, module: Any, grads: Any) -> GradientsParams:
        """``module``'s gradients divided by the scale, and whether any is inf or NaN noted
        for ``step`` and ``update`` (one device read). ``step`` calls it; call it yourself to
        look at or clip the true gradients first, then pass its result to ``step``."""
        if not isinstance(grads, GradientsParams):
            grads = GradientsParams.from_grads(grads, module)
        if not self.enabled:
            return grads
        inverse = 1.0 / self._scale
        unscaled = {key: grad * inverse for key, grad in grads.grads.items()}
        self._found_inf = _any_nonfinite(unscaled.values())
        return _Unscaled(unscaled)

    def step(self, optimizer: Any, lr: Any, module: Any, grads: Any) -> Any:
        """``optimizer.step(lr, module, unscaled grads)``, or ``module`` unchanged when a
        gradient is inf or NaN. ``grads``: what ``scaler.scale(loss).backward()`` returned, a
        ``GradientsParams`` of it, or ``unscale``'s result."""
        if not self.enabled:
            return optimizer.step(lr, module, grads)
        if not isinstance(grads, _Unscaled):
            grads = self.unscale(module, grads)
        if self._found_inf:
            self.skipped_steps += 1
            return module
        return optimizer.step(lr, module, GradientsParams(grads.grads))

    def update(self) -> None:
        """Back off after a skipped step, grow after ``growth_interval`` good ones in a row.
        Raises BurnishError when no step was checked since the last update."""
        if not self.enabled:
            return
        if self._found_inf is None:
            raise BurnishError("GradScaler.update: no gradients were checked since the last "
                               "update; call scaler.step(optimizer, lr, module, grads) first")
        if self._found_inf:
            self._scale *= self.backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self.growth_interval:
                self._scale *= self.growth_factor
                self._growth_tracker = 0
        self._found_inf = None

    def found_inf(self) -> bool | None:
        """Whether the last checked gradients held inf or NaN (None before any check)."""
        return self._found_inf

    def state_dict(self) -> dict[str, Any]:
        """The scale, its settings and the growth count, as plain numbers."""
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "growth_tracker": self._growth_tracker, "enabled": self.enabled}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict()``'s values. Raises BurnishError naming missing keys."""
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "growth_tracker"} - set(state)
        if missing:
            raise BurnishError(f"GradScaler.load_state_dict: missing {sorted(missing)}")
        self._scale = float(state["scale"])
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["growth_tracker"])
        self.enabled = bool(state.get("enabled", self.enabled))
        self._found_inf = None


class _Unscaled(GradientsParams):
    """Gradients already divided by the scale (so ``step`` does not divide them again)."""


def _any_nonfinite(grads: Any) -> bool:
    """Whether any gradient holds inf or NaN: per device one bool on the device, read once."""
    found: dict[Any, Tensor] = {}
    for grad in grads:
        flag = grad.is_finite().all().logical_not()
        device = grad.device
        found[device] = flag if device not in found else found[device] | flag
    return any(flag.item() for flag in found.values())
