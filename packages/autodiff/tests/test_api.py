"""The autodiff backend as users meet it: Burn's example, the decorator, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import AutodiffError, Tensor
from burnish.autodiff import Autodiff, Gradients


def test_burns_example_runs_as_written():
    B = Autodiff(bn.backend("ndarray"))
    x = Tensor.random([32, 32], bn.Distribution.default(), device=B.default_device())
    y = Tensor.random([32, 32], bn.Distribution.default(), device=B.default_device()).require_grad()
    tmp = x + y
    tmp = tmp.matmul(x)
    tmp = tmp.exp()
    grads = tmp.backward()
    y_grad = y.grad(grads)
    print(y_grad)
    xs, ys = x.to_numpy().astype(np.float64), y.to_numpy().astype(np.float64)
    expected = np.exp((xs + ys) @ xs) @ xs.T
    np.testing.assert_allclose(y_grad.to_numpy(), expected, rtol=1e-4)
    assert isinstance(grads, Gradients)
    assert y_grad.backend is bn.backend("ndarray")


def test_one_instance_per_inner_backend_and_strategy(ad):
    nd = bn.backend("ndarray")
    assert Autodiff(nd) is ad is bn.backend("autodiff+ndarray")
    balanced = Autodiff(nd, checkpointing="balanced")
    assert balanced is bn.backend("autodiff-balanced+ndarray") and balanced is not ad
    assert ad.name == "autodiff+ndarray" and balanced.name == "autodiff-balanced+ndarray"
    assert ad.inner_backend is nd


def test_devices_wrap_the_inner_ones(ad):
    nd = bn.backend("ndarray")
    device = ad.default_device()
    assert device.backend is ad and device.native is nd.default_device()
    assert ad.devices() == [device] and ad.wrap_device(nd.default_device()) is device
    assert ad.dtypes(device) == nd.dtypes(nd.default_device())


def test_bad_arguments():
    with pytest.raises(TypeError, match="wraps a backend"):
        Autodiff("ndarray")
    with pytest.raises(ValueError, match="checkpointing"):
        Autodiff(bn.backend("ndarray"), checkpointing="sometimes")


@pytest.mark.parametrize("method", ["backward", "require_grad", "inner"])
def test_plain_backends_say_how_to_wrap_them(method):
    x = Tensor.ones([2], device="ndarray")
    with pytest.raises(AutodiffError) as error:
        getattr(x, method)()
    message = str(error.value)
    assert f"{method}()" in message and "'ndarray' has none" in message
    assert "Autodiff(burnish.backend('ndarray'))" in message and "autodiff+ndarray" in message


def test_plain_backends_detach_and_never_require_grad():
    x = Tensor.ones([2], device="ndarray")
    assert x.detach() is x and not x.is_require_grad()
    with pytest.raises(AutodiffError):
        x.grad(None)


def test_from_inner_wraps_with_autodiff_by_default(ad):
    x = Tensor.ones([2], device="ndarray")
    y = Tensor.from_inner(x)
    assert y.backend is ad and y.inner().primitive is x.primitive
    with pytest.raises(AutodiffError, match="wraps"):
        Tensor.from_inner(y, ad)


def test_grad_needs_gradients(ad):
    x = Tensor.ones([2], device=ad).require_grad()
    with pytest.raises(TypeError, match="Gradients"):
        x.grad({})


def test_display_and_repr(ad):
    x = Tensor.ones([2], device=ad).require_grad()
    assert "autodiff+ndarray" in str(x)
    grads = (x * 2.0).backward()
    assert repr(grads) == "Gradients(1 leaves, ndarray)"
    assert x in grads and len(grads) == 1
    assert "leaf" in repr(x.primitive.node)


def test_the_same_leaf_twice_in_one_op(ad):
    x = Tensor.from_data([1.0, 2.0], device=ad).require_grad()
    grads = bn.cat([x, x, x * 2.0]).sum().backward()
    np.testing.assert_array_equal(x.grad(grads).to_numpy(), [4.0, 4.0])


def test_mixed_dtypes_promote_through_the_graph(ad):
    x = Tensor.from_data([1.0, 2.0], device=ad, dtype="float32").require_grad()
    y = Tensor.from_data([3.0, 4.0], device=ad, dtype="float64").require_grad()
    grads = (x * y).sum().backward()
    assert x.grad(grads).dtype is bn.float32 and y.grad(grads).dtype is bn.float64
    np.testing.assert_array_equal(x.grad(grads).to_numpy(), [3.0, 4.0])


def test_every_protocol_op_is_the_decorators_own():
    # An op inherited from the protocol's defaults would run its composition instead of the
    # inner backend's kernel (other values, a graph of many nodes): every op must be forwarded.
    from burnish.backend import Backend

    inherited = []
    for name in dir(Backend):
        if name.startswith("__") or not callable(getattr(Backend, name)):
            continue
        owner = next(cls for cls in Autodiff.__mro__ if name in vars(cls))
        # WrapsDevices: the device methods every decorator forwards to its inner backend.
        if not owner.__module__.startswith(("burnish.autodiff", "burnish.backend.decorator")):
            inherited.append(name)
    assert inherited == []


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gradients_keep_the_leafs_dtype(ad, dtype):
    import burnish.functional as F

    x = Tensor.from_data(np.linspace(-1, 1, 24).reshape(1, 2, 3, 4), device=ad,
                         dtype=dtype).require_grad()
    w = Tensor.from_data(np.full((3, 2, 2, 2), 0.1), device=ad, dtype=dtype).require_grad()
    out = F.softmax(F.conv2d(x, w, padding=1), 1) * F.interpolate(x, (4, 5), mode="bilinear")[
        :, :1, :, :]
    grads = (F.max_pool2d(out, 2) + F.avg_pool2d(out, 2)).sum().backward()
    for leaf in (x, w):
        grad = leaf.grad(grads)
        assert grad.dtype is leaf.dtype and grad.shape == leaf.shape
        assert np.isfinite(grad.to_numpy().astype(np.float64)).all()


def test_in_place_ops_on_tracked_tensors_record_the_op_and_keep_saved_values(ad):
    x = Tensor.from_data([1.0, 2.0], device=ad).require_grad()
    y = x * x  # saves x
    y.mul_(3.0).add_(x).sub_(1.0)  # y = 3 x^2 + x - 1
    z = x + 0  # a tracked non-leaf, updated by an untracked operand
    z.div_(Tensor.from_data([2.0, 4.0], device=ad))
    grads = (y + z).sum().backward()
    np.testing.assert_allclose(x.grad(grads).to_numpy(), [6 * 1 + 1 + 0.5, 6 * 2 + 1 + 0.25])
    np.testing.assert_array_equal(x.to_numpy(), [1.0, 2.0])


def test_in_place_ops_on_untracked_tensors_leave_shared_ones_alone(ad):
    from burnish.tensor import core

    x = Tensor.from_data([1.0, 2.0], device=ad) + 0
    shared = core.make(x._prim, x._device, x._dtype)
    x.mul_(2.0).add_(Tensor.from_data([1.0, 1.0], device=ad))
    np.testing.assert_array_equal(x.to_numpy(), [3.0, 5.0])
    np.testing.assert_array_equal(shared.to_numpy(), [1.0, 2.0])
