"""Where a training step's GPU time goes on a burnish.jit backend (wgpu, rocm, cuda): eager
steps of a model of bench_train.py with every kernel launch waited for and timed, summed by
kernel (products also by their M, N, K and batch). Waiting after each launch adds its latency
to every kernel (tens of µs), so the figures rank kernels rather than add up to a step's time.

    python bench/jit_kernels.py --backend autodiff+rocm --model resnet
    python bench/jit_kernels.py --backend autodiff+wgpu --model gpt --top 20
    python bench/jit_kernels.py --backend autodiff+rocm --model resnet --small
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_models as models  # noqa: E402

import burnish  # noqa: E402
from burnish import Tensor  # noqa: E402
from burnish.jit.kernels import matmul  # noqa: E402
from burnish.jit.runtime import Runtime  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="autodiff+rocm",
                        help="an autodiff backend over a burnish.jit one (autodiff+rocm)")
    parser.add_argument("--model", default="resnet", choices=sorted(models.SPECS))
    parser.add_argument("--steps", type=int, default=2, help="timed steps (2)")
    parser.add_argument("--top", type=int, default=15, help="kernels listed (15)")
    parser.add_argument("--small", action="store_true", help="the model's tiny sizes")
    args = parser.parse_args()

    spec = models.SPECS[args.model]
    sizes = dict(spec.small if args.small else spec.full)
    device = burnish.backend(args.backend).default_device()
    burnish.seed(0)
    model = models.burnish_model(args.model, sizes, device)
    optimizer = models.burnish_optimizer(spec, False)
    loss_of = models.burnish_loss(args.model, sizes, device)
    batches = [(Tensor.from_data(x, device), Tensor.from_data(y, device))
               for x, y in models.make_data(args.model, sizes)]

    def step(model, i):
        loss = loss_of(model, *batches[i % len(batches)])
        model = optimizer.step(spec.lr, model, loss.backward())
        loss.item()
        return model

    for i in range(2):  # compile and tune first
        model = step(model, i)
    times: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter[str] = collections.Counter()
    original = Runtime.launch

    def launch(self, key, build, buffers, info, invocations=None, groups=None):
        self.sync()
        start = time.perf_counter()
        out = original(self, key, build, buffers, info, invocations, groups)
        self.sync()
        label = str(key[0]) if isinstance(key, tuple) else str(key)
        if label.startswith("matmul"):
            batch = info[matmul.TOTAL] // max(1, info[matmul.M] * info[matmul.N])
            label += f" M{info[matmul.M]} N{info[matmul.N]} K{info[matmul.K]} x{batch}"
        times[label] += time.perf_counter() - start
        counts[label] += 1
        return out

    Runtime.launch = launch
    start = time.perf_counter()
    for i in range(args.steps):
        model = step(model, i)
    wall = (time.perf_counter() - start) / args.steps
    Runtime.launch = original
    total = sum(times.values()) / args.steps
    print(f"{args.backend}, {args.model}: {wall * 1e3:.1f} ms a step with every launch waited "
          f"for, {total * 1e3:.1f} ms of it in {sum(counts.values()) // args.steps} launches")
    print("| ms/step | launches | kernel |\n|---:|---:|---|")
    for label, seconds in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"| {seconds / args.steps * 1e3:.2f} | {counts[label] // args.steps} | {label} |")


if __name__ == "__main__":
    main()
