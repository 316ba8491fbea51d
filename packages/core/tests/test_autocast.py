"""burnish.autocast: which ops compute in the low dtype and which in float32, gradients of
float32 leaves through it, nesting, threads and the decorator form."""

import threading

import numpy as np
import pytest

import burnish as bn
import burnish.functional as F
from burnish import Distribution, Tensor

BACKENDS = ["ndarray", "autodiff+ndarray"]
LOW = [bn.bfloat16, bn.float16]


def _normal(shape, device, dtype=bn.float32):
    return Tensor.random(shape, Distribution.normal(0.0, 1.0), device, dtype)


@pytest.fixture(params=BACKENDS)
def device(request):
    bn.seed(0)
    return bn.backend(request.param).default_device()


@pytest.mark.parametrize("low", LOW)
def test_products_compute_in_the_low_dtype(device, low):
    x, w = _normal([4, 8], device), _normal([8, 3], device)
    bias = _normal([3], device)
    image, kernel = _normal([2, 3, 6, 6], device), _normal([5, 3, 3, 3], device)
    q, k, v = (_normal([1, 2, 5, 4], device) for _ in range(3))
    with bn.autocast(low):
        products = {
            "matmul": x @ w,
            "linear": F.linear(x, w, bias),
            "conv2d": F.conv2d(image, kernel, _normal([5], device), padding=1),
            "conv_transpose2d": F.conv_transpose2d(image, _normal([3, 2, 3, 3], device)),
            "attention": F.scaled_dot_product_attention(q, k, v, causal=True),
        }
    for name, y in products.items():
        assert y.dtype is low, name
    expected = x.to_numpy() @ w.to_numpy() + bias.to_numpy()
    np.testing.assert_allclose(products["linear"].to_numpy().astype(np.float32), expected,
                               rtol=0.05, atol=0.05)
    assert (x @ w).dtype is bn.float32  # outside, as before


@pytest.mark.parametrize("low", LOW)
def test_precision_sensitive_ops_compute_in_float32(device, low):
    x = _normal([3, 5], device, low)
    with bn.autocast(low):
        outputs = {
            "softmax": F.softmax(x, 1), "log_softmax": F.log_softmax(x, -1),
            "sum": x.sum(), "sum_dim": x.sum(1), "mean": x.mean(0), "mean_dims": x.mean([0, 1]),
            "var": x.var(1), "std": x.std(), "prod": x.prod(1), "exp": x.exp(),
            "log": x.abs().log(), "pow": x.pow(2.0), "rsqrt": (x * x + 1.0).rsqrt(),
        }
        kept = {"relu": F.relu(x), "add": x + x, "max": x.max(1), "tanh": x.tanh()}
    for name, y in outputs.items():
        assert y.dtype is bn.float32, name
    for name, y in kept.items():
        assert y.dtype is low, name
    np.testing.assert_allclose(outputs["softmax"].to_numpy().sum(1), 1.0, rtol=1e-6)
    assert x.sum().dtype is low  # outside autocast a 16-bit sum stays 16-bit


def test_float64_int_and_bool_inputs_are_not_cast(device):
    if bn.float64 not in device.backend.dtypes(device):
        pytest.skip("no float64")
    a = _normal([2, 3], device, bn.float64)
    ints = Tensor.from_data([[1, 2], [3, 4]], device)
    with bn.autocast():
        assert (a @ a.transpose()).dtype is bn.float64
        assert (ints @ ints).dtype is bn.int64
        assert ints.sum().dtype is bn.int64


@pytest.mark.parametrize("low", LOW)
def test_gradients_of_float32_leaves_are_float32(low):
    device = bn.backend("autodiff+ndarray").default_device()
    x = _normal([4, 3, 6, 6], device)
    kernel = _normal([2, 3, 3, 3], device).require_grad()
    w = _normal([2 * 4 * 4, 5], device).require_grad()
    bias = _normal([5], device).require_grad()
    with bn.autocast(low):
        features = F.relu(F.conv2d(x, kernel)).reshape([4, -1])
        scores = F.linear(features, w, bias)
        assert scores.dtype is low
        loss = F.log_softmax(scores, 1).mean()
    assert loss.dtype is bn.float32
    grads = loss.backward()
    for leaf in (kernel, w, bias):
        grad = leaf.grad(grads)
        assert grad.dtype is bn.float32
        assert np.isfinite(grad.to_numpy()).all() and np.abs(grad.to_numpy()).sum() > 0
    # The same gradient as in float32, within the low dtype's precision.
    loss32 = F.log_softmax(F.linear(F.relu(F.conv2d(x, kernel)).reshape([4, -1]), w, bias),
                           1).mean()
    np.testing.assert_allclose(w.grad(grads).to_numpy(), w.grad(loss32.backward()).to_numpy(),
                               rtol=0.1, atol=0.1)


def test_a_weight_used_many_times_is_cast_once_per_context(monkeypatch):
    """As torch.autocast: the cast of a tensor that requires grad is made once per outermost
    context (a recurrent layer's weights at every step), and its gradient sums every use."""
    device = bn.backend("autodiff+ndarray").default_device()
    w = _normal([6, 6], device).require_grad()
    x = _normal([3, 6], device)
    casts = []
    original = Tensor.cast

    def counting(self, dtype):
        casts.append(dtype)
        return original(self, dtype)

    monkeypatch.setattr(Tensor, "cast", counting)
    with bn.autocast():
        h = x
        for _ in range(5):
            h = (h @ w).tanh()
            with bn.autocast(bn.float16):  # another dtype: a cast of its own, cached as well
                h.detach() @ w
    # bfloat16: x (no grad: not cached) and w once; float16: h each time and w once.
    assert casts.count(bn.bfloat16) == 2 and casts.count(bn.float16) == 6, casts
    with bn.autocast():  # a new outermost context casts afresh
        x @ w
    assert casts.count(bn.bfloat16) == 4, casts
    monkeypatch.setattr(Tensor, "cast", original)
    grads = h.sum().backward()
    # The gradient five separate casts give, within bfloat16's precision (the cached cast sums
    # the uses' gradients in bfloat16 before its one cast back).
    h2 = x
    with bn.autocast():
        for _ in range(5):
            h2 = (h2 @ w.cast(bn.bfloat16)).tanh()
    np.testing.assert_allclose(w.grad(grads).to_numpy(), w.grad(h2.sum().backward()).to_numpy(),
                               rtol=0.05, atol=0.05)


def test_recurrent_cells_run_in_float32_under_autocast(device):
    x, h = _normal([2, 4], device), _normal([2, 3], device)
    w_i, w_h = _normal([4, 12], device), _normal([3, 12], device)
    with bn.autocast():
        hidden, cell = F.lstm_cell(x @ w_i, h @ w_h, h)  # bfloat16 gates, a float32 state
        gru = F.gru_cell(x @ w_i[:, :9], h @ w_h[:, :9], h)
    assert hidden.dtype is cell.dtype is gru.dtype is bn.float32


def test_nesting_disabling_and_restoring():
    x = _normal([2, 2], bn.backend("ndarray").default_device())
    assert bn.amp.active_dtype() is None
    with bn.autocast(bn.float16):
        assert (x @ x).dtype is bn.float16
        with bn.autocast(bn.bfloat16):
            assert (x @ x).dtype is bn.bfloat16
            with bn.autocast(enabled=False):
                assert (x @ x).dtype is bn.float32
                assert bn.amp.active_dtype() is None
            assert (x @ x).dtype is bn.bfloat16
        assert (x @ x).dtype is bn.float16
    assert (x @ x).dtype is bn.float32
    with pytest.raises(ValueError), bn.autocast():
        raise ValueError("restored on errors too")
    assert bn.amp.active_dtype() is None


def test_decorator_and_reentrant_instance():
    x = _normal([2, 2], bn.backend("ndarray").default_device())
    half = bn.autocast(bn.float16)

    @half
    def product():
        return x @ x

    assert product().dtype is bn.float16
    assert (x @ x).dtype is bn.float32
    with half:
        with half:
            assert (x @ x).dtype is bn.float16
        assert (x @ x).dtype is bn.float16
    assert (x @ x).dtype is bn.float32


def test_state_is_per_thread():
    x = _normal([2, 2], bn.backend("ndarray").default_device())
    seen = []
    with bn.autocast():
        thread = threading.Thread(target=lambda: seen.append((x @ x).dtype))
        thread.start()
        thread.join()
        assert (x @ x).dtype is bn.bfloat16
    assert seen == [bn.float32]


def test_bad_dtype_names_it():
    with pytest.raises(bn.DTypeError, match="bfloat16 or float16, got float32"):
        bn.autocast(bn.float32)


@pytest.mark.parametrize("name", ["autodiff+rocm", "autodiff+wgpu"])
@pytest.mark.parametrize("low", LOW)
def test_products_and_gradients_on_the_jit_backends(name, low):
    try:
        device = bn.backend(name).default_device()
    except (bn.BackendNotInstalledError, bn.UnsupportedError) as error:
        pytest.skip(str(error))
    if low not in device.backend.dtypes(device):
        pytest.skip(f"{name} offers no {low} here")
    bn.seed(0)
    x, image = _normal([4, 16], device), _normal([2, 3, 6, 6], device)
    w = _normal([16, 5], device).require_grad()
    kernel = _normal([4, 3, 3, 3], device).require_grad()
    with bn.autocast(low):
        scores = x @ w
        features = F.conv2d(image, kernel, padding=1)
        loss = F.log_softmax(scores, 1).mean() + features.mean()
    assert scores.dtype is features.dtype is low and loss.dtype is bn.float32
    grads = loss.backward()
    reference = (F.log_softmax(x @ w, 1).mean() + F.conv2d(image, kernel, padding=1).mean())
    expected = reference.backward()
    for leaf in (w, kernel):
        assert leaf.grad(grads).dtype is bn.float32
        np.testing.assert_allclose(leaf.grad(grads).to_numpy(), leaf.grad(expected).to_numpy(),
                                   rtol=0.05, atol=0.02)
