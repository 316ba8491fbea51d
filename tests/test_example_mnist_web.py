"""examples/mnist-web: the script exports a saved MNIST CNN beside the page, and in headless
Chromium a digit drawn on the page's canvas with the mouse is read by the model: the page's
probabilities are burnish's own (on ndarray) for the pixels the page made of the drawing, on
WebGPU and on the JavaScript fallback. A screenshot of the page is taken and checked."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "mnist-web"

#: A 7: a bar, then a stroke down and to the left (canvas coordinates, 280x280).
SEVEN = [(70, 70), (120, 68), (170, 66), (210, 66), (190, 120), (165, 170), (140, 220),
         (125, 250)]


def chromium_or_skip() -> str:
    from burnish.web.browser import find_chromium

    found = find_chromium()
    if found is None:
        wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
        message = "chromium not installed (Debian: apt install chromium)"
        if "chromium" in wanted or "all" in wanted:
            pytest.fail(message + " [BURNISH_REQUIRE_BACKENDS requires it]", pytrace=False)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The page with a model exported by the script: (site folder, the saved record)."""
    import burnish as bn

    sys.path.insert(0, str(FOLDER.parent / "mnist"))
    try:
        from model import CnnConfig
    finally:
        sys.path.remove(str(FOLDER.parent / "mnist"))
    root = tmp_path_factory.mktemp("mnist-web")
    bn.seed(0)
    (root / "run").mkdir()
    record = CnnConfig().init(bn.backend("ndarray").default_device()).save(
        root / "run" / "model.safetensors")
    site = root / "site"
    shutil.copytree(FOLDER / "page", site, ignore=shutil.ignore_patterns("model"))
    import subprocess

    done = subprocess.run([sys.executable, str(FOLDER / "mnist-web.py"), "--run-dir",
                           str(root / "run"), "--out", str(site / "model")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "exported 15 launches" in done.stdout, done.stdout
    return site, record


def draw_and_read(browser, url: str) -> dict:
    browser.goto(url + "index.html")
    backend = browser.evaluate("window.mnistDemo.ready")
    box = browser.evaluate("(() => { const r = document.getElementById('pad')"
                           ".getBoundingClientRect(); return [r.left, r.top]; })()")
    points = [(box[0] + x, box[1] + y) for x, y in SEVEN]
    browser.mouse("pressed", *points[0])
    for point in points[1:]:
        browser.mouse("moved", *point)
    browser.mouse("released", *points[-1])
    deadline = time.monotonic() + 60
    while True:
        state = browser.evaluate("(() => { const d = window.mnistDemo; return {runs: d.runs, "
                                 "pixels: d.pixels, probabilities: d.probabilities, "
                                 "guess: document.getElementById('guess').textContent, "
                                 "status: document.getElementById('status').textContent}; })()")
        if state["runs"] and state["probabilities"] is not None:
            time.sleep(0.3)  # the last stroke's reading, if one was queued
            again = browser.evaluate("window.mnistDemo.runs")
            if again == state["runs"]:
                break
        assert time.monotonic() < deadline, "the page read no digit in 60 s"
    state["backend"] = backend
    return state


@pytest.mark.parametrize("webgpu", [True, False], ids=["webgpu", "javascript"])
def test_a_drawn_digit_is_read_with_burnish_s_probabilities(page, webgpu, tmp_path,
                                                            needs_backends):
    needs_backends("wgpu")
    executable = chromium_or_skip()
    import burnish as bn
    import burnish.functional as F
    from burnish import Tensor
    from burnish.data.batcher import MNIST_MEAN, MNIST_STD
    from burnish.web.browser import Chromium, serve

    site, record = page
    with serve(site) as url, Chromium(webgpu=webgpu, executable=executable) as browser:
        state = draw_and_read(browser, url)
        shot = browser.screenshot(tmp_path / "mnist-web.png")
    assert state["backend"] == ("webgpu" if webgpu else "cpu")
    assert ("WebGPU" if webgpu else "runs on the CPU in JavaScript") in state["status"]
    pixels = np.asarray(state["pixels"], np.float32).reshape(1, 1, 28, 28)
    assert 40 < (pixels > 0.5).sum() < 400, "the drawing did not reach the model's pixels"
    sys.path.insert(0, str(FOLDER.parent / "mnist"))
    try:
        from model import CnnConfig
    finally:
        sys.path.remove(str(FOLDER.parent / "mnist"))
    device = bn.backend("ndarray").default_device()
    model = CnnConfig().init(device).load(record)
    want = F.softmax(model((Tensor.from_data(pixels, device=device) - MNIST_MEAN) / MNIST_STD),
                     dim=1).to_numpy()[0]
    got = np.asarray(state["probabilities"], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert state["guess"] == str(int(np.argmax(want)))

    from PIL import Image

    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert image.shape[1] >= 600 and image.shape[0] >= 400, image.shape
    white = (image.min(axis=2) > 230).sum()
    orange = ((abs(image[..., 0] - 0xE0) < 12) & (abs(image[..., 1] - 0x57) < 12)
              & (abs(image[..., 2] - 0x2B) < 12)).sum()
    assert orange > 20, "the screenshot shows no highlighted probability bar"
    black = (image.max(axis=2) < 20).sum()
    assert black > 20000 and white > 1000, "the screenshot shows no canvas with a drawing"
