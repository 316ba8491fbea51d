"""Recurrent layers on the CPU: a whole LSTM or GRU layer (every time step) in one call.

The protocol's default runs a layer as a product and a cell kernel per time step: two launches
and their bookkeeping per step, which for the small products of a recurrent layer cost more
than the arithmetic. Here one C function walks the steps. A step is split into blocks of
hidden units (how many depends on the layer's sizes alone, so the results do not depend on
the thread count); a block is one single-threaded BLAS product (the previous hidden state
times its units' columns of every gate) and the cell over its units at once, while the
product is in the cache. The threads take a step's blocks as they come and go on to the next
step once all of them are done, so a thread that has no core holds back at most a block it
began. Independent layers (a bidirectional layer's two directions) run at once, one thread
each, when a capture's replay has them side by side (``NativeRecurrent.together``). Where
a run on several threads is much slower than the fastest seen, the next ones run on one
thread for a while (``BoundLayers``): on a machine whose cores other processes hold, the
threads' meetings would cost more than the second thread gives.
"""

from __future__ import annotations

import ctypes
import functools
import math
import time
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER, vector_math_declarations

#: Multiply-adds per block of a step at least: the threads meet once per step. Measured on
#: 2 cores (Zen 4): a GRU layer of 128 units, batch 8, 32 steps (2 blocks of 196K) took
#: 178 us on 2 threads against 296 on one.
BLOCK_MACS = 1 << 17
#: Units per block at least: each block is a BLAS call of its own. The LSTM layer of 128 units
#: beside it on one thread: 406 us in one block, 402 in two, 415 in four.
BLOCK_UNITS = 64


def blocks(batch: int, gates: int, hidden: int) -> int:
    """How many blocks of units each step of a layer is split into: a power of two, each
    block at least ``BLOCK_MACS`` multiply-adds and ``BLOCK_UNITS`` units, at most 64. It
    depends on the layer's sizes alone, so that its results do not depend on the thread
    count."""
    macs = batch * gates * hidden * hidden
    count = 1
    while (count < 64 and 2 * count * BLOCK_MACS <= macs
           and 2 * count * BLOCK_UNITS <= hidden):
        count *= 2
    return count


SOURCE = PARALLEL_HEADER + r"""
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* One layer's arguments (``Layer`` in Python: every field 8 bytes). gates = 4 (LSTM) or 3
   (GRU). x [seq, batch, gates * hidden] (strides xs), w [hidden, gates * hidden] (row-major
   with rows ldw apart, or transposed: tw), bias [gates * hidden] (stride bs) or NULL (GRU
   only), h0/c0 [batch, hidden] (strides hs/cs; c0 LSTM only); out [seq, batch, hidden],
   last_h and last_c [batch, hidden], all contiguous. Each step's units are split into
   ``blocks`` blocks, run by ``threads`` threads. */
typedef struct {
    void *gemm;
    const void *x, *w, *bias, *h0, *c0;
    const int64_t *xs, *hs, *cs;
    void *out, *last_h, *last_c;
    int64_t gates, seq, batch, hidden, ldw, tw, bs, reverse, blocks, threads;
} burnish_recurrent_layer;

/* Until ``*done`` reaches ``count``: spin a while, then give the core away (the thread that
   holds the missing block may be waiting for it). */
static void burnish_recurrent_wait(int64_t *done, int64_t count) {
    for (int64_t spins = 0; __atomic_load_n(done, __ATOMIC_ACQUIRE) < count; spins++)
        if (spins > 2000) sched_yield();
}

/* The cell over the units [0, width) of one row of a block: gb its gates' products, xb its
   input gates (stride X2), bh (GRU) the hidden bias, hb the previous state, cb (LSTM) the
   cell state, yb the new state. */
#define LSTM_CELL(T, EXP, TANH, X2)                                                           \
    {                                                                                        \
        _Pragma("omp simd")                                                                 \
        for (int64_t u = 0; u < width; u++) {                                                \
            T i = (T)1 / ((T)1 + EXP(-(gb[u] + xb[u * X2])));                                \
            T f = (T)1 / ((T)1 + EXP(-(gb[width + u] + xb[(hidden + u) * X2])));             \
            T c = TANH(gb[2 * width + u] + xb[(2 * hidden + u) * X2]);                       \
            T o = (T)1 / ((T)1 + EXP(-(gb[3 * width + u] + xb[(3 * hidden + u) * X2])));     \
            T next = f * cb[u] + i * c;                                                      \
            cb[u] = next;                                                                    \
            yb[u] = o * TANH(next);                                                          \
        }                                                                                    \
    }
#define GRU_CELL(T, EXP, TANH, X2)                                                            \
    {                                                                                        \
        _Pragma("omp simd")                                                                 \
        for (int64_t u = 0; u < width; u++) {                                                \
            T r = (T)1 / ((T)1 + EXP(-(xb[u * X2] + gb[u] + bh[u])));                        \
            T z = (T)1 / ((T)1 + EXP(-(xb[(hidden + u) * X2] + gb[width + u] +               \
                                      bh[hidden + u])));                                     \
            T n = TANH(xb[(2 * hidden + u) * X2] + r * (gb[2 * width + u] + bh[2 * hidden + u])); \
            yb[u] = n + z * (hb[u] - n);                                                     \
        }                                                                                    \
    }

#define RECURRENT(NAME, T, I, EXP, TANH)                                                      \
typedef void (*NAME##_gemm)(int, int, int, I, I, I, T, const T *, I, const T *, I, T, T *, I); \
                                                                                             \
/* Rows of a [batch, hidden] state with strides ss into contiguous dst. */                   \
static void NAME##_gather(const T *src, const int64_t *ss, int64_t batch, int64_t hidden,    \
                          T *dst) {                                                          \
    for (int64_t b = 0; b < batch; b++)                                                      \
        for (int64_t j = 0; j < hidden; j++) dst[b * hidden + j] = src[b * ss[0] + j * ss[1]]; \
}                                                                                            \
                                                                                             \
/* The steps of one layer, run by each of its threads (every part: the whole loop; a thread  \
   that comes late finds the steps done). */                                                 \
struct NAME##_state {                                                                        \
    const burnish_recurrent_layer *a;                                                        \
    T *first, *cell, *work, *hidden_bias, *packed;                                           \
    int64_t *taken, *done;                                                                   \
};                                                                                           \
                                                                                             \
static void NAME##_steps(void *context, int64_t begin, int64_t end) {                        \
    (void)begin, (void)end;                                                                  \
    const struct NAME##_state *state = context;                                              \
    const burnish_recurrent_layer *a = state->a;                                             \
    NAME##_gemm gemm = (NAME##_gemm)a->gemm;                                                 \
    int gates = (int)a->gates, reverse = (int)a->reverse, threads = (int)a->threads;         \
    int64_t seq = a->seq, batch = a->batch, hidden = a->hidden, ldw = a->ldw, bs = a->bs;    \
    int64_t blocks = a->blocks;                                                              \
    int tw = (int)a->tw;                                                                     \
    const T *x = a->x, *w = a->w, *bias = a->bias, *h0 = a->h0, *c0 = a->c0;                 \
    const int64_t *xs = a->xs, *hs = a->hs, *cs = a->cs;                                     \
    T *out = a->out, *last_h = a->last_h, *last_c = a->last_c;                               \
    int64_t size = batch * hidden, width_all = gates * hidden;                               \
    int pack = blocks > 1;                                                                   \
    T *first = state->first, *cell = state->cell, *work = state->work;                       \
    T *hidden_bias = state->hidden_bias, *packed = state->packed;                            \
    int64_t *taken = state->taken, *done = state->done;                                      \
    for (int64_t s = 0; s < seq; s++) {                                                      \
        int64_t t = reverse ? seq - 1 - s : s;                                               \
        int64_t before = reverse ? t + 1 : t - 1;                                            \
        const T *h = s ? out + before * size : first;                                        \
        T *y = out + t * size;                                                               \
        for (int64_t k; (k = __atomic_fetch_add(taken + s, 1, __ATOMIC_RELAXED)) < blocks;) { \
            int64_t j0 = hidden * k / blocks, j1 = hidden * (k + 1) / blocks;               \
            int64_t width = j1 - j0, gw = gates * width;                                     \
            T *g = work + batch * gates * j0; /* [batch, gates * width] */                   \
            const T *wp = w;                                                                 \
            int64_t ldp = ldw, tp = tw;                                                      \
            if (pack) {                                                                      \
                T *into = packed + hidden * gates * j0; /* [hidden, gates * width] */        \
                for (int64_t r = 0; r < hidden && s == 0; r++)                               \
                    for (int q = 0; q < gates; q++)                                          \
                        for (int64_t u = 0; u < width; u++) {                                \
                            int64_t col = q * hidden + j0 + u;                               \
                            into[r * gw + q * width + u] = tw ? w[col * ldw + r]             \
                                                              : w[r * ldw + col];            \
                        }                                                                    \
                wp = into, ldp = gw, tp = 0;                                                 \
            }                                                                                \
            const T *bh = hidden_bias + j0;                                                  \
            if (width > 0)                                                                   \
                gemm(101, 111, tp ? 112 : 111, (I)batch, (I)gw, (I)hidden, (T)1, h,          \
                     (I)hidden, wp, (I)ldp, (T)0, g, (I)gw);                                 \
            for (int64_t b = 0; b < batch && width > 0; b++) {                              \
                const T *xb = x + t * xs[0] + b * xs[1] + j0 * xs[2];                        \
                const T *gb = g + b * gw;                                                    \
                int64_t at = b * hidden + j0, x2 = xs[2];                                    \
                T *cb = cell + at, *yb = y + at;                                             \
                const T *hb = h + at;                                                        \
                /* input gates of stride 1 (the usual case): plain vector loads */         \
                if (gates == 4 && x2 == 1) LSTM_CELL(T, EXP, TANH, 1)                       \
                else if (gates == 4) LSTM_CELL(T, EXP, TANH, x2)                            \
                else if (x2 == 1) GRU_CELL(T, EXP, TANH, 1)                                 \
                else GRU_CELL(T, EXP, TANH, x2)                                             \
            }                                                                                \
            __atomic_fetch_add(done + s, 1, __ATOMIC_RELEASE);                               \
        }                                                                                    \
        burnish_recurrent_wait(done + s, blocks);                                            \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* One layer on a->threads threads. A step is a->blocks blocks of hidden units, each one     \
   product (the previous hidden state times its units' columns of every gate, packed side   \
   by side [hidden, gates * width] by whoever runs the block first; one block reads the     \
   weight as it is) and the cell over its units. Every step's blocks are taken by whichever \
   thread asks first, and a thread goes on to the next step once all of them are done: a   \
   thread that has no core meanwhile holds back no block it has not begun. The blocks are   \
   the same whatever the thread count, and so are the results. Returns nonzero when memory  \
   ran out. */                                                                               \
static int NAME##_layer(const burnish_recurrent_layer *a) {                                  \
    NAME##_gemm gemm = (NAME##_gemm)a->gemm;                                                 \
    int gates = (int)a->gates, reverse = (int)a->reverse, threads = (int)a->threads;         \
    int64_t seq = a->seq, batch = a->batch, hidden = a->hidden, ldw = a->ldw, bs = a->bs;    \
    int64_t blocks = a->blocks;                                                              \
    int tw = (int)a->tw;                                                                     \
    const T *x = a->x, *w = a->w, *bias = a->bias, *h0 = a->h0, *c0 = a->c0;                 \
    const int64_t *xs = a->xs, *hs = a->hs, *cs = a->cs;                                     \
    T *out = a->out, *last_h = a->last_h, *last_c = a->last_c;                               \
    int64_t size = batch * hidden, width_all = gates * hidden;                               \
    int pack = blocks > 1;                                                                   \
    T *first = malloc(sizeof(T) * (size ? size : 1));                                        \
    T *cell = malloc(sizeof(T) * (size ? size : 1));                                         \
    T *work = malloc(sizeof(T) * (size ? size * gates : 1));                                 \
    T *hidden_bias = malloc(sizeof(T) * (3 * hidden ? 3 * hidden : 1));                      \
    T *packed = pack ? malloc(sizeof(T) * (hidden * width_all ? hidden * width_all : 1))     \
                     : NULL;                                                                 \
    /* per step: the blocks taken, then those done */                                       \
    int64_t *taken = calloc(2 * (seq ? seq : 1), sizeof(int64_t)), *done = taken + seq;     \
    if (!first || !cell || !work || !hidden_bias || (pack && !packed) || !taken) {           \
        free(first); free(cell); free(work); free(hidden_bias); free(packed); free(taken);    \
        return 1;                                                                            \
    }                                                                                        \
    NAME##_gather(h0, hs, batch, hidden, first);                                             \
    if (c0) NAME##_gather(c0, cs, batch, hidden, cell);                                      \
    for (int64_t j = 0; j < 3 * hidden && gates == 3; j++)                                   \
        hidden_bias[j] = bias ? bias[j * bs] : (T)0;                                         \
    struct NAME##_state state = {a, first, cell, work, hidden_bias, packed, taken, done};    \
    burnish_parallel(NAME##_steps, &state, threads, threads);                                \
    int64_t final = reverse ? 0 : seq - 1;                                                   \
    memcpy(last_h, seq ? out + final * size : first, sizeof(T) * size);                      \
    if (last_c) memcpy(last_c, cell, sizeof(T) * size);                                      \
    free(first);                                                                             \
    free(cell);                                                                              \
    free(work);                                                                              \
    free(hidden_bias);                                                                       \
    free(packed);                                                                            \
    free(taken);                                                                             \
    return 0;                                                                                \
}                                                                                            \
                                                                                             \
struct NAME##_batch {                                                                        \
    const burnish_recurrent_layer *layers;                                                   \
    int failed;                                                                              \
};                                                                                           \
                                                                                             \
/* Layers [begin, end), each on the calling thread. */                                       \
static void NAME##_each(void *context, int64_t begin, int64_t end) {                         \
    struct NAME##_batch *batch = context;                                                    \
    for (int64_t i = begin; i < end; i++) {                                                  \
        burnish_recurrent_layer one = batch->layers[i];                                      \
        one.threads = 1;                                                                     \
        if (NAME##_layer(&one)) __atomic_store_n(&batch->failed, 1, __ATOMIC_RELAXED);       \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* count independent layers (none reads what another writes): one alone on its threads, at  \
   most ``threads``; several at once, each on one thread of a team of ``threads``, taken as \
   the threads come (a thread that starts late finds the layers done). Returns nonzero when \
   memory ran out. */                                                                        \
int NAME##_layers(const burnish_recurrent_layer *layers, int64_t count, int threads) {       \
    int failed = 0;                                                                          \
    if (count == 1) {                                                                        \
        burnish_recurrent_layer one = *layers;                                               \
        if (one.threads > threads) one.threads = threads;                                    \
        return NAME##_layer(&one);                                                           \
    }                                                                                        \
    struct NAME##_batch batch = {layers, 0};                                                 \
    burnish_parallel(NAME##_each, &batch, count, threads > 1 ? count : 1);                   \
    failed = batch.failed;                                                                   \
    return failed;                                                                           \
}

RECURRENT(burnish_recurrent_f32_i64, float, int64_t, expf, tanhf)
RECURRENT(burnish_recurrent_f64_i64, double, int64_t, exp, tanh)
RECURRENT(burnish_recurrent_f32_i32, float, int32_t, expf, tanhf)
RECURRENT(burnish_recurrent_f64_i32, double, int32_t, exp, tanh)
"""

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
_INT = ctypes.c_int


class Layer(ctypes.Structure):
    """``burnish_recurrent_layer``: one layer's arguments, in ``SOURCE``'s order."""

    _fields_ = [(name, _P) for name in ("gemm", "x", "w", "bias", "h0", "c0", "xs", "hs", "cs",
                                         "out", "last_h", "last_c")] + \
        [(name, _I64) for name in ("gates", "seq", "batch", "hidden", "ldw", "tw", "bs",
                                   "reverse", "blocks", "threads")]


def _strides(a: np.ndarray) -> np.ndarray:
    return np.array([s // a.itemsize for s in a.strides], np.int64)


def weight_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, bool] | None:
    """How BLAS reads a ``[hidden, gates * hidden]`` weight with element ``strides``: its
    leading dimension and whether it is stored transposed; None where it cannot."""
    rows, cols = shape
    if (cols <= 1 or strides[1] == 1) and strides[0] >= max(1, cols):
        return max(1, strides[0], cols), False
    if (rows <= 1 or strides[0] == 1) and strides[1] >= max(1, rows):
        return max(1, strides[1], rows), True
    return None


#: A run on several threads that takes this many times the fastest such run seen is taken
#: for a sign that a thread waited for a core (another process on it: the threads meet at every
#: step, and at the end of the call): the next ``BACK_OFF_RUNS`` runs are on one thread, which
#: gives the same bits. Measured on 2 cores with another process on one of them: the GRU layer
#: of 128 units, batch 8, 32 steps 283 us median on one thread, 781 on two; a bidirectional
#: LSTM layer's two directions 770 us one after the other, 1,300 at once.
SLOW_RUN = 3.0
BACK_OFF_RUNS = 4


class Pace:
    """The fastest run on several threads seen of layers of some sizes, and how many runs are
    left on one thread (``SLOW_RUN``): kept per sizes by ``NativeRecurrent``, so that eager
    calls, bound afresh each time, share it."""

    __slots__ = ("fastest", "back_off")

    def __init__(self) -> None:
        self.fastest = math.inf
        self.back_off = 0


class BoundLayers:
    """Layers with their arrays bound once, run by calling with no arguments: one layer, or
    several independent ones at once (``NativeRecurrent.together``). ``reads`` and ``writes``
    are the arrays they read and write (what decides whether another may run beside them).
    Runs on several threads back off to one for a while after a slow one (``pace``)."""

    def __init__(self, entry: Any, layers: list[Layer], reads: list[np.ndarray],
                 writes: list[np.ndarray], keep: list[Any], threads: int, pace: Pace) -> None:
        self.layers = layers
        self.pace = pace
        self.reads, self.writes, self.keep = reads, writes, keep
        self.structs = (Layer * len(layers))(*layers)
        self.call = functools.partial(entry, self.structs, len(layers), threads)
        #: The threads the call runs on (several layers: one each).
        self.threads = threads
        self.parallel = threads > 1
        self.call_alone = functools.partial(entry, self.structs, len(layers), 1)

    def __call__(self) -> None:
        pace = self.pace
        if not self.parallel:
            failed = self.call()
        elif pace.back_off:
            pace.back_off -= 1
            failed = self.call_alone()
        else:
            start = time.perf_counter()
            failed = self.call()
            took = time.perf_counter() - start
            if took < pace.fastest:
                pace.fastest = took
            elif took > SLOW_RUN * pace.fastest:
                pace.back_off = BACK_OFF_RUNS
        if failed:
            raise MemoryError("cpu backend: no memory for a recurrent layer's state")


class NativeRecurrent:
    """The compiled LSTM and GRU layers of ``SOURCE`` over ``blas.Gemm``'s BLAS functions."""

    def __init__(self, compiler: Any, gemm: Any, threads: int) -> None:
        self.entries: dict[str, tuple[Any, int]] = {}
        self.threads = threads
        #: ``Pace`` per layers' sizes (the dtype; each layer's steps, batch, gates, units).
        self.paces: dict[tuple, Pace] = {}
        if not gemm.available:
            return
        # libmvec's vector exp and tanh for the cell loops, where the compiler has them.
        declarations = vector_math_declarations() if compiler.vector_math else ""
        library = compiler.build(SOURCE.replace("#include <math.h>\n",
                                                "#include <math.h>\n" + declarations))
        for dtype, (address, wide) in gemm.pointers().items():
            name = f"burnish_recurrent_{'f32' if dtype == 'float32' else 'f64'}_" \
                   f"{'i64' if wide else 'i32'}_layers"
            layers = getattr(library, name)
            layers.argtypes = [ctypes.POINTER(Layer), _I64, _INT]
            layers.restype = ctypes.c_int
            self.entries[dtype] = (layers, address)
        self.library = library  # kept loaded while the entries may run

    def bind(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
             h0: np.ndarray, c0: np.ndarray | None, out: np.ndarray, last_h: np.ndarray,
             last_c: np.ndarray | None, reverse: bool) -> BoundLayers:
        """An LSTM layer (``c0`` given) or a GRU layer (``c0`` None) over ``x`` ``[seq, batch,
        gates * hidden]`` as a call of no arguments; ``out``, ``last_h``, ``last_c``
        contiguous."""
        entry, gemm = self.entries[out.dtype.name]
        seq, batch, width = x.shape
        hidden = h0.shape[1]
        ldw, transposed = weight_layout(weight.shape, _strides(weight))  # type: ignore[misc]
        count = blocks(batch, width // max(1, hidden), hidden)
        strides = [_strides(x), _strides(h0), _strides(c0) if c0 is not None else None]

        def address(a: np.ndarray | None) -> int | None:
            return None if a is None else a.ctypes.data

        layer = Layer(gemm, x.ctypes.data, weight.ctypes.data, address(bias), h0.ctypes.data,
                      address(c0), *[address(a) for a in strides], out.ctypes.data,
                      last_h.ctypes.data, address(last_c), 4 if c0 is not None else 3, seq,
                      batch, hidden, ldw, int(transposed),
                      0 if bias is None else bias.strides[0] // bias.itemsize, int(reverse),
                      count, max(1, min(self.threads, count)))
        reads = [a for a in (x, weight, bias, h0, c0) if a is not None]
        writes = [a for a in (out, last_h, last_c) if a is not None]
        return BoundLayers(entry, [layer], reads, writes, [*reads, *writes, *strides],
                           layer.threads, self._pace(out.dtype.name, [layer]))

    def layer(self, *arrays: Any) -> None:
        """``bind(*arrays)`` run once."""
        self.bind(*arrays)()

    def together(self, bound: list[BoundLayers]) -> BoundLayers | None:
        """Bound single-threaded layers, none of which reads or writes what another writes,
        as one call that runs them at once, each on its own thread; None where they are not
        (or there is one thread)."""
        if self.threads < 2 or len(bound) < 2:
            return None
        for i, one in enumerate(bound):
            for other in bound[i + 1:]:
                if _overlap(one.writes, [*other.reads, *other.writes]) or \
                        _overlap(other.writes, one.reads):
                    return None
        dtypes = {b.writes[0].dtype.name for b in bound}
        if len(dtypes) != 1:
            return None
        entry, _ = self.entries[dtypes.pop()]
        layers = [layer for b in bound for layer in b.layers]  # each on one thread
        dtype = bound[0].writes[0].dtype.name
        return BoundLayers(entry, layers, [a for b in bound for a in b.reads],
                           [a for b in bound for a in b.writes],
                           [a for b in bound for a in b.keep],
                           min(self.threads, len(layers)), self._pace(dtype, layers))

    def _pace(self, dtype: str, layers: list[Layer]) -> Pace:
        """The ``Pace`` of layers of these sizes, shared by every binding of them."""
        key = (dtype, *[(layer.seq, layer.batch, layer.gates, layer.hidden)
                        for layer in layers])
        found = self.paces.get(key)
        if found is None:
            found = self.paces[key] = Pace()
        return found


def _overlap(some: list[np.ndarray], others: list[np.ndarray]) -> bool:
    """Whether any array of ``some`` may share memory with one of ``others`` (their extents
    meet)."""
    return any(np.may_share_memory(a, b) for a in some for b in others)
