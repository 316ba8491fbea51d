"""Bad input to modules answered clearly: class targets out of range, fields of the wrong type."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor, nn
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
    # Unchecked by the loss (reading them would cost a device read): the weighted form counts
    # the target as no class, the plain mean's gather names the index.
    CrossEntropyLoss(weights=[1.0, 1.0, 1.0])(scores, targets)
    with pytest.raises(bn.ShapeError, match="gather: index 3 is out of bounds"):
        CrossEntropyLoss()(scores, targets).to_data()
    bn.set_debug(True)
    with pytest.raises(bn.ShapeError, match="target 3 at index 1"):
        CrossEntropyLoss()(scores, targets)


def test_a_module_built_with_pytorch_arguments_points_at_its_config():
    with pytest.raises(bn.ArgumentTypeError) as caught:
        nn.Linear(4, 2)
    assert str(caught.value) == (
        "Linear(4, 2): weight must be Param, got int 4; bias must be Param | None, got int 2. "
        "Modules are built by their config, with hyperparameters: "
        "LinearConfig(4, 2).init(device)")
    with pytest.raises(TypeError, match="Conv2dConfig"):
        nn.Conv2d(3, 8, 3)


class Stack(nn.Module):
    layers: list[nn.Linear]
    mode: Literal["sum", "mean"] = "sum"
    scale: float = 1.0
    shape: tuple[int, ...] = ()
    later: Unresolvable | None = None  # noqa: F821 (left unchecked: it does not resolve)


def test_every_module_checks_its_fields_against_their_annotations():
    linear = nn.LinearConfig(2, 2).init()
    Stack([linear], "mean", 2, (1, 2), later="anything")
    Stack((linear,), scale=np.float32(0.5), shape=[3])
    with pytest.raises(bn.ArgumentTypeError, match=r"layers must be list\[nn.Linear\], got list"):
        Stack([linear, 3])
    with pytest.raises(TypeError, match=r"mode must be Literal\['sum', 'mean'\], got str 'max'"):
        Stack([linear], "max")
    with pytest.raises(TypeError, match="scale must be float, got str '2'; shape must be"):
        Stack([linear], scale="2", shape=(1.5,))
    with pytest.raises(TypeError, match=r"weights must be Sequence\[float\] \| None"):
        nn.CrossEntropyLoss(weights="abc")


@pytest.mark.parametrize("habit, advice", [
    (lambda m: m.parameters(), r"module.params\(\)"),
    (lambda m: m.eval(), r"module.valid\(\)"),
    (lambda m: m.state_dict(), r"module.into_record\(\)"),
    (lambda m: m.zero_grad(), "nothing: gradients are not kept on parameters"),
])
def test_pytorch_habits_on_modules_say_what_to_write(habit, advice):
    linear = nn.LinearConfig(2, 2).init()
    with pytest.raises(AttributeError, match=r"'Linear' object has no attribute .* \(a PyTorch "
                                             r"name\); in burnish write " + advice):
        habit(linear)
    assert getattr(linear, "nothing", None) is None and hasattr(linear, "weight")
