"""Multi-head self-attention written with named dims (burnish.NamedTensor): checked against the
fused ``scaled_dot_product_attention`` on plain tensors, its gradients checked on an autodiff
backend, three slips caught by name (one of which plain tensors compute without a word), and
what the names cost per forward pass."""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import burnish as bn
import burnish.functional as F
from burnish import NamedTensor, Tensor
from burnish.backend import AutodiffOps


def init(d_model: int, device: bn.Device) -> dict[str, NamedTensor]:
    """The four projections: ``d_model -> inner`` for queries, keys and values (``inner`` is
    split into heads later), ``inner -> d_model`` for the output."""
    normal = bn.Distribution.normal(0.0, 1.0 / math.sqrt(d_model))
    params = {name: NamedTensor.random({"d_model": d_model, "inner": d_model}, normal, device)
              for name in ("w_q", "w_k", "w_v")}
    params["w_o"] = NamedTensor.random({"inner": d_model, "d_model": d_model}, normal, device)
    return params


def attention(x: NamedTensor, params: dict[str, NamedTensor], heads: int, causal: bool,
              show: bool = False) -> NamedTensor:
    """Self-attention of ``x`` (batch, seq, d_model), every dim taken by name."""

    def project(weight: str) -> NamedTensor:  # batch, seq, heads, d_head
        return (x @ params[weight]).unflatten("inner", {"heads": heads, "d_head": -1})

    q = project("w_q")
    k = project("w_k").rename(seq="key")  # the keys get their own name: scores are seq x key
    v = project("w_v").rename(seq="key")
    scores = (q.align_to(..., "seq", "d_head") @ k.align_to(..., "d_head", "key")
              / math.sqrt(q.size("d_head")))
    if causal:  # a query never sees a later key
        positions = Tensor.arange(scores.size("seq"), device=x.device)
        later = positions.named("key") > positions.named("seq").align_to("seq", "key")
        scores = scores.mask_fill(later, -1e9)
    weights = scores.softmax("key")
    mixed = weights @ v.align_to(..., "key", "d_head")  # batch, heads, seq, d_head
    merged = mixed.align_to("batch", "seq", "heads", "d_head").flatten(("heads", "d_head"),
                                                                        "inner")
    out = merged @ params["w_o"]
    if show:
        for name, value in (("x", x), ("q", q), ("k", k), ("scores", scores), ("out", out)):
            print(f"  {name:7s}{value.shape}")
    return out


def heads_of(x: Tensor, weight: NamedTensor, heads: int) -> Tensor:
    """A projection of plain ``x`` split into heads: batch, heads, seq, d_head by position."""
    batch, seq, _ = x.dims()
    return (x @ weight.unname()).reshape(batch, seq, heads, -1).swap_dims(1, 2)


def plain_attention(x: Tensor, params: dict[str, NamedTensor], heads: int, causal: bool
                    ) -> Tensor:
    """The same operations on plain tensors, every dim by position."""
    batch, seq, d_model = x.dims()
    q, k, v = (heads_of(x, params[w], heads) for w in ("w_q", "w_k", "w_v"))
    scores = q @ k.transpose() / math.sqrt(q.shape[3])
    if causal:
        positions = Tensor.arange(seq, device=x.device)
        scores = scores.mask_fill(positions.unsqueeze(0) > positions.unsqueeze(1), -1e9)
    mixed = F.softmax(scores, -1) @ v
    return mixed.swap_dims(1, 2).reshape(batch, seq, d_model) @ params["w_o"].unname()


def fused_attention(x: Tensor, params: dict[str, NamedTensor], heads: int, causal: bool
                    ) -> Tensor:
    """The same attention through the fused op (one backend op for the softmax part)."""
    batch, seq, d_model = x.dims()
    q, k, v = (heads_of(x, params[w], heads) for w in ("w_q", "w_k", "w_v"))
    mixed = F.scaled_dot_product_attention(q, k, v, causal=causal)
    return mixed.swap_dims(1, 2).reshape(batch, seq, d_model) @ params["w_o"].unname()


def largest_difference(a: Tensor, b: Tensor) -> float:
    return float(np.abs(a.to_numpy().astype(np.float64) - b.to_numpy()).max())


def check_gradients(x: NamedTensor, params: dict[str, NamedTensor], heads: int,
                    causal: bool) -> None:
    """The gradients of a loss through the named attention, next to the plain one's."""
    tracked = {name: w.require_grad() for name, w in params.items()}
    grads = (attention(x, tracked, heads, causal) ** 2).mean().backward()
    plain = {name: w.detach().require_grad() for name, w in params.items()}
    plain_grads = (fused_attention(x.unname(), plain, heads, causal) ** 2).mean().backward()
    print("gradients, named like their weights:")
    for name, weight in tracked.items():
        grad = weight.grad(grads)
        difference = largest_difference(grad.unname(), plain[name].unname().grad(plain_grads))
        print(f"  {name}  {grad.shape}  max |named - plain| = {difference:.1e}")


def mistakes(x: NamedTensor, params: dict[str, NamedTensor], heads: int) -> None:
    """Three slips of attention code: what the names say, and what plain tensors do."""
    q = (x @ params["w_q"]).unflatten("inner", {"heads": heads, "d_head": -1})
    k = (x @ params["w_k"]).unflatten("inner", {"heads": heads, "d_head": -1})
    q = q.align_to(..., "seq", "d_head")
    plain_q, plain_k = (heads_of(x.unname(), params[w], heads) for w in ("w_q", "w_k"))
    slips = [
        ("keys not transposed", lambda: q @ k.rename(seq="key").align_to(..., "key", "d_head"),
         lambda: plain_q @ plain_k),
        ("output weight on the input", lambda: x @ params["w_o"],
         lambda: x.unname() @ params["w_o"].unname()),
        ("keys not renamed", lambda: q @ k.align_to(..., "d_head", "seq"), None),
    ]
    print("slips the names catch:")
    for what, named, plain in slips:
        try:
            named()
            print(f"  {what}: not caught")
        except bn.ShapeError as error:
            print(f"  {what}: {error}")
        if plain is None:
            print("    plain tensors: no names to clash (q @ k.transpose() is right there)")
            continue
        try:
            print(f"    plain tensors: run without a word, giving {plain().shape}")
        except bn.ShapeError as error:
            print(f"    plain tensors: {error}")


def timings(x: NamedTensor, params: dict[str, NamedTensor], heads: int, causal: bool,
            repeat: int) -> None:
    """Time per forward pass: named, the same operations on plain tensors, the fused op."""
    runs = {"named": lambda: attention(x, params, heads, causal),
            "plain": lambda: plain_attention(x.unname(), params, heads, causal),
            "fused": lambda: fused_attention(x.unname(), params, heads, causal)}
    results = {}
    for label, run in runs.items():
        run().to_numpy()  # warm up (kernels compiled, caches filled)
        started = time.perf_counter()
        for _ in range(repeat):
            out = run()
        out.to_numpy()
        results[label] = (time.perf_counter() - started) / repeat * 1e3
    print(f"time per forward pass ({repeat} runs): named {results['named']:.2f} ms, the same "
          f"ops on plain tensors {results['plain']:.2f} ms, fused attention "
          f"{results['fused']:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="any installed backend (autodiff+ndarray; e.g. wgpu, rocm, "
                             "autodiff+cuda); gradients are checked on autodiff ones")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--causal", action=argparse.BooleanOptionalAction, default=True,
                        help="mask later keys (default: on)")
    parser.add_argument("--repeat", type=int, default=20, help="forward passes to time")
    args = parser.parse_args()
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} is not a multiple of --heads {args.heads}")

    device = bn.backend(args.backend).default_device()
    bn.seed(0)
    params = init(args.d_model, device)
    x = NamedTensor.random({"batch": args.batch, "seq": args.seq, "d_model": args.d_model},
                           bn.Distribution.normal(0.0, 1.0), device)
    print(f"backend {args.backend} ({device}); {args.heads} heads, "
          f"{'causal' if args.causal else 'not causal'}")
    out = attention(x, params, args.heads, args.causal, show=True)
    expected = fused_attention(x.unname(), params, args.heads, args.causal)
    print(f"max |named - scaled_dot_product_attention| = "
          f"{largest_difference(out.unname(), expected):.1e}")
    if isinstance(device.backend, AutodiffOps):
        check_gradients(x, params, args.heads, args.causal)
    else:
        print(f"gradients: not checked, {args.backend} has no autodiff "
              f"(--backend autodiff+{args.backend})")
    mistakes(x, params, args.heads)
    timings(x, params, args.heads, args.causal, args.repeat)


if __name__ == "__main__":
    main()
