"""The Learner in mixed precision: bfloat16 under autocast (captured where the backend can),
float16 with a loss scaler that skips overflowing steps and is checkpointed."""

import io

import numpy as np
import pytest
from train_toy import ToyLoader, toy_model

import burnish as bn
from burnish import optim
from burnish.train import LearnerBuilder, LossMetric, PlainProgress


def fit(run_dir, epochs: int = 3, resume: bool = False, **precision):
    model = toy_model()
    builder = LearnerBuilder(run_dir).metrics(LossMetric()).num_epochs(epochs).checkpoint()
    if precision:
        builder = builder.mixed_precision(**precision)
    learner = builder.build(model, optim.Adam(), 0.05)
    stream = io.StringIO()
    learner.renderer = PlainProgress(stream, every=1e9)
    model = learner.fit(ToyLoader(), ToyLoader(shuffle=False), resume=resume)
    return model, learner, stream.getvalue()


def losses(learner) -> list[float]:
    return learner.log.epochs["train"]["loss"]


def test_bfloat16_trains_in_low_precision_with_float32_weights(tmp_path, monkeypatch):
    seen = []
    real = bn.functional.linear

    def spy(x, weight, bias=None):
        out = real(x, weight, bias)
        seen.append(out.dtype.name)
        return out

    monkeypatch.setattr(bn.functional, "linear", spy)
    model, learner, _ = fit(tmp_path / "bf16", dtype="bfloat16")
    assert learner.scaler is None
    assert set(seen) == {"bfloat16"}, seen  # the products ran in bfloat16, train and valid
    assert model.hidden.weight.val().dtype.name == "float32"
    trained = losses(learner)
    assert trained[-1] < trained[0], trained
    _, full, _ = fit(tmp_path / "fp32")
    np.testing.assert_allclose(trained, losses(full), rtol=0.05)  # bfloat16's rounding only


def test_float16_scales_the_loss_skips_overflowing_steps_and_checkpoints_the_scale(tmp_path):
    scaler = optim.GradScaler(init_scale=2.0**22, growth_interval=1000)
    _, learner, _ = fit(tmp_path / "run", dtype="float16", scaler=scaler)
    assert learner.scaler is scaler
    assert scaler.skipped_steps >= 1  # 2^22 overflows float16's gradients: steps skipped
    assert scaler.get_scale() < 2.0**22 and scaler.skipped_steps < 18
    assert losses(learner)[-1] < losses(learner)[0]
    assert "steps skipped" in learner.summary()
    state = learner.checkpointer.latest().state["grad_scaler"]
    assert state["scale"] == scaler.get_scale()
    # Resuming puts the scale back: a fresh scaler starts from the checkpoint's.
    fresh = optim.GradScaler(init_scale=2.0**22, growth_interval=1000)
    fit(tmp_path / "run", epochs=4, resume=True, dtype="float16", scaler=fresh)
    assert fresh.skipped_steps == 0


def test_float16_turns_capture_off_and_says_why(tmp_path, monkeypatch):
    device = bn.backend("autodiff+ndarray").default_device()
    # A backend that could capture: the scaler must still turn capture off.
    monkeypatch.setattr(type(device.backend), "capturer", lambda self, d: object())
    learner = (LearnerBuilder(tmp_path).mixed_precision("float16")
               .build(toy_model(), optim.Adam(), 0.01))
    assert "float16 loss scaling" in learner._prepare_capture()


def test_bad_mixed_precision_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="bfloat16 or float16, got float32"):
        LearnerBuilder(tmp_path).mixed_precision("float32")
    with pytest.raises(TypeError, match="GradScaler"):
        LearnerBuilder(tmp_path).mixed_precision("float16", scaler=object())
