"""Interpolation: nearest, bilinear and bicubic resizing, align_corners both ways, by size or
by scale factor."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32
from burnish import functional as F
from burnish.conformance import reference
from burnish.conformance.compare import accumulated_atol, assert_close
from burnish.conformance.samples import FLOATS, LAYOUTS, ids, laid_out, sample

# (input height and width, output height and width): up, down, odd ratios, to and from 1.
RESIZES = [((4, 4), (8, 8)), ((5, 7), (3, 4)), ((3, 5), (7, 2)), ((6, 6), (6, 6)),
           ((1, 1), (3, 2)), ((4, 3), (1, 1)), ((7, 11), (13, 5)), ((2, 9), (5, 9))]
MODES = [("nearest", False), ("bilinear", False), ("bilinear", True), ("bicubic", False),
         ("bicubic", True)]


def check(out: Tensor, x: np.ndarray, size, mode: str, align_corners: bool, dtype) -> None:
    expected = reference.interpolate(x, size, mode, align_corners)
    # Bicubic weights have negative lobes: their absolute values add up to less than 1.5.
    magnitude = 1.5 * float(np.abs(x.astype(np.float64)).max(initial=0.0))
    assert_close(out, expected, dtype, atol=accumulated_atol(dtype, magnitude))


@pytest.mark.parametrize(("size", "out"), RESIZES,
                         ids=[f"{ids(r)[0]}-to-{ids(r)[1]}" for r in RESIZES])
@pytest.mark.parametrize(("mode", "align_corners"), MODES,
                         ids=[f"{m}-{'align' if a else 'half_pixel'}" for m, a in MODES])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_interpolate(device, dtype, mode, align_corners, size, out):
    x = sample((2, 3, *size), dtype)
    result = F.interpolate(Tensor.from_numpy(x, device), size=out, mode=mode,
                           align_corners=align_corners)
    check(result, x, out, mode, align_corners, dtype)


@pytest.mark.parametrize(("factor", "out"), [(2, (10, 12)), (0.5, (2, 3)), ((1.5, 2.5), (7, 15)),
                                             (3.0, (15, 18))], ids=["2", "0.5", "1.5x2.5", "3.0"])
@pytest.mark.parametrize(("mode", "align_corners"), MODES,
                         ids=[f"{m}-{'align' if a else 'half_pixel'}" for m, a in MODES])
@pytest.mark.parametrize("dtype", [float32], ids=["float32"])
def test_interpolate_by_scale_factor(device, dtype, mode, align_corners, factor, out):
    # The output size is floor(input * factor); sampling follows from the sizes alone.
    x = sample((1, 2, 5, 6), dtype)
    result = F.interpolate(Tensor.from_numpy(x, device), scale_factor=factor, mode=mode,
                           align_corners=align_corners)
    check(result, x, out, mode, align_corners, dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize(("mode", "align_corners"), MODES,
                         ids=[f"{m}-{'align' if a else 'half_pixel'}" for m, a in MODES])
def test_interpolate_non_contiguous(device, mode, align_corners, layout):
    dtype = float32
    x = sample((2, 3, 5, 4), dtype)
    result = F.interpolate(laid_out(x, device, dtype, layout), size=(7, 9), mode=mode,
                           align_corners=align_corners)
    check(result, x, (7, 9), mode, align_corners, dtype)


@pytest.mark.parametrize(("mode", "align_corners"), MODES,
                         ids=[f"{m}-{'align' if a else 'half_pixel'}" for m, a in MODES])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_interpolate_constant_stays_constant(device, dtype, mode, align_corners):
    x = np.full((1, 1, 4, 5), 2.5)
    result = F.interpolate(Tensor.from_data(x, device, dtype), size=(9, 3), mode=mode,
                           align_corners=align_corners)
    assert_close(result, np.full((1, 1, 9, 3), 2.5), dtype)


@pytest.mark.parametrize("dtype", [float32], ids=["float32"])
def test_interpolate_large_odd_image(device, dtype):
    x = sample((1, 2, 67, 53), dtype)
    for mode, align_corners in MODES:
        result = F.interpolate(Tensor.from_numpy(x, device), size=(101, 31), mode=mode,
                               align_corners=align_corners)
        check(result, x, (101, 31), mode, align_corners, dtype)
