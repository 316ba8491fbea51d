"""The WGAN example's networks, as in Burn's: an MLP generator with batch norm and an MLP critic."""

from burnish import Tensor, nn

#: MNIST images are 28x28; both networks see them flattened.
IMAGE_SIZE = 28 * 28


class Block(nn.Module):
    """``Linear``, then batch norm where given, then LeakyReLU (slope 0.2)."""

    linear: nn.Linear
    norm: nn.BatchNorm | None
    activation: nn.LeakyRelu

    def forward(self, x: Tensor) -> Tensor:
        x = self.linear(x)
        if self.norm is not None:
            x = self.norm(x)
        return self.activation(x)


class Generator(nn.Module):
    """``[batch, latent]`` noise to ``[batch, 784]`` images in [-1, 1] (tanh)."""

    blocks: list[Block]
    output: nn.Linear

    def forward(self, noise: Tensor) -> Tensor:
        x = noise
        for block in self.blocks:
            x = block(x)
        return self.output(x).tanh()


class Critic(nn.Module):
    """``[batch, 784]`` images to ``[batch, 1]`` scores: higher for images it takes for real.
    A Wasserstein critic, not a classifier: no sigmoid."""

    blocks: list[Block]
    output: nn.Linear

    def forward(self, images: Tensor) -> Tensor:
        x = images
        for block in self.blocks:
            x = block(x)
        return self.output(x)


def block(inputs: int, outputs: int, norm: bool, device) -> Block:
    return Block(
        linear=nn.LinearConfig(inputs, outputs).init(device),
        norm=nn.BatchNormConfig(outputs, epsilon=0.8).init(device) if norm else None,
        activation=nn.LeakyRelu(0.2),
    )


class GeneratorConfig(nn.Config):
    """Burn's generator: 128, 256, 512 and 1024 units, batch norm on all but the first."""

    latent_dim: int = 100
    hidden: tuple[int, ...] = (128, 256, 512, 1024)

    def init(self, device=None) -> Generator:
        sizes = [self.latent_dim, *self.hidden]
        blocks = [block(sizes[i], sizes[i + 1], i > 0, device) for i in range(len(self.hidden))]
        return Generator(blocks=blocks,
                         output=nn.LinearConfig(sizes[-1], IMAGE_SIZE).init(device))


class CriticConfig(nn.Config):
    """Burn's critic: 512 and 256 units, no batch norm (it would tie a sample's score to the
    others' in its batch)."""

    hidden: tuple[int, ...] = (512, 256)

    def init(self, device=None) -> Critic:
        sizes = [IMAGE_SIZE, *self.hidden]
        blocks = [block(sizes[i], sizes[i + 1], False, device) for i in range(len(self.hidden))]
        return Critic(blocks=blocks, output=nn.LinearConfig(sizes[-1], 1).init(device))
