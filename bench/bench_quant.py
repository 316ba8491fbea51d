"""Quantized matmul on the CPU (ndarray and cpu): the ways to multiply int8 matrices with NumPy,
and burnish's, against a float32 NumPy product of the same size; and on an NVIDIA GPU (cuda):
an int8 linear layer against burnish's float16 one and PyTorch's.

    python bench/bench_quant.py                 # 1024 x 1024 @ 1024 x 1024, 2 threads
    python bench/bench_quant.py --size 512 --repeat 5 --threads 1
    python bench/bench_quant.py --backends cuda # batch 256 x 4096 @ 4096 x 4096 on the GPU
    python bench/bench_quant.py --backends wgpu,rocm --batch 256 --features 4096

On cuda (``--backends cuda``, alone or beside CPU backends) the rows are a linear layer of
``--features`` inputs and outputs on a batch of ``--batch`` rows, no bias:

- burnish float16 ``x @ w`` (cuBLAS, float32 accumulation): the goal's reference (issue 26:
  int8 at least 1.5x burnish's own float16 speed);
- burnish ``qx @ qw``, both int8 (activations per tensor, weights per output column, symmetric):
  cuBLAS's int8 product and the epilogue kernel, the weights packed at the first call;
- burnish's quantized linear layer from float16 activations: the per-tensor scale (one
  kernel), quantize (one kernel), then ``qx @ qw``;
- PyTorch ``torch._int_mm`` (int8 x int8 -> int32, no scaling; the weights stored ``[N, K]``,
  its fast layout) and float16 ``F.linear``, on the same GPU in the same run, where PyTorch is
  installed.

Each is run ``--iterations`` times back to back between two device synchronisations (what an
eager program pays: launches, host work and kernels); the best of ``--repeat`` such runs,
divided by the iterations, is reported. Beside it, the GPU's time alone: the same calls queued
behind a kernel that holds the stream while the host enqueues them, timed by CUDA events.

On wgpu and rocm (``--backends wgpu`` or ``rocm``: burnish.jit's generated kernels, on any
GPU their drivers find) the rows are the same linear layer, with float32 as the reference
(float16 beside it where the device has it):

- burnish float32 ``x @ w`` (burnish.jit's tiled float product);
- burnish ``qx @ qw``, both int8 (``burnish.jit.kernels.quant``: the activations packed into
  words of four bytes, the weights packed at the first call, dot products of four bytes a
  word, zero points and scales in the product's epilogue);
- burnish ``x @ qw`` (float activations, int8 weights: the protocol's default, dequantize then
  the float product);
- burnish's quantized linear layer from float32 activations (scale, quantize, ``qx @ qw``).

Each is run ``--iterations`` times between two synchronisations, the best of ``--repeat``.

The ways measured, each on the same int8 operands (activations per tensor, weights per output
column, symmetric), with what it computes:

- NumPy float32 ``x @ w``: the goal's reference (issue 26: int8 matmul at least 1.0x its speed).
- NumPy int32 matmul of the int8 values: exact, but NumPy's integer matmul has no BLAS.
- dequantize, then float32 BLAS: ``(qx * sx) @ (qw * sw)``.
- the integers through float32 BLAS: ``(qx @ qw) * sx * sw`` with the int8 values as float32,
  exact while a dot product stays below 2^24 (1040 terms of int8).
- burnish on ndarray: ``qx @ qw`` of two QuantizedTensors (the integers through float32 BLAS,
  inner dims cut into exact chunks), ``x @ qw`` (float activations, the protocol's default:
  dequantize, then BLAS), and a quantized linear layer's whole forward (quantize the
  activations, then the product).
- burnish on cpu: float32 ``x @ w`` (NumPy's BLAS on burnish's threads), ``qx @ qw`` through
  the compiled int8 kernel (``burnish.cpu.int8_gemm``: AVX-512 VNNI where the CPU has it; the
  weights packed at the first call, as a quantized layer's are), and the quantized linear layer.

NumPy's BLAS and burnish's OpenMP kernels both run on ``--threads`` threads (threadpoolctl and
``OMP_NUM_THREADS``). Times are the best of ``--repeat`` runs (timeit's way, implementations
taking turns); the integer NumPy product, seconds long, runs once.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from timing import measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--skip-int-numpy", action="store_true",
                        help="skip NumPy's integer matmul (seconds per call)")
    parser.add_argument("--threads", type=int, default=2,
                        help="threads of NumPy's BLAS and of burnish's kernels")
    parser.add_argument("--backends", default="ndarray,cpu",
                        help="burnish backends to measure, comma-separated")
    parser.add_argument("--batch", type=int, default=256, help="rows of the cuda linear layer")
    parser.add_argument("--features", type=int, default=4096,
                        help="inputs and outputs of the cuda linear layer")
    parser.add_argument("--iterations", type=int, default=50,
                        help="cuda: calls between two synchronisations")
    parser.add_argument("--capped", action="store_true",
                        help="also time cpu's int8 kernel built for AVX2 and for portable C "
                             "(what CPUs without AVX-512 VNNI run), on the same integers")
    args = parser.parse_args()
    names = [name for name in args.backends.split(",") if name]
    if "cuda" in names:
        run_cuda(args)
        names.remove("cuda")
    for name in JIT_BACKENDS:
        if name in names:
            run_jit(args, name)
            names.remove(name)
    if not names:
        return
    args.backends = ",".join(names)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before burnish loads OpenMP
    from threadpoolctl import threadpool_limits

    with threadpool_limits(args.threads, user_api="blas"):
        run(args)


INT_MM = "PyTorch torch._int_mm (int8 x int8 -> int32, weights [N, K])"
#: Holds a stream for about as many clock cycles as its argument, so that the calls enqueued
#: behind it are timed on the GPU alone (their host work done while it spins).
SPIN = r'''extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}'''


def run_cuda(args: argparse.Namespace) -> None:
    """The int8 linear layer on cuda against float16, burnish's and PyTorch's."""
    import burnish as bn
    from burnish.errors import UnsupportedError
    from burnish.quantization import PerChannel, QuantScheme, linear

    try:
        device = bn.backend("cuda").default_device()
    except UnsupportedError as error:
        print(f"cuda rows skipped: {error}")
        return
    import cupy as cp

    m, n = args.batch, args.features
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, n), dtype=np.float32)
    w = rng.standard_normal((n, n), dtype=np.float32) / np.sqrt(n)
    x16 = bn.Tensor.from_data(x, device).cast(bn.float16)
    w16 = bn.Tensor.from_data(w, device).cast(bn.float16)
    activations = QuantScheme()
    qx = bn.Tensor.from_data(x, device).quantize(activations)
    qw = bn.Tensor.from_data(w, device).quantize(QuantScheme(granularity=PerChannel(1)))

    def synchronize() -> None:
        cp.cuda.runtime.deviceSynchronize()

    runs: dict[str, Callable[[], object]] = {
        "burnish float16 x @ w": lambda: x16 @ w16,
        "burnish qx @ qw (both int8)": lambda: qx @ qw,
        "burnish quantized linear from float16 x (scale, quantize, qx @ qw)":
            lambda: linear(x16.quantize(activations), qw),
    }
    x8, w8 = qx.values.to_numpy(), qw.values.to_numpy()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("PyTorch is not installed: its rows are left out")
        torch = None
    if torch is not None and torch.cuda.is_available():
        tx8 = torch.from_numpy(x8).cuda()
        # The weights stored [N, K], as F.linear keeps them: _int_mm then reads both operands
        # along K (cuBLAS's "TN" int8 layout); from a [K, N] row-major operand it runs several
        # times slower.
        tw8 = torch.from_numpy(np.ascontiguousarray(w8.T)).cuda().t()
        tx16 = torch.from_numpy(x).cuda().half()
        tw16 = torch.from_numpy(np.ascontiguousarray(w.T)).cuda().half()  # F.linear's [out, in]
        runs[INT_MM] = lambda: torch._int_mm(tx8, tw8)
        runs["PyTorch float16 F.linear"] = lambda: F.linear(tx16, tw16)

        def synchronize() -> None:  # noqa: F811 (both libraries' streams)
            torch.cuda.synchronize()
            cp.cuda.runtime.deviceSynchronize()

    burnish_stream = qx.values.primitive.runtime.stream
    spin = cp.RawKernel(SPIN, "spin")

    def gpu_seconds(fn: Callable[[], object], stream: Any) -> float:
        """Per call, the GPU's time alone: the calls queue behind a spinning kernel."""
        start, end = cp.cuda.Event(), cp.cuda.Event()
        with stream:
            spin((1,), (1,), (np.int64(100_000_000),))
        start.record(stream)
        for _ in range(args.iterations):
            fn()
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / 1e3 / args.iterations

    seconds: dict[str, float] = {}
    gpu: dict[str, float] = {}
    for name, fn in runs.items():
        for _ in range(3):  # compile, pack the weights, let cuBLAS pick its kernels
            fn()
        synchronize()
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            for _ in range(args.iterations):
                fn()
            synchronize()
            best = min(best, (time.perf_counter() - started) / args.iterations)
        seconds[name] = best
        if name.startswith("burnish"):
            stream = burnish_stream
        else:
            with warnings.catch_warnings():  # CuPy 14 prefers Stream.from_external; 13 lacks it
                warnings.simplefilter("ignore", DeprecationWarning)
                stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        gpu[name] = min(gpu_seconds(fn, stream) for _ in range(3))
        synchronize()

    exact = x8.astype(np.int64) @ w8.astype(np.int64)
    scaled = exact * (qx.scales.to_numpy().astype(np.float64) * qw.scales.to_numpy())
    got = (qx @ qw).to_numpy().astype(np.float64)
    print(f"burnish qx @ qw (cuda) against NumPy's exact integer product: max relative "
          f"difference {np.abs(got - scaled).max() / np.abs(scaled).max():.3g}")
    if torch is not None and INT_MM in runs:
        same = np.array_equal(torch._int_mm(tx8, tw8).cpu().numpy(), exact.astype(np.int32))
        print(f"PyTorch torch._int_mm equals NumPy's integer product: {same}")

    reference = seconds["burnish float16 x @ w"]
    flops = 2 * m * n * n
    print(f"\n{torch.cuda.get_device_name() if torch is not None else 'cuda'}: "
          f"[{m}, {n}] @ [{n}, {n}], best of {args.repeat} runs of {args.iterations} calls:\n")
    print("| implementation | us per call | speed vs burnish float16 | GPU us per call | "
          "GPU TFLOP/s (TOP/s for int8) |")
    print("|---|---:|---:|---:|---:|")
    for name, value in seconds.items():
        print(f"| {name} | {value * 1e6:.1f} | {reference / value:.2f}x | "
              f"{gpu[name] * 1e6:.1f} | {flops / gpu[name] / 1e12:.0f} |")
    speed = reference / seconds["burnish qx @ qw (both int8)"]
    on_gpu = gpu["burnish float16 x @ w"] / gpu["burnish qx @ qw (both int8)"]
    print(f"\ngoal (issue 26): int8 linear {m} x {n} x {n} on the GPU at least 1.5x burnish "
          f"float16: {speed:.2f}x per call, {on_gpu:.2f}x in GPU time alone, "
          f"{'met' if speed >= 1.5 else 'not met'}")


#: Backends whose rows are ``run_jit``'s: burnish.jit's generated kernels.
JIT_BACKENDS = ("wgpu", "rocm")


def run_jit(args: argparse.Namespace, name: str) -> None:
    """The int8 linear layer on a burnish.jit backend against its float products."""
    import burnish as bn
    from burnish.errors import UnsupportedError
    from burnish.quantization import PerChannel, QuantScheme, linear

    try:
        backend = bn.backend(name)
        device = backend.default_device()
    except (UnsupportedError, ImportError) as error:
        print(f"{name} rows skipped: {error}")
        return
    m, n = args.batch, args.features
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, n), dtype=np.float32)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    tx, tw = bn.Tensor.from_data(x, device), bn.Tensor.from_data(w, device)
    activations = QuantScheme()
    qx = tx.quantize(activations)
    qw = tw.quantize(QuantScheme(granularity=PerChannel(1)))
    runs: dict[str, Callable[[], object]] = {
        f"burnish float32 x @ w ({name})": lambda: tx @ tw,
        f"burnish qx @ qw ({name}, both int8)": lambda: qx @ qw,
        f"burnish x @ qw ({name}, int8 weights only: dequantize, then float32)":
            lambda: tx @ qw,
        f"burnish quantized linear ({name}): scale, quantize x, then qx @ qw":
            lambda: linear(tx.quantize(activations), qw),
    }
    if bn.float16 in backend.dtypes(device):
        x16, w16 = tx.cast(bn.float16), tw.cast(bn.float16)
        runs[f"burnish float16 x @ w ({name})"] = lambda: x16 @ w16

    seconds: dict[str, float] = {}
    for label, fn in runs.items():
        for _ in range(2):  # compile, tune, pack the weights
            fn()
        backend.sync(device)
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            for _ in range(args.iterations):
                fn()
            backend.sync(device)
            best = min(best, (time.perf_counter() - started) / args.iterations)
        seconds[label] = best

    x8, w8 = qx.values.to_numpy(), qw.values.to_numpy()
    exact = x8.astype(np.int64) @ w8.astype(np.int64)
    scaled = exact * (qx.scales.to_numpy().astype(np.float64) * qw.scales.to_numpy())
    got = (qx @ qw).to_numpy().astype(np.float64)
    print(f"burnish qx @ qw ({name}) against NumPy's exact integer product: max relative "
          f"difference {np.abs(got - scaled).max() / np.abs(scaled).max():.3g}")
    reference = seconds[f"burnish float32 x @ w ({name})"]
    flops = 2 * m * n * n
    print(f"\n{backend.describe_device(device)}: [{m}, {n}] @ [{n}, {n}], best of "
          f"{args.repeat} runs of {args.iterations} calls:\n")
    print("| implementation | us per call | speed vs burnish float32 | TFLOP/s (TOP/s for int8) |")
    print("|---|---:|---:|---:|")
    for label, value in seconds.items():
        print(f"| {label} | {value * 1e6:.1f} | {reference / value:.2f}x | "
              f"{flops / value / 1e12:.3f} |")


def run(args: argparse.Namespace) -> None:
    import burnish as bn
    from burnish.quantization import PerChannel, QuantScheme, linear

    n = args.size
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), dtype=np.float32)
    w = rng.standard_normal((n, n), dtype=np.float32)

    activations = QuantScheme()
    weights = QuantScheme(granularity=PerChannel(1))
    backends = [name for name in args.backends.split(",") if name]
    operands: dict[str, tuple[Any, Any, Any, Any]] = {}
    for name in backends:
        device = bn.backend(name).default_device()
        tx, tw = bn.Tensor.from_data(x, device), bn.Tensor.from_data(w, device)
        operands[name] = (tx, tw, tx.quantize(activations), tw.quantize(weights))
    tx, tw, qx, qw = operands[backends[0]]
    x8, w8 = qx.values.to_numpy(), qw.values.to_numpy()
    sx, sw = qx.scales.to_numpy(), qw.scales.to_numpy()

    runs: dict[str, Callable[[], object]] = {
        "NumPy float32 x @ w": lambda: x @ w,
        "NumPy: dequantize, then float32 BLAS":
            lambda: (x8.astype(np.float32) * sx) @ (w8.astype(np.float32) * sw),
        "NumPy: the integers through float32 BLAS":
            lambda: (x8.astype(np.float32) @ w8.astype(np.float32)) * (sx * sw),
    }
    for name, parts in operands.items():
        runs.update(_burnish_runs(name, *parts, activations, linear))
    if args.capped:
        runs.update(_capped_runs(x8, w8, sx, sw))
    seconds, _ = measure(runs, args.repeat, args.min_time)
    if not args.skip_int_numpy:
        started = time.perf_counter()
        exact = x8.astype(np.int32) @ w8.astype(np.int32)
        seconds["NumPy int32 matmul of the int8 values (one run)"] = \
            time.perf_counter() - started
        for name, (_, _, qx, qw) in operands.items():
            product = (qx @ qw).to_numpy().astype(np.float64)
            check = np.abs(product - exact * (sx * sw).astype(np.float64)).max()
            print(f"burnish qx @ qw ({name}) against NumPy's exact integer product: max "
                  f"difference {check:.3g} (float32 rounding of the scaled result)")
    reference = seconds["NumPy float32 x @ w"]
    threads = f"{args.threads} thread{'s' if args.threads != 1 else ''}"
    print(f"\n{n} x {n} @ {n} x {n}, best of {args.repeat}, {threads}:\n")
    print("| implementation | ms | speed vs NumPy float32 |")
    print("|---|---:|---:|")
    for name, value in seconds.items():
        print(f"| {name} | {value * 1e3:.2f} | {reference / value:.2f}x |")
    goal = "burnish qx @ qw (cpu, both int8)"
    if goal in seconds:
        speed = reference / seconds[goal]
        print(f"\ngoal (issue 26): int8 matmul {n}^2 on the CPU at least 1.0x NumPy float32: "
              f"{speed:.2f}x, {'met' if speed >= 1.0 else 'not met'}")


def _burnish_runs(name: str, tx: Any, tw: Any, qx: Any, qw: Any, activations: Any,
                  linear: Callable[..., Any]) -> dict[str, Callable[[], object]]:
    """burnish's products on backend ``name`` (both backends compute when an op is called:
    cpu's kernels return when done)."""
    def float_product() -> object:
        return tx @ tw

    def both_quantized() -> object:
        return qx @ qw

    def weights_quantized() -> object:
        return tx @ qw

    def quantized_linear() -> object:
        return linear(tx.quantize(activations, scales=qx.scales), qw)

    return {f"burnish float32 x @ w ({name})": float_product,
            f"burnish qx @ qw ({name}, both int8)": both_quantized,
            f"burnish x @ qw ({name}, int8 weights only)": weights_quantized,
            f"burnish quantized linear ({name}): quantize x, then qx @ qw": quantized_linear}


def _capped_runs(x8: np.ndarray, w8: np.ndarray, sx: np.ndarray, sw: np.ndarray
                 ) -> dict[str, Callable[[], object]]:
    """cpu's int8 kernel kept from AVX-512 VNNI (and from AVX2), called on the integers."""
    from burnish.cpu.compiler import Compiler
    from burnish.cpu.int8_gemm import Int8Gemm

    m, n = x8.shape[0], w8.shape[1]
    zeros_m, zeros_n = np.zeros(m, np.int32), np.zeros(n, np.int32)
    rows = np.full(m, sx, np.float32)
    out = np.empty((m, n), np.float32)
    runs: dict[str, Callable[[], object]] = {}
    for cap in ("avx2", "portable"):
        kernel = Int8Gemm(Compiler(), at_most=cap)
        packed = kernel.pack(w8)

        def product(kernel: Int8Gemm = kernel, packed: tuple = packed) -> object:
            kernel.product(x8, packed, True, zeros_m, zeros_n, rows, sw, out)
            return out

        runs[f"cpu's int8 kernel built for {kernel.path} (packed weights)"] = product
    return runs


if __name__ == "__main__":
    main()
