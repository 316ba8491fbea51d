"""``on_gradient_ready``: each leaf's gradient is reported once, final, as soon as its last
consumer has run (the last layer's before the first's), and equal to what Gradients holds."""

import numpy as np

from burnish import Tensor
from burnish.autodiff import on_gradient_ready


def test_leaves_are_reported_when_their_consumers_are_done():
    device = "autodiff+ndarray"
    w1 = Tensor.from_data(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), device).require_grad()
    w2 = Tensor.from_data(np.array([[0.5], [-1.0]], np.float32), device).require_grad()
    x = Tensor.from_data(np.array([[1.0, -1.0]], np.float32), device)
    reported: list = []
    with on_gradient_ready(lambda leaf, grad: reported.append((leaf, grad))):
        hidden = x.matmul(w1)
        out = (hidden * hidden).matmul(w2)  # w1's gradient arrives through two uses of hidden
        grads = out.sum().backward()
    ids = [leaf for leaf, _ in reported]
    assert ids == [w2.primitive.node.leaf_id, w1.primitive.node.leaf_id]  # w2 first, once each
    for tensor, (_, grad) in zip((w2, w1), reported):
        np.testing.assert_array_equal(Tensor.from_primitive(grad, tensor.inner().device,
                                                            tensor.dtype)
                                      .to_numpy(), tensor.grad(grads).to_numpy())


def test_without_a_callback_nothing_is_reported_and_outside_the_block_neither():
    w = Tensor.from_data(np.ones(3, np.float32), "autodiff+ndarray").require_grad()
    reported: list = []
    with on_gradient_ready(lambda leaf, grad: reported.append(leaf)):
        pass
    (w * 2).sum().backward()
    assert reported == []
