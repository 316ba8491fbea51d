"""``burnish.capture`` on the jit backends: replays give the eager results, state is carried and
written back, what cannot be replayed runs eagerly (or raises), and tensors a caller keeps are
never overwritten."""

from __future__ import annotations

import gc
import itertools
import os
import warnings

import numpy as np
import pytest

import burnish as bn
import burnish.functional as F
from burnish import CaptureError, Tensor

INSTALL = {
    "wgpu": "a Vulkan, Metal or DX12 driver (Linux without a GPU: apt install "
            "mesa-vulkan-drivers) and pip install burnish-backend-wgpu",
    "rocm": "an OpenCL driver (pip install 'burnish-backend-rocm[pocl]' for PoCL on the CPU)",
    "cuda": "an NVIDIA GPU and pip install 'burnish-backend-cuda[cuda12]'",
}


def available(name: str):
    try:
        backend = bn.backend(name)
        backend.default_device()
    except Exception as error:  # not installed, no driver, no device
        inner = name.split("+")[-1]
        wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
        message = f"{inner} cannot run here ({type(error).__name__}: {error}); it needs " \
                  f"{INSTALL[inner]}"
        if inner in wanted or "all" in wanted:
            pytest.fail(message + " [BURNISH_REQUIRE_BACKENDS requires it]", pytrace=False)
        pytest.skip(message)
    return backend


@pytest.fixture(params=["wgpu", "rocm", "cuda"], scope="module")
def gpu(request):
    """The name of a jit backend that runs here."""
    available(request.param)
    return request.param


def device_of(name: str):
    return available(name).default_device()


def data(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_a_replay_gives_the_eager_result_and_carries_its_outputs(gpu):
    device = device_of(gpu)

    def step(w, x):
        y = F.relu(x @ w) * 2.0 + 1.0
        return w - 0.01 * y.sum(), y.mean()

    captured = bn.capture(step, strict=True)
    rng = np.random.default_rng(0)
    w0 = data(rng, 8, 8)
    w_eager, w_captured = (Tensor.from_data(w0, device=device) for _ in range(2))
    for _ in range(7):
        x = Tensor.from_data(data(rng, 4, 8), device=device)
        w_eager, loss_eager = step(w_eager, x)
        w_captured, loss_captured = captured(w_captured, x)
        np.testing.assert_array_equal(w_captured.to_numpy(), w_eager.to_numpy())
        assert loss_captured.item() == loss_eager.item()
    assert captured.stats() == [{"calls": 3, "replays": 4, "captured": True,
                                 "eager_because": None}]


def mlp(device, rng):
    from burnish.nn import Linear, LinearConfig, Module

    class Mlp(Module):
        a: Linear
        b: Linear

        def forward(self, x):
            return self.b(F.relu(self.a(x)))

    bn.seed(0)
    return Mlp(LinearConfig(16, 32).init(device), LinearConfig(32, 4).init(device))


def trainer(optimizer):
    from burnish.nn import CrossEntropyLoss

    loss_fn = CrossEntropyLoss()

    def step(model, x, y):
        loss = loss_fn(model(x), y)
        return optimizer.step(0.01, model, loss.backward()), loss.detach()

    return step


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_training_step_replays_the_eager_training_bitwise(gpu, optimizer):
    """The optimizer lives in the step's closure; its state (momentum, moments, the step
    count) is found there, carried from replay to replay and written back."""
    from burnish.optim import Adam, Sgd

    device = device_of(f"autodiff+{gpu}")
    rng = np.random.default_rng(1)

    def make():
        return Sgd(momentum=0.9) if optimizer == "sgd" else Adam(capturable=True)

    eager_step, captured_step = trainer(make()), bn.capture(trainer(make()), strict=True)
    eager, captured = mlp(device, rng), mlp(device, rng)
    for _ in range(9):
        x = Tensor.from_data(data(rng, 8, 16), device=device)
        y = Tensor.from_data(rng.integers(0, 4, 8), device=device)
        eager, loss_eager = eager_step(eager, x, y)
        captured, loss_captured = captured_step(captured, x, y)
        assert loss_captured.item() == loss_eager.item()
    for p, q in zip(eager.params(), captured.params()):
        np.testing.assert_array_equal(q.val().to_numpy(), p.val().to_numpy())
        assert q.val().is_require_grad()
    stats = captured_step.stats()
    assert sum(s["replays"] for s in stats) >= 4, stats


def test_random_draws_are_fresh_on_every_replay_and_follow_the_seed(gpu):
    """The generator's seed and draw count live on the device: a captured draw (dropout) is
    new on every replay, and the draws are those an eager run with that seed makes."""
    device = device_of(gpu)

    def noisy(x):
        return x + Tensor.random(x.shape, bn.Distribution.uniform(0, 1), device=device)

    captured = bn.capture(noisy, strict=True)
    x = Tensor.zeros([64], device=device)
    bn.seed(7)
    got = [captured(x).to_numpy() for _ in range(6)]
    bn.seed(7)
    want = [noisy(x).to_numpy() for _ in range(6)]
    assert captured.stats()[0]["replays"] == 3
    assert len({d.tobytes() for d in got}) == 6
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    bn.seed(7)  # reseeding reaches the record's generator too
    np.testing.assert_array_equal(captured(x).to_numpy(), want[0])


def test_a_training_step_with_dropout_replays(gpu):
    from burnish.nn import CrossEntropyLoss, Dropout
    from burnish.optim import Sgd

    device = device_of(f"autodiff+{gpu}")
    rng = np.random.default_rng(4)
    dropout, loss_fn = Dropout(0.5), CrossEntropyLoss()

    def trainer(optimizer):
        def step(model, x, y):
            loss = loss_fn(dropout(model(x)), y)
            return optimizer.step(0.01, model, loss.backward()), loss.detach()
        return step

    eager_step, captured_step = trainer(Sgd()), bn.capture(trainer(Sgd()), strict=True)
    eager, captured = mlp(device, rng), mlp(device, rng)
    batches = [(Tensor.from_data(data(rng, 8, 16), device=device),
                Tensor.from_data(rng.integers(0, 4, 8), device=device)) for _ in range(8)]
    losses = {}
    for name, step, model in (("eager", eager_step, eager), ("captured", captured_step, captured)):
        bn.seed(3)
        losses[name] = []
        for x, y in batches:
            model, loss = step(model, x, y)
            losses[name].append(loss.item())
        if name == "eager":
            eager = model
        else:
            captured = model
    assert sum(s["replays"] for s in captured_step.stats()) >= 3, captured_step.stats()
    assert losses["captured"] == losses["eager"]
    for p, q in zip(eager.params(), captured.params()):
        np.testing.assert_array_equal(q.val().to_numpy(), p.val().to_numpy())


class _State:
    """A plain object carried from call to call, as a training loop carries its model."""

    def __init__(self, w: Tensor):
        self.w = w
        self.scale = 0.5


def test_a_record_keeps_nothing_of_the_recorded_calls_results(gpu):
    """``state = step(state)``: once the caller lets a result go, nothing of it stays, the
    recorded calls' results included (the record's templates of them kept the returned objects
    and their tensors' memory for as long as the record lived: a model's worth of parameters);
    in steady state the pool holds the record's input, its packed memory and the caller's
    state, and no tensor is moved to a copy of its own on a replay."""
    import weakref

    device = device_of(gpu)
    pool = device.backend.runtime(device).pool
    n = 256 * 1024  # floats: 1 MiB of state

    def step(state):
        return _State((state.w * state.scale + 1.0).tanh())

    captured = bn.capture(step, strict=True)
    state = _State(Tensor.from_data(np.ones(n, np.float32), device=device))
    want = np.ones(n, np.float32)
    results = []
    in_use = []
    for _ in range(8):
        state = captured(state)
        want = np.tanh(want * 0.5 + 1.0)
        results.append(weakref.ref(state))
        gc.collect()
        stats = pool.stats()
        in_use.append(stats["allocated_bytes"] - stats["free_bytes"])
    np.testing.assert_allclose(state.w.to_numpy(), want, rtol=1e-6)
    assert captured.stats()[0]["replays"] >= 4
    assert all(ref() is None for ref in results[:-1])
    # Replays in steady state: the same bytes in use each time, at most the input, the
    # packed memory (the output and one temporary) and nothing more.
    assert in_use[-1] == in_use[-2] == in_use[-3], in_use
    assert in_use[-1] <= 3 * 4 * n + 64 * 1024, in_use


def test_a_record_packs_buffers_whose_uses_do_not_overlap(gpu):
    """A buffer dead early (``a``) lends its memory to a later one of another size (``b``),
    which the eager run's pool could not (it reuses a buffer only within its size class);
    the replays still give the eager results."""
    device = device_of(gpu)

    def step(x, y):
        a = x * 2.0  # 256 KiB, dead once summed
        total = a.sum()
        b = y * 3.0 + total  # two of 128 KiB (y * 3, then b), made after a's last use
        return b, total

    captured = bn.capture(step, strict=True)
    rng = np.random.default_rng(5)
    for _ in range(5):
        x = Tensor.from_data(data(rng, 256, 256), device=device)
        y = Tensor.from_data(data(rng, 128, 256), device=device)
        b, total = captured(x, y)
        want_b, want_total = step(x, y)
        np.testing.assert_array_equal(b.to_numpy(), want_b.to_numpy())
        assert total.item() == want_total.item()
    (entry,) = captured._entries.values()
    blocks = sorted(buffer.nbytes for buffer in entry.record.blocks)
    if entry.record.runtime.view is not None:  # one arena: y * 3 and b fill a's bytes
        # (beside a: the sum's partial results, in use together with it)
        assert len(blocks) == 1 and blocks[0] < 384 * 1024, blocks
        return
    # a's memory holds y * 3 later; b (in use with y * 3) has its own; the sum's partial
    # results and the total share the small ones.
    big = [n for n in blocks if n >= 128 * 1024]
    assert big == [128 * 1024, 256 * 1024] and sum(blocks) < 400 * 1024, blocks


def test_capturable_adam_matches_adam(gpu):
    """The device-side bias corrections (float32) agree with the host's."""
    from burnish.optim import Adam

    device = device_of(f"autodiff+{gpu}")
    rng = np.random.default_rng(2)
    host, on_device = trainer(Adam()), trainer(Adam(capturable=True))
    a, b = mlp(device, rng), mlp(device, rng)
    for _ in range(5):
        x = Tensor.from_data(data(rng, 8, 16), device=device)
        y = Tensor.from_data(rng.integers(0, 4, 8), device=device)
        a, _ = host(a, x, y)
        b, _ = on_device(b, x, y)
    for p, q in zip(a.params(), b.params()):
        np.testing.assert_allclose(q.val().to_numpy(), p.val().to_numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_a_host_read_runs_eagerly_with_a_warning_naming_the_line(gpu):
    device = device_of(gpu)

    def step(x):
        total = (x * 2.0).sum().item()  # a read on the host: not replayable
        return x + total

    captured = bn.capture(step)
    x = Tensor.from_data(np.ones(4, np.float32), device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [captured(x + float(i)).tolist() for i in range(5)]
    messages = [str(w.message) for w in caught if "capture" in str(w.message)]
    assert len(messages) == 1, messages
    assert "reads tensor values on the host" in messages[0] and "test_capture.py" in messages[0]
    assert results == [step(x + float(i)).tolist() for i in range(5)]
    with pytest.raises(CaptureError, match="host"):
        strict = bn.capture(step, strict=True)
        for _ in range(3):
            strict(x)


def test_a_host_number_that_changes_between_calls_is_never_frozen(gpu):
    device = device_of(gpu)
    counter = itertools.count(1)  # Python state capture cannot see into

    def step(x):
        return x * float(next(counter))  # a scalar computed in Python, different on every call

    captured = bn.capture(step)
    x = Tensor.from_data(np.ones(3, np.float32), device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [captured(x).tolist() for _ in range(8)]
    assert results == [[float(i)] * 3 for i in range(1, 9)]
    assert any("other values on each call" in str(w.message) and "test_capture.py" in
               str(w.message) for w in caught), [str(w.message) for w in caught]


def test_a_counter_kept_in_python_is_named_and_runs_eagerly(gpu):
    device = device_of(gpu)

    class State:
        def __init__(self):
            self.count = 0
            self.total = Tensor.zeros([2], device=device)

    state = State()

    def step(x):
        state.count += 1
        state.total = state.total + x * state.count
        return state.total

    captured = bn.capture(step)
    x = Tensor.from_data(np.ones(2, np.float32), device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(8):
            out = captured(x)
    assert out.tolist() == [36.0, 36.0]
    assert any("held state[0].count: " in str(w.message) for w in caught), \
        [str(w.message) for w in caught]


def test_tensors_a_caller_keeps_are_not_overwritten(gpu):
    device = device_of(gpu)

    def step(w, x):
        return w + x, (w * x).sum()

    captured = bn.capture(step, strict=True)
    w = Tensor.from_data(np.zeros(4, np.float32), device=device)
    x = Tensor.from_data(np.ones(4, np.float32), device=device)
    kept = []
    for _ in range(8):
        w, total = captured(w, x)
        kept.append((w, total))
    assert [k[0].tolist() for k in kept] == [[float(i)] * 4 for i in range(1, 9)]
    assert [k[1].item() for k in kept] == [4.0 * i for i in range(8)]


def test_state_replaced_outside_the_step_is_recorded_afresh(gpu):
    device = device_of(gpu)
    held = {"scale": Tensor.from_data(np.full(3, 2.0, np.float32), device=device)}

    def step(x):
        return x * held["scale"]

    captured = bn.capture(step, strict=True)
    x = Tensor.from_data(np.ones(3, np.float32), device=device)
    for _ in range(4):
        assert captured(x).tolist() == [2.0] * 3
    held["scale"] = Tensor.from_data(np.full(3, 5.0, np.float32), device=device)
    gc.collect()
    for _ in range(4):
        assert captured(x).tolist() == [5.0] * 3


def test_each_signature_has_its_record_and_release_gives_memory_back(gpu):
    device = device_of(gpu)
    runtime = available(gpu).runtime(device)

    def double(x):
        return x * 2.0 + 1.0

    captured = bn.capture(double, strict=True, max_records=2)
    for shape in ([3], [5], [3], [5]):
        for _ in range(4):
            x = Tensor.from_data(np.ones(shape, np.float32), device=device)
            assert captured(x).tolist() == [3.0] * shape[0]
    assert [s["replays"] for s in captured.stats()] == [5, 5]
    free = runtime.pool.stats()["free_bytes"]
    captured.release()
    assert captured.stats() == []
    assert runtime.pool.stats()["free_bytes"] > free


def test_a_result_it_cannot_rebuild_runs_eagerly(gpu):
    device = device_of(gpu)

    def step(x):
        return x + 1.0, np.zeros(2)

    captured = bn.capture(step)
    x = Tensor.from_data(np.ones(2, np.float32), device=device)
    with pytest.warns(RuntimeWarning, match="cannot rebuild"):
        for _ in range(3):
            out, _ = captured(x)
    assert out.tolist() == [2.0, 2.0]


def test_without_a_capturer_the_function_runs_eagerly_once_warned(monkeypatch):
    backend = bn.backend("ndarray")
    monkeypatch.setattr(type(backend), "capturer", lambda self, device: None)
    device = backend.default_device()
    captured = bn.capture(lambda x: x + 1.0)
    x = Tensor.from_data(np.ones(2, np.float32), device=device)
    with pytest.warns(RuntimeWarning, match="'ndarray' cannot capture"):
        assert captured(x).tolist() == [2.0, 2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert captured(x).tolist() == [2.0, 2.0]
    with pytest.raises(CaptureError, match="cannot capture"):
        bn.capture(lambda x: x, strict=True)(x)


def test_work_of_other_threads_is_not_recorded(gpu):
    """A data loader's thread putting batches on the device while a step is recorded."""
    import threading

    device = device_of(gpu)
    made = []

    def load():
        made.append(Tensor.from_data(np.arange(4, dtype=np.float32), device=device) * 3.0)

    def step(x, side: bool):
        if side:
            worker = threading.Thread(target=load)
            worker.start()
            worker.join()
        return x + 1.0

    sizes = {}
    for side in (False, True):
        captured = bn.capture(step, strict=True)
        x = Tensor.from_data(np.ones(4, np.float32), device=device)
        for _ in range(4):
            assert captured(x, side).tolist() == [2.0] * 4
        entry = next(e for e in captured._entries.values() if e.record is not None)
        sizes[side] = len(entry.record.commands)
    assert sizes[True] == sizes[False]
    assert [t.tolist() for t in made] == [[0.0, 3.0, 6.0, 9.0]] * 3  # the 3 eager calls


def test_an_arena_places_allocations_in_use_together_apart():
    """Where a runtime's handles can point into a buffer (cuda), a record's allocations get
    offsets in one buffer: those in use at the same time never share a byte, and the buffer is
    the most that is in use at once when the sizes allow it."""
    from burnish.jit.capture import _arena

    class Pool:
        def alloc(self, nbytes, exact=False):
            assert exact  # the arena is kept: no size class around it
            return type("Buffer", (), {"handle": 0, "nbytes": nbytes})()

    class Runtime:
        pool = Pool()

        def view(self, handle, offset):
            return handle + offset

    rng = np.random.default_rng(6)
    spans, nbytes = {}, {}
    for key in range(200):
        first = int(rng.integers(0, 500))
        spans[(key, 0)] = [first, first + int(rng.integers(0, 60))]
        # the bytes asked for: the arena rounds each to 256-byte steps
        nbytes[(key, 0)] = 256 * int(rng.integers(1, 64)) - int(rng.integers(0, 200))
    runtime = Runtime()
    handles, (arena,) = _arena(runtime, spans, nbytes, {})
    for a, (first, last) in spans.items():
        for b, (first_b, last_b) in spans.items():
            if a < b and first <= last_b and first_b <= last:  # in use together
                low, high = sorted([(handles[a], nbytes[a]), (handles[b], nbytes[b])])
                assert low[0] + low[1] <= high[0], (a, b)
    for alloc, handle in handles.items():
        assert handle % 256 == 0 and handle + nbytes[alloc] <= arena.nbytes
    busiest = max(sum(-(-nbytes[a] // 256) * 256 for a, (f, z) in spans.items() if f <= t <= z)
                  for t in range(600))
    assert arena.nbytes <= 1.25 * busiest, (arena.nbytes, busiest)


def test_a_quantized_model_replays(gpu):
    """A model holding quantized tensors (weights, calibrated input scales) is captured like any
    other: its quantized tensors' parts are tensors of the held state."""
    from burnish import nn
    from burnish.nn.quant import Quantizer
    from burnish.quantization import PerTensor, QuantScheme

    device = device_of(gpu)
    rng = np.random.default_rng(3)

    class Model(nn.Module):
        first: nn.Linear
        second: nn.Linear

        def forward(self, x):
            return self.second(F.relu(self.first(x)))

    model = Model(first=nn.LinearConfig(24, 40).init(device),
                  second=nn.LinearConfig(40, 6).init(device))
    inputs = [Tensor.from_data(data(rng, 5, 24), device=device) for _ in range(4)]
    quantized = Quantizer(activations=QuantScheme(granularity=PerTensor())).quantize(
        model, inputs)
    captured = bn.capture(quantized.forward, strict=True)
    for x in inputs * 2:
        np.testing.assert_array_equal(captured(x).to_numpy(), quantized.forward(x).to_numpy())
    (stats,) = captured.stats()
    assert stats["captured"] and stats["replays"] >= 3, stats


def test_replacing_a_held_quantized_tensor_is_refused(gpu):
    from burnish.quantization import QuantScheme

    device = device_of(gpu)
    rng = np.random.default_rng(4)

    class State:
        weight = Tensor.from_data(data(rng, 8, 8), device=device).quantize(QuantScheme())

    state = State()

    def step(x):
        state.weight = (state.weight.dequantize() * 0.5).quantize(QuantScheme())
        return x @ state.weight.dequantize()

    captured = bn.capture(step, strict=True)
    x = Tensor.from_data(data(rng, 2, 8), device=device)
    with pytest.raises(CaptureError, match="replaces a quantized tensor"):
        for _ in range(6):
            captured(x)


def test_work_a_record_cannot_hold_refuses_the_capture(gpu):
    """Work outside the runtime's recorded methods (NCCL's collectives) tells the recorder
    (``refuse``): the function then runs eagerly, or raises with the reason when strict."""
    device = device_of(gpu)

    def step(x):
        recorder = device.backend.runtime(device).pool.recorder
        if recorder is not None:
            recorder.refuse("it runs a collective")
        return x * 2

    captured = bn.capture(step, strict=True)
    x = Tensor.from_data(np.ones(3, np.float32), device=device)
    with pytest.raises(CaptureError, match="it runs a collective at .*test_capture.py"):
        for _ in range(6):
            captured(x)
    relaxed = bn.capture(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(6):
            np.testing.assert_array_equal(relaxed(x).to_numpy(), [2.0, 2.0, 2.0])
    assert not relaxed.stats()[0]["replays"]
