"""What to write instead of PyTorch's names that burnish spells otherwise (``__getattr__`` help)."""

from __future__ import annotations

from collections.abc import Mapping

#: Tensor attributes PyTorch users reach for, and burnish's way to say them.
TENSOR_HABITS = {
    "t": "x.transpose() or x.T (the last two dims exchanged)",
    "numpy": "x.to_numpy()",
    "cpu": "x.to_device('ndarray')",
    "cuda": "x.to_device('cuda')",
    "contiguous": "nothing: burnish tensors have no strides to make contiguous; drop the call",
    "requires_grad_": "x.require_grad() (on an autodiff backend: device='autodiff+ndarray')",
    "requires_grad": "x.is_require_grad()",
    "dim": "x.ndim",
    "type": "x.cast(dtype) to convert, x.dtype to ask",
    "long": "x.int() or x.cast('int64')",
    "short": "x.cast('int16')",
    "clone": "x itself: tensors are values that operations never change",
    "data": "x.detach()",
    "copy_": "x = other: tensors are values, rebind the name",
    "zero_": "x = x.zeros_like()",
    "fill_": "x = x.full_like(value)",
    "expand_as": "x.expand(other.shape)",
    "view_as": "x.reshape(other.shape)",
    "masked_fill": "x.mask_fill(mask, value)",
    "index_select": "x.select(dim, indices)",
    "nelement": "x.numel()",
    "amax": "x.max(dim)",
    "amin": "x.min(dim)",
    "clip": "x.clamp(min, max)",
    "names": "x.named('batch', ...).names: plain tensors have no names, a NamedTensor has",
    "refine_names": "x.named('batch', ...) (a NamedTensor)",
    "align_to": "x.named(...).align_to(...) (names live on a NamedTensor)",
}


def missing_attribute(owner: object, name: str, habits: Mapping[str, str]) -> AttributeError:
    """The AttributeError for ``owner.name``, saying what to write instead when ``name`` is a
    habit from PyTorch listed in ``habits``."""
    kind = type(owner).__name__
    instead = habits.get(name)
    if instead is None:
        return AttributeError(f"{kind!r} object has no attribute {name!r}")
    return AttributeError(f"{kind!r} object has no attribute {name!r} (a PyTorch name); "
                          f"in burnish write {instead}")
