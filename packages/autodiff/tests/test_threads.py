"""Gradients of one model computed in several threads and merged in the main thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def test_worker_thread_gradients_merge_with_the_main_threads(ad, mlp, batch):
    model = mlp(ad)
    first, second = batch[:16], batch[16:]
    found = {}

    def work():
        found["grads"] = model.loss(second).backward()
        found["thread"] = threading.current_thread().name

    worker = threading.Thread(target=work, name="worker")
    worker.start()
    mine = model.loss(first).backward()
    worker.join()
    assert found["thread"] == "worker"
    merged = mine.merge(found["grads"])
    together = (model.loss(first) + model.loss(second)).backward()
    for w in model.params:
        np.testing.assert_allclose(w.grad(merged).to_numpy(), w.grad(together).to_numpy(),
                                   rtol=1e-5, atol=1e-7)


def test_many_threads_at_once(ad, mlp, batch):
    model = mlp(ad)
    chunks = np.split(batch, 8)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: model.loss(x).backward(), chunks * 4))
    total = results[0]
    for grads in results[1:]:
        total = total + grads
    expected = None
    for x in chunks:
        grads = model.loss(x).backward()
        expected = grads if expected is None else expected + grads
    for w in model.params:
        np.testing.assert_allclose(w.grad(total).to_numpy(), 4 * w.grad(expected).to_numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_gradients_read_while_another_thread_removes(ad, mlp, batch):
    model = mlp(ad)
    grads = model.loss(batch).backward()
    w0, w1 = model.params
    with ThreadPoolExecutor(2) as pool:
        removed = pool.submit(w0.grad_remove, grads)
        read = pool.submit(w1.grad, grads)
    assert removed.result() is not None and read.result() is not None
    assert w0.grad(grads) is None and len(grads) == 1
