"""Gradient checks: what ``backward()`` gives against central finite differences, in float64.

A check differentiates ``sum(fn(*inputs) * weights)`` with fixed random ``weights``, so the rule
under test receives an upstream gradient that is not all ones and every output element counts.
The finite differences evaluate the same ``fn`` through the backend under test (untracked), so
the check holds the backward rules to the backend's own forward ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from burnish import Device, Tensor, float64
from burnish.conformance.samples import rng

#: The step of the central differences: their truncation error (~ eps^2) and rounding error
#: (~ 1e-16 / eps) are both near 1e-10 in float64.
EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-6


def check_gradients(fn: Callable[..., Tensor], *values: np.ndarray | Sequence, device: Device,
                    rtol: float = RTOL, atol: float = ATOL, eps: float = EPS,
                    key: object = 0) -> None:
    """Assert that the gradient ``backward()`` gives for every float input of ``fn`` matches
    central finite differences. ``values`` are arrays: float ones become float64 tensors that
    require grad; int and bool ones (indices, masks) are passed as constant tensors. A larger
    ``eps`` suits functions that are linear but computed partly in a narrower dtype."""
    arrays = [_array(v) for v in values]
    tensors = [_tensor(a, device, track=True) for a in arrays]
    out = fn(*tensors)
    weights = rng("cotangent", tuple(out.shape), key).uniform(-1.0, 1.0, tuple(out.shape))
    loss = (out * Tensor.from_data(weights, device, float64)).sum()
    grads = loss.backward()
    for i, (array, tensor) in enumerate(zip(arrays, tensors)):
        if array.dtype.kind != "f":
            continue
        analytic = _host_grad(tensor, grads, i)
        numeric = finite_differences(fn, arrays, i, weights, device, eps)
        if not np.allclose(analytic, numeric, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), analytic.shape)
            raise AssertionError(
                f"gradient of input {i} (shape {list(array.shape)}) differs from central finite "
                f"differences beyond rtol={rtol}, atol={atol}: at {list(map(int, worst))} "
                f"backward gives {analytic[worst]!r}, finite differences {numeric[worst]!r}\n"
                f"backward:\n{analytic}\nfinite differences:\n{numeric}")


def gradient(tensor: Tensor, grads: object) -> np.ndarray:
    """``tensor.grad(grads)`` as a float64 array (zeros when there is none), after checking that
    it is a tensor of the inner backend with the leaf's shape and dtype."""
    return _host_grad(tensor, grads, 0)


def finite_differences(fn: Callable[..., Tensor], arrays: list[np.ndarray], index: int,
                       weights: np.ndarray, device: Device, eps: float = EPS) -> np.ndarray:
    """d sum(fn(*arrays) * weights) / d arrays[index] by central differences."""
    base = arrays[index]
    result = np.zeros(base.shape)
    flat = result.reshape(-1)
    for j in range(base.size):
        values = []
        for step in (eps, -eps):
            moved = base.copy()
            moved.reshape(-1)[j] += step
            inputs = [_tensor(moved if k == index else a, device, track=False)
                      for k, a in enumerate(arrays)]
            out = fn(*inputs).to_numpy().astype(np.float64)
            values.append(float(np.sum(out * weights)))
        flat[j] = (values[0] - values[1]) / (2 * eps)
    return result


def _array(value: np.ndarray | Sequence) -> np.ndarray:
    array = np.asarray(value)
    return array.astype(np.float64) if array.dtype.kind == "f" else array


def _tensor(array: np.ndarray, device: Device, track: bool) -> Tensor:
    if array.dtype.kind != "f":
        return Tensor.from_data(array, device)
    tensor = Tensor.from_data(array, device, float64)
    return tensor.require_grad() if track else tensor


def _host_grad(tensor: Tensor, grads: object, index: int) -> np.ndarray:
    grad = tensor.grad(grads)
    if grad is None:
        return np.zeros(tuple(tensor.shape))
    inner = tensor.backend.inner_backend
    if grad.backend is not inner:
        raise AssertionError(f"the gradient of input {index} is a tensor of "
                             f"{grad.backend.name!r}, not of the inner backend {inner.name!r}")
    if tuple(grad.shape) != tuple(tensor.shape) or grad.dtype is not tensor.dtype:
        raise AssertionError(f"the gradient of input {index} is {grad.dtype} {list(grad.shape)}"
                             f", not {tensor.dtype} {list(tensor.shape)} like the input")
    return grad.to_numpy().astype(np.float64)
