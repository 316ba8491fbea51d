"""Loading foreign weights: the restricted unpickler refuses hostile files, safetensors from
PyTorch and from burnish, remapping, adapters and the report."""

from __future__ import annotations

import os
import pickle
import zipfile

import numpy as np
import pytest
import safetensors.numpy

from burnish import Tensor, nn
from burnish.errors import RecordError
from burnish.nn.import_weights import PYTORCH, WeightAdapter, load_weights, read_pytorch
from burnish.nn.import_weights.pytorch_file import LEGACY_MAGIC, LEGACY_PROTOCOL
from burnish.nn.import_weights.torch_pickle import ALLOWED


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def zip_file(path, pickled: bytes, storages: dict[str, bytes] | None = None):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickled)
        for key, data in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", data)
    return path


def legacy_file(path, pickled: bytes):
    header = b"".join(pickle.dumps(v, protocol=2)
                      for v in (LEGACY_MAGIC, LEGACY_PROTOCOL, {"little_endian": True}))
    path.write_bytes(header + pickled + pickle.dumps([], protocol=2))
    return path


@pytest.mark.parametrize("write", [zip_file, legacy_file])
def test_a_hostile_pickle_fails_cleanly_and_never_runs(tmp_path, write):
    marker = tmp_path / "pwned"
    path = write(tmp_path / "evil.pt", pickle.dumps({"w": Evil(marker)}, protocol=2))
    with pytest.raises(RecordError, match=r"global (posix|os|nt)\.system"):
        read_pytorch(path)
    assert not marker.exists()


def tensor_pickle(offset: int, size: tuple, stride: tuple, numel: int) -> bytes:
    """``{"w": tensor}`` as torch.save pickles it, written opcode by opcode: the tensor is a
    view of float storage "0" (``numel`` values)."""

    def ints(values):
        return b"(" + b"".join(b"I%d\n" % v for v in values) + b"t"

    storage = b"(Vstorage\nctorch\nFloatStorage\nV0\nVcpu\nI%d\ntQ" % numel
    return (b"}Vw\nctorch._utils\n_rebuild_tensor_v2\n(" + storage + b"I%d\n" % offset
            + ints(size) + ints(stride) + b"I00\nccollections\nOrderedDict\n)RtRs.")


def test_a_hand_written_torch_pickle_reads_as_its_view(tmp_path):
    values = np.arange(6, dtype="<f4")
    path = zip_file(tmp_path / "w.pt", tensor_pickle(1, (2, 2), (1, 2), 6),
                    {"0": values.tobytes()})
    np.testing.assert_array_equal(read_pytorch(path)["w"].to_numpy(), [[1, 3], [2, 4]])


def test_a_view_past_its_storage_is_refused(tmp_path):
    values = np.arange(6, dtype="<f4").tobytes()
    path = zip_file(tmp_path / "w.pt", tensor_pickle(2, (2, 3), (3, 1), 6), {"0": values})
    with pytest.raises(RecordError, match="reaches past its storage"):
        read_pytorch(path)


def test_a_storage_of_the_wrong_size_is_refused(tmp_path):
    path = zip_file(tmp_path / "w.pt", tensor_pickle(0, (6,), (1,), 6), {"0": b"\0" * 8})
    with pytest.raises(RecordError, match="needs 24 bytes, the archive holds 8"):
        read_pytorch(path)
    path = zip_file(tmp_path / "w.pt", tensor_pickle(0, (6,), (1,), 6))
    with pytest.raises(RecordError, match="which the archive lacks"):
        read_pytorch(path)


def test_garbage_is_a_record_error(tmp_path):
    path = tmp_path / "w.pt"
    path.write_bytes(b"\x80\x02not a pickle at all")
    with pytest.raises(RecordError, match="cannot load"):
        read_pytorch(path)


def test_the_allow_list_is_small():
    assert ("torch._utils", "_rebuild_tensor_v2") in ALLOWED
    assert all(module in ("torch", "torch._utils", "collections") for module, _ in ALLOWED)


class Net(nn.Module):
    linear: nn.Linear
    norm: nn.LayerNorm
    blocks: list


def make_net() -> Net:
    return Net(nn.LinearConfig(3, 2).init("ndarray"), nn.LayerNormConfig(2).init("ndarray"),
               [nn.LinearConfig(2, 2, bias=False).init("ndarray")])


def pytorch_weights():
    rng = np.random.default_rng(0)
    return {
        "linear.weight": rng.normal(size=(2, 3)).astype(np.float32),
        "linear.bias": rng.normal(size=2).astype(np.float32),
        "norm.weight": rng.normal(size=2).astype(np.float32),
        "norm.bias": rng.normal(size=2).astype(np.float32),
        "blocks.0.weight": rng.normal(size=(2, 2)).astype(np.float64),
        "head.weight": np.zeros((4, 2), np.float32),
    }


def test_pytorch_safetensors_are_transposed_and_renamed(tmp_path):
    weights = pytorch_weights()
    path = tmp_path / "model.safetensors"
    safetensors.numpy.save_file(weights, str(path))
    result = load_weights(make_net(), path)
    net = result.module
    np.testing.assert_array_equal(net.linear.weight.val().to_numpy(), weights["linear.weight"].T)
    np.testing.assert_array_equal(net.norm.gamma.val().to_numpy(), weights["norm.weight"])
    np.testing.assert_array_equal(net.norm.beta.val().to_numpy(), weights["norm.bias"])
    assert net.blocks[0].weight.dtype.name == "float32"      # cast to the parameter's dtype
    np.testing.assert_allclose(net.blocks[0].weight.val().to_numpy(),
                               weights["blocks.0.weight"].T, rtol=1e-6)
    assert result.unused == ["head.weight"]
    assert result.missing == result.mismatched == []
    assert "loaded 5 of 5 parameters" in str(result)


def test_files_burnish_wrote_load_as_they_are(tmp_path):
    net = make_net()
    net.save(tmp_path / "net.safetensors")
    result = load_weights(make_net(), tmp_path / "net.safetensors")
    np.testing.assert_array_equal(result.module.linear.weight.val().to_numpy(),
                                  net.linear.weight.val().to_numpy())
    assert result.unused == []


def test_missing_and_mismatched_are_listed_at_once():
    weights = pytorch_weights()
    del weights["norm.bias"]
    weights["linear.bias"] = np.zeros(5, np.float32)
    with pytest.raises(RecordError) as caught:
        load_weights(make_net(), weights)
    message = str(caught.value)
    assert "missing: norm.beta (as norm.bias)" in message
    assert "linear.bias (module [2], source [5] as linear.bias)" in message
    net = make_net()
    result = load_weights(net, weights, allow_partial=True)
    assert result.missing == ["norm.beta (as norm.bias)"]
    np.testing.assert_array_equal(result.module.norm.beta.val().to_numpy(),
                                  net.norm.beta.val().to_numpy())


def test_remapping_with_regular_expressions():
    weights = {k.replace("linear.", "encoder.fc."): v for k, v in pytorch_weights().items()}
    result = load_weights(make_net(), weights, remap=[(r"^encoder\.fc\.", "linear.")])
    assert "linear.weight" in result.loaded
    with pytest.raises(RecordError, match="the same key"):
        load_weights(make_net(), weights, remap=[(r"\.(weight|bias)$", "")])


def test_an_adapter_for_a_module_of_ones_own():
    class Scale(nn.Module):
        factor: nn.Param

    class Model(nn.Module):
        scale: Scale

    model = Model(Scale(nn.Param(Tensor.zeros([2], "ndarray"))))
    adapter = PYTORCH.with_rules({Scale: {"factor": ("alpha", lambda v: v * 2)}})
    result = load_weights(model, {"scale.alpha": np.ones(2, np.float32)}, adapter=adapter)
    assert result.module.scale.factor.val().to_numpy().tolist() == [2.0, 2.0]
    identity = load_weights(make_net(), pytorch_weights(), adapter=WeightAdapter(),
                            allow_partial=True)
    assert any("linear.weight" in line for line in identity.mismatched)


def test_compressed_entries_and_deep_nesting_are_refused(tmp_path):
    path = tmp_path / "w.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({}, protocol=2))
    with pytest.raises(RecordError, match="compressed"):
        read_pytorch(path)
    depth = 100_000  # lists in lists, pushed then appended each to the one below
    deep = zip_file(tmp_path / "deep.pt", b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")
    with pytest.raises(RecordError, match="nests too deeply"):
        read_pytorch(deep)


def test_batch_norm_statistics_load_and_num_batches_tracked_is_unused():
    norm = nn.BatchNormConfig(3).init("ndarray")
    weights = {"weight": np.full(3, 2.0, np.float32), "bias": np.ones(3, np.float32),
               "running_mean": np.arange(3, dtype=np.float32),
               "running_var": np.full(3, 4.0, np.float32),
               "num_batches_tracked": np.array(7, np.int64)}
    result = load_weights(norm, weights)
    assert result.unused == ["num_batches_tracked"]
    assert result.module.gamma.val().to_numpy().tolist() == [2.0, 2.0, 2.0]
    assert result.module.running_mean.val().to_numpy().tolist() == [0.0, 1.0, 2.0]
    assert result.module.running_mean.require_grad is False


def test_weights_load_into_a_module_that_trains(ad):
    from burnish import optim

    model = nn.LinearConfig(3, 2).init(ad)
    weights = {"weight": np.ones((2, 3), np.float32), "bias": np.zeros(2, np.float32)}
    loaded = load_weights(model, weights).module
    assert loaded.weight.id == model.weight.id and loaded.weight.val().is_require_grad()
    loss = loaded(Tensor.ones([1, 3], ad)).sum()
    stepped = optim.Sgd().step(0.5, loaded, loss.backward())
    assert stepped.weight.val().to_numpy().tolist() == [[0.5, 0.5]] * 3


def test_prelu_slopes_come_from_weight():
    prelu = nn.PReluConfig(num_parameters=2).init("ndarray")
    loaded = load_weights(prelu, {"weight": np.array([0.1, 0.2], np.float32)}).module
    np.testing.assert_allclose(loaded.alpha.val().to_numpy(), [0.1, 0.2])
