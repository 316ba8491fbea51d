"""plot_metrics: an SVG with one panel per logged metric and one curve per split."""

import xml.etree.ElementTree as ET

import pytest

from burnish.train import plot_metrics
from burnish.train.metric_log import MetricLog

SVG = "{http://www.w3.org/2000/svg}"


def write_run(run_dir):
    log = MetricLog(run_dir)
    for epoch in (1, 2):
        for iteration in (1, 2, 3, 4):
            log.log_step("train", "Loss", epoch, iteration, 2.0 / (epoch * iteration))
            log.log_step("train", "Accuracy", epoch, iteration, 50.0 + 10 * epoch + iteration)
        log.log_step("valid", "Loss", epoch, 1, 1.0 / epoch)
        log.log_epoch("train", {"Loss": 1.0, "Accuracy": 60.0})
    log.close()


def test_one_panel_per_metric_and_a_curve_per_split(tmp_path):
    write_run(tmp_path)
    path = plot_metrics(tmp_path)
    assert path == tmp_path / "metrics.svg"
    root = ET.parse(path).getroot()
    panels = {g.get("id"): g for g in root.iter(f"{SVG}g")}
    assert sorted(panels) == ["Accuracy", "Loss"]
    loss_curves = {p.get("class"): p for p in panels["Loss"].iter(f"{SVG}polyline")}
    assert sorted(loss_curves) == ["train", "valid"]
    assert len(loss_curves["train"].get("points").split()) == 8
    assert [p.get("class") for p in panels["Accuracy"].iter(f"{SVG}polyline")] == ["train"]


def test_chosen_metrics_and_target(tmp_path):
    write_run(tmp_path)
    target = plot_metrics(tmp_path, tmp_path / "out" / "loss.svg", metrics=["Loss"])
    ids = [g.get("id") for g in ET.parse(target).getroot().iter(f"{SVG}g")]
    assert ids == ["Loss"]


def test_errors_name_the_folder_and_metric(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metric logs under"):
        plot_metrics(tmp_path)
    write_run(tmp_path)
    with pytest.raises(FileNotFoundError, match="no log of metric 'F1'.*logged: Accuracy, Loss"):
        plot_metrics(tmp_path, metrics=["F1"])
