"""``ShardedLoader``: a DataLoader whose every batch is this rank's share of the batch that one
process would read, so that the ranks together read exactly one process's batches."""

from __future__ import annotations

from typing import Any

from burnish.data import DataLoader


class ShardedLoader(DataLoader):
    """A ``burnish.data.DataLoader`` (same arguments, and ``rank`` and ``world_size``) whose
    batch ``i`` of an epoch holds part ``rank`` of the ``world_size`` equal parts of the batch
    ``i`` a single-process loader with the same settings reads (``batch_size`` is the global
    batch; each rank gets ``batch_size // world_size`` items). The number of batches, their
    order, ``set_epoch`` and ``state_dict`` are the single process's, so a run resumed with
    another number of ranks reads the same batches from where it stopped, and the mean of the
    ranks' gradients is the gradient of the whole batch.

    A batch whose size is not a multiple of ``world_size`` (the last one) loses its last
    ``size % world_size`` items, so the parts stay equal (at most ``world_size - 1`` items of an
    epoch). Raises ValueError when ``batch_size`` is not a multiple of ``world_size`` or
    ``rank`` is outside the world."""

    def __init__(self, *args: Any, rank: int, world_size: int, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"ShardedLoader: rank {rank} is outside a world of {world_size}")
        if self.batch_size % world_size:
            raise ValueError(f"ShardedLoader: batch_size {self.batch_size} is not a multiple of "
                             f"the world size {world_size}; each rank takes an equal share")
        self.rank = rank
        self.world_size = world_size

    def batch_indices(self, epoch: int) -> list[list[int]]:
        """This rank's part of each batch of epoch ``epoch`` (see the class)."""
        parts = []
        for indices in super().batch_indices(epoch):
            share = len(indices) // self.world_size
            if share:
                parts.append(indices[self.rank * share:(self.rank + 1) * share])
        return parts

    def __len__(self) -> int:
        """The number of batches of one epoch (a last batch smaller than the world is left
        out)."""
        total = len(self.dataset)
        full, rest = divmod(total, self.batch_size)
        return full + (1 if rest >= self.world_size and not self.drop_last else 0)
