"""examples/custom-renderer: a short Learner run on the shipped MNIST digits draws a bar chart
of its metrics after each epoch and writes every step's loss to a CSV file."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "custom-renderer"


def test_custom_renderer(run, tmp_path, monkeypatch):
    monkeypatch.delenv("BURNISH_MNIST_DIR", raising=False)  # the copy shipped in burnish-train
    stdout = run(sys.executable, FOLDER / "custom-renderer.py", "--limit", "320", "--epochs",
                 "2", "--run-dir", tmp_path, cwd=FOLDER, timeout=300).stdout
    assert "training on 320 digits, validating on 80" in stdout, stdout
    # After each epoch, a line per metric: train and valid values, each beside its bar.
    row = r"  (\w+)\s+train\s+(\S+) │([█▏▎▍▌▋▊▉ ]{24})│  valid\s+(\S+) │([█▏▎▍▌▋▊▉ ]{24})│"
    for epoch in (1, 2):
        assert re.search(rf"^epoch {epoch}/2  \((\d+m)?\d+s\)$", stdout, re.M), stdout
    rows = re.findall(row, stdout)
    assert [name for name, *_ in rows] == ["loss", "accuracy"] * 2, stdout
    for name, train, train_bar, valid, valid_bar in rows:
        if name == "accuracy":  # full at 100%: the bar's length follows the value
            for value, drawn in ((train, train_bar), (valid, valid_bar)):
                assert 0 <= float(value) <= 100
                assert abs(len(drawn.rstrip()) - float(value) / 100 * 24) <= 1, stdout
    first_loss = rows[0]
    assert first_loss[2].count("█") == 24 or first_loss[4].count("█") == 24  # the largest
    last = re.search(r"validation accuracy (\S+)%", stdout)
    assert last and float(last.group(1)) == pytest.approx(float(rows[-1][3]), abs=0.001)

    # Every step's loss, as the Learner logged it.
    with (tmp_path / "steps.csv").open() as file:
        steps = list(csv.DictReader(file))
    assert [(s["split"], s["epoch"], s["iteration"]) for s in steps] == [
        (split, str(epoch), str(i)) for epoch in (1, 2)
        for split, count in (("train", 5), ("valid", 1)) for i in range(1, count + 1)]
    from burnish.train import read_metric_log

    logged = read_metric_log(tmp_path, "train", "loss")
    train = [float(s["loss"]) for s in steps if s["split"] == "train"]
    assert train == pytest.approx([value for *_, value in logged], rel=1e-5)
    assert all(0 < loss < 5 for loss in train)
    assert f"every step's loss: {tmp_path / 'steps.csv'}" in stdout
