"""The text-generation example trains on a small repetitive text file and samples from it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "text-generation"
PHRASE = "the quick brown fox jumps over the lazy dog. "
#: A small model trained for a few seconds: enough to learn a phrase repeated 60 times.
SMALL = ["--block-size", "32", "--d-model", "32", "--layers", "1", "--heads", "2",
         "--batch-size", "16", "--lr", "5e-3", "--dropout", "0", "--epochs", "6"]


def test_trains_on_a_text_file_and_samples_from_a_prompt(run, tmp_path):
    text = tmp_path / "fox.txt"
    text.write_text(PHRASE * 60, encoding="utf-8")
    out = tmp_path / "run"
    prompt, length = "the quick", 80
    printed = run(sys.executable, FOLDER / "text-generation.py", "--text", text, "--out", out,
                  *SMALL, "--prompt", prompt, "--length", str(length), "--temperature", "0.05",
                  cwd=FOLDER, timeout=600).stdout
    assert "2,700 characters, a vocabulary of 28" in printed, printed
    assert "next-character accuracy" in printed, printed
    for name in ("model.safetensors", "vocab.json", "sample.txt"):
        assert (out / name).is_file(), f"{name} is missing from {sorted(out.iterdir())}"
    vocab = json.loads((out / "vocab.json").read_text())["vocab"]
    assert vocab == sorted(set(PHRASE))
    sample = (out / "sample.txt").read_text(encoding="utf-8")
    assert len(sample) == len(prompt) + length and sample.startswith(prompt)
    assert set(sample) <= set(vocab), f"outside the vocabulary: {set(sample) - set(vocab)}"
    assert sample in printed, printed
    # At a very low temperature the model writes what it memorised.
    assert PHRASE.strip() in sample, sample


def test_reads_ag_news_from_a_folder(run, tmp_path):
    # A train.csv in AG News's format (class, title, description), read with AgNewsDataset.
    rows = ['"3","Stocks rise","Shares climbed on Monday."',
            '"2","Cup final","A late goal won the game."'] * 40
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    printed = run(sys.executable, FOLDER / "text-generation.py", "--data", tmp_path, "--out",
                  tmp_path / "run", *SMALL[:-1], "1", "--limit", "1000", "--length", "20",
                  cwd=FOLDER, timeout=600).stdout
    assert "1,000 characters" in printed, printed
    sample = (tmp_path / "run" / "sample.txt").read_text(encoding="utf-8")
    assert sample.startswith("S") and len(sample) == 21, sample


def test_a_prompt_outside_the_vocabulary_is_refused(run, tmp_path):
    text = tmp_path / "abc.txt"
    text.write_text("abcabc" * 50, encoding="utf-8")
    try:
        run(sys.executable, FOLDER / "text-generation.py", "--text", text, "--out", tmp_path,
            "--prompt", "abz", cwd=FOLDER, timeout=120)
    except AssertionError as error:
        assert "not in the text's vocabulary: 'z'" in str(error)
    else:
        raise AssertionError("a prompt with a character outside the vocabulary was accepted")
