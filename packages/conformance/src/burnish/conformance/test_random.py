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


# -- multinomial: category indices drawn from rows of weights -----------------------------------

WEIGHTS = [[1.0, 0.0, 2.0, 0.5, 0.0], [0.0, 3.0, 0.0, 1.0, 1.0]]


@pytest.mark.parametrize("replacement", [False, True], ids=["distinct", "replacement"])
@pytest.mark.parametrize(("rows", "samples"), [(None, 1), (None, 3), (2, 3)],
                         ids=["1d-1", "1d-3", "2d-3"])
def test_multinomial_shapes_and_range(device, rows, samples, replacement):
    weights = WEIGHTS[1] if rows is None else WEIGHTS
    out = Tensor.from_data(weights, device).multinomial(samples, replacement)
    shape = (samples,) if rows is None else (rows, samples)
    values = host(out, shape, burnish.int64).reshape(-1, samples)
    for row, drawn in zip(np.reshape(weights, (-1, 5)), values):
        assert (row[drawn] > 0).all(), f"drew zero-weight categories: {drawn} from {row}"
        if not replacement:
            assert len(set(drawn.tolist())) == samples, f"repeated categories: {drawn}"


def test_multinomial_without_replacement_draws_every_positive_category(device):
    out = burnish.multinomial(Tensor.from_data(WEIGHTS, device), 3)
    values = host(out, (2, 3), burnish.int64)
    assert [sorted(row) for row in values.tolist()] == [[0, 2, 3], [1, 3, 4]]


def test_multinomial_frequencies_follow_the_weights(device):
    burnish.seed(7)
    weights = np.array([1.0, 0.0, 2.0, 1.0])
    count = 4000
    values = host(Tensor.from_data(weights, device, "float32").multinomial(count, True), (count,),
                  burnish.int64)
    frequencies = np.bincount(values, minlength=4) / count
    expected = weights / weights.sum()
    bound = SIGMAS * np.sqrt(expected * (1 - expected) / count)
    assert frequencies[1] == 0.0
    assert (np.abs(frequencies - expected) <= bound).all(), (
        f"frequencies {frequencies} are not {expected} +- {bound}")
    # The first of a draw without replacement follows the weights as well.
    firsts = host(Tensor.from_data(np.tile(weights, (count, 1)), device,
                                   "float32").multinomial(2),
                  (count, 2), burnish.int64)[:, 0]
    frequencies = np.bincount(firsts, minlength=4) / count
    assert (np.abs(frequencies - expected) <= bound).all(), (
        f"first draws' frequencies {frequencies} are not {expected} +- {bound}")


def test_multinomial_seed_makes_draws_reproducible(device):
    weights = Tensor.ones((3, 8), device)

    def draws():
        return [host(weights.multinomial(4, replacement)) for replacement in (False, True)]

    burnish.seed(99)
    first = draws()
    second = draws()
    burnish.seed(99)
    again = draws()
    for a, b, c in zip(first, second, again):
        assert np.array_equal(a, c)
        assert not np.array_equal(a, b)


@pytest.mark.requires_autodiff
def test_multinomial_has_no_gradient(device):
    weights = Tensor.from_data(WEIGHTS, device).require_grad()
    out = weights.multinomial(2)
    assert out.dtype is burnish.int64 and not out.is_require_grad()
