"""burnish.functional.pad against NumPy's np.pad, its errors, and gradients through it."""

import numpy as np
import pytest

import burnish as bn
import burnish.functional as F
from burnish import Tensor

NUMPY_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}


@pytest.mark.parametrize("mode", list(NUMPY_MODES))
@pytest.mark.parametrize("pads", [(1, 2), (2, 1, 0, 3), (0, 0, 1, 1, 1, 0), (3, 3, 2, 2)])
def test_pad_matches_numpy(mode, pads):
    x = np.arange(2 * 4 * 5, dtype=np.float64).reshape(2, 4, 5)
    out = F.pad(Tensor.from_numpy(x), pads, mode=mode, value=-1.0).to_numpy()
    widths = [(0, 0)] * x.ndim
    for i in range(len(pads) // 2):
        widths[x.ndim - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    kwargs = {"constant_values": -1.0} if mode == "constant" else {}
    np.testing.assert_array_equal(out, np.pad(x, widths, mode=NUMPY_MODES[mode], **kwargs))


def test_pad_keeps_int_dtype():
    out = F.pad(Tensor.from_data([[1, 2, 3]]), (1, 1), value=7)
    assert out.dtype is bn.int64 and out.tolist() == [[7, 1, 2, 3, 7]]


def test_pad_errors_name_the_problem():
    x = Tensor.zeros([2, 3])
    with pytest.raises(bn.ShapeError, match=r"reflect padding \(3, 0\) must be smaller than dim 1"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(bn.ShapeError, match=r"5 sizes do not pair up over the dims of \[2, 3\]"):
        F.pad(x, (1, 1, 1, 1, 1))
    with pytest.raises(bn.ShapeError, match="must be >= 0"):
        F.pad(x, (-1, 0))
    with pytest.raises(ValueError, match="mode must be one of"):
        F.pad(x, (1, 1), mode="mirror")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_gradient_sums_over_every_copy(mode):
    pytest.importorskip("burnish.autodiff", reason="gradients need burnish-autodiff installed")
    backend = bn.backend("autodiff+ndarray")
    x = np.random.default_rng(0).normal(size=(1, 1, 4, 5))
    weights = np.random.default_rng(1).normal(size=(1, 1, 7, 8))
    leaf = Tensor.from_numpy(x, backend).require_grad()
    loss = (F.pad(leaf, (2, 1, 1, 2), mode=mode) * Tensor.from_numpy(weights, backend)).sum()
    grad = leaf.grad(loss.backward()).to_numpy()
    # The padded tensor is a linear map of x: the gradient is that map's transpose applied to
    # the weights, which np.pad's index bookkeeping gives directly.
    index = np.arange(x.size).reshape(x.shape)
    padded = np.pad(index, ((0, 0), (0, 0), (1, 2), (2, 1)), mode=NUMPY_MODES[mode])
    expected = np.zeros(x.size)
    np.add.at(expected, padded.ravel(), weights.ravel())
    np.testing.assert_allclose(grad.ravel(), expected, rtol=1e-12)
