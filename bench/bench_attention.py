"""Fused attention beside PyTorch's ``scaled_dot_product_attention`` on the same GPU.

    python bench/bench_attention.py                                  # cuda, bfloat16, causal
    python bench/bench_attention.py --backend autodiff+wgpu --dtype float32
    python bench/bench_attention.py --shapes 4,8,2048,64 1,8,16384,64 --no-causal

For each shape ``batch,heads,seq,head_dim`` (q, k and v alike, laid out ``[batch, seq, heads,
dim]`` and viewed as ``[batch, heads, seq, dim]``, as attention layers make them), the time of
one forward pass, and of forward plus backward (the gradients of q, k and v from a given output
gradient), of ``burnish.functional.scaled_dot_product_attention`` on ``--backend`` (an autodiff
stack; its device's default), and of torch's SDPA on CUDA in the same dtype (its flash kernels
where they apply). On cuda a third column runs burnish with ``BURNISH_CUDA_FLASH=0``:
burnish.jit's kernels instead of the Tensor Core ones. Before timing, burnish's output is
compared with torch's (the largest difference relative to the largest value, printed).

Timing: two untimed calls, then ``--reps`` calls and one wait for the device (burnish: a read of
the last result; torch: ``torch.cuda.synchronize``), best of ``--repeat`` runs, milliseconds
per call. Without torch on CUDA the torch column is left out.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish import functional as F


def _burnish_case(device, shape, dtype, causal, rng):
    batch, heads, seq, dim = shape
    data = [rng.standard_normal((batch, seq, heads, dim)).astype(np.float32) for _ in range(3)]
    qkv = [Tensor.from_data(x, device).cast(dtype).permute(0, 2, 1, 3) for x in data]
    grad = Tensor.from_data(rng.standard_normal((batch, heads, seq, dim)).astype(np.float32),
                            device).cast(dtype)

    def forward():
        return F.scaled_dot_product_attention(*qkv, causal=causal)

    def both():
        tracked = [x.require_grad() for x in qkv]
        out = F.scaled_dot_product_attention(*tracked, causal=causal)
        grads = (out * grad).sum().backward()
        return tracked[0].grad(grads)

    return data, forward, both


def _torch_case(torch, data, dtype, causal):
    kind = getattr(torch, dtype)
    qkv = [torch.tensor(x, device="cuda", dtype=kind).transpose(1, 2) for x in data]
    grad = torch.randn(qkv[0].shape, device="cuda", dtype=kind)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def forward():
        with torch.no_grad():
            return sdpa(*qkv, is_causal=causal)

    def both():
        tracked = [x.detach().requires_grad_() for x in qkv]
        sdpa(*tracked, is_causal=causal).backward(grad)
        return tracked[0].grad

    return forward, both


def _time(call, wait, reps: int, repeat: int) -> float:
    for _ in range(2):
        wait(call())
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(reps):
            result = call()
        wait(result)
        best = min(best, (time.perf_counter() - start) / reps)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="autodiff+cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--shapes", nargs="+", default=["4,8,2048,64", "16,8,256,64",
                                                        "4,8,2048,128", "1,8,16384,64"],
                        metavar="B,H,S,D")
    parser.add_argument("--no-causal", action="store_true")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    causal = not args.no_causal
    backend = bn.backend(args.backend)
    device = backend.default_device()
    try:
        import torch

        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    on_cuda = "cuda" in args.backend.split("+")
    rng = np.random.default_rng(0)
    reference = f"{torch.__version__} on {torch.cuda.get_device_name()}" if torch else "absent"
    print(f"bench_attention: burnish {args.backend} on {device} "
          f"({backend.describe_device(device) or 'the host'}); "
          f"torch {reference}; {args.dtype}, {'causal' if causal else 'not causal'}, "
          "ms per call (forward / forward + backward)", flush=True)
    print("| batch, heads, seq, dim | burnish | " + ("burnish.jit kernels | " if on_cuda else "")
          + ("torch SDPA | burnish / torch (fwd+bwd) | max diff |" if torch else ""))
    print("|---|---|" + ("---|" if on_cuda else "") + ("---|---|---|" if torch else ""))
    for text in args.shapes:
        shape = tuple(int(n) for n in text.split(","))
        data, forward, both = _burnish_case(device, shape, args.dtype, causal, rng)
        wait = lambda t: t.to_numpy()  # noqa: E731
        cells = []
        ours = (_time(forward, wait, args.reps, args.repeat),
                _time(both, wait, args.reps, args.repeat))
        cells.append(f"{ours[0]:.3f} / {ours[1]:.3f}")
        if on_cuda:
            os.environ["BURNISH_CUDA_FLASH"] = "0"
            try:
                reps = max(1, args.reps // 4)
                jit = (_time(forward, wait, reps, 1), _time(both, wait, reps, 1))
            finally:
                os.environ.pop("BURNISH_CUDA_FLASH")
            cells.append(f"{jit[0]:.3f} / {jit[1]:.3f}")
        if torch is not None:
            t_forward, t_both = _torch_case(torch, data, args.dtype, causal)
            sync = lambda _: torch.cuda.synchronize()  # noqa: E731
            theirs = (_time(t_forward, sync, args.reps, args.repeat),
                      _time(t_both, sync, args.reps, args.repeat))
            expected = t_forward().float().cpu().numpy()
            got = forward().cast("float32").to_numpy()
            diff = np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-30)
            cells += [f"{theirs[0]:.3f} / {theirs[1]:.3f}", f"{theirs[1] / ours[1]:.2f}x",
                      f"{diff:.1e}"]
        print(f"| {', '.join(map(str, shape))} | " + " | ".join(cells) + " |", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
