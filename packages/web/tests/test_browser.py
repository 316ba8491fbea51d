"""Exports run in a real browser: headless Chromium loads each from a local HTTP server and
runs it, through WebGPU (on SwiftShader's software adapter) and, with WebGPU off, through the
JavaScript fallback; the outputs must be burnish's own for the same inputs. The MNIST CNN, a
ResNet-18 (narrow: 8 to 64 channels, 32x32 images) and a 2-layer transformer encoder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from burnish.web import export
from burnish.web.browser import Chromium, serve

sys.path.insert(0, str(Path(__file__).parent))  # the helper beside (pytest's importlib mode)
from web_models import encoder, mnist_cnn, ops, resnet18  # noqa: E402

MODELS = {"mnist": (mnist_cnn, [(2, 1, 28, 28)]),
          "resnet18": (resnet18, [(1, 3, 32, 32)]),
          "encoder": (encoder, [(2, 8, 32)]),
          "ops": (ops, [(32,), (8, 5)])}
#: SwiftShader's sin and cos are within about 2e-4 of float32's (Vulkan allows it): the
#: largest difference from burnish on lavapipe that the checks accept, per output.
SWIFTSHADER_ATOL = {("ops", 4): 5e-4, ("ops", 5): 5e-4}

#: Runs the export in folder NAME on the inputs stored beside it; what it returns.
RUN = """(async () => {
  const { load } = await import("/%(name)s/burnish.js");
  const model = await load("/%(name)s/", { backend: "%(backend)s" });
  const inputs = [];
  for (const [i, spec] of model.inputs.entries()) {
    const bytes = await (await fetch(`/%(name)s/input${i}.bin`)).arrayBuffer();
    inputs.push(new Float32Array(bytes));
  }
  const started = performance.now();
  const outputs = await model.run(...inputs);
  return { backend: model.backend, ms: performance.now() - started,
           outputs: outputs.map((o) => Array.from(o)) };
})()"""


@pytest.fixture(scope="module")
def site(device, tmp_path_factory):
    """Every model exported into one folder served over HTTP: (base URL, {name: Exported})."""
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<!doctype html><title>burnish.web checks</title>")
    exported = {}
    for name, (make, shapes) in MODELS.items():
        done = export(make(device), shapes, root / name)
        for i, x in enumerate(done.inputs):
            x.astype(np.float32).tofile(root / name / f"input{i}.bin")
        exported[name] = done
    with serve(root) as url:
        yield url, exported


def check(browser: Chromium, url: str, done, name: str, backend: str, expected: str) -> float:
    browser.goto(url + "index.html")
    result = browser.evaluate(RUN % {"name": name, "backend": backend})
    assert result["backend"] == expected, result["backend"]
    assert len(result["outputs"]) == len(done.outputs)
    for i, (got, want) in enumerate(zip(result["outputs"], done.outputs)):
        got = np.asarray(got, np.float32).reshape(want.shape)
        atol = 1e-5 * max(1, np.abs(want).max())
        if expected == "webgpu":
            atol = SWIFTSHADER_ATOL.get((name, i), atol)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol,
                                   err_msg=f"{name}, output {i}, on {expected}")
    return result["ms"]


@pytest.mark.parametrize("name", list(MODELS))
def test_webgpu_matches_burnish(site, chromium_path, name):
    url, exported = site
    with Chromium(webgpu=True, executable=chromium_path) as browser:
        browser.goto(url + "index.html")
        adapter = browser.evaluate(
            "navigator.gpu.requestAdapter().then((a) => a ? a.info.architecture : null)")
        assert adapter, "Chromium gave no WebGPU adapter with the software-adapter flags"
        check(browser, url, exported[name], name, "webgpu", "webgpu")


@pytest.mark.parametrize("name", list(MODELS))
def test_the_javascript_fallback_matches_burnish_without_webgpu(site, chromium_path, name):
    url, exported = site
    with Chromium(webgpu=False, executable=chromium_path) as browser:
        browser.goto(url + "index.html")
        assert browser.evaluate(
            "navigator.gpu ? navigator.gpu.requestAdapter().then((a) => !!a) : false") is False
        check(browser, url, exported[name], name, "auto", "cpu")


def test_bad_input_is_refused_with_both_sizes(site, chromium_path):
    url, _ = site
    with Chromium(webgpu=False, executable=chromium_path) as browser:
        browser.goto(url + "index.html")
        message = browser.evaluate("""(async () => {
          const { load } = await import("/mnist/burnish.js");
          const model = await load("/mnist/", { backend: "cpu" });
          try { await model.run(new Float32Array(5)); } catch (e) { return e.message; }
          return "no error";
        })()""")
        assert message == ("burnish.web: input 0 must have 1568 values (shape [2,1,28,28]); "
                           "got 5"), message


def test_an_unknown_format_is_refused(site, chromium_path, tmp_path):
    url, exported = site
    spec_path = exported["mnist"].path / "model.json"
    spec = json.loads(spec_path.read_text())
    spec["version"] = 99
    (exported["mnist"].path.parent / "future").mkdir(exist_ok=True)
    for f in exported["mnist"].path.iterdir():
        (exported["mnist"].path.parent / "future" / f.name).write_bytes(f.read_bytes())
    (exported["mnist"].path.parent / "future" / "model.json").write_text(json.dumps(spec))
    with Chromium(webgpu=False, executable=chromium_path) as browser:
        browser.goto(url + "index.html")
        message = browser.evaluate("""import("/future/burnish.js")
          .then(({ load }) => load("/future/")).then(() => "loaded", (e) => e.message)""")
        assert "is format burnish-web version 99; this runtime reads burnish-web version 1" \
            in message, message
