"""Which operand layouts cuBLAS reads in place: ``burnish.cuda.gemm.operand``'s answer checked
against what cuBLAS's column-major reads would see (no GPU needed), then products of those
layouts on the GPU, from the main thread and from new ones."""

from __future__ import annotations

import math
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from burnish.cuda.gemm import OP_N, operand


def view(shape, strides, offset=0):
    return SimpleNamespace(shape=tuple(shape), strides=tuple(strides), ndim=len(shape),
                           offset=offset)


def as_read_by_cublas(buffer, x, batch, answer):
    """``x``'s matrices as cuBLAS reads them with ``answer``'s operation, leading dim and batch
    stride (row-major [rows, cols] each), or an assertion error for an ld cuBLAS refuses."""
    op, ld, stride = answer
    rows, cols = x.shape[-2:]
    assert ld >= max(1, cols if op == OP_N else rows)
    out = np.empty((math.prod(batch), rows, cols), buffer.dtype)
    for i in range(out.shape[0]):
        base = x.offset + i * stride
        for r in range(rows):
            for c in range(cols):
                out[i, r, c] = buffer[base + (c + r * ld if op == OP_N else r + c * ld)]
    return out


LAYOUTS = {
    # name: (shape, strides, offset, batch)
    "plain": ((3, 4), (4, 1), 0, ()),
    "transposed": ((3, 4), (1, 3), 0, ()),
    "rows of a wider matrix": ((3, 4), (7, 1), 2, ()),
    "one row": ((1, 5), (0, 1), 1, ()),
    "one column, strided": ((5, 1), (3, 9), 0, ()),
    "one row, strided": ((1, 5), (1, 2), 0, ()),
    "batch": ((2, 3, 4), (12, 4, 1), 0, (2,)),
    "batch broadcast": ((1, 3, 4), (0, 4, 1), 0, (5,)),
    "batch of a transposed stack": ((2, 3, 4), (12, 1, 3), 0, (2,)),
    "two batch dims that flatten": ((2, 2, 3, 4), (24, 12, 4, 1), 0, (2, 2)),
    "missing lead batch dim": ((3, 4), (4, 1), 0, (6,)),
}

REFUSED = {
    "expanded rows": ((3, 4), (0, 1), ()),
    "expanded columns": ((3, 4), (1, 0), ()),
    "no unit stride": ((3, 4), (8, 2), ()),
    "batch dims that do not flatten": ((2, 2, 3, 4), (12, 24, 4, 1), (2, 2)),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_layouts_cublas_reads_in_place(name):
    shape, strides, offset, batch = LAYOUTS[name]
    buffer = np.arange(200, dtype=np.float64)
    x = view(shape, strides, offset)
    answer = operand(x, batch)
    assert answer is not None
    truth = np.lib.stride_tricks.as_strided(buffer[offset:], shape,
                                            [s * buffer.itemsize for s in strides])
    truth = np.broadcast_to(truth, batch + shape[-2:]).reshape(-1, *shape[-2:])
    np.testing.assert_array_equal(as_read_by_cublas(buffer, x, batch, answer), truth)


@pytest.mark.parametrize("name", list(REFUSED))
def test_layouts_cublas_cannot_read_are_refused(name):
    shape, strides, batch = REFUSED[name]
    assert operand(view(shape, strides), batch) is None


def _cuda_device():
    import burnish as bn
    from burnish.errors import UnsupportedError

    try:
        return bn.backend("cuda").default_device()
    except UnsupportedError as error:
        pytest.skip(f"needs an NVIDIA GPU with CuPy ({error})")


def test_products_of_views_and_convolutions_match_numpy_on_the_gpu():
    from burnish import Tensor

    device = _cuda_device()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    ta, tb = Tensor.from_data(a, device=device), Tensor.from_data(b, device=device)
    cases = {
        "plain": (ta @ tb, a @ b),
        "transposed": (ta.swap_dims(1, 2) @ ta, a.transpose(0, 2, 1) @ a),
        "expanded rows": (tb[:1].expand((5, 7)).transpose() @ tb[:1].expand((5, 7)),
                          np.broadcast_to(b[:1], (5, 7)).T @ np.broadcast_to(b[:1], (5, 7))),
        "column slice": (ta[:, :, 1:4] @ tb[1:4], a[:, :, 1:4] @ b[1:4]),
    }
    for name, (got, want) in cases.items():
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-4, atol=1e-4, err_msg=name)

    # Convolutions: without bias the patch products go to cuBLAS, with bias or groups to the
    # tiled kernel; all must agree with ndarray's.
    import burnish as bn
    from burnish.functional import conv2d

    cpu = bn.backend("ndarray").default_device()
    x = rng.standard_normal((3, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    for name, weight, kwargs in [("plain", w, {}), ("strided, padded", w,
                                                    {"stride": 2, "padding": 1}),
                                 ("bias", w, {"bias": bias}), ("groups", w2, {"groups": 2})]:
        results = []
        for where in (device, cpu):
            extra = dict(kwargs)
            if "bias" in extra:
                extra["bias"] = Tensor.from_data(extra["bias"], device=where)
            results.append(conv2d(Tensor.from_data(x, device=where),
                                  Tensor.from_data(weight, device=where), **extra).to_numpy())
        np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-4, err_msg=name)


def test_launches_from_new_threads_run():
    from burnish import Tensor

    device = _cuda_device()
    x = np.arange(1000, dtype=np.float32)
    results, errors = {}, []

    def work(i):
        try:
            t = Tensor.from_data(x, device=device)
            results[i] = ((t * float(i) + 1.0) @ t.reshape((1000, 1))).to_numpy()
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for i in range(4):
        np.testing.assert_allclose(results[i], [(x * i + 1) @ x], rtol=1e-5)
