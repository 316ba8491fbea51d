"""The block a CUDA launch's parameters are read from, checked by reading it back the way
``cuLaunchKernel`` does (through the pointer table): runs without a GPU."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from burnish.cuda.runtime import CudaHandle, LaunchParameters
from burnish.jit.codegen.c import CUDA_INFO_WORDS


def _read(table: int, buffers: int) -> tuple[list[int], list[int]]:
    """The buffer addresses and the info words a launch with ``table`` would pass."""
    entries = list((ctypes.c_uint64 * (buffers + 1)).from_address(table))
    addresses = [ctypes.c_uint64.from_address(entry).value for entry in entries[:-1]]
    return addresses, list((ctypes.c_int32 * CUDA_INFO_WORDS).from_address(entries[-1]))


def _expect(info: list[int]) -> list[int]:
    return info + [0] * (CUDA_INFO_WORDS - len(info))


def test_addresses_and_info_are_where_the_table_points():
    parameters = LaunchParameters(buffers=2)
    pointers = [1 << 40, (2 << 40) + 256, 2**64 - 8]
    # More buffers than the block was made for: it grows, the table follows.
    addresses, words = _read(parameters.fill(pointers, np.array([7, -8, 9], np.int32)), 3)
    assert addresses == pointers and words == _expect([7, -8, 9])
    # A shorter launch leaves no stale words behind (the struct is read whole).
    addresses, words = _read(parameters.fill([5], np.array([4], np.int32)), 1)
    assert addresses == [5] and words == _expect([4])


def test_the_same_info_array_again_is_not_copied_but_still_read():
    parameters = LaunchParameters()
    plan_info, other = np.array([3, 4], np.int32), np.array([9, 9, 9], np.int32)
    assert _read(parameters.fill([1], plan_info), 1)[1] == _expect([3, 4])
    assert _read(parameters.fill([2], plan_info), 1) == ([2], _expect([3, 4]))
    # Another launch between two of the same op: the block holds the other's words, so the
    # op's are written again.
    assert _read(parameters.fill([3], other), 1)[1] == _expect([9, 9, 9])
    assert _read(parameters.fill([4], plan_info), 1) == ([4], _expect([3, 4]))


@pytest.mark.parametrize("info", [[1, 2, 3], np.arange(3, dtype=np.int64),
                                  np.arange(6, dtype=np.int32)[::2]])
def test_info_that_is_not_a_plain_int32_array_is_converted(info):
    parameters = LaunchParameters()
    _, words = _read(parameters.fill([1], info), 1)
    assert words == _expect([int(v) for v in info])


def test_threads_fill_their_own_blocks():
    # The runtime gives each launching thread its own block; two blocks never share memory.
    blocks = []

    def make():
        blocks.append(LaunchParameters())

    threads = [threading.Thread(target=make) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, second = blocks
    a = first.fill([11], np.array([1], np.int32))
    b = second.fill([22], np.array([2], np.int32))
    assert _read(a, 1) == ([11], _expect([1])) and _read(b, 1) == ([22], _expect([2]))


def test_pool_handles_are_their_addresses_and_hold_the_allocation():
    class Allocation:  # what CuPy's allocator returns, as far as a handle uses it
        ptr = 0x7F00_0000_1000

    allocation = Allocation()
    handle = CudaHandle(allocation)
    assert handle == handle.ptr == 0x7F00_0000_1000 and type(handle.ptr) is int
    assert handle.memory is allocation
    parameters = LaunchParameters()
    addresses, _ = _read(parameters.fill([handle], np.array([1], np.int32)), 1)
    assert addresses == [0x7F00_0000_1000]


def test_more_info_words_than_a_launch_carries_is_refused_by_name():
    parameters = LaunchParameters()
    with pytest.raises(ValueError, match=f"{CUDA_INFO_WORDS + 1} words, more than the "
                                         f"{CUDA_INFO_WORDS}"):
        parameters.fill([1], np.zeros(CUDA_INFO_WORDS + 1, np.int32))
