"""Autotune: the fastest candidate is kept per device and shape class, on disk, so the next
process does not time again; it can be turned off for cold starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from burnish.jit import autotune

# A process that tunes one key and says what it chose and whether it timed anything.
TUNE = """
import json, time
from burnish.jit import autotune
ran = []
def run(name):
    ran.append(name)
    time.sleep({"slow": 0.02, "fast": 0.001, "medium": 0.01}[name])
choice = autotune.choose("device A", "matmul|64x64", ["slow", "fast", "medium"], run, lambda: None)
print(json.dumps({"choice": choice, "ran": ran}))
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BURNISH_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("BURNISH_AUTOTUNE", raising=False)
    autotune.set_enabled(None)
    autotune._memory.clear()
    yield tmp_path
    autotune.set_enabled(None)
    autotune._memory.clear()


def _tune_in_a_new_process(env_extra: dict[str, str] | None = None) -> dict:
    env = {**os.environ, **(env_extra or {})}
    out = subprocess.run([sys.executable, "-c", TUNE], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_second_process_reads_the_choice_and_times_nothing(cache):
    first = _tune_in_a_new_process()
    assert first["choice"] == "fast"
    assert set(first["ran"]) == {"slow", "fast", "medium"}
    files = list((cache / "autotune").glob("*.json"))
    assert len(files) == 1 and "device-A" in files[0].name
    assert json.loads(files[0].read_text()) == {"matmul|64x64": "fast"}
    second = _tune_in_a_new_process()
    assert second == {"choice": "fast", "ran": []}


def test_turned_off_it_takes_the_default_without_timing(cache):
    assert _tune_in_a_new_process({"BURNISH_AUTOTUNE": "0"}) == {"choice": "slow", "ran": []}
    assert not (cache / "autotune").exists()  # nothing was measured, so nothing is written
    ran = []
    autotune.set_enabled(False)
    assert autotune.choose("device B", "k", ["a", "b"], ran.append, lambda: None) == "a"
    assert ran == []


def test_turned_off_a_cached_choice_still_applies(cache):
    _tune_in_a_new_process()
    assert _tune_in_a_new_process({"BURNISH_AUTOTUNE": "0"})["choice"] == "fast"


def test_candidates_that_fail_are_left_out(cache):
    def run(name):
        if name == "too-big":
            raise RuntimeError("workgroup memory exceeded")
        time.sleep(0.001)

    assert autotune.choose("device C", "k", ["too-big", "ok"], run, lambda: None) == "ok"
    assert set(autotune.measurements["device C|k"]) == {"ok"}


def test_shape_classes_round_to_powers_of_two():
    assert autotune.shape_class(4096, 4096) == "4096x4096"
    assert autotune.shape_class(3000, 1, 17) == "4096x1x32"
    assert autotune.shape_class(3000, 4000) == autotune.shape_class(2049, 4096)


def test_an_unwritable_cache_still_tunes(cache, monkeypatch):
    (cache / "autotune").write_text("a file where the folder should be")
    calls = []
    choice = autotune.choose("device D", "k", ["a", "b"], calls.append, lambda: None)
    assert choice in ("a", "b") and calls
