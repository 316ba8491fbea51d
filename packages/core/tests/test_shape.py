"""Shape arithmetic: broadcasting, dims and reshape inference, with errors naming both sides."""

import pytest

from burnish.errors import ShapeError
from burnish.shape import Shape, broadcast_shapes, infer_reshape, normalize_dim


def test_shape_prints_like_burn():
    assert str(Shape([2, 3])) == "[2, 3]"
    assert Shape([2, 3]).numel == 6
    assert Shape([]).numel == 1
    assert Shape([2, 3]) == [2, 3] and Shape([2, 3]) == (2, 3) and Shape([2, 3]) != [3, 2]


def test_shape_rejects_negative_dims():
    with pytest.raises(ShapeError):
        Shape([2, -1])


def test_broadcast():
    assert broadcast_shapes((2, 1, 3), (4, 1)) == (2, 4, 3)
    assert broadcast_shapes((), (5,)) == (5,)
    with pytest.raises(ShapeError, match=r"\[2, 3\] and \[4, 3\]"):
        broadcast_shapes((2, 3), (4, 3))


def test_normalize_dim():
    assert normalize_dim(-1, 3) == 2
    assert normalize_dim(3, 3, allow_end=True) == 3
    with pytest.raises(ShapeError, match="dim 3 is out of range for a tensor of 3 dims"):
        normalize_dim(3, 3)


def test_infer_reshape():
    assert infer_reshape((2, 3, 4), [-1, 4]) == (6, 4)
    with pytest.raises(ShapeError, match=r"\[2, 3\] \(6 elements\) to \[4, 2\] \(8 elements\)"):
        infer_reshape((2, 3), [4, 2])
    with pytest.raises(ShapeError):
        infer_reshape((2, 3), [-1, -1])
