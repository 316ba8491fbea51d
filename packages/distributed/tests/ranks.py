"""What each rank runs in the tests (under mpiexec): ``python ranks.py SCENARIO OUT_DIR [ARGS]``
writes the rank's results to ``OUT_DIR/rank-R.npz`` (rank 0 also ``single.npz`` where the
scenario compares with one process)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import Tensor, nn
from burnish.distributed import GradientReducer, init

DEVICE = "autodiff+ndarray"


def collectives(out: Path) -> None:
    comm = init()
    r, w = comm.rank, comm.world_size
    device = bn.backend("ndarray").default_device()
    x = Tensor.from_data(np.arange(6, dtype=np.float32).reshape(2, 3) + r, device)
    results = {
        "sum": comm.all_reduce(x).to_numpy(),
        "mean": comm.all_reduce(x, "mean").to_numpy(),
        "max": comm.all_reduce(x, "max").to_numpy(),
        "min": comm.all_reduce(x, "min").to_numpy(),
        "prod": comm.all_reduce(x, "prod").to_numpy(),
        "int_sum": comm.all_reduce(Tensor.from_data(np.array([r, 1], np.int64), device)
                                   ).to_numpy(),
        "broadcast": comm.broadcast(x, root=w - 1).to_numpy(),
        "gather": comm.all_gather(x).to_numpy(),
        "scatter": comm.reduce_scatter(Tensor.from_data(
            np.arange(4 * w, dtype=np.float32).reshape(2 * w, 2) * (r + 1), device)).to_numpy(),
    }
    comm.barrier()
    np.savez(out / f"rank-{r}.npz", **results)


class Mlp(nn.Module):
    """20 -> 16 -> 16 -> 4."""

    fc1: nn.Linear
    fc2: nn.Linear
    fc3: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        return self.fc3(nn.Relu()(self.fc2(nn.Relu()(self.fc1(x)))))


def mlp(device) -> Mlp:
    return Mlp(fc1=nn.LinearConfig(20, 16).init(device), fc2=nn.LinearConfig(16, 16).init(device),
               fc3=nn.LinearConfig(16, 4).init(device))


def gradients(out: Path, bucket_bytes: str = "400", backend: str = "mpi") -> None:
    """Each rank's share of one batch of 16; the reduced gradients (overlapped, small buckets
    so that there are several, and through all_reduce_gradients) against rank 0's gradients of
    the whole batch on one process. ``backend="nccl"``: on the GPUs, through NCCL."""
    comm = init(backend)
    r, w = comm.rank, comm.world_size
    device = bn.backend(DEVICE).default_device() if backend == "mpi" else \
        bn.backend("autodiff+cuda").devices()[comm.device.index]
    bn.seed(r)  # different weights on each rank: broadcast_module must make them equal
    model = comm.broadcast_module(mlp(device))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 20), dtype=np.float32)
    y = rng.integers(0, 4, 16)
    share = 16 // w
    loss_fn = nn.CrossEntropyLoss()

    def loss(xs, ys):
        return loss_fn(model(Tensor.from_data(xs, device)), Tensor.from_data(ys, device))

    reducer = GradientReducer(comm, model, bucket_bytes=int(bucket_bytes),
                              overlap_backward=True)
    with reducer.overlap(model):
        grads = loss(x[r * share:(r + 1) * share], y[r * share:(r + 1) * share]).backward()
    reduced = reducer.gradients(grads)
    # Every bucket after the pass (NCCL's default).
    reducer.overlap_backward = False
    with reducer.overlap(model):
        grads = loss(x[r * share:(r + 1) * share], y[r * share:(r + 1) * share]).backward()
    after = reducer.gradients(grads)
    plain = comm.all_reduce_gradients(
        loss(x[r * share:(r + 1) * share], y[r * share:(r + 1) * share]).backward(), model)
    params = [p.val() for p in model.params()]
    np.savez(out / f"rank-{r}.npz",
             buckets=np.array(len(reducer.buckets)),
             **{f"overlap{i}": p.grad(reduced).to_numpy() for i, p in enumerate(params)},
             **{f"after{i}": p.grad(after).to_numpy() for i, p in enumerate(params)},
             **{f"plain{i}": p.grad(plain).to_numpy() for i, p in enumerate(params)})
    if r == 0:
        full = loss(x, y).backward()
        np.savez(out / "single.npz", **{f"grad{i}": p.grad(full).to_numpy()
                                        for i, p in enumerate(params)})


def die(out: Path, victim: str = "1", how: str = "kill", late: str = "0") -> None:
    """Rank ``victim`` is killed (``how="kill"``), exits (``"exit"``) or hangs (``"hang"``)
    before a collective that the others wait in; the last rank joins it ``late`` seconds after
    the others. After a hang, the others catch the error, write it and end the job
    (``abort``); otherwise the error is left uncaught, and the process ends the job as it
    exits."""
    import os
    import signal
    import time

    comm = init()
    device = bn.backend("ndarray").default_device()
    comm.barrier()
    if comm.rank == int(victim):
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "exit":
            os._exit(3)
        time.sleep(120)
    if comm.rank == comm.world_size - 1:
        time.sleep(float(late))
    if how != "hang":
        comm.all_reduce(Tensor.from_data(np.ones(3, np.float32), device))
    else:
        try:
            comm.all_reduce(Tensor.from_data(np.ones(3, np.float32), device))
        except Exception as error:
            (out / f"error-{comm.rank}.txt").write_text(f"{type(error).__name__}: {error}")
            comm.abort()
            raise SystemExit(1) from error
    (out / f"done-{comm.rank}.txt").write_text("no error")


class MnistMlp(nn.Module):
    """The MNIST MLP, 784-64-10, classifying ``MnistBatch``es."""

    hidden: nn.Linear
    output: nn.Linear

    def forward(self, images: Tensor) -> Tensor:
        return self.output(nn.Relu()(self.hidden(images.reshape([images.shape[0], -1]))))

    def forward_classification(self, batch):
        from burnish.train import ClassificationOutput

        logits = self(batch.images.to_device(self.hidden.weight.device))
        targets = batch.targets.to_device(logits.device)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, targets), logits, targets)


def mnist(out: Path, run_dir: str, epochs: str = "2", resume: str = "0") -> None:
    """Train the MLP on MNIST (``BURNISH_MNIST_DIR``'s, else the test set shipped in
    burnish-train: 2400 images to train on, 800 to validate) with the Learner, which joins
    the job by itself when started by mpiexec; rank 0 writes the validation accuracy and the
    parameters, every rank a checksum of its parameters."""
    import os

    from burnish import optim
    from burnish.data import DataLoader, MnistBatcher, MnistDataset, PartialDataset
    from burnish.distributed import ShardedLoader, detect_job
    from burnish.train import AccuracyMetric, LearnerBuilder, LossMetric

    job = detect_job()
    root = os.environ.get("BURNISH_MNIST_DIR")
    if root and any(Path(root).glob("train-images-idx3-ubyte*")):
        train_set = PartialDataset(MnistDataset("train", root=root), 0, 2400)
        valid_set = PartialDataset(MnistDataset("test", root=root), 0, 800)
    else:  # a folder of the test set alone (or none: the copy burnish-train ships)
        test = MnistDataset("test", root=root) if root else MnistDataset("test", embedded=True)
        train_set, valid_set = PartialDataset(test, 0, 2400), PartialDataset(test, 2400, 3200)
    device = bn.backend(DEVICE).default_device()
    bn.seed(0)
    model = MnistMlp(hidden=nn.LinearConfig(784, 64).init(device),
                     output=nn.LinearConfig(64, 10).init(device))
    share = {"rank": job.rank, "world_size": job.world_size}
    train = ShardedLoader(train_set, MnistBatcher(), 64, shuffle=True, seed=1, device=device,
                          **share)
    valid = ShardedLoader(valid_set, MnistBatcher(), 200, device=device, **share)
    learner = (LearnerBuilder(run_dir).metrics(LossMetric(), AccuracyMetric())
               .num_epochs(int(epochs)).checkpoint(keep_last=2).output("none")
               .build(model, optim.Adam(), 2e-3))
    model = learner.fit(train, valid, resume=resume == "1")
    params = [p.val().to_numpy() for p in model.params()]
    np.savez(out / f"rank-{job.rank}.npz", checksum=np.array([p.sum() for p in params]))
    if job.rank == 0:
        accuracy = learner.log.epochs["valid"]["accuracy"]
        np.savez(out / "result.npz", accuracy=np.array(accuracy), **{
            f"param{i}": p for i, p in enumerate(params)})
    _ = DataLoader  # the single-process loader is ShardedLoader's base


def nccl(out: Path) -> None:
    """Joined through NCCL from torchrun's variables alone (the rendezvous on MASTER_ADDR):
    an all-reduce and an all-gather on cuda:LOCAL_RANK."""
    comm = init("nccl")
    r = comm.rank
    x = Tensor.full([3], float(r + 1), comm.device)
    np.savez(out / f"nccl-{r}.npz", sum=comm.all_reduce(x).to_numpy(),
             gather=comm.all_gather(x).to_numpy(),
             device=np.array(str(comm.device)))
    comm.close()


def nccl_die(out: Path) -> None:
    """Two ranks all-reduce in a loop through NCCL; rank 1 is killed after the fifth. Rank 0
    waits in its next all-reduce until the watchdog ends it (the test checks how)."""
    import os
    import signal

    comm = init("nccl")
    x = Tensor.full([1 << 20], 1.0, comm.device)
    for step in range(1000):
        if comm.rank == 1 and step == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        total = comm.all_reduce(x)
        total.to_numpy()  # waits for the all-reduce on the GPU
        (out / f"step-{comm.rank}").write_text(str(step))
    comm.close()


if __name__ == "__main__":
    globals()[sys.argv[1]](Path(sys.argv[2]), *sys.argv[3:])
