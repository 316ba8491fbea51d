"""Export the real-model fixtures from PyTorch and record onnxruntime's outputs.

Run by hand when torch and onnxruntime are installed (the tests need neither)::

    python packages/import-onnx/tests/make_fixtures.py

Each model NAME gets ``fixtures/NAME.onnx``, ``fixtures/NAME.input.npy`` and
``fixtures/NAME.expected.npy`` (onnxruntime's output for that input).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import torch
from torch import nn

FIXTURES = Path(__file__).with_name("fixtures")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(),
                                    nn.Linear(32, 10))

    def forward(self, x):
        return self.layers(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(), nn.AvgPool2d(2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x):
        return torch.softmax(self.features(x), dim=1)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18's layout (a 7x7 stem, max pool, four stages of two basic blocks), narrow."""

    def __init__(self, widths=(8, 16, 32, 64), classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], widths[0]
        for i, w in enumerate(widths):
            blocks += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
            cin = w
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(widths[-1], classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.encoder(x))


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True, bidirectional=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y)


MODELS = {
    "mlp": (Mlp, [4, 16]),
    "cnn": (Cnn, [2, 1, 16, 16]),
    "resnet18": (ResNet18, [1, 3, 32, 32]),
    "transformer": (Encoder, [2, 6, 32]),
    "lstm": (Lstm, [2, 7, 8]),
}


def export(name: str) -> None:
    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    # Batch norms with statistics of their own, not the initial zeros and ones.
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    x = torch.randn(*shape)
    path = FIXTURES / f"{name}.onnx"
    torch.onnx.export(model, (x,), str(path), input_names=["input"], output_names=["output"],
                      opset_version=18, dynamo=True, external_data=False)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.save(FIXTURES / f"{name}.input.npy", x.numpy())
    np.save(FIXTURES / f"{name}.expected.npy", expected)
    print(f"{name}: {path.stat().st_size} bytes, output {list(expected.shape)}")


if __name__ == "__main__":
    FIXTURES.mkdir(exist_ok=True)
    for name in MODELS:
        export(name)
