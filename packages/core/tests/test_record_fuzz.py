"""Fuzzing every record format: mutations of real files load or raise RecordError, nothing else,
in bounded memory. Plain random mutation with a fixed seed, so a failure reproduces."""

from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np
import pytest

from burnish.errors import RecordError
from burnish.record import formats
from burnish.record.record import RecordMetadata
from burnish.record.tree import normalize
from burnish.tensor_data import TensorData

MUTATIONS = 150
#: Peak memory a load of a mutated file may take, beyond the file itself: a corrupt length
#: must never turn into an allocation of its claimed size.
MEMORY_BOUND = 4_000_000


def real_file(name: str) -> bytes:
    tree = normalize({
        "encoder": {
            "weight": TensorData(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)),
            "mask": TensorData(np.array([True, False, True])),
            "layers": [{"bias": TensorData(np.array([-1, 7], dtype=np.int16))},
                       {"bias": TensorData(np.array([3, 4], dtype=np.int64))}],
        },
        "half": TensorData(np.ones(3, np.float16)),
        "scale": TensorData(np.array(0.5, dtype=np.float64)),
        "empty": {},
    })
    return formats()[name].dumps(tree, RecordMetadata(user={"module": "Encoder"}))


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """One random damage: a truncation, flipped bytes, or a length field inflated (4 or 8
    bytes overwritten with a large little-endian number, or digits with a long number)."""
    out = bytearray(data)
    kind = rng.integers(4)
    if kind == 0:
        return bytes(out[: rng.integers(len(out))])
    if kind == 1:
        for _ in range(rng.integers(1, 4)):
            out[rng.integers(len(out))] = rng.integers(256)
        return bytes(out)
    if kind == 2:
        width = int(rng.choice([4, 8]))
        position = int(rng.integers(len(out) - width))
        value = int(rng.choice([2**31 - 1, 2**32 - 1, 2**40, 2**63 - 1, 10**12]))
        out[position : position + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
        return bytes(out)
    digits = [i for i, byte in enumerate(out) if chr(byte).isdigit()]
    position = digits[rng.integers(len(digits))] if digits else 0
    return bytes(out[:position] + b"99999999999" + out[position:])


def resigned(data: bytes) -> bytes:
    """A mutated binary record with a valid checksum again: damage an attacker, not a disk,
    would do, which only the checks behind the checksum catch."""
    body = data[:-32]
    return body + hashlib.blake2b(body, digest_size=32).digest()


@pytest.mark.parametrize("name", ["safetensors", "msgpack", "json", "binary"])
def test_mutated_files_load_or_raise_record_error_in_bounded_memory(name: str) -> None:
    original = real_file(name)
    loads = formats()[name].loads
    rng = np.random.default_rng(21)
    outcomes = {"loaded": 0, "refused": 0}
    tracemalloc.start()
    try:
        for _ in range(MUTATIONS):
            data = mutate(original, rng)
            if name == "binary" and len(data) > 64 and rng.integers(2):
                data = resigned(data)
            tracemalloc.reset_peak()
            try:
                loads(data)
                outcomes["loaded"] += 1
            except RecordError:
                outcomes["refused"] += 1
            peak = tracemalloc.get_traced_memory()[1]
            assert peak < MEMORY_BOUND, f"{name}: {peak} bytes to load {len(data)}"
    finally:
        tracemalloc.stop()
    assert outcomes["refused"] > MUTATIONS // 4, outcomes
