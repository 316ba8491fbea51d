"""A model's gradients and parameters through a collective: which tensors go in (in the same
order on every rank), and the result in the caller's type (``Gradients``, ``GradientsParams``,
a module). Backend-neutral: the collective is a function, so it runs anywhere."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from burnish import Tensor
from burnish.backend.autodiff_ops import AutodiffOps
from burnish.distributed.buckets import Collective, bucketed
from burnish.errors import AutodiffError


def trained_leaves(params_or_module: Any) -> list[tuple[str | None, Tensor]]:
    """``(param id, tensor)`` of each trained parameter of a module (``module.params()`` whose
    ``require_grad`` is set, in attribute order), or of each item of an iterable of ``Param``s
    (frozen ones left out) and tensors (id None)."""
    from burnish.nn import Module, Param  # burnish-nn: whoever passes a module has it

    if isinstance(params_or_module, Module):
        items: Iterable[Any] = params_or_module.params()
    elif isinstance(params_or_module, Iterable):
        items = params_or_module
    else:
        raise TypeError(f"expected a module or an iterable of Params or tensors, got "
                        f"{type(params_or_module).__name__}")
    leaves: list[tuple[str | None, Tensor]] = []
    for item in items:
        if isinstance(item, Param):
            if item.require_grad:
                leaves.append((item.id, item.val()))
        elif isinstance(item, Tensor):
            leaves.append((None, item))
        else:
            raise TypeError(f"expected Params or tensors, got {type(item).__name__}")
    return leaves


def reduce_gradients(grads: Any, params_or_module: Any, collective: Collective) -> Any:
    """``grads`` with the gradient of each trained parameter replaced by what ``collective``
    makes of it (all of them bucketed by dtype, one buffer per dtype), as a new object of
    ``grads``' type; ``grads`` itself is left alone.

    ``grads`` is what ``loss.backward()`` returned (a ``burnish.autodiff.Gradients``: leaves
    other than the parameters keep their gradients) or a ``burnish.optim.GradientsParams``
    (keyed by parameter id, so parameters must be ``Param``s). A trained parameter without a
    gradient here (unused by this rank's forward pass) goes in as zeros, so that every rank
    hands the collective the same buffers; a flag per parameter travels with them, and a
    parameter no rank had a gradient for gets none in the result (an optimizer then leaves it
    alone, as it would without data parallelism).
    """
    leaves = trained_leaves(params_or_module)
    kind = _gradients_kind(grads)
    if kind == "params" and any(key is None for key, _ in leaves):
        raise TypeError("all_reduce_gradients: a GradientsParams is keyed by parameter id, so "
                        "pass the module or its Params, not bare tensors")
    if not leaves:
        return grads
    found, present = [], []
    for key, leaf in leaves:
        grad = grads.get(key) if kind == "params" else _leaf_grad(leaf, grads)
        present.append(grad is not None)
        found.append(grad if grad is not None else _inner(leaf).zeros_like())
    flags = Tensor.from_data(np.asarray(present, dtype=np.float32), found[0].device)
    *reduced, flags = bucketed([*found, flags], collective)
    if not all(present):  # else every parameter had a gradient here, so somewhere
        used = flags.to_numpy() > 0
        leaves = [leaf for leaf, keep in zip(leaves, used) if keep]
        reduced = [value for value, keep in zip(reduced, used) if keep]
    if kind == "params":
        merged = dict(grads.grads)
        merged.update({key: grad for (key, _), grad in zip(leaves, reduced)})
        return type(grads)(merged)
    return _replace_leaf_grads(grads, [leaf for _, leaf in leaves], reduced)


def replace_params(module: Any, collective: Collective) -> Any:
    """A copy of ``module`` whose every parameter, frozen ones included, holds what
    ``collective`` makes of its value (bucketed by dtype); ids and flags are kept, and on an
    autodiff backend each parameter is a fresh leaf."""
    params = module.params()
    values = [_inner(param.val()) for param in params]
    new = {id(param): value for param, value in zip(params, bucketed(values, collective))}

    def mapper(_: str, param: Any) -> Any:
        tensor = param.val()
        value = new[id(param)]
        if isinstance(tensor.backend, AutodiffOps):
            value = Tensor.from_inner(value, tensor.backend)  # type: ignore[arg-type]
        return param.with_tensor(value)

    return module.map(mapper)


def _gradients_kind(grads: Any) -> str:
    try:
        from burnish.autodiff import Gradients
    except ImportError:  # then grads cannot be one
        Gradients = ()  # type: ignore[assignment,misc]
    if isinstance(grads, Gradients):
        return "leaves"
    try:
        from burnish.optim import GradientsParams
    except ImportError:
        GradientsParams = ()  # type: ignore[assignment,misc]
    if isinstance(grads, GradientsParams):
        return "params"
    raise TypeError(f"all_reduce_gradients: expected the Gradients that backward() returned or "
                    f"a GradientsParams, got {type(grads).__name__}")


def _leaf_grad(leaf: Tensor, grads: Any) -> Tensor | None:
    if not isinstance(leaf.backend, AutodiffOps):
        raise AutodiffError(f"all_reduce_gradients: a parameter is on backend "
                            f"{leaf.backend.name!r}, which has no gradients; train the module "
                            f"on an autodiff backend ('autodiff+{leaf.backend.name}')")
    return leaf.grad(grads)


def _inner(tensor: Tensor) -> Tensor:
    """The tensor on the backend beneath autodiff (itself on a plain backend)."""
    return tensor.inner() if isinstance(tensor.backend, AutodiffOps) else tensor


def _replace_leaf_grads(grads: Any, leaves: list[Tensor], values: list[Tensor]) -> Any:
    """A new ``Gradients`` holding ``grads``' gradients, each of ``leaves`` holding its value.

    ``Gradients`` has no public way to set a leaf's gradient: it is keyed by the id of the
    leaf's autodiff node, so the new entries are made from that id; everything else goes
    through its public ``merge`` and ``grad_remove``."""
    from burnish.autodiff import Gradients

    if not leaves:
        return grads  # nothing was reduced
    inner = leaves[0].backend.inner_backend  # type: ignore[attr-defined]  # an autodiff leaf
    rest = grads.merge(Gradients(inner))  # a copy
    for leaf in leaves:
        leaf.grad_remove(rest)
    replaced = Gradients(inner, {leaf.primitive.node.leaf_id: value.primitive
                                 for leaf, value in zip(leaves, values)})
    return rest.merge(replaced)
