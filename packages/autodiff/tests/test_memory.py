"""The graph lives exactly as long as someone needs it: no cycles, freed by backward, and a
training loop does not grow."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np

from burnish import Tensor


def _leaf(ad):
    return Tensor.from_data(np.linspace(-1, 1, 12).reshape(3, 4), device=ad).require_grad()


def test_a_graph_nobody_references_is_freed_without_the_collector(ad):
    gc.disable()
    try:
        x = _leaf(ad)
        e = x.exp()
        kept = weakref.ref(e.primitive.inner)  # exp's node keeps its output for backward
        y = (e * 3.0).sum()
        del e
        assert kept() is not None, "the graph behind y must keep exp's output"
        del y
        assert kept() is None, "nothing references the graph: its saved values must go"
    finally:
        gc.enable()


def test_backward_frees_the_graph_of_a_tensor_still_referenced(ad):
    x = _leaf(ad)
    e = x.exp()
    kept = weakref.ref(e.primitive.inner)
    y = (e * 3.0).sum()
    del e
    y.backward()
    assert kept() is None
    assert y.primitive.node.freed


def test_leaves_do_not_hold_their_consumers(ad):
    x = _leaf(ad)
    node = x.primitive.node
    assert node.parents == () and node.saved == ()
    kept = weakref.ref((x * 2.0).exp().primitive.inner)
    assert kept() is None


def test_training_steps_do_not_grow_memory(ad, mlp):
    model = mlp(ad, sizes=(8, 128, 128, 4))
    batch = np.random.default_rng(1).normal(0, 1, (64, 8))

    def train(steps):
        for _ in range(steps):
            grads = model.loss(batch).backward()
            model.step(grads)

    gc.disable()  # only reference counting: a reference cycle would show up as growth
    tracemalloc.start()
    try:
        train(5)
        before = tracemalloc.get_traced_memory()[0]
        train(50)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    # A step's graph holds about 400 KB of arrays, so 50 kept graphs would be 20 MB. What does
    # grow, by up to some 170 KB over the first few hundred steps, are Python's and NumPy's
    # caches of freed small objects, which then stay full.
    assert after - before < 512 * 1024, f"memory grew by {after - before} bytes over 50 steps"


def test_a_long_chain_backpropagates_and_frees(ad):
    x = _leaf(ad)
    y = x
    for _ in range(3000):
        y = y * 1.0001 + 0.0
    grads = y.sum().backward()
    np.testing.assert_allclose(x.grad(grads).to_numpy(), np.full((3, 4), 1.0001 ** 3000),
                               rtol=1e-4)
    del y  # thousands of nodes, freed one by one without recursion errors


def test_a_rule_keeping_a_widened_cast_keeps_its_16_bit_source(ad):
    # Autocast's float32 views of 16-bit activations: the product below keeps both of its
    # float32 operands for backward; the graph keeps the bfloat16 tensor instead (half the
    # bytes) and casts it again when the rule runs, with the same gradient.
    gc.disable()
    try:
        values = np.linspace(-2, 2, 12).reshape(3, 4)
        x = Tensor.from_data(values, device=ad, dtype="bfloat16").require_grad()
        wide = x.cast("float32")
        kept = weakref.ref(wide.primitive.inner)
        y = (wide * wide).sum()
        del wide
        assert kept() is None, "the float32 copy must not be kept for backward"
        grads = y.backward()
        got = x.grad(grads)
        assert got.dtype is x.dtype
        expected = 2 * Tensor.from_data(values, device=ad, dtype="bfloat16").cast("float32")
        np.testing.assert_array_equal(got.cast("float32").to_numpy(),
                                      expected.cast("bfloat16").cast("float32").to_numpy())
    finally:
        gc.enable()
