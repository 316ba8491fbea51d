"""Gradient checks: what ``backward()`` gives against central finite differences.

A check differentiates ``sum(fn(*inputs) * weights)`` with fixed random ``weights``, so the rule
under test receives an upstream gradient that is not all ones and every output element counts.

The gradient dtype (``grad_dtype(device)``, the ``grad_dtype`` fixture) is float64 where the
device under test has it, else float32 (WebGPU has no float64). The checks run in one of two
modes accordingly:

- **float64**: inputs and weights are float64 tensors on the device under test, and the finite
  differences evaluate the same ``fn`` through that backend (untracked), so the check holds the
  backward rules to the backend's own forward ops. Tolerances are the ones given (by default
  ``RTOL`` = 1e-5, ``ATOL`` = 1e-6: central differences with ``EPS`` = 1e-6 are accurate to about
  1e-10 in float64, so everything above that is a wrong rule).
- **float32**: the analytic gradient is ``backward()`` on the backend under test in float32; the
  reference is central finite differences of the same ``fn`` computed in float64 on the ndarray
  backend (NumPy), at the same point (the inputs and weights as float32 holds them). So ``fn``
  must make any tensor it needs on its inputs' device (``x.device``) and in their dtype
  (``x.dtype``), never on a captured device or in a hard-coded float dtype. The reference is as
  exact as in float64 mode; what differs is the rounding of float32 arithmetic in the forward
  and backward passes under test, so every tolerance a check is given is multiplied by
  ``FLOAT32_SCALE`` (100: the defaults become rtol 1e-3, atol 1e-4, and a check that already
  passes a looser tolerance, for an ill-conditioned function, stays that much looser). ``eps``
  is the reference's step and is used as given.

Gradients derived by hand are compared with ``assert_gradient``: in float64 with the tolerances
given (by default NumPy's ``assert_allclose``: rtol 1e-7), in float32 with at least
``FLOAT32_RTOL`` (1e-5, about 80 float32 ulps) relative and ``FLOAT32_RTOL`` times the largest
expected magnitude absolute (results that accumulate terms may cancel). Expected values are
computed in float64 from the inputs as the gradient dtype holds them (``rounded``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import burnish
from burnish import Device, DType, Tensor, float32, float64
from burnish.conformance.compare import host
from burnish.conformance.samples import rng

#: The step of the central differences: their truncation error (~ eps^2) and rounding error
#: (~ 1e-16 / eps) are both near 1e-10 in float64.
EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-6
#: How much looser every finite-difference tolerance is when the gradients are float32.
FLOAT32_SCALE = 100.0
#: The least relative tolerance of a gradient derived by hand when it is float32.
FLOAT32_RTOL = 1e-5
#: The backend that computes the float64 reference of float32 gradient checks.
REFERENCE_BACKEND = "ndarray"


def grad_dtype(device: Device) -> DType:
    """The dtype of the gradient checks on ``device``: float64 where it has it, else float32."""
    return float64 if float64 in device.backend.dtypes(device) else float32


def reference_device() -> Device:
    """The device of the float64 reference of float32 gradient checks (ndarray's CPU). Skips
    the calling test, naming the package, when burnish-backend-ndarray is not installed."""
    try:
        reference = burnish.backend(REFERENCE_BACKEND)
    except burnish.BackendNotInstalledError:
        pytest.skip("float32 gradient checks need the float64 reference of burnish-backend-ndarray"
                    " (pip install 'burnish-conformance[float32-gradients]')")
    return reference.default_device()


def rounded(values: np.ndarray | Sequence, dtype: DType) -> np.ndarray:
    """``values`` as ``dtype`` holds them, as a float64 array (for references by hand)."""
    return np.asarray(values).astype(dtype.numpy).astype(np.float64)


def check_gradients(fn: Callable[..., Tensor], *values: np.ndarray | Sequence, device: Device,
                    rtol: float = RTOL, atol: float = ATOL, eps: float = EPS,
                    key: object = 0) -> None:
    """Assert that the gradient ``backward()`` gives for every float input of ``fn`` matches
    central finite differences. ``values`` are arrays: float ones become tensors of the gradient
    dtype (``grad_dtype(device)``) that require grad; int and bool ones (indices, masks) are
    passed as constant tensors. A larger ``eps`` suits functions that are linear but computed
    partly in a narrower dtype. In float32 mode the tolerances are scaled by ``FLOAT32_SCALE``
    and the finite differences run in float64 on the reference backend (see the module)."""
    dtype = grad_dtype(device)
    arrays = [_array(v, dtype) for v in values]
    tensors = [_tensor(a, device, dtype, track=True) for a in arrays]
    out = fn(*tensors)
    weights = rng("cotangent", tuple(out.shape), key).uniform(-1.0, 1.0, tuple(out.shape))
    weights = rounded(weights, dtype)
    loss = (out * Tensor.from_data(weights, device, dtype)).sum()
    grads = loss.backward()
    if dtype is float64:
        numeric_device = device
    else:
        numeric_device = reference_device()
        rtol, atol = rtol * FLOAT32_SCALE, atol * FLOAT32_SCALE
    for i, (array, tensor) in enumerate(zip(arrays, tensors)):
        if array.dtype.kind != "f":
            continue
        analytic = _host_grad(tensor, grads, i)
        numeric = finite_differences(fn, arrays, i, weights, numeric_device, eps)
        if not np.allclose(analytic, numeric, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), analytic.shape)
            raise AssertionError(
                f"gradient of input {i} (shape {list(array.shape)}, {dtype}) differs from "
                f"central finite differences beyond rtol={rtol}, atol={atol}: at "
                f"{list(map(int, worst))} backward gives {analytic[worst]!r}, finite differences "
                f"{numeric[worst]!r}\nbackward:\n{analytic}\nfinite differences:\n{numeric}")


def gradient(tensor: Tensor, grads: object) -> np.ndarray:
    """``tensor.grad(grads)`` as a float64 array (zeros when there is none), after checking that
    it is a tensor of the inner backend with the leaf's shape and dtype."""
    return _host_grad(tensor, grads, 0)


def assert_gradient(tensor: Tensor, grads: object, expected: Any, rtol: float = 1e-7,
                    atol: float = 0.0) -> None:
    """``gradient(tensor, grads)`` is within ``atol + rtol * |expected|`` of ``expected``,
    where a float32 gradient gets at least float32 tolerances (see the module)."""
    expected = np.asarray(expected, dtype=np.float64)
    if tensor.dtype is not float64:
        rtol = max(rtol, FLOAT32_RTOL)
        atol = max(atol, FLOAT32_RTOL * float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(gradient(tensor, grads), expected, rtol=rtol, atol=atol)


def finite_differences(fn: Callable[..., Tensor], arrays: list[np.ndarray], index: int,
                       weights: np.ndarray, device: Device, eps: float = EPS) -> np.ndarray:
    """d sum(fn(*arrays) * weights) / d arrays[index] by central differences, evaluating ``fn``
    on float64 tensors of ``device``."""
    base = arrays[index]
    result = np.zeros(base.shape)
    flat = result.reshape(-1)
    for j in range(base.size):
        values = []
        for step in (eps, -eps):
            moved = base.copy()
            moved.reshape(-1)[j] += step
            inputs = [_tensor(moved if k == index else a, device, float64, track=False)
                      for k, a in enumerate(arrays)]
            out = host(fn(*inputs)).astype(np.float64)
            values.append(float(np.sum(out * weights)))
        flat[j] = (values[0] - values[1]) / (2 * eps)
    return result


def _array(value: np.ndarray | Sequence, dtype: DType) -> np.ndarray:
    array = np.asarray(value)
    return rounded(array, dtype) if array.dtype.kind == "f" else array


def _tensor(array: np.ndarray, device: Device, dtype: DType, track: bool) -> Tensor:
    if array.dtype.kind != "f":
        return Tensor.from_data(array, device)
    tensor = Tensor.from_data(array, device, dtype)
    return tensor.require_grad() if track else tensor


def _host_grad(tensor: Tensor, grads: object, index: int) -> np.ndarray:
    grad = tensor.grad(grads)
    if grad is None:
        return np.zeros(tuple(tensor.shape))
    inner = tensor.backend.inner_backend  # type: ignore[attr-defined]  # an Autodiff
    if grad.backend is not inner:
        raise AssertionError(f"the gradient of input {index} is a tensor of "
                             f"{grad.backend.name!r}, not of the inner backend {inner.name!r}")
    if tuple(grad.shape) != tuple(tensor.shape) or grad.dtype is not tensor.dtype:
        raise AssertionError(f"the gradient of input {index} is {grad.dtype} {list(grad.shape)}"
                             f", not {tensor.dtype} {list(tensor.shape)} like the input")
    return host(grad).astype(np.float64)
