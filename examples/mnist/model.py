"""The MNIST example's CNN: two conv layers with pooling, dropout and two linear layers."""

from burnish import Tensor, nn
from burnish.data import MnistBatch
from burnish.train import ClassificationOutput


class Cnn(nn.Module):
    """``[batch, 1, 28, 28]`` images to ``[batch, 10]`` logits."""

    conv1: nn.Conv2d
    conv2: nn.Conv2d
    pool: nn.MaxPool2d
    dropout: nn.Dropout
    hidden: nn.Linear
    output: nn.Linear

    def forward(self, images: Tensor) -> Tensor:
        x = self.pool(nn.Relu()(self.conv1(images)))  # [b, c1, 14, 14]
        x = self.pool(nn.Relu()(self.conv2(x)))  # [b, c2, 7, 7]
        x = self.dropout(x.reshape([x.shape[0], -1]))
        return self.output(self.dropout(nn.Relu()(self.hidden(x))))

    def forward_classification(self, batch: MnistBatch) -> ClassificationOutput:
        logits = self(batch.images.to_device(self.conv1.weight.device))
        targets = batch.targets.to_device(logits.device)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, targets), logits, targets)


class CnnConfig(nn.Config):
    channels1: int = 8
    channels2: int = 16
    hidden: int = 64
    dropout: float = 0.25

    def init(self, device=None) -> Cnn:
        return Cnn(
            conv1=nn.Conv2dConfig(1, self.channels1, 3, padding=1).init(device),
            conv2=nn.Conv2dConfig(self.channels1, self.channels2, 3, padding=1).init(device),
            pool=nn.MaxPool2d(2),
            dropout=nn.Dropout(self.dropout),
            hidden=nn.LinearConfig(self.channels2 * 49, self.hidden).init(device),
            output=nn.LinearConfig(self.hidden, 10).init(device),
        )
