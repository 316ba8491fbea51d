"""A tour of burnish on the ndarray backend: tensors, a custom GELU, matmul, conv2d, reductions."""

import math

import burnish as bn
import burnish.functional as F
from burnish import Tensor
from burnish.__main__ import info

info()  # what `python -m burnish info` prints: distributions, backends, devices, dtypes
print()

device = bn.backend("ndarray").default_device()
a = Tensor.from_data([[2.0, 3.0], [4.0, 5.0]], device=device)
b = Tensor.ones_like(a)
print(a + b)


def gelu_custom(x: Tensor) -> Tensor:
    x = x * ((x / math.sqrt(2)).erf() + 1)
    return x / 2


# The same activation written with tensor ops and taken from burnish.functional.
bn.seed(0)
x = Tensor.random([4, 5], bn.Distribution.normal(), device=device)
custom, builtin = gelu_custom(x), F.gelu(x)
print("gelu_custom matches functional.gelu:", custom.all_close(builtin),
      f"(max difference {(custom - builtin).abs().max().item():.2e})")

# Matrix product: [2, 2] @ [2, 3].
w = Tensor.arange(6, device=device).float().reshape([2, 3])
print("a @ w =", (a @ w).tolist())

# A 3x3 convolution over a batch of one 8x8 image with 3 channels, 4 filters, padding 1.
image = Tensor.random([1, 3, 8, 8], device=device)
filters = Tensor.random([4, 3, 3, 3], device=device)
features = F.conv2d(image, filters, padding=1)
print("conv2d:", image.shape, "->", features.shape)

# Reductions: over everything, and along a dim.
print("sum:", a.sum().item(), "mean:", a.mean().item(), "max along dim 1:", a.max(dim=1).tolist())
