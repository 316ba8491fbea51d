"""The cpu backend's threads: one pool of POSIX threads shared by every compiled kernel.

A parallel loop (``burnish_parallel(task, context, n, parts)`` in C, declared by
``burnish.jit.codegen.cpu.PARALLEL_HEADER``) cuts ``[0, n)`` into ``parts`` ranges, and the
calling thread and the workers take them as they come: the caller starts at once and takes
every range no worker has taken, so it never waits for a thread that is asleep (or has no
core), only for ranges in progress. Kernels make each range's results independent of the
thread that runs it, so they do not depend on the thread count.

Between loops the workers spin for the next job (which then starts without a wake) for
``BURNISH_CPU_SPIN_US`` microseconds (default 100), then sleep. While a captured replay runs
(``Threads.busy``) they spin until it ends, however long its gaps, and they are woken at its
start, so that the wake overlaps its first commands; at its end they go to sleep at once: no
spinning is left behind on cores that another process (or NumPy's, or another library's
threads) may want. A spinning thread yields its core every few dozen spins.

A sleeping worker is woken on another core than the caller's (on Linux its affinity narrowed
until it runs, then set back to the process's as it was when the pool started): a virtual
machine's scheduler otherwise wakes it on the caller's core, behind the caller, until the load
balancer moves it a millisecond or more later (bench/RESULTS.md, 2026-11-28).

OpenMP's runtime cannot do this: libgomp reads its spin count once (``GOMP_SPINCOUNT``), and
its caller waits at the end of every parallel region for all the team's threads, asleep or
not. The kernels keep OpenMP's ``simd`` pragmas (``-fopenmp-simd``: no runtime).

``OMP_NUM_THREADS`` (its first number) sets the thread count, the caller included, as it does
for OpenMP; else all the CPUs this process may use. A child of ``fork`` has none of the
parent's workers: its loops run on its own thread.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef void (*burnish_task)(void *context, int64_t begin, int64_t end);

#define MAX_THREADS 1024
static int threads = 1;                 /* the caller and threads - 1 workers */
static int64_t spin_ns;                 /* a worker's spin for the next job outside busy */
static _Atomic uint64_t state;          /* job number << 32 | the next part to take */
static _Atomic int64_t finished;        /* parts of the current job done */
static _Atomic int generation;          /* bumped for each job and each busy start */
static _Atomic int busy;                /* replays running: workers spin till it is 0 */
static _Atomic int sleepers;
static _Atomic int owned;               /* a caller's job is on: another runs its alone */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wakeup = PTHREAD_COND_INITIALIZER;
static burnish_task job_task;
static void *job_context;
static int64_t job_n, job_parts;
static _Thread_local int inside;        /* in a part already: a nested loop runs serially */
static pthread_t workers[MAX_THREADS];
static int asleep[MAX_THREADS];         /* under lock: worker i waits for a wake */
#if defined(__linux__)
static cpu_set_t process_cpus;          /* where the process may run, when the pool started */
#endif

static int64_t clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Parts of job number ``job`` while it has some left. The task and context read before a
   part is taken belong to that job: the next is published only once every part is done. */
static void take_parts(uint64_t job) {
    burnish_task task = job_task;
    void *context = job_context;
    int64_t n = job_n, parts = job_parts;
    uint64_t now = atomic_load_explicit(&state, memory_order_acquire);
    while (now >> 32 == job && (int64_t)(now & 0xffffffffu) < parts) {
        if (!atomic_compare_exchange_weak_explicit(&state, &now, now + 1,
                                                   memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        int64_t part = (int64_t)(now & 0xffffffffu);
        task(context, n * part / parts, n * (part + 1) / parts);
        atomic_fetch_add_explicit(&finished, 1, memory_order_release);
        now = atomic_load_explicit(&state, memory_order_acquire);
    }
}

static void *worker(void *index) {
    int me = (int)(intptr_t)index;
    inside = 1;
    int seen = atomic_load(&generation);
    for (;;) {
        int64_t since = clock_ns();
        unsigned spins = 0;
        int now;
        while ((now = atomic_load_explicit(&generation, memory_order_acquire)) == seen) {
            relax();
            if (++spins % 64) continue;
            if (atomic_load_explicit(&busy, memory_order_relaxed)) {
                sched_yield();
                continue;
            }
            if (clock_ns() - since < spin_ns) continue;
            pthread_mutex_lock(&lock);
            atomic_fetch_add(&sleepers, 1);
            asleep[me] = 1;
            while (atomic_load(&generation) == seen) pthread_cond_wait(&wakeup, &lock);
            asleep[me] = 0;
            atomic_fetch_sub(&sleepers, 1);
            pthread_mutex_unlock(&lock);
#if defined(__linux__)
            sched_setaffinity(0, sizeof process_cpus, &process_cpus);  /* see wake */
#endif
            since = clock_ns();
        }
        seen = now;
        take_parts(atomic_load_explicit(&state, memory_order_acquire) >> 32);
    }
    return NULL;
}

/* Starts the workers on the next job (or busy phase). Sleeping ones are first kept off the
   caller's core until they wake: on a virtual machine whose other cores are halted, the
   scheduler wakes a thread on the waker's core, where it waits behind the caller until the
   load balancer moves it (a millisecond and more; about 0.1 ms to wake on another core). */
static void wake(void) {
    atomic_fetch_add(&generation, 1);
    if (atomic_load(&sleepers)) {
        pthread_mutex_lock(&lock);  /* held: a worker narrowed here is still asleep */
#if defined(__linux__)
        cpu_set_t others = process_cpus;
        int cpu = sched_getcpu();
        if (cpu >= 0) CPU_CLR(cpu, &others);
        if (CPU_COUNT(&others))
            for (int i = 0; i < threads - 1; i++)
                if (asleep[i]) pthread_setaffinity_np(workers[i], sizeof others, &others);
#endif
        pthread_cond_broadcast(&wakeup);
        pthread_mutex_unlock(&lock);
    }
}

/* A child of fork has the caller's thread alone: its loops run on it (the workers' handles
   name threads of the parent). */
static void forked(void) {
    threads = 1;
    pthread_mutex_init(&lock, NULL);
    atomic_store(&sleepers, 0);
    for (int i = 0; i < MAX_THREADS; i++) asleep[i] = 0;
    atomic_store(&busy, 0);
    atomic_store(&owned, 0);
}

/* Starts workers until there are ``count`` threads with the caller; returns how many. */
int burnish_threads_start(int count, int64_t spin) {
    if (threads == 1) pthread_atfork(NULL, NULL, forked);
    spin_ns = spin;
#if defined(__linux__)
    if (sched_getaffinity(0, sizeof process_cpus, &process_cpus)) return threads;
#endif
    if (count > MAX_THREADS) count = MAX_THREADS;
    for (; threads < count; threads++) {
        if (pthread_create(&workers[threads - 1], NULL, worker, (void *)(intptr_t)(threads - 1)))
            break;
        pthread_detach(workers[threads - 1]);
    }
    return threads;
}

/* Workers asleep now (waiting for a wake), for tests and diagnostics. */
int burnish_threads_sleepers(void) {
    return atomic_load(&sleepers);
}

/* The processor time the workers have had, in nanoseconds (-1 where it cannot be read). */
int64_t burnish_threads_spent(void) {
    int64_t total = 0;
#if defined(__linux__)
    for (int i = 0; i < threads - 1; i++) {
        clockid_t clock;
        struct timespec t;
        if (pthread_getcpuclockid(workers[i], &clock) || clock_gettime(clock, &t)) return -1;
        total += (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
    }
    return total;
#else
    return -1;
#endif
}

/* Enters (``on``) or leaves a busy phase: workers spin between jobs until the last leaves. */
void burnish_threads_busy(int on) {
    if (on) {
        if (atomic_fetch_add(&busy, 1) == 0) wake();
    } else {
        atomic_fetch_sub(&busy, 1);
    }
}

void burnish_threads_parallel(burnish_task task, void *context, int64_t n, int64_t parts) {
    if (parts > n) parts = n;
    if (parts > 0xffffffff) parts = 0xffffffff;
    if (parts <= 1 || threads == 1 || inside || atomic_exchange(&owned, 1)) {
        if (n > 0) task(context, 0, n);
        return;
    }
    inside = 1;
    job_task = task, job_context = context, job_n = n, job_parts = parts;
    atomic_store_explicit(&finished, 0, memory_order_relaxed);
    uint64_t job = (atomic_load_explicit(&state, memory_order_relaxed) >> 32) + 1;
    atomic_store_explicit(&state, (job & 0xffffffffu) << 32, memory_order_release);
    wake();
    take_parts(job & 0xffffffffu);
    for (unsigned spins = 0; atomic_load_explicit(&finished, memory_order_acquire) < parts;)
        if (++spins % 64) relax(); else sched_yield();
    inside = 0;
    atomic_store_explicit(&owned, 0, memory_order_release);
}
"""

#: How long (microseconds) a worker spins for the next loop outside a replay before it sleeps.
DEFAULT_SPIN_US = 100


def thread_count() -> int:
    """``OMP_NUM_THREADS``'s first number where it is a positive integer, else the CPUs this
    process may run on."""
    setting = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if setting.isdigit() and int(setting) > 0:
        return int(setting)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def spin_microseconds() -> int:
    """``BURNISH_CPU_SPIN_US``, else ``DEFAULT_SPIN_US``; a clear error for a bad value."""
    setting = os.environ.get("BURNISH_CPU_SPIN_US")
    if setting is None:
        return DEFAULT_SPIN_US
    try:
        value = int(setting)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"BURNISH_CPU_SPIN_US must be a whole number of microseconds >= 0, "
                         f"got {setting!r}")
    return value


class Threads:
    """The pool (one per process: its C library is loaded once) and its busy phase."""

    def __init__(self, library: ctypes.CDLL, count: int, spin_us: int) -> None:
        self.library = library
        start = library.burnish_threads_start
        start.argtypes = [ctypes.c_int, ctypes.c_int64]
        start.restype = ctypes.c_int
        self.count = start(count, spin_us * 1000)
        self.parallel = ctypes.cast(library.burnish_threads_parallel, ctypes.c_void_p).value
        self._busy = library.burnish_threads_busy
        self._busy.argtypes = [ctypes.c_int]
        self._busy.restype = None
        self._spent = library.burnish_threads_spent
        self._spent.restype = ctypes.c_int64
        self._sleepers = library.burnish_threads_sleepers
        self._sleepers.restype = ctypes.c_int

    def sleepers(self) -> int:
        """How many workers are asleep now (for tests and diagnostics)."""
        return int(self._sleepers())

    def spent(self) -> float | None:
        """The processor time the workers have had, in seconds (None where the system does not
        say): how much they spun, for tests and diagnostics."""
        spent = self._spent()
        return None if spent < 0 else spent / 1e9

    def attach(self, library: ctypes.CDLL) -> None:
        """Point ``library``'s parallel loops (``PARALLEL_HEADER``) at this pool."""
        attach = getattr(library, "burnish_threads_attach", None)
        if attach is not None:
            attach.argtypes = [ctypes.c_void_p, ctypes.c_int]
            attach.restype = None
            attach(self.parallel, self.count)

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Workers spin between loops (and start now) until the outermost ``busy`` ends."""
        self._busy(1)
        try:
            yield
        finally:
            self._busy(0)


_pool: list[Threads] = []


def pool(build: Callable[[str], ctypes.CDLL]) -> Threads:
    """The process's pool, its library built by ``build(SOURCE)`` the first time (its
    threads, once started, serve every compiler and runtime of the process)."""
    if not _pool:
        _pool.append(Threads(build(SOURCE), thread_count(), spin_microseconds()))
    return _pool[0]
