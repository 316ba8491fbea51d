"""Issue 7's measurements: burnish's cuda backend beside PyTorch (and bare CuPy) in one process.

    python bench/bench_cuda.py --json bench/results/cuda.json --markdown cuda.md
    python bench/bench_cuda.py --only tiny matmul           # some cases only
    python bench/bench_cuda.py --tf32                       # TF32 float32 products on both sides
    python bench/bench_cuda.py --quick                      # small sizes: a check of the script

The cases (names for ``--only``), each with issue 7's goal:

- **tiny**: ``a + b`` on 4-element float32 tensors through ``Tensor``: N calls, then one
  synchronising read of a result, divided by N: µs per op, beside torch on CUDA and a bare CuPy
  add. Goal: no slower than PyTorch.
- **add**: ``a + b`` on 64M-element float32 tensors, GB/s (3 x 256 MiB moved per call), against
  the device-to-device copy rate measured in the same run (``cudaMemcpyAsync`` through CuPy and
  ``Tensor.copy_`` in torch: 2 x 256 MiB per copy). Goal (ours; the issue sets none): 90% of
  PyTorch's rate.
- **gelu**: ``x * (erf(x / sqrt(2)) + 1) / 2`` written with tensor ops (five kernels on both
  sides, unfused), counted as 2 x 256 MiB per call, the least any implementation must move.
  Goal (ours): 90% of PyTorch's rate.
- **matmul**: 4096 x 4096 ``a @ b`` in float32 and in bfloat16, TFLOP/s (2 n^3 per call).
  Goal: 95% of PyTorch. TF32 is off on both sides unless ``--tf32``; the settings each side
  used are printed under the table and kept in the JSON.
- **mlp_train**: one training step of a 784-512-512-10 ReLU MLP (softmax cross-entropy, Adam with
  lr 1e-3) at batch 1024, on ``autodiff+cuda`` against torch eager (``torch.optim.Adam``'s
  defaults), cycling through 4 batches made on the device beforehand: steps/s. Goal: 90% of
  PyTorch.
- **resnet**: ResNet-18 inference (BasicBlocks [2, 2, 2, 2] of burnish.nn's Conv2d, BatchNorm
  with its running statistics, MaxPool2d, AdaptiveAvgPool2d, Linear), batch 64 of 3x224x224
  with the ImageNet stem and 1000 classes (``--resnet-input 32``: 3x32x32, the CIFAR stem, 10
  classes), on ``cuda`` against the same network in torch eager under ``inference_mode``, with
  the same weights: images/s. Goal: 90% of PyTorch.

Timing: the implementations of a case take turns, run by run, so that a slow spell falls on all
alike; each timed run makes as many calls as last ``--min-time`` seconds, then waits for the
device once (burnish: ``backend.sync``; torch: ``torch.cuda.synchronize``; CuPy: its stream's
``synchronize``), and the best of ``--repeat`` runs is kept. Two untimed calls come first
(kernels compile, matrix products tune). Before timing, every case checks burnish's result
against torch's on the same inputs; a mismatch is reported beside the figures.

Without CUDA, a full run stops and says what to install. ``--quick`` uses small sizes and, where
CuPy or CUDA is missing, falls back to burnish on ``ndarray`` and torch on the CPU (saying so),
so that the script itself can be checked on any machine; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.metadata
import json
import math
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from bench_mlp_train import BETAS, EPSILON, LR, SIZES, mlp_class
from resnet18 import burnish_resnet18, torch_resnet18, torch_state

import burnish
from burnish import Tensor

CASES = ("tiny", "add", "gelu", "matmul", "mlp_train", "resnet")
FULL = {"elements": 64 * 2**20, "matmul": 4096, "mlp_batch": 1024, "resnet_batch": 64,
        "resnet_input": 224}
QUICK = {"elements": 2**20, "matmul": 256, "mlp_batch": 64, "resnet_batch": 2,
         "resnet_input": 32}
MLP_BATCHES = 4
#: Goals, as fractions of PyTorch's rate (the tiny op: of PyTorch's time, at most 1).
GOALS = {"tiny": 1.0, "add": 0.90, "gelu": 0.90, "matmul": 0.95, "mlp_train": 0.90,
         "resnet": 0.90}


@dataclass
class Impl:
    """One implementation of a case: ``run`` does the work once (enqueues it, on a GPU);
    ``finish`` waits until everything enqueued is done."""

    run: Callable[[], object]
    finish: Callable[[], object]


@dataclass
class Result:
    """One line of the table: the figure (``unit``, higher is better unless ``lower``) of each
    implementation, the goal and whether burnish met it."""

    case: str
    title: str
    unit: str
    command: str
    goal: str
    lower: bool = False
    values: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    loops: dict[str, int] = field(default_factory=dict)
    references: dict[str, str] = field(default_factory=dict)
    check: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    ratio: float | None = None
    met: bool | None = None


class Env:
    """What the cases run on: the burnish backend and device, torch and its device, CuPy."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.quick = args.quick
        self.sizes = dict(QUICK if args.quick else FULL)
        if args.resnet_input:
            self.sizes["resnet_input"] = args.resnet_input
        self.notes: list[str] = []
        self.backend_name, self.device = self._burnish(args.backend)
        self.torch, self.torch_device = self._torch()
        self.cupy = self._cupy()
        self.settings = self._precision(args.tf32)
        if self.quick:
            self.notes.append("--quick: small sizes; the figures check the script and mean "
                              "nothing about speed")

    # -- what is available ------------------------------------------------------------------

    def _burnish(self, name: str):
        try:
            return name, burnish.backend(name).default_device()
        except burnish.BurnishError as error:
            if not self.quick:
                sys.exit(f"bench_cuda: the burnish backend {name!r} is not usable here: {error}\n"
                         "The full run needs an NVIDIA GPU, CuPy and burnish-backend-cuda:\n"
                         "    pip install -e packages/backend-cuda cupy-cuda12x\n"
                         "(python bench/bench_cuda.py --quick checks the script on the CPU.)")
            self.notes.append(f"burnish {name} is not usable here ({error}); --quick runs "
                              "burnish on ndarray instead")
            return "ndarray", burnish.backend("ndarray").default_device()

    def _torch(self):
        try:
            import torch
        except ImportError:
            self.notes.append("torch is not installed: no PyTorch figures, and the goals (all "
                              "relative to PyTorch) are not judged")
            return None, None
        except Exception as error:  # e.g. its CUDA libraries clash with those already loaded
            self.notes.append(f"torch failed to import ({describe(error)}): no PyTorch figures")
            return None, None
        if torch.cuda.is_available():
            return torch, "cuda"
        if self.quick:
            self.notes.append("torch sees no CUDA device; --quick runs it on the CPU")
            return torch, "cpu"
        self.notes.append("torch sees no CUDA device (a CPU-only build?): no PyTorch figures, "
                          "goals not judged; install a CUDA build of torch")
        return None, None

    def _cupy(self):
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                return cupy
            reason = "it sees no GPU"
        except ImportError:
            reason = "it is not installed"
        except Exception as error:  # CUDARuntimeError without a driver, and the like
            reason = f"{type(error).__name__}: {error}"
        self.notes.append(f"no bare-CuPy figures: {reason}")
        return None

    def _precision(self, tf32: bool) -> dict[str, str]:
        """Set TF32 on both sides as asked; say what each side uses."""
        settings = {}
        if self.backend_name == "cuda":
            from burnish.cuda.backend import allow_tf32, tf32_allowed

            allow_tf32(tf32)
            settings["burnish"] = (
                f"cuda: float32 matmul TF32 {'on' if tf32_allowed() else 'off'} "
                "(burnish.cuda.backend.allow_tf32; cuBLAS GEMMs, bfloat16 accumulates in "
                "float32); default off")
        else:
            settings["burnish"] = f"{self.backend_name}: no TF32"
        torch = self.torch
        if torch is not None:
            try:
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.backends.cudnn.allow_tf32 = tf32
            except Exception as error:  # a torch whose TF32 switches moved: say, go on
                self.notes.append(f"could not set torch's TF32 switches: {describe(error)}")
            matmul = torch.backends.cuda.matmul
            settings["torch"] = (
                f"{self.torch_device}: matmul.allow_tf32={matmul.allow_tf32} (torch's default: "
                f"False), cudnn.allow_tf32={torch.backends.cudnn.allow_tf32} (torch's default: "
                "True, set here to match burnish), "
                "matmul.allow_bf16_reduced_precision_reduction="
                f"{matmul.allow_bf16_reduced_precision_reduction} (default), "
                f"cudnn.benchmark={torch.backends.cudnn.benchmark} (default)")
        return settings

    # -- helpers for the cases ----------------------------------------------------------------

    @property
    def burnish_label(self) -> str:
        return f"burnish {self.backend_name}"

    @property
    def torch_label(self) -> str:
        return f"torch {self.torch_device}"

    def burnish_sync(self, device=None) -> Callable[[], None]:
        device = device or self.device
        return lambda: device.backend.sync(device)

    def torch_sync(self) -> Callable[[], None]:
        if self.torch_device == "cuda":
            return self.torch.cuda.synchronize
        return lambda: None

    def torch_tensor(self, array: np.ndarray, dtype: str | None = None):
        tensor = self.torch.from_numpy(np.ascontiguousarray(array)).to(self.torch_device)
        return tensor if dtype is None else tensor.to(getattr(self.torch, dtype))

    def command(self, case: str) -> str:
        parts = ["python bench/bench_cuda.py --only", case]
        if self.quick:
            parts.append("--quick")
        if self.args.tf32:
            parts.append("--tf32")
        if case == "resnet" and self.args.resnet_input:
            parts.append(f"--resnet-input {self.args.resnet_input}")
        if self.args.backend != "cuda":
            parts.append(f"--backend {self.args.backend}")
        return " ".join(parts)

    def release(self) -> None:
        """Give cached device memory back between cases (torch's and CuPy's pools)."""
        gc.collect()
        if self.torch_device == "cuda":
            self.torch.cuda.empty_cache()
        if self.cupy is not None:
            self.cupy.get_default_memory_pool().free_all_blocks()


# -- timing ------------------------------------------------------------------------------------


def timed(impl: Impl, loops: int) -> float:
    """Seconds per call of ``loops`` calls then one ``finish``."""
    start = time.perf_counter()
    for _ in range(loops):
        impl.run()
    impl.finish()
    return (time.perf_counter() - start) / loops


def measure(impls: dict[str, Impl], result: Result, min_time: float, repeat: int) -> None:
    """The best seconds per call of each implementation into ``result.seconds``; one that
    fails is reported in ``result.errors`` and left out."""
    loops = {}
    for name, impl in list(impls.items()):
        try:
            for _ in range(2):  # compile, tune, allocate
                impl.run()
                impl.finish()
            count = 1
            while (elapsed := timed(impl, count) * count) < min_time:
                count *= 10 if elapsed < min_time / 10 else 2
            loops[name] = count
        except Exception as error:
            result.errors[name] = describe(error)
            del impls[name]
    best = dict.fromkeys(impls, math.inf)
    for _ in range(repeat):
        for name, impl in impls.items():
            if name in result.errors:
                continue
            try:
                best[name] = min(best[name], timed(impl, loops[name]))
            except Exception as error:  # out of memory, say: keep the others' figures
                result.errors[name] = describe(error)
                continue
            print(f"  {result.case:<10} {name:<16} {best[name] * 1e6:12.1f} µs/call",
                  file=sys.stderr, flush=True)
    result.seconds.update({k: v for k, v in best.items() if k not in result.errors})
    result.loops.update(loops)


def describe(error: BaseException) -> str:
    """An error in one line, with where it came from."""
    where = traceback.extract_tb(error.__traceback__)
    place = f" (at {Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    return f"{type(error).__name__}: {error}{place}".replace("\n", " ")


def prepare(impls: dict[str, Impl], result: Result, name: str, factory: Callable[[], Impl]
            ) -> None:
    """``impls[name] = factory()``, or the error in ``result.errors``."""
    try:
        impls[name] = factory()
    except Exception as error:
        result.errors[name] = describe(error)


def compare(result: Result, ours: Callable[[], np.ndarray], theirs: Callable[[], np.ndarray],
            tolerance: float) -> None:
    """Check burnish's values against torch's: ``|ours - theirs| <= tolerance * max|theirs|``
    (plus the same relative to each value); the outcome goes to ``result.check``."""
    try:
        a = np.asarray(ours(), dtype=np.float64)
        b = np.asarray(theirs(), dtype=np.float64)
        scale = float(np.abs(b).max()) or 1.0
        worst = float(np.abs(a - b).max() / scale)
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance * scale)
        result.check = f"same as torch (worst difference {worst:.1e} of the largest value)"
    except Exception as error:
        result.check = f"MISMATCH with torch: {describe(error)[:300]}"


# -- the cases ---------------------------------------------------------------------------------


def case_tiny(env: Env) -> list[Result]:
    result = Result("tiny", "a + b, 4 float32 elements, through Tensor: N ops, one read",
                    "µs/op", env.command("tiny"), "no slower than PyTorch", lower=True)
    impls: dict[str, Impl] = {}
    ones = np.ones(4, np.float32)

    def ours() -> Impl:
        p, q = Tensor.from_data(ones, env.device), Tensor.from_data(ones, env.device)
        np.testing.assert_array_equal((p + q).to_numpy(), 2 * ones)
        return Impl(lambda: p + q, lambda: (p + q).to_numpy())

    prepare(impls, result, env.burnish_label, ours)
    if env.torch is not None:
        def theirs() -> Impl:
            p, q = env.torch_tensor(ones), env.torch_tensor(ones)
            return Impl(lambda: p + q, lambda: (p + q).cpu())

        prepare(impls, result, env.torch_label, theirs)
    if env.cupy is not None:
        cupy = env.cupy

        def bare() -> Impl:
            p, q = cupy.ones(4, cupy.float32), cupy.ones(4, cupy.float32)
            return Impl(lambda: p + q, lambda: cupy.asnumpy(p + q))

        prepare(impls, result, "cupy", bare)
    measure(impls, result, env.args.min_time, env.args.repeat)
    result.values = {name: s * 1e6 for name, s in result.seconds.items()}
    return [result]


def copy_rates(env: Env, n: int) -> dict[str, float]:
    """Bytes per second of a device-to-device copy of ``n`` float32 (read plus written), by
    CuPy (cudaMemcpyAsync) and by torch (``copy_``)."""
    result = Result("copy", "", "", "", "")
    impls: dict[str, Impl] = {}
    if env.cupy is not None:
        cupy = env.cupy

        def bare() -> Impl:
            a, out = cupy.ones(n, cupy.float32), cupy.empty(n, cupy.float32)
            stream = cupy.cuda.get_current_stream()
            return Impl(lambda: out.data.copy_from_device_async(a.data, a.nbytes, stream),
                        stream.synchronize)

        prepare(impls, result, "cupy memcpy", bare)
    if env.torch is not None:
        def theirs() -> Impl:
            a = env.torch.ones(n, device=env.torch_device)
            out = env.torch.empty(n, device=env.torch_device)
            return Impl(lambda: out.copy_(a), env.torch_sync())

        prepare(impls, result, f"{env.torch_label} copy_", theirs)
    measure(impls, result, env.args.min_time, env.args.repeat)
    for name, error in result.errors.items():
        env.notes.append(f"copy rate by {name} failed: {error}")
    return {name: 2 * 4 * n / s for name, s in result.seconds.items()}


def bandwidth_case(env: Env, case: str, title: str, moved: int, inputs: list[np.ndarray],
                   ours: Callable, theirs: Callable, copies: dict[str, float]) -> Result:
    """A memory-bound case: ``ours(*tensors)`` against ``theirs(*torch tensors)`` on the same
    ``inputs``, in GB/s of ``moved`` bytes per call."""
    goal = f"{GOALS[case]:.0%} of PyTorch's GB/s (ours; the issue sets none)"
    result = Result(case, title, "GB/s", env.command(case), goal)
    impls: dict[str, Impl] = {}
    mine: list[Tensor] = []
    torch_inputs: list = []

    def burnish_impl() -> Impl:
        mine.extend(Tensor.from_data(a, env.device) for a in inputs)
        return Impl(lambda: ours(*mine), env.burnish_sync())

    prepare(impls, result, env.burnish_label, burnish_impl)
    if env.torch is not None:
        def torch_impl() -> Impl:
            torch_inputs.extend(env.torch_tensor(a) for a in inputs)
            return Impl(lambda: theirs(*torch_inputs), env.torch_sync())

        prepare(impls, result, env.torch_label, torch_impl)
        if mine and torch_inputs:
            compare(result, lambda: ours(*mine)[:4096].to_numpy(),
                    lambda: theirs(*torch_inputs)[:4096].cpu().numpy(), 1e-5)
    measure(impls, result, env.args.min_time, env.args.repeat)
    result.values = {name: moved / s / 1e9 for name, s in result.seconds.items()}
    for name, rate in copies.items():
        result.references[f"copy ({name})"] = f"{rate / 1e9:.0f} GB/s"
    if copies and result.values:
        best_copy = max(copies.values()) / 1e9
        for name, value in result.values.items():
            result.references[f"{name} / copy"] = f"{value / best_copy:.0%}"
    return result


def case_add(env: Env) -> list[Result]:
    n = env.sizes["elements"]
    rng = np.random.default_rng(0)
    inputs = [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)]
    copies = copy_rates(env, n)
    return [bandwidth_case(env, "add", f"a + b, {n // 2**20}M float32 (3 x {n * 4 // 2**20} MiB "
                           "per call)", 3 * 4 * n, inputs, lambda a, b: a + b,
                           lambda a, b: a + b, copies)]


def case_gelu(env: Env) -> list[Result]:
    n = env.sizes["elements"]
    inputs = [np.random.default_rng(0).standard_normal(n, dtype=np.float32)]
    root = math.sqrt(2.0)
    copies = copy_rates(env, n)
    torch = env.torch
    return [bandwidth_case(
        env, "gelu", f"x * (erf(x / sqrt(2)) + 1) / 2, {n // 2**20}M float32, tensor ops "
        f"(counted as 2 x {n * 4 // 2**20} MiB per call)", 2 * 4 * n, inputs,
        lambda x: x * ((x / root).erf() + 1) / 2,
        lambda x: x * (torch.erf(x / root) + 1) / 2, copies)]


def case_matmul(env: Env) -> list[Result]:
    m = env.sizes["matmul"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, m), dtype=np.float32)
    b = rng.standard_normal((m, m), dtype=np.float32)
    results = []
    for dtype in ("float32", "bfloat16"):
        results.append(matmul_result(env, dtype, a, b))
        env.release()
    return results


def matmul_result(env: Env, dtype: str, a: np.ndarray, b: np.ndarray) -> Result:
    """``a @ b`` in ``dtype`` (the inputs rounded to it first), in TFLOP/s."""
    m = a.shape[0]
    result = Result("matmul", f"a @ b, {m} x {m} {dtype}", "TFLOP/s", env.command("matmul"),
                    f"{GOALS['matmul']:.0%} of PyTorch's TFLOP/s")
    impls: dict[str, Impl] = {}
    mine: list[Tensor] = []
    torch_inputs: list = []

    def ours() -> Impl:
        mine.extend(Tensor.from_data(x, env.device).cast(dtype) for x in (a, b))
        return Impl(lambda: mine[0] @ mine[1], env.burnish_sync())

    prepare(impls, result, env.burnish_label, ours)
    if env.torch is not None:
        def theirs() -> Impl:
            torch_inputs.extend(env.torch_tensor(x, dtype) for x in (a, b))
            return Impl(lambda: torch_inputs[0] @ torch_inputs[1], env.torch_sync())

        prepare(impls, result, env.torch_label, theirs)
        if mine and torch_inputs:
            tolerance = 2e-2 if dtype == "bfloat16" or env.args.tf32 else 1e-3
            compare(result, lambda: (mine[0] @ mine[1])[:64, :64].cast("float32").to_numpy(),
                    lambda: (torch_inputs[0] @ torch_inputs[1])[:64, :64].float().cpu()
                    .numpy(), tolerance)
    measure(impls, result, env.args.min_time, env.args.repeat)
    result.values = {name: 2 * m**3 / s / 1e12 for name, s in result.seconds.items()}
    return result


def mlp_data(batch: int) -> tuple[list[np.ndarray], ...]:
    """The MLP's initial weights and biases and ``MLP_BATCHES`` batches of inputs and labels."""
    rng = np.random.default_rng(0)
    xs = [rng.random((batch, SIZES[0]), dtype=np.float32) for _ in range(MLP_BATCHES)]
    ys = [rng.integers(0, SIZES[-1], batch) for _ in range(MLP_BATCHES)]
    weights = [rng.uniform(-n**-0.5, n**-0.5, (n, m)).astype(np.float32)
               for n, m in zip(SIZES[:-1], SIZES[1:])]
    biases = [np.zeros(m, np.float32) for m in SIZES[1:]]
    return weights, biases, xs, ys


def mlp_trainer(name: str, weights: list[np.ndarray], biases: list[np.ndarray],
                xs: list[np.ndarray], ys: list[np.ndarray]) -> tuple[Callable[[], Any], Any]:
    """The MLP's training step on backend ``name`` (cycling through the batches ``xs``, ``ys``,
    put on the device first) and the device; each call returns the step's loss."""
    from burnish import nn, optim

    device = burnish.backend(name).default_device()
    layers = [nn.Linear(nn.Param(Tensor.from_data(w, device)),
                        nn.Param(Tensor.from_data(c, device)))
              for w, c in zip(weights, biases)]
    state = {"model": mlp_class()(layers, nn.Relu()), "step": 0}
    adam, loss_fn = optim.Adam(*BETAS, EPSILON), nn.CrossEntropyLoss()
    batches = [(Tensor.from_data(x, device), Tensor.from_data(y, device)) for x, y in zip(xs, ys)]

    def step():
        x, y = batches[state["step"] % len(batches)]
        state["step"] += 1
        loss = loss_fn(state["model"](x), y)
        state["model"] = adam.step(LR, state["model"], loss.backward())
        return loss

    return step, device


def case_mlp_train(env: Env, also: tuple[str, ...] = ()) -> list[Result]:
    """The MLP training step on ``autodiff+<backend>`` beside torch; ``also``: more burnish
    backends measured in the same turns (bench_fusion.py: with and without fusion)."""
    batch = env.sizes["mlp_batch"]
    weights, biases, xs, ys = mlp_data(batch)
    name = f"autodiff+{env.backend_name}"
    result = Result("mlp_train", f"training step, MLP {'-'.join(map(str, SIZES))}, Adam, "
                    f"cross-entropy, batch {batch}: burnish on {name}", "steps/s",
                    env.command("mlp_train"), f"{GOALS['mlp_train']:.0%} of PyTorch's steps/s")

    def burnish_trainer(name: str = name) -> tuple[Callable[[], Any], Callable[[], None]]:
        step, device = mlp_trainer(name, weights, biases, xs, ys)
        return step, env.burnish_sync(device)

    def torch_trainer() -> tuple[Callable[[], Any], Callable[[], None]]:
        torch = env.torch
        layers = [torch.nn.Linear(n, m) for n, m in zip(SIZES[:-1], SIZES[1:])]
        with torch.no_grad():
            for layer, w, c in zip(layers, weights, biases):
                layer.weight.copy_(torch.from_numpy(w.T))
                layer.bias.copy_(torch.from_numpy(c))
        model = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(),
                                    layers[2]).to(env.torch_device)
        adam = torch.optim.Adam(model.parameters(), LR, BETAS, EPSILON)
        batches = [(env.torch_tensor(x), env.torch_tensor(y)) for x, y in zip(xs, ys)]
        state = {"step": 0}

        def step():
            x, y = batches[state["step"] % MLP_BATCHES]
            state["step"] += 1
            loss = torch.nn.functional.cross_entropy(model(x), y)
            adam.zero_grad()
            loss.backward()
            adam.step()
            return loss

        return step, env.torch_sync()

    impls: dict[str, Impl] = {}
    prepare(impls, result, f"burnish {name}", lambda: Impl(*burnish_trainer()))
    for other in also:
        prepare(impls, result, f"burnish {other}",
                lambda other=other: Impl(*burnish_trainer(other)))
    if env.torch is not None:
        prepare(impls, result, env.torch_label, lambda: Impl(*torch_trainer()))
        if f"burnish {name}" in impls and env.torch_label in impls:
            # Five steps from the same weights on the same batches: the same losses.
            def losses(trainer: Callable) -> Callable[[], list[float]]:
                def run() -> list[float]:
                    step = trainer()[0]
                    return [float(step().item()) for _ in range(5)]
                return run

            compare(result, losses(burnish_trainer), losses(torch_trainer),
                    1e-2 if env.args.tf32 else 1e-3)
    measure(impls, result, env.args.min_time, env.args.repeat)
    result.values = {n: 1 / s for n, s in result.seconds.items()}
    return [result]


def case_resnet(env: Env) -> list[Result]:
    batch, size = env.sizes["resnet_batch"], env.sizes["resnet_input"]
    cifar = size < 64
    classes = 10 if cifar else 1000
    style = "CIFAR-style 3x3 stem" if cifar else "ImageNet-style 7x7 stem and max pool"
    result = Result("resnet", f"ResNet-18 inference, batch {batch} of 3x{size}x{size} "
                    f"({style}, {classes} classes)", "images/s", env.command("resnet"),
                    f"{GOALS['resnet']:.0%} of PyTorch's images/s")
    images = np.random.default_rng(0).standard_normal((batch, 3, size, size), dtype=np.float32)
    impls: dict[str, Impl] = {}
    models: dict[str, Any] = {}

    def ours() -> Impl:
        burnish.seed(0)
        model = burnish_resnet18(env.device, cifar, classes)
        models["burnish"] = model
        x = Tensor.from_data(images, env.device)
        models["burnish_run"] = lambda: model(x)
        return Impl(models["burnish_run"], env.burnish_sync())

    prepare(impls, result, env.burnish_label, ours)
    if env.torch is not None:
        torch = env.torch

        def theirs() -> Impl:
            model = torch_resnet18(torch, cifar, classes)
            if "burnish" in models:
                model.load_state_dict(torch_state(models["burnish"], model))
            model = model.to(env.torch_device).eval()
            x = env.torch_tensor(images)

            def run():
                with torch.inference_mode():
                    return model(x)

            models["torch_run"] = run
            return Impl(run, env.torch_sync())

        prepare(impls, result, env.torch_label, theirs)
        if len(impls) == 2:
            compare(result, lambda: models["burnish_run"]().to_numpy(),
                    lambda: models["torch_run"]().cpu().numpy(),
                    1e-2 if env.args.tf32 else 1e-3)
    measure(impls, result, env.args.min_time, env.args.repeat)
    result.values = {name: batch / s for name, s in result.seconds.items()}
    return [result]


RUNNERS = {"tiny": case_tiny, "add": case_add, "gelu": case_gelu, "matmul": case_matmul,
           "mlp_train": case_mlp_train, "resnet": case_resnet}


# -- judging and reporting ---------------------------------------------------------------------


def judge(result: Result, env: Env) -> None:
    """Set ``result.ratio`` (burnish over torch, in the goal's sense: rate over rate, or for
    times torch's over burnish's) and ``result.met``."""
    ours, theirs = result.values.get(env.burnish_label), result.values.get(env.torch_label)
    if result.case == "mlp_train":
        ours = result.values.get(f"burnish autodiff+{env.backend_name}")
    if ours is None or theirs is None:
        return
    result.ratio = theirs / ours if result.lower else ours / theirs
    result.met = result.ratio >= GOALS[result.case]


def show(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def markdown(results: list[Result], env: Env) -> str:
    header = ["case", "what", "unit", "burnish", "PyTorch", "references", "burnish / PyTorch",
              "goal", "met", "command"]
    rows = [header]
    for r in results:
        ours = {k: v for k, v in r.values.items() if k.startswith("burnish")}
        theirs = r.values.get(env.torch_label)
        others = {k: v for k, v in r.values.items() if k not in ours and k != env.torch_label}
        references = [f"{k} {show(v)}" for k, v in others.items()]
        references += [f"{k} {v}" for k, v in r.references.items()]
        references += [f"{k}: **failed** ({v})" for k, v in r.errors.items()]
        if r.check:
            references.append(("**" if r.check.startswith("MISMATCH") else "") + "check: "
                              + r.check + ("**" if r.check.startswith("MISMATCH") else ""))
        ratio = "-" if r.ratio is None else (
            f"{1 / r.ratio:.2f}x torch's time" if r.lower else f"{r.ratio:.0%}")
        met = {None: "not judged", True: "yes", False: "**no**"}[r.met]
        rows.append([r.case, r.title, r.unit,
                     "; ".join(f"{show(v)} ({k})" for k, v in ours.items()) or "-",
                     "-" if theirs is None else f"{show(theirs)} ({env.torch_label})",
                     "; ".join(references) or "-", ratio, r.goal, met, f"`{r.command}`"])
    rows = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    rows.insert(1, ["-" * w for w in widths])
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    lines.append("")
    lines.append(f"device: {describe_device(env)}; best of {env.args.repeat} runs of at least "
                 f"{env.args.min_time} s each.")
    for side, text in env.settings.items():
        lines.append(f"- {side}: {text}")
    for note in env.notes:
        lines.append(f"- note: {note}")
    return "\n".join(lines)


def describe_device(env: Env) -> str:
    text = f"burnish {env.device} ({env.device.backend.describe_device(env.device)})"
    if env.torch_device == "cuda":
        text += f"; torch cuda ({env.torch.cuda.get_device_name()})"
    return text


def versions(env: Env) -> dict[str, str]:
    found = {"burnish": burnish.__version__, "numpy": np.__version__}
    for package in ("torch", "cupy", "cupy-cuda12x", "cupy-cuda13x"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    if env.cupy is not None:
        found["cuda runtime"] = str(env.cupy.cuda.runtime.runtimeGetVersion())
        found["cuda driver"] = str(env.cupy.cuda.runtime.driverGetVersion())
    if env.torch is not None:
        found["torch cuda"] = str(env.torch.version.cuda)
    return found


def report(results: list[Result], env: Env) -> dict[str, Any]:
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "machine": {"cpu": platform.processor() or "unknown", "cores": os.cpu_count(),
                    "system": platform.platform(), "python": platform.python_version(),
                    "device": describe_device(env)},
        "versions": versions(env),
        "settings": env.settings,
        "notes": env.notes,
        "sizes": env.sizes,
        "repeat": env.args.repeat,
        "min_time": env.args.min_time,
        "goals": GOALS,
        "results": [
            {"case": r.case, "title": r.title, "unit": r.unit, "lower_is_better": r.lower,
             "values": r.values, "seconds_per_call": r.seconds, "loops": r.loops,
             "references": r.references, "check": r.check, "errors": r.errors,
             "goal": r.goal, "ratio_to_torch": r.ratio, "met": r.met, "command": r.command}
            for r in results
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=CASES, metavar="NAME",
                        help=f"run these cases only: {', '.join(CASES)}")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, and ndarray / torch on the CPU where CUDA is missing: "
                             "checks the script, measures nothing")
    parser.add_argument("--backend", default="cuda", help="the burnish backend (cuda)")
    parser.add_argument("--tf32", action="store_true",
                        help="let float32 matmuls and convs use TF32 on both sides (default: "
                             "off on both, torch's default for matmuls)")
    parser.add_argument("--resnet-input", type=int, choices=(224, 32),
                        help="ResNet-18 input size: 224 (ImageNet-style, the default) or 32 "
                             "(CIFAR-style; the default with --quick)")
    parser.add_argument("--repeat", type=int, help="timed runs per case; the best is kept "
                                                   "(5; --quick: 2)")
    parser.add_argument("--min-time", type=float,
                        help="seconds each timed run lasts at least (0.2; --quick: 0.02)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the table too")
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (2 if args.quick else 5)
    args.min_time = args.min_time or (0.02 if args.quick else 0.2)

    env = Env(args)
    print(f"bench_cuda: {describe_device(env)}", file=sys.stderr)
    for note in env.notes:
        print(f"bench_cuda: note: {note}", file=sys.stderr)
    results: list[Result] = []
    for case in args.only or CASES:
        print(f"bench_cuda: {case} ...", file=sys.stderr, flush=True)
        try:
            found = RUNNERS[case](env)
        except Exception as error:  # one broken case must not lose the others' figures
            traceback.print_exc()
            found = [Result(case, "(failed before measuring)", "-", env.command(case),
                            "-", errors={"case": describe(error)})]
        for result in found:
            judge(result, env)
            results.append(result)
        env.release()

    table = markdown(results, env)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps(report(results, env), indent=2) + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
