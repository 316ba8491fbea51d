"""burnish.cuda.distributed without a GPU: bucketing, which gradients go in and what comes out
(on autodiff+ndarray, the collective standing in for NCCL), argument checks, and the process
machinery beneath ``launch``. The NCCL collectives themselves are in test_distributed_gpu.py."""

from __future__ import annotations

import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

import burnish as bn
import burnish.functional as F
from burnish import Tensor, nn, optim
from burnish.autodiff import Gradients
from burnish.cuda import distributed
from burnish.cuda.distributed import processes
from burnish.distributed import buckets, gradients
from burnish.errors import AutodiffError, DeviceError, DTypeError, UnsupportedError
from burnish.optim import GradientsParams

# The ranks import what they run by module name: the workers' folder goes on sys.path, which
# spawned processes inherit, whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))
import distributed_workers as workers  # noqa: E402

ND = "ndarray"
AD = "autodiff+ndarray"


def _tensor(values, dtype="float32", device=ND) -> Tensor:
    return Tensor.from_data(np.asarray(values), device=device, dtype=dtype)


# -- buckets ----------------------------------------------------------------------------------


def _mixed() -> list[Tensor]:
    rng = np.random.default_rng(0)
    return [
        _tensor(rng.standard_normal((3, 4))),
        _tensor(rng.standard_normal(5), "float64"),
        _tensor(np.float32(2.5)),                       # 0-d
        _tensor(np.zeros((0, 2))),                      # empty
        _tensor(rng.integers(0, 9, (2, 2)), "int32"),
        _tensor(rng.standard_normal((2, 3)).T),         # a transposed view: not contiguous
    ]


def test_plan_has_one_bucket_per_dtype_in_name_order():
    tensors = _mixed()
    planned = buckets.plan(tensors)
    assert [b.dtype.name for b in planned] == ["float32", "float64", "int32"]
    f32 = planned[0]
    assert f32.indices == (0, 2, 3, 5)
    assert f32.shapes == ((3, 4), (), (0, 2), (3, 2))
    assert f32.sizes == (12, 1, 0, 6)
    assert f32.offsets == (0, 12, 13, 13)
    assert f32.numel == 19


def test_flatten_then_unflatten_gives_back_every_tensor():
    tensors = _mixed()
    for bucket in buckets.plan(tensors):
        flat = buckets.flatten(tensors, bucket)
        assert flat.dims() == [bucket.numel] and flat.dtype is bucket.dtype
        expected = np.concatenate([tensors[i].to_numpy().reshape(-1) for i in bucket.indices])
        np.testing.assert_array_equal(flat.to_numpy(), expected)
        for i, back in zip(bucket.indices, buckets.unflatten(flat, bucket)):
            assert back.dims() == tensors[i].dims() and back.dtype is tensors[i].dtype
            np.testing.assert_array_equal(back.to_numpy(), tensors[i].to_numpy())


def test_bucketed_calls_the_collective_once_with_one_buffer_per_dtype():
    tensors = _mixed()
    calls = []

    def double(flats):
        calls.append([(f.dtype.name, f.dims()) for f in flats])
        return [f * 2 for f in flats]

    out = buckets.bucketed(tensors, double)
    assert calls == [[("float32", [19]), ("float64", [5]), ("int32", [4])]]
    for before, after in zip(tensors, out):
        assert after.dims() == before.dims() and after.dtype is before.dtype
        np.testing.assert_array_equal(after.to_numpy(), before.to_numpy() * 2)
    assert buckets.bucketed([], double) == [] and len(calls) == 1


def test_unflatten_refuses_a_buffer_of_another_length_or_dtype():
    tensors = _mixed()
    bucket = buckets.plan(tensors)[0]
    with pytest.raises(ValueError, match="19 elements of float32"):
        buckets.unflatten(_tensor(np.zeros(18)), bucket)
    with pytest.raises(ValueError, match="float64"):
        buckets.unflatten(_tensor(np.zeros(19), "float64"), bucket)


# -- gradients through a collective -----------------------------------------------------------


class Mlp(nn.Module):
    first: nn.Linear
    second: nn.Linear
    unused: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        return self.second(F.relu(self.first(x)))


def _model_and_grads(x_requires_grad: bool = False):
    bn.seed(0)
    model = Mlp(nn.LinearConfig(3, 4).init(AD), nn.LinearConfig(4, 2).init(AD),
                nn.LinearConfig(2, 2).init(AD))
    x = _tensor(np.arange(6.0).reshape(2, 3) / 5, device=AD)
    if x_requires_grad:
        x = x.require_grad()
    loss = (model(x) ** 2).mean()
    return model, x, loss.backward()


def _halve(flats):
    return [f * 0.5 for f in flats]


def test_gradients_in_gradients_out_with_params_replaced():
    model, x, grads = _model_and_grads(x_requires_grad=True)
    before = {p.id: p.val().grad(grads).to_numpy() for p in model.params()
              if p.val().grad(grads) is not None}
    x_grad = x.grad(grads).to_numpy()
    seen = []

    def collective(flats):
        seen.extend((f.dtype.name, f.dims(), f.backend.name) for f in flats)
        return _halve(flats)

    reduced = gradients.reduce_gradients(grads, model, collective)
    assert isinstance(reduced, Gradients) and reduced is not grads
    # One float32 buffer on the inner backend: every trained parameter, unused ones included,
    # and a flag per parameter saying whether this rank had its gradient.
    leaves = len(model.params())
    assert seen == [("float32", [model.num_params() + leaves], ND)]
    for param in model.params():
        if param.id in before:
            np.testing.assert_allclose(param.val().grad(reduced).to_numpy(),
                                       before[param.id] * 0.5, rtol=1e-6)
        else:  # no rank had a gradient for it: it gets none
            assert param.val().grad(reduced) is None
    # A leaf that is not a parameter keeps its gradient; the original is left alone.
    np.testing.assert_array_equal(x.grad(reduced).to_numpy(), x_grad)
    for param in model.params():
        if param.id in before:
            np.testing.assert_array_equal(param.val().grad(grads).to_numpy(), before[param.id])


def test_unused_parameters_go_in_as_zeros():
    model, _, grads = _model_and_grads()
    assert model.unused.weight.val().grad(grads) is None
    # Another rank used it: its share (ones here) and its flag arrive through the collective.
    reduced = gradients.reduce_gradients(grads, model, lambda flats: [f + 1.0 for f in flats])
    np.testing.assert_array_equal(model.unused.weight.val().grad(reduced).to_numpy(),
                                  np.ones((2, 2), np.float32))


def test_a_parameter_no_rank_used_gets_no_gradient():
    model, _, grads = _model_and_grads()
    reduced = gradients.reduce_gradients(grads, model, lambda flats: flats)
    assert model.unused.weight.val().grad(reduced) is None
    assert model.first.weight.val().grad(reduced) is not None
    stepped = optim.Adam().step(0.1, model, reduced)
    np.testing.assert_array_equal(stepped.unused.weight.val().to_numpy(),
                                  model.unused.weight.val().to_numpy())


def test_frozen_parameters_are_left_out():
    model, _, grads = _model_and_grads()
    model = model.freeze("unused")
    sizes = []
    gradients.reduce_gradients(grads, model, lambda flats: sizes.append(flats[0].numel()) or flats)
    trained = model.num_params() - model.unused.weight.numel() - model.unused.bias.numel()
    assert sizes == [trained + 4]  # and a flag for each of the 4 trained parameters


def test_gradients_params_in_gradients_params_out():
    model, _, grads = _model_and_grads()
    by_id = GradientsParams.from_grads(grads, model)
    reduced = gradients.reduce_gradients(by_id, model, _halve)
    assert isinstance(reduced, GradientsParams)
    for param in model.params():
        expected = by_id.get(param.id)
        if expected is None:  # unused everywhere
            assert reduced.get(param.id) is None
            continue
        np.testing.assert_allclose(reduced.get(param.id).to_numpy(), expected.to_numpy() * 0.5,
                                   rtol=1e-6)
    with pytest.raises(TypeError, match="parameter id"):
        gradients.reduce_gradients(by_id, [p.val() for p in model.params()], _halve)


def test_an_optimizer_steps_on_the_result_like_on_backward_s():
    model, _, grads = _model_and_grads()
    reduced = gradients.reduce_gradients(grads, model, lambda flats: flats)
    stepped = optim.Sgd().step(0.1, model, reduced)
    twin, _, fresh = _model_and_grads()  # the same model and gradients, made again
    plain = optim.Sgd().step(0.1, twin, fresh)
    for a, b in zip(stepped.params(), plain.params()):
        np.testing.assert_allclose(a.val().to_numpy(), b.val().to_numpy(), rtol=1e-6)
    assert not np.allclose(stepped.first.weight.val().to_numpy(),
                           model.first.weight.val().to_numpy())


def test_wrong_gradients_and_parameters_are_refused():
    model, _, grads = _model_and_grads()
    with pytest.raises(TypeError, match="expected the Gradients"):
        gradients.reduce_gradients({"w": 1}, model, _halve)
    with pytest.raises(TypeError, match="module or an iterable"):
        gradients.reduce_gradients(grads, 3, _halve)
    with pytest.raises(AutodiffError, match="no gradients"):
        gradients.reduce_gradients(grads, [_tensor([1.0])], _halve)


def test_replace_params_keeps_ids_flags_and_leaves():
    model, _, _ = _model_and_grads()
    model = model.freeze("unused")
    counts = []

    def plus_one(flats):
        counts.append(len(flats))
        return [f + 1 for f in flats]

    copy = gradients.replace_params(model, plus_one)
    assert counts == [1]
    for old, new in zip(model.params(), copy.params()):
        assert (new.id, new.require_grad) == (old.id, old.require_grad)
        assert new.val().backend.name == AD
        assert new.val().is_require_grad() == old.require_grad
        np.testing.assert_allclose(new.val().to_numpy(), old.val().to_numpy() + 1, rtol=1e-6)


# -- argument checks --------------------------------------------------------------------------


def test_a_tensor_off_cuda_is_named_by_its_backend():
    with pytest.raises(DeviceError, match="backend 'ndarray'.*not on cuda"):
        distributed.cuda_operand(_tensor([1.0]), "all_reduce")
    with pytest.raises(DeviceError, match="backend 'autodiff\\+ndarray'"):
        distributed.cuda_operand(_tensor([1.0], device=AD), "all_reduce")
    with pytest.raises(TypeError, match="burnish Tensor"):
        distributed.cuda_operand(np.ones(2), "all_reduce")


def test_reductions_name_what_nccl_cannot_do():
    assert distributed.reduction(bn.float32, "mean") == ("NCCL_FLOAT32", "NCCL_AVG")
    assert distributed.reduction(bn.bfloat16, "sum") == ("NCCL_BFLOAT16", "NCCL_SUM")
    assert distributed.reduction(bn.int64, "max") == ("NCCL_INT64", "NCCL_MAX")
    with pytest.raises(ValueError, match="sum, prod, max, min, mean"):
        distributed.reduction(bn.float32, "avg")
    with pytest.raises(DTypeError, match="bool"):
        distributed.reduction(bn.bool_, "sum")
    with pytest.raises(DTypeError, match="mean of int32"):
        distributed.reduction(bn.int32, "mean")
    with pytest.raises(UnsupportedError, match="no int16"):
        distributed.reduction(bn.int16, "sum")


def test_world_size_larger_than_the_gpus_names_both_numbers():
    with pytest.raises(DeviceError, match=r"world_size 5 is larger than the number of GPUs, 2"):
        distributed.check_world_size(5, 2)
    with pytest.raises(ValueError, match="positive"):
        distributed.check_world_size(0, 2)
    distributed.check_world_size(2, 2)


def test_launch_refuses_what_cannot_reach_a_new_process():
    with pytest.raises(TypeError, match="module level"):
        distributed.launch(lambda comm: None, 1)
    with pytest.raises(TypeError, match="callable"):
        distributed.launch(3, 1)


def test_missing_cupy_or_nccl_is_explained():
    try:
        distributed.load_nccl()
    except UnsupportedError as error:
        message = str(error)
    else:
        pytest.skip("CuPy and NCCL are present; the message for their absence is not shown")
    assert "cuda distributed" in message and "install" in message
    assert "CuPy is not importable" in message or "CuPy has no NCCL" in message
    with pytest.raises(UnsupportedError, match="cuda distributed"):
        distributed.launch(workers.report, 1)


# -- the process machinery (no GPU: run_ranks is launch without NCCL) -------------------------


def test_run_ranks_returns_results_in_rank_order_from_separate_processes():
    results = distributed.run_ranks(workers.report, 3, (10,))
    assert [(r, v) for r, v, _ in results] == [(0, 0), (1, 10), (2, 20)]
    assert len({pid for _, _, pid in results} | {os.getpid()}) == 4


def test_a_failing_rank_raises_here_with_its_traceback(monkeypatch):
    monkeypatch.setattr(processes, "FAILURE_GRACE_S", 0.5)
    started = time.monotonic()
    with pytest.raises(distributed.LaunchError) as info:
        distributed.run_ranks(workers.fail_on_rank_1, 2)
    error = info.value
    assert error.rank == 1 and error.exitcode == 1
    assert "rank 1 of 2 failed" in str(error)
    assert "KeyError: 'rank 1 has no data'" in error.traceback
    assert "in fail_on_rank_1" in error.traceback  # a frame of the child
    assert time.monotonic() - started < 30  # rank 0 was stopped, not waited for


def test_a_rank_that_dies_is_reported_with_its_exit_code():
    with pytest.raises(distributed.LaunchError, match="rank 0 of 2 died with exit code 3") as info:
        distributed.run_ranks(workers.die_on_rank_0, 2)
    assert info.value.traceback is None and info.value.exitcode == 3


def test_ranks_past_the_timeout_are_stopped():
    started = time.monotonic()
    with pytest.raises(distributed.LaunchError, match="ranks 0, 1 of 2 were still running"):
        distributed.run_ranks(workers.sleep_long, 2, timeout=3)
    assert time.monotonic() - started < 30


def test_a_function_the_ranks_cannot_import_is_reported_with_their_traceback():
    nowhere = types.ModuleType("burnish_test_nowhere")  # in this process only
    exec("def work(rank):\n    return rank\n", nowhere.__dict__)
    nowhere.work.__module__ = nowhere.__name__
    sys.modules[nowhere.__name__] = nowhere
    try:
        with pytest.raises(distributed.LaunchError, match="No module named 'burnish_test_nowhere'"):
            distributed.run_ranks(nowhere.work, 1)
    finally:
        del sys.modules[nowhere.__name__]
