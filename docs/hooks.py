"""MkDocs hooks: one source tree of the burnish package for the API reference, its docstrings'
literal blocks as Markdown; the examples' READMEs and the benchmark results as pages of the site,
and the book's links to them rewritten to work in the site as they do in the repository."""

from __future__ import annotations

import posixpath
import re
import shutil
from pathlib import Path
from typing import Any

import griffe
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
#: Where the API reference reads the sources (mkdocs.yml's mkdocstrings ``paths``): every
#: distribution's ``src/burnish/<name>`` linked into one ``burnish`` folder, beside core's own
#: files. griffe takes a package from the first folder that has it and does not follow
#: ``pkgutil.extend_path`` into the others, as Python does.
SOURCES = ROOT / "build" / "api-sources"
#: reST's literal-block marker: a paragraph ending in ``::``, or a line of only ``::``.
LITERAL_MARKER = re.compile(r"(?<=\S)::$|^[ \t]*::\n", re.MULTILINE)
#: Pages from outside docs/, kept at their path in the repository (examples/mnist/README.md).
EXTRA_PAGES = ("bench/RESULTS.md", "examples/*/README.md")
#: An inline link: [text](target#anchor), target relative.
LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s#:]+)(?P<anchor>#[^)\s]*)?\)")


def extra_pages() -> list[str]:
    """The repository paths of the pages that come from outside docs/."""
    return sorted(str(p.relative_to(ROOT)) for pattern in EXTRA_PAGES for p in ROOT.glob(pattern))


class LiteralBlocks(griffe.Extension):
    """The docstrings are plain text read by ``help()`` too, with reST's ``::`` before an
    indented block; Markdown makes that block code by its indent alone, so the site drops the
    marker (mkdocs.yml names this class among mkdocstrings' griffe extensions)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = LITERAL_MARKER.sub(
                lambda m: ":" if m[0] == "::" else "\n", obj.docstring.value)


@event_priority(100)  # before mkdocstrings looks for the sources
def on_config(config: Any) -> Any:
    """Link the sources into ``SOURCES`` afresh (a distribution may have come or gone), and list
    the examples in the navigation."""
    package = SOURCES / "burnish"
    shutil.rmtree(SOURCES, ignore_errors=True)
    package.mkdir(parents=True)
    for src in sorted(ROOT.glob("packages/*/src/burnish")):
        # core's folder holds __init__.py and its modules; each other one, one subpackage.
        for entry in src.iterdir():
            if entry.name != "__pycache__":
                (package / entry.name).symlink_to(entry, entry.is_dir())
    # The navigation's generated sections, so that a new page or example needs no edit here.
    for section in config.nav or []:
        if isinstance(section, dict) and "The book" in section:
            section["The book"] = book_pages()
        if isinstance(section, dict) and "Examples" in section:
            section["Examples"] = [{path.split("/")[1]: path} for path in extra_pages()
                                   if path.startswith("examples/")]
    return config


def book_pages() -> list[str | dict[str, str]]:
    """The book's navigation: docs/index.md, then the pages its "Pages" list links to, in that
    order, then those it links to elsewhere. A page the front page does not link to is left out
    (and the strict build says so). Titled by their link's text where it is a title (capital
    first), else by their own heading."""
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    start = index.find("\n## Pages\n")
    end = index.find("\n## ", start + 1)
    pages: list[str | dict[str, str]] = ["index.md"]
    seen = {"index.md"}
    for text in (index[start:end], index):
        for link in LINK.finditer(text):
            target = link["target"]
            if target.endswith(".md") and "/" not in target and target not in seen:
                seen.add(target)
                title = link["text"].strip("`")
                pages.append({title: target} if title[:1].isupper() else target)
    return pages


def on_files(files: Files, config: Any) -> Files:
    for path in extra_pages():
        files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Links are written relative to each file's place in the repository; in the site, docs/ is
    the root and the extra pages sit beside it. A link to a file of the repository that is not a
    page of the site (a source file, a folder) keeps its text and loses its target."""
    source = page.file.src_uri
    here = source if source in extra_pages() else "docs/" + source
    in_site = set(extra_pages())

    def rewrite(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(here), match["target"]))
        if target.startswith("docs/"):
            target = target.removeprefix("docs/")
        elif target not in in_site:
            # Outside the site: plain text where the file exists, untouched (so that the strict
            # build reports it) where it does not.
            return match["text"] if (ROOT / target).exists() else match[0]
        link = posixpath.relpath(target, posixpath.dirname(source) or ".")
        return f"[{match['text']}]({link}{match['anchor'] or ''})"

    return LINK.sub(rewrite, markdown)
