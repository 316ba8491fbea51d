"""Broadcast elementwise ops on the cpu backend, a row of the last dim per invocation
(``elementwise_rows``): every input's start in the row once, then a walk with a unit, zero or
other stride. Rows cut into several chunks (``ROW_CHUNK`` made small), rows just at the
threshold, strided and flipped views, scalars and int dtypes agree with NumPy exactly."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.jit.kernels import elementwise


@pytest.fixture
def cpu():
    return burnish.backend("cpu").default_device()


@pytest.fixture(params=[elementwise.ROW_CHUNK, 5], ids=["chunk", "small-chunks"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(elementwise, "ROW_CHUNK", request.param)
    elementwise._PLANS.clear()
    yield request.param
    elementwise._PLANS.clear()


def test_the_cpu_generator_walks_rows_and_the_gpus_do_not():
    from burnish.jit.codegen.c import CudaGenerator, OpenCLGenerator
    from burnish.jit.codegen.cpu import CpuGenerator
    from burnish.jit.codegen.wgsl import WgslGenerator

    assert CpuGenerator.elementwise_rows
    assert not any(g.elementwise_rows for g in (CudaGenerator, OpenCLGenerator, WgslGenerator))


def test_broadcast_ops_walk_rows_as_numpy_computes_them(cpu, chunk):
    rng = np.random.default_rng(chunk)  # values of their own: no stale buffer can pass
    x = rng.standard_normal((2, 6, 7, 9)).astype(np.float32)
    scale = rng.standard_normal((2, 6, 1, 1)).astype(np.float32)
    row = rng.standard_normal((1, 1, 1, 9)).astype(np.float32)
    tx, ts, tr = (Tensor.from_numpy(a, cpu) for a in (x, scale, row))
    np.testing.assert_array_equal((tx * ts).to_numpy(), x * scale)  # stride 0 in the walk
    np.testing.assert_array_equal((tx + tr).to_numpy(), x + row)  # plain and broadcast rows
    np.testing.assert_array_equal((ts * tx - tr).to_numpy(), scale * x - row)
    # a strided walk (every other column) and a flipped one (negative stride)
    wide = rng.standard_normal((5, 40)).astype(np.float32)
    tw = Tensor.from_numpy(wide, cpu)
    np.testing.assert_array_equal((tw[:, ::2] * tw[:, :1]).to_numpy(), wide[:, ::2] * wide[:, :1])
    flipped = tw.flip([1])
    np.testing.assert_array_equal((flipped - tw[:, :1]).to_numpy(), wide[:, ::-1] - wide[:, :1])
    # rows at the threshold and one short of it (the general kernel)
    for cols in (elementwise.ROW_MIN, elementwise.ROW_MIN - 1):
        a = rng.standard_normal((3, cols)).astype(np.float32)
        b = rng.standard_normal((3, 1)).astype(np.float32)
        ta, tb = Tensor.from_numpy(a, cpu), Tensor.from_numpy(b, cpu)
        np.testing.assert_array_equal((ta * tb).to_numpy(), a * b)


def test_rows_with_scalars_ints_and_a_written_output(cpu, chunk):
    rng = np.random.default_rng(chunk + 1)
    x = rng.standard_normal((4, 3, 50)).astype(np.float32)
    low = rng.standard_normal((4, 3, 1)).astype(np.float32)
    tx, tl = Tensor.from_numpy(x, cpu), Tensor.from_numpy(low, cpu)
    np.testing.assert_array_equal(burnish.functional.hard_swish(tx * tl).to_numpy(),
                                  burnish.functional.hard_swish(
                                      Tensor.from_numpy(x * low, cpu)).to_numpy())
    np.testing.assert_array_equal((tx * tl).clamp(-0.5, 0.25).to_numpy(),
                                  np.clip(x * low, -0.5, 0.25))
    ints = rng.integers(-50, 50, (3, 33)).astype(np.int32)
    step = rng.integers(1, 5, (3, 1)).astype(np.int32)
    ti, tstep = Tensor.from_numpy(ints, cpu), Tensor.from_numpy(step, cpu)
    np.testing.assert_array_equal((ti * tstep + 7).to_numpy(), ints * step + 7)
    np.testing.assert_array_equal((ti > tstep).to_numpy(), ints > step)
