"""Without GPUs or MPI: the NCCL id's rendezvous (threads on loopback), ShardedLoader's shares,
the gradient buckets started during backward (a recording communicator), init's errors."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor, nn
from burnish.distributed import DistributedError, GradientReducer, Job, Pending
from burnish.distributed.nccl import exchange_unique_id


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_rendezvous_gives_rank_0s_id_and_watchdog_port_to_every_rank():
    port, world = free_port(), 4
    ident = bytes(range(128))
    got: dict[int, tuple[bytes, int]] = {}

    def rank(r: int) -> None:
        job = Job(r, world, r, world, "127.0.0.1", port, "torchrun")
        got[r] = exchange_unique_id(job, lambda: ident, timeout=30,
                                    port=54321 if r == 0 else 0)

    threads = [threading.Thread(target=rank, args=(r,)) for r in (3, 1, 2, 0)]  # 0 starts last
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert got == {r: (ident, 54321) for r in range(world)}


def test_rendezvous_without_rank_0_names_the_address():
    job = Job(1, 2, 1, 2, "127.0.0.1", free_port(), "torchrun")
    with pytest.raises(DistributedError, match=r"rank 1 could not reach rank 0 at 127\.0\.0\.1"):
        exchange_unique_id(job, bytes, timeout=0.5)


def test_rendezvous_needs_master_addr():
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT"):
        exchange_unique_id(Job(0, 2, 0, 2, None, None, "slurm"), bytes)


def test_sharded_loader_splits_each_global_batch():
    from burnish.data import DataLoader, InMemoryDataset
    from burnish.distributed import ShardedLoader

    class Ids:
        def batch(self, items, device=None):
            return list(items)

    data = InMemoryDataset(list(range(22)))
    whole = DataLoader(data, Ids(), 8, shuffle=True, seed=3)
    shards = [ShardedLoader(data, Ids(), 8, shuffle=True, seed=3, rank=r, world_size=4)
              for r in range(4)]
    assert len(shards[0]) == len(whole) == 3
    for batch, *parts in zip(whole, *shards):
        assert sum(parts, []) == batch[:len(batch) // 4 * 4]  # the last batch loses 6 % 4 items
    with pytest.raises(ValueError, match="batch_size 6 is not a multiple of the world size 4"):
        ShardedLoader(data, Ids(), 6, rank=0, world_size=4)


class Recording:
    """A communicator of one rank that records when buckets start (the identity reduction)."""

    rank, world_size = 0, 1

    def __init__(self, log: list):
        self.log = log

    def all_reduce_start(self, tensors, op="sum"):
        self.log.append(("start", len(tensors)))
        return Pending(lambda: list(tensors))

    def all_reduce(self, tensor, op="sum"):
        return tensor


class Deep(nn.Module):
    layers: list[nn.Linear]

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = nn.Relu()(layer(x))
        return x


def test_buckets_start_while_backward_runs():
    from burnish.autodiff import on_gradient_ready

    device = bn.backend("autodiff+ndarray").default_device()
    bn.seed(0)
    model = Deep([nn.LinearConfig(8, 8).init(device) for _ in range(4)])
    log: list = []
    reducer = GradientReducer(Recording(log), model, bucket_bytes=8 * 8 * 4 + 8 * 4)
    assert len(reducer.buckets) == 4  # one layer each, the last layer first
    assert reducer.buckets[0] == [7, 6]
    x = Tensor.from_data(np.random.default_rng(0).standard_normal((4, 8), dtype=np.float32),
                         device)
    seen: list = []
    with reducer.overlap(model), on_gradient_ready(lambda leaf, grad: log.append("leaf")):
        grads = model(x).sum().backward()
        seen = list(log)
    # The first bucket started before the first layer's gradients were known.
    last_leaf = len(seen) - 1 - seen[::-1].index("leaf")
    assert seen.index(("start", 2)) < last_leaf and seen.count(("start", 2)) == 4
    plain = model(x).sum().backward()
    reduced = reducer.gradients(grads)
    for param in model.params():
        np.testing.assert_array_equal(param.val().grad(reduced).to_numpy(),
                                      param.val().grad(plain).to_numpy())


@pytest.mark.parametrize("prefers, asked, early", [
    (True, None, True), (False, None, False), (False, True, True), (True, False, False)])
def test_the_reducer_overlaps_as_asked_else_as_the_communicator_prefers(prefers, asked, early):
    device = bn.backend("autodiff+ndarray").default_device()
    bn.seed(0)
    model = Deep([nn.LinearConfig(8, 8).init(device) for _ in range(2)])
    log: list = []
    comm = Recording(log)
    comm.overlaps_backward = prefers
    reducer = GradientReducer(comm, model, bucket_bytes=8 * 8 * 4 + 8 * 4,
                              overlap_backward=asked)
    x = Tensor.from_data(np.ones((4, 8), np.float32), device)
    with reducer.overlap(model):
        grads = model(x).sum().backward()
    during = list(log)
    reducer.gradients(grads)
    # Early: one start per bucket during the pass; late: one per dtype after it.
    assert during == ([("start", 2)] * 2 if early else [])
    assert log[len(during):] == ([] if early else [("start", 4)])


def test_init_refuses_an_unknown_backend():
    from burnish.distributed import init

    with pytest.raises(ValueError, match="'nccl' or 'mpi', got 'gloo'"):
        init("gloo")
