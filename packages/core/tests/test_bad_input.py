"""Bad input answered clearly: int division by zero, debug mode, ragged data, PyTorch habits."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor

OPS = {"//": operator.floordiv, "%": operator.mod}


@pytest.mark.parametrize("op", ["//", "%"])
def test_int_division_by_a_scalar_zero_raises(op):
    x = Tensor.from_data([5, 7, -3])
    with pytest.raises(bn.DivisionByZeroError, match=rf"int64 tensor \[3\] {op} 0"):
        OPS[op](x, 0)
    with pytest.raises(ZeroDivisionError):
        OPS[op](x, False)
    # Without a zero, and in float, nothing changes: floats divide by zero to inf or NaN.
    assert OPS[op](x, 2).tolist() == ([2, 3, -2] if op == "//" else [1, 1, 1])
    assert OPS[op](x, Tensor.from_data([2, 3, 4])).tolist() == ([2, 2, -1] if op == "//"
                                                                else [1, 1, 1])
    assert np.isnan(OPS[op](x.float() * 0, 0.0).to_numpy()).all()


@pytest.mark.parametrize("op", ["//", "%"])
def test_int_division_by_a_tensor_holding_zero_names_the_position(op):
    x = Tensor.from_data([[5, 7, -3], [1, 2, 3]], dtype="int32")
    divisor = Tensor.from_data([[1, 2, 0]], dtype="int32")
    with pytest.raises(bn.DivisionByZeroError, match=r"int32 tensor \[1, 3\], whose value at "
                                                     r"index \[0, 2\] is 0"):
        OPS[op](x, divisor)
    with pytest.raises(bn.DivisionByZeroError, match=rf"7 {op} int32 tensor \[1, 3\]"):
        OPS[op](7, divisor)


def test_tensor_divisors_are_checked_on_device_backends_only_in_debug_mode(values_on_device):
    x = Tensor.from_data([5, 7])
    zero = Tensor.from_data([0, 1])
    x // zero  # unchecked: reading a device's values would cost a synchronisation
    with pytest.raises(bn.DivisionByZeroError):
        x // 0  # a scalar divisor is on the host: always checked
    bn.set_debug(True)
    with pytest.raises(bn.DivisionByZeroError, match=r"index \[0\]"):
        x // zero
    with pytest.raises(bn.DivisionByZeroError):
        x % zero


def test_a_batched_matmul_that_does_not_broadcast_names_matmul_and_both_shapes():
    with pytest.raises(bn.ShapeError, match=r"^matmul: \[2, 3, 4\] @ \[5, 4, 6\]: the batch dims "
                                            r"\[2\] and \[5\] cannot be broadcast together$"):
        Tensor.zeros([2, 3, 4]) @ Tensor.zeros([5, 4, 6])


@pytest.mark.parametrize("values, message", [
    ([[1, 2], [3]], r"item \[1\] has shape \[1\] where item \[0\] has shape \[2\]"),
    ([[1, 2], [3, [4, 5]]], r"item \[1, 1\] has shape \[2\] where item \[1, 0\] is a number"),
    ([[[1], [2]], [[3], [4, 5]]], r"item \[1, 1\] has shape \[2\] where item \[1, 0\] has "
                                  r"shape \[1\]"),
])
def test_ragged_nested_lists_name_the_ragged_position(values, message):
    with pytest.raises(bn.ShapeError, match="nested sequences are ragged: " + message):
        Tensor.from_data(values)


@pytest.mark.parametrize("name, advice", [
    ("cpu", "burnish-backend-cpu.*'ndarray' \\(NumPy, always installed\\): write "
            "device='ndarray'"),
    ("mps", "'wgpu' backend, through Metal"),
])
def test_a_device_named_as_in_pytorch_says_which_backend_to_name(name, advice, monkeypatch):
    from burnish import registry

    # As where burnish-backend-cpu is not installed (where it is, "cpu" names it).
    infos = {k: v for k, v in registry.backend_infos().items() if k != "cpu"}
    monkeypatch.setattr(registry, "_infos", infos)
    monkeypatch.setattr(registry, "_instances", {})
    with pytest.raises(bn.BackendNotInstalledError, match=advice):
        Tensor.zeros([2], device=name)
    with pytest.raises(bn.BackendNotInstalledError, match=advice):
        Tensor.zeros([2], device=f"{name}:0")


@pytest.mark.parametrize("habit, advice", [
    (lambda x: x.numpy(), r"x.to_numpy\(\)"),
    (lambda x: x.t(), r"x.transpose\(\) or x.T"),
    (lambda x: x.cpu(), r"x.to_device\('ndarray'\)"),
    (lambda x: x.masked_fill(x > 1, 0), r"x.mask_fill\(mask, value\)"),
])
def test_pytorch_habits_on_tensors_say_what_to_write(habit, advice):
    x = Tensor.arange(6)
    with pytest.raises(AttributeError, match=r"no attribute .* \(a PyTorch name\); in burnish "
                                             r"write " + advice):
        habit(x)
    assert not hasattr(x, "numpy") and getattr(x, "nothing", None) is None
    with pytest.raises(AttributeError, match=r"^'Tensor' object has no attribute 'nothing'$"):
        x.nothing  # noqa: B018


def test_shapes_may_be_given_as_separate_ints_as_in_pytorch():
    x = Tensor.arange(6)
    assert x.reshape(3, 2).shape == [3, 2]
    assert x.view(2, -1).shape == [2, 3]
    assert x.reshape(np.int64(6)).shape == [6]
    assert x.reshape(1, 6).expand(2, 6).shape == [2, 6]
    assert x.reshape(2, 3).repeat(2, 1).shape == [4, 3]
    assert x.reshape([3, 2]).permute(1, 0).shape == [2, 3]
    with pytest.raises(TypeError, match=r"reshape: expected ints or one sequence of ints, got "
                                        r"\[3, 2.0\]"):
        x.reshape(3, 2.0)


def test_info_lists_every_burnish_distribution(capsys):
    from importlib import metadata

    from burnish.__main__ import main

    assert main(["info"]) == 0
    listed = capsys.readouterr().out.split("\nBackends:")[0]
    for name in ("burnish-core", "burnish-nn", "burnish-jit", "burnish-conformance"):
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        assert f"  {name:<32} {version}\n" in listed
