"""One epoch of training a 784-512-512-10 ReLU MLP with Adam: burnish against NumPy by hand.

    python bench/bench_mlp_train.py                       # burnish and NumPy, best of 3 epochs
    python bench/bench_mlp_train.py --torch-python PATH   # and PyTorch, run by that interpreter
    python bench/run.py mlp_train                         # the same case in the common runner

60,000 synthetic samples (784 float32 features, 10 classes), 469 steps of batch 128 (the last
one 96), softmax cross-entropy, Adam (lr 1e-3). burnish trains ``nn.Linear`` layers on
``autodiff+ndarray`` with ``optim.Adam``; NumPy computes the same forward pass, gradients and
Adam updates written out by hand; PyTorch (in a process of its own, as bench/run.py does, and
needing no burnish) trains ``torch.nn.Linear`` layers with ``torch.optim.Adam``. Before timing,
burnish's weights after three steps are checked against NumPy's.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import time

import numpy as np
from timing import Case, within

SIZES = (784, 512, 512, 10)
SAMPLES = 60_000
BATCH = 128
LR = 1e-3
BETAS = (0.9, 0.999)
EPSILON = 1e-8


def dataset() -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The samples, their labels and the initial weights and biases (seeded, so every process
    gets the same)."""
    rng = np.random.default_rng(0)
    x = rng.random((SAMPLES, SIZES[0]), dtype=np.float32)
    y = rng.integers(0, SIZES[-1], SAMPLES)
    params = [rng.uniform(-n**-0.5, n**-0.5, (n, m)).astype(np.float32)
              for n, m in zip(SIZES[:-1], SIZES[1:])]
    params += [np.zeros(m, np.float32) for m in SIZES[1:]]
    return x, y, params


def batches(steps: int | None = None):
    """(start, stop) of each batch of the epoch."""
    starts = range(0, SAMPLES, BATCH)
    return [(s, min(s + BATCH, SAMPLES)) for s in list(starts)[:steps]]


def numpy_epoch(x, y, initial, steps=None) -> list[np.ndarray]:
    """Forward, backward and Adam written out in NumPy."""
    params = [p.copy() for p in initial]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    eye = np.eye(SIZES[-1], dtype=np.float32)
    b1, b2 = BETAS
    for t, (start, stop) in enumerate(batches(steps), 1):
        xb, onehot = x[start:stop], eye[y[start:stop]]
        w1, w2, w3, c1, c2, c3 = params
        z1 = xb @ w1 + c1
        h1 = np.maximum(z1, 0)
        z2 = h1 @ w2 + c2
        h2 = np.maximum(z2, 0)
        z3 = h2 @ w3 + c3
        e = np.exp(z3 - z3.max(1, keepdims=True))
        g3 = (e / e.sum(1, keepdims=True) - onehot) / len(xb)
        g2 = (g3 @ w3.T) * (z2 > 0)
        g1 = (g2 @ w2.T) * (z1 > 0)
        grads = [xb.T @ g1, h1.T @ g2, h2.T @ g3, g1.sum(0), g2.sum(0), g3.sum(0)]
        scale_1, scale_2 = 1 / (1 - b1**t), 1 / (1 - b2**t)
        for p, g, mp, vp in zip(params, grads, m, v):
            mp *= b1
            mp += (1 - b1) * g
            vp *= b2
            vp += (1 - b2) * g * g
            p -= LR * (mp * scale_1) / (np.sqrt(vp * scale_2) + EPSILON)
    return params


def burnish_epoch(x, y, initial, steps=None, device="autodiff+ndarray") -> list[np.ndarray]:
    """The same with burnish.nn and burnish.optim on an autodiff backend."""
    # Imported here so that the PyTorch process, which runs without burnish, never needs it.
    from burnish import Tensor, nn, optim

    layers = [nn.Linear(nn.Param(Tensor.from_data(w, device)),
                        nn.Param(Tensor.from_data(c, device)))
              for w, c in zip(initial[:3], initial[3:])]
    model = mlp_class()(layers, nn.Relu())
    adam, loss_fn = optim.Adam(*BETAS, EPSILON), nn.CrossEntropyLoss()
    for start, stop in batches(steps):
        xb = Tensor.from_data(x[start:stop], device)
        yb = Tensor.from_data(y[start:stop], device)
        loss = loss_fn(model(xb), yb)
        model = adam.step(LR, model, loss.backward())
    return [layer.weight.val().to_numpy() for layer in model.layers] + \
        [layer.bias.val().to_numpy() for layer in model.layers]


def torch_epoch(x, y, initial, steps=None) -> list[np.ndarray]:
    """The same with torch.nn and torch.optim.Adam (weights as PyTorch lays them out)."""
    import torch

    layers = [torch.nn.Linear(n, m) for n, m in zip(SIZES[:-1], SIZES[1:])]
    with torch.no_grad():
        for layer, w, c in zip(layers, initial[:3], initial[3:]):
            layer.weight.copy_(torch.from_numpy(w.T))
            layer.bias.copy_(torch.from_numpy(c))
    model = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(),
                                layers[2])
    adam = torch.optim.Adam(model.parameters(), LR, BETAS, EPSILON)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    for start, stop in batches(steps):
        loss = torch.nn.functional.cross_entropy(model(tx[start:stop]), ty[start:stop])
        adam.zero_grad()
        loss.backward()
        adam.step()
    return [layer.weight.detach().numpy().T for layer in layers] + \
        [layer.bias.detach().numpy() for layer in layers]


@functools.cache
def mlp_class() -> type:
    """The burnish model (made on first use: the PyTorch process has no burnish)."""
    from burnish import Tensor, nn

    class Mlp(nn.Module):
        layers: list
        relu: nn.Relu

        def forward(self, x: Tensor) -> Tensor:
            for layer in self.layers[:-1]:
                x = self.relu(layer(x))
            return self.layers[-1](x)

    return Mlp


def cases(ctx) -> list[Case]:
    """The epoch as a case of bench/run.py, on ``ctx``'s backend (wrapped in Autodiff)."""
    from burnish.autodiff import Autodiff
    from burnish.backend import AutodiffOps

    backend = ctx.backend
    device = (backend if isinstance(backend, AutodiffOps) else Autodiff(backend)).default_device()
    x, y, initial = dataset()
    runs = {"burnish": ctx.synced(lambda: burnish_epoch(x, y, initial, device=device)),
            "numpy": lambda: numpy_epoch(x, y, initial)}
    if ctx.torch:
        runs["torch"] = lambda: torch_epoch(x, y, initial)
    name = f"MLP {'-'.join(map(str, SIZES))}, Adam: one epoch, {len(batches())} steps of {BATCH}"
    return [Case("mlp_train", name, runs, "within 10% of NumPy by hand", within(1.10))]


EPOCHS = {"burnish": burnish_epoch, "numpy": numpy_epoch, "torch": torch_epoch}


def timed(names: list[str], repeat: int) -> dict[str, float]:
    """The best seconds of one epoch of each implementation, taking turns run by run."""
    x, y, initial = dataset()
    best = {name: float("inf") for name in names}
    for _ in range(repeat):
        for name in names:
            began = time.perf_counter()
            EPOCHS[name](x, y, initial)
            best[name] = min(best[name], time.perf_counter() - began)
            print(f"{name:<8} {best[name]:.3f} s", file=sys.stderr, flush=True)
    return best


def check(names: list[str]) -> None:
    """Three steps of each implementation give NumPy's weights (rtol 1e-4)."""
    x, y, initial = dataset()
    expected = numpy_epoch(x, y, initial, steps=3)
    for name in names:
        for ours, theirs in zip(EPOCHS[name](x, y, initial, steps=3), expected):
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5, err_msg=name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="epochs per implementation (3)")
    parser.add_argument("--torch-python", metavar="PATH",
                        help="an interpreter with torch installed: time PyTorch in it too")
    parser.add_argument("--only", choices=list(EPOCHS), action="append", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = args.only or ["burnish", "numpy"]
    check(names)
    seconds = timed(names, args.repeat)
    if args.only:
        print(json.dumps(seconds))
        return 0
    if args.torch_python:
        command = [args.torch_python, __file__, "--only", "torch", "--repeat", str(args.repeat)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        seconds.update(json.loads(output.splitlines()[-1]))
    ratio = seconds["burnish"] / seconds["numpy"]
    print("| implementation | one epoch (469 steps) | per step |\n|---|---|---|")
    for name, value in seconds.items():
        print(f"| {name} | {value:.2f} s | {value / len(batches()) * 1e3:.2f} ms |")
    print(f"\nburnish / NumPy by hand: {ratio:.2f}x; goal within 10%: "
          f"{'met' if ratio <= 1.10 else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
