"""Kernel launches under fusion: runs of elementwise ops are one launch, intermediates that
nobody references are never written, and what is read exists."""

from __future__ import annotations

import math

import numpy as np

import burnish as bn
from burnish.fusion import launches, programs
from burnish.jit import lazy


def gelu(x: bn.Tensor) -> bn.Tensor:
    return x * ((x / math.sqrt(2.0)).erf() + 1.0) / 2.0


def reference_gelu(x: np.ndarray) -> np.ndarray:
    from math import erf

    return x * (np.vectorize(erf)(x / math.sqrt(2.0)) + 1.0) / 2.0


def sample(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def test_gelu_is_one_launch(device):
    values = sample((64, 33))
    x = bn.Tensor.from_data(values, device=device)
    before = launches(device)
    ran = {id(p): p.launches for p in programs(device)}  # (the program may exist already)
    y = gelu(x)
    assert launches(device) == before, "ops ran before anything was read"
    got = y.to_data().to_numpy()
    assert launches(device) == before + 1
    np.testing.assert_allclose(got, reference_gelu(values), rtol=1e-5, atol=1e-6)
    (program,) = [p for p in programs(device) if p.launches != ran.get(id(p), 0)]
    assert program.ops == ("div_scalar", "erf", "add_scalar", "mul", "div_scalar")
    assert program.outputs == ("float32",), "an intermediate was written to memory"


def test_chain_of_twenty_ops_is_one_launch(device):
    values = sample((1000,), 1)
    x = bn.Tensor.from_data(values, device=device)
    expected = values.astype(np.float64)
    before = launches(device)
    y = x
    for i in range(20):
        if i % 4 == 0:
            y, expected = y * 1.01, expected * 1.01
        elif i % 4 == 1:
            y, expected = y + x, expected + values
        elif i % 4 == 2:
            y, expected = y.tanh(), np.tanh(expected)
        else:
            y, expected = y - 0.25, expected - 0.25
    got = y.to_data().to_numpy()
    assert launches(device) == before + 1
    assert len(programs(device)[-1].ops) == 20
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_reading_an_intermediate_makes_it_exist(device):
    values = sample((10, 10), 2)
    x = bn.Tensor.from_data(values, device=device)
    a = x.exp()
    b = (a + 1.0).log()
    assert lazy.pending(a.primitive) and lazy.pending(b.primitive)
    np.testing.assert_allclose(a.to_data().to_numpy(), np.exp(values), rtol=1e-5)
    assert not lazy.pending(a.primitive)
    # ``b`` was referenced too, so the same launch computed it.
    assert not lazy.pending(b.primitive)
    before = launches(device)
    np.testing.assert_allclose(b.to_data().to_numpy(), np.log(np.exp(values) + 1), rtol=1e-5)
    assert launches(device) == before


def test_fused_programs_are_compiled_once(device):
    count = None
    for shape in [(100,), (7, 9), (100,), (3, 5, 2)]:
        x = bn.Tensor.from_data(sample(shape), device=device)
        gelu(x).to_data()
        found = [p for p in programs(device)  # (other tests fuse these ops with more outputs)
                 if p.ops == ("div_scalar", "erf", "add_scalar", "mul", "div_scalar")
                 and p.outputs == ("float32",)]
        count = len(programs(device)) if count is None else count
        assert len(programs(device)) == count, "a new shape compiled a new kernel"
        assert len(found) == 1
    assert "erf" in found[0].source


def test_broadcast_and_strided_inputs_fuse(device):
    a_values, b_values = sample((4, 1), 3), sample((1, 5), 4)
    c_values = sample((5, 4), 5)
    a = bn.Tensor.from_data(a_values, device=device)
    b = bn.Tensor.from_data(b_values, device=device)
    c = bn.Tensor.from_data(c_values, device=device).transpose(0, 1)  # strided
    before = launches(device)
    # (a * 2).tanh() is [4, 1]: it is evaluated at the coordinates it broadcasts to.
    out = ((a * 2.0).tanh() + b) * c + 1.0
    got = out.to_data().to_numpy()
    assert launches(device) == before + 1
    assert programs(device)[-1].rank == 2
    expected = (np.tanh(a_values * 2) + b_values) * c_values.T + 1
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_ops_that_do_not_fuse_read_computed_inputs(device):
    values = sample((6, 8), 6)
    x = bn.Tensor.from_data(values, device=device)
    total = (x * 2.0 + 1.0).sum(1, keepdim=True)
    expected = (values.astype(np.float64) * 2 + 1).sum(1, keepdims=True)
    np.testing.assert_allclose(total.to_data().to_numpy(), expected, rtol=1e-5)
    y = (x.matmul(x.transpose(0, 1)) - 1.0).abs()
    ref = np.abs(values.astype(np.float64) @ values.T - 1)
    np.testing.assert_allclose(y.to_data().to_numpy(), ref, rtol=1e-4, atol=1e-4)


def test_narrow_dtypes_round_after_every_op(device):
    ints = np.array([100, 27, -128, 90], dtype=np.int8)
    x = bn.Tensor.from_data(ints, device=device)
    wrapped = (x + 100) > 0  # int8 wraps before the comparison, as unfused
    expected = (ints + np.int8(100)) > 0
    np.testing.assert_array_equal(wrapped.to_data().to_numpy(), expected)
    if bn.float16 in device.backend.dtypes(device):
        halves = np.array([1.0, 2049.0, 0.1, 65504.0], dtype=np.float16)
        h = bn.Tensor.from_data(halves, device=device)
        got = ((h + 1.0) - 1.0).to_data().to_numpy()
        np.testing.assert_array_equal(got, (halves + np.float16(1)) - np.float16(1))


def test_a_long_stream_is_flushed_on_the_way(device):
    x = bn.Tensor.from_data(np.ones(16, dtype=np.float32), device=device)
    before = launches(device)
    y = x
    for _ in range(lazy.STREAM_LIMIT * 2 + 5):
        y = y + 1.0
    np.testing.assert_allclose(y.to_data().to_numpy(), 1 + lazy.STREAM_LIMIT * 2 + 5)
    # Three flushes; a launch whose metadata would exceed the device's limit (CUDA's 128
    # words: one per scalar here) is split in two.
    assert 3 <= launches(device) - before <= 8


def test_a_group_too_large_for_one_launch_is_split(device):
    runtime = device.native.backend.runtime(device.native)
    words = runtime.max_info_words
    try:
        runtime.max_info_words = 24  # as if the device carried little metadata per launch
        x = bn.Tensor.from_data(np.zeros(10, dtype=np.float32), device=device)
        before = launches(device)
        y = x
        for i in range(40):
            y = y + float(i)
        np.testing.assert_allclose(y.to_data().to_numpy(), sum(range(40)))
        assert 2 <= launches(device) - before <= 8
    finally:
        runtime.max_info_words = words


def test_too_many_inputs_for_one_launch_still_compute(device):
    runtime = device.native.backend.runtime(device.native)
    parts = [sample((8,), i) for i in range(runtime.max_buffers + 3)]
    tensors = [bn.Tensor.from_data(p, device=device) for p in parts]
    total = tensors[0]
    for t in tensors[1:]:
        total = total + t
    np.testing.assert_allclose(total.to_data().to_numpy(), np.sum(parts, axis=0), rtol=1e-5)


def test_sync_computes_what_is_pending(device):
    x = bn.Tensor.from_data(sample((32,)), device=device)
    y = x.exp() * 3.0
    assert lazy.pending(y.primitive)
    device.backend.sync(device)
    assert not lazy.pending(y.primitive)


def _step(x: bn.Tensor, y: bn.Tensor, scale: float) -> tuple[bn.Tensor, bn.Tensor]:
    """A flush of two kernels (two shapes) with scalars, like one of a training step's."""
    h = (x * scale + y).tanh()
    return h, (h * h).sum(1, keepdim=True) * (1.0 / scale) - 1.0


def test_a_flush_of_the_same_structure_replays_its_plan(device, monkeypatch):
    from burnish.jit.kernels import fused

    plans = []
    original = fused._Plan.__init__

    def counting(self, targets):
        plans.append(len(targets))
        original(self, targets)

    monkeypatch.setattr(fused._Plan, "__init__", counting)
    for i, scale in enumerate([0.5, 2.0, -3.0]):
        xv, yv = sample((8, 16), 10 + i), sample((8, 16), 20 + i)
        x, y = bn.Tensor.from_data(xv, device=device), bn.Tensor.from_data(yv, device=device)
        before = launches(device)
        h, total = _step(x, y, scale)
        got_h, got_total = h.to_data().to_numpy(), total.to_data().to_numpy()
        expected_h = np.tanh(xv.astype(np.float64) * scale + yv)
        np.testing.assert_allclose(got_h, expected_h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_total, (expected_h ** 2).sum(1, keepdims=True) / scale - 1,
                                   rtol=1e-4, atol=1e-5)
        if i == 0:
            planned = len(plans)
            assert planned, "the first flush planned nothing"
            continue
        assert len(plans) == planned, "a flush of a structure seen before was planned again"
        if i == 1:
            count = launches(device) - before  # the first call also ran autotune's trials
        assert launches(device) - before == count


def test_replay_tells_inputs_apart_by_buffer_and_layout(device):
    values = sample((6, 6), 30)
    base = bn.Tensor.from_data(values, device=device)
    other = bn.Tensor.from_data(values[::-1].copy(), device=device)
    # The same ops each time; the inputs share a buffer (planned first: one binding), differ,
    # are a transposed view.
    cases = [(base, base, values), (base, other, values[::-1]),
             (base, base.transpose(0, 1), values.T), (base, other, values[::-1]),
             (base, base, values)]
    for a, b, b_values in cases:
        got = ((a * 2.0 + b).exp() - b).to_data().to_numpy()
        np.testing.assert_allclose(got, np.exp(values * 2 + b_values) - b_values, rtol=1e-5,
                                   atol=1e-5)


def test_a_pending_input_left_by_an_earlier_flush_is_computed_first(device):
    runtime = device.native.backend.runtime(device.native)
    values = sample((5,), 40)
    x = bn.Tensor.from_data(values, device=device)
    stale = x.exp() + 1.0
    assert lazy.pending(stale.primitive)
    runtime.lazy_stream = lazy.Stream()  # as if a flush had guessed nobody references it
    out = stale * 2.0
    assert not lazy.pending(stale.primitive)
    np.testing.assert_allclose(out.to_data().to_numpy(), (np.exp(values) + 1) * 2, rtol=1e-5)


def test_an_op_flushed_alone_runs_at_once_after_the_same_flush(device, monkeypatch):
    monkeypatch.setattr(lazy, "LONE_TRUST", 2)
    values, bias = sample((8, 16), 3), sample((16,), 4)
    x = bn.Tensor.from_data(values, device=device)
    b = bn.Tensor.from_data(bias, device=device)
    recorded = []
    for _ in range(6):
        h = (x * 2.0).exp()  # a fused run; its flush comes right before the lone op
        s = h.cumsum(0)  # a scan is not recorded: it flushes h
        y = h + b  # alone: the scan below reads it
        recorded.append(lazy.pending(y.primitive))
        total = y.cumsum(0)
        np.testing.assert_allclose(total.to_data().to_numpy(),
                                   np.cumsum(np.exp(values * 2) + bias, 0), rtol=1e-4)
        np.testing.assert_allclose(s.to_data().to_numpy(), np.cumsum(np.exp(values * 2), 0),
                                   rtol=1e-4)
    # Recorded and flushed alone once, then trusted LONE_TRUST times, then recorded once more
    # to check.
    assert recorded == [True, False, False, True, False, False]
    # The same op after another flush still fuses with what follows it.
    (x * 3.0).sum().to_data()
    before = launches(device)
    z = (x * 2.0).exp()
    z.sum().to_data()  # z (referenced) and then its sum
    w = (z + b).tanh()
    assert lazy.pending(w.primitive)
    np.testing.assert_allclose(w.to_data().to_numpy(), np.tanh(np.exp(values * 2) + bias),
                               rtol=1e-5)
    assert launches(device) == before + 3


def test_a_capture_records_the_same_kernels_while_lone_ops_are_trusted(device, monkeypatch):
    """The lone-op predictions neither count down nor grow while a capture records: otherwise
    a count that runs out inside one of the two recordings fuses an op that the other ran
    alone, the recordings differ, and the function never replays (an LSTM over 64 steps)."""
    monkeypatch.setattr(lazy, "LONE_TRUST", 3)
    values, bias = sample((8, 16), 5), sample((16,), 6)
    b = bn.Tensor.from_data(bias, device=device)

    def steps(x: bn.Tensor) -> bn.Tensor:
        for _ in range(5):  # one lone op per step: more than LONE_TRUST per call
            h = (x * 2.0).tanh()
            x = (h + b).cumsum(0) * 0.1  # the scan flushes h + b alone
        return x

    expected = steps(bn.Tensor.from_data(values, device=device)).to_data().to_numpy()
    captured = bn.capture(steps, strict=True)
    for _ in range(5):  # warm-up, two recordings that must agree, then replays
        got = captured(bn.Tensor.from_data(values, device=device))
        np.testing.assert_allclose(got.to_data().to_numpy(), expected, rtol=1e-5, atol=1e-6)
    assert captured.stats()[0]["replays"] >= 2


def test_ops_that_never_record_are_the_inner_backends_own(fused_backend):
    inner = fused_backend.inner
    assert fused_backend.cumsum == inner.cumsum  # called as it is: nothing to record
    assert fused_backend.add != inner.add  # recorded
    assert fused_backend.sum != inner.sum
    device = fused_backend.default_device()
    ones = fused_backend.full((2, 3), 1.5, bn.float32, device)  # takes the fused device
    assert lazy.pending(ones)
    assert ones.device == device.native


def test_a_reshape_of_a_pending_tensor_is_recorded(device):
    values = sample((6, 8), 5)
    x = bn.Tensor.from_data(values, device=device)
    before = launches(device)
    h = (x * 2.0).exp()
    r = h.reshape([4, 12])  # shares h's buffer once h is computed: no kernel of its own
    assert lazy.pending(r.primitive)
    y = (r + 1.0).log()  # reads r from memory, after h's kernel
    assert launches(device) == before
    got = y.to_data().to_numpy()
    assert launches(device) == before + 2
    want = np.exp(values * 2.0)
    np.testing.assert_allclose(got, np.log(want.reshape(4, 12) + 1), rtol=1e-5)
    np.testing.assert_allclose(r.to_data().to_numpy(), want.reshape(4, 12), rtol=1e-5)
    assert r.primitive.buffer is h.primitive.buffer
    np.testing.assert_allclose(((x * 3.0).reshape([48]) @ (x * 3.0).reshape([48, 1]))
                               .to_data().to_numpy(),
                               [(values.reshape(-1) * 3.0) @ (values.reshape(-1) * 3.0)],
                               rtol=1e-4)
