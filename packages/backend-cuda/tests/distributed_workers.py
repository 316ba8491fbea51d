"""What the ranks of the distributed tests run. Each rank is a new process that imports the
function it runs by module name, so these live in a module of their own, which the test files
put on sys.path (spawned processes inherit it) whatever pytest's import mode."""

from __future__ import annotations

import os
import time

import numpy as np

import burnish as bn
import burnish.functional as F
from burnish import Tensor, nn, optim
from burnish.cuda import distributed

#: The MLP trained by the GPU tests: small, so that each rank's start-up (CUDA, NVRTC) dominates.
SIZES = (32, 64, 64, 10)
BATCH = 16
STEPS = 4
LR = 0.1


# -- for the process machinery (no GPU) -------------------------------------------------------


def report(rank: int, scale: int = 1) -> tuple[int, int, int]:
    return rank, rank * scale, os.getpid()


def fail_on_rank_1(rank: int) -> int:
    if rank == 1:
        raise KeyError("rank 1 has no data")
    time.sleep(60)  # blocked, as a rank waiting in a collective for the failed one would be
    return rank


def die_on_rank_0(rank: int) -> int:
    if rank == 0:
        os._exit(3)
    return rank


def sleep_long(rank: int) -> int:
    time.sleep(60)
    return rank


# -- for the GPU tests ------------------------------------------------------------------------


def collectives(comm: distributed.Communicator) -> dict[str, object]:
    """Every collective once, on this rank's values; plain results the GPU tests check."""
    rank, world, device = comm.rank, comm.world_size, comm.device
    out: dict[str, object] = {"rank": rank, "device": str(device)}
    mine = Tensor.full([3, 2], float(rank + 1), device)
    for op in ("sum", "mean", "max", "min"):
        out[op] = comm.all_reduce(mine, op).to_numpy()
    out["int64"] = comm.all_reduce(Tensor.full([4], rank + 1, device, "int64")).to_numpy()
    out["bfloat16"] = comm.all_reduce(mine.cast("bfloat16")).cast("float32").to_numpy()
    # A transposed view is read as the tensor it shows, not as its buffer's order.
    view = (Tensor.arange(6, device=device).float().reshape([2, 3]) * (rank + 1)).transpose()
    out["view"] = comm.all_reduce(view).to_numpy()
    out["broadcast"] = comm.broadcast(Tensor.full([5], float(rank), device),
                                      root=world - 1).to_numpy()
    out["broadcast_bool"] = comm.broadcast(Tensor.full([3], rank == 0, device, "bool")).to_numpy()
    out["all_gather"] = comm.all_gather(mine[0]).to_numpy()
    chunks = Tensor.arange(4 * world, device=device).float().reshape([2 * world, 2]) * (rank + 1)
    out["reduce_scatter"] = comm.reduce_scatter(chunks).to_numpy()
    out["reduce_scatter_mean"] = comm.reduce_scatter(chunks, "mean").to_numpy()
    out["started"] = [t.to_numpy() for t in comm.all_reduce_start([mine, mine * 2]).wait()]
    tracked = Tensor.full([2], float(rank + 1), f"autodiff+cuda:{device.index}").require_grad()
    reduced = comm.all_reduce(tracked)
    out["autodiff"] = (reduced.backend.name, reduced.is_require_grad(), reduced.to_numpy())
    try:
        fused = Tensor.full([2], float(rank + 1), f"fusion+cuda:{device.index}") * 2 + 1
    except Exception as error:  # burnish-fusion not installed: nothing to check
        out["fusion"] = repr(error)
    else:
        reduced = comm.all_reduce(fused)
        out["fusion"] = (reduced.backend.name, reduced.to_numpy())
    comm.barrier()
    return out


class Mlp(nn.Module):
    layers: list[nn.Linear]

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


def initial_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    weights = {}
    for i, (d_in, d_out) in enumerate(zip(SIZES, SIZES[1:])):
        bound = 1 / np.sqrt(d_in)
        weights[f"layers.{i}.weight"] = rng.uniform(-bound, bound, (d_in, d_out)).astype("f4")
        weights[f"layers.{i}.bias"] = rng.uniform(-bound, bound, d_out).astype("f4")
    return weights


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(step)
    return (rng.standard_normal((BATCH, SIZES[0])).astype("f4"),
            rng.integers(0, SIZES[-1], BATCH))


def train(device, comm: distributed.Communicator | None, steps: int,
          captured: bool = False) -> dict[str, np.ndarray]:
    """SGD on the MLP; with ``comm``, this rank's share of each batch and averaged gradients.
    Ranks other than 0 start from other weights: ``broadcast_module`` must replace them.
    ``captured``: each step through ``burnish.capture``, which refuses the all-reduce (its
    replay would skip it) and runs the step eagerly."""
    rank, world = (0, 1) if comm is None else (comm.rank, comm.world_size)
    start = {name: value + rank for name, value in initial_weights().items()}
    model = Mlp([nn.LinearConfig(a, b).init(device) for a, b in zip(SIZES, SIZES[1:])])
    model = model.map(lambda name, p: p.with_tensor(Tensor.from_data(start[name], device)))
    if comm is not None:
        model = comm.broadcast_module(model)
    sgd, loss = optim.Sgd(), nn.CrossEntropyLoss()
    # A bound method: capture keeps it as it is rather than walking into the communicator.
    reduce = None if comm is None else comm.all_reduce_gradients

    def train_step(model, x, y):
        grads = loss(model(x), y).backward()
        if reduce is not None:
            grads = reduce(grads, model)
        return sgd.step(LR, model, grads)

    step_fn = bn.capture(train_step) if captured else train_step
    share = BATCH // world
    for step in range(steps):
        x, y = batch(step)
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        model = step_fn(model, Tensor.from_data(x, device), Tensor.from_data(y, device))
    if captured and reduce is not None:  # refused (its all-reduce), so run eagerly
        assert not any(entry["replays"] for entry in step_fn.stats()), step_fn.stats()
    return {name: param.val().to_numpy() for name, param in model.named_params()}


def train_rank(comm: distributed.Communicator, steps: int,
               captured: bool = False) -> dict[str, np.ndarray]:
    return train(bn.backend("autodiff+cuda").devices()[comm.device.index], comm, steps,
                 captured)
