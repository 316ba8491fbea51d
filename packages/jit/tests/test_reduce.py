"""Reductions, scans and sorts beyond what the conformance suite reaches: both reduction
strategies (and the two-pass split) agree, the autotuner picks between them, and walks longer
than one invocation may loop (lavapipe's limit), long scans and long sorts are right."""

from __future__ import annotations

import numpy as np
import pytest

from burnish.dtype import bool_, float16, float32, int8, int32
from burnish.jit import autotune
from burnish.jit.kernels import reduce as reduce_kernels
from burnish.jit.kernels.reduce import MAX_ITERATIONS, reduce
from burnish.jit.kernels.scan import scan
from burnish.jit.kernels.sort import MAX_BLOCK, sort
from burnish.tensor_data import TensorData


def _put(backend, a, dtype):
    return backend.from_data(TensorData(a, dtype), backend.default_device())


def _get(backend, x):
    return backend.into_data(x, x.dtype).to_numpy()


CASES = [  # shape, dim: many short runs, few long ones (split in two passes), everything,
    # few long strided ones (the loop splits them into chunks)
    ((40, 3, 5), 1), ((3, 5000), 1), ((5000, 3), 0), ((7, 9, 11), None), ((2, 3000), None),
    ((300, 7), 0),
]


@pytest.mark.parametrize(("shape", "dim"), CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "argmax", "argmin",
                                "max_with_indices", "mean", "any", "all"])
def test_both_strategies_agree(jit_backend, op, shape, dim):
    if op.startswith("arg") or op.endswith("indices"):
        dim = 0 if dim is None else dim
    rng = np.random.default_rng(len(shape) + (dim or 0))
    if op in ("any", "all"):
        a, dtype = rng.random(shape) < (0.002 if op == "any" else 0.998), bool_
    elif op == "prod":
        a, dtype = rng.integers(-2, 3, shape).astype(np.int32), int32
    else:
        # Few distinct values: ties decide the arg forms, NaN must win them.
        a, dtype = rng.integers(-3, 4, shape).astype(np.float32), float32
        if op != "mean":
            a.flat[rng.integers(0, a.size, 2)] = np.nan
    x = _put(jit_backend, a, dtype)
    loop = [_get(jit_backend, t) for t in reduce(op, x, dim, "loop")]
    tree = [_get(jit_backend, t) for t in reduce(op, x, dim, "tree")]
    for got_loop, got_tree in zip(loop, tree):
        np.testing.assert_allclose(got_loop, got_tree, rtol=1e-6)
    keep = dim is not None
    expected = {
        "sum": lambda: np.sum(a, axis=dim, keepdims=keep),
        "prod": lambda: np.prod(a, axis=dim, keepdims=keep),
        "max": lambda: np.max(a, axis=dim, keepdims=keep),
        "min": lambda: np.min(a, axis=dim, keepdims=keep),
        "argmax": lambda: np.argmax(a, axis=dim, keepdims=True),
        "argmin": lambda: np.argmin(a, axis=dim, keepdims=True),
        "max_with_indices": lambda: np.max(a, axis=dim, keepdims=True),
        "mean": lambda: np.mean(a, axis=dim, keepdims=keep),
        "any": lambda: np.any(a, axis=dim, keepdims=keep),
        "all": lambda: np.all(a, axis=dim, keepdims=keep),
    }[op]()
    np.testing.assert_allclose(tree[0], expected, rtol=1e-5, atol=1e-5)
    if op == "max_with_indices":
        np.testing.assert_array_equal(tree[1], np.argmax(a, axis=dim, keepdims=True))


def test_runs_longer_than_an_invocation_may_loop(jit_backend):
    # lavapipe ends an invocation's loops after 65535 iterations: such runs take the tree.
    n = 2 * MAX_ITERATIONS + 3001
    x = _put(jit_backend, np.ones((2, n), np.int32), int32)
    for strategy in ("loop", "tree"):
        np.testing.assert_array_equal(_get(jit_backend, reduce("sum", x, 1, strategy)[0]),
                                      [[n], [n]])
    a = np.zeros(n, np.float32)
    a[[10, n - 5]] = 7.0  # the first of two maxima sits in the first chunk, ...
    a[[n - 20, n - 2]] = np.nan  # ... the first NaN in a late one, and NaN wins
    values, at = reduce("max_with_indices", _put(jit_backend, a, float32), 0)
    assert np.isnan(_get(jit_backend, values)).all()
    np.testing.assert_array_equal(_get(jit_backend, at), [n - 20])
    a[[n - 20, n - 2]] = 0.0
    np.testing.assert_array_equal(
        _get(jit_backend, reduce("argmax", _put(jit_backend, a, float32), 0)[0]), [10])


def test_half_floats_accumulate_in_float32(jit_backend):
    # 4096 times 1 + 2**-10: float16 accumulation would stall at 2048; float32 rounds once.
    a = np.full(4096, 1 + 2.0**-10, np.float16)
    x = _put(jit_backend, a, float16) if float16 in jit_backend.dtypes(
        jit_backend.default_device()) else None
    if x is None:
        pytest.skip("no float16 on this device")
    expected = np.float16(np.sum(a.astype(np.float32)))
    for strategy in ("loop", "tree"):
        assert _get(jit_backend, reduce("sum", x, None, strategy)[0]) == expected
    np.testing.assert_array_equal(_get(jit_backend, scan("sum", x, 0)),
                                  np.cumsum(a.astype(np.float32)).astype(np.float16))


def test_autotune_picks_a_strategy_and_remembers_it(jit_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("BURNISH_CACHE_DIR", str(tmp_path))
    autotune.set_enabled(True)
    autotune._memory.clear()
    reduce_kernels._PLANS.clear()
    try:
        a = np.arange(300 * 200, dtype=np.int32).reshape(300, 200) % 7
        x = _put(jit_backend, a, int32)
        np.testing.assert_array_equal(_get(jit_backend, reduce("sum", x, 1)[0]),
                                      a.sum(1, keepdims=True))
        device = x.runtime.describe()
        timed = [k for k in autotune.measurements if k.startswith(device + "|reduce-sum-int32")]
        assert timed and set(autotune.measurements[timed[-1]]) == {"loop", "tree"}
        key = timed[-1].split("|", 1)[1]
        assert autotune._load(device)[key] in ("loop", "tree")
    finally:
        autotune.set_enabled(None)
        autotune._memory.clear()


def test_without_tuning_the_heuristic_decides(jit_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("BURNISH_CACHE_DIR", str(tmp_path))  # no choice remembered
    autotune.set_enabled(False)
    autotune._memory.clear()
    reduce_kernels._PLANS.clear()  # no plan remembered either
    chosen = []
    real = reduce_kernels._run

    def spy(op, x, out_shape, kept, red, n_out, n_red, strategy, plan_as=None):
        chosen.append(strategy)
        return real(op, x, out_shape, kept, red, n_out, n_red, strategy, plan_as)

    monkeypatch.setattr(reduce_kernels, "_run", spy)
    try:
        x = _put(jit_backend, np.ones((5000, 70), np.int32), int32)
        columns = _put(jit_backend, np.ones((70, 5000), np.int32), int32)
        reduce("max", columns, 0)  # many outputs down strided columns: one invocation each
        reduce("max", x, 1)  # contiguous rows: a workgroup each reads its row side by side
        reduce("max", x, None)  # one output: a workgroup's tree
    finally:
        autotune.set_enabled(None)
        autotune._memory.clear()
    assert chosen == ["loop", "tree", "tree"]


def test_a_repeated_reduction_replays_its_plan(jit_backend, monkeypatch):
    # The second call of one signature launches what the first planned (no layout work, no
    # metadata built) and still reads its own input; another offset is another plan.
    reduce_kernels._PLANS.clear()
    planned = []
    real = reduce_kernels._run

    def spy(op, *args):
        planned.append(op)
        return real(op, *args)

    monkeypatch.setattr(reduce_kernels, "_run", spy)
    a, b = np.arange(24, dtype=np.float32).reshape(4, 6), np.ones((4, 6), np.float32)
    for values in (a, b, a * 2):
        x = _put(jit_backend, values, float32)
        np.testing.assert_allclose(_get(jit_backend, reduce("sum", x, 0, "tree")[0]),
                                   values.sum(0, keepdims=True))
    assert planned == ["sum"]
    x = _put(jit_backend, np.concatenate([b.ravel(), a.ravel()]), float32)
    view = x.view((4, 6), (6, 1), 24)  # the second half: same shape and strides, offset 24
    np.testing.assert_allclose(_get(jit_backend, reduce("sum", view, 0, "tree")[0]),
                               a.sum(0, keepdims=True))
    assert planned == ["sum", "sum"]


def test_new_shapes_compile_nothing(jit_backend):
    def run(shape):
        a = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
        x = _put(jit_backend, a, int32)
        reduce("sum", x, 0, "tree")
        reduce("sum", x, 0, "loop")
        scan("sum", x, 1)
        sort(x, 1, True)

    run((6, 5))
    runtime = jit_backend.runtime(jit_backend.default_device())
    compiled = len(runtime._kernels)
    run((9, 17))
    assert len(runtime._kernels) == compiled


@pytest.mark.parametrize("length", [1, 7, MAX_BLOCK, MAX_BLOCK + 1, 3 * MAX_BLOCK + 5, 20000])
def test_long_sorts_are_stable(jit_backend, length):
    rng = np.random.default_rng(length)
    a = rng.integers(-20, 20, (3, length)).astype(np.float32)
    a[rng.random(a.shape) < 0.05] = np.nan
    # Read through strides: a transposed view of the rows.
    x = jit_backend.permute(_put(jit_backend, np.ascontiguousarray(a.T), float32), (1, 0))
    for descending in (False, True):
        values, order = (_get(jit_backend, t) for t in sort(x, 1, descending))
        if descending:
            keys = np.where(np.isnan(a), -np.inf, -a)
            expected = np.stack([np.lexsort((k, ~np.isnan(r))) for k, r in zip(keys, a)])
        else:
            expected = np.argsort(a, axis=1, kind="stable")
        np.testing.assert_array_equal(order, expected)
        np.testing.assert_array_equal(values, np.take_along_axis(a, expected, axis=1))


def test_long_scans_wrap_and_chunk(jit_backend):
    n = 3 * MAX_ITERATIONS + 17  # several chunks, and totals scanned in chunks again
    a = np.random.default_rng(0).integers(-100, 100, (2, n)).astype(np.int8)
    x = _put(jit_backend, a, int8)
    np.testing.assert_array_equal(_get(jit_backend, scan("sum", x, 1)),
                                  np.cumsum(a, axis=1, dtype=np.int8))
    flipped = jit_backend.flip(x, (1,))
    np.testing.assert_array_equal(_get(jit_backend, scan("sum", flipped, 1)),
                                  np.cumsum(a[:, ::-1], axis=1, dtype=np.int8))
