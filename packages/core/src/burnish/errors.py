"""The one exception hierarchy of burnish: every error a user can meet derives from BurnishError."""

from __future__ import annotations


class BurnishError(Exception):
    """Base class of every error burnish raises on purpose."""


class ShapeError(BurnishError, ValueError):
    """Shapes that do not fit together, or an index, dim or size outside a shape."""


class DTypeError(BurnishError, TypeError):
    """A dtype an operation does not accept, or dtypes that do not fit together."""


class DeviceError(BurnishError, ValueError):
    """Tensors on different devices or backends, or a device that does not exist."""


class BackendNotInstalledError(BurnishError, LookupError):
    """A backend was asked for by name, and no installed package provides it."""

    def __init__(self, name: str, package: str | None, installed: list[str],
                 hint: str | None = None):
        self.name = name
        self.package = package
        self.installed = installed
        if hint is None:
            hint = (
                f"install it with: pip install {package}"
                if package
                else "no known package provides it; a third-party plugin must register it"
            )
        have = ", ".join(installed) if installed else "none"
        super().__init__(f"backend {name!r} is not installed ({hint}); installed backends: {have}")


class RecordError(BurnishError, ValueError):
    """A record file that cannot be written or read: corrupt, truncated, hostile or mismatched."""


class UnsupportedError(BurnishError, TypeError):
    """An operation the chosen backend or device cannot perform (a device limit, said plainly)."""


class AutodiffError(BurnishError, RuntimeError):
    """A gradient asked of a backend without autodiff, or of a graph that backward() freed."""


class DivisionByZeroError(BurnishError, ZeroDivisionError):
    """An int division (``//``) or remainder (``%``) by zero, which has no int result."""


class CaptureError(BurnishError, RuntimeError):
    """A function given to ``burnish.capture`` that cannot be replayed: it reads values on the
    host, changes what it enqueues from call to call, or replaces state it does not receive."""


class ArgumentTypeError(BurnishError, TypeError):
    """An argument, or a module's field, of the wrong Python type."""
