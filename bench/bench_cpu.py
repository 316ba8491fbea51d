"""burnish on the CPU against onnxruntime, PyTorch and NumPy, in one process.

    python bench/bench_cpu.py                          # every case, cpu backend, 2 threads
    python bench/bench_cpu.py --only chain --repeat 9
    python bench/bench_cpu.py --only onnx --models resnet18 lstm --backend ndarray
    python bench/bench_cpu.py --only qdq --models resnet18 transformer
    python bench/bench_cpu.py --only onnx --models transformer --repeat 10 --block 20
    python bench/bench_cpu.py --only onnx --models mobilenet --repeat 15

Cases:

- **chain**: the GELU of a sum of two 16M-element float32 vectors: ``fusion+cpu`` (one fused
  kernel), ``cpu`` (an op at a time), ``ndarray`` and torch eager, as GB/s (the 3 x 4 x n bytes
  the chain reads and writes over its time) against NumPy's copy (2 x 4 x n bytes) timed in the
  same run; the ratio is the chain's bandwidth over the copy's;
- **onnx**: inference of models exported from PyTorch with random weights, ``burnish.onnx``'s
  module on ``--backend`` against onnxruntime on the same file and inputs: ``resnet18``
  (bench/resnet18.py, batch 2 of 3x224x224), ``lstm`` (a bidirectional 2-layer LSTM 64 -> 128
  and a GRU 256 -> 128 over 32 steps, batch 8), ``transformer`` (a 2-layer post-norm
  ``nn.TransformerEncoder``, d_model 128, 2 heads, feed-forward 512, seq 128, batch 2: tiny
  BERT's sizes), ``mobilenet`` (torchvision's ``mobilenet_v3_small``, random weights, nothing
  downloaded, its batch norms' statistics taken from one random batch; batch 2 of 3x224x224:
  depthwise convolutions, hardswish, squeeze-excite; skipped, saying so, without
  torchvision). burnish runs the imported module eagerly and through ``burnish.capture``
  (recorded once, then replayed: no Python per op). Each median of ``--repeat`` runs after a
  warm-up, the implementations taking turns (``--block N``: N runs back to back per turn,
  no pause between them), and the fastest captured and onnxruntime runs (on a shared machine,
  the least disturbed), and onnxruntime's median alone, before burnish runs the model
  (against its median after burnish's runs: threads left spinning slow it); burnish's outputs
  are checked against onnxruntime's;
- **qdq**: the same resnet18 and transformer quantized by onnxruntime's ``quantize_static``
  (QDQ format: int8 weights per output channel, uint8 activations, calibrated on four random
  batches): burnish's captured QDQ model (its products on the integers) against its float
  model and onnxruntime's QDQ session.

Threads: ``--threads`` (default 2) for every side: burnish's (``OMP_NUM_THREADS``), OpenBLAS's
(NumPy), torch's and onnxruntime's intra-op pool. PyTorch, torchvision and onnxruntime are
references, not dependencies: a case whose reference is missing says so.
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":  # thread counts must be in the environment before NumPy loads
    _early = argparse.ArgumentParser(add_help=False)
    _early.add_argument("--threads", type=int, default=2)
    for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, str(_early.parse_known_args()[0].threads))

import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import burnish as bn  # noqa: E402
from burnish import Tensor  # noqa: E402


def _runs(functions: dict, repeat: int, pause: float = 0.0, block: int = 1
          ) -> dict[str, list[float]]:
    """The times of each function over ``repeat`` turns of ``block`` runs back to back, the
    functions taking turns, each turn after ``pause`` seconds (onnxruntime's threads spin for
    work for a while after a run, which slows whatever runs next on few cores)."""
    times: dict[str, list[float]] = {name: [] for name in functions}
    for fn in functions.values():
        fn()  # warm-up: compiling, caches
    for _ in range(repeat):
        for name, fn in functions.items():
            if pause:
                time.sleep(pause)
            for _ in range(block):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return times


def _turns(functions: dict, repeat: int, pause: float = 0.0) -> dict[str, float]:
    """The median time of each function over ``repeat`` runs (``_runs``)."""
    return {name: statistics.median(t) for name, t in _runs(functions, repeat, pause).items()}


def _torch(threads: int):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def chain(args: argparse.Namespace) -> list[str]:
    n = 16 << 20
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    copy_target = np.empty_like(a_np)
    functions = {"NumPy copy": lambda: np.copyto(copy_target, a_np)}
    for name in ("fusion+cpu", "cpu", "ndarray"):
        backend = bn.backend(name)
        a = Tensor.from_data(a_np, device=name)
        b = Tensor.from_data(b_np, device=name)

        def run(a=a, b=b, backend=backend):
            y = bn.functional.gelu(a + b)
            backend.sync(y.device)
            return y

        functions[f"burnish {name}"] = run
    torch = _torch(args.threads)
    if torch is not None:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        functions["torch eager"] = lambda: torch.nn.functional.gelu(ta + tb)
    times = _turns(functions, args.repeat)
    copy_rate = 2 * 4 * n / times["NumPy copy"] / 1e9
    rows = ["| implementation | ms | GB/s | x NumPy copy's GB/s |", "|---|---:|---:|---:|"]
    for name, seconds in times.items():
        moved = 2 if name == "NumPy copy" else 3
        rate = moved * 4 * n / seconds / 1e9
        rows.append(f"| {name} | {seconds * 1e3:.1f} | {rate:.1f} | {rate / copy_rate:.2f} |")
    if torch is None:
        rows.append("\n(torch is not installed: no torch row)")
    return rows


# -- ONNX models ---------------------------------------------------------------------------------


def _resnet18(torch):
    from resnet18 import torch_resnet18

    return torch_resnet18(torch, cifar=False, classes=1000), (torch.randn(2, 3, 224, 224),)


def _lstm(torch):
    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(64, 128, num_layers=2, bidirectional=True,
                                      batch_first=True)
            self.gru = torch.nn.GRU(256, 128, batch_first=True)
            self.head = torch.nn.Linear(128, 10)

        def forward(self, x):
            y, _ = self.lstm(x)
            y, _ = self.gru(y)
            return self.head(y[:, -1])

    return Recurrent(), (torch.randn(8, 32, 64),)


def _transformer(torch):
    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 128)
            layer = torch.nn.TransformerEncoderLayer(128, 2, 512, dropout=0.0,
                                                     batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = torch.nn.Linear(128, 2)

        def forward(self, ids):
            return self.head(self.encoder(self.embed(ids))[:, 0])

    return Encoder(), (torch.randint(0, 1000, (2, 128)),)


class _Missing(Exception):
    """A model's optional reference package is missing (or does not import here)."""


def _mobilenet(torch):
    try:
        from torchvision.models import mobilenet_v3_small
    except (ImportError, RuntimeError, OSError) as error:
        # A torchvision wheel built for another torch (CUDA's) raises RuntimeError or OSError.
        raise _Missing(f"needs torchvision, pip install torchvision: {error}") from None
    model = mobilenet_v3_small(weights=None)  # random weights, nothing downloaded
    # Batch norms at their initial statistics shrink the logits to about 1e-9 (too small for
    # the comparison to mean anything): their running statistics are set from one random
    # batch (momentum 1), which keeps the activations at a trained model's scale.
    for layer in model.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.momentum = 1.0
    with torch.no_grad():
        model.train()(torch.randn(2, 3, 224, 224))
    return model, (torch.randn(2, 3, 224, 224),)


MODELS = {"resnet18": _resnet18, "lstm": _lstm, "transformer": _transformer,
          "mobilenet": _mobilenet}


def _ort_options(ort, threads: int):
    """onnxruntime's session options for ``threads`` intra-op threads, no inter-op pool."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return options


def onnx_models(args: argparse.Namespace) -> list[str]:
    torch = _torch(args.threads)
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if torch is None or ort is None:
        return ["(the onnx case needs torch to export the models and onnxruntime to compare: "
                "pip install torch onnx onnxruntime)"]
    from burnish.onnx import import_model

    options = _ort_options(ort, args.threads)
    rows = [f"| model | burnish {args.backend} ms | captured ms | onnxruntime ms | "
            "x onnxruntime's time (eager, captured) | captured / onnxruntime, fastest runs "
            "| onnxruntime alone ms | max abs diff |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    folder = Path(tempfile.mkdtemp(prefix="bench_cpu_"))
    for name in args.models:
        torch.manual_seed(0)
        try:
            module, inputs = MODELS[name](torch)
        except _Missing as missing:
            rows.append(f"| {name} | ({missing}) | | | | | |")
            continue
        module.eval()
        path = folder / f"{name}.onnx"
        # The plain layers, not torch's fused encoder kernel (which has no ONNX form).
        torch.backends.mha.set_fastpath_enabled(False)
        with torch.no_grad():
            torch.onnx.export(module, inputs, str(path), opset_version=17, dynamo=False)
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        feeds = {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)}
        model = import_model(str(path), device=args.backend)
        tensors = [Tensor.from_data(x.numpy(), device=args.backend) for x in inputs]

        def run_burnish(model=model, tensors=tensors):
            return model(*tensors).to_numpy()

        @bn.capture
        def infer(model, *xs):
            return model(*xs)

        def run_captured(model=model, tensors=tensors, infer=infer):
            return infer(model, *tensors).to_numpy()

        def run_ort(session=session, feeds=feeds):
            return session.run(None, feeds)[0]

        # onnxruntime's median before burnish runs anything of this model: beside the median
        # of its runs that follow burnish's, it shows threads of ours still spinning after a
        # run (on its cores).
        alone = statistics.median(_runs({"ort": run_ort}, args.repeat, pause=0.02)["ort"])
        for _ in range(3):  # a call that warms up, then the recording: replays from here on
            run_captured()
        runs = _runs({"burnish": run_burnish, "captured": run_captured, "ort": run_ort},
                     args.repeat, pause=0.02, block=args.block)
        times = {key: statistics.median(t) for key, t in runs.items()}
        # On a shared machine the fastest runs are the least disturbed ones.
        fastest = {key: min(t) for key, t in runs.items()}
        diff = max(float(np.abs(run() - run_ort()).max()) for run in (run_burnish, run_captured))
        rows.append(f"| {name} | {times['burnish'] * 1e3:.1f} | {times['captured'] * 1e3:.1f} | "
                    f"{times['ort'] * 1e3:.1f} | {times['burnish'] / times['ort']:.2f}x, "
                    f"{times['captured'] / times['ort']:.2f}x | "
                    f"{fastest['captured'] * 1e3:.2f} / {fastest['ort'] * 1e3:.2f} ms = "
                    f"{fastest['captured'] / fastest['ort']:.2f}x | {alone * 1e3:.1f} | "
                    f"{diff:.1e} |")
    return rows


class _Calibration:
    """onnxruntime's calibration reader: a few random batches of the model's inputs."""

    def __init__(self, feeds: list[dict]):
        self._feeds = iter(feeds)

    def get_next(self):
        return next(self._feeds, None)


def qdq_models(args: argparse.Namespace) -> list[str]:
    """QDQ models (onnxruntime's ``quantize_static``: int8 weights per output channel, uint8
    activations, calibrated on random inputs) run by burnish on the integers, against the same
    float model in burnish and the QDQ model in onnxruntime."""
    torch = _torch(args.threads)
    try:
        import onnxruntime as ort
        from onnxruntime import quantization as ortq
    except ImportError:
        ort = None
    if torch is None or ort is None:
        return ["(the qdq case needs torch and onnxruntime: pip install torch onnx onnxruntime)"]
    from burnish.onnx import import_model

    options = _ort_options(ort, args.threads)
    rows = [f"| model | burnish {args.backend} float ms | burnish QDQ ms | onnxruntime QDQ ms "
            "| QDQ / float | x onnxruntime's QDQ | max abs diff vs onnxruntime's QDQ |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    folder = Path(tempfile.mkdtemp(prefix="bench_cpu_qdq_"))
    for name in args.models:
        if name == "lstm":
            continue  # quantize_static leaves recurrent layers in float
        torch.manual_seed(0)
        try:
            module, inputs = MODELS[name](torch)
        except _Missing as missing:
            rows.append(f"| {name} | ({missing}) | | | | | |")
            continue
        module.eval()
        plain, qdq = folder / f"{name}.onnx", folder / f"{name}.qdq.onnx"
        torch.backends.mha.set_fastpath_enabled(False)
        with torch.no_grad():
            torch.onnx.export(module, inputs, str(plain), opset_version=17, dynamo=False)
        names = [i.name for i in ort.InferenceSession(str(plain)).get_inputs()]
        calibration = [{n: (torch.randint(0, 1000, x.shape) if x.dtype == torch.int64
                            else torch.randn(x.shape)).numpy() for n, x in zip(names, inputs)}
                       for _ in range(4)]
        ortq.quantize_static(str(plain), str(qdq), _Calibration(calibration),
                             quant_format=ortq.QuantFormat.QDQ, per_channel=True,
                             activation_type=ortq.QuantType.QUInt8,
                             weight_type=ortq.QuantType.QInt8)
        session = ort.InferenceSession(str(qdq), options, providers=["CPUExecutionProvider"])
        feeds = {n: x.numpy() for n, x in zip(names, inputs)}
        tensors = [Tensor.from_data(x.numpy(), device=args.backend) for x in inputs]
        runs = {}
        for label, path in (("float", plain), ("qdq", qdq)):
            model = import_model(str(path), device=args.backend)

            @bn.capture
            def infer(model, *xs):
                return model(*xs)

            def run(model=model, infer=infer, tensors=tensors):
                return infer(model, *tensors).to_numpy()

            for _ in range(3):  # a call that warms up, then the recording
                run()
            runs[label] = run

        def run_ort(session=session, feeds=feeds):
            return session.run(None, feeds)[0]

        times = _turns({**runs, "ort": run_ort}, args.repeat, pause=0.02)
        diff = float(np.abs(runs["qdq"]() - run_ort()).max())
        rows.append(f"| {name} | {times['float'] * 1e3:.1f} | {times['qdq'] * 1e3:.1f} | "
                    f"{times['ort'] * 1e3:.1f} | {times['qdq'] / times['float']:.2f} | "
                    f"{times['qdq'] / times['ort']:.2f}x | {diff:.1e} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=["chain", "onnx", "qdq"],
                        default=["chain", "onnx", "qdq"])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--backend", default="cpu",
                        help="the burnish backend of the onnx case (default cpu)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--block", type=int, default=1,
                        help="onnx case: runs back to back per turn (default 1: a pause "
                             "before each run)")
    args = parser.parse_args()
    device = bn.backend("cpu").default_device()
    print(f"machine: {bn.backend('cpu').describe_device(device)}; {os.cpu_count()} cores; "
          f"threads: {args.threads}; median of {args.repeat}")
    torch = _torch(args.threads)
    if torch is not None:
        print(f"torch {torch.__version__}")
    try:
        import onnxruntime

        print(f"onnxruntime {onnxruntime.__version__}")
    except ImportError:
        pass
    if "chain" in args.only:
        print("\nGELU(a + b), 16M float32\n")
        print("\n".join(chain(args)))
    if "onnx" in args.only:
        print(f"\nONNX inference, batch as listed, {args.threads} threads each\n")
        print("\n".join(onnx_models(args)))
    if "qdq" in args.only:
        print(f"\nQDQ (int8) ONNX inference, captured, {args.threads} threads each\n")
        print("\n".join(qdq_models(args)))


if __name__ == "__main__":
    main()
