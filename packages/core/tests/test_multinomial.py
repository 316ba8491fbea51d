"""``Tensor.multinomial``: its argument and value checks, and the shapes at the edges (the
draws themselves are checked on every backend by the conformance suite's test_random.py)."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor


@pytest.mark.parametrize(("weights", "kwargs", "error", "message"), [
    ([1, 2], {}, bn.DTypeError, "multinomial needs a float tensor, got int64"),
    ([[[1.0]]], {}, bn.ShapeError, r"1-d \[categories\] or 2-d \[rows, categories\], got "
                                   r"shape \[1, 1, 1\]"),
    (np.zeros((2, 0), np.float32), {}, bn.ShapeError, "no categories"),
    ([1.0, 2.0], {"num_samples": 0}, ValueError, "num_samples must be >= 1, got 0"),
    ([1.0, 2.0], {"num_samples": 1.0}, TypeError, "num_samples must be an int, got 1.0"),
    ([1.0, 2.0], {"num_samples": 3}, bn.ShapeError,
     "cannot draw 3 samples without replacement from 2 categories"),
    ([1.0, -2.0], {}, ValueError, r"non-negative, got -2.0 at index \[0, 1\]"),
    ([1.0, float("nan")], {}, ValueError, r"finite, got nan at index \[0, 1\]"),
    ([[1.0, 1.0], [0.0, 0.0]], {}, ValueError, "row 1 of the weights is all zeros"),
    ([0.0, 1.0, 0.0], {"num_samples": 2}, ValueError,
     "row 0 of the weights has 1 positive weights, too few to draw 2 distinct samples"),
])
def test_bad_arguments_and_values_name_the_problem(weights, kwargs, error, message):
    kwargs = {"num_samples": 1, **kwargs}
    with pytest.raises(error, match=message):
        Tensor.from_data(weights).multinomial(**kwargs)


def test_with_replacement_more_samples_than_categories_and_one_positive_weight():
    out = Tensor.from_data([0.0, 3.0, 0.0]).multinomial(5, replacement=True)
    assert out.dtype is bn.int64 and out.tolist() == [1] * 5


def test_values_on_a_device_are_checked_only_in_debug_mode(values_on_device):
    weights = Tensor.from_data([[1.0, -1.0]])
    weights.multinomial(1)  # unchecked: reading a device's values would cost a synchronisation
    bn.set_debug(True)
    with pytest.raises(ValueError, match="non-negative"):
        weights.multinomial(1)


def test_half_weights_zero_rows_and_the_free_function():
    weights = Tensor.from_data([[0.0, 1.0, 2.0]], dtype="float16")
    out = bn.multinomial(weights, 2)
    assert out.shape == bn.Shape([1, 2]) and sorted(out.tolist()[0]) == [1, 2]
    empty = Tensor.zeros((0, 4)).multinomial(3, replacement=True)
    assert empty.dtype is bn.int64 and list(empty.shape) == [0, 3]


def test_the_same_seed_gives_the_same_samples():
    weights = Tensor.ones((2, 50))
    bn.seed(5)
    first = weights.multinomial(10).tolist(), weights.multinomial(10, True).tolist()
    bn.seed(5)
    assert (weights.multinomial(10).tolist(), weights.multinomial(10, True).tolist()) == first
