"""Every ```python block of the docs and the READMEs runs, so the documentation cannot rot."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(ROOT.glob("packages/*/README.md")),
    *sorted(ROOT.glob("examples/*/README.md")),
]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: A page whose blocks need backends with drivers says so: ``<!-- requires: wgpu, rocm -->``.
REQUIRES = re.compile(r"^<!-- requires: ([\w, +-]+) -->$", re.MULTILINE)


def blocks(page: Path) -> list[tuple[int, str]]:
    """(first line number, source) of each python block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def run_page(page: Path) -> None:
    """Run a page's blocks in order in one namespace, as a reader would."""
    namespace = {"__name__": "__main__"}
    for line, source in blocks(page):
        # Padding with blank lines makes tracebacks point at the line of the page.
        exec(compile("\n" * (line - 1) + source, str(page), "exec"), namespace)


def test_the_book_has_runnable_examples():
    assert sum(len(blocks(page)) for page in PAGES) > 0


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page, run, needs_backends):
    for found in REQUIRES.finditer(page.read_text(encoding="utf-8")):
        needs_backends(*(name.strip() for name in found.group(1).split(",")))
    # A process per page: what one page sets up (a default backend, a plugin) cannot leak.
    run(sys.executable, __file__, page, cwd=ROOT)


if __name__ == "__main__":
    run_page(Path(sys.argv[1]))
