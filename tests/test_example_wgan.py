"""The WGAN example trains for a few steps on the shipped MNIST test set and writes its grids of
generated digits: PNGs of the right size, not blank."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from burnish.data import read_image

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "wgan"
#: 8 digits of 28 pixels a side, with 2 pixels around and between them.
SIDE = 8 * 28 + 9 * 2


def test_wgan_writes_grids_of_generated_digits(run, tmp_path, monkeypatch):
    monkeypatch.delenv("BURNISH_MNIST_DIR", raising=False)  # the copy shipped in burnish-train
    out = run(sys.executable, FOLDER / "wgan.py", "--limit", "256", "--epochs", "2",
              "--batch-size", "32", "--n-critic", "2", "--grid-every", "1",
              "--out", tmp_path, cwd=FOLDER, timeout=300).stdout
    assert "training on 256 digits of the MNIST test set shipped with burnish-train" in out, out
    assert "epoch 2: Wasserstein estimate" in out, out
    for epoch in (1, 2):
        path = tmp_path / f"epoch-{epoch:03d}.png"
        assert f"wrote {path}" in out, out
        pixels = read_image(path)
        assert pixels.shape[:2] == (SIDE, SIDE), pixels.shape
        grey = pixels[..., 0].astype(np.float64) if pixels.ndim == 3 else pixels
        # After a few steps the digits are still noise around grey: not constant, though.
        first_digit = grey[2:30, 2:30]
        assert first_digit.std() > 1, f"the first generated digit is flat: {first_digit}"
        # Different noise gives different digits.
        assert np.abs(first_digit - grey[2:30, 32:60]).max() > 5
    assert (tmp_path / "generator.safetensors").is_file()
