"""The Learner: training, logs, checkpoints, exact resume, early stopping, Ctrl-C."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from train_toy import (
    ToyLoader,
    toy_builder,
    toy_data_loader,
    toy_model,
    toy_worker_loader,
    weights,
)

from burnish import optim, record
from burnish.train import (
    LearningRateMetric,
    LossMetric,
    TrainingInterrupted,
    classification_step,
    read_epochs,
    read_metric_log,
)

HERE = Path(__file__).parent


def fit(run_dir, epochs=3, resume=False, builder=None, loader=ToyLoader):
    builder = builder or toy_builder(run_dir, epochs)
    learner = builder.build(toy_model(), optim.Adam(), optim.CosineAnnealingLr(0.02, 18))
    return learner, learner.fit(loader(), loader(shuffle=False), resume=resume)


def assert_same_weights(a, b):
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


def test_fit_learns_and_logs(tmp_path):
    learner, model = fit(tmp_path)
    epochs = read_epochs(tmp_path)
    assert len(epochs["train"]["loss"]) == 3
    assert epochs["train"]["loss"][-1] < epochs["train"]["loss"][0]
    assert epochs["valid"]["accuracy"][-1] > 70
    rows = read_metric_log(tmp_path, "train", "loss")
    assert [(e, i) for e, i, _ in rows] == [(e, i) for e in (1, 2, 3) for i in range(1, 7)]
    assert len(read_metric_log(tmp_path, "valid", "accuracy")) == 18
    assert "valid  accuracy" in learner.summary()
    fit(tmp_path)  # a new run in the same folder starts its logs and checkpoints afresh
    assert len(read_metric_log(tmp_path, "valid", "accuracy")) == 18
    assert len(read_epochs(tmp_path)["train"]["loss"]) == 3


def test_checkpoints_keep_the_last_and_the_best(tmp_path):
    builder = toy_builder(tmp_path, 4).checkpoint(keep_last=1, best_by="train/accuracy")
    learner, _ = fit(tmp_path, builder=builder)
    names = [info.name for info in learner.checkpointer.checkpoints()]
    best = learner.checkpointer.best()
    accuracy = read_epochs(tmp_path)["train"]["accuracy"]
    assert best.name == f"epoch-{int(np.argmax(accuracy)) + 1}"
    assert names[-1] == "epoch-4" and set(names) <= {best.name, "epoch-4"}
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == sorted(
        names + ["manifest.json"])


def test_resume_after_an_epoch_gives_the_same_weights(tmp_path):
    _, straight = fit(tmp_path / "straight")
    fit(tmp_path / "resumed", epochs=1)
    learner, resumed = fit(tmp_path / "resumed", resume=True)
    assert_same_weights(straight, resumed)
    assert read_epochs(tmp_path / "resumed") == read_epochs(tmp_path / "straight")
    assert learner.scheduler.iteration == 18


@pytest.mark.parametrize("loader", [ToyLoader, toy_data_loader, toy_worker_loader])
def test_resume_mid_epoch_gives_the_same_weights(tmp_path, loader):
    _, straight = fit(tmp_path / "straight", loader=loader)
    calls = []

    def stopping_step(model, batch):
        calls.append(1)
        if len(calls) == 9:  # the 3rd training batch of the 2nd epoch
            learner.request_stop()
        return model.forward_classification(batch)

    builder = toy_builder(tmp_path / "resumed").step(stopping_step, classification_step)
    learner = builder.build(toy_model(), optim.Adam(), optim.CosineAnnealingLr(0.02, 18))
    with pytest.raises(TrainingInterrupted) as interrupted:
        learner.fit(loader(), loader(shuffle=False))
    assert interrupted.value.checkpoint.name == "epoch-2-iteration-3"
    _, resumed = fit(tmp_path / "resumed", resume=True, loader=loader)
    assert_same_weights(straight, resumed)
    assert read_epochs(tmp_path / "resumed") == read_epochs(tmp_path / "straight")
    rows = read_metric_log(tmp_path / "resumed", "train", "loss")
    assert [(e, i) for e, i, _ in rows] == [(e, i) for e in (1, 2, 3) for i in range(1, 7)]


def test_gradient_accumulation_steps_less_often(tmp_path):
    builder = toy_builder(tmp_path).grads_accumulation(4).train_metrics(LearningRateMetric())
    learner, _ = fit(tmp_path, builder=builder)
    assert learner.position.step == 3 * 2  # 6 batches an epoch: steps after batch 4 and 6
    rates = [value for _, _, value in read_metric_log(tmp_path, "train", "learning_rate")]
    assert rates[:4] == [rates[0]] * 4 and rates[4] != rates[0]


def test_early_stopping(tmp_path):
    builder = (toy_builder(tmp_path, 10).early_stopping("accuracy", patience=1, mode="min"))
    learner, _ = fit(tmp_path, builder=builder)
    assert learner.position.epoch < 10
    assert builder._early_stopping.mode == "min"


def test_a_custom_step_function(tmp_path):
    def step(model, batch):
        return model.forward_classification(batch)

    builder = toy_builder(tmp_path, 1).step(step).metrics(LossMetric())
    fit(tmp_path, builder=builder)


def test_sigint_writes_a_checkpoint_and_the_run_resumes(tmp_path):
    script = [sys.executable, str(HERE / "train_toy.py"), str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get(
        "PYTHONPATH", "")])}
    process = subprocess.Popen(script + ["new"], stdout=subprocess.PIPE, text=True, env=env)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("[train] epoch 2/3"):
            break
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(lines) + out
    assert "interrupted" in out and "Traceback" not in out
    resumed = subprocess.run(script + ["resume"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "finished" in resumed.stdout
    straight_dir = tmp_path / "straight"
    subprocess.run([sys.executable, str(HERE / "train_toy.py"), str(straight_dir), "new"],
                   env=env, check=True, capture_output=True, timeout=120)
    a = record.load(tmp_path / "final.safetensors").tensors
    b = record.load(straight_dir / "final.safetensors").tensors
    assert _flat(a).keys() == _flat(b).keys()
    for key, value in _flat(a).items():
        np.testing.assert_array_equal(value, _flat(b)[key])


def _flat(tree, prefix=""):
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = np.asarray(value.to_numpy())
    return flat
