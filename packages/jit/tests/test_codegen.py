"""The generators: IR kernels rendered to WGSL, OpenCL C and CUDA C compile, and run.

WGSL goes through wgpu's ``create_shader_module`` (naga validates it), OpenCL C through
PyOpenCL; CUDA C through NVRTC (CuPy) where it is installed, else through ``g++
-fsyntax-only`` with a small prelude standing in for CUDA's headers.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.codegen.c import CudaGenerator, OpenCLGenerator
from burnish.jit.codegen.wgsl import WgslGenerator

FLOAT_FUNCTIONS = ("exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "erf",
                   "floor", "ceil", "round", "trunc", "abs")


def math_kernel(dtype: str) -> ir.Kernel:
    """Every math function and operator on one float dtype's values, stored back."""
    k = KernelBuilder(f"math_{dtype}")
    out = k.buffer("out", dtype, writable=True)
    x = k.buffer("x", dtype)
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    v = k.let(x[i], "v")
    acc = k.let(v * 0.0, "acc")
    for fn in FLOAT_FUNCTIONS:
        k.assign(acc, acc + ir.call(fn, v))
    k.assign(acc, acc + ir.call("pow", v, 2.5) + ir.call("atan2", v, 1.0) + ir.call("fmod", v, 3.0))
    k.assign(acc, acc + ir.call("min", v, 1.0) + ir.call("max", v, -1.0) + v % 2.0 - v / 3.0)
    nan = ir.call("isnan", acc).or_(ir.call("isinf", acc))
    k.assign(acc, ir.select(nan, float("inf"), acc))
    k.assign(acc, ir.select(acc.eq(float("-inf")), float("nan"), acc))
    k.store(out, i, acc)
    return k.build()


def storage_kernel(dtypes: tuple[str, ...]) -> ir.Kernel:
    """Loads, casts (narrowing ones included) and stores of every storage dtype given."""
    k = KernelBuilder("stores")
    outs = [k.buffer("out", d, writable=True) for d in dtypes]
    ins = [k.buffer("in", d) for d in dtypes]
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    for out, src in zip(outs, ins):
        for other in ins:
            k.store(out, i, other[i].cast(out.dtype))
        k.store(out, i, src[i])
    k.store(outs[0], i, (k.info(1).bitcast("u32") >> 3).cast(outs[0].dtype))
    return k.build()


def reduce_kernel(dtype: str) -> ir.Kernel:
    """A workgroup sum through shared memory: loops, a while, barriers, break."""
    size = 64
    k = KernelBuilder("wg_sum", (size, 1, 1))
    out = k.buffer("out", dtype, writable=True)
    x = k.buffer("x", dtype)
    ty = ir.compute_type(dtype)
    shared = k.shared(ty, size)
    local = k.local_id(0)
    group = k.group_index()
    total = k.let(ir.lift(0, ty), "total", ty)
    with k.for_(group * size + local, k.info(0), k.num_groups(0) * size) as j:
        k.assign(total, total + x[j])
    k.shared_store(shared, local, total)
    k.barrier()
    step = k.let(size // 2, "step")
    with k.while_(step > 0):
        with k.if_(local < step):
            k.shared_store(shared, local, shared[local] + shared[local + step])
        k.barrier()
        k.assign(step, step >> 1)
    with k.if_(local.eq(0)):
        k.store(out, group, shared[0])
    with k.for_(0, 4) as n:
        with k.if_(n.eq(2)):
            k.break_()
    return k.build()


def int_kernel(dtype: str) -> ir.Kernel:
    """Integer ops and extreme literals in ``dtype``'s compute type."""
    k = KernelBuilder(f"ints_{dtype}")
    out = k.buffer("out", dtype, writable=True)
    x = k.buffer("x", dtype)
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    v = x[i]
    ty = v.ty
    low = -(2**63) if ty == "i64" else -(2**31)
    r = k.let((v * 3 + 1) % 7 - v / 2, "r")
    k.assign(r, r ^ (v & 5) | (v << 2) >> 1)
    k.assign(r, ir.select(r < 0, ir.call("abs", r), ir.call("max", r, ir.lift(low, ty))))
    k.assign(r, ir.select((~r).eq(0).not_(), -r, r))
    k.store(out, i, ir.call("min", r, 100))
    return k.build()


def f64_kernel() -> ir.Kernel:
    k = KernelBuilder("doubles")
    out = k.buffer("out", "float64", writable=True)
    x = k.buffer("x", "float32")
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    d = x[i].cast("float64")
    k.store(out, i, ir.call("exp", d) + ir.call("erf", d) + d.bitcast("i64").cast("f64")
            + ir.lift(float("inf"), "f64"))
    return k.build()


def dot4_kernel() -> ir.Kernel:
    """The dot product of the four signed bytes of two words."""
    k = KernelBuilder("dot4")
    out = k.buffer("out", "int32", writable=True)
    x = k.buffer("x", "int32")
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    k.store(out, i, ir.call("dot4i8", x[2 * i], x[2 * i + 1]))
    return k.build()


def quant_kernel(tiled: bool) -> ir.Kernel:
    """A quantized product's kernel (kernels.quant's epilogue on kernels.matmul's tiled or
    split kernel): per-channel half scales, zero points of both byte types."""
    from burnish.jit.kernels import matmul, quant

    epilogue = quant.QuantEpilogue(quant.Params("float32", "float32", "float16", "int8",
                                                "uint8", True, True, 0, 128))
    layout = (False, True, True, False)
    if tiled:
        return matmul._tiled_kernel(matmul.TILINGS[0], "int32", 0, layout, False,
                                    epilogue=epilogue)
    return matmul._split_kernel("int32", 0, layout, False, epilogue=epilogue)


WGSL_KERNELS = {
    "dot4": dot4_kernel,
    "quant-tiled": lambda: quant_kernel(True),
    "quant-split": lambda: quant_kernel(False),
    "math-f32": lambda: math_kernel("float32"),
    "math-f16": lambda: math_kernel("float16"),
    "math-bf16": lambda: math_kernel("bfloat16"),
    "storage": lambda: storage_kernel(("float32", "bfloat16", "int32", "int16", "int8", "uint8",
                                       "bool")),
    "storage-f16-i64": lambda: storage_kernel(("float16", "int64", "float32")),
    # The extended dtypes: float8/float4 conversions as helper functions, narrow and sub-byte
    # ints wrapped, uint32 in u32 (uint64 with the int64 kernels' feature).
    "storage-extended": lambda: storage_kernel(
        ("float32", "uint16", "uint32", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
         "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4", "int2",
         "uint2")),
    "storage-u64": lambda: storage_kernel(("uint64", "int64", "float32", "float8_e5m2")),
    "reduce-f32": lambda: reduce_kernel("float32"),
    "reduce-i32": lambda: reduce_kernel("int32"),
    "ints-i32": lambda: int_kernel("int32"),
    "ints-i64": lambda: int_kernel("int64"),
}
C_KERNELS = {
    **WGSL_KERNELS,
    "math-f64": lambda: math_kernel("float64"),
    "storage-all": lambda: storage_kernel(("float64", "float32", "float16", "bfloat16", "int64",
                                           "int32", "int16", "int8", "uint8", "bool")),
    "reduce-f64": lambda: reduce_kernel("float64"),
    "f64": f64_kernel,
}


@pytest.mark.parametrize("name", WGSL_KERNELS)
def test_wgsl_compiles(wgpu_device, name):
    kernel = WGSL_KERNELS[name]()
    needs = {"float16": "shader-f16", "int64": "shader-int64"}
    for dtype in kernel.dtypes():
        if dtype in needs and needs[dtype] not in wgpu_device.features:
            pytest.skip(f"the adapter lacks {needs[dtype]}")
    source = WgslGenerator().generate(kernel)
    wgpu_device.create_shader_module(code=source)  # raises GPUValidationError with naga's words


@pytest.mark.parametrize("name", ["dot4", "quant-tiled"])
def test_wgsl_without_packed_dot_products_compiles(wgpu_device, name):
    source = WgslGenerator(packed_dot=False).generate(WGSL_KERNELS[name]())
    assert "dot4I8Packed" not in source and "fn dot4i8(" in source
    wgpu_device.create_shader_module(code=source)


@pytest.mark.parametrize("name", C_KERNELS)
def test_opencl_compiles(opencl_context, name):
    import pyopencl as cl

    kernel = C_KERNELS[name]()
    device = opencl_context.devices[0]
    if "cl_khr_fp64" not in device.extensions and "64" in name:
        pytest.skip("the OpenCL device lacks cl_khr_fp64")
    source = OpenCLGenerator().generate(kernel)
    program = cl.Program(opencl_context, source).build(options=["-cl-std=CL1.2"])
    assert getattr(program, kernel.name)


# Enough of CUDA's headers for g++ to check the syntax and types of generated CUDA C.
CUDA_PRELUDE = """
#include <cmath>
#include <cstdint>
#define __global__
#define __device__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__
struct float4 { float x, y, z, w; }; struct float2 { float x, y; };
struct int4 { int x, y, z, w; }; struct int2 { int x, y; };
struct uint4 { unsigned x, y, z, w; }; struct uint2 { unsigned x, y; };
#define INFINITY HUGE_VALF
struct uint3 { unsigned int x, y, z; };
extern uint3 threadIdx, blockIdx, gridDim;
struct __half { unsigned short bits; };
float __half2float(__half h);
__half __float2half_rn(float f);
unsigned int __float_as_uint(float f);
float __uint_as_float(unsigned int u);
int __float_as_int(float f);
float __int_as_float(int i);
long long __double_as_longlong(double d);
double __longlong_as_double(long long i);
void __syncthreads();
int __dp4a(int a, int b, int c);
using std::isnan; using std::isinf; using std::rint; using std::erf; using std::copysign;
"""


@pytest.mark.parametrize("name", C_KERNELS)
def test_cuda_renders_and_compiles(name, tmp_path):
    kernel = C_KERNELS[name]()
    source = CudaGenerator().generate(kernel)
    assert f'extern "C" __global__ void {kernel.name}(' in source
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None and cupy.cuda.runtime.getDeviceCount() > 0:
        module = cupy.RawModule(code=source)
        assert module.get_function(kernel.name)
        return
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("neither CuPy with a GPU nor g++ to check the CUDA C")
    body = source.replace("#include <cuda_fp16.h>\n", "")
    path = tmp_path / "kernel.cpp"
    path.write_text(CUDA_PRELUDE + body)
    result = subprocess.run([compiler, "-fsyntax-only", "-std=c++17", "-Werror=return-type",
                             str(path)], capture_output=True, text=True)
    assert result.returncode == 0, f"{result.stderr}\n--- source ---\n{source}"


def test_kernels_with_the_same_ir_render_the_same_source():
    # The kernel cache keys on the op and dtypes, not on the source: generation must be
    # deterministic, and independent of what was generated before.
    generator = WgslGenerator()
    first = generator.generate(math_kernel("float32"))
    generator.generate(storage_kernel(("float32", "bfloat16")))
    assert generator.generate(math_kernel("float32")) == first


def test_ir_rejects_mixed_types():
    k = KernelBuilder("bad")
    x = k.buffer("x", "float32")
    y = k.buffer("y", "int32")
    with pytest.raises(TypeError, match="f32 and i32"):
        x[0] + y[0]
    out = k.buffer("out", "int32", writable=True)
    with pytest.raises(TypeError, match="storing f32 into a int32 buffer"):
        k.store(out, 0, x[0])
    with pytest.raises(ValueError, match="unknown function"):
        ir.call("sinh", x[0])


def test_build_inside_an_open_block_is_an_error():
    k = KernelBuilder("open")
    with pytest.raises(RuntimeError, match="open block"), k.if_(k.info(0).eq(0)):
        k.build()


def test_wgsl_spells_storage_it_lacks_in_32_bits():
    source = WgslGenerator().generate(storage_kernel(("int8", "bool", "bfloat16")))
    assert "array<i32>" in source and "array<u32>" in source and "array<f32>" in source
    assert "round_bf16" in source  # bfloat16 rounds at every store


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "bool"])
def test_generated_kernels_run_on_both_backends(jit_backend, dtype):
    """A generated kernel's results on the device match NumPy's for narrow storage too."""
    from burnish import Tensor
    from burnish.jit.custom import Launch, custom_kernel

    device = jit_backend.default_device()
    if dtype not in {d.name for d in jit_backend.dtypes(device)}:
        pytest.skip(f"{dtype} is not available on {device}")

    def build(k, out, x):
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        v = x[i]
        k.store(out, i, v.not_() if v.ty == "bool" else v * 3 - 1)

    @custom_kernel("three_x_minus_one", build=build)
    def kernel(x):
        return Launch(x.dims(), x.dtype, info=[x.numel()], invocations=x.numel())

    values = np.array([0, 1, 2, -3, 40, 100], dtype=np.float32)
    x = Tensor.from_data(values, device=device).cast(dtype)
    got = kernel(x).to_numpy()
    host = x.to_numpy()
    expected = ~host if dtype == "bool" else (host * 3 - 1)
    np.testing.assert_array_equal(got, expected.astype(got.dtype))


def test_words_multiply_as_four_signed_bytes_on_both_backends(jit_backend):
    """``dot4i8`` against NumPy: the extremes of every byte, and random words."""
    _check_dot4(jit_backend, "dot4_words")


def test_wgsl_shifts_multiply_words_as_the_built_in_does(wgpu_backend, monkeypatch):
    """The spelling for a naga without ``dot4I8Packed``, run on wgpu."""
    runtime = wgpu_backend.runtime(wgpu_backend.default_device())
    monkeypatch.setattr(runtime, "generator", WgslGenerator(packed_dot=False))
    _check_dot4(wgpu_backend, "dot4_words_shifted")


def _check_dot4(backend, name: str) -> None:
    from burnish import Tensor
    from burnish.jit.custom import Launch, custom_kernel

    device = backend.default_device()

    def build(k, out, x):
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        k.store(out, i, ir.call("dot4i8", x[2 * i], x[2 * i + 1]))

    @custom_kernel(name, build=build)
    def kernel(x):
        return Launch((x.dims()[0] // 2,), x.dtype, info=[x.numel() // 2],
                      invocations=x.numel() // 2)

    rng = np.random.default_rng(0)
    extremes = np.array([-128, -127, -1, 0, 1, 127], np.int8)
    pairs = np.stack(np.meshgrid(extremes, extremes), -1).reshape(-1, 2)
    first = np.repeat(pairs[:, :1], 4, 1)
    second = np.roll(np.repeat(pairs[:, 1:], 4, 1), 1, 0)
    random = rng.integers(-128, 128, (200, 4)).astype(np.int8)
    a = np.concatenate([first, random])
    b = np.concatenate([second, np.roll(random, 3, 0)])
    words = np.stack([a.view(np.int32)[:, 0], b.view(np.int32)[:, 0]], 1).reshape(-1)
    got = kernel(Tensor.from_data(words, device=device)).to_numpy()
    expected = (a.astype(np.int64) * b.astype(np.int64)).sum(1)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_runs_of_workgroup_memory_read_the_words_they_name(jit_device, dtype):
    """``shared_load_run``: one wide load in OpenCL C and CUDA C, a load per word in WGSL and
    the cpu backend's C; each run of four and of two reads the words it names, everywhere."""
    from burnish import Tensor
    from burnish.jit.custom import Launch, custom_kernel

    def build(k, out, x):
        t, g = k.local_id(0), k.group_index()
        tile = k.shared(ir.compute_type(dtype), 256)
        for j in range(4):
            k.shared_store(tile, t * 4 + j, x[g * 256 + t * 4 + j])
        k.barrier()
        four = [k.let(ir.lift(0, tile.ty), "w", tile.ty) for _ in range(4)]
        k.shared_load_run(tile, ((t + 1) % 64) * 4, four)
        two = four[:2]
        for i, w in enumerate(four):
            k.store(out, g * 384 + t * 6 + i, w)
        k.shared_load_run(tile, ((t + 3) % 64) * 4 + 2, two)
        for i, w in enumerate(two):
            k.store(out, g * 384 + t * 6 + 4 + i, w)

    @custom_kernel(f"shared_runs_{dtype}", build=build, workgroup=(64, 1, 1))
    def kernel(x):
        return Launch((x.dims()[0] // 256 * 384,), x.dtype, groups=x.dims()[0] // 256)

    values = np.arange(512).astype(dtype)
    got = kernel(Tensor.from_data(values, device=jit_device)).to_numpy().reshape(2, 64, 6)
    for g in range(2):
        for t in range(64):
            four = values[g * 256 + ((t + 1) % 64) * 4:][:4]
            two = values[g * 256 + ((t + 3) % 64) * 4 + 2:][:2]
            np.testing.assert_array_equal(got[g, t], np.concatenate([four, two]))


def test_runs_of_workgroup_memory_take_two_or_four_words_of_its_type():
    k = KernelBuilder("bad", (64, 1, 1))
    tile = k.shared("f32", 64)
    words = [k.let(ir.lift(0, "f32"), "w", "f32") for _ in range(3)]
    with pytest.raises(ValueError, match="2 or 4 vars of f32"):
        k.shared_load_run(tile, 0, words)
    with pytest.raises(ValueError, match="2 or 4 vars of f32"):
        k.shared_load_run(tile, 0, [k.let(ir.lift(0, "i32"), "n", "i32")] * 2)


def test_opencl_and_cuda_read_runs_of_a_product_tile_at_once():
    from burnish.jit.kernels import matmul

    kernel = matmul._tiled_kernel(matmul.LARGE_DEFAULT, "float32", 0,
                                  (False, True, False, True), False)
    opencl, cuda = OpenCLGenerator().generate(kernel), CudaGenerator().generate(kernel)
    assert "*(__local const float4*)" in opencl and "aligned(16)" in opencl
    assert "reinterpret_cast<const float4*>" in cuda and "__align__(16)" in cuda
    assert "float4" not in WgslGenerator().generate(kernel)
