"""California Housing: an MLP predicts a district's median house value from the 1990 census.

Reads the CSV with ``burnish.data.CsvDataset`` and a schema, fills the missing bedroom counts,
one-hot encodes the ocean proximity, standardises the features with statistics of the training
split only (``burnish.data.Normalizer``), trains with the Learner (MSE on the standardised
value), reports the validation RMSE in dollars and plots predicted against true values."""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import Tensor, nn, optim
from burnish.data import (
    ChecksumError,
    CsvDataset,
    DataError,
    DataLoader,
    InMemoryDataset,
    Normalizer,
    cache_dir,
    download_verified,
)
from burnish.train import LearnerBuilder, LossMetric, RegressionOutput

#: Where the CSV comes from: the copy in "Hands-On Machine Learning"'s repository, unchanged
#: since 2016 (its git blob d5e3fa24); the SHA-256 is that file's, checked on each download.
URLS = [
    "https://raw.githubusercontent.com/ageron/handson-ml2/master/datasets/housing/housing.csv",
    "https://raw.githubusercontent.com/ageron/handson-ml/master/datasets/housing/housing.csv",
]
SHA256 = "8a3727f4cf54ac1a327f69b1d5b4db54c5834ea81c6e4efc0d163300022a685e"
TARGET = "median_house_value"
NUMERIC = ["longitude", "latitude", "housing_median_age", "total_rooms", "total_bedrooms",
           "population", "households", "median_income"]
CATEGORY = "ocean_proximity"
#: The values of ocean_proximity, in the one-hot columns' order (others get all zeros).
CATEGORIES = ["<1H OCEAN", "INLAND", "ISLAND", "NEAR BAY", "NEAR OCEAN"]


def number_or_nan(text: str) -> float:
    """A CSV cell as a float; an empty cell (a missing value) as NaN."""
    return float(text) if text.strip() else math.nan


#: The schema: every numeric column as a float (NaN where empty), the category as text.
SCHEMA = {**{name: number_or_nan for name in [*NUMERIC, TARGET]}, CATEGORY: str}


def housing_csv(data: Path | None) -> Path:
    """The CSV: ``data`` when given, else the cached copy, downloaded (and checked) first."""
    if data is not None:
        return data
    path = cache_dir("california-housing") / "housing.csv"
    if not path.exists():
        try:
            download_verified(URLS, path, SHA256)
        except ChecksumError:
            raise
        except DataError as error:
            sys.exit(f"regression.py: {error}\nOffline, pass --data FILE: a copy of housing.csv")
    return path


def load(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows as arrays: numeric features [n, 8] (NaN where missing), one-hot ocean
    proximity [n, 5] and the target [n] in dollars."""
    rows = CsvDataset(path, types=SCHEMA)
    numeric = np.array([[row[name] for name in NUMERIC] for row in rows], np.float64)
    one_hot = np.array([[row[CATEGORY] == c for c in CATEGORIES] for row in rows], np.float64)
    target = np.array([row[TARGET] for row in rows], np.float64)
    if np.isnan(target).any():
        raise DataError(f"{path}: {int(np.isnan(target).sum())} rows have no {TARGET}")
    return numeric, one_hot, target


@dataclass
class Split:
    """One split, prepared: standardised features [n, 13] and target [n], and the dollars."""

    inputs: np.ndarray
    targets: np.ndarray
    dollars: np.ndarray


def prepare(path: Path, valid_fraction: float, seed: int) -> tuple[Split, Split, Normalizer]:
    """Split the rows at random (``seed``), fill missing values with the training split's
    medians, standardise with its statistics; return both splits and the target's normalizer."""
    numeric, one_hot, target = load(path)
    order = np.random.default_rng(seed).permutation(len(target))
    cut = len(order) - max(1, round(len(order) * valid_fraction))
    train, valid = order[:cut], order[cut:]
    # Statistics of the training split only, so nothing of the validation split leaks in.
    medians = np.nanmedian(numeric[train], axis=0)
    missing = np.isnan(numeric)
    if missing.any():
        counts = ", ".join(f"{NUMERIC[c]} {n}" for c, n in enumerate(missing.sum(0)) if n)
        print(f"missing values filled with the training split's medians: {counts}")
    numeric = np.where(missing, medians, numeric)
    features = Normalizer.fit(numeric[train])
    values = Normalizer.fit(target[train])

    def split(rows: np.ndarray) -> Split:
        inputs = np.concatenate([features(numeric[rows]), one_hot[rows]], axis=1)
        return Split(inputs.astype(np.float32), values(target[rows]), target[rows])

    return split(train), split(valid), values


@dataclass
class HousingBatch:
    inputs: Tensor  # float32 [batch, features]
    targets: Tensor  # float32 [batch, 1], standardised


class HousingBatcher:
    """Stacks ``(features, target)`` items into a ``HousingBatch``."""

    def batch(self, items: list, device=None) -> HousingBatch:
        inputs = np.stack([features for features, _ in items]).astype(np.float32)
        targets = np.array([[target] for _, target in items], np.float32)
        return HousingBatch(Tensor.from_numpy(inputs, device), Tensor.from_numpy(targets, device))


class Mlp(nn.Module):
    """``[batch, features]`` to ``[batch, 1]``: two hidden ReLU layers."""

    hidden1: nn.Linear
    hidden2: nn.Linear
    output: nn.Linear

    def forward(self, inputs: Tensor) -> Tensor:
        x = nn.Relu()(self.hidden1(inputs))
        return self.output(nn.Relu()(self.hidden2(x)))


class MlpConfig(nn.Config):
    features: int
    hidden: int = 64

    def init(self, device=None) -> Mlp:
        return Mlp(hidden1=nn.LinearConfig(self.features, self.hidden).init(device),
                   hidden2=nn.LinearConfig(self.hidden, self.hidden).init(device),
                   output=nn.LinearConfig(self.hidden, 1).init(device))


def regression_step(model: Mlp, batch: HousingBatch) -> RegressionOutput:
    """The Learner's step: MSE between the predicted and the true standardised values."""
    device = model.output.weight.device
    predictions = model(batch.inputs.to_device(device))
    targets = batch.targets.to_device(device)
    return RegressionOutput(nn.MseLoss()(predictions, targets), predictions, targets)


def predict(model: Mlp, inputs: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """The model's standardised predictions [n] for ``inputs`` [n, features], made on the
    backend that the training backend wraps (``model.valid()``: no gradients kept)."""
    model = model.valid()
    device = model.output.weight.device
    parts = []
    for start in range(0, len(inputs), batch_size):
        batch = Tensor.from_numpy(inputs[start : start + batch_size], device)
        parts.append(model(batch).to_numpy().reshape(-1))
    return np.concatenate(parts)


def plot(path: Path, truth: np.ndarray, predicted: np.ndarray, rmse: float) -> None:
    """A scatter plot of predicted against true values (in $1000s) as a PNG at ``path``."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install matplotlib): no plot written")
        return
    matplotlib.use("Agg")  # files only, no window
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.5, 5.5), dpi=100)
    many = len(truth) > 1000  # thousands of points: small and translucent
    axes.scatter(truth / 1000, predicted / 1000, s=4 if many else 12, alpha=0.3 if many else 0.8,
                 linewidths=0)
    low, high = min(truth.min(), predicted.min()) / 1000, max(truth.max(), predicted.max()) / 1000
    axes.plot([low, high], [low, high], color="black", linewidth=1, label="predicted = true")
    axes.set_xlabel("true median house value ($1000s)")
    axes.set_ylabel("predicted ($1000s)")
    axes.set_title(f"validation split: {len(truth)} districts, RMSE ${rmse:,.0f}")
    axes.legend(loc="upper left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    print(f"plot written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=None,
                        help="housing.csv (default: the cached copy, downloaded and checked "
                             "first when missing)")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (e.g. autodiff+wgpu)")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/regression"),
                        help="where the Learner's logs and checkpoints go")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak of the cosine schedule")
    parser.add_argument("--valid-fraction", type=float, default=0.2,
                        help="share of the rows held out for validation")
    parser.add_argument("--seed", type=int, default=0, help="seeds the split and the weights")
    parser.add_argument("--plot", type=Path, default=None,
                        help="write a PNG scatter plot of predicted against true values here")
    args = parser.parse_args()
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")
    if not 0 < args.valid_fraction < 1:
        parser.error(f"--valid-fraction must be between 0 and 1, got {args.valid_fraction}")

    path = housing_csv(args.data)
    train_split, valid_split, values = prepare(path, args.valid_fraction, args.seed)
    print(f"{len(train_split.targets)} training and {len(valid_split.targets)} validation "
          f"districts from {path}; {train_split.inputs.shape[1]} features")
    bn.seed(args.seed)
    device = bn.backend(args.backend).default_device()
    model = MlpConfig(features=train_split.inputs.shape[1]).init(device)
    train_loader = DataLoader(InMemoryDataset(list(zip(train_split.inputs, train_split.targets))),
                              HousingBatcher(), args.batch_size, shuffle=True, seed=args.seed,
                              device=device)
    # Validation runs on model.valid(), on the backend the autodiff one wraps.
    valid_loader = DataLoader(InMemoryDataset(list(zip(valid_split.inputs, valid_split.targets))),
                              HousingBatcher(), 1024,
                              device=model.valid().output.weight.device)
    steps = args.epochs * len(train_loader)
    schedule = optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(100, steps // 10))
    learner = (LearnerBuilder(args.run_dir)
               .metrics(LossMetric())
               .num_epochs(args.epochs)
               .step(regression_step)
               .seed(args.seed)
               .build(model, optim.Adam(), schedule))
    started = time.perf_counter()
    model = learner.fit(train_loader, valid_loader)
    seconds = time.perf_counter() - started

    predicted = values.inverse(predict(model, valid_split.inputs)).astype(np.float64)
    truth = valid_split.dollars
    rmse = float(np.sqrt(np.mean((predicted - truth) ** 2)))
    baseline = float(np.sqrt(np.mean((values.mean - truth) ** 2)))
    print(f"validation RMSE ${rmse:,.0f} after {seconds:.0f}s (predicting the training mean: "
          f"${baseline:,.0f}; the values' std: ${truth.std():,.0f})")
    if args.plot is not None:
        plot(args.plot, truth, predicted, rmse)


if __name__ == "__main__":
    main()
