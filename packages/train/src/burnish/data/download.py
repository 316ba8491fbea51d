"""Downloads into burnish's cache: mirrors tried in turn, checksums, progress, atomic writes."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

from .errors import ChecksumError, DataError

CHUNK = 1 << 16

# The digests a published checksum may be given in, with the names errors show.
DIGESTS = {"sha256": "SHA-256", "md5": "MD5"}


def cache_dir(name: str) -> Path:
    """The cache folder of dataset ``name``: ``$BURNISH_CACHE/name`` when the variable is set,
    else ``~/.cache/burnish/name`` (not created here)."""
    root = os.environ.get("BURNISH_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "burnish"
    return base / name


def fetch(url: str, description: str) -> bytes:
    """The bytes at ``url`` (http, https or file), with a progress bar on stderr."""
    with urlopen(url, timeout=30) as response:
        total = int(response.headers.get("Content-Length") or 0)
        buffer = io.BytesIO()
        with ProgressBar(description, total) as advance:
            while chunk := response.read(CHUNK):
                buffer.write(chunk)
                advance(len(chunk))
    return buffer.getvalue()


class ProgressBar:
    """A context manager giving ``advance(bytes)``: rich's bar when rich is installed, else a
    line per tenth of the download (or per megabyte when the size is unknown)."""

    def __init__(self, description: str, total: int):
        self.description = description
        self.total = total
        self.done = 0
        self.printed = 0
        self.rich: Any = None  # rich's Progress while a bar is shown

    def __enter__(self) -> Callable[[int], None]:
        print(f"downloading {self.description}", file=sys.stderr)
        try:
            from rich.progress import DownloadColumn, Progress, TransferSpeedColumn
        except ImportError:
            return self.advance_plain
        columns = [*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn()]
        progress = self.rich = Progress(*columns, transient=True)
        progress.start()
        task = progress.add_task(self.description, total=self.total or None)
        return lambda size: progress.advance(task, size)

    def advance_plain(self, size: int) -> None:
        self.done += size
        step = self.total // 10 if self.total else 1 << 20
        if step and self.done - self.printed >= step:
            self.printed = self.done
            shown = f"{self.done * 100 // self.total}%" if self.total else f"{self.done} bytes"
            print(f"  {self.description}: {shown}", file=sys.stderr)

    def __exit__(self, *exc_info: object) -> None:
        if self.rich is not None:
            self.rich.stop()


def download_verified(
    urls: list[str],
    destination: Path,
    checksum: str,
    decompress: bool = False,
    algorithm: str = "sha256",
) -> Path:
    """Download the first of ``urls`` that answers into ``destination``, gunzipped when
    ``decompress``, and keep it only if the digest of what is written equals ``checksum``.

    ``algorithm`` names the digest: "sha256" (the default) or "md5". An MD5 sum only guards
    against a damaged or truncated download, not against a file crafted to match: use it only
    where the data's publishers give nothing stronger. The file appears whole or not at all
    (written beside it, then renamed). Raises ``ValueError`` for another algorithm,
    ``ChecksumError`` on a mismatch and ``DataError`` when no url could be read, or at once,
    touching no network, when ``BURNISH_OFFLINE`` is set to anything but "" or "0"."""
    if algorithm not in DIGESTS:
        raise ValueError(f"checksums are {' or '.join(sorted(DIGESTS))}, not {algorithm!r}")
    if offline():
        raise DataError(
            f"not downloading {destination.name}: BURNISH_OFFLINE is set "
            f"({os.environ['BURNISH_OFFLINE']!r}). Pass root= a folder that holds the files, "
            "or unset BURNISH_OFFLINE"
        )
    failures = []
    for url in urls:
        try:
            data = fetch(url, destination.name)
            if decompress:
                data = gzip.decompress(data)
        except (URLError, OSError, EOFError, zlib.error) as error:
            failures.append(f"{url}: {getattr(error, 'reason', error)}")
            continue
        digest = hashlib.new(algorithm, data).hexdigest()
        if digest != checksum.lower():
            raise ChecksumError(
                f"{destination.name} from {url} has {DIGESTS[algorithm]} {digest}, but the "
                f"published checksum is {checksum}; the file was not kept"
            )
        write_atomic(destination, data)
        return destination
    raise DataError(
        f"could not download {destination.name} (offline?): "
        + "; ".join(failures)
        + ". Pass root= a folder that holds the files, or retry with a network connection"
    )


def offline() -> bool:
    """Whether ``BURNISH_OFFLINE`` forbids downloads: set to anything but "" or "0". Where the
    network drops connections instead of refusing them, each mirror would otherwise cost its
    whole timeout before the download gives up."""
    return os.environ.get("BURNISH_OFFLINE", "") not in ("", "0")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
