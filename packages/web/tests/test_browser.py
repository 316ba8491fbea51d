"""Exports run in a real browser: headless Chromium loads each from a local HTTP server and
runs it, through WebGPU (on SwiftShader's software adapter) and, with WebGPU off, through the
JavaScript fallback; the outputs must be burnish's own for the same inputs. The MNIST CNN, a
ResNet-18 (narrow: 8 to 64 channels, 32x32 images), a 2-layer transformer encoder, the same
encoder over an embedding of int64 token ids, and a function of 52 outputs over most other
kernels."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from burnish.web import export
from burnish.web.browser import Chromium, serve

sys.path.insert(0, str(Path(__file__).parent))  # the helper beside (pytest's importlib mode)
from web_models import encoder, mnist_cnn, ops, resnet18, token_classifier  # noqa: E402

#: Token ids for the token classifier: int64, as burnish's indices are.
IDS = np.random.default_rng(3).integers(0, 50, (2, 8))

MODELS = {"mnist": (mnist_cnn, [(2, 1, 28, 28)]),
          "resnet18": (resnet18, [(1, 3, 32, 32)]),
          "encoder": (encoder, [(2, 8, 32)]),
          "tokens": (token_classifier, [IDS]),
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
    inputs.push(spec.dtype === "int32" ? new Int32Array(bytes) : new Float32Array(bytes));
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
        for i, x in enumerate(done.inputs):  # as the page holds them: int64 as int32
            x.astype(np.int32 if x.dtype.kind == "i" else np.float32).tofile(
                root / name / f"input{i}.bin")
        exported[name] = done
    with serve(root) as url:
        yield url, exported


@pytest.fixture(scope="module")
def gpu_browser(chromium_path):
    """Chromium with WebGPU on SwiftShader's software adapter."""
    with Chromium(webgpu=True, executable=chromium_path) as browser:
        yield browser


@pytest.fixture(scope="module")
def plain_browser(chromium_path):
    """Chromium with WebGPU off."""
    with Chromium(webgpu=False, executable=chromium_path) as browser:
        yield browser


def check(browser: Chromium, url: str, done, name: str, backend: str, expected: str) -> float:
    browser.goto(url + "index.html")
    result = browser.evaluate(RUN % {"name": name, "backend": backend})
    assert result["backend"] == expected, result["backend"]
    assert len(result["outputs"]) == len(done.outputs)
    for i, (got, want) in enumerate(zip(result["outputs"], done.outputs)):
        got = np.asarray(got, want.dtype).reshape(want.shape)
        atol = 1e-5 * max(1, np.abs(want).max())
        if expected == "webgpu":
            atol = SWIFTSHADER_ATOL.get((name, i), atol)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol,
                                   err_msg=f"{name}, output {i}, on {expected}")
    return result["ms"]


@pytest.mark.parametrize("name", list(MODELS))
def test_webgpu_matches_burnish(site, gpu_browser, name):
    url, exported = site
    gpu_browser.goto(url + "index.html")
    adapter = gpu_browser.evaluate(
        "navigator.gpu.requestAdapter().then((a) => a ? a.info.architecture : null)")
    assert adapter, "Chromium gave no WebGPU adapter with the software-adapter flags"
    check(gpu_browser, url, exported[name], name, "webgpu", "webgpu")


@pytest.mark.parametrize("name", list(MODELS))
def test_the_javascript_fallback_matches_burnish_without_webgpu(site, plain_browser, name):
    url, exported = site
    plain_browser.goto(url + "index.html")
    assert plain_browser.evaluate(
        "navigator.gpu ? navigator.gpu.requestAdapter().then((a) => !!a) : false") is False
    check(plain_browser, url, exported[name], name, "auto", "cpu")


def test_runs_at_once_take_turns(site, gpu_browser):
    url, exported = site
    gpu_browser.goto(url + "index.html")
    same = gpu_browser.evaluate("""(async () => {
      const { load } = await import("/mnist/burnish.js");
      const model = await load("/mnist/");
      const x = new Float32Array(await (await fetch("/mnist/input0.bin")).arrayBuffer());
      const zeros = new Float32Array(x.length);
      const [a, b, c] = await Promise.all([model.run(x), model.run(zeros), model.run(x)]);
      return [Array.from(a[0]), Array.from(c[0]), Array.from(b[0])];
    })()""")
    want = exported["mnist"].outputs[0].ravel()
    np.testing.assert_allclose(same[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(same[1], want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(same[2], want)


def test_bad_input_is_refused_with_both_sizes(site, plain_browser):
    url, _ = site
    plain_browser.goto(url + "index.html")
    message = plain_browser.evaluate("""(async () => {
      const { load } = await import("/mnist/burnish.js");
      const model = await load("/mnist/", { backend: "cpu" });
      try { await model.run(new Float32Array(5)); } catch (e) { return e.message; }
      return "no error";
    })()""")
    assert message == ("burnish.web: input 0 must have 1568 values (shape [2,1,28,28]); got 5"), \
        message


def test_an_unknown_format_is_refused(site, plain_browser):
    url, exported = site
    folder = exported["mnist"].path
    future = folder.parent / "future"
    future.mkdir(exist_ok=True)
    for f in folder.iterdir():
        (future / f.name).write_bytes(f.read_bytes())
    spec = json.loads((folder / "model.json").read_text())
    spec["version"] = 99
    (future / "model.json").write_text(json.dumps(spec))
    plain_browser.goto(url + "index.html")
    message = plain_browser.evaluate("""import("/future/burnish.js")
      .then(({ load }) => load("/future/")).then(() => "loaded", (e) => e.message)""")
    assert "is format burnish-web version 99; this runtime reads burnish-web version 1" \
        in message, message


def test_webgpu_can_be_demanded_and_is_refused_without_it(site, plain_browser):
    url, _ = site
    plain_browser.goto(url + "index.html")
    message = plain_browser.evaluate("""import("/mnist/burnish.js")
      .then(({ load }) => load("/mnist/", { backend: "webgpu" }))
      .then(() => "loaded", (e) => e.message)""")
    assert message.startswith("burnish.web: this browser has no WebGPU adapter"), message
