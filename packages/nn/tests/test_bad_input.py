"""Bad input to modules answered clearly: class targets out of range, fields of the wrong type."""

from __future__ import annotations

import pytest

import burnish as bn
from burnish import Tensor
from burnish.nn import CrossEntropyLoss


@pytest.fixture
def debug_off():
    was = bn.is_debug()
    bn.set_debug(False)
    yield
    bn.set_debug(was)


@pytest.mark.parametrize("device", ["ndarray", "autodiff+ndarray"])
def test_cross_entropy_target_out_of_range_raises(device):
    scores = Tensor.random([4, 5], device=device)
    with pytest.raises(bn.ShapeError, match=r"target 5 at index 2 is outside the classes "
                                            r"\[0, 5\) of scores \[4, 5\]"):
        CrossEntropyLoss()(scores, Tensor.from_data([0, 1, 5, 2], device=device))
    with pytest.raises(bn.ShapeError, match=r"target -1 at index 1 .*1 other target too.*"
                                            r"pad_tokens=\[-1\]"):
        CrossEntropyLoss(smoothing=0.1)(scores, Tensor.from_data([0, -1, 1, -1], device=device))
    with pytest.raises(bn.ShapeError, match="target 9 at index 3"):
        CrossEntropyLoss(pad_tokens=[-1])(scores, Tensor.from_data([0, -1, 1, 9], device=device))


def test_cross_entropy_pad_tokens_outside_the_classes_are_left_out():
    scores = Tensor.random([3, 5])
    targets = Tensor.from_data([0, -1, 4])
    padded = CrossEntropyLoss(pad_tokens=[-1])(scores, targets).item()
    kept = CrossEntropyLoss()(scores[Tensor.from_data([0, 2])], Tensor.from_data([0, 4])).item()
    assert padded == pytest.approx(kept)
    with pytest.raises(bn.ShapeError):
        CrossEntropyLoss()(scores, targets)


def test_cross_entropy_targets_on_a_device_are_checked_in_debug_mode(monkeypatch, debug_off):
    monkeypatch.setattr(bn.backend("ndarray"), "values_on_host", False)
    scores, targets = Tensor.random([2, 3]), Tensor.from_data([0, 3])
    CrossEntropyLoss()(scores, targets)  # unchecked: reading them would cost a device read
    bn.set_debug(True)
    with pytest.raises(bn.ShapeError, match="target 3 at index 1"):
        CrossEntropyLoss()(scores, targets)
