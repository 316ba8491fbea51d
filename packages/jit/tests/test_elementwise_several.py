"""Large elementwise launches on the GPUs: each invocation takes several elements
(``elements_per_invocation``), a workgroup apart; those past the end store nothing. Sizes
just past a whole number of tiles leave a last tile of one element."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.jit.kernels.elementwise import SEVERAL_FROM, WORKGROUP, elements_per_invocation


@pytest.fixture
def gpu(gpu_jit_backend):
    return gpu_jit_backend


def _generator(backend):
    x = backend.from_data(burnish.TensorData(np.zeros(1, np.float32), burnish.float32),
                          backend.default_device())
    return x.runtime.generator


# One element past a whole number of eight-element tiles, and some past four-element ones.
SIZES = [SEVERAL_FROM + 1, SEVERAL_FROM + 4 * WORKGROUP * 3 + 77]


def test_the_gpu_generators_take_several_elements_of_large_launches(gpu):
    generator = _generator(gpu)
    assert elements_per_invocation(generator, SEVERAL_FROM, ["float32"]) == 8
    assert elements_per_invocation(generator, SEVERAL_FROM, ["float32"] * 3) == 2
    assert elements_per_invocation(generator, SEVERAL_FROM - 1, ["float32"]) == 1


@pytest.mark.parametrize("n", SIZES)
def test_flat_and_broadcast_ops_of_large_tensors(gpu, n):
    device = gpu.default_device()
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    np.testing.assert_allclose((x * y + 1.0).to_numpy(), a * b + 1.0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.exp().to_numpy(), np.exp(a), rtol=1e-5)
    # Strided: rows minus their first column, and a transposed read.
    cols = 1031
    rows = n // cols + 1
    m = rng.standard_normal((rows, cols)).astype(np.float32)
    t = Tensor.from_numpy(m, device)
    np.testing.assert_array_equal((t - t[:, :1]).to_numpy(), m - m[:, :1])
    np.testing.assert_array_equal(t.transpose(0, 1).cast("int32").to_numpy(),
                                  m.T.astype(np.int32))


@pytest.mark.parametrize("n", SIZES)
def test_16_bit_values_of_large_tensors(gpu, n):
    device = gpu.default_device()
    a = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    x = Tensor.from_numpy(a, device).cast("bfloat16")
    expected = (Tensor.from_numpy(a, "ndarray").cast("bfloat16") * 3.0).cast("float32")
    np.testing.assert_array_equal((x * 3.0).cast("float32").to_numpy(), expected.to_numpy())


@pytest.mark.parametrize("n", SIZES)
def test_fused_kernels_of_large_tensors(gpu, n):
    fused = burnish.backend(f"fusion+{gpu.name}")
    device = fused.default_device()
    rng = np.random.default_rng(2)
    cols = 517
    rows = n // cols + 1
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    b = rng.standard_normal((1, cols)).astype(np.float32)
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    got = ((x * 2.0 + y).exp() - x, x + y)  # one kernel, two outputs, a broadcast read
    np.testing.assert_allclose(got[0].to_numpy(), np.exp(a * 2.0 + b) - a, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1].to_numpy(), a + b)
    programs = got[0].primitive.runtime.fused_programs
    assert any(key[-1] > 1 for key in programs), "no fused kernel took several elements"
