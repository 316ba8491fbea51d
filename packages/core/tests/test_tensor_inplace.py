"""In-place arithmetic on Tensor: the values, the dtype and shape it keeps, and value semantics for
every other tensor."""

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.errors import DTypeError, ShapeError


@pytest.fixture(params=["ndarray", "autodiff+ndarray"])
def device(request):
    return bn.backend(request.param).default_device()


@pytest.mark.parametrize("name, operand, expected", [
    ("add_", 2.0, [3.0, 4.0]), ("sub_", 2.0, [-1.0, 0.0]), ("mul_", 2.0, [2.0, 4.0]),
    ("div_", 2.0, [0.5, 1.0]), ("add_", [1.0, 3.0], [2.0, 5.0]), ("sub_", [1.0, 3.0], [0.0, -1.0]),
    ("mul_", [1.0, 3.0], [1.0, 6.0]), ("div_", [4.0, 8.0], [0.25, 0.25]),
])
def test_in_place_ops_give_the_out_of_place_values(device, name, operand, expected):
    x = Tensor.from_data([1.0, 2.0], device) + 0
    if isinstance(operand, list):
        operand = Tensor.from_data(operand, device)
    assert getattr(x, name)(operand) is x
    np.testing.assert_array_equal(x.to_numpy(), expected)
    assert x.dtype is bn.float32


def test_other_tensors_keep_their_values(device):
    x = Tensor.from_data([1.0, 2.0], device) + 0
    y = x.reshape([1, 2])  # a view of x's memory on ndarray
    z = x.detach()
    same = x
    x.mul_(10.0).add_(1.0)
    np.testing.assert_array_equal(y.to_numpy(), [[1.0, 2.0]])
    # detach may return x itself without autodiff: then z is x, rebound (PyTorch's semantics).
    np.testing.assert_array_equal(z.to_numpy(), [11.0, 21.0] if z is x else [1.0, 2.0])
    assert same is x and same.to_numpy()[0] == 11.0


def test_the_operand_may_be_the_tensor_itself(device):
    x = Tensor.from_data([1.0, 2.0], device) + 0
    np.testing.assert_array_equal(x.mul_(x).to_numpy(), [1.0, 4.0])


def test_operands_broadcast_into_the_tensor(device):
    x = Tensor.zeros([2, 3], device) + 0
    x.add_(Tensor.from_data([1.0, 2.0, 3.0], device))
    np.testing.assert_array_equal(x.to_numpy(), [[1.0, 2.0, 3.0]] * 2)


def test_an_operand_that_would_grow_the_tensor_raises(device):
    x = Tensor.from_data([1.0, 2.0, 3.0], device)
    with pytest.raises(ShapeError, match=r"\[2, 3\].*\[3\]"):
        x.add_(Tensor.zeros([2, 3], device))
    np.testing.assert_array_equal(x.to_numpy(), [1.0, 2.0, 3.0])


def test_an_operand_that_would_change_the_dtype_raises(device):
    ints = Tensor.from_data([1, 2], device)
    with pytest.raises(DTypeError, match="int64.*0.5"):
        ints.mul_(0.5)
    with pytest.raises(DTypeError, match="int64.*float32"):
        ints.add_(Tensor.from_data([1.0, 2.0], device))
    with pytest.raises(DTypeError, match="int64"):
        ints.div_(2)
    with pytest.raises(DTypeError, match="bool"):
        Tensor.from_data([True], device).add_(True)
    np.testing.assert_array_equal(ints.add_(3).to_numpy(), [4, 5])


def test_a_narrower_operand_is_cast(device):
    x = Tensor.from_data([1.0, 2.0], device, dtype="float64")
    x.add_(Tensor.from_data([1.0, 1.0], device, dtype="float32"))
    assert x.dtype is bn.float64
    np.testing.assert_array_equal(x.to_numpy(), [2.0, 3.0])
