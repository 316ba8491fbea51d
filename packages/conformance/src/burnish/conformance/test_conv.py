"""Convolutions over 1, 2 and 3 spatial dims: stride, padding, dilation, groups and bias,
against a float64 reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from burnish import Tensor, float32
from burnish import functional as F
from burnish.conformance import reference
from burnish.conformance.compare import accumulated_atol, assert_close
from burnish.conformance.samples import FLOATS, LAYOUTS, ids, laid_out, sample


@dataclass(frozen=True)
class Conv:
    """One convolution: input ``[batch, in_channels, *size]``, a kernel and the options."""

    size: tuple[int, ...]
    kernel: tuple[int, ...]
    in_channels: int = 2
    out_channels: int = 3
    batch: int = 2
    stride: tuple[int, ...] | int = 1
    padding: tuple[int, ...] | int = 0
    dilation: tuple[int, ...] | int = 1
    groups: int = 1
    bias: bool = True

    def per_dim(self, value):
        return (value,) * len(self.size) if isinstance(value, int) else value

    def __str__(self) -> str:
        parts = ["x".join(map(str, self.size)), "k" + "x".join(map(str, self.kernel))]
        for name in ("stride", "padding", "dilation"):
            value = getattr(self, name)
            if value != (1 if name != "padding" else 0):
                parts.append(f"{name[0]}{value}")
        if self.groups > 1:
            parts.append(f"g{self.groups}")
        if not self.bias:
            parts.append("nobias")
        return "-".join(parts).replace(" ", "")


CASES = [
    Conv((9,), (3,)),
    Conv((10,), (4,), stride=3, padding=2),
    Conv((11,), (3,), dilation=2, padding=1, bias=False),
    Conv((8,), (2,), in_channels=4, out_channels=6, groups=2),
    Conv((7,), (1,), in_channels=3, out_channels=3, groups=3),
    Conv((5,), (5,), padding=0),
    Conv((6, 7), (3, 3)),
    Conv((6, 7), (3, 2), stride=(2, 1), padding=(1, 0)),
    Conv((9, 8), (3, 3), dilation=(2, 3), padding=2, bias=False),
    Conv((5, 6), (2, 3), in_channels=4, out_channels=4, groups=4, stride=2, padding=1),
    Conv((7, 5), (3, 3), in_channels=6, out_channels=4, groups=2, stride=(1, 2), dilation=(1, 2),
         padding=(0, 2)),
    # Depthwise (one input channel per group): MobileNet's 5x5, a channel multiplier of 2 with
    # strides, dilation and padding wider than the taps reach, 1 and 3 spatial dims.
    Conv((9, 10), (5, 5), in_channels=3, out_channels=3, groups=3, padding=2),
    Conv((11, 9), (3, 3), in_channels=2, out_channels=4, groups=2, stride=(2, 3),
         dilation=(2, 1), padding=(3, 1), bias=False),
    Conv((12,), (3,), in_channels=4, out_channels=4, groups=4, stride=2, dilation=3, padding=4),
    Conv((4, 5, 5), (3, 3, 3), in_channels=3, out_channels=3, groups=3, padding=1),
    Conv((1, 1), (1, 1), in_channels=5, out_channels=7),
    Conv((4, 5, 6), (2, 3, 2)),
    Conv((5, 5, 5), (3, 3, 3), stride=2, padding=1, bias=False),
    Conv((6, 4, 5), (2, 2, 3), in_channels=4, out_channels=2, groups=2, dilation=(2, 1, 1),
         padding=(1, 1, 0)),
    # 3x3 at unit stride with a few hundred output positions and 16+ channels per group (what
    # a backend may compute as Winograd tiles of 2x2 outputs): odd sizes leave edge tiles of
    # one row or column; padding on one side only, wider than the taps reach; groups.
    Conv((9, 11), (3, 3), in_channels=16, out_channels=24, batch=3, padding=1),
    Conv((10, 7), (3, 3), in_channels=32, out_channels=32, groups=2, batch=4, padding=(0, 2),
         bias=False),
]

#: Shapes a backend may compute by other means than the general case's (checked on strided
#: inputs too): depthwise with channels enough to take a vector's worth at a time, one a lane
#: (16 float32, 8 float64), with a partial last vector (20, 17 channels), stride 2 on odd
#: sizes, dilation; depthwise planes with rows wider than that (21 outputs) and a channel
#: multiplier; a few input channels (an image network's first layer: 3, 3x3 at stride 2 on
#: odd sizes), with strides, dilation, one-sided padding, groups, 1 spatial dim, output
#: channels not a multiple of 8, and an image large enough to be cut into blocks of rows;
#: 1x1 on 1x1 inputs (squeeze-excite blocks: the batch as the rows of one product),
#: grouped without bias, and one large enough to be cut into parts of its output channels.
FAST_PATHS = [
    Conv((7, 9), (5, 5), in_channels=20, out_channels=20, groups=20, padding=2),
    Conv((13, 13), (3, 3), in_channels=24, out_channels=24, groups=24, batch=3, stride=2,
         padding=1, bias=False),
    Conv((9, 10), (3, 3), in_channels=17, out_channels=17, groups=17, stride=(1, 2),
         dilation=2, padding=(2, 1)),
    Conv((19, 41), (3, 3), in_channels=3, out_channels=6, groups=3, stride=2, padding=1),
    Conv((15, 13), (3, 3), in_channels=3, out_channels=16, stride=2, padding=1),
    Conv((8, 11), (2, 3), in_channels=2, out_channels=5, stride=(1, 2), dilation=(2, 1),
         padding=(1, 0), bias=False),
    Conv((9, 7), (3, 3), in_channels=4, out_channels=6, groups=2, batch=3, stride=(2, 1),
         padding=(0, 2)),
    Conv((13,), (5,), in_channels=3, out_channels=9, stride=3, padding=2),
    Conv((61, 300), (3, 2), in_channels=4, out_channels=11, batch=1, padding=1),
    Conv((1, 1), (1, 1), in_channels=6, out_channels=4, groups=2, batch=3, bias=False),
    Conv((1, 1), (1, 1), in_channels=256, out_channels=300, batch=4),
]
CASES += FAST_PATHS
NON_CONTIGUOUS = CASES[1::3] + [case for case in FAST_PATHS if case not in CASES[1::3]]


def run(case: Conv, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(case.size)]
    return fn(x, weight, bias, case.stride, case.padding, case.dilation, case.groups)


def arrays(case: Conv, dtype):
    x = sample((case.batch, case.in_channels, *case.size), dtype, -2, 2)
    weight = sample((case.out_channels, case.in_channels // case.groups, *case.kernel), dtype,
                    -1, 1, key=1)
    bias = sample((case.out_channels,), dtype, key=2) if case.bias else None
    return x, weight, bias


def check(out: Tensor, case: Conv, x, weight, bias, dtype) -> None:
    options = (case.per_dim(case.stride), case.per_dim(case.padding), case.per_dim(case.dilation),
               case.groups)
    expected = reference.conv(x, weight, bias, *options)
    magnitude = reference.conv(np.abs(x.astype(np.float64)), np.abs(weight.astype(np.float64)),
                               None if bias is None else np.abs(bias.astype(np.float64)),
                               *options)
    assert_close(out, expected, dtype, atol=accumulated_atol(dtype, magnitude))


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_conv(device, dtype, case):
    x, weight, bias = arrays(case, dtype)
    out = run(case, Tensor.from_numpy(x, device), Tensor.from_numpy(weight, device),
              None if bias is None else Tensor.from_numpy(bias, device))
    check(out, case, x, weight, bias, dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("case", NON_CONTIGUOUS, ids=[str(c) for c in NON_CONTIGUOUS])
@pytest.mark.parametrize("dtype", [float32], ids=["float32"])
def test_conv_non_contiguous(device, dtype, case, layout):
    x, weight, bias = arrays(case, dtype)
    out = run(case, laid_out(x, device, dtype, layout), laid_out(weight, device, dtype, layout),
              None if bias is None else laid_out(bias, device, dtype, layout))
    check(out, case, x, weight, bias, dtype)


@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_conv_generic_entry_point(device, dtype, spatial):
    case = Conv((5,) * spatial, (2,) * spatial, stride=2, padding=1)
    x, weight, bias = arrays(case, dtype)
    out = F.conv(Tensor.from_numpy(x, device), Tensor.from_numpy(weight, device),
                 Tensor.from_numpy(bias, device), stride=2, padding=1)
    check(out, case, x, weight, bias, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_conv_empty_batch(device, dtype):
    case = Conv((6, 6), (3, 3), batch=0)
    x, weight, bias = arrays(case, dtype)
    out = F.conv2d(Tensor.from_numpy(x, device), Tensor.from_numpy(weight, device),
                   Tensor.from_numpy(bias, device))
    assert_close(out, np.zeros((0, 3, 4, 4)), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_conv_propagates_nan(device, dtype):
    x = np.zeros((1, 1, 5))
    x[0, 0, 2] = np.nan
    weight = np.ones((1, 1, 2))
    out = F.conv1d(Tensor.from_data(x, device, dtype), Tensor.from_data(weight, device, dtype))
    assert_close(out, reference.conv(x, weight, None, (1,), (0,), (1,), 1), dtype)


@pytest.mark.parametrize("dtype", [float32], ids=["float32"])
def test_conv_larger_image(device, dtype):
    case = Conv((31, 29), (5, 3), in_channels=8, out_channels=16, batch=3, stride=(2, 1),
                padding=(2, 1))
    x, weight, bias = arrays(case, dtype)
    out = run(case, Tensor.from_numpy(x, device), Tensor.from_numpy(weight, device),
              Tensor.from_numpy(bias, device))
    check(out, case, x, weight, bias, dtype)
