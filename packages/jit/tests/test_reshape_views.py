"""``view_strides``: a reshape is a view exactly where NumPy's is, and reads the same elements."""

from __future__ import annotations

import numpy as np
import pytest

from burnish.jit.backend.base import view_strides


def _cases(count: int):
    rng = np.random.default_rng(0)
    for _ in range(count):
        shape = [int(rng.choice([1, 2, 3, 4, 6])) for _ in range(rng.integers(1, 5))]
        base = np.arange(np.prod(shape) * 4, dtype=np.int64).reshape([*shape, 4])
        view = base[..., rng.integers(0, 4)].transpose(rng.permutation(len(shape)))
        if view.shape[0] > 1 and rng.random() < 0.5:
            view = view[::2] if rng.random() < 0.5 else view[1:]
        factors, rest = [], view.size
        for p in (2, 3, 2, 3, 2, 5):
            while rest % p == 0 and rng.random() < 0.7:
                factors.append(p)
                rest //= p
        factors.append(rest)
        rng.shuffle(factors)
        new: list[int] = []
        for f in factors:
            if new and rng.random() < 0.4:
                new[-1] *= int(f)
            else:
                new.append(int(f))
            if rng.random() < 0.2:
                new.append(1)
        yield base, view, tuple(new)


def test_views_exactly_where_numpy_has_them_and_read_the_same_elements():
    views = 0
    for base, view, new in _cases(3000):
        strides = tuple(s // base.itemsize for s in view.strides)
        found = view_strides(view.shape, strides, new)
        try:
            expected = view.view()
            expected.shape = new  # NumPy refuses where a copy is needed
        except AttributeError:
            expected = None
        assert (found is None) == (expected is None), (view.shape, strides, new, found)
        if found is None:
            continue
        views += 1
        offset = (view.ctypes.data - base.ctypes.data) // base.itemsize
        positions = offset + sum(np.indices(new)[d] * found[d] for d in range(len(new)))
        np.testing.assert_array_equal(base.reshape(-1)[positions], view.reshape(new))
    assert 1000 < views < 3000  # both outcomes were exercised


@pytest.mark.parametrize("shape, strides, new, expected", [
    ((3, 128, 2, 128), (128, 768, 384, 1), (3, 256, 128), (128, 384, 1)),  # q, k, v split off
    ((128, 2, 128), (768, 384, 1), (128, 4, 64), None),  # heads across the gap: a copy
    ((4, 1, 5), (1, 99, 4), (4, 5), (1, 4)),
    ((2, 3), (3, 1), (0, 6), None),
])
def test_known_layouts(shape, strides, new, expected):
    assert view_strides(shape, strides, new) == expected
