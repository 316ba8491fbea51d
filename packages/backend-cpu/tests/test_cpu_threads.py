"""The cpu backend's thread pool: every range of a parallel loop run once, from any number of
callers at once; the workers spinning through a busy phase (a replay) and not after it; the
thread count and the spin taken from the environment, bad values refused; no OpenMP region left
in the kernels, and their results the same on any thread count."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

import numpy as np
import pytest

import burnish
from burnish.cpu import threads as cpu_threads
from burnish.cpu.compiler import Compiler
from burnish.jit.codegen.cpu import PARALLEL_HEADER

#: Each element of [0, n) gets its index plus one, added (so a range run twice shows); the
#: ranges' sizes counted, and the part count asked for passed through.
_COVER = PARALLEL_HEADER + r"""
struct cover { int64_t *out; int64_t *calls; };
static void cover_range(void *context, int64_t begin, int64_t end) {
    struct cover *c = context;
    for (int64_t i = begin; i < end; i++) c->out[i] += i + 1;
    __atomic_fetch_add(c->calls, 1, __ATOMIC_RELAXED);
}
void cover(int64_t *out, int64_t n, int64_t parts, int64_t *calls) {
    struct cover c = {out, calls};
    burnish_parallel(cover_range, &c, n, parts);
}
"""


@pytest.fixture(scope="module")
def compiler() -> Compiler:
    try:
        return Compiler()
    except Exception as error:  # no C compiler: the backend's own tests say what to install
        pytest.skip(f"no C compiler ({error})")


@pytest.fixture(scope="module")
def cover(compiler):
    function = compiler.build(_COVER).cover
    function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    function.restype = None
    return function


def test_every_range_runs_once_for_any_split(compiler, cover):
    calls = np.zeros(1, np.int64)
    for n, parts in [(0, 4), (1, 8), (7, 1), (7, 3), (1000, 8), (1000, 1000), (5, 64)]:
        out = np.zeros(max(n, 1), np.int64)
        calls[0] = 0
        for _ in range(20):  # jobs back to back: the workers take them while spinning
            cover(out.ctypes.data, n, parts, calls.ctypes.data)
        np.testing.assert_array_equal(out[:n], 20 * np.arange(1, n + 1), err_msg=f"{n} {parts}")
        if n:
            assert 20 <= calls[0] <= 20 * min(n, parts)


def test_callers_on_several_threads_at_once_each_get_their_loop_done(compiler, cover):
    """One caller's loop on the pool at a time; another's meanwhile runs on its own thread."""
    failures: list[str] = []

    def work(seed: int) -> None:
        calls = np.zeros(1, np.int64)
        for round_ in range(200):
            n = 1 + (seed * 7919 + round_ * 104729) % 3000
            out = np.zeros(n, np.int64)
            cover(out.ctypes.data, n, 8, calls.ctypes.data)  # ctypes lets the GIL go
            if not np.array_equal(out, np.arange(1, n + 1)):
                failures.append(f"caller {seed}, round {round_}, n {n}")

    callers = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert not failures


def _until(condition, seconds: float = 5.0) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_workers_spin_through_a_busy_phase_and_stop_after_it(compiler):
    pool = compiler.threads
    if pool.count < 2:
        pytest.skip("one thread (OMP_NUM_THREADS=1 or one CPU): no workers to spin")
    workers = pool.count - 1
    # Asleep between jobs once their spin is over; woken by a busy phase, and kept awake
    # through it however long it lasts; asleep again after it. (Asleep or awake, not processor
    # time: a spinning worker yields its core every few dozen spins, so on a machine busy with
    # other work it may get little of one.)
    assert _until(lambda: pool.sleepers() == workers), "workers still awake after earlier work"
    with pool.busy():
        assert _until(lambda: pool.sleepers() == 0), "a busy phase woke no worker"
        time.sleep(0.05)  # no job: far longer than a worker spins outside a busy phase
        assert pool.sleepers() == 0, "a worker went to sleep during a busy phase"
    assert _until(lambda: pool.sleepers() == workers), "workers still awake after the phase"
    if pool.spent() is None:
        return  # this system does not give a thread's processor time
    settled = pool.spent()
    time.sleep(0.05)
    after = pool.spent() - settled
    assert after < 0.002, f"the workers spun {after * 1e3:.2f} ms in 50 ms after it"


def test_a_replay_is_a_busy_phase():
    cpu = burnish.backend("cpu")
    runtime = cpu.runtime(cpu.default_device())
    pool = runtime.compiler.threads
    phases: list[str] = []
    real = pool._busy

    def busy(on: int) -> None:
        phases.append("start" if on else "end")
        real(on)

    pool._busy = busy
    try:
        @burnish.capture
        def step(x):
            return (x * 2 + 1).sum()

        x = burnish.Tensor.from_data(np.arange(64, dtype=np.float32), device="cpu")
        for _ in range(4):  # warm-up, recording, then replays
            step(x)
        assert phases and phases.count("start") == phases.count("end")
        assert phases[-2:] == ["start", "end"]
        assert float(step(x).to_numpy()) == float((np.arange(64) * 2 + 1).sum())
    finally:
        pool._busy = real


def test_thread_count_and_spin_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3,2")
    assert cpu_threads.thread_count() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    assert cpu_threads.thread_count() >= 1  # not a count: every CPU the process may use
    monkeypatch.delenv("BURNISH_CPU_SPIN_US", raising=False)
    assert cpu_threads.spin_microseconds() == cpu_threads.DEFAULT_SPIN_US
    monkeypatch.setenv("BURNISH_CPU_SPIN_US", "250")
    assert cpu_threads.spin_microseconds() == 250
    for bad in ("-1", "fast", "1.5"):
        monkeypatch.setenv("BURNISH_CPU_SPIN_US", bad)
        with pytest.raises(ValueError, match=f"BURNISH_CPU_SPIN_US.*{bad!r}"):
            cpu_threads.spin_microseconds()


@pytest.mark.skipif(not hasattr(os, "fork"),
                    reason="os.fork is missing on this platform (Windows): no forked child")
def test_a_forked_child_runs_its_loops_on_its_own_thread(compiler, cover):
    """The child has none of the parent's workers: its loops must not wait for them (nor
    touch them), and give the same results."""
    pool = compiler.threads
    calls = np.zeros(1, np.int64)
    out = np.zeros(1000, np.int64)
    cover(out.ctypes.data, 1000, 8, calls.ctypes.data)  # the workers started
    time.sleep(0.01)  # and asleep: a wake would narrow their affinity
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 when the loop covered every element once
        status = 1
        try:
            out = np.zeros(1000, np.int64)
            with pool.busy():
                cover(out.ctypes.data, 1000, 8, calls.ctypes.data)
            status = 0 if np.array_equal(out, np.arange(1, 1001)) else 2
            if sys.platform == "linux" and pool.spent() != 0.0:  # no worker of its own
                status = 3
        finally:
            os._exit(status)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's loop did not finish in 30 s")


def test_no_openmp_parallel_region_is_left_in_the_kernels():
    """Kernels are built without OpenMP's runtime (``-fopenmp-simd``): a parallel region or
    work-sharing loop would compile and silently run on one thread."""
    import re
    from pathlib import Path

    import burnish.cpu
    from burnish.jit.codegen import cpu as codegen_cpu

    pattern = re.compile(r"omp\s+(parallel|for|sections|single|critical|barrier|task)\b"
                         r"|omp\.h|omp_get_")
    files = sorted(Path(burnish.cpu.__file__).parent.glob("*.py"))
    files.append(Path(codegen_cpu.__file__))
    found = [f"{path.name}:{number}: {line.strip()}" for path in files
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if pattern.search(line)]
    assert not found, "OpenMP regions left (use burnish_parallel):\n" + "\n".join(found)


#: Winograd convolutions (one with odd sizes, two groups and output channels in parts), the
#: merged forward of a batch of one and values-only max pooling at stride 2 (split lines),
#: their outputs' bytes hashed.
_KERNELS = r"""
import hashlib
import numpy as np
import burnish
from burnish.cpu import conv as cpu_conv
from burnish.cpu.blas import Gemm
from burnish.cpu.compiler import Compiler

compiler = Compiler()
gemm = Gemm(compiler, compiler.threads.count)
native = cpu_conv.NativeConv(compiler, gemm)
rng = np.random.default_rng(7)
digest = hashlib.sha256()
for batch, channels, m, size, groups in [(2, 64, 64, (28, 28), 1), (3, 32, 96, (15, 13), 2),
                                         (1, 256, 512, (7, 7), 1)]:
    x = rng.uniform(-2, 2, (batch, channels, *size)).astype(np.float32)
    w = rng.uniform(-1, 1, (groups, m // groups, channels // groups * 9)).astype(np.float32)
    bias = rng.uniform(-1, 1, m).astype(np.float32)
    words = cpu_conv.geometry(size, size, (3, 3), (1, 1), (1, 1), (1, 1), (size[1], 1))
    out = np.full((batch, m, *size), np.nan, np.float32)
    with gemm.guard:
        native.bind_forward(x, w, bias, out, words, groups, False)()
    digest.update(out.tobytes())
x = rng.standard_normal((4, 64, 56, 56)).astype(np.float32)
y = burnish.functional.max_pool(burnish.Tensor.from_data(x, device="cpu"), (3, 3),
                                stride=(2, 2), padding=(1, 1))
digest.update(y.to_numpy().tobytes())
print(compiler.threads.count, digest.hexdigest())
"""


def test_convolution_and_pooling_results_do_not_depend_on_the_thread_count():
    """Their ranges are cut by the shape alone and write outputs of their own: 1, 2 and 3
    threads give the same bytes."""
    import subprocess

    from burnish.cpu import conv as cpu_conv

    assert cpu_conv.WINOGRAD and cpu_conv.MERGE_TASKS == 2  # the paths _KERNELS goes through
    digests = {}
    for count in (1, 2, 3):
        env = dict(os.environ, OMP_NUM_THREADS=str(count))
        run = subprocess.run([sys.executable, "-c", _KERNELS], env=env, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        threads, digest = run.stdout.split()
        assert int(threads) == count
        digests[count] = digest
    assert len(set(digests.values())) == 1, digests
