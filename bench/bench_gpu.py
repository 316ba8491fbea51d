"""The GPU backends beside CuPy on one GPU: bandwidth, matmul, and the cost of one tiny op.

    python bench/bench_gpu.py                               # wgpu, rocm and CuPy, full sizes
    python bench/bench_gpu.py --quick                       # small sizes (a CPU driver, a check)
    python bench/bench_gpu.py --backends rocm --json out.json --markdown table.md

For each backend (and CuPy, when it is installed and sees a GPU), in one process:

- **copy**: the device-to-device copy rate of a 64M-element float32 buffer (bytes read and
  written per second: 2 x 256 MiB / time) through the backend's own buffer copy; CuPy's is
  ``cudaMemcpyAsync`` device to device, the reference rate of the GPU.
- **add**: ``a + b`` on 64M-element float32 tensors through ``Tensor``: 3 x 4 x 64M bytes moved
  per call, against both copy rates (goal: 70% of the copy rate or more).
- **matmul**: 4096 x 4096 float32 ``a @ b`` through ``Tensor``, in TFLOP/s (2 n^3 per call),
  against cuBLAS through CuPy (goal: 40% of cuBLAS or more).
- **tiny op**: ``a + b`` on 4-element tensors, the launch and framework overhead: N calls, then
  one read, divided by N.

GPU work is asynchronous: every timed run enqueues its calls and then waits for the device
(``backend.sync``, CuPy's stream synchronize) before the clock stops; the first call, which
compiles kernels and tunes the matmul, is not timed. Per case, the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import burnish
from burnish import Tensor

FULL = {"elements": 64 * 1024 * 1024, "matmul": 4096, "tiny_ops": 2000, "loops": 20}
QUICK = {"elements": 1024 * 1024, "matmul": 256, "tiny_ops": 200, "loops": 3}
#: Goals of issue 6, for the GPU machine.
ADD_GOAL = 0.70
MATMUL_GOAL = 0.40


def best_seconds(run: Callable[[], object], sync: Callable[[], None], loops: int,
                 repeat: int) -> float:
    """Seconds per call of ``run``: ``loops`` calls then one ``sync``, best of ``repeat``,
    after one untimed call (compiling, tuning, allocating)."""
    run()
    sync()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            run()
        sync()
        best = min(best, (time.perf_counter() - start) / loops)
    return best


def measure_backend(name: str, sizes: dict[str, int], repeat: int) -> dict[str, object]:
    """Copy, add, matmul and tiny-op figures of burnish backend ``name`` on its default device."""
    backend = burnish.backend(name)
    device = backend.default_device()
    runtime = backend.runtime(device)

    def sync():
        backend.sync(device)

    def bandwidth() -> tuple[float, float]:
        rng = np.random.default_rng(0)
        a = Tensor.from_data(rng.random(sizes["elements"], dtype=np.float32), device=device)
        b = Tensor.from_data(rng.random(sizes["elements"], dtype=np.float32), device=device)
        out = Tensor.empty([sizes["elements"]], device=device)
        nbytes = 4 * sizes["elements"]

        def copy():
            runtime.copy(a.primitive.buffer.handle, 0, out.primitive.buffer.handle, 0, nbytes)

        copy_s = best_seconds(copy, sync, sizes["loops"], repeat)
        np.testing.assert_array_equal(out[:8].to_numpy(), a[:8].to_numpy())
        return copy_s, best_seconds(lambda: a + b, sync, sizes["loops"], repeat)

    def matmul() -> float:
        rng = np.random.default_rng(0)
        m = sizes["matmul"]
        x = Tensor.from_data(rng.standard_normal((m, m), dtype=np.float32), device=device)
        y = Tensor.from_data(rng.standard_normal((m, m), dtype=np.float32), device=device)
        np.testing.assert_allclose((x @ y)[:4, :4].to_numpy(),
                                   x[:4].to_numpy() @ y[:, :4].to_numpy(), rtol=1e-3, atol=1e-3)
        return best_seconds(lambda: x @ y, sync, max(sizes["loops"] // 4, 2), repeat)

    def tiny() -> float:
        p = Tensor.from_data(np.ones(4, np.float32), device=device)
        q = Tensor.from_data(np.ones(4, np.float32), device=device)
        return best_seconds(lambda: p + q, lambda: (p + q).to_numpy(), sizes["tiny_ops"], repeat)

    copy_s, add_s = bandwidth()
    return figures(f"{device} ({backend.describe_device(device)})", sizes, copy_s, add_s,
                   matmul(), tiny())


def figures(device: str, sizes: dict[str, int], copy_s: float, add_s: float, matmul_s: float,
            tiny_s: float) -> dict[str, object]:
    """The measured seconds and the rates they give."""
    nbytes, m = 4 * sizes["elements"], sizes["matmul"]
    return {
        "device": device,
        "copy_s": copy_s, "copy_gbps": 2 * nbytes / copy_s / 1e9,
        "add_s": add_s, "add_gbps": 3 * nbytes / add_s / 1e9,
        "matmul_s": matmul_s, "matmul_tflops": 2 * m**3 / matmul_s / 1e12,
        "tiny_op_us": tiny_s * 1e6,
    }


def measure_cupy(sizes: dict[str, int], repeat: int) -> dict[str, object] | None:
    """The same figures through CuPy (cudaMemcpy, its elementwise add, cuBLAS), or None when
    CuPy is missing or sees no GPU."""
    try:
        import cupy
    except ImportError:
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return None
    except cupy.cuda.runtime.CUDARuntimeError:
        return None
    stream = cupy.cuda.get_current_stream()
    rng = cupy.random.default_rng(0)

    def bandwidth() -> tuple[float, float]:
        a = rng.random(sizes["elements"], dtype=cupy.float32)
        b = rng.random(sizes["elements"], dtype=cupy.float32)
        out = cupy.empty_like(a)
        copy_s = best_seconds(lambda: out.data.copy_from_device_async(a.data, a.nbytes, stream),
                              stream.synchronize, sizes["loops"], repeat)
        return copy_s, best_seconds(lambda: a + b, stream.synchronize, sizes["loops"], repeat)

    def matmul() -> float:
        m = sizes["matmul"]
        x = rng.standard_normal((m, m), dtype=cupy.float32)
        y = rng.standard_normal((m, m), dtype=cupy.float32)
        return best_seconds(lambda: x @ y, stream.synchronize, max(sizes["loops"] // 4, 2),
                            repeat)

    def tiny() -> float:
        p, q = cupy.ones(4, cupy.float32), cupy.ones(4, cupy.float32)
        return best_seconds(lambda: p + q, lambda: cupy.asnumpy(p + q), sizes["tiny_ops"],
                            repeat)

    copy_s, add_s = bandwidth()
    index = cupy.cuda.Device().id
    name = cupy.cuda.runtime.getDeviceProperties(index)["name"].decode()
    return figures(f"cuda:{index} ({name})", sizes, copy_s, add_s, matmul(), tiny())


def judge(results: dict[str, dict]) -> None:
    """Add the ratios and goals to each backend's figures (CuPy's copy rate and cuBLAS are the
    references when CuPy ran; otherwise the backend's own copy rate)."""
    cupy = results.get("cupy")
    for name, r in results.items():
        if "error" in r:
            continue
        r["add_over_copy"] = r["add_gbps"] / r["copy_gbps"]
        if cupy is not None:
            r["add_over_cupy_copy"] = r["add_gbps"] / cupy["copy_gbps"]
            r["matmul_over_cublas"] = r["matmul_tflops"] / cupy["matmul_tflops"]
        if name == "cupy":
            continue
        reference = r.get("add_over_cupy_copy", r["add_over_copy"])
        r["add_goal_met"] = reference >= ADD_GOAL
        if "matmul_over_cublas" in r:
            r["matmul_goal_met"] = r["matmul_over_cublas"] >= MATMUL_GOAL


def markdown(results: dict[str, dict], sizes: dict[str, int]) -> str:
    n, m = sizes["elements"], sizes["matmul"]
    header = ["backend", "device", "copy GB/s", f"add {n // 2**20}M GB/s", "add / own copy",
              "add / CuPy copy", f"matmul {m} TFLOP/s", "matmul / cuBLAS", "tiny op µs",
              "goals (add 70%, matmul 40%)"]
    rows = [header]
    for name, r in results.items():
        if "error" in r:
            rows.append([name, r["error"]] + [""] * (len(header) - 2))
            continue

        def ratio(key: str, r: dict = r) -> str:
            return f"{r[key]:.0%}" if key in r else "-"

        goals = []
        for key, label in (("add_goal_met", "add"), ("matmul_goal_met", "matmul")):
            if key in r:
                goals.append(f"{label} {'met' if r[key] else '**not met**'}")
        rows.append([name, r["device"], f"{r['copy_gbps']:.1f}", f"{r['add_gbps']:.1f}",
                     ratio("add_over_copy"), ratio("add_over_cupy_copy"),
                     f"{r['matmul_tflops']:.3g}", ratio("matmul_over_cublas"),
                     f"{r['tiny_op_us']:.1f}", ", ".join(goals)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    rows.insert(1, ["-" * w for w in widths])
    return "\n".join("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"
                     for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["wgpu", "rocm"],
                        help="burnish backends to measure (wgpu rocm)")
    parser.add_argument("--quick", action="store_true",
                        help=f"small sizes ({QUICK['elements'] // 2**20}M elements, "
                             f"{QUICK['matmul']} matmul): a check on a CPU driver")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case (5)")
    parser.add_argument("--no-cupy", action="store_true", help="leave CuPy out")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results as JSON")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the table too")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL

    results: dict[str, dict] = {}
    if not args.no_cupy:
        found = measure_cupy(sizes, args.repeat)
        if found is not None:
            results["cupy"] = found
            print(f"cupy  {found}", file=sys.stderr, flush=True)
    for name in args.backends:
        try:
            results[name] = measure_backend(name, sizes, args.repeat)
        except burnish.BurnishError as error:  # not installed, no device: say so, go on
            results[name] = {"error": f"{type(error).__name__}: {error}"}
        print(f"{name:<5} {results[name]}", file=sys.stderr, flush=True)
    judge(results)

    table = markdown(results, sizes)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        report = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(["python", *sys.argv]),
            "machine": {"cpu": platform.processor() or "unknown", "cores": os.cpu_count(),
                        "system": platform.platform(), "python": platform.python_version()},
            "versions": {"burnish": burnish.__version__, "numpy": np.__version__},
            "sizes": sizes,
            "repeat": args.repeat,
            "goals": {"add_over_copy": ADD_GOAL, "matmul_over_cublas": MATMUL_GOAL},
            "results": results,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
