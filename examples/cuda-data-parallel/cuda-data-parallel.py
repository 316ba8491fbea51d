"""Train a 784-512-512-10 MLP on MNIST with data parallelism across the GPUs of this machine:
one process per GPU (``burnish.cuda.distributed.launch``), each on its share of every batch,
their gradients averaged through NCCL before each Adam step.

MNIST is read from ``--data`` or ``$BURNISH_MNIST_DIR`` (a folder of the IDX files); without
either, the run uses synthetic MNIST-like digits and says so. Without a GPU, CuPy or NCCL it
prints why and exits with status 1."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import burnish as bn
import burnish.functional as F
from burnish import Tensor, nn, optim
from burnish.cuda import distributed
from burnish.errors import UnsupportedError

SIZES = (784, 512, 512, 10)


class Mlp(nn.Module):
    layers: list[nn.Linear]

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


def mnist(data: str | None, limit: int | None) -> tuple[np.ndarray, ...]:
    """Training and validation images ``[n, 784]`` (float32, normalized) and labels: MNIST's
    own splits when its training files are in ``data``, else the first 8,000 and the last 2,000
    digits of its test set; synthetic digits without a folder."""
    if data is None:
        x, y = synthetic(10_000)
        split = 8_000
    else:
        from burnish.data import MnistDataset

        root = Path(data)
        if any(root.glob("train-images-idx3-ubyte*")):
            train, valid = MnistDataset("train", root=root), MnistDataset("test", root=root)
            x = np.concatenate([train.images, valid.images])
            y = np.concatenate([train.labels, valid.labels])
            split = len(train.labels)
        else:
            test = MnistDataset("test", root=root)
            x, y, split = test.images, test.labels, 8_000
        x = (x.reshape(len(x), -1).astype(np.float32) / 255 - 0.1307) / 0.3081
    x_train, y_train, x_valid, y_valid = x[:split], y[:split], x[split:], y[split:]
    if limit:
        x_train, y_train = x_train[:limit], y_train[:limit]
        x_valid, y_valid = x_valid[:max(limit // 4, 1)], y_valid[:max(limit // 4, 1)]
    return x_train, y_train.astype(np.int64), x_valid, y_valid.astype(np.int64)


def synthetic(count: int) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-shaped stand-ins: ten fixed 28x28 patterns, one per class, with noise."""
    rng = np.random.default_rng(0)
    patterns = (rng.uniform(size=(10, 784)) > 0.8).astype(np.float32) * 2
    labels = rng.integers(0, 10, count)
    images = patterns[labels] + rng.normal(0, 1, (count, 784)).astype(np.float32)
    return images.astype(np.float32), labels


def train_rank(comm: distributed.Communicator, args: argparse.Namespace) -> dict:
    """One rank: the same model as rank 0, its share of each batch, averaged gradients."""
    rank, world = comm.rank, comm.world_size
    say = print if rank == 0 else (lambda *a, **k: None)
    device = bn.backend("autodiff+cuda").devices()[comm.device.index]
    x_train, y_train, x_valid, y_valid = mnist(args.data, args.limit)
    bn.seed(args.seed)
    model = Mlp([nn.LinearConfig(a, b).init(device) for a, b in zip(SIZES, SIZES[1:])])
    model = comm.broadcast_module(model)  # every rank starts from rank 0's weights
    adam, loss_fn = optim.Adam(), nn.CrossEntropyLoss()
    share = args.batch_size // world
    steps = len(x_train) // args.batch_size
    history = []
    for epoch in range(1, args.epochs + 1):
        started = time.perf_counter()
        # The same shuffled order on every rank; each takes its own slice of every batch.
        order = np.random.default_rng(args.seed + epoch).permutation(len(x_train))
        total = Tensor.zeros([], device.native)
        for step in range(steps):
            mine = order[step * args.batch_size + rank * share:][:share]
            x = Tensor.from_data(x_train[mine], device)
            y = Tensor.from_data(y_train[mine], device)
            loss = loss_fn(model(x), y)
            grads = comm.all_reduce_gradients(loss.backward(), model)
            model = adam.step(args.lr, model, grads)
            total = total + loss.inner()
        # The mean loss over all ranks' shares; reading it waits for the epoch's work.
        mean_loss = comm.all_reduce(total, "mean").item() / max(steps, 1)
        seconds = time.perf_counter() - started
        accuracy = evaluate(comm, model.valid(), x_valid, y_valid)
        say(f"epoch {epoch}: loss {mean_loss:.4f}, validation accuracy {accuracy:.2f}%, "
            f"{seconds:.1f} s ({steps * args.batch_size / seconds:,.0f} images/s on {world} "
            f"GPU{'s' if world > 1 else ''})", flush=True)
        history.append((mean_loss, accuracy))
    return {"rank": rank, "history": history}


def evaluate(comm: distributed.Communicator, model: Mlp, x: np.ndarray, y: np.ndarray) -> float:
    """Accuracy in percent over the whole validation set, each rank counting its share."""
    device = comm.device
    mine = np.array_split(np.arange(len(x)), comm.world_size)[comm.rank]
    right = Tensor.zeros([], device, "int64")
    for part in np.array_split(mine, max(len(mine) // 1000, 1)):
        if len(part):
            predicted = model(Tensor.from_data(x[part], device)).argmax(dim=1).reshape([-1])
            right = right + (predicted == Tensor.from_data(y[part], device)).int().sum()
    return 100.0 * comm.all_reduce(right).item() / len(x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: $BURNISH_MNIST_DIR; "
                             "without it, synthetic digits)")
    parser.add_argument("--world-size", type=int, default=None,
                        help="processes, one per GPU (default: every GPU)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=512,
                        help="the global batch, split evenly between the ranks")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--limit", type=int, default=None, help="train on this many images")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        gpus = distributed.gpu_count()
        distributed.load_nccl()
    except UnsupportedError as error:
        print(f"cuda-data-parallel needs NVIDIA GPUs with CuPy and NCCL; not here: {error}")
        return 1
    world = args.world_size or gpus
    if args.batch_size % world:
        parser.error(f"--batch-size {args.batch_size} does not split evenly between {world} "
                     "ranks")
    where = args.data or "synthetic MNIST-like digits (no --data or BURNISH_MNIST_DIR)"
    print(f"training the {'-'.join(map(str, SIZES))} MLP on {world} of {gpus} GPU(s), "
          f"batch {args.batch_size} ({args.batch_size // world} per GPU), data: {where}",
          flush=True)
    results = distributed.launch(train_rank, world, (args,))
    loss, accuracy = results[0]["history"][-1]
    print(f"done: final loss {loss:.4f}, validation accuracy {accuracy:.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
