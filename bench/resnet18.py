"""ResNet-18 (He et al.: BasicBlocks [2, 2, 2, 2], 64 to 512 channels) in burnish.nn and in torch,
with the same parameter names, so that one's weights load into the other (bench_cuda.py)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from burnish import Tensor


def burnish_resnet18(device, cifar: bool, classes: int):
    """ResNet-18 of burnish.nn layers (He et al.; BasicBlocks [2, 2, 2, 2], 64 to 512
    channels); ``cifar``: a 3x3 stem at stride 1 and no max pooling (for 32x32 inputs)."""
    from burnish import nn

    class Downsample(nn.Module):
        conv: nn.Conv2d
        bn: nn.BatchNorm

        def forward(self, x: Tensor) -> Tensor:
            return self.bn(self.conv(x))

    class BasicBlock(nn.Module):
        conv1: nn.Conv2d
        bn1: nn.BatchNorm
        conv2: nn.Conv2d
        bn2: nn.BatchNorm
        downsample: Downsample | None

        def forward(self, x: Tensor) -> Tensor:
            out = self.bn1(self.conv1(x)).clamp_min(0.0)
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return (out + identity).clamp_min(0.0)

    class ResNet(nn.Module):
        conv1: nn.Conv2d
        bn1: nn.BatchNorm
        stem_pool: nn.MaxPool2d | None
        layers: list
        pool: nn.AdaptiveAvgPool2d
        fc: nn.Linear

        def forward(self, x: Tensor) -> Tensor:
            x = self.bn1(self.conv1(x)).clamp_min(0.0)
            if self.stem_pool is not None:
                x = self.stem_pool(x)
            for block in self.layers:
                x = block(x)
            x = self.pool(x)
            return self.fc(x.reshape([x.shape[0], -1]))

    def conv(cin: int, cout: int, kernel: int, stride: int, padding: int) -> nn.Conv2d:
        return nn.Conv2dConfig(cin, cout, kernel, stride=stride, padding=padding,
                               bias=False).init(device)

    def norm(channels: int) -> nn.BatchNorm:
        return nn.BatchNormConfig(channels).init(device)

    blocks, cin = [], 64
    for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                         (512, 1)):
        down = None
        if stride != 1 or cin != cout:
            down = Downsample(conv(cin, cout, 1, stride, 0), norm(cout))
        blocks.append(BasicBlock(conv(cin, cout, 3, stride, 1), norm(cout),
                                 conv(cout, cout, 3, 1, 1), norm(cout), down))
        cin = cout
    stem = conv(3, 64, 3, 1, 1) if cifar else conv(3, 64, 7, 2, 3)
    return ResNet(stem, norm(64), None if cifar else nn.MaxPool2d(3, 2, 1), blocks,
                  nn.AdaptiveAvgPool2d(1), nn.LinearConfig(512, classes).init(device))


def torch_resnet18(torch, cifar: bool, classes: int):
    """The same network in torch, with the same attribute names."""
    nn = torch.nn

    class Downsample(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, 1, stride, 0, bias=False)
            self.bn = nn.BatchNorm2d(cout)

        def forward(self, x):
            return self.bn(self.conv(x))

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = Downsample(cin, cout, stride) \
                if stride != 1 or cin != cout else None

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return torch.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False) if cifar else \
                nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.stem_pool = None if cifar else nn.MaxPool2d(3, 2, 1)
            specs = ((64, 64, 1), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2),
                     (256, 256, 1), (256, 512, 2), (512, 512, 1))
            self.layers = nn.ModuleList(BasicBlock(*spec) for spec in specs)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            if self.stem_pool is not None:
                x = self.stem_pool(x)
            for block in self.layers:
                x = block(x)
            return self.fc(torch.flatten(self.pool(x), 1))

    return ResNet()


def torch_state(model, torch_model) -> dict[str, Any]:
    """burnish ``model``'s parameters as ``torch_model``'s state dict (BatchNorm's gamma and
    beta are torch's weight and bias; Linear weights are transposed)."""
    torch = sys.modules["torch"]
    renames = {"gamma": "weight", "beta": "bias"}
    state = dict(torch_model.state_dict())
    for name, param in model.named_params():
        *path, last = name.split(".")
        key = ".".join([*path, renames.get(last, last)])
        value = param.val().to_numpy()
        if key not in state:
            raise KeyError(f"burnish parameter {name} has no torch counterpart {key}")
        if tuple(state[key].shape) != value.shape:
            value = value.T
        state[key] = torch.from_numpy(np.ascontiguousarray(value))
    return state
