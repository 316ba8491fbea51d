"""The cpu backend: kernels rendered to C with work-item loops (barriers split them into
regions), compiled once and cached on disk, products through NumPy's BLAS, and clear errors
where no compiler works."""

from __future__ import annotations

import math

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.cpu.backend import CpuBackend
from burnish.cpu.compiler import Compiler
from burnish.errors import UnsupportedError
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.codegen.cpu import CpuGenerator


def _run(cpu, kernel: ir.Kernel, arrays: list[np.ndarray], info: list[int], groups: int):
    """Launch ``kernel`` over ``groups`` workgroups on copies of ``arrays``; their values after."""
    runtime = cpu.runtime(cpu.default_device())
    buffers = []
    for a in arrays:
        buffer = runtime.pool.alloc(a.nbytes)
        runtime.write(buffer.handle, 0, a)
        buffers.append(buffer)
    runtime.launch(("test", id(kernel)), lambda: kernel, buffers, info, groups=groups)
    raw = runtime.read([(b.handle, 0, a.nbytes) for b, a in zip(buffers, arrays)])
    return [np.frombuffer(r, a.dtype).reshape(a.shape) for r, a in zip(raw, arrays)]


def test_the_device_names_the_processor_and_the_compiler(cpu):
    device = cpu.default_device()
    assert (device.type, device.index) == ("cpu", 0)
    text = cpu.describe_device(device)
    runtime = cpu.runtime(device)
    assert "kernels by" in text and f"; {runtime.threads} threads" in text
    assert runtime.threads == runtime.compiler.threads.count
    assert {d.name for d in cpu.dtypes(device)} >= {"float64", "float16", "bfloat16", "bool"}


def test_a_barrier_orders_every_invocation_of_a_workgroup(cpu):
    # Each invocation writes workgroup memory, then reads its neighbour's after the barrier: a
    # run without the split into regions would read values not yet written.
    k = KernelBuilder("rotate", workgroup=(64, 1, 1))
    out, src = k.buffer("out", "float32", writable=True), k.buffer("src", "float32")
    tile = k.shared("f32", 64)
    t = k.local_id(0)
    g = k.group_index()
    doubled = k.let(src[g * 64 + t] * 2.0, "doubled", "f32")  # lives across the barrier
    k.shared_store(tile, t, doubled)
    k.barrier()
    k.store(out, g * 64 + t, tile[(t + 1) % 64] + doubled)
    x = np.arange(128, dtype=np.float32)
    result, _ = _run(cpu, k.build(), [np.zeros(128, np.float32), x], [0], 2)
    expected = 2 * np.concatenate([np.roll(x[:64], -1), np.roll(x[64:], -1)]) + 2 * x
    np.testing.assert_array_equal(result, expected)


def test_a_loop_around_barriers_runs_once_per_workgroup(cpu):
    # A tree sum: the loop's bound is the same for every invocation, its body two regions.
    k = KernelBuilder("tree", workgroup=(32, 1, 1))
    out, src = k.buffer("out", "float32", writable=True), k.buffer("src", "float32")
    tile = k.shared("f32", 32)
    t = k.local_id(0)
    k.shared_store(tile, t, src[k.group_index() * 32 + t])
    k.barrier()
    step = k.let(16, "step")
    with k.while_(step > 0):
        with k.if_(t < step):
            k.shared_store(tile, t, tile[t] + tile[t + step])
        k.barrier()
        k.assign(step, step / 2)
    with k.if_(t.eq(0)):
        k.store(out, k.group_index(), tile[0])
    x = np.random.default_rng(0).integers(0, 100, 96).astype(np.float32)
    result, _ = _run(cpu, k.build(), [np.zeros(3, np.float32), x], [0], 3)
    np.testing.assert_array_equal(result, x.reshape(3, 32).sum(axis=1))


def test_only_variables_across_regions_become_arrays():
    k = KernelBuilder("vars", workgroup=(8, 1, 1))
    out = k.buffer("out", "float32", writable=True)
    tile = k.shared("f32", 8)
    t = k.local_id(0)
    kept = k.let(t.cast("f32") * 3.0, "kept", "f32")
    local = k.let(kept + 1.0, "local", "f32")
    k.shared_store(tile, t, local)
    k.barrier()
    k.store(out, t, tile[t] + kept)
    source = CpuGenerator().generate(k.build())
    assert f"float {kept.name}[8];" in source
    assert f"float {local.name} = " in source


def test_only_loops_that_just_add_up_a_sum_may_reorder_it(cpu):
    k = KernelBuilder("sums", workgroup=(4, 1, 1))
    out = k.buffer("out", "float32", writable=True)
    x = k.buffer("x", "float32")
    i = k.global_index()
    total = k.let(ir.const(0.0, "f32"), "total", "f32")
    with k.for_(0, k.info(0), name="j") as j:
        k.assign(total, total + ir.call("exp", x[i * k.info(0) + j]))
    running = k.let(ir.const(0.0, "f32"), "running", "f32")
    with k.for_(0, k.info(0), name="j") as j:  # a store in the body: kept in order
        k.assign(running, running + x[i * k.info(0) + j])
        k.store(out, i * k.info(0) + j, running)
    k.store(out, i * k.info(0), total + running)
    kernel = k.build()
    source = CpuGenerator().generate(kernel)
    assert source.count("#pragma omp simd reduction") == 1
    assert f"reduction(+:{total.name})" in source
    data = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    result, _ = _run(cpu, kernel, [np.zeros_like(data), data], [16], groups=1)
    expected = np.cumsum(data, axis=1)
    expected[:, 0] = np.exp(data).sum(axis=1) + expected[:, -1]
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_float32_erf_is_inline_arithmetic_within_one_ulp(cpu):
    # Every 53rd float32 in [-6, 6] (and the values its branch and clamp turn on): erf computed
    # inline, as vector arithmetic, within 1 ulp of the exact value rounded to float32.
    x = np.arange(-6.0, 6.0, 53 * 2.0 ** -23, dtype=np.float32)
    x = np.concatenate([x, np.float32([0.927734375, -0.927734375, np.nextafter(
        np.float32(0.927734375), np.float32(1)), 3.9, 4.0, 1e-30, 1e-40, -0.0, 100.0])])
    got = Tensor.from_numpy(x, "cpu").erf().to_numpy()
    exact = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    ulps = np.abs(got - exact) / np.spacing(np.abs(exact).astype(np.float32))
    assert float(ulps.max()) <= 1.0
    specials = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0])
    got = Tensor.from_numpy(specials, "cpu").erf().to_numpy()
    assert np.isnan(got[0]) and list(got[1:]) == [1.0, -1.0, 0.0, 0.0]
    assert np.signbit(got[4])
    k = KernelBuilder("erf32", workgroup=(8, 1, 1))
    out, a = k.buffer("out", "float32", writable=True), k.buffer("a", "float32")
    i = k.global_index()
    k.store(out, i, ir.call("erf", a[i]))
    source = CpuGenerator(vector_math=True).generate(k.build())
    assert "erf_f32(" in source and "erff(a" not in source and "erf(a" not in source


def test_a_loop_around_a_barrier_may_not_depend_on_the_local_id():
    k = KernelBuilder("bad", workgroup=(8, 1, 1))
    k.buffer("out", "float32", writable=True)
    with k.for_(0, k.local_id(0)):
        k.barrier()
    with pytest.raises(ValueError, match="same for every invocation"):
        CpuGenerator().generate(k.build())


def test_half_floats_round_to_nearest_even_like_numpy(cpu):
    # Every float16 bit pattern read and written back, and float32 values between them.
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = Tensor.from_data(bits.astype(np.float32), device="cpu")
    got = x.cast("float16").to_numpy()
    finite = ~np.isnan(bits)
    np.testing.assert_array_equal(got[finite].view(np.uint16), bits[finite].view(np.uint16))
    assert np.isnan(got[~finite]).all()
    between = np.random.default_rng(1).standard_normal(100_000).astype(np.float32) * 300
    between = np.concatenate([between, np.float32([1e-8, -6e-5, 65519.0, 65520.0, 1e6])])
    y = Tensor.from_data(between, device="cpu").cast("float16").to_numpy()
    with np.errstate(over="ignore"):  # 65520 and 1e6 overflow to inf, as they should
        expected = between.astype(np.float16)
    np.testing.assert_array_equal(y.view(np.uint16), expected.view(np.uint16))
    z = Tensor.from_data(bits, device="cpu").cast("float32").to_numpy()
    np.testing.assert_array_equal(z[finite], bits[finite].astype(np.float32))


def test_products_go_to_blas_and_match_the_kernel(cpu, monkeypatch):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 40, 70)), rng.standard_normal((70, 50))
    runtime = cpu.runtime(cpu.default_device())
    for dtype in ("float32", "float64"):
        x = Tensor.from_data(a.astype(dtype), device="cpu")
        y = Tensor.from_data(b.astype(dtype), device="cpu")
        kernels: list = []
        monkeypatch.setattr(runtime, "dispatch", lambda *args, found=kernels: found.append(args))
        blas = (x @ y.transpose().transpose()).to_numpy()  # a strided right-hand side
        assert not kernels  # no kernel: NumPy's matmul wrote the result
        monkeypatch.undo()
        monkeypatch.setattr(runtime, "library_products", False)
        own = (x @ y).to_numpy()
        monkeypatch.setattr(runtime, "library_products", True)
        tolerance = 1e-4 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(blas, a @ b, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(own, a @ b, rtol=tolerance, atol=tolerance)


def test_a_captured_step_replays_its_blas_work(cpu):
    # Products, convolutions and their weight gradients run in NumPy, not in kernels: a
    # capture must record them too, or replays would leave their outputs stale.
    import burnish.functional as F

    device = burnish.backend("autodiff+cpu").default_device()
    rng = np.random.default_rng(3)
    weight = Tensor.from_data(rng.standard_normal((6, 3, 3, 3)), device=device, dtype="float32")
    dense = Tensor.from_data(rng.standard_normal((6 * 4 * 4, 5)), device=device,
                             dtype="float32")
    bias = Tensor.from_data(rng.standard_normal(6), device=device, dtype="float32")

    def step(w, d, x):
        h = F.relu(F.conv2d(x, w, bias, padding=1))
        h = F.max_pool2d(h, 2).reshape([x.shape[0], -1])
        y = h @ d
        loss = (y * y).mean()
        grads = loss.backward()
        return loss, w.grad(grads), d.grad(grads)

    captured = burnish.capture(step)
    for _ in range(6):
        x = Tensor.from_data(rng.standard_normal((2, 3, 8, 8)), device=device, dtype="float32")
        w, d = weight.require_grad(), dense.require_grad()
        got = [t.to_numpy() for t in captured(w, d, x)]
        want = [t.to_numpy() for t in step(w, d, x)]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert captured.stats()[0]["replays"] >= 3, captured.stats()


def test_numpys_blas_runs_on_one_thread_in_burnishs_work_and_gets_its_threads_back(cpu):
    from threadpoolctl import ThreadpoolController

    def threads() -> list[int]:
        return [c.num_threads for c in ThreadpoolController().select(user_api="blas")
                .lib_controllers]

    before = threads()
    seen = []
    x = Tensor.from_data(np.ones((4, 4), np.float32), device="cpu")
    cpu.runtime(cpu.default_device()).host(lambda a: seen.append(threads()), (x._prim,), ())
    assert seen and all(n == 1 for n in seen[0]), seen
    assert threads() == before


def test_kernels_are_cached_on_disk_by_source(tmp_path, monkeypatch):
    monkeypatch.setenv("BURNISH_CACHE_DIR", str(tmp_path))
    compiler = Compiler()
    probes = set((tmp_path / "cpu-kernels").glob("*.so"))  # the compiler's probes
    source = "int burnish_answer(void) { return 42; }\n"
    assert compiler.build(source).burnish_answer() == 42
    libraries = list(set((tmp_path / "cpu-kernels").glob("*.so")) - probes)
    assert len(libraries) == 1
    stamp = libraries[0].stat().st_mtime_ns
    assert compiler.build(source).burnish_answer() == 42  # loaded, not compiled again
    assert libraries[0].stat().st_mtime_ns == stamp
    assert not [p for p in (tmp_path / "cpu-kernels").iterdir() if p.suffix != ".so"]


def test_a_kernel_that_does_not_compile_shows_the_error_and_the_source(tmp_path, monkeypatch):
    monkeypatch.setenv("BURNISH_CACHE_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"could not compile a kernel:(.|\n)*--- source ---"
                                           r"\nint broken\(void\) \{ return nope; \}"):
        Compiler().build("int broken(void) { return nope; }\n")


def test_without_a_compiler_the_backend_says_what_to_install(monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UnsupportedError, match="no C compiler found .*install gcc or clang"):
        CpuBackend().devices()


def test_device_cpu_names_this_backend(cpu):
    x = Tensor.zeros([2], device="cpu")
    assert x.backend is burnish.backend("cpu")
    assert x.device == cpu.default_device()


def test_a_reshape_that_a_view_can_express_launches_nothing(cpu):
    runtime = cpu.runtime(cpu.default_device())
    data = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    x = Tensor.from_data(data, device="cpu").permute([1, 0, 2, 3])  # [3, 2, 4, 5], strided
    before = runtime.launches
    merged = x.reshape([3, 2, 20]).unsqueeze(1).squeeze(1)
    assert runtime.launches == before
    copied = x.reshape([6, 20])  # the permuted dims cannot merge: a copy
    assert runtime.launches == before + 1
    np.testing.assert_array_equal(merged.to_numpy(), data.transpose(1, 0, 2, 3).reshape(3, 2, 20))
    np.testing.assert_array_equal(copied.to_numpy(), data.transpose(1, 0, 2, 3).reshape(6, 20))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool_", "bfloat16"])
def test_a_cat_of_strided_parts_is_one_call_of_numpys_copies(cpu, dtype, monkeypatch):
    """``cat`` and ``stack`` on ``cpu``: one host call for the dtypes NumPy stores as their
    own name, the ``cat_into`` kernel for the rest (bool and bfloat16, stored as bytes and
    16-bit words), the same values either way."""
    from burnish.cpu import runtime as cpu_runtime

    calls = []
    original = cpu_runtime._cat
    monkeypatch.setattr(cpu_runtime, "_cat", lambda *a: calls.append(1) or original(*a))
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((4, 3, 5)) for _ in range(3)]
    kind = getattr(burnish, dtype)
    parts = [Tensor.from_data(d, device="cpu").cast(kind).permute([1, 0, 2]) for d in data]
    wanted = [p.to_numpy() for p in parts]  # [3, 4, 5] each, strided views
    runtime = cpu.runtime(cpu.default_device())
    before = runtime.launches
    joined = burnish.cat([parts[0], parts[1][:, 1:3], parts[2]], 1)
    stacked = burnish.stack(parts, 2)
    assert runtime.launches == before + 2  # one launch or host call each
    assert len(calls) == (0 if dtype in ("bool_", "bfloat16") else 2)
    np.testing.assert_array_equal(joined.to_numpy(), np.concatenate(
        [wanted[0], wanted[1][:, 1:3], wanted[2]], 1))
    np.testing.assert_array_equal(stacked.to_numpy(), np.stack(wanted, 2))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64", "int16"])
def test_a_select_of_rows_is_one_call_of_numpys_take(cpu, dtype, index_dtype, monkeypatch):
    """``select`` (an embedding's rows) on ``cpu``: one host call of NumPy's ``take`` for the
    dtypes NumPy stores as their own name, the ``gather`` kernel for the rest (bfloat16,
    stored as 16-bit words), the same values either way, along any dim of a strided tensor."""
    from burnish.cpu import runtime as cpu_runtime

    calls = []
    original = cpu_runtime._select
    monkeypatch.setattr(cpu_runtime, "_select", lambda *a: calls.append(1) or original(*a))
    rng = np.random.default_rng(1)
    table = Tensor.from_data(rng.standard_normal((6, 7, 5)), device="cpu").cast(
        getattr(burnish, dtype)).permute([1, 0, 2])  # [7, 6, 5], strided
    wanted = table.to_numpy()
    picks = np.array([3, 0, 6, 3, 1], np.int64)
    indices = Tensor.from_data(picks, device="cpu").cast(getattr(burnish, index_dtype))
    rows = table.select(0, indices)
    indices = Tensor.from_data(np.array([3, 0, 5, 2, 1]), device="cpu").cast(
        getattr(burnish, index_dtype))
    middle = table.select(1, indices[::2])  # a strided index list
    np.testing.assert_array_equal(rows.to_numpy(), wanted[picks])
    np.testing.assert_array_equal(middle.to_numpy(), wanted[:, [3, 5, 1]])
    assert len(calls) == (0 if dtype == "bfloat16" else 2)  # indices of any int: as int64
