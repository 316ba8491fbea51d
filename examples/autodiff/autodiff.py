"""Gradients on any backend: Burn's autodiff example, then a model fitted by gradient descent."""

from __future__ import annotations

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish.autodiff import Autodiff


def burns_example() -> None:
    """Burn's example as written in Rust, line for line."""
    B = Autodiff(bn.backend("ndarray"))
    x = Tensor.random([32, 32], bn.Distribution.default(), device=B.default_device())
    y = Tensor.random([32, 32], bn.Distribution.default(), device=B.default_device()).require_grad()
    tmp = x + y
    tmp = tmp.matmul(x)
    tmp = tmp.exp()
    grads = tmp.backward()
    y_grad = y.grad(grads)
    print(y_grad)


def fit_a_line(steps: int = 200, lr: float = 0.1) -> None:
    """Fit y = 3x - 2 from noisy samples; the gradients come back in a Gradients object and
    each step makes new leaves from the updated values, as an optimizer does."""
    device = bn.backend("autodiff+ndarray").default_device()
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, (64, 1))
    ys = 3 * xs - 2 + rng.normal(0, 0.05, (64, 1))
    x, y = Tensor.from_data(xs, device), Tensor.from_data(ys, device)
    w = Tensor.zeros([1, 1], device, "float64").require_grad()
    b = Tensor.zeros([1], device, "float64").require_grad()
    for step in range(steps):
        loss = ((x.matmul(w) + b - y) ** 2).mean()
        grads = loss.backward()
        w = Tensor.from_inner(w.inner() - w.grad(grads) * lr).require_grad()
        b = Tensor.from_inner(b.inner() - b.grad(grads) * lr).require_grad()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.5f}")
    print(f"fitted: y = {w.item():.3f} x {b.item():+.3f}")


if __name__ == "__main__":
    bn.seed(0)
    burns_example()
    fit_a_line()
