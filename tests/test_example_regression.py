"""examples/regression trains on a small made-up California Housing CSV and plots its fit."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import numpy as np

from burnish.data import read_image

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "regression"
COLUMNS = ["longitude", "latitude", "housing_median_age", "total_rooms", "total_bedrooms",
           "population", "households", "median_income", "median_house_value", "ocean_proximity"]
PROXIMITY = {"<1H OCEAN": 20_000, "INLAND": -40_000, "NEAR BAY": 30_000, "NEAR OCEAN": 25_000}


def write_housing(path: Path, rows: int = 400) -> float:
    """A CSV with the real file's columns whose value is a known linear function of the
    features plus noise, with a few empty total_bedrooms cells; returns the values' std."""
    rng = np.random.default_rng(1)
    income = rng.uniform(0.5, 10, rows)
    age = rng.uniform(1, 52, rows)
    rooms = rng.uniform(500, 5000, rows)
    bedrooms = rooms * rng.uniform(0.15, 0.25, rows)
    population = rng.uniform(300, 3000, rows)
    proximity = rng.choice(list(PROXIMITY), rows)
    value = (40_000 * income + 1_000 * age + 10 * rooms - 20 * population
             + np.array([PROXIMITY[p] for p in proximity]) + rng.normal(0, 10_000, rows))
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(COLUMNS)
        for i in range(rows):
            writer.writerow([
                f"{rng.uniform(-124, -114):.2f}", f"{rng.uniform(32, 42):.2f}", f"{age[i]:.1f}",
                f"{rooms[i]:.1f}", "" if i % 50 == 7 else f"{bedrooms[i]:.1f}",
                f"{population[i]:.1f}", f"{population[i] / 3:.1f}", f"{income[i]:.4f}",
                f"{value[i]:.1f}", proximity[i],
            ])
    return float(value.std())


def test_regression_trains_and_plots(run, tmp_path):
    data = tmp_path / "housing.csv"
    write_housing(data)
    plot = tmp_path / "plot.png"
    out = run(sys.executable, FOLDER / "regression.py", "--data", data, "--epochs", "15",
              "--batch-size", "32", "--lr", "1e-2", "--run-dir", tmp_path / "run",
              "--plot", plot, cwd=FOLDER, timeout=300).stdout
    assert "missing values filled with the training split's medians: total_bedrooms 8" in out
    assert "320 training and 80 validation districts" in out, out
    found = re.search(r"validation RMSE \$([\d,]+) .*the values' std: \$([\d,]+)", out)
    assert found, out
    rmse, std = (float(group.replace(",", "")) for group in found.groups())
    # The noise is $10,000 and the values spread over ~$120,000: a fit well below the std.
    assert rmse < 0.3 * std, out
    assert f"plot written to {plot}" in out
    image = read_image(plot)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200, image.shape
    assert len(np.unique(image.reshape(-1, image.shape[2]), axis=0)) > 10  # not blank
