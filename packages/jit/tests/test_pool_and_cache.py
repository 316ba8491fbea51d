"""The memory pool (size classes, reuse, trimming) and the kernel cache (one compile per key)."""

from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import pytest

from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.codegen.wgsl import WgslGenerator
from burnish.jit.runtime import BufferPool, Runtime, size_class


class CountingRuntime(Runtime):
    """A runtime that only counts what it is asked to do (no device)."""

    generator = WgslGenerator()

    def __init__(self) -> None:
        super().__init__()
        self.allocations: list[int] = []
        self.freed: list[int] = []
        self.compiles = 0
        self.launches: list[tuple[int, int, int]] = []

    def describe(self) -> str:
        return "counting"

    def allocate(self, nbytes):
        self.allocations.append(nbytes)
        return ["buffer", len(self.allocations)]

    def free(self, handle):
        self.freed.append(handle[1])

    def write(self, handle, offset, data):
        pass

    def read(self, items):
        return [bytes(n) for _, _, n in items]

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        pass

    def compile(self, kernel, source):
        self.compiles += 1
        return kernel.name

    def dispatch(self, compiled, handles, info, groups):
        self.launches.append(groups)

    def sync(self):
        pass


def test_size_classes_round_up_in_bounded_steps():
    assert size_class(1) == 256
    assert size_class(256) == 256
    assert size_class(257) == 512
    assert size_class(65536) == 65536
    for n in (65537, 100_000, 1 << 20, 3_000_001, 64 << 20):
        size = size_class(n)
        assert n <= size <= n * 1.125 + 1, (n, size)
        assert size_class(size) == size  # a class is its own class


def test_a_freed_buffer_is_reused_for_the_same_size_class():
    runtime = CountingRuntime()
    pool = runtime.pool
    a = pool.alloc(1000)
    handle = a.handle
    del a
    assert pool.stats() == {"allocated_bytes": 1024, "free_bytes": 1024}
    b = pool.alloc(900)  # same class (1024)
    assert b.handle is handle
    assert runtime.allocations == [1024]
    assert pool.stats()["free_bytes"] == 0
    c = pool.alloc(5000)  # another class: a new allocation
    assert c.handle is not handle
    assert runtime.allocations == [1024, 5120]


def test_the_pool_gives_memory_back_beyond_its_limit():
    runtime = CountingRuntime()
    pool = BufferPool(runtime, limit=4096)
    buffers = [pool.alloc(1024) for _ in range(8)]
    assert pool.stats()["allocated_bytes"] == 8192
    del buffers
    gc.collect()
    stats = pool.stats()
    assert stats["free_bytes"] <= 4096
    assert runtime.freed, "nothing was given back to the API"
    assert stats["allocated_bytes"] == 8192 - 1024 * len(runtime.freed)


def test_threads_taking_and_returning_buffers_never_share_one():
    # The pool's per-op path takes no lock: a buffer must still go to one holder at a time,
    # and the books must balance once everything is returned.
    runtime = CountingRuntime()
    pool = BufferPool(runtime, limit=1 << 40)
    in_use: set[int] = set()
    clashes = []

    def work():
        for i in range(3000):
            held = [pool.alloc(256 * (1 + i % 3)) for _ in range(3)]
            for buffer in held:
                key = id(buffer.handle)
                if key in in_use:
                    clashes.append(key)
                in_use.add(key)
            for buffer in held:
                in_use.discard(id(buffer.handle))
            del held, buffer

    threads = [threading.Thread(target=work) for _ in range(4)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(previous)
    assert not clashes
    stats = pool.stats()
    assert stats["free_bytes"] == stats["allocated_bytes"] == sum(runtime.allocations)


def _kernel(name: str = "copy") -> ir.Kernel:
    k = KernelBuilder(name)
    out, x = k.buffer("out", "float32", writable=True), k.buffer("x", "float32")
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    k.store(out, i, x[i])
    return k.build()


def test_the_same_key_compiles_once():
    runtime = CountingRuntime()
    built = []

    def build():
        built.append(1)
        return _kernel()

    out, x = runtime.pool.alloc(64), runtime.pool.alloc(64)
    for n in (10, 1000, 10**6):  # sizes travel in info, never in the key
        runtime.launch(("copy", "float32"), build, [out, x], [n], invocations=n)
    assert (len(built), runtime.compiles) == (1, 1)
    runtime.launch(("copy", "float16"), lambda: _kernel("copy16"), [out, x], [1], invocations=1)
    assert runtime.compiles == 2
    assert "fn copy(" in runtime.source_of(("copy", "float32"))


def test_large_launches_split_across_x_and_y():
    runtime = CountingRuntime()
    out = runtime.pool.alloc(4)
    runtime.launch("k", _kernel, [out, out], [0], invocations=256 * 70000)
    runtime.launch("k", _kernel, [out, out], [0], groups=3)
    assert runtime.launches == [(65535, 2, 1), (3, 1, 1)]


def test_hand_written_source_is_compiled_as_given():
    runtime = CountingRuntime()
    kernel = ir.Kernel("mine", [ir.Buffer("out", "float32", True)], (64, 1, 1), [], [])
    runtime.kernel("mine", lambda: (kernel, "// my source\n"))
    assert runtime.source_of("mine") == "// my source\n"


def test_backend_tensors_reuse_pooled_buffers(jit_backend):
    from burnish import Tensor

    device = jit_backend.default_device()
    pool = jit_backend.runtime(device).pool
    x = Tensor.from_data(np.ones(5000, np.float32), device=device)
    y = x + 1.0
    y.to_numpy()
    del y
    gc.collect()
    before = pool.stats()["allocated_bytes"]
    for _ in range(20):
        (x + 1.0).to_numpy()  # each result dies: its buffer serves the next one
    assert pool.stats()["allocated_bytes"] == before


def test_new_shapes_compile_nothing(jit_backend):
    from burnish import Tensor

    device = jit_backend.default_device()
    runtime = jit_backend.runtime(device)
    a = Tensor.from_data(np.ones((3, 4), np.float32), device=device)
    (a * a).to_numpy()
    compiled = len(runtime._kernels)
    for shape in ((5, 7), (100, 3), (1, 1)):
        b = Tensor.from_data(np.ones(shape, np.float32), device=device)
        (b * b).to_numpy()
    assert len(runtime._kernels) == compiled


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_tiny_reads(jit_backend, n):
    from burnish import Tensor

    device = jit_backend.default_device()
    x = Tensor.from_data(np.arange(n, dtype=np.float32), device=device)
    np.testing.assert_array_equal((x * 2.0).to_numpy(), np.arange(n, dtype=np.float32) * 2)
