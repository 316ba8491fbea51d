"""The Learner's overhead: one epoch through ``LearnerBuilder(...).build(...).fit(...)`` against
the same epoch written as a plain loop (same model, batches, Adam and seed).

    python bench/run.py learner --repeat 3 --min-time 0

A 784-512-512-10 ReLU MLP on ``autodiff+<backend>``, 100 steps of batch 128 over 12,800
synthetic samples (the data of bench_mlp_train.py), Adam at a constant 1e-3. Both take the same
list of pre-made batches, so only the training loop differs. The Learner tracks loss and
accuracy on the training split, writes its per-step CSV logs and prints plain progress lines
(to /dev/null); it validates nothing and writes no checkpoint. The plain loop reads the loss of
each step (``loss.item()``), as a loop that reports anything must.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass

import bench_mlp_train
from timing import Case, within

STEPS = 100
BATCH = 128
LR = 1e-3


@dataclass
class Batch:
    """Inputs ``[batch, 784]`` and class indices ``[batch]``."""

    inputs: object
    targets: object


def model_class() -> type:
    """The MLP of bench_mlp_train.py with the step the Learner calls."""
    from burnish import nn
    from burnish.train import ClassificationOutput

    class Classifier(bench_mlp_train.mlp_class()):
        def forward_classification(self, batch: Batch) -> ClassificationOutput:
            logits = self(batch.inputs)
            return ClassificationOutput(nn.CrossEntropyLoss()(logits, batch.targets), logits,
                                        batch.targets)

    return Classifier


def setup(device) -> tuple[object, list[Batch]]:
    """The initial model and the epoch's batches, on ``device``."""
    from burnish import Tensor, nn

    x, y, initial = bench_mlp_train.dataset()
    weights, biases = initial[:3], initial[3:]
    layers = [nn.Linear(nn.Param(Tensor.from_data(w, device)),
                        nn.Param(Tensor.from_data(c, device)))
              for w, c in zip(weights, biases)]
    model = model_class()(layers, nn.Relu())
    batches = [Batch(Tensor.from_data(x[s:s + BATCH], device=device),
                     Tensor.from_data(y[s:s + BATCH], device=device))
               for s in range(0, STEPS * BATCH, BATCH)]
    return model, batches


def loop_epoch(model, batches: list[Batch]) -> object:
    """The epoch written out: step, backward, Adam; the loss read at each step."""
    from burnish import optim

    adam = optim.Adam()
    for batch in batches:
        output = model.forward_classification(batch)
        output.loss.item()
        model = adam.step(LR, model, output.loss.backward())
    return model


def learner_epoch(model, batches: list[Batch]) -> object:
    """The same epoch through the Learner, with loss and accuracy metrics and plain output."""
    from burnish import optim
    from burnish.train import AccuracyMetric, LearnerBuilder, LossMetric

    with tempfile.TemporaryDirectory() as run_dir, open(os.devnull, "w") as sink, \
            contextlib.redirect_stdout(sink):
        learner = (LearnerBuilder(run_dir)
                   .metrics(LossMetric(), AccuracyMetric())
                   .num_epochs(1)
                   .output("plain")
                   .build(model, optim.Adam(), LR))
        return learner.fit(batches)


def cases(ctx) -> list[Case]:
    """The epoch both ways, as a case of bench/run.py."""
    from burnish.autodiff import Autodiff
    from burnish.backend import AutodiffOps

    backend = ctx.backend
    device = (backend if isinstance(backend, AutodiffOps) else Autodiff(backend)).default_device()
    model, batches = setup(device)
    runs = {"burnish": ctx.synced(lambda: learner_epoch(model, batches)),
            "loop": ctx.synced(lambda: loop_epoch(model, batches))}
    name = f"MLP 784-512-512-10, Adam: one epoch of {STEPS} steps of {BATCH}"
    return [Case("learner", name, runs, "Learner within 5% of a plain loop",
                 within(1.05, "loop"))]
