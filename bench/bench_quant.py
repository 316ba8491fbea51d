"""Quantized matmul on the CPU (ndarray): the ways to multiply int8 matrices with NumPy, and
burnish's, against a float32 NumPy product of the same size.

    python bench/bench_quant.py                 # 1024 x 1024 @ 1024 x 1024
    python bench/bench_quant.py --size 512 --repeat 5

The ways measured, each on the same int8 operands (activations per tensor, weights per output
column, symmetric), with what it computes:

- NumPy float32 ``x @ w``: the goal's reference (issue 26: int8 matmul at least 1.0x its speed).
- NumPy int32 matmul of the int8 values: exact, but NumPy's integer matmul has no BLAS.
- dequantize, then float32 BLAS: ``(qx * sx) @ (qw * sw)``.
- the integers through float32 BLAS: ``(qx @ qw) * sx * sw`` with the int8 values as float32,
  exact while a dot product stays below 2^24 (1040 terms of int8).
- burnish: ``qx @ qw`` of two QuantizedTensors on ndarray (the previous way, inner dims cut into
  exact chunks), ``x @ qw`` (float activations, the protocol's default: dequantize, then BLAS),
  and a quantized linear layer's whole forward (quantize the activations, then the product).

Times are the best of ``--repeat`` runs (timeit's way, implementations taking turns); the
integer NumPy product, seconds long, runs once.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from timing import measure  # noqa: E402

import burnish as bn  # noqa: E402
from burnish.quantization import PerChannel, QuantScheme, linear  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--skip-int-numpy", action="store_true",
                        help="skip NumPy's integer matmul (seconds per call)")
    args = parser.parse_args()
    n = args.size
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), dtype=np.float32)
    w = rng.standard_normal((n, n), dtype=np.float32)

    device = bn.backend("ndarray").default_device()
    tx, tw = bn.Tensor.from_data(x, device), bn.Tensor.from_data(w, device)
    activations = QuantScheme()
    qx = tx.quantize(activations)
    qw = tw.quantize(QuantScheme(granularity=PerChannel(1)))
    x8, w8 = qx.values.to_numpy(), qw.values.to_numpy()
    sx, sw = qx.scales.to_numpy(), qw.scales.to_numpy()

    runs = {
        "NumPy float32 x @ w": lambda: x @ w,
        "NumPy: dequantize, then float32 BLAS":
            lambda: (x8.astype(np.float32) * sx) @ (w8.astype(np.float32) * sw),
        "NumPy: the integers through float32 BLAS":
            lambda: (x8.astype(np.float32) @ w8.astype(np.float32)) * (sx * sw),
        "burnish float32 x @ w (ndarray)": lambda: tx @ tw,
        "burnish qx @ qw (ndarray, both int8)": lambda: qx @ qw,
        "burnish x @ qw (ndarray, int8 weights only)": lambda: tx @ qw,
        "burnish quantized linear: quantize x, then qx @ qw": lambda: linear(
            tx.quantize(activations, scales=qx.scales), qw),
    }
    seconds, _ = measure(runs, args.repeat, args.min_time)
    if not args.skip_int_numpy:
        started = time.perf_counter()
        exact = x8.astype(np.int32) @ w8.astype(np.int32)
        seconds["NumPy int32 matmul of the int8 values (one run)"] = \
            time.perf_counter() - started
        through_blas = (qx @ qw).to_numpy().astype(np.float64)
        check = np.abs(through_blas - exact * (sx * sw).astype(np.float64)).max()
        print(f"burnish qx @ qw against NumPy's exact integer product: max difference {check:.3g}"
              f" (float32 rounding of the scaled result)")
    reference = seconds["NumPy float32 x @ w"]
    print(f"\n{n} x {n} @ {n} x {n}, best of {args.repeat}:\n")
    print("| implementation | ms | speed vs NumPy float32 |")
    print("|---|---:|---:|")
    for name, value in seconds.items():
        print(f"| {name} | {value * 1e3:.2f} | {reference / value:.2f}x |")


if __name__ == "__main__":
    main()
