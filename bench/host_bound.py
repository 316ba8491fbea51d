"""Is a training step bound by the host or by the GPU? For bench_cuda.py's MLP step (784-512-512-10,
Adam, batch 1024) on each backend given, on an NVIDIA GPU:

- **enqueue**: the time to issue ``--steps`` steps, per step, without waiting for the GPU;
- **total**: the same with one wait at the end (equal to enqueue: the GPU kept up, the host is
  the bottleneck; larger: the GPU is);
- **GPU busy**: the GPU's own time per step: ``--queued`` steps are issued behind a kernel that
  spins for 100 ms, so that all of them are waiting when it ends, and CUDA events on the
  backend's stream time them from there to the last one's end.

    python bench/host_bound.py
    python bench/host_bound.py --backends autodiff+cuda autodiff+fusion+cuda --repeat 5

It needs CuPy and an NVIDIA GPU, and says so without them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bench_cuda import FULL, mlp_data, mlp_trainer  # noqa: E402

import burnish  # noqa: E402

SPIN_CYCLES = 200_000_000  # about 100 ms at the H100's clock


def cuda_runtime(name: str):
    """The CUDA runtime under backend ``name`` (``autodiff+fusion+cuda`` -> cuda's)."""
    inner = burnish.backend(name.split("+")[-1])
    return inner.runtime(inner.default_device())


def spin_kernel():
    """A CUDA kernel (CuPy) that keeps one thread busy for ``cycles`` clock cycles: work
    queued behind it waits until it ends, so that the GPU finds all of it queued."""
    import cupy as cp

    return cp.RawKernel(r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}""", "spin")


def gpu_busy(runtime, issue, finish, queued: int, spin, cycles: int = SPIN_CYCLES) -> float:
    """The GPU's busy time, in µs per call, of ``issue()`` (work enqueued on ``runtime``'s
    stream; ``finish()`` flushes and waits): ``queued`` calls are issued behind a kernel that
    spins for ``cycles`` (long enough for the host to issue them all), and CUDA events on the
    stream time them from its end to the last one's end, so the host's time to issue them is
    hidden."""
    import cupy as cp

    with runtime.cuda_device, runtime.stream:
        spin((1,), (1,), (np.int64(cycles),))
        begin = cp.cuda.Event()
        begin.record(runtime.stream)
        for _ in range(queued):
            issue()
        finish()  # computes what fusion holds back, then waits
        end = cp.cuda.Event()
        end.record(runtime.stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(begin, end) * 1e3 / queued


def measure(name: str, steps: int, queued: int, spin) -> tuple[float, float, float]:
    """(enqueue, total, GPU busy) in µs per step for the MLP step on backend ``name``."""
    step, device = mlp_trainer(name, *mlp_data(FULL["mlp_batch"]))
    backend, runtime = device.backend, cuda_runtime(name)
    for _ in range(5):  # compile, tune, plan
        step()
    backend.sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    issued = time.perf_counter()
    backend.sync(device)
    done = time.perf_counter()
    busy = gpu_busy(runtime, step, lambda: backend.sync(device), queued, spin)
    return (issued - start) / steps * 1e6, (done - start) / steps * 1e6, busy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["autodiff+cuda", "autodiff+fusion+cuda"])
    parser.add_argument("--steps", type=int, default=200, help="steps timed on the host")
    parser.add_argument("--queued", type=int, default=15,
                        help="steps queued behind the spin kernel (keep them under the driver's "
                             "launch queue)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per backend, in turns")
    args = parser.parse_args(argv)
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
    except Exception as error:  # no CuPy, no driver, no GPU
        print(f"host_bound.py needs CuPy and an NVIDIA GPU ({type(error).__name__}: {error}); "
              "pip install 'burnish-backend-cuda[cuda12]' on a machine with one")
        return 2
    spin = spin_kernel()
    print("| backend | enqueue (µs/step) | total (µs/step) | GPU busy (µs/step) |")
    print("|---------|-------------------|-----------------|--------------------|")
    for _ in range(args.repeat):
        for name in args.backends:
            enqueue, total, busy = measure(name, args.steps, args.queued, spin)
            print(f"| {name} | {enqueue:.0f} | {total:.0f} | {busy:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
