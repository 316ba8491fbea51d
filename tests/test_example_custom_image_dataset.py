"""examples/custom-image-dataset writes a folder of PNGs from MNIST digits, then trains on it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from burnish.data import ImageFolderDataset

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "custom-image-dataset"
SCRIPT = FOLDER / "custom-image-dataset.py"


def test_make_a_folder_from_mnist_and_train_on_it(run, tmp_path):
    # The digits come from $BURNISH_MNIST_DIR when it is set, else from the shipped test set.
    digits = tmp_path / "digits"
    out = run(sys.executable, SCRIPT, "--make-from-mnist", digits, "--count", "300",
              cwd=FOLDER, timeout=120).stdout
    assert "wrote 300 PNGs from" in out and str(digits) in out, out
    dataset = ImageFolderDataset(digits)
    assert dataset.classes == [str(d) for d in range(10)] and len(dataset) == 300
    assert dataset[0].image.shape == (28, 28)

    out = run(sys.executable, SCRIPT, "--data", digits, "--epochs", "1", "--batch-size", "32",
              "--run-dir", tmp_path / "run", cwd=FOLDER, timeout=300).stdout
    assert "300 images of 28x28x1 in 10 classes (0, 1, 2, 3, 4, 5, 6, 7, 8, 9): 240 to train, " \
           "60 to validate" in out, out
    found = re.search(r"validation accuracy ([\d.]+)% on 60 images after \d+s; model saved to "
                      r"(.+)$", out, re.MULTILINE)
    assert found, out
    assert 0 <= float(found.group(1)) <= 100
    assert Path(found.group(2)).is_file()


def test_data_is_required(tmp_path):
    import subprocess

    result = subprocess.run([sys.executable, SCRIPT], cwd=FOLDER, capture_output=True, text=True)
    assert result.returncode == 2 and "--data ROOT is required" in result.stderr
