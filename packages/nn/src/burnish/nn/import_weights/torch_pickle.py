"""A restricted unpickler for PyTorch state dicts: tensors and dicts, never arbitrary objects."""

from __future__ import annotations

import collections
import io
import math
import pickle
import pickletools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from burnish.dtype import DType, get_dtype
from burnish.errors import RecordError
from burnish.tensor_data import TensorData

#: PyTorch's storage classes (``torch.FloatStorage``...) and the dtypes they hold.
STORAGE_DTYPES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "UntypedStorage": "uint8",
}


# Stand-ins are frozen and slotted: a pickle's BUILD opcode cannot change them.


@dataclass(frozen=True, slots=True)
class StorageType:
    """The stand-in for a ``torch.*Storage`` class: only its dtype."""

    name: str
    dtype: DType


@dataclass(frozen=True, slots=True)
class Storage:
    """A storage: its dtype, its size, and its values once read (``filled[0]``, a flat array;
    legacy files hold the values after the pickle that refers to them)."""

    dtype: DType
    numel: int
    filled: list[np.ndarray]

    def values(self) -> np.ndarray:
        if not self.filled:
            raise RecordError("a tensor refers to a storage whose values the file lacks")
        return self.filled[0]


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """A tensor the pickle rebuilt: a strided view of a storage, checked when it is copied out."""

    storage: Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.size)

    def check(self, path: str) -> None:
        """Raise RecordError, naming entry ``path``, unless the view stays inside its storage
        and holds no more values than the storage: a view that repeats its storage's values
        (zero or overlapping strides, as ``expand`` makes) could ask for gigabytes from a few
        bytes, so it is refused rather than copied out."""
        numel, available = self.numel, self.storage.numel
        if numel == 0:
            return
        described = f"size {list(self.size)}, stride {list(self.stride)} at offset {self.offset}"
        last = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride))
        if last >= available:
            raise RecordError(f"entry {path!r}: a tensor of {described} reaches past its "
                              f"storage of {available} values")
        if numel > available:
            raise RecordError(
                f"entry {path!r}: a tensor of {described} has {numel} values but its storage "
                f"only {available}: it repeats values (a broadcast view, as expand makes); "
                f"save tensor.contiguous() instead")

    def into_data(self, path: str) -> TensorData:
        """The tensor's values, copied out of the storage in C order, after ``check(path)``."""
        self.check(path)
        values = self.storage.values()
        if self.numel == 0:
            return TensorData(np.zeros(self.size, values.dtype), self.storage.dtype)
        view = np.lib.stride_tricks.as_strided(
            values[self.offset:], shape=self.size,
            strides=[s * values.itemsize for s in self.stride], writeable=False)
        return TensorData(np.array(view, order="C"), self.storage.dtype)


@dataclass(frozen=True, slots=True)
class SafeFunction:
    """A function the pickle may call, which it cannot modify."""

    function: Callable[..., Any]

    def __call__(self, *args: Any) -> Any:
        return self.function(*args)


def rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> Rebuilt:
    """``torch._utils._rebuild_tensor_v2``'s stand-in: the strided view of ``storage`` that the
    arguments describe. Its extent is checked when it is copied out (``Rebuilt.check``), where
    the entry's name is known; legacy files hold the storage's values after the pickle."""
    if not isinstance(storage, Storage):
        raise RecordError(f"a tensor is rebuilt from {type(storage).__name__}, not a storage")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if type(offset) is not int or offset < 0 or len(size) != len(stride):
        raise RecordError(f"a tensor has offset {offset!r}, size {size} and stride {stride}")
    return Rebuilt(storage, offset, size, stride)


def rebuild_parameter(data: Any, *_: Any) -> Rebuilt:
    """``torch._utils._rebuild_parameter``'s stand-in: a parameter is its tensor."""
    if not isinstance(data, Rebuilt):
        raise RecordError(f"a parameter is rebuilt from {type(data).__name__}, not a tensor")
    return data


def _ints(values: Any, what: str) -> tuple[int, ...]:
    if not isinstance(values, tuple | list) or len(values) > 64 or \
            not all(type(v) is int and v >= 0 for v in values):
        raise RecordError(f"a tensor's {what} is {values!r}, not a tuple of sizes")
    return tuple(values)


#: Called with a storage's type, key and size; returns the Storage.
StorageLoader = Callable[[StorageType, str, int], Storage]

#: The only globals a state dict may name, and what each becomes.
ALLOWED: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor_v2"): SafeFunction(rebuild_tensor),
    ("torch._utils", "_rebuild_parameter"): SafeFunction(rebuild_parameter),
    ("collections", "OrderedDict"): collections.OrderedDict,
    **{("torch", name): StorageType(name, get_dtype(dtype))
       for name, dtype in STORAGE_DTYPES.items()},
}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles what ``torch.save`` writes for state dicts and nothing else: a global outside
    ``ALLOWED`` raises RecordError naming it, so a hostile pickle never runs code. Storages come
    from ``load_storage(storage_type, key, numel)``."""

    def __init__(self, data: bytes | io.BufferedIOBase,
                 load_storage: StorageLoader):
        super().__init__(io.BytesIO(data) if isinstance(data, bytes | bytearray) else data)
        self.load_storage = load_storage
        self.storages: dict[str, Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED:
            return ALLOWED[(module, name)]
        raise RecordError(f"the pickle names the global {module}.{name}, which is not one of "
                          f"the tensor and dict types a state dict uses; refusing to load it "
                          f"(torch.save(model.state_dict(), path) writes a file burnish reads)")

    def persistent_load(self, pid: Any) -> Storage:
        # Zip files give ("storage", type, key, location, numel); legacy files add view data.
        if not isinstance(pid, tuple) or len(pid) not in (5, 6) or pid[0] != "storage":
            raise RecordError(f"unknown persistent id {str(pid)[:80]}")
        storage_type, key, _, numel = pid[1:5]
        if not isinstance(storage_type, StorageType) or not isinstance(key, str) \
                or type(numel) is not int or numel < 0:
            raise RecordError(f"malformed storage reference {str(pid)[:80]}")
        if len(pid) == 6 and pid[5] is not None:
            raise RecordError("storage views of the legacy format are not supported")
        if key not in self.storages:
            self.storages[key] = self.load_storage(storage_type, key, numel)
        return self.storages[key]


def unpickle(data: bytes | io.BufferedIOBase,
             load_storage: StorageLoader) -> Any:
    """The object a state-dict pickle holds (see ``RestrictedUnpickler``); RecordError for
    anything malformed or not allowed."""
    stream = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    start = stream.tell()
    # The C unpickler allocates the size a bytes opcode claims before reading it: a few inflated
    # length bytes would ask for gigabytes (or raise MemoryError). Walking the opcodes first,
    # reading each argument by what is really there, refuses such a length in bounded memory.
    try:
        for _ in pickletools.genops(stream):  # type: ignore[arg-type]  # any binary stream
            pass
    except (ValueError, EOFError, OverflowError, struct.error) as error:
        raise RecordError(f"not a valid PyTorch pickle: {error}") from None
    stream.seek(start)
    unpickler = RestrictedUnpickler(stream, load_storage)
    try:
        return unpickler.load()
    except RecordError:
        raise
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, KeyError, IndexError,
            AttributeError, RecursionError, OverflowError) as error:
        raise RecordError(f"not a valid PyTorch pickle: {type(error).__name__}: {error}") from None
