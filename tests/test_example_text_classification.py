"""The text classification example on a tiny AG News-format folder whose classes show in their
words: it trains above chance, prints its test accuracy, saves model and tokenizer, and
classifies sentences (offline: nothing is downloaded)."""

from __future__ import annotations

import csv
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "text-classification"

#: Words that give each AG News class away (World, Sports, Business, Sci/Tech).
WORDS = [
    ["minister", "election", "troops", "embassy", "parliament", "ceasefire", "president"],
    ["striker", "goal", "match", "coach", "championship", "tennis", "season"],
    ["shares", "profit", "investors", "bank", "merger", "earnings", "stocks"],
    ["software", "chip", "internet", "scientists", "laptop", "researchers", "browser"],
]
FILLER = ["the", "a", "on", "after", "said", "new", "with", "in", "of", "today", "report"]


def write_csv(path: Path, rows: int, rng: random.Random) -> None:
    """``rows`` rows in AG News's format: class from 1, title, description."""
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file, quoting=csv.QUOTE_ALL)
        for i in range(rows):
            label = i % 4
            title, description = (words(WORDS[label], count, rng) for count in (2, 5))
            writer.writerow([label + 1, title.capitalize(), description + "."])


def words(telling: list[str], filler: int, rng: random.Random) -> str:
    """Two of the ``telling`` words among ``filler`` common ones, shuffled."""
    chosen = rng.sample(telling, 2) + rng.sample(FILLER, filler)
    rng.shuffle(chosen)
    return " ".join(chosen)


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """Tests never download: an empty cache, and BURNISH_OFFLINE for the scripts run."""
    monkeypatch.setenv("BURNISH_OFFLINE", "1")
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))


def test_text_classification_trains_above_chance(run, tmp_path):
    data = tmp_path / "ag_news"
    data.mkdir()
    rng = random.Random(0)
    write_csv(data / "train.csv", 400, rng)
    write_csv(data / "test.csv", 100, rng)
    out = tmp_path / "out"
    result = run(
        sys.executable, EXAMPLE / "text-classification.py", "--dataset", "ag_news",
        "--data", data, "--out", out, "--epochs", "3", "--vocab-size", "200",
        "--max-length", "16", "--d-model", "32", "--batch-size", "32", "--lr", "3e-3",
        "--text", "The striker scored a goal in the match",
        "--text", "Shares of the bank rose as investors cheered its profit",
        cwd=EXAMPLE, timeout=600,
    )
    printed = result.stdout
    assert "ag_news: 400 training and 100 test texts, 4 classes" in printed, printed
    match = re.search(r"test accuracy ([\d.]+)%", printed)
    assert match, printed
    assert float(match[1]) > 50, printed  # chance is 25%
    for name in ("model.safetensors", "tokenizer.json", "config.json", "classes.json"):
        assert (out / name).is_file(), name
    assert re.search(r"Sports \(\d+%\)  The striker scored", printed), printed
    assert re.search(r"Business \(\d+%\)  Shares of the bank", printed), printed

    # Classifying again from what was saved, without training.
    again = run(
        sys.executable, EXAMPLE / "text-classification.py", "--out", out, "--infer-only",
        "--text", "The striker scored a goal in the match", cwd=EXAMPLE, timeout=300,
    )
    assert re.search(r"Sports \(\d+%\)  The striker", again.stdout), again.stdout


@pytest.mark.parametrize("where", ["--data", "cache"])
def test_missing_data_is_a_clear_error(tmp_path, where):
    folder = ["--data", tmp_path] if where == "--data" else []
    result = subprocess.run(
        [sys.executable, EXAMPLE / "text-classification.py", *folder, "--out", tmp_path / "out"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1, result.stderr
    expected = "AG News's train.csv is not in" if folder else "BURNISH_OFFLINE is set"
    assert expected in result.stderr and "--data DIR" in result.stderr, result.stderr
