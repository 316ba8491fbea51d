"""Checkpoints of a run: model, optimizer, schedule and position, with a JSON manifest."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from burnish.record.atomic import atomic_write, remove_stale_temporaries

MANIFEST = "manifest.json"


@dataclass
class CheckpointInfo:
    """One checkpoint: its folder name, the position it resumes from and the epoch's metrics.

    ``epoch`` is the epoch it was taken in (from 1), ``iteration`` the number of that epoch's
    training batches already done, ``epoch_done`` whether the epoch (validation included) ended,
    ``step`` the number of optimizer steps so far.
    """

    name: str
    epoch: int
    iteration: int
    step: int
    epoch_done: bool
    metrics: dict[str, float] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


class Checkpointer:
    """Writes checkpoints under ``directory``, keeps the ``keep_last`` newest and the best.

    Each checkpoint is a folder of records (``model.safetensors``, ``optimizer.safetensors``,
    ``scheduler.safetensors``) written through ``burnish.record`` (atomic per file); the folder
    counts only once ``manifest.json`` names it, and the manifest is replaced atomically, so an
    interruption at any moment leaves the previous checkpoints usable. ``best_by`` names a metric
    (``"valid/loss"``); ``higher_is_better`` says which way is better.

    Opening a directory removes the temporary files that writes killed midway left in it and in
    its checkpoint folders (``burnish.record.atomic.remove_stale_temporaries``: only files of
    that naming whose writer is gone); ``removed_temporaries`` lists them.
    """

    def __init__(
        self,
        directory: str | Path,
        keep_last: int = 2,
        best_by: str | None = None,
        higher_is_better: bool = False,
    ):
        if keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {keep_last}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.best_by = best_by
        self.higher_is_better = higher_is_better
        self.removed_temporaries = remove_stale_temporaries(self.directory)
        if self.directory.is_dir():
            for folder in self.directory.iterdir():
                if folder.is_dir() and not folder.is_symlink():
                    self.removed_temporaries += remove_stale_temporaries(folder)

    # -- manifest --------------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        """The manifest: ``{"checkpoints": [info...], "best": name or None}`` (empty if none)."""
        path = self.directory / MANIFEST
        if not path.exists():
            return {"checkpoints": [], "best": None}
        return json.loads(path.read_text())

    def checkpoints(self) -> list[CheckpointInfo]:
        """The checkpoints kept, oldest first."""
        return [CheckpointInfo(**entry) for entry in self.manifest()["checkpoints"]]

    def latest(self) -> CheckpointInfo | None:
        """The newest checkpoint, or None."""
        found = self.checkpoints()
        return found[-1] if found else None

    def best(self) -> CheckpointInfo | None:
        """The checkpoint with the best ``best_by`` value, or None."""
        name = self.manifest()["best"]
        return next((info for info in self.checkpoints() if info.name == name), None)

    def path(self, info: CheckpointInfo) -> Path:
        """The folder holding a checkpoint's records."""
        return self.directory / info.name

    # -- writing ---------------------------------------------------------------------------------

    def save(self, info: CheckpointInfo, model: Any, optimizer: Any, scheduler: Any) -> Path:
        """Write a checkpoint, name it in the manifest, then drop the ones no longer kept."""
        folder = self.directory / info.name
        folder.mkdir(parents=True, exist_ok=True)
        model.save(folder / "model.safetensors")
        optimizer.save(folder / "optimizer.safetensors")
        if scheduler is not None:
            scheduler.save(folder / "scheduler.safetensors")
        manifest = self.manifest()
        entries = [entry for entry in manifest["checkpoints"] if entry["name"] != info.name]
        entries.append(asdict(info))
        best = manifest["best"]
        if self.best_by is not None and self.best_by in info.metrics:
            best_entry = next((entry for entry in entries if entry["name"] == best), None)
            if best_entry is None or self._better(
                info.metrics[self.best_by], best_entry["metrics"].get(self.best_by)
            ):
                best = info.name
        kept = entries[-self.keep_last :]
        if best is not None and all(entry["name"] != best for entry in kept):
            kept = [entry for entry in entries if entry["name"] == best] + kept
        self._write_manifest({"checkpoints": kept, "best": best})
        kept_names = {entry["name"] for entry in kept}
        for entry in entries:
            if entry["name"] not in kept_names:
                shutil.rmtree(self.directory / entry["name"], ignore_errors=True)
        return folder

    def _better(self, value: float, than: float | None) -> bool:
        if than is None or than != than:  # nan
            return True
        return value > than if self.higher_is_better else value < than

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write(self.directory / MANIFEST, json.dumps(manifest, indent=1).encode())

    # -- reading ---------------------------------------------------------------------------------

    def load(self, info: CheckpointInfo, model: Any, optimizer: Any, scheduler: Any) -> Any:
        """Load a checkpoint's optimizer and schedule state in place; return the loaded model."""
        folder = self.path(info)
        optimizer.load(folder / "optimizer.safetensors")
        if scheduler is not None and (folder / "scheduler.safetensors").exists():
            scheduler.load(folder / "scheduler.safetensors")
        return model.load(folder / "model.safetensors")
