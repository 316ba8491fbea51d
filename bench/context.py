"""What every benchmark gets: the backend under test, its device, and PyTorch when installed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import burnish
from burnish.backend import BackendBase


@dataclass
class Context:
    """The backend and device burnish runs on; ``torch`` is the module, or None."""

    backend: Any
    device: Any
    torch: Any

    @classmethod
    def make(cls, backend_name: str, with_torch: bool) -> Context:
        """The context for ``backend_name``, with PyTorch imported when ``with_torch``."""
        torch = None
        if with_torch:
            import torch
        backend = burnish.backend(backend_name)
        return cls(backend, backend.default_device(), torch)

    def synced(self, run):
        """``run`` followed by waiting for the device, on backends that queue work."""
        if type(self.backend).sync is BackendBase.sync:
            return run
        backend, device = self.backend, self.device

        def run_and_wait():
            run()
            backend.sync(device)

        return run_and_wait

    def tensor(self, array):
        """A burnish tensor on the device under test holding the NumPy ``array``."""
        return burnish.Tensor.from_data(array, device=self.device)
