"""One model over two backends: the wide first layer on the GPU (wgpu), the head and the loss
on the CPU (ndarray), trained with Adam on ``autodiff+router(wgpu,ndarray)``; gradients flow back
across both moves and every parameter stays on its device."""

from __future__ import annotations

import time

import numpy as np

import burnish as bn
from burnish import Tensor, nn, optim


class SplitMlp(nn.Module):
    """``hidden`` runs on ``gpu`` and ``head`` on ``cpu``; ``forward`` moves between them."""

    hidden: nn.Linear
    head: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        gpu, cpu = self.hidden.weight.device, self.head.weight.device
        features = nn.Relu()(self.hidden(x.to_device(gpu)))
        return self.head(features.to_device(cpu))


def main() -> None:
    router = bn.backend("autodiff+router(wgpu,ndarray)")
    gpu, cpu = router.devices()[0], router.devices()[-1]
    print(f"devices: {', '.join(f'{d} ({router.describe_device(d)})' for d in router.devices())}")

    rng = np.random.default_rng(0)
    points = rng.normal(size=(512, 2)).astype(np.float32)
    labels = (points[:, 0] * points[:, 1] > 0).astype(np.int64)   # XOR-like quadrants
    x, y = Tensor.from_data(points, device=cpu), Tensor.from_data(labels, device=cpu)

    bn.seed(0)
    model = SplitMlp(nn.LinearConfig(2, 64).init(gpu), nn.LinearConfig(64, 2).init(cpu))
    loss_fn, optimizer = nn.CrossEntropyLoss(), optim.Adam()
    start = time.perf_counter()
    for step in range(1, 101):
        loss = loss_fn(model(x), y)
        model = optimizer.step(0.02, model, loss.backward())
        if step % 25 == 0:
            print(f"step {step:3d}: loss {loss.item():.3f}")
    accuracy = (model(x).argmax(1).reshape([-1]) == y).float().mean().item()
    print(f"accuracy {accuracy:.1%} in {time.perf_counter() - start:.1f} s; hidden on "
          f"{model.hidden.weight.device}, head on {model.head.weight.device}")


if __name__ == "__main__":
    main()
