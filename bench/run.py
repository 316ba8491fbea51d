"""Runs burnish's benchmarks beside NumPy (and PyTorch when installed) and prints a Markdown table.

    python bench/run.py                          # every benchmark, on ndarray
    python bench/run.py matmul conv2d --repeat 7 --json out.json --markdown table.md
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_autodiff
import bench_conv
import bench_dispatch
import bench_elementwise
import bench_learner
import bench_loader
import bench_matmul
import bench_mlp_train
import bench_reduction
import numpy as np
from context import Context
from timing import Case, measure

import burnish

BENCHMARKS = {
    "dispatch": bench_dispatch,
    "elementwise": bench_elementwise,
    "reduction": bench_reduction,
    "matmul": bench_matmul,
    "conv2d": bench_conv,
    "autodiff": bench_autodiff,
    "mlp_train": bench_mlp_train,
    "learner": bench_learner,
    "loader": bench_loader,
}
#: Implementations: burnish on the backend under test, NumPy, PyTorch, and for the autodiff
#: cases burnish on the plain backend the autodiff one wraps ("plain"); for the training cases a
#: plain loop instead of the Learner ("loop") and an epoch on pre-made batches ("premade").
COLUMNS = {"burnish": "burnish", "plain": "burnish, no autodiff", "numpy": "NumPy",
           "torch": "PyTorch", "loop": "plain loop", "premade": "pre-made batches"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", metavar="BENCHMARK",
                        help=f"which to run (default: all): {', '.join(BENCHMARKS)}")
    parser.add_argument("--backend", default="ndarray", help="the burnish backend (ndarray)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="timed runs per measurement; the best is kept (5)")
    parser.add_argument("--min-time", type=float, default=0.2,
                        help="seconds each timed run lasts at least, by looping (0.2)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, metavar="PATH",
                        help="write the Markdown table to a file too")
    torch_choice = parser.add_mutually_exclusive_group()
    torch_choice.add_argument("--torch", action="store_true", default=None,
                              help="compare with PyTorch, which must be installed "
                                   "(default: compare when it is installed)")
    torch_choice.add_argument("--no-torch", dest="torch", action="store_false",
                              help="do not compare with PyTorch")
    parser.add_argument("--torch-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.benchmarks) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    names = args.benchmarks or list(BENCHMARKS)
    with_torch = args.torch is True or (
        args.torch is None and importlib.util.find_spec("torch") is not None
    )

    if args.torch_only:
        ctx = Context.make(args.backend, with_torch=True)
        done = run_cases(names, ctx, {"torch"}, args)
    else:
        ctx = Context.make(args.backend, with_torch=False)
        done = run_cases(names, ctx, {"burnish", "plain", "numpy", "loop", "premade"}, args)
        if with_torch:
            add_torch(done, names, args)

    if args.json:
        args.json.write_text(json.dumps(report(done, ctx, args), indent=2) + "\n")
    if args.torch_only:
        return 0
    table = markdown(done, ctx)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0


def run_cases(names: list[str], ctx: Context, implementations: set[str],
              args: argparse.Namespace) -> list[Case]:
    """Every case of the named benchmarks, measured for the given implementations."""
    done = []
    for name in names:
        for case in BENCHMARKS[name].cases(ctx):
            runs = {impl: run for impl, run in case.runs.items() if impl in implementations}
            case.seconds, case.loops = measure(runs, args.repeat, args.min_time)
            for impl, seconds in case.seconds.items():
                print(f"{case.benchmark:<12} {case.name:<44} {impl:<8} {show(seconds):>10}",
                      file=sys.stderr, flush=True)
            case.runs.clear()  # let the inputs go before the next case allocates its own
            done.append(case)
    return done


def add_torch(done: list[Case], names: list[str], args: argparse.Namespace) -> None:
    """Measure PyTorch in a process of its own and add its times to ``done``.

    PyTorch's OpenMP threads and NumPy's OpenBLAS threads both wait for work by spinning for a
    while after each call; in one process, on few cores, each steals the other's cores and the
    times come out up to three times too slow, in either direction.
    """
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "torch.json"
        command = [sys.executable, __file__, *names, "--torch-only", "--json", str(out),
                   "--backend", args.backend, "--repeat", str(args.repeat),
                   "--min-time", str(args.min_time)]
        subprocess.run(command, check=True)
        results = json.loads(out.read_text())["results"]
    by_case = {(r["benchmark"], r["case"]): r for r in results}
    for case in done:
        found = by_case.get((case.benchmark, case.name))
        if found and "torch" in found["seconds"]:
            case.seconds["torch"] = found["seconds"]["torch"]
            case.loops["torch"] = found["loops"]["torch"]


def show(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits or so."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def markdown(cases: list[Case], ctx: Context) -> str:
    impls = [i for i in COLUMNS if any(i in c.seconds for c in cases)]
    header = ["benchmark", "case", *(COLUMNS[i] for i in impls), "burnish / NumPy", "goal", "met"]
    rows = [header]
    for case in cases:
        times = case.seconds
        ratio = f"{times['burnish'] / times['numpy']:.2f}x" if "numpy" in times else "-"
        met = {None: "", True: "yes", False: "**no**"}[case.goal_met()]
        goal = case.goal or case.note
        rows.append([case.benchmark, case.name, *(show(times[i]) if i in times else "-"
                                                  for i in impls), ratio, goal, met])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    rows.insert(1, ["-" * w for w in widths])
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    footer = f"\nbackend: {ctx.backend.name} on {ctx.device}; best of the repeats, per call."
    return "\n".join(lines) + footer


def machine() -> dict[str, object]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "system": platform.platform(),
            "python": platform.python_version()}


def report(cases: list[Case], ctx: Context, args: argparse.Namespace) -> dict[str, object]:
    versions = {"burnish": burnish.__version__, "numpy": np.__version__}
    if any("torch" in c.seconds for c in cases):
        versions["torch"] = importlib.metadata.version("torch")
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(),
        "versions": versions,
        "backend": ctx.backend.name,
        "repeat": args.repeat,
        "min_time": args.min_time,
        "results": [
            {"benchmark": c.benchmark, "case": c.name, "seconds": c.seconds, "loops": c.loops,
             "goal": c.goal, "met": c.goal_met(), "note": c.note}
            for c in cases
        ],
    }


if __name__ == "__main__":
    sys.exit(main())
