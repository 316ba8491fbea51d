"""Issue 8's measurements: burnish.fusion against a hand-written fused CuPy kernel and PyTorch.

    python bench/bench_fusion.py --json bench/results/fusion.json --markdown fusion.md
    python bench/bench_fusion.py --backends wgpu          # fusion+wgpu only (any WebGPU GPU)
    python bench/bench_fusion.py --quick                  # small sizes: a check of the script

The cases:

- **gelu**: ``x * (erf(x / sqrt(2)) + 1) / 2`` written with tensor ops on 64M float32 elements,
  GB/s counted as 2 x 256 MiB per call (what one fused kernel moves), on ``fusion+<backend>``
  and unfused ``<backend>`` for each backend of ``--backends``, beside a hand-written CuPy
  ``ElementwiseKernel`` computing the same expression and PyTorch eager running the same tensor
  expression. Goals: on fusion+cuda and fusion+wgpu, at least 90% of the CuPy kernel and faster
  than PyTorch eager.
- **compile**: the first call of the fused GELU (recording, code generation, compilation,
  launch, wait) on a shape and structure never seen by the process, against a steady-state
  call. CuPy's on-disk kernel cache is pointed at an empty folder first, so NVRTC compiles
  for real.
- **mlp_train**: bench_cuda.py's MLP training step (784-512-512-10, Adam, batch 1024) on
  ``autodiff+fusion+cuda`` and on ``autodiff+cuda``, beside torch eager. Goal: fusion faster.

Timing is bench_cuda.py's: implementations take turns, best of ``--repeat`` runs of at least
``--min-time`` seconds, each ending with one wait for the device.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

# Before CuPy is imported anywhere: compile for real in the compile case.
os.environ.setdefault("CUPY_CACHE_DIR", tempfile.mkdtemp(prefix="burnish-bench-cupy-"))

import numpy as np  # noqa: E402
from bench_cuda import (  # noqa: E402
    Env,
    Impl,
    Result,
    case_mlp_train,
    compare,
    copy_rates,
    describe,
    markdown,
    measure,
    prepare,
    report,
)

import burnish  # noqa: E402
from burnish import Tensor  # noqa: E402
from burnish.fusion import flush  # noqa: E402

ROOT2 = math.sqrt(2.0)
CUPY_GELU = ("float32 x", "float32 y",
             "y = x * (erff(x * 0.70710678118654752f) + 1.0f) * 0.5f", "burnish_bench_gelu")


def gelu(x: Tensor) -> Tensor:
    return x * ((x / ROOT2).erf() + 1.0) / 2.0


def usable(name: str) -> burnish.Device | None:
    try:
        device = burnish.backend(name).default_device()
        Tensor.from_data(np.zeros(4, np.float32), device).to_numpy()
        return device
    except Exception as error:
        print(f"bench_fusion: {name} is not usable here: {describe(error)}", file=sys.stderr)
        return None


def case_gelu(env: Env, backends: list[str], n: int) -> Result:
    values = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    result = Result("gelu", f"x * (erf(x / sqrt(2)) + 1) / 2, {n // 2**20}M float32, tensor "
                    f"ops (2 x {n * 4 // 2**20} MiB per call)", "GB/s", "", "")
    impls: dict[str, Impl] = {}
    for backend in backends:
        for name in (f"fusion+{backend}", backend):
            device = usable(name)
            if device is None:
                continue

            def ours(device=device, name=name) -> Impl:
                x = Tensor.from_data(values, device)
                if not name.startswith("fusion+"):
                    return Impl(lambda: gelu(x), lambda: device.backend.sync(device))

                def run() -> Tensor:
                    # A result nobody keeps is never computed under fusion: keep it until
                    # its kernel is enqueued, as an eager backend would run it.
                    y = gelu(x)
                    flush(device)
                    return y

                return Impl(run, lambda: device.backend.sync(device))

            prepare(impls, result, f"burnish {name}", ours)
    if env.cupy is not None:
        cupy = env.cupy

        def hand_written() -> Impl:
            kernel = cupy.ElementwiseKernel(*CUPY_GELU)
            x, y = cupy.asarray(values), cupy.empty(n, cupy.float32)
            return Impl(lambda: kernel(x, y), cupy.cuda.get_current_stream().synchronize)

        prepare(impls, result, "cupy ElementwiseKernel", hand_written)
    if env.torch is not None:
        torch = env.torch

        def eager() -> Impl:
            x = env.torch_tensor(values)
            return Impl(lambda: x * (torch.erf(x / ROOT2) + 1) / 2, env.torch_sync())

        prepare(impls, result, env.torch_label, eager)
        fused = next((k for k in impls if k.startswith("burnish fusion+")), None)
        if fused is not None:
            device = burnish.backend(fused.split()[1]).default_device()
            compare(result, lambda: gelu(Tensor.from_data(values[:4096], device)).to_numpy(),
                    lambda: (lambda x: x * (torch.erf(x / ROOT2) + 1) / 2)(
                        env.torch_tensor(values[:4096])).cpu().numpy(), 1e-5)
    measure(impls, result, env.args.min_time, env.args.repeat)
    result.values = {name: 2 * 4 * n / s / 1e9 for name, s in result.seconds.items()}
    for name, rate in copy_rates(env, n).items():
        result.references[f"copy ({name})"] = f"{rate / 1e9:.0f} GB/s"
    kernel = result.values.get("cupy ElementwiseKernel")
    eager_rate = result.values.get(env.torch_label)
    verdicts = []
    for backend in backends:
        mine = result.values.get(f"burnish fusion+{backend}")
        if mine is None:
            continue
        if kernel:
            result.references[f"fusion+{backend} / CuPy kernel"] = f"{mine / kernel:.0%}"
            verdicts.append(mine >= 0.9 * kernel)
        if eager_rate:
            result.references[f"fusion+{backend} / torch eager"] = f"{mine / eager_rate:.2f}x"
            verdicts.append(mine > eager_rate)
    result.goal = ">= 90% of the hand-written CuPy kernel and faster than torch eager"
    result.met = all(verdicts) if verdicts else None
    return result


def case_compile(env: Env, backends: list[str], n: int) -> Result:
    result = Result("compile", f"fused GELU on {n // 2**20}M float32: first call (record, "
                    "generate, compile, launch, wait) vs a steady-state call", "ms", "", "-",
                    lower=True)
    values = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    for backend in backends:
        name = f"fusion+{backend}"
        device = usable(name)
        if device is None:
            continue
        x = Tensor.from_data(values, device)
        device.backend.sync(device)
        # A structure no other case made: GELU then a scale.
        start = time.perf_counter()
        (gelu(x) * 1.5).to_data()
        first = time.perf_counter() - start
        steady = math.inf
        for _ in range(10):
            start = time.perf_counter()
            y = gelu(x) * 1.5
            device.backend.sync(device)
            steady = min(steady, time.perf_counter() - start)
            del y
        result.values[f"burnish {name} first call"] = first * 1e3
        result.values[f"burnish {name} steady state"] = steady * 1e3
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["cuda", "wgpu"],
                        help="inner backends to fuse (cuda wgpu)")
    parser.add_argument("--only", nargs="+", choices=("gelu", "compile", "mlp_train"))
    parser.add_argument("--quick", action="store_true", help="small sizes: checks the script")
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--min-time", type=float)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (2 if args.quick else 5)
    args.min_time = args.min_time or (0.02 if args.quick else 0.2)
    args.tf32, args.resnet_input = False, None
    args.backend = "cuda" if "cuda" in args.backends else args.backends[0]
    env = Env(args)
    n = env.sizes["elements"]
    command = "python bench/bench_fusion.py --backends " + " ".join(args.backends)
    results = []
    for case in args.only or ("compile", "gelu", "mlp_train"):
        print(f"bench_fusion: {case} ...", file=sys.stderr, flush=True)
        if case == "compile":
            found = [case_compile(env, args.backends, n)]
        elif case == "gelu":
            found = [case_gelu(env, args.backends, n)]
        else:
            # Both take turns with torch in one measurement: the host's speed drifts.
            base = "cuda" if "cuda" in args.backends else args.backends[0]
            args.backend = f"fusion+{base}"
            found = case_mlp_train(Env(args), also=(f"autodiff+{base}",))
            mine = [found[0].values.get(f"burnish autodiff+{b}") for b in (args.backend, base)]
            if None not in mine:
                found[0].goal = f"autodiff+fusion+{base} faster than autodiff+{base}"
                found[0].met = mine[0] > mine[1]
                found[0].references["fusion / unfused"] = f"{mine[0] / mine[1]:.2f}x"
        for r in found:
            r.command = f"{command} --only {case}" + (" --quick" if args.quick else "")
            results.append(r)
        env.release()
    table = markdown(results, env)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        import json

        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report(results, env), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
