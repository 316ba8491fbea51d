"""Training steps of four models, burnish eager and captured beside PyTorch eager, in one process.

    python bench/bench_train.py                           # autodiff+cuda: gpt resnet lstm mnist
    python bench/bench_train.py --compile --json train.json --markdown train.md
    python bench/bench_train.py --backend autodiff+fusion+cuda --models gpt
    python bench/bench_train.py --backend autodiff+ndarray   # the CPU section, 2 threads
    python bench/bench_train.py --check                   # eager against captured, 100 steps
    python bench/bench_train.py --small --backend autodiff+rocm   # tiny sizes: a check

The models (``train_models.py`` holds them, in burnish.nn and in torch with the same layout;
torch's initial weights are loaded into burnish's model by burnish's PyTorch loader, so both
start from the same point and the first losses agree, but for mnist, whose dropout draws
differ):

- **gpt**: a GPT-style causal LM (token embedding + learned positions, 6 pre-norm blocks of
  causal self-attention with 8 heads and a GELU MLP 4x, d_model 512, seq 256, batch 16, vocab
  8192, random tokens), cross-entropy, AdamW;
- **resnet**: ResNet-18 with the CIFAR stem, batch 128 of 3x32x32 random images, BatchNorm in
  training mode, SGD with momentum 0.9;
- **lstm**: a 2-layer LSTM 256 -> 512, seq 64, batch 64, a linear head on the last step, Adam;
- **mnist**: examples/mnist's CNN (imported from the example), batch 64, Adam;
- **chargpt** (the CPU section, the default on ndarray): a character-level transformer of
  about 110k parameters (d_model 64, 2 blocks of 4 heads, seq 64, batch 16), AdamW.

The modes: **burnish eager** (the step as plain Python), **burnish captured** (the same step
through ``burnish.capture``, Adam and AdamW with ``capturable=True``), **torch eager**, and with
``--compile`` **torch compiled** (``torch.compile(mode="reduce-overhead")`` of the forward and
loss, CUDA graphs on a GPU). A step is ``model, loss = step(model, x, y)``, cycling through 4
batches made on the device beforehand.

The figures, per model and mode:

- **steps/s**: the best of ``--repeat`` blocks of ``--steps`` steps, each block ending with a
  wait for the device and a read of the last loss; the modes take turns, block by block;
- **host µs/step**: the time to issue a block's steps, before the wait (a replayed step's host
  time, for captured runs);
- **GPU µs/step** (captured burnish on cuda): the GPU's busy time, measured as host_bound.py
  does: ``--queued`` steps queued behind a spinning kernel, timed by CUDA events;
- **peak / held MiB**: device memory over the first steps (the eager call, the recordings and
  replays, for captured runs) above what was in use before the mode was built: burnish, the
  bytes in use in the runtime's buffer pool (allocated minus free, sampled at each allocation;
  in size classes, at most 12.5% over; vendor libraries' own workspaces are not in it); torch,
  ``torch.cuda.max_memory_allocated``. "Held" is what stays in use after them (state, and a
  record's buffers);
- **x torch**: steps/s over torch eager's.

``--check`` runs burnish eager and captured side by side instead (``--check-steps``, 100; 10 with
``--small``) from the same weights, data and seed, and reports the largest difference of the
losses and of the parameters at the end: bitwise on ndarray, within float tolerance on the GPU
backends. Both sides use the optimizer the captured step needs (Adam's ``capturable``), so that
capture is the only difference; the notes say how many steps replayed, or why none did.

Threads: ``--threads N`` (default 2 on a CPU backend) sets torch's threads and NumPy's BLAS
threads (threadpoolctl when installed; otherwise ``OMP_NUM_THREADS`` and its kin, set before
NumPy is imported when this file runs as a script). TF32 is off on both sides.

Without PyTorch it measures burnish alone and says so; without CUDA, a GPU backend's figures
stand beside torch on the CPU (said in the notes: the ratio then means nothing).
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":  # thread counts must be in the environment before NumPy loads
    _early = argparse.ArgumentParser(add_help=False)
    _early.add_argument("--threads", type=int)
    _early.add_argument("--backend", default="autodiff+cuda")
    _known = _early.parse_known_args()[0]
    _threads = _known.threads or (2 if _known.backend.split("+")[-1] in ("ndarray", "cpu")
                                  else None)
    if _threads:
        for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(_name, str(_threads))

import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import train_models as models  # noqa: E402
from host_bound import SPIN_CYCLES, gpu_busy, spin_kernel  # noqa: E402

import burnish  # noqa: E402
from burnish import Tensor  # noqa: E402

GPU_MODELS = ("gpt", "resnet", "lstm", "mnist")
CPU_MODELS = ("chargpt", "mnist")
WARMUP = 5  # steps before timing: compile, tune, record (a captured step replays from the 4th)
EAGER, CAPTURED, TORCH, COMPILED = ("burnish eager", "burnish captured", "torch eager",
                                    "torch compiled")


@dataclass
class Run:
    """One mode of one model: ``issue()`` enqueues a step and returns its loss (a device
    tensor); ``finish(loss)`` waits for the device and returns the loss as a float."""

    mode: str
    issue: Callable[[], Any]
    finish: Callable[[Any], float]
    params: Callable[[], dict[str, np.ndarray]] | None = None
    captured: Any = None  # the burnish.capture object
    busy: Callable[[], float] | None = None  # GPU µs per step, where measurable
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Env:
    """What the runs need: the burnish backend and device, torch and its device, the pool to
    watch and the spin kernel for GPU times."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.notes: list[str] = []
        self.backend_name = args.backend
        try:
            self.device = burnish.backend(args.backend).default_device()
        except burnish.BurnishError as error:
            sys.exit(f"bench_train: the burnish backend {args.backend!r} is not usable here: "
                     f"{error}\n(--backend autodiff+ndarray runs on any machine; the GPU "
                     "backends need their package and a driver: see docs/gpu-backends.md)")
        self.inner_name = args.backend.split("+")[-1]
        self.cpu = self.inner_name in ("ndarray", "cpu")  # the CPU section, threads as torch
        inner = burnish.backend(self.inner_name)
        runtime = getattr(inner, "runtime", None)
        self.runtime = runtime(inner.default_device()) if runtime else None
        self.pool = getattr(self.runtime, "pool", None)
        self.threads = args.threads or (2 if self.cpu else None)
        self.settings = self._threads()
        self.torch, self.torch_device = self._torch()
        self.spin = self._spin()
        self.settings["tf32"] = self._tf32()
        if args.small:
            self.notes.append("--small: tiny sizes; the figures check the script and mean "
                              "nothing about speed")
        if self.device.backend.capturer(self.device) is None:
            self.notes.append(f"{self.inner_name} has no capturer yet: 'burnish captured' runs "
                              "the step eagerly (burnish.capture says so in a warning)")

    def _threads(self) -> dict[str, str]:
        if not self.threads:
            return {"threads": "library defaults"}
        how = f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}"
        try:
            import threadpoolctl

            self._limits = threadpoolctl.threadpool_limits(self.threads)
            how = f"threadpoolctl.threadpool_limits({self.threads})"
        except ImportError:
            pass
        return {"threads": f"{self.threads} (NumPy: {how}; torch, where present: "
                           "set_num_threads)"}

    def _torch(self):
        if self.args.no_torch:
            self.notes.append("--no-torch: burnish alone")
            return None, None
        try:
            import torch
        except ImportError:
            self.notes.append("torch is not installed: burnish alone, no ratios (pip install "
                              "torch; the CPU build: --index-url "
                              "https://download.pytorch.org/whl/cpu)")
            return None, None
        if self.threads:
            torch.set_num_threads(self.threads)
        if self.cpu:
            return torch, "cpu"
        if torch.cuda.is_available():
            return torch, "cuda"
        self.notes.append(f"torch sees no CUDA device: torch runs on the CPU beside burnish on "
                          f"{self.inner_name}, and the ratios mean nothing")
        return torch, "cpu"

    def _spin(self):
        if self.inner_name != "cuda":
            return None
        try:
            return spin_kernel()
        except Exception as error:  # no CuPy compiler: GPU times are left out
            self.notes.append(f"no GPU busy times: the spin kernel failed ({describe(error)})")
            return None

    def _tf32(self) -> str:
        said = []
        if self.inner_name == "cuda":
            from burnish.cuda.backend import allow_tf32

            allow_tf32(False)
            said.append("burnish cuda: off")
        if self.torch is not None and self.torch_device == "cuda":
            self.torch.backends.cuda.matmul.allow_tf32 = False
            self.torch.backends.cudnn.allow_tf32 = False
            said.append("torch matmul and cudnn: off")
        return "; ".join(said) or "not used"

    def sync(self) -> None:
        self.device.backend.sync(self.device)

    def in_use(self) -> int:
        """Bytes in use in the pool (allocated from the device and not free for reuse)."""
        stats = self.pool.stats()
        return stats["allocated_bytes"] - stats["free_bytes"]

    def torch_sync(self) -> None:
        if self.torch_device == "cuda":
            self.torch.cuda.synchronize()

    def release(self) -> None:
        gc.collect()
        if self.torch is not None and self.torch_device == "cuda":
            self.torch.cuda.empty_cache()


# -- the runs ----------------------------------------------------------------------------------


def initial_state(env: Env, name: str, sizes: dict[str, int]) -> dict[str, np.ndarray] | None:
    """The torch model's initial weights (seeded) as NumPy arrays: both frameworks start
    there. Without torch, burnish starts from its own seeded initialization."""
    if env.torch is None:
        return None
    env.torch.manual_seed(0)
    model = models.torch_model(env.torch, name, sizes)
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def burnish_run(env: Env, spec: models.Spec, sizes: dict[str, int], state, data,
                captured: bool, capturable: bool | None = None) -> Run:
    """The training step of ``spec`` in burnish, eager or through ``burnish.capture``;
    ``capturable``: the optimizer's flag (by default, set where the step is captured)."""
    device = env.device
    burnish.seed(0)
    model = models.burnish_model(spec.name, sizes, device)
    if state is not None:
        model = models.load_torch_weights(spec.name, model, state)
    optimizer = models.burnish_optimizer(spec, captured if capturable is None else capturable)
    loss_of = models.burnish_loss(spec.name, sizes, device, env.args.causal_mask)
    lr = spec.lr

    autocast = env.args.autocast

    def train_step(model, x, y):
        if autocast:  # the forward pass under autocast; backward and the step outside, as torch
            with burnish.autocast(autocast):
                loss = loss_of(model, x, y)
        else:
            loss = loss_of(model, x, y)
        return optimizer.step(lr, model, loss.backward()), loss.detach()

    step = burnish.capture(train_step) if captured else train_step
    batches = [(Tensor.from_data(x, device), Tensor.from_data(y, device)) for x, y in data]
    held = {"model": model, "count": 0}

    def issue():
        x, y = batches[held["count"] % len(batches)]
        held["count"] += 1
        held["model"], loss = step(held["model"], x, y)
        return loss

    def finish(loss) -> float:
        env.sync()
        return float(loss.item())

    def params() -> dict[str, np.ndarray]:
        return {k: p.val().to_numpy() for k, p in held["model"].named_params()}

    run = Run(CAPTURED if captured else EAGER, issue, finish, params,
              step if captured else None)
    if captured and env.spin is not None:
        run.busy = lambda: gpu_busy(env.runtime, issue, env.sync, env.args.queued, env.spin,
                                    spin_cycles(run, env.args.queued))
    return run


def spin_cycles(run: Run, queued: int) -> int:
    """Enough spinning for the host to queue ``queued`` steps before the GPU starts them (at
    the measured host time per step, with half as much again to spare)."""
    issue_s = run.figures.get("host_us", 0.0) * 1e-6 * queued * 1.5
    return SPIN_CYCLES * max(1, math.ceil(issue_s / 0.1))


def torch_run(env: Env, spec: models.Spec, sizes: dict[str, int], state, data,
              compiled: bool) -> Run:
    """The same step in torch: eager, or its forward and loss through ``torch.compile``."""
    torch, device = env.torch, env.torch_device
    model = models.torch_model(torch, spec.name, sizes, env.args.torch_attention)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    model = model.to(device).train()
    optimizer = models.torch_optimizer(torch, spec, model.parameters())
    loss_of = models.torch_loss(torch, spec.name, sizes, device)
    forward = loss_of
    if compiled:
        forward = torch.compile(loss_of, mode="reduce-overhead")
    batches = [(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
               for x, y in data]
    held = {"count": 0}
    autocast = env.args.autocast

    def issue():
        x, y = batches[held["count"] % len(batches)]
        held["count"] += 1
        if compiled:
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        if autocast:
            with torch.autocast(torch.device(device).type, getattr(torch, autocast)):
                loss = forward(model, x, y)
        else:
            loss = forward(model, x, y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def finish(loss) -> float:
        env.torch_sync()
        return float(loss.item())

    return Run(COMPILED if compiled else TORCH, issue, finish)


def build(env: Env, spec: models.Spec, sizes: dict[str, int]) -> list[Run]:
    """Every mode of ``spec``, each built and warmed up in turn (its memory measured then),
    so that one failing leaves the others."""
    data = models.make_data(spec.name, sizes)
    state = initial_state(env, spec.name, sizes)
    makers: list[tuple[str, Callable[[], Run]]] = [
        (EAGER, lambda: burnish_run(env, spec, sizes, state, data, False)),
        (CAPTURED, lambda: burnish_run(env, spec, sizes, state, data, True))]
    if env.torch is not None:
        makers.append((TORCH, lambda: torch_run(env, spec, sizes, state, data, False)))
        if env.args.compile:
            makers.append((COMPILED, lambda: torch_run(env, spec, sizes, state, data, True)))
    runs = []
    for mode, make in makers:
        try:
            runs.append(warm_up(env, mode, make))
        except Exception as error:  # out of memory, torch cannot compile: keep the others
            failed = Run(mode, None, None)  # type: ignore[arg-type]
            failed.figures["error"] = describe(error)
            if mode == COMPILED:
                failed.figures["error"] = f"torch cannot compile here: {describe(error)}"
            runs.append(failed)
            env.release()
    return runs


def warm_up(env: Env, mode: str, make: Callable[[], Run]) -> Run:
    """Build a run and take its first ``WARMUP`` steps, measuring the device memory they use
    and keeping what ``burnish.capture`` warned of."""
    torch_side = mode in (TORCH, COMPILED)
    watch = Watch(env, torch_side)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = make()
            losses = [run.finish(run.issue())]
            for _ in range(WARMUP - 1):
                loss = run.issue()
            losses.append(run.finish(loss))
    finally:
        memory = watch.stop()
    run.figures.update(memory)
    run.figures["first_loss"] = losses[0]
    keep_warnings(run, caught)
    return run


def keep_warnings(run: Run, caught: list[warnings.WarningMessage]) -> None:
    """``burnish.capture``'s warnings (why a step runs eagerly) into ``run.notes``, once."""
    for warning in caught:
        text = str(warning.message)
        if "capture" in text and text not in run.notes:
            run.notes.append(text)


def capture_outcome(run: Run) -> None:
    """Say how many calls of a captured run were replayed, or why none was."""
    stats = run.captured.stats()
    calls = sum(entry["calls"] + entry["replays"] for entry in stats)
    replays = sum(entry["replays"] for entry in stats)
    run.figures["replays"] = replays
    if replays:
        run.notes.append(f"{replays} of {calls} calls replayed")
    elif not run.notes:
        reasons = {entry["eager_because"] for entry in stats if entry["eager_because"]}
        run.notes.append("no call replayed: " + ("; ".join(sorted(reasons)) or "no record"))


class Watch:
    """The device memory a mode uses from its construction on: the peak, and what is still in
    use when ``stop`` is called (``None`` where there is no device pool to read)."""

    def __init__(self, env: Env, torch_side: bool):
        self.env, self.torch_side = env, torch_side
        env.release()
        self.peak = 0
        if torch_side:
            self.cuda = env.torch_device == "cuda"
            if self.cuda:
                env.torch.cuda.reset_peak_memory_stats()
                self.base = env.torch.cuda.memory_allocated()
            return
        pool = env.pool
        self.cuda = pool is not None
        if not self.cuda:
            return
        self.base = self.peak = env.in_use()
        original = pool.alloc

        def alloc(nbytes: int, **options):  # in use only grows at an allocation: exact
            buffer = original(nbytes, **options)
            self.peak = max(self.peak, env.in_use())
            return buffer

        pool.alloc = alloc  # on the instance, for the warm-up only: timed steps run unwatched

    def stop(self) -> dict[str, float | None]:
        if not self.cuda:
            return {"peak_mib": None, "held_mib": None}
        if self.torch_side:
            torch = self.env.torch
            peak, now = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
        else:
            del self.env.pool.alloc
            gc.collect()
            now = self.env.in_use()
            peak = max(self.peak, now)
        return {"peak_mib": (peak - self.base) / 2**20, "held_mib": (now - self.base) / 2**20}


# -- timing ------------------------------------------------------------------------------------


def measure(env: Env, runs: list[Run]) -> None:
    """steps/s and host µs/step of every run, the best of ``--repeat`` blocks taken in turns;
    then the GPU's busy time where it can be measured."""
    live = [run for run in runs if "error" not in run.figures]
    best = {run.mode: (math.inf, math.inf) for run in live}
    for _ in range(env.args.repeat):
        for run in live:
            if "error" in run.figures:
                continue
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    start = time.perf_counter()
                    for _ in range(env.args.steps):
                        loss = run.issue()
                    issued = time.perf_counter()
                    run.figures["last_loss"] = run.finish(loss)
                    done = time.perf_counter()
            except Exception as error:
                run.figures["error"] = describe(error)
                continue
            keep_warnings(run, caught)
            total, host = best[run.mode]
            best[run.mode] = (min(total, (done - start) / env.args.steps),
                              min(host, (issued - start) / env.args.steps))
    for run in live:
        if "error" in run.figures:
            continue
        if run.captured is not None:
            capture_outcome(run)
        total, host = best[run.mode]
        run.figures["steps_per_s"] = 1.0 / total
        run.figures["host_us"] = host * 1e6
        if run.busy is not None:
            try:
                run.figures["gpu_us"] = run.busy()
            except Exception as error:
                run.notes.append(f"GPU busy time failed: {describe(error)}")


def print_kernels(env: Env, name: str, run: Run, top: int, steps: int = 5) -> None:
    """The ``top`` kernels (and copies) of ``run``'s step by GPU time, per step, from
    ``steps`` steps traced by torch.profiler (CUPTI: every kernel of the process, burnish's
    and those inside CUDA graphs included)."""
    torch = env.torch
    if torch is None or env.torch_device != "cuda" or "error" in run.figures:
        return
    from torch.profiler import ProfilerActivity, profile

    run.finish(run.issue())
    with profile(activities=[ProfilerActivity.CUDA]) as traced:
        loss = None
        for _ in range(steps):
            loss = run.issue()
        run.finish(loss)
    rows = []
    for event in traced.key_averages():
        total = getattr(event, "device_time_total", None)
        if total is None:
            total = getattr(event, "cuda_time_total", 0.0)
        if total > 0:
            rows.append((total / steps, event.count / steps, event.key))
    rows.sort(reverse=True)
    if env.args.trace is not None:  # every launch with its grid, for a closer look
        env.args.trace.mkdir(parents=True, exist_ok=True)
        mode = run.mode.replace(" ", "-")
        traced.export_chrome_trace(str(env.args.trace / f"{name}-{mode}.json"))
    whole = sum(r[0] for r in rows) or 1.0
    print(f"\n{name}, {run.mode}: GPU time by kernel, per step ({whole / 1e3:.2f} ms in all)")
    for total, count, key in rows[:top]:
        print(f"  {total / 1e3:8.3f} ms {100 * total / whole:5.1f}% {count:6.1f}x  {key[:90]}")


def describe(error: BaseException) -> str:
    """An error in one line, with where it came from."""
    where = traceback.extract_tb(error.__traceback__)
    place = f" (at {Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    return f"{type(error).__name__}: {error}{place}".replace("\n", " ")


# -- --check -----------------------------------------------------------------------------------


def check(env: Env, spec: models.Spec, sizes: dict[str, int]) -> dict[str, Any]:
    """burnish eager and captured for ``--check-steps`` steps from the same weights, data and
    seed: the largest difference of their losses and of their parameters at the end."""
    data = models.make_data(spec.name, sizes)
    state = initial_state(env, spec.name, sizes)
    steps = env.args.check_steps
    losses, params, notes = {}, {}, []
    for captured in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Both with the optimizer the captured step needs (a capturable Adam computes its
            # bias corrections on the device, in float32): only capture differs.
            run = burnish_run(env, spec, sizes, state, data, captured, capturable=True)
            # The same draws (dropout) for both: the generator restarts from the same seed.
            burnish.seed(1)
            losses[captured] = np.array([run.finish(run.issue()) for _ in range(steps)])
        params[captured] = run.params()
        notes += [str(w.message) for w in caught if "capture" in str(w.message)]
        if run.captured is not None:
            replays = sum(entry["replays"] for entry in run.captured.stats())
            notes.append(f"captured: {replays} of {steps} steps replayed")
        del run
        env.release()
    loss_diff = float(np.abs(losses[True] - losses[False]).max())
    param_diff = max(float(np.abs(params[True][k].astype(np.float64) - params[False][k]).max())
                     for k in params[False])
    scale = max(float(np.abs(p).max()) for p in params[False].values())
    return {"model": spec.name, "steps": steps, "loss_max_abs_diff": loss_diff,
            "param_max_abs_diff": param_diff, "param_max_abs": scale,
            "bitwise": loss_diff == 0.0 and param_diff == 0.0,
            "first_loss": float(losses[False][0]), "last_loss": float(losses[False][-1]),
            "notes": notes}


# -- reporting ---------------------------------------------------------------------------------


def title(spec: models.Spec, sizes: dict[str, int], params: int | None) -> str:
    return spec.title.format(**sizes, params=f"{params:,}" if params else "?")


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def markdown_runs(results: list[dict[str, Any]]) -> list[str]:
    header = ["model", "mode", "steps/s", "x torch eager", "host µs/step", "GPU µs/step",
              "host / GPU", "peak MiB", "held MiB", "first loss", "notes"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        torch_rate = next((r["figures"].get("steps_per_s") for r in result["runs"]
                           if r["mode"] == TORCH), None)
        for r in result["runs"]:
            f = r["figures"]
            rate = f.get("steps_per_s")
            ratio = rate / torch_rate if rate and torch_rate else None
            host, gpu = f.get("host_us"), f.get("gpu_us")
            notes = ([f"**failed**: {f['error']}"] if "error" in f else []) + r["notes"]
            cells = [result["model"], r["mode"], fmt(rate),
                     "-" if ratio is None else f"{ratio:.2f}x", fmt(host), fmt(gpu),
                     "-" if host is None or not gpu else f"{host / gpu:.0%}",
                     fmt(f.get("peak_mib")), fmt(f.get("held_mib")),
                     fmt(f.get("first_loss"), 6), "; ".join(notes) or ""]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def markdown_checks(checks: list[dict[str, Any]]) -> list[str]:
    lines = ["| model | steps | largest loss difference | largest parameter difference "
             "(of max abs) | bitwise | notes |", "|---|---|---|---|---|---|"]
    for c in checks:
        if "error" in c:
            lines.append(f"| {c['model']} | - | - | - | - | **failed**: {c['error']} |")
            continue
        notes = "; ".join(c["notes"]).replace("|", "\\|")
        lines.append(f"| {c['model']} | {c['steps']} | {c['loss_max_abs_diff']:.3g} | "
                     f"{c['param_max_abs_diff']:.3g} ({c['param_max_abs']:.3g}) | "
                     f"{'yes' if c['bitwise'] else 'no'} | {notes} |")
    return lines


def machine(env: Env) -> str:
    text = f"burnish {env.backend_name} on " \
        f"{env.device.backend.describe_device(env.device) or env.device}"
    if env.torch is not None:
        where = env.torch.cuda.get_device_name() if env.torch_device == "cuda" else \
            platform.processor() or "the CPU"
        text += f"; torch {env.torch.__version__} on {env.torch_device} ({where})"
    return text + f"; {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="autodiff+cuda",
                        help="the burnish backend (autodiff+cuda; any name burnish.backend "
                             "takes, such as autodiff+fusion+cuda or autodiff+ndarray)")
    parser.add_argument("--models", nargs="+", choices=tuple(models.SPECS), metavar="NAME",
                        help="gpt resnet lstm mnist (the default on GPU backends), chargpt "
                             "mnist (the default on ndarray)")
    parser.add_argument("--steps", type=int, help="steps per timed block (20; --small: 3)")
    parser.add_argument("--repeat", type=int, help="timed blocks per mode; the best is kept "
                                                   "(3; --small: 2)")
    parser.add_argument("--small", action="store_true",
                        help="tiny sizes of every model: checks the script in seconds on a CPU")
    parser.add_argument("--threads", type=int,
                        help="torch's and NumPy's threads (default 2 on ndarray, else the "
                             "libraries' own)")
    parser.add_argument("--compile", action="store_true",
                        help='also torch.compile(mode="reduce-overhead")')
    parser.add_argument("--torch-attention", choices=("torch", "math"), default="torch",
                        help="torch's GPT attention: nn.TransformerEncoder's (fused "
                             "scaled_dot_product_attention; the default) or written out as "
                             "burnish's (math)")
    parser.add_argument("--causal-mask", choices=("flag", "tensor"), default="flag",
                        help="burnish's GPT attention: causal=True (the default; torch's side "
                             "passes is_causal=True) or a mask tensor from nn.causal_mask")
    parser.add_argument("--sizes", nargs="+", metavar="NAME=INT",
                        help="override sizes of the models run, e.g. --models gpt --sizes "
                             "seq=2048 batch=4")
    parser.add_argument("--autocast", choices=("bfloat16", "float16"),
                        help="mixed precision: the forward passes under burnish.autocast and "
                             "torch.autocast with this dtype (float32 weights; float16 without "
                             "loss scaling, as these steps do not overflow)")
    parser.add_argument("--no-torch", action="store_true", help="burnish alone")
    parser.add_argument("--queued", type=int, default=10,
                        help="captured steps queued behind the spin kernel for the GPU time")
    parser.add_argument("--check", action="store_true",
                        help="compare burnish eager and captured training instead of timing")
    parser.add_argument("--check-steps", type=int, help="steps of --check (100; --small: 10)")
    parser.add_argument("--kernels", type=int, default=0, metavar="N",
                        help="after timing, print each mode's N kernels that take the most GPU "
                             "time in a step (read through torch.profiler's CUDA tracing, "
                             "which sees every kernel of the process: burnish's too)")
    parser.add_argument("--trace", type=Path, metavar="DIR",
                        help="with --kernels: also write each mode's traced steps to DIR as a "
                             "Chrome trace (every launch with its grid and duration)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the table too")
    args = parser.parse_args(argv)
    args.steps = args.steps or (3 if args.small else 20)
    args.repeat = args.repeat or (2 if args.small else 3)
    args.check_steps = args.check_steps or (10 if args.small else 100)

    env = Env(args)
    names = args.models or (CPU_MODELS if env.cpu else GPU_MODELS)
    print(f"bench_train: {machine(env)}", file=sys.stderr)
    results, checks = [], []
    for name in names:
        spec = models.SPECS[name]
        sizes = dict(spec.small if args.small else spec.full)
        for name_value in args.sizes or ():
            key, _, value = name_value.partition("=")
            if key not in sizes or not value.isdigit():
                sys.exit(f"bench_train: --sizes takes NAME=INT with NAME one of {name}'s "
                         f"sizes ({', '.join(sizes)}), got {name_value!r}")
            sizes[key] = int(value)
        print(f"bench_train: {name} ...", file=sys.stderr, flush=True)
        if args.check:
            try:
                checks.append(check(env, spec, sizes))
            except Exception as error:
                traceback.print_exc()
                checks.append({"model": name, "error": describe(error)})
            continue
        runs = build(env, spec, sizes)
        measure(env, runs)
        if args.kernels:
            for run in runs:
                print_kernels(env, name, run, args.kernels)
        params = None
        if name == "chargpt" and env.torch is not None:
            params = sum(p.numel() for p in models.torch_model(env.torch, name, sizes)
                         .parameters())
        results.append({"model": name, "title": title(spec, sizes, params), "sizes": sizes,
                        "runs": [{"mode": r.mode, "figures": r.figures, "notes": r.notes}
                                 for r in runs]})
        for r in runs:
            print(f"  {name:<8} {r.mode:<17} {fmt(r.figures.get('steps_per_s')):>8} steps/s "
                  f"{r.figures.get('error', '')}", file=sys.stderr, flush=True)
        del runs
        env.release()

    lines = markdown_checks(checks) if args.check else markdown_runs(results)
    lines += ["", f"machine: {machine(env)}; {args.steps} steps a block, best of "
              f"{args.repeat} blocks; TF32: {env.settings['tf32']}; threads: "
              f"{env.settings['threads']}; autocast: {args.autocast or 'off'}"]
    lines += [f"- {r['model']}: {r['title']}" for r in results]
    lines += [f"- note: {note}" for note in env.notes]
    table = "\n".join(lines)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                  "command": " ".join(["python", *sys.argv]), "machine": machine(env),
                  "settings": env.settings, "notes": env.notes, "steps": args.steps,
                  "repeat": args.repeat, "results": results, "checks": checks,
                  "burnish": burnish.__version__,
                  "torch": None if env.torch is None else env.torch.__version__}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
