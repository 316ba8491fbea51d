"""A toy classifier and data for the Learner's tests (imported by them and by a subprocess)."""

import sys
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import Tensor, nn, optim
from burnish.train import ClassificationOutput, LearnerBuilder

DEVICE = "autodiff+ndarray"


class Toy(nn.Module):
    hidden: nn.Linear
    dropout: nn.Dropout
    output: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        return self.output(self.dropout(nn.Relu()(self.hidden(x))))

    def forward_classification(self, batch) -> ClassificationOutput:
        x, y = batch
        logits = self(x.to_device(self.hidden.weight.device))
        y = y.to_device(logits.device)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, y), logits, y)


def toy_model() -> Toy:
    bn.seed(1)
    return Toy(nn.LinearConfig(4, 16).init(DEVICE), nn.Dropout(0.2),
               nn.LinearConfig(16, 3).init(DEVICE))


class ToyLoader:
    """Batches of a fixed data set, shuffled by epoch like a seeded DataLoader."""

    def __init__(self, n: int = 96, batch_size: int = 16, seed: int = 0, shuffle: bool = True):
        rng = np.random.default_rng(seed)
        self.x = rng.normal(size=(n, 4)).astype(np.float32)
        self.y = (self.x[:, 0] > 0).astype(np.int64) + (self.x[:, 1] > 1).astype(np.int64)
        self.batch_size, self.shuffle, self.epoch = batch_size, shuffle, 1

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-len(self.x) // self.batch_size)

    def __iter__(self):
        order = np.arange(len(self.x))
        if self.shuffle:
            order = np.random.default_rng(self.epoch).permutation(len(self.x))
        for start in range(0, len(order), self.batch_size):
            part = order[start:start + self.batch_size]
            yield Tensor.from_data(self.x[part], "ndarray"), Tensor.from_data(self.y[part],
                                                                               "ndarray")


class ToyBatcher:
    def batch(self, items, device=None):
        x = np.stack([item[0] for item in items])
        y = np.array([item[1] for item in items], np.int64)
        return Tensor.from_data(x, "ndarray"), Tensor.from_data(y, "ndarray")


def toy_data_loader(shuffle: bool = True, **workers):
    """The toy data through burnish.data's DataLoader (seeded shuffling, positions)."""
    from burnish.data import DataLoader, InMemoryDataset

    data = ToyLoader()
    items = InMemoryDataset(list(zip(data.x, data.y.tolist())))
    return DataLoader(items, ToyBatcher(), batch_size=16, shuffle=shuffle, seed=3, **workers)


def toy_worker_loader(shuffle: bool = True):
    """``toy_data_loader`` read by 2 persistent worker processes."""
    return toy_data_loader(shuffle, num_workers=2, persistent_workers=True)


def toy_builder(run_dir, epochs: int = 3) -> LearnerBuilder:
    from burnish.train import AccuracyMetric, LossMetric

    return (LearnerBuilder(run_dir).metrics(LossMetric(), AccuracyMetric()).num_epochs(epochs)
            .checkpoint(keep_last=2, best_by="loss").output("none"))


def weights(model) -> dict:
    return {name: p.val().to_numpy() for name, p in model.named_params()}


if __name__ == "__main__":
    # Trains slowly (a pause a step) so that a test can interrupt it with SIGINT.
    import time

    from burnish.train import TrainingInterrupted

    run_dir, resume = Path(sys.argv[1]), sys.argv[2] == "resume"
    output = sys.argv[3] if len(sys.argv) > 3 else "plain"

    def slow_step(model, batch):
        time.sleep(0.05)
        return model.forward_classification(batch)

    learner = (toy_builder(run_dir, epochs=3).step(slow_step).output(output)
               .build(toy_model(), optim.Adam(), 0.01))
    print("started", flush=True)
    try:
        model = learner.fit(ToyLoader(), ToyLoader(shuffle=False), resume=resume)
    except TrainingInterrupted as interrupted:
        print("interrupted", interrupted.checkpoint, flush=True)
        sys.exit(130)
    model.save(run_dir / "final.safetensors")
    print("finished", flush=True)
