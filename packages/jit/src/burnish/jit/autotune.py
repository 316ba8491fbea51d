"""Autotune: for a kernel with tunable parameters, time the candidates once per shape class and
device, keep the fastest, and remember it on disk so the next process does not time again.

The cache is a JSON file per device under ``$BURNISH_CACHE_DIR/autotune/`` (default
``~/.cache/burnish``). ``BURNISH_AUTOTUNE=0`` (or ``set_enabled(False)``) turns timing off for
cold starts: the first candidate, the default, is used unless the cache already has a choice.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_enabled: bool | None = None
_lock = threading.Lock()
_memory: dict[str, dict[str, str]] = {}
#: Timings taken in this process (key -> candidate -> seconds), for tests and curious users.
measurements: dict[str, dict[str, float]] = {}


def set_enabled(enabled: bool | None) -> None:
    """Turn timing on or off for this process (``None``: follow ``BURNISH_AUTOTUNE`` again)."""
    global _enabled
    _enabled = enabled


def enabled() -> bool:
    if _enabled is not None:
        return _enabled
    return os.environ.get("BURNISH_AUTOTUNE", "1").lower() not in ("0", "false", "off", "no")


def cache_dir() -> Path:
    root = os.environ.get("BURNISH_CACHE_DIR") or Path.home() / ".cache" / "burnish"
    return Path(root) / "autotune"


def _cache_file(device: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-")[:60]
    digest = hashlib.sha256(device.encode()).hexdigest()[:12]
    return cache_dir() / f"{slug}-{digest}.json"


def _load(device: str) -> dict[str, str]:
    table = _memory.get(device)
    if table is None:
        try:
            table = json.loads(_cache_file(device).read_text())
            if not isinstance(table, dict):
                table = {}
        except (OSError, ValueError):
            table = {}
        _memory[device] = table
    return table


def _save(device: str, table: dict[str, str]) -> None:
    path = _cache_file(device)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Atomic: a concurrent reader sees the old file or the new one, never half of one.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".autotune-")
        with os.fdopen(fd, "w") as f:
            json.dump(table, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home still runs, it just times again next process


def choose(device: str, key: str, candidates: Sequence[str], run: Callable[[str], Any],
           sync: Callable[[], None], repeats: int = 3) -> str:
    """The fastest of ``candidates`` for ``key`` (a kernel and its shape class) on ``device``.

    ``run(candidate)`` enqueues one execution, ``sync()`` waits for the device. A cached choice
    is returned at once; otherwise, when tuning is enabled, each candidate runs once to warm up
    (compile) and then ``repeats`` times under the clock.
    """
    with _lock:
        table = _load(device)
        cached = table.get(key)
    if cached in candidates:
        return cached
    if not enabled() or len(candidates) == 1:
        return candidates[0]
    timings: dict[str, float] = {}
    for name in candidates:
        try:
            run(name)
            sync()
        except Exception:  # a candidate the device cannot run (too much workgroup memory...)
            continue
        start = time.perf_counter()
        for _ in range(repeats):
            run(name)
        sync()
        timings[name] = (time.perf_counter() - start) / repeats
    if not timings:
        return candidates[0]
    best = min(timings, key=timings.get)
    measurements[f"{device}|{key}"] = timings
    with _lock:
        table = _load(device)
        table[key] = best
        _save(device, table)
    return best


@functools.lru_cache(maxsize=4096)
def shape_class(*sizes: int) -> str:
    """Sizes rounded up to powers of two: shapes of one class share a tuned choice."""
    return "x".join(str(1 << max(int(s) - 1, 0).bit_length()) for s in sizes)
