"""The custom image dataset example's CNN: two conv blocks, a fixed-size pooling, two linears."""

from pipeline import ImageBatch

from burnish import Tensor, nn
from burnish.train import ClassificationOutput


class Cnn(nn.Module):
    """``[batch, channels, height, width]`` images to ``[batch, classes]`` logits, for any image
    size of at least 16x16 (the adaptive pooling gives 4x4 whatever comes in)."""

    conv1: nn.Conv2d
    conv2: nn.Conv2d
    pool: nn.MaxPool2d
    squeeze: nn.AdaptiveAvgPool2d
    dropout: nn.Dropout
    hidden: nn.Linear
    output: nn.Linear

    def forward(self, images: Tensor) -> Tensor:
        x = self.pool(nn.Relu()(self.conv1(images)))  # [b, c1, h/2, w/2]
        x = self.squeeze(self.pool(nn.Relu()(self.conv2(x))))  # [b, c2, 4, 4]
        x = self.dropout(x.reshape([x.shape[0], -1]))
        return self.output(self.dropout(nn.Relu()(self.hidden(x))))

    def forward_classification(self, batch: ImageBatch) -> ClassificationOutput:
        logits = self(batch.images.to_device(self.conv1.weight.device))
        targets = batch.targets.to_device(logits.device)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, targets), logits, targets)


class CnnConfig(nn.Config):
    channels: int
    classes: int
    channels1: int = 16
    channels2: int = 32
    hidden: int = 64
    dropout: float = 0.25

    def init(self, device=None) -> Cnn:
        return Cnn(
            conv1=nn.Conv2dConfig(self.channels, self.channels1, 3, padding=1).init(device),
            conv2=nn.Conv2dConfig(self.channels1, self.channels2, 3, padding=1).init(device),
            pool=nn.MaxPool2d(2),
            squeeze=nn.AdaptiveAvgPool2d((4, 4)),
            dropout=nn.Dropout(self.dropout),
            hidden=nn.LinearConfig(self.channels2 * 16, self.hidden).init(device),
            output=nn.LinearConfig(self.hidden, self.classes).init(device),
        )
