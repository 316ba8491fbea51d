"""burnish.jit's tiled product kernel, tiling by tiling, against the GPU's BLAS (PyTorch's
float32 product, TF32 off, in the same process) on float32 products of a large square and of a
GPT-style model's shapes: TFLOP/s of each launch waited for in batches. The figures say how far
the generated kernel (wgpu, rocm, and cuda without cuBLAS) is from a library's.

    python bench/bench_products.py --backends cuda,rocm,wgpu
    python bench/bench_products.py --backends rocm --tilings 128x128x8/8x8 128x128x8/8x8r4
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import burnish
from burnish.jit.kernels import matmul as mm

#: (M, N, K): a square, then a GPT block's products at 4,096 tokens of width 512 (the QKV and
#: MLP projections, the MLP's down projection, a weight gradient, the vocabulary head).
SHAPES = ((4096, 4096, 4096), (4096, 1536, 512), (4096, 2048, 512), (4096, 512, 2048),
          (512, 2048, 4096), (4096, 8192, 512))


def tiling(name: str) -> mm.Tiling:
    """``128x128x8/8x8`` or ``128x128x8/8x8r4`` (runs of four); a ``+runs`` suffix (the inner
    dim split into runs) is ignored here."""
    tile, block = name.removesuffix(mm.RUNS_SUFFIX).split("/")
    tm, tn, tk = (int(v) for v in tile.split("x"))
    runs = 0
    if "r" in block:
        block, runs_text = block.split("r")
        runs = int(runs_text)
    rm, rn = (int(v) for v in block.split("x"))
    return mm.Tiling(tm, tn, tk, rm, rn, runs)


def seconds(fn, sync, repeat: int) -> float:
    """The fastest of three batches of ``repeat`` calls, per call."""
    fn()
    sync()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="cuda,rocm,wgpu")
    parser.add_argument("--tilings", nargs="*",
                        default=[t.name for t in mm.TILINGS] + ["128x128x8/8x8r4",
                                                                "128x64x8/8x4r4"])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()
    torch = None
    if not args.no_torch:
        try:
            import torch
            torch.backends.cuda.matmul.allow_tf32 = False
        except ImportError:
            torch = None
    rng = np.random.default_rng(0)
    for name in args.backends.split(","):
        backend = burnish.backend(name)
        device = backend.default_device()
        print(f"\n## {name}: {device}")
        print("| M x N x K | " + " | ".join(args.tilings) + " | torch float32 |")
        print("|---" * (len(args.tilings) + 2) + "|")
        for m, n, k in SHAPES:
            x = rng.standard_normal((m, k), dtype=np.float32)
            y = rng.standard_normal((k, n), dtype=np.float32)
            want = x.astype(np.float64) @ y.astype(np.float64)
            a = backend.from_data(burnish.TensorData(x, burnish.float32), device)
            b = backend.from_data(burnish.TensorData(y, burnish.float32), device)
            out = mm.matmul(a, b, library=False)
            runtime = a.runtime
            cells = []
            for tname in args.tilings:
                layout = mm.Layout(a, b, (), out.offset)
                try:
                    layout.tile(tiling(tname))
                    buffers = [out.buffer, a.buffer, b.buffer]

                    def run(layout=layout, buffers=buffers, name=tname, a=a, b=b, out=out,
                            runtime=runtime):
                        if name.endswith(mm.RUNS_SUFFIX):
                            return mm._in_runs(layout, layout.tiling, a, b, out)
                        runtime.launch(layout.key(), lambda: layout.kernel(mm.Epilogue()),
                                       buffers, layout.info, groups=layout.workgroups())
                        return out

                    got = backend.into_data(run(), burnish.float32).to_numpy()
                    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                    t = seconds(run, runtime.sync, args.repeat)
                    flag = "" if error < 1e-4 else f" (WRONG {error:.1e})"
                    cells.append(f"{2 * m * n * k / t / 1e12:.1f}{flag}")
                except Exception as exc:  # noqa: BLE001 - a tiling the device cannot run
                    cells.append(f"failed: {type(exc).__name__}")
            ref = ""
            if torch is not None and torch.cuda.is_available():
                tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
                t = seconds(lambda tx=tx, ty=ty: tx @ ty, torch.cuda.synchronize, args.repeat)
                ref = f"{2 * m * n * k / t / 1e12:.1f}"
            print(f"| {m} x {n} x {k} | " + " | ".join(cells) + f" | {ref} |", flush=True)


if __name__ == "__main__":
    main()
