"""Random tensors: ranges and moments of each distribution, every dtype, and reproducible
seeding. Bounds are six standard errors wide, so a correct backend fails about once in 10^8."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Distribution, Tensor, bool_
from burnish.conformance.compare import host
from burnish.conformance.samples import FLOATS, INTS, NUMERIC, ids
from burnish.tensor_data import tolerance

COUNT = 100_000
SIGMAS = 6.0


def draw(device, dtype, distribution=None, shape=(COUNT,)) -> np.ndarray:
    out = Tensor.random(shape, distribution, device, dtype)
    return host(out, shape, dtype).astype(np.float64)


def assert_mean(values: np.ndarray, mean: float, std: float, dtype) -> None:
    """The sample mean is ``mean`` within six standard errors, plus the dtype's rounding."""
    bound = SIGMAS * std / np.sqrt(values.size) + tolerance(dtype)[0] * (abs(mean) + std)
    assert abs(values.mean() - mean) <= bound, f"mean {values.mean()} is not {mean} +- {bound}"


def assert_within(values: np.ndarray, low: float, high: float) -> None:
    """Every draw lies in ``[low, high)``: rounding to a narrow dtype must not reach ``high``."""
    smallest, largest = values.min(initial=low), values.max(initial=low)
    assert low <= smallest and largest < high, (
        f"draws span [{smallest}, {largest}], outside [{low}, {high})")


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_default_is_uniform_on_unit_interval(device, dtype):
    values = draw(device, dtype)
    assert_within(values, 0.0, 1.0)
    assert_mean(values, 0.5, np.sqrt(1 / 12), dtype)


@pytest.mark.parametrize(("low", "high"), [(-3.0, 5.0), (10.0, 10.5), (-1e-3, 0.0)])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_uniform(device, dtype, low, high):
    values = draw(device, dtype, Distribution.uniform(low, high))
    # The bounds as the dtype holds them.
    low, high = (float(np.array(v, dtype=dtype.numpy).astype(np.float64)) for v in (low, high))
    assert_within(values, low, high)
    assert_mean(values, (low + high) / 2, (high - low) / np.sqrt(12), dtype)


@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_uniform_ints_are_floored(device, dtype):
    values = draw(device, dtype, Distribution.uniform(0, 10))
    assert set(np.unique(values)) == set(range(10))
    assert_mean(values, 4.5, np.sqrt(99 / 12), dtype)


@pytest.mark.parametrize(("mean", "std"), [(0.0, 1.0), (3.0, 0.5), (-2.0, 4.0)])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_normal(device, dtype, mean, std):
    values = draw(device, dtype, Distribution.normal(mean, std))
    assert_mean(values, mean, std, dtype)
    spread = values.std()
    bound = SIGMAS * std / np.sqrt(2 * COUNT) + tolerance(dtype)[0] * (abs(mean) + std)
    assert abs(spread - std) <= bound, f"standard deviation {spread} is not {std} +- {bound}"
    # About 0.27% of a normal sample lies beyond three standard deviations.
    tails = np.mean(np.abs(values - mean) > 3 * std)
    assert 0.0015 < tails < 0.0040


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
@pytest.mark.parametrize("dtype", NUMERIC + (bool_,), ids=ids(NUMERIC + (bool_,)))
def test_bernoulli(device, dtype, p):
    values = draw(device, dtype, Distribution.bernoulli(p))
    assert set(np.unique(values)) <= {0.0, 1.0}
    assert_mean(values, p, np.sqrt(p * (1 - p)), dtype)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (257, 1023)], ids=ids([(), (0,), (3, 0, 2),
                                                                             (257, 1023)]))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_shapes(device, dtype, shape):
    assert_within(draw(device, dtype, shape=shape), 0.0, 1.0)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_random_like(device, dtype):
    base = Tensor.zeros((3, 4), device, dtype)
    out = base.random_like(Distribution.uniform(2.0, 3.0))
    assert_within(host(out, (3, 4), dtype).astype(np.float64), 2.0, 3.0)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_seed_makes_draws_reproducible(device, dtype):
    burnish.seed(1234)
    first = draw(device, dtype, shape=(1000,))
    second = draw(device, dtype, shape=(1000,))
    burnish.seed(1234)
    again = draw(device, dtype, shape=(1000,))
    burnish.seed(4321)
    other = draw(device, dtype, shape=(1000,))
    assert np.array_equal(first, again)
    assert not np.array_equal(first, second)
    assert not np.array_equal(first, other)
