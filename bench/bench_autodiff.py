"""Autodiff: the dispatch cost of the decorator on a tiny op, and an MLP's forward and backward
pass against the same gradients written by hand in NumPy."""

from __future__ import annotations

import numpy as np
from timing import Case, within

import burnish.functional as F
from burnish import Tensor
from burnish.autodiff import Autodiff
from burnish.backend import AutodiffOps

#: The MLP: 784 -> 512 -> 512 -> 10 with ReLU, softmax cross-entropy, a batch of 128.
SIZES = (784, 512, 512, 10)
BATCH = 128


def cases(ctx) -> list[Case]:
    backend = ctx.backend
    plain = backend.inner_backend if isinstance(backend, AutodiffOps) else backend
    autodiff = Autodiff(plain)
    return [*dispatch_cases(ctx, plain, autodiff), mlp_case(ctx, autodiff)]


def dispatch_cases(ctx, plain, autodiff) -> list[Case]:
    x = np.arange(4, dtype=np.float32)
    a, b = Tensor.from_data(x, plain), Tensor.from_data(x + 1, plain)
    c, d = Tensor.from_data(x, autodiff), Tensor.from_data(x + 1, autodiff)
    e, f = c.require_grad(), d.require_grad()
    goal = ("<= 3x burnish without autodiff", within(3.0, "plain"))
    untracked = {"burnish": ctx.synced(lambda: c + d), "plain": ctx.synced(lambda: a + b),
                 "numpy": lambda: x + x}
    tracked = {"burnish": ctx.synced(lambda: e + f), "plain": ctx.synced(lambda: a + b),
               "numpy": lambda: x + x}
    if ctx.torch:
        ta, tb = ctx.torch.from_numpy(x), ctx.torch.from_numpy(x + 1)
        tc, td = ta.clone().requires_grad_(), tb.clone().requires_grad_()
        untracked["torch"] = lambda: ta + tb
        tracked["torch"] = lambda: tc + td
    return [Case("autodiff", "a + b, 4 float32, not tracked", untracked, *goal),
            Case("autodiff", "a + b, 4 float32, tracked (records a node)", tracked, *goal)]


def mlp_case(ctx, autodiff) -> Case:
    rng = np.random.default_rng(0)
    weights = [rng.normal(0, n ** -0.5, (n, m)).astype(np.float32)
               for n, m in zip(SIZES[:-1], SIZES[1:])]
    biases = [np.zeros(m, np.float32) for m in SIZES[1:]]
    x = rng.random((BATCH, SIZES[0]), dtype=np.float32)
    onehot = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]

    device = autodiff.default_device()
    params = [Tensor.from_data(p, device).require_grad() for p in (*weights, *biases)]
    tx, tonehot = Tensor.from_data(x, device), Tensor.from_data(onehot, device)

    def burnish_step():
        w1, w2, w3, b1, b2, b3 = params
        h = F.relu(tx.matmul(w1) + b1)
        h = F.relu(h.matmul(w2) + b2)
        logits = h.matmul(w3) + b3
        loss = -(F.log_softmax(logits, 1) * tonehot).sum() / BATCH
        grads = loss.backward()
        return [p.grad(grads) for p in params]

    def numpy_step():
        (w1, w2, w3), (b1, b2, b3) = weights, biases
        z1 = x @ w1 + b1
        h1 = np.maximum(z1, 0)
        z2 = h1 @ w2 + b2
        h2 = np.maximum(z2, 0)
        z3 = h2 @ w3 + b3
        shifted = z3 - z3.max(1, keepdims=True)
        probabilities = np.exp(shifted)
        probabilities /= probabilities.sum(1, keepdims=True)
        g3 = (probabilities - onehot) / BATCH
        g2 = (g3 @ w3.T) * (z2 > 0)
        g1 = (g2 @ w2.T) * (z1 > 0)
        return [x.T @ g1, h1.T @ g2, h2.T @ g3, g1.sum(0), g2.sum(0), g3.sum(0)]

    # The two compute the same gradients (checked once, outside the timing).
    for ours, theirs in zip(burnish_step(), numpy_step()):
        np.testing.assert_allclose(ours.to_numpy(), theirs, rtol=1e-3, atol=1e-6)

    runs = {"burnish": ctx.synced(burnish_step), "numpy": numpy_step}
    if ctx.torch:
        torch = ctx.torch
        tparams = [torch.from_numpy(p).requires_grad_() for p in (*weights, *biases)]
        ttx, ttonehot = torch.from_numpy(x), torch.from_numpy(onehot)

        def torch_step():
            w1, w2, w3, b1, b2, b3 = tparams
            h = torch.relu(ttx @ w1 + b1)
            h = torch.relu(h @ w2 + b2)
            logits = h @ w3 + b3
            loss = -(torch.log_softmax(logits, 1) * ttonehot).sum() / BATCH
            return torch.autograd.grad(loss, tparams)

        runs["torch"] = torch_step
    return Case("autodiff", f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}: forward + backward",
                runs, "within 15% of NumPy by hand", within(1.15))
