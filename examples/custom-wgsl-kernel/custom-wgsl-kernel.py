"""A custom GPU kernel called as a tensor op: Burn's "custom WGPU kernel" example in burnish.

A fused batched matmul + bias + ReLU, ``relu(lhs @ rhs + bias)``, hand-written in WGSL for the
wgpu backend and checked against the same computation written with tensor ops; then the same
kernel written once in burnish.jit's IR, which runs on wgpu and on rocm (OpenCL) alike.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import burnish as bn
import burnish.functional as F
from burnish import Tensor
from burnish.errors import ShapeError
from burnish.jit import ir
from burnish.jit.custom import Launch, custom_kernel

TILE = 16

# Bindings: the output first (written), then the inputs (read), then the int32 info words. One
# invocation per output element: x runs over columns, y over rows, z over the batch.
FUSED_WGSL = """
@group(0) @binding(0) var<storage, read_write> output: array<f32>;
@group(0) @binding(1) var<storage, read> lhs: array<f32>;
@group(0) @binding(2) var<storage, read> rhs: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> info: array<i32>;   // m, k, n

@compute @workgroup_size(16, 16, 1)
fn fused_matmul_add_relu(@builtin(global_invocation_id) id: vec3<u32>) {
    let m = u32(info[0]);
    let k = u32(info[1]);
    let n = u32(info[2]);
    let row = id.y;
    let col = id.x;
    let batch = id.z;
    if (row >= m || col >= n) {
        return;
    }
    let lhs_start = batch * m * k + row * k;
    let rhs_start = batch * k * n + col;
    var sum = 0.0;
    for (var i = 0u; i < k; i++) {
        sum += lhs[lhs_start + i] * rhs[rhs_start + i * n];
    }
    let index = batch * m * n + row * n + col;
    output[index] = max(sum + bias[index], 0.0);
}
"""


def plan(lhs: Tensor, rhs: Tensor, bias: Tensor) -> Launch:
    """``relu(lhs @ rhs + bias)`` for lhs [b, m, k], rhs [b, k, n] and bias [b, m, n]."""
    if lhs.ndim != 3 or rhs.ndim != 3:
        raise ShapeError(f"fused_matmul_add_relu: lhs and rhs must be 3-d, got {lhs.shape} and "
                         f"{rhs.shape}")
    b, m, k = lhs.dims()
    if rhs.dims()[:2] != [b, k]:
        raise ShapeError(f"fused_matmul_add_relu: rhs must be [{b}, {k}, n], got {rhs.shape}")
    n = rhs.dims()[2]
    if bias.dims() != [b, m, n]:
        raise ShapeError(f"fused_matmul_add_relu: bias must be [{b}, {m}, {n}], got {bias.shape}")
    return Launch((b, m, n), lhs.dtype, info=[m, k, n],
                  groups=(-(-n // TILE), -(-m // TILE), b))


fused_wgsl = custom_kernel("fused_matmul_add_relu", wgsl=FUSED_WGSL, workgroup=(TILE, TILE, 1),
                           dtypes=["float32"])(plan)


def build_fused(k, output, lhs, rhs, bias):
    """The same kernel in the IR: written once, generated as WGSL, OpenCL C or CUDA C, for
    every float dtype of the inputs."""
    m, depth, n = k.info(0), k.info(1), k.info(2)
    row = k.let(k.group_id(1) * TILE + k.local_id(1), "row")
    col = k.let(k.group_id(0) * TILE + k.local_id(0), "col")
    batch = k.let(k.group_id(2), "batch")
    with k.if_((row >= m).or_(col >= n)):
        k.return_()
    lhs_start = k.let(batch * m * depth + row * depth, "lhs_start")
    rhs_start = k.let(batch * depth * n + col, "rhs_start")
    ty = ir.compute_type(output.dtype)
    total = k.let(ir.lift(0.0, ty), "sum", ty)
    with k.for_(0, depth) as i:
        k.assign(total, total + lhs[lhs_start + i] * rhs[rhs_start + i * n])
    index = k.let(batch * m * n + row * n + col, "index")
    k.store(output, index, ir.call("max", total + bias[index], 0.0))


fused_ir = custom_kernel("fused_matmul_add_relu", build=build_fused,
                         workgroup=(TILE, TILE, 1))(plan)


def reference(lhs: Tensor, rhs: Tensor, bias: Tensor) -> Tensor:
    """The same computation with tensor ops: three kernels and two intermediate tensors."""
    return F.relu(lhs.matmul(rhs) + bias)


def inputs(device, b: int, m: int, k: int, n: int) -> tuple[Tensor, Tensor, Tensor]:
    rng = np.random.default_rng(0)
    return tuple(Tensor.from_data(rng.standard_normal(shape).astype(np.float32), device=device)
                 for shape in ((b, m, k), (b, k, n), (b, m, n)))


def check(name: str, kernel, device, sizes: tuple[int, int, int, int]) -> None:
    lhs, rhs, bias = inputs(device, *sizes)
    fused = kernel(lhs, rhs, bias)
    expected = reference(lhs, rhs, bias)
    error = float((fused - expected).abs().max().item())
    start = time.perf_counter()
    kernel(lhs, rhs, bias).to_numpy()
    took = (time.perf_counter() - start) * 1e3
    print(f"{name:<34} {device.backend.name:<5} {str(fused.shape):<14} max |fused - tensor ops| "
          f"= {error:.2e}  ({took:.1f} ms)")
    if not error < 1e-3:
        raise SystemExit(f"{name} on {device.backend.name} differs from the tensor ops by {error}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs=4, default=[2, 64, 48, 80],
                        metavar=("B", "M", "K", "N"), help="lhs is [B, M, K], rhs [B, K, N]")
    args = parser.parse_args()
    sizes = tuple(args.size)
    try:
        wgpu = bn.backend("wgpu").default_device()
    except Exception as error:
        print(f"the wgpu backend cannot start here: {error}", file=sys.stderr)
        return 1
    check("hand-written WGSL", fused_wgsl, wgpu, sizes)
    check("IR kernel (generated WGSL)", fused_ir, wgpu, sizes)
    try:
        rocm = bn.backend("rocm").default_device()
    except Exception as error:
        print(f"rocm cannot start here ({error}); the IR kernel ran on wgpu only")
    else:
        check("IR kernel (generated OpenCL C)", fused_ir, rocm, sizes)
        lhs, rhs, bias = inputs(rocm, *sizes)
        try:
            fused_wgsl(lhs, rhs, bias)
        except bn.UnsupportedError as error:
            print(f"and the WGSL kernel on rocm says: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
