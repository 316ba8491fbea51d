"""burnish.router: one backend made of several installed backends.

``Router([a, b])`` (``burnish.backend("router(ndarray,wgpu)")``) has the devices of all its
members; each op runs on the member that owns its inputs' device, and ``Tensor.to_device``
moves tensors from one member to another. ``autodiff+router(...)`` differentiates across moves.
See docs/router.md.
"""

from __future__ import annotations

from burnish.router.backend import Router, RouterPrimitive

__all__ = ["Router", "RouterPrimitive"]
