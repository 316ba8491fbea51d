"""Transposed convolutions over 1, 2 and 3 spatial dims: stride, padding, output padding,
dilation, groups and bias, against a float64 reference."""

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
class ConvTranspose:
    """One transposed convolution: input ``[batch, in_channels, *size]``, weight ``[in_channels,
    out_channels / groups, *kernel]``."""

    size: tuple[int, ...]
    kernel: tuple[int, ...]
    in_channels: int = 2
    out_channels: int = 3
    batch: int = 2
    stride: tuple[int, ...] | int = 1
    padding: tuple[int, ...] | int = 0
    output_padding: tuple[int, ...] | int = 0
    dilation: tuple[int, ...] | int = 1
    groups: int = 1
    bias: bool = True

    def per_dim(self, value):
        return (value,) * len(self.size) if isinstance(value, int) else value

    def options(self):
        return (self.per_dim(self.stride), self.per_dim(self.padding),
                self.per_dim(self.output_padding), self.per_dim(self.dilation), self.groups)

    def __str__(self) -> str:
        parts = ["x".join(map(str, self.size)), "k" + "x".join(map(str, self.kernel))]
        for name, short in (("stride", "s"), ("padding", "p"), ("output_padding", "op"),
                            ("dilation", "d")):
            value = getattr(self, name)
            if value != (1 if name in ("stride", "dilation") else 0):
                parts.append(f"{short}{value}")
        if self.groups > 1:
            parts.append(f"g{self.groups}")
        if not self.bias:
            parts.append("nobias")
        return "-".join(parts).replace(" ", "")


CASES = [
    ConvTranspose((5,), (3,)),
    ConvTranspose((5,), (3,), stride=2),
    ConvTranspose((6,), (4,), stride=3, padding=1, output_padding=2),
    ConvTranspose((4,), (3,), dilation=2, padding=2, bias=False),
    ConvTranspose((5,), (2,), in_channels=4, out_channels=6, groups=2, stride=2,
                  output_padding=1),
    ConvTranspose((1,), (1,)),
    ConvTranspose((4, 5), (3, 3)),
    ConvTranspose((4, 3), (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2)),
    ConvTranspose((3, 4), (2, 3), dilation=(2, 1), padding=(1, 1), bias=False),
    ConvTranspose((3, 3), (3, 3), in_channels=4, out_channels=8, groups=4, stride=2, padding=1,
                  output_padding=1),
    ConvTranspose((2, 5), (1, 3), in_channels=3, out_channels=3, groups=3, dilation=(1, 3),
                  output_padding=(0, 2)),
    ConvTranspose((3, 2, 4), (2, 2, 3)),
    ConvTranspose((2, 3, 3), (3, 2, 2), stride=2, padding=1, output_padding=(1, 0, 1),
                  bias=False),
    ConvTranspose((3, 3, 2), (2, 2, 2), in_channels=4, out_channels=2, groups=2,
                  dilation=(1, 2, 1)),
]


def run(case: ConvTranspose, x, weight, bias) -> Tensor:
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[len(case.size)]
    stride, padding, output_padding, dilation, groups = case.options()
    return fn(x, weight, bias, stride, padding, output_padding, dilation, groups)


def arrays(case: ConvTranspose, dtype):
    x = sample((case.batch, case.in_channels, *case.size), dtype, -2, 2)
    weight = sample((case.in_channels, case.out_channels // case.groups, *case.kernel), dtype,
                    -1, 1, key=1)
    bias = sample((case.out_channels,), dtype, key=2) if case.bias else None
    return x, weight, bias


def check(out: Tensor, case: ConvTranspose, x, weight, bias, dtype) -> None:
    expected = reference.conv_transpose(x, weight, bias, *case.options())
    magnitude = reference.conv_transpose(
        np.abs(x.astype(np.float64)), np.abs(weight.astype(np.float64)),
        None if bias is None else np.abs(bias.astype(np.float64)), *case.options())
    assert_close(out, expected, dtype, atol=accumulated_atol(dtype, magnitude))


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_conv_transpose(device, dtype, case):
    x, weight, bias = arrays(case, dtype)
    out = run(case, Tensor.from_numpy(x, device), Tensor.from_numpy(weight, device),
              None if bias is None else Tensor.from_numpy(bias, device))
    check(out, case, x, weight, bias, dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("case", CASES[2::4], ids=[str(c) for c in CASES[2::4]])
@pytest.mark.parametrize("dtype", [float32], ids=["float32"])
def test_conv_transpose_non_contiguous(device, dtype, case, layout):
    x, weight, bias = arrays(case, dtype)
    out = run(case, laid_out(x, device, dtype, layout), laid_out(weight, device, dtype, layout),
              None if bias is None else laid_out(bias, device, dtype, layout))
    check(out, case, x, weight, bias, dtype)


@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_conv_transpose_generic_entry_point(device, dtype, spatial):
    case = ConvTranspose((3,) * spatial, (2,) * spatial, stride=2, output_padding=1)
    x, weight, bias = arrays(case, dtype)
    out = F.conv_transpose(Tensor.from_numpy(x, device), Tensor.from_numpy(weight, device),
                           Tensor.from_numpy(bias, device), stride=2, output_padding=1)
    check(out, case, x, weight, bias, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_conv_transpose_undoes_conv_shape(device, dtype):
    # A stride-2 conv maps 9 -> 4 (and 10 -> 4); output_padding picks which size comes back.
    case = ConvTranspose((4,), (3,), stride=2, output_padding=1)
    x, weight, bias = arrays(case, dtype)
    out = run(case, Tensor.from_numpy(x, device), Tensor.from_numpy(weight, device),
              Tensor.from_numpy(bias, device))
    assert out.shape == (2, 3, 10)
    check(out, case, x, weight, bias, dtype)
