"""``Router``: names, the union of devices, routing, moves both ways, mixed-device errors,
gradients across moves, fusion around and inside, bad names."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import burnish as bn
from burnish.errors import BackendNotInstalledError, BurnishError, DeviceError, UnsupportedError
from burnish.router import Router, RouterPrimitive

VALUES = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 4


@pytest.fixture
def router(wgpu):
    return bn.backend("router(ndarray,wgpu)")


def test_registry_names_and_identity(wgpu):
    nd = bn.backend("ndarray")
    router = bn.backend("router(ndarray,wgpu)")
    assert router is Router([nd, wgpu]) is bn.backend("router( ndarray , wgpu )")
    assert router.name == "router(ndarray,wgpu)" and router.members == (nd, wgpu)
    assert bn.backend("router(wgpu,ndarray)") is not router
    assert bn.backend("autodiff+router(ndarray,wgpu)").name == "autodiff+router(ndarray,wgpu)"


def test_devices_are_the_union_of_the_members(router, wgpu):
    nd = bn.backend("ndarray")
    natives = nd.devices() + wgpu.devices()
    devices = router.devices()
    assert [d.native for d in devices] == natives
    assert all(d.backend is router for d in devices) and len(set(devices)) == len(natives)
    assert [str(d) for d in devices[:2]] == ["ndarray/cpu:0", f"wgpu/{wgpu.devices()[0]}"]
    assert router.default_device().native == nd.default_device()
    assert bn.backend("router(wgpu,ndarray)").default_device().native == wgpu.default_device()
    cpu, gpu = router.device("ndarray"), router.device(wgpu)
    assert bn.float64 in router.dtypes(cpu) and bn.float64 not in router.dtypes(gpu)
    assert router.dtypes(gpu) == wgpu.dtypes(wgpu.default_device())
    assert "wgpu" in router.describe_device(gpu)
    named = bn.Tensor.zeros([2], device=f"router(ndarray,wgpu):{gpu}")
    assert named.device == gpu


def test_router_device_names_its_members(router):
    with pytest.raises(DeviceError, match=r"no member 'cuda'; its members are ndarray, wgpu"):
        router.device("cuda")
    with pytest.raises(DeviceError, match="ndarray has no device 7"):
        router.device("ndarray", 7)


@pytest.mark.parametrize("start,end", [("ndarray", "wgpu"), ("wgpu", "ndarray")])
def test_to_device_both_ways(router, start, end):
    source, target = router.device(start), router.device(end)
    x = bn.Tensor.from_data(VALUES, device=source)
    moved = x.to_device(target)
    assert moved.device == target and moved.primitive.member is target.native.backend
    np.testing.assert_array_equal(moved.to_numpy(), VALUES)
    # Ops run on the member holding their inputs; results stay there.
    y = (moved * 2).exp().sum(1)
    assert y.device == target and type(y.primitive) is RouterPrimitive
    assert y.primitive.member is target.native.backend
    np.testing.assert_allclose(y.to_numpy(), np.exp(VALUES * 2).sum(1), rtol=1e-5)
    back = y.to_device(source)
    assert back.device == source
    np.testing.assert_allclose(back.to_numpy(), y.to_numpy())
    ints = bn.Tensor.arange(0, 5, device=source).to_device(target)
    assert ints.dtype == bn.int64 or ints.dtype in router.dtypes(target)
    assert ints.tolist() == [0, 1, 2, 3, 4]


def test_tensors_enter_and_leave_the_router(router, wgpu):
    plain = bn.Tensor.from_data(VALUES, device="ndarray")
    inside = plain.to_device(router.device("wgpu"))
    assert inside.device.backend is router and inside.primitive.member is wgpu
    out = (inside + 1).to_device(wgpu.default_device())
    assert out.device.backend is wgpu
    np.testing.assert_allclose(out.to_numpy(), VALUES + 1)


def test_a_dtype_the_target_lacks_names_both_devices(router):
    x = bn.Tensor.from_data(VALUES, device=router.device("ndarray"), dtype="float64")
    with pytest.raises(UnsupportedError, match=r"float64 cannot move from .*ndarray/cpu:0.* to "
                                               r".*wgpu/.*wgpu does not support it"):
        x.to_device(router.device("wgpu"))


def test_mixed_devices_in_one_op_name_both(router):
    a = bn.Tensor.ones([2, 2], device=router.device("ndarray"))
    b = bn.Tensor.ones([2, 2], device=router.device("wgpu"))
    with pytest.raises(DeviceError, match=r"add: tensors are on different devices: "
                                          r".*ndarray/cpu:0.* vs .*wgpu/"):
        a + b
    with pytest.raises(DeviceError, match="different devices"):
        bn.cat([a, b])
    # Called directly on the backend (as a decorator would), the router checks too.
    with pytest.raises(DeviceError, match=r"matmul: .*ndarray/cpu:0.* vs .*wgpu/"):
        router.matmul(a.primitive, b.primitive)
    with pytest.raises(DeviceError, match=r"cat: .*ndarray/cpu:0.* vs .*wgpu/"):
        router.cat([a.primitive, b.primitive], 0)


def test_read_groups_by_member(router):
    a = bn.Tensor.from_data(VALUES, device=router.device("ndarray"))
    b = bn.Tensor.from_data(VALUES * 3, device=router.device("wgpu"))
    c = bn.Tensor.arange(0, 3, device=router.device("ndarray"))
    data = router.read([a.primitive, b.primitive, c.primitive], [a.dtype, b.dtype, c.dtype])
    np.testing.assert_array_equal(data[0].to_numpy(), VALUES)
    np.testing.assert_array_equal(data[1].to_numpy(), VALUES * 3)
    assert data[2].to_numpy().tolist() == [0, 1, 2]


def test_seed_reaches_every_member(router, wgpu):
    router.seed(7)
    x = bn.Tensor.random([5], device=router.device("wgpu")).to_numpy()
    wgpu.seed(7)
    y = bn.Tensor.random([5], device=wgpu.default_device()).to_numpy()
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", ["autodiff+router(ndarray,wgpu)",
                                  "autodiff+router(wgpu,ndarray)",
                                  "autodiff+router(ndarray,fusion+wgpu)"])
def test_gradients_flow_across_moves(wgpu, name):
    auto = bn.backend(name)
    cpu = next(d for d in auto.devices() if "ndarray" in d.type)
    gpu = next(d for d in auto.devices() if "wgpu" in d.type)
    w_values = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    w = bn.Tensor.from_data(w_values, device=gpu).require_grad()
    x = bn.Tensor.from_data(VALUES, device=cpu).require_grad()
    # x: cpu -> gpu, product on the GPU, tanh back on the CPU.
    y = x.to_device(gpu).matmul(w).to_device(cpu).tanh()
    assert y.device == cpu
    grads = (y * y).sum().backward()
    gw, gx = w.grad(grads), x.grad(grads)
    # Gradients live on the backend inside autodiff (the router), on the devices of their leaves.
    assert gw.device == gpu.native and gx.device == cpu.native
    t = np.tanh(VALUES @ w_values)
    upstream = 2 * t * (1 - t * t)
    np.testing.assert_allclose(gw.to_numpy(), VALUES.T @ upstream, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx.to_numpy(), upstream @ w_values.T, rtol=1e-4, atol=1e-5)


def test_fusion_over_the_router_fuses_the_gpu_member(wgpu):
    from burnish.fusion import launches, programs

    fused = bn.backend("fusion+router(wgpu,ndarray)")
    gpu, cpu = fused.devices()[0], fused.devices()[-1]
    x = bn.Tensor.from_data(VALUES, device=gpu)
    before = launches(gpu)
    y = ((x * 3).exp() + 1).sqrt() - x  # one fused kernel
    np.testing.assert_allclose(y.to_numpy(), np.sqrt(np.exp(VALUES * 3) + 1) - VALUES,
                               rtol=1e-5)
    assert launches(gpu) - before == 1 and programs(gpu)
    z = y.to_device(cpu) * 2  # ndarray has no fuser: ops run at once there
    np.testing.assert_allclose(z.to_numpy(), y.to_numpy() * 2, rtol=1e-6)
    assert launches(cpu) is None and programs(cpu) == []


def test_router_over_fusion(wgpu):
    from burnish.fusion import launches

    router = bn.backend("router(fusion+wgpu,ndarray)")
    gpu = router.device("fusion+wgpu")
    x = bn.Tensor.from_data(VALUES, device=gpu)
    before = launches(gpu)
    y = ((x * 3).exp() + 1).sqrt()
    np.testing.assert_allclose(y.to_numpy(), np.sqrt(np.exp(VALUES * 3) + 1), rtol=1e-5)
    assert launches(gpu) - before == 1
    np.testing.assert_allclose(y.to_device(router.device("ndarray")).to_numpy(), y.to_numpy())


def test_two_backends_without_a_gpu():
    """A router over ndarray and fusion+ndarray (two backends that need no driver)."""
    router = bn.backend("autodiff+router(ndarray,fusion+ndarray)")
    first, second = router.devices()
    assert (str(first), str(second)) == ("ndarray/cpu:0", "fusion+ndarray/cpu:0")
    assert first != second
    x = bn.Tensor.from_data(VALUES, device=first).require_grad()
    y = (x.to_device(second) * x.to_device(second)).sum()
    grads = y.backward()
    np.testing.assert_allclose(x.grad(grads).to_numpy(), 2 * VALUES)
    with pytest.raises(DeviceError, match="different devices"):
        x + x.to_device(second)


@pytest.mark.parametrize("name,error,message", [
    ("router(ndarray)", BurnishError, r"router\(ndarray\): a router needs two or more backends"),
    ("router(ndarray,ndarray)", BurnishError, "ndarray is named twice"),
    ("router(autodiff+ndarray,fusion+ndarray)", BurnishError,
     r"autodiff\+ndarray has autodiff, which goes outside the router"),
    ("router(ndarray,nosuch)", BackendNotInstalledError, "backend 'nosuch' is not installed"),
    ("nosuch(ndarray,fusion+ndarray)", BackendNotInstalledError,
     r"'nosuch' is not installed .*installed backends: router"),
    ("router(ndarray,fusion+ndarray", BurnishError, r"1 '\(' not closed"),
    ("router(ndarray))", BurnishError, "closes nothing"),
    ("router()", BurnishError, "an empty part"),
    ("router(ndarray,,fusion+ndarray)", BurnishError, "an empty part"),
    ("autodiff+router(ndarray,fusion+ndarray)x", BurnishError, "is written NAME"),
])
def test_bad_names(name, error, message):
    with pytest.raises(error, match=message):
        bn.backend(name)


def test_router_takes_only_backends():
    with pytest.raises(TypeError, match="Router routes to backends, got str"):
        Router(["ndarray", "wgpu"])  # type: ignore[list-item]


def test_info_lists_the_router():
    out = subprocess.run([sys.executable, "-m", "burnish", "info"], capture_output=True,
                         text=True, check=True).stdout
    assert "Composite backends" in out and "burnish-router" in out


def test_a_model_split_across_members_trains(wgpu):
    """The first layer on the GPU, the second and the loss on the CPU; Adam updates each
    parameter on its own device, and the loss falls."""
    nn = pytest.importorskip("burnish.nn", reason="needs burnish-nn (pip install burnish-nn)")
    optim = pytest.importorskip("burnish.optim", reason="needs burnish-nn")
    auto = bn.backend("autodiff+router(wgpu,ndarray)")
    gpu, cpu = auto.devices()[0], auto.devices()[-1]

    class Split(nn.Module):
        hidden: nn.Linear
        output: nn.Linear

        def forward(self, x):
            h = nn.Relu()(self.hidden(x.to_device(gpu)))
            return self.output(h.to_device(cpu))

    rng = np.random.default_rng(0)
    points = rng.normal(size=(64, 2)).astype(np.float32)
    labels = (points[:, 0] * points[:, 1] > 0).astype(np.int64)
    x, y = bn.Tensor.from_data(points, device=cpu), bn.Tensor.from_data(labels, device=cpu)
    bn.seed(0)
    model = Split(nn.LinearConfig(2, 16).init(gpu), nn.LinearConfig(16, 2).init(cpu))
    loss_fn, optimizer = nn.CrossEntropyLoss(), optim.Adam()
    losses = []
    for _ in range(30):
        loss = loss_fn(model(x), y)
        losses.append(loss.item())
        model = optimizer.step(0.05, model, loss.backward())
    assert model.hidden.weight.device == gpu and model.output.weight.device == cpu
    assert losses[-1] < 0.7 * losses[0], losses
