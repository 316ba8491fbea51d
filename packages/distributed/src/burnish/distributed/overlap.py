"""``GradientReducer``: a model's gradients in buckets that are all-reduced as soon as the
backward pass has finished them, while it goes on with the earlier layers (PyTorch DDP's
bucketing and hooks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from burnish import Tensor
from burnish.distributed.communicator import Communicator, Pending
from burnish.distributed.gradients import _replace_leaf_grads, trained_leaves
from burnish.errors import AutodiffError

#: Bytes of gradients per bucket, as PyTorch's DDP (``bucket_cap_mb=25``).
DEFAULT_BUCKET_BYTES = 25 * 2**20


@dataclass
class _Bucket:
    """Parameters (indices into the reducer's list) reduced together, and the state of one
    backward pass: the gradients found so far and the collective once started."""

    indices: list[int]
    grads: dict[int, Any] = field(default_factory=dict)
    pending: Pending | None = None


class GradientReducer:
    """Averages a module's gradients over the ranks of ``communicator``, bucket by bucket
    during the backward pass::

        reducer = GradientReducer(comm, model)
        with reducer.overlap():
            grads = loss.backward()          # buckets start their all-reduce as they fill
        grads = reducer.gradients(grads)     # waits for them; the mean over the ranks
        model = optimizer.step(lr, model, grads)

    Buckets hold the trained parameters in reverse order (the last layer's gradients are final
    first), one dtype each, up to ``bucket_bytes``. A bucket starts (``all_reduce_start``) once
    every parameter in it has its final gradient, buckets in order on every rank (MPI and NCCL
    match collectives by their order); the ones still waiting at the end of the pass (with
    parameters that got no gradient on this rank, as zeros) start in ``gradients``. Every
    parameter then has the mean gradient; with ``find_unused=True`` a small extra reduction
    finds the parameters no rank had a gradient for, which then get none (the optimizer leaves
    them alone, as without data parallelism), at the cost of reading its result on the host
    each step. Every rank must hold the same module structure (the buckets are planned from it);
    ``overlap(module)`` re-binds to the model after each optimizer step (new autodiff leaves).

    ``overlap_backward``: whether buckets start during the pass (True) or all after it, one
    collective per dtype (False); None (the default) takes the communicator's
    ``overlaps_backward`` (True where absent). NCCL's communicator runs its collectives on a
    stream of their own beside the pass, but says False: on the GPT-style model of
    bench/bench_distributed.py, whose eager steps are bound by the host, early starts measured
    slower than one reduction after the pass (bench/RESULTS.md); pass True to overlap anyway.
    With MPI the bucket is copied to the host and ``MPI_Iallreduce`` starts on it; MPI moves it
    forward whenever a later bucket starts or polls (``progress``), or on its own progress
    thread where the library runs one (MPICH: ``MPIR_CVAR_ASYNC_PROGRESS=1``).
    """

    def __init__(self, communicator: Communicator, module: Any,
                 bucket_bytes: int = DEFAULT_BUCKET_BYTES, find_unused: bool = False,
                 overlap_backward: bool | None = None):
        if bucket_bytes < 1:
            raise ValueError(f"GradientReducer: bucket_bytes must be positive, got {bucket_bytes}")
        self.communicator = communicator
        self.bucket_bytes = bucket_bytes
        self.find_unused = find_unused
        self.overlap_backward = overlap_backward
        self._after = False
        self._bind(module)

    def _bind(self, module: Any) -> None:
        leaves = [tensor for _, tensor in trained_leaves(module)]
        for leaf in leaves:
            node = getattr(leaf.primitive, "node", None)
            if node is None or not node.leaf_id:
                raise AutodiffError(
                    f"GradientReducer: a parameter on backend {leaf.backend.name!r} is not an "
                    f"autodiff leaf; train the module on an autodiff backend "
                    f"('autodiff+{leaf.backend.name}')")
        self._leaves = leaves
        self._index = {leaf.primitive.node.leaf_id: i for i, leaf in enumerate(leaves)}
        # After an optimizer step only the leaves are new: the plan stays while the parameters'
        # shapes and dtypes do.
        layout = [(leaf.dtype, tuple(leaf.dims())) for leaf in leaves]
        if layout == getattr(self, "_layout", None):
            return
        self._layout = layout
        self._buckets: list[_Bucket] = []
        self._bucket_of: dict[int, _Bucket] = {}
        current: _Bucket | None = None
        size = 0
        for i in reversed(range(len(leaves))):
            leaf = leaves[i]
            nbytes = leaf.numel() * leaf.dtype.itemsize
            first = current.indices[0] if current else None
            if (current is None or size + nbytes > self.bucket_bytes and current.indices
                    or leaves[first].dtype is not leaf.dtype):  # type: ignore[index]
                current, size = _Bucket([]), 0
                self._buckets.append(current)
            current.indices.append(i)
            self._bucket_of[i] = current
            size += nbytes

    @property
    def buckets(self) -> list[list[int]]:
        """The parameter indices (in ``module.params()``'s trained order) of each bucket, in the
        order they are reduced."""
        return [list(bucket.indices) for bucket in self._buckets]

    @contextlib.contextmanager
    def overlap(self, module: Any = None) -> Iterator[None]:
        """Run ``backward()`` inside: each bucket's all-reduce starts when its gradients are
        final. ``module``: the model as it is now (after an optimizer step), to re-bind."""
        from burnish.autodiff import on_gradient_ready

        if module is not None:
            self._bind(module)
        for bucket in self._buckets:
            bucket.grads, bucket.pending = {}, None
        self._next = 0
        # Where starting early does not pay (the communicator says so, or the caller), every
        # bucket is reduced after the pass instead (``gradients``).
        early = self.overlap_backward
        if early is None:
            early = getattr(self.communicator, "overlaps_backward", True)
        self._after = not early
        if self._after:
            yield
            return
        with on_gradient_ready(self._ready):
            yield

    def _ready(self, leaf_id: int, grad: Any) -> None:
        index = self._index.get(leaf_id)
        if index is None:  # not a trained parameter of the module (an input that requires grad)
            return
        bucket = self._bucket_of[index]
        bucket.grads[index] = grad
        if len(bucket.grads) == len(bucket.indices):
            # In bucket order, as every rank does: MPI matches collectives by the order they
            # are started in.
            while (self._next < len(self._buckets) and len(self._buckets[self._next].grads)
                   == len(self._buckets[self._next].indices)):
                self._start(self._buckets[self._next])
                self._next += 1
        elif hasattr(self.communicator, "progress"):
            self.communicator.progress()

    def _start(self, bucket: _Bucket) -> None:
        tensors = []
        for i in bucket.indices:
            leaf = self._leaves[i]
            inner = leaf.inner()
            grad = bucket.grads.get(i)
            tensors.append(inner.zeros_like() if grad is None else
                           Tensor.from_primitive(grad, inner.device, leaf.dtype))
        bucket.pending = self.communicator.all_reduce_start(tensors, "mean")

    def gradients(self, grads: Any) -> Any:
        """``grads`` (what ``backward()`` returned under ``overlap``) with every trained
        parameter's gradient the mean over the ranks: waits for the buckets started during the
        pass and reduces the rest (those with parameters that got no gradient here)."""
        buckets = self._buckets
        if self._after:
            # Nothing started during the pass: the gradients come from grads, all of a dtype
            # in one collective (as ``all_reduce_gradients``; smaller buckets would only add
            # calls).
            by_dtype: dict[Any, _Bucket] = {}
            for i, leaf in enumerate(self._leaves):
                bucket = by_dtype.setdefault(leaf.dtype, _Bucket([]))
                bucket.indices.append(i)
                grad = leaf.grad(grads)
                if grad is not None:
                    bucket.grads[i] = grad.primitive
            buckets = list(by_dtype.values())
        for bucket in buckets:
            if bucket.pending is None:
                self._start(bucket)
        present = np.zeros(len(self._leaves), np.float32)
        for bucket in buckets:
            for i in bucket.indices:
                present[i] = i in bucket.grads
        if not self.find_unused:
            present[:] = 1
        elif self.communicator.world_size > 1 and self._leaves:
            # Which parameters some rank has a gradient for: one small reduction on every rank.
            flags = Tensor.from_data(present, self._leaves[0].inner().device)
            present = self.communicator.all_reduce(flags, "max").to_numpy()
        reduced: dict[int, Tensor] = {}
        for bucket in buckets:
            assert bucket.pending is not None
            for i, value in zip(bucket.indices, bucket.pending.wait()):
                reduced[i] = value
        keep = [i for i in range(len(self._leaves)) if present[i] > 0]
        return _replace_leaf_grads(grads, [self._leaves[i] for i in keep],
                                   [reduced[i] for i in keep])
