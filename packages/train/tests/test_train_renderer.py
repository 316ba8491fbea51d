"""The renderer protocol: what the Learner tells a renderer of one's own, in which order."""

import io
import math

import pytest
from train_toy import ToyLoader, toy_model

from burnish import optim
from burnish.train import (
    AccuracyMetric,
    LearnerBuilder,
    LossMetric,
    PlainProgress,
    Renderer,
    StepProgress,
    read_epochs,
    read_metric_log,
)


class Recorder(Renderer):
    """Records every call it gets."""

    def __init__(self):
        self.calls = []

    def note(self, line):
        self.calls.append(("note", line))

    def start(self, num_epochs):
        self.calls.append(("start", num_epochs))

    def step(self, progress):
        self.calls.append(("step", progress))

    def epoch_end(self, split, epoch, values):
        self.calls.append(("epoch_end", split, epoch, values))

    def close(self):
        self.calls.append(("close",))

    def finish(self, summary):
        self.calls.append(("finish", summary))


def fit(tmp_path, renderer, epochs=2):
    learner = (LearnerBuilder(tmp_path).metrics(LossMetric(), AccuracyMetric())
               .num_epochs(epochs).capture(False).renderer(renderer)
               .build(toy_model(), optim.Adam(), optim.CosineAnnealingLr(0.02, 12)))
    learner.fit(ToyLoader(), ToyLoader(shuffle=False))  # 6 batches of 16 each split
    return learner


def test_the_learner_calls_a_renderer_in_order_with_the_run_values(tmp_path):
    recorder = Recorder()
    learner = fit(tmp_path, recorder)
    assert learner.renderer is recorder
    kinds = [call[0] for call in recorder.calls]
    epoch = ["step"] * 12 + ["epoch_end"] * 2
    assert kinds == ["note", "start", *epoch, *epoch, "close", "finish"]
    assert recorder.calls[0] == ("note", "capture: off (LearnerBuilder.capture(False))")
    assert recorder.calls[1] == ("start", 2)
    assert recorder.calls[-1] == ("finish", learner.summary())

    steps = [call[1] for call in recorder.calls if call[0] == "step"]
    assert all(isinstance(p, StepProgress) and p.num_epochs == 2 and p.total == 6
               for p in steps)
    assert [(p.split, p.epoch, p.iteration) for p in steps] == [
        (split, epoch, i) for epoch in (1, 2) for split in ("train", "valid")
        for i in range(1, 7)]
    assert all(p.lr is not None and p.lr > 0 for p in steps if p.split == "train")
    assert all(p.lr is None for p in steps if p.split == "valid")
    assert math.isinf(steps[0].remaining) and all(p.remaining >= 0 for p in steps)
    assert math.isfinite(steps[-2].remaining)
    # step_values are the batch's own values (as logged), values the epoch's running average.
    logged = read_metric_log(tmp_path, "train", "loss")
    train = [p for p in steps if p.split == "train"]
    assert [p.step_values["loss"] for p in train] == pytest.approx([v for *_, v in logged])
    assert train[0].values["loss"] == pytest.approx(train[0].step_values["loss"])
    first_epoch = [p.step_values["loss"] for p in train[:6]]
    assert train[5].values["loss"] == pytest.approx(sum(first_epoch) / 6)  # equal batches

    ends = [call[1:] for call in recorder.calls if call[0] == "epoch_end"]
    epochs = read_epochs(tmp_path)
    assert [(split, epoch) for split, epoch, _ in ends] == [
        ("train", 1), ("valid", 1), ("train", 2), ("valid", 2)]
    for split, epoch, values in ends:
        assert values == pytest.approx({name: epochs[split][name][epoch - 1]
                                        for name in ("loss", "accuracy")})
    last_valid = [p for p in steps if p.split == "valid"][-1]
    assert ends[-1][2] == pytest.approx(last_valid.values)


def test_a_renderer_overrides_only_what_it_shows(tmp_path):
    class Epochs(Renderer):
        def __init__(self):
            self.lines = []

        def epoch_end(self, split, epoch, values):
            self.lines.append(f"{split} {epoch} {values['accuracy']:.0f}")

    epochs = Epochs()
    fit(tmp_path, epochs)
    assert [line.rsplit(" ", 1)[0] for line in epochs.lines] == [
        "train 1", "valid 1", "train 2", "valid 2"]


def test_close_without_finish_when_the_run_fails(tmp_path):
    class Failing(Recorder):
        def epoch_end(self, split, epoch, values):
            raise RuntimeError("disk full")

    failing = Failing()
    with pytest.raises(RuntimeError, match="disk full"):
        fit(tmp_path, failing)
    assert failing.calls[-1] == ("close",)
    assert "finish" not in [call[0] for call in failing.calls]


def test_an_object_with_the_methods_is_a_renderer_too(tmp_path):
    class Duck:
        def __init__(self):
            self.steps = 0

        def note(self, line): ...
        def start(self, num_epochs): ...
        def step(self, progress): self.steps += 1
        def epoch_end(self, split, epoch, values): ...
        def close(self): ...
        def finish(self, summary): ...

    duck = Duck()
    fit(tmp_path, duck, epochs=1)
    assert duck.steps == 12


def test_a_renderer_without_a_method_is_a_type_error_naming_it():
    class Partial:
        def step(self, progress): ...
        def note(self, line): ...

    with pytest.raises(TypeError, match=r"Partial lacks start, epoch_end, close, finish "
                                        r"\(subclass burnish\.train\.Renderer"):
        LearnerBuilder("runs").renderer(Partial())
    with pytest.raises(TypeError, match=r"an instance, got the class Recorder: pass Recorder"):
        LearnerBuilder("runs").renderer(Recorder)
    with pytest.raises(TypeError, match=r"LearnerBuilder\.renderer\(\)"):
        LearnerBuilder("runs").output(Recorder())
    with pytest.raises(ValueError, match="auto, plain, dashboard or none, got 'fancy'"):
        LearnerBuilder("runs").output("fancy")


def test_output_names_still_pick_the_built_in_renderers(tmp_path):
    quiet = LearnerBuilder(tmp_path).output("none").build(toy_model(), optim.Adam(), 0.01)
    assert type(quiet.renderer) is Renderer
    plain = LearnerBuilder(tmp_path).output("plain").build(toy_model(), optim.Adam(), 0.01)
    assert type(plain.renderer) is PlainProgress
    # The last choice wins: a renderer, then a name.
    builder = LearnerBuilder(tmp_path).renderer(Recorder()).output("plain")
    assert type(builder.build(toy_model(), optim.Adam(), 0.01).renderer) is PlainProgress


def test_plain_progress_lines(tmp_path):
    stream = io.StringIO()
    fit(tmp_path, PlainProgress(stream, every=0.0), epochs=1)
    lines = stream.getvalue().splitlines()
    assert lines[1].startswith("[train] epoch 1/1  iteration 1/6  loss ")
    assert lines[1].endswith("remaining ?")
    assert any(line.startswith("[train] epoch 1/1 done  loss ") for line in lines)
    assert "[valid] epoch 1/1  iteration 5/6" in stream.getvalue()
    assert lines[-1].startswith("valid  accuracy")
