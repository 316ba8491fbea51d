"""The Learner captures its steps where the backend can, says so first, and trains exactly as
it does eagerly."""

import io
import os

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor, nn, optim
from burnish.train import (
    AccuracyMetric,
    ClassificationOutput,
    LearnerBuilder,
    LossMetric,
    PlainProgress,
)


def gpu_device(name: str = "autodiff+rocm"):
    try:
        return bn.backend(name).default_device()
    except Exception as error:  # not installed, no OpenCL driver
        message = (f"rocm cannot run here ({type(error).__name__}: {error}); it needs an "
                   "OpenCL driver (pip install 'burnish-backend-rocm[pocl]')")
        wanted = os.environ.get("BURNISH_REQUIRE_BACKENDS", "")
        if "rocm" in wanted or "all" in wanted:
            pytest.fail(message + " [BURNISH_REQUIRE_BACKENDS requires it]", pytrace=False)
        pytest.skip(message)


class Net(nn.Module):
    hidden: nn.Linear
    output: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        return self.output(nn.Relu()(self.hidden(x)))

    def forward_classification(self, batch) -> ClassificationOutput:
        x, y = batch
        logits = self(x)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, y), logits, y)


def batches(device, n: int = 64, size: int = 16):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1).astype(np.int64)
    return [(Tensor.from_data(x[i:i + size], device), Tensor.from_data(y[i:i + size], device))
            for i in range(0, n, size)]


def train(tmp_path, device, capture: bool):
    bn.seed(1)
    model = Net(nn.LinearConfig(4, 16).init(device), nn.LinearConfig(16, 3).init(device))
    stream = io.StringIO()
    learner = (LearnerBuilder(tmp_path / str(capture)).metrics(LossMetric(), AccuracyMetric())
               .num_epochs(3).capture(capture).build(model, optim.Adam(capturable=True),
                                                     optim.CosineAnnealingLr(0.05, 12)))
    learner.renderer = PlainProgress(stream, every=1e9)
    # Validation runs model.valid(), on the inner backend: its batches are made there.
    model = learner.fit(batches(device), batches(device.native))
    return model, stream.getvalue().splitlines()[0], learner


def test_captured_training_gives_the_eager_weights_and_says_so(tmp_path):
    device = gpu_device()
    eager, first_eager, _ = train(tmp_path, device, capture=False)
    captured, first, learner = train(tmp_path, device, capture=True)
    assert first.startswith("capture: on (autodiff+rocm)")
    assert first_eager == "capture: off (LearnerBuilder.capture(False))"
    stats = learner._captured[0].stats()
    assert sum(s["replays"] for s in stats) >= 6, stats
    for (name, p), (_, q) in zip(eager.named_params(), captured.named_params()):
        np.testing.assert_array_equal(q.val().to_numpy(), p.val().to_numpy(), err_msg=name)


def test_a_backend_without_capture_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(type(bn.backend("ndarray")), "capturer", lambda self, device: None)
    stream = io.StringIO()
    bn.seed(1)
    device = bn.backend("autodiff+ndarray").default_device()
    model = Net(nn.LinearConfig(4, 16).init(device), nn.LinearConfig(16, 3).init(device))
    learner = (LearnerBuilder(tmp_path).metrics(LossMetric()).num_epochs(1)
               .build(model, optim.Sgd(), 0.1))
    learner.renderer = PlainProgress(stream, every=1e9)
    data = [(Tensor.from_data(np.ones((2, 4), np.float32), device),
             Tensor.from_data(np.zeros(2, np.int64), device))]
    learner.fit(data)
    assert stream.getvalue().splitlines()[0] == (
        "capture: off (backend 'autodiff+ndarray' cannot capture; the steps run eagerly)")
