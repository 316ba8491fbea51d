"""The Tensor layer itself: the seed examples, display, errors and argument checks.

Per-op numerical coverage lives in the conformance suite (burnish.conformance); these tests
cover what belongs to core: how tensors are made, shown, checked and moved.
"""

import math

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor


@pytest.fixture
def device():
    return bn.backend("ndarray").default_device()


def test_seed_example_prints_burn_style(device):
    a = Tensor.from_data([[2.0, 3.0], [4.0, 5.0]], device=device)
    b = Tensor.ones_like(a)
    text = str(a + b)
    assert "[[3., 4.]," in text or "[[3.0, 4.0]," in text
    for part in ("shape:  [2, 2]", "device:  cpu:0", 'backend:  "ndarray"', 'kind:  "Float"',
                 'dtype:  "float32"'):
        assert part in text


def test_gelu_custom_matches_functional(device):
    def gelu_custom(x: Tensor) -> Tensor:
        x = x * ((x / math.sqrt(2)).erf() + 1)
        return x / 2

    x = Tensor.from_data(np.linspace(-4, 4, 33), device=device)
    np.testing.assert_allclose(gelu_custom(x).to_numpy(), bn.functional.gelu(x).to_numpy(),
                               rtol=1e-12)


def test_python_values_get_default_dtypes(device):
    assert Tensor.from_data([1.5], device=device).dtype is bn.float32
    assert Tensor.from_data([1], device=device).dtype is bn.int64
    assert Tensor.from_data([True], device=device).dtype is bn.bool_
    assert Tensor.from_data(np.zeros(2, np.float64), device=device).dtype is bn.float64


def test_tensors_cannot_be_made_directly():
    with pytest.raises(TypeError, match="Tensor.from_data"):
        Tensor([1, 2])


def test_binary_shape_error_names_both_shapes(device):
    a = Tensor.zeros([2, 3], device=device)
    b = Tensor.zeros([4, 3], device=device)
    with pytest.raises(bn.ShapeError, match=r"\[2, 3\] and \[4, 3\]"):
        a + b


def test_matmul_error_names_both_shapes(device):
    a = Tensor.zeros([2, 3], device=device)
    with pytest.raises(bn.ShapeError, match=r"\[2, 3\] @ \[4, 5\]"):
        a @ Tensor.zeros([4, 5], device=device)


def test_bool_arithmetic_is_refused(device):
    t = Tensor.from_data([True, False], device=device)
    with pytest.raises(bn.DTypeError, match="bool"):
        t + t


def test_devices_of_different_backends_are_refused(device):
    class Other:
        name = "other"

    a = Tensor.zeros([2], device=device)
    b = Tensor.zeros([2], device=device)
    b._device = bn.Device(Other(), "cpu", 0)  # a device that belongs to another backend
    with pytest.raises(bn.DeviceError, match="different devices"):
        a + b


def test_item_and_truth(device):
    assert Tensor.from_data([[3.5]], device=device).item() == 3.5
    with pytest.raises(bn.BurnishError, match=r"shape \[2\]"):
        Tensor.zeros([2], device=device).item()
    with pytest.raises(bn.BurnishError, match="ambiguous"):
        bool(Tensor.zeros([2], device=device))


def test_tensors_refuse_pickle(device):
    import pickle

    with pytest.raises(bn.BurnishError, match="burnish.record"):
        pickle.dumps(Tensor.zeros([2], device=device))


def test_eq_returns_a_tensor_and_hash_is_identity(device):
    a = Tensor.from_data([1, 2], device=device)
    assert (a == 1).tolist() == [True, False]
    assert {a: 1}[a] == 1


def test_setitem_rebinds_to_an_updated_copy(device):
    a = Tensor.zeros([2, 3], device=device)
    alias = a
    original = a.to_numpy().copy()
    a[0, 1:] = 5.0
    assert a.tolist() == [[0.0, 5.0, 5.0], [0.0, 0.0, 0.0]]
    assert alias is a
    assert original.sum() == 0


def test_display_summarises_large_tensors(device):
    text = str(Tensor.zeros([100, 100], device=device))
    assert "..." in text and "shape:  [100, 100]" in text


def test_to_device_by_name(device):
    a = Tensor.from_data([1.0], device=device)
    assert a.to_device("ndarray").device == device
    with pytest.raises(bn.DeviceError, match="no device 7"):
        a.to_device("ndarray:7")
