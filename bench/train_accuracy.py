"""Train the same models from the same weights on two backends; compare validation accuracies.

    python bench/train_accuracy.py --backends autodiff+ndarray autodiff+cuda
    python bench/train_accuracy.py --backends autodiff+ndarray autodiff+rocm --limit 2000 --epochs 1

The proof that a backend trains as well as the reference: on the MNIST files in ``--data``
(default ``$BURNISH_MNIST_DIR``; nothing is downloaded), split as examples/mnist splits them
(with only the test set's files: its first 8,000 digits to train on, its last 2,000 to
validate), each model is trained on each backend in turn and its validation accuracy printed
beside the others, with the seconds its training took:

- **mlp**: a 784-512-512-10 ReLU MLP (bench_mlp_train's), softmax cross-entropy, Adam at a
  constant lr of 1e-3, batches of 128;
- **cnn**: examples/mnist's CNN (its ``model.py``, dropout included) with the example's
  recipe: Adam under a cosine schedule peaking at 3e-3 after 50 warm-up steps, batches of 64.

Both start from the same weights (made on ``ndarray`` after ``burnish.seed(0)``, then moved to
each backend) and see the same batches in the same order (a seeded NumPy shuffle per epoch);
only dropout's random masks come from each backend's own generator. The starting loss (the
untrained model, dropout off, on the first training batch) is printed too: from identical
weights and inputs it must agree to float precision across backends. A backend
trains "to the same accuracy" when its validation accuracy is within ``--tolerance``
percentage points of the first backend's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_mlp_train import SIZES, mlp_class

import burnish
from burnish import Tensor, nn, optim
from burnish.data import MnistBatcher, PartialDataset

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mnist"
sys.path.insert(0, str(EXAMPLE))
from mnist import datasets  # noqa: E402  (examples/mnist/mnist.py: the example's split)
from model import CnnConfig  # noqa: E402  (examples/mnist/model.py: the example's CNN)

#: Per model: batch size, peak lr, warm-up steps (0: a constant lr), flattened inputs.
RECIPES = {
    "mlp": {"batch": 128, "lr": 1e-3, "warmup": 0, "flat": True},
    "cnn": {"batch": 64, "lr": 3e-3, "warmup": 50, "flat": False},
}
VALID_BATCH = 500


def load(data: Path, limit: int | None) -> dict[str, np.ndarray]:
    """The example's train and validation digits as normalised float32 images [n, 1, 28, 28]
    and int64 labels (``limit``: that many training digits, a quarter as many to validate)."""
    train_set, valid_set = datasets(data)
    if limit:
        train_set = PartialDataset(train_set, 0, min(limit, len(train_set)))
        valid_set = PartialDataset(valid_set, 0, min(max(limit // 4, 1), len(valid_set)))
    batcher = MnistBatcher()
    arrays = {}
    for split, dataset in (("train", train_set), ("valid", valid_set)):
        images, labels = batcher.collate([dataset.get(i) for i in range(len(dataset))])
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = images, labels
    return arrays


def initial_model(name: str) -> nn.Module:
    """The model's starting weights, on ndarray (the same on every backend it moves to)."""
    burnish.seed(0)
    if name == "cnn":
        return CnnConfig().init("ndarray")
    layers = [nn.LinearConfig(n, m).init("ndarray") for n, m in zip(SIZES[:-1], SIZES[1:])]
    return mlp_class()(layers, nn.Relu())


def train(name: str, backend: str, arrays: dict[str, np.ndarray], epochs: int) -> dict[str, Any]:
    """Train model ``name`` on ``backend``; its starting loss, last epoch's mean loss,
    validation accuracy (%) and the seconds training took."""
    recipe = RECIPES[name]
    device = burnish.backend(backend).default_device()
    model = initial_model(name).to_device(device)
    burnish.seed(0)  # dropout's masks: each backend's generator, seeded alike
    images, labels = arrays["train_images"], arrays["train_labels"]
    if recipe["flat"]:
        images = images.reshape(len(images), -1)
    batch = recipe["batch"]
    steps_per_epoch = -(-len(images) // batch)
    total = epochs * steps_per_epoch
    schedule = optim.CosineAnnealingLr(recipe["lr"], total,
                                       warmup_iters=min(recipe["warmup"], total // 10)) \
        if recipe["warmup"] else None
    adam, loss_fn = optim.Adam(), nn.CrossEntropyLoss()
    first = np.random.default_rng(0).permutation(len(images))[:batch]
    plain = model.valid()
    start_loss = float(loss_fn(plain(Tensor.from_data(images[first], plain.devices()[0])),
                               Tensor.from_data(labels[first], plain.devices()[0])).item())
    step = 0
    started = time.perf_counter()
    for epoch in range(epochs):
        order = np.random.default_rng(epoch).permutation(len(images))
        epoch_loss = None
        for start in range(0, len(images), batch):
            chosen = order[start:start + batch]
            x = Tensor.from_data(images[chosen], device)
            y = Tensor.from_data(labels[chosen], device)
            loss = loss_fn(model(x), y)
            # Summed on the device, read once an epoch: no synchronisation per step.
            epoch_loss = loss.detach() if epoch_loss is None else epoch_loss + loss.detach()
            lr = schedule.lr(step) if schedule else recipe["lr"]
            model = adam.step(lr, model, loss.backward())
            step += 1
        mean_loss = float(epoch_loss.item()) / steps_per_epoch
        print(f"  {name} on {backend}: epoch {epoch + 1}/{epochs}, mean loss {mean_loss:.4f}, "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    device.backend.sync(device)
    seconds = time.perf_counter() - started
    return {"start_loss": start_loss, "last_epoch_loss": mean_loss, "seconds": seconds,
            "steps": step, "accuracy": accuracy(model.valid(), arrays, recipe["flat"])}


def accuracy(model: nn.Module, arrays: dict[str, np.ndarray], flat: bool) -> float:
    """The percentage of validation digits ``model`` (on a plain backend) labels right."""
    images, labels = arrays["valid_images"], arrays["valid_labels"]
    if flat:
        images = images.reshape(len(images), -1)
    device = model.devices()[0]
    right = 0
    for start in range(0, len(images), VALID_BATCH):
        x = Tensor.from_data(images[start:start + VALID_BATCH], device)
        y = Tensor.from_data(labels[start:start + VALID_BATCH], device)
        right += int((model(x).argmax(dim=1).reshape([-1]) == y).int().sum().item())
    return 100.0 * right / len(images)


def markdown(results: dict[str, dict[str, dict]], backends: list[str], tolerance: float) -> str:
    header = ["model", "steps"]
    for backend in backends:
        header += [f"{backend} accuracy", f"{backend} time", f"{backend} starting loss"]
    header += [f"same accuracy (within {tolerance:g} points of {backends[0]})"]
    rows = [header]
    for name, by_backend in results.items():
        reference = by_backend[backends[0]]
        row = [name, str(reference.get("steps", "-"))]
        verdicts = []
        for backend in backends:
            r = by_backend[backend]
            if "error" in r:
                row += [f"failed: {r['error']}", "-", "-"]
                verdicts.append(f"{backend}: failed")
                continue
            row += [f"{r['accuracy']:.2f}%", f"{r['seconds']:.1f} s", f"{r['start_loss']:.6f}"]
            if backend != backends[0] and "accuracy" in reference:
                gap = r["accuracy"] - reference["accuracy"]
                same = abs(gap) <= tolerance
                r["same_accuracy"] = same
                verdicts.append(f"{backend}: {'yes' if same else '**no**'} ({gap:+.2f})")
        row.append("; ".join(verdicts) or "-")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    rows.insert(1, ["-" * w for w in widths])
    return "\n".join("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"
                     for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", required=True, metavar="NAME",
                        help="autodiff backends to compare, the reference first "
                             "(e.g. autodiff+ndarray autodiff+cuda)")
    parser.add_argument("--models", nargs="+", choices=list(RECIPES), default=list(RECIPES),
                        help="which models to train (mlp cnn)")
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: $BURNISH_MNIST_DIR)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per model (4)")
    parser.add_argument("--limit", type=int, help="train on this many digits only (a check)")
    parser.add_argument("--tolerance", type=float, default=1.0,
                        help="percentage points of accuracy that still count as the same (1.0)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the table too")
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("set BURNISH_MNIST_DIR (or pass --data) to a folder of the MNIST IDX files, "
                     "e.g. t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz")
    for backend in args.backends:
        if not backend.startswith("autodiff+"):
            parser.error(f"{backend!r} cannot train: name an autodiff backend, e.g. "
                         f"autodiff+{backend}")
    arrays = load(args.data, args.limit)
    print(f"train_accuracy: {len(arrays['train_labels'])} digits to train on, "
          f"{len(arrays['valid_labels'])} to validate", file=sys.stderr, flush=True)

    results: dict[str, dict[str, dict]] = {}
    for name in args.models:
        results[name] = {}
        for backend in args.backends:
            try:
                results[name][backend] = train(name, backend, arrays, args.epochs)
            except Exception as error:  # a missing backend or driver: say so, go on
                results[name][backend] = {"error": f"{type(error).__name__}: {error}"}
            print(f"{name} on {backend}: {results[name][backend]}", file=sys.stderr, flush=True)

    table = markdown(results, args.backends, args.tolerance)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        report = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(["python", *sys.argv]),
            "machine": {"cpu": platform.processor() or "unknown", "cores": os.cpu_count(),
                        "system": platform.platform(), "python": platform.python_version()},
            "burnish": burnish.__version__,
            "epochs": args.epochs, "limit": args.limit, "tolerance": args.tolerance,
            "train_digits": len(arrays["train_labels"]),
            "valid_digits": len(arrays["valid_labels"]),
            "results": results,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    failed = any("error" in r or r.get("same_accuracy") is False
                 for by_backend in results.values() for r in by_backend.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
