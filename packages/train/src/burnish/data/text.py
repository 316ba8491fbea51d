"""Text classification datasets: AG News and DBpedia-14, read from their CSV files, downloaded
into the cache (plain files or a .tgz archive) and verified."""

from __future__ import annotations

import csv
import html
import os
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .dataset import DatasetBase, check_index
from .download import CHUNK, cache_dir, download_verified, offline
from .errors import ChecksumError, DataError

SPLITS = ("train", "test")

# The largest CSV file taken out of an archive (DBpedia's train.csv is about 170 MB): a damaged or
# hostile archive cannot fill the disk.
MAX_MEMBER_BYTES = 1 << 30


@dataclass(frozen=True)
class TextItem:
    """One labelled text: ``text`` and its class ``label``, 0-based (an index in ``classes``)."""

    text: str
    label: int


@dataclass(frozen=True)
class CsvFile:
    """A split's CSV file published on its own at ``url``, with its MD5 sum."""

    split: str
    url: str
    md5: str


@dataclass(frozen=True)
class CsvArchive:
    """A .tgz archive at ``url`` (with its MD5 sum) holding ``folder/train.csv`` and
    ``folder/test.csv``."""

    url: str
    md5: str
    folder: str


class TextClassificationDataset(DatasetBase):
    """The rows of a text classification CSV file in the format of Zhang, Zhao and LeCun's
    datasets (2015): no header; a class index from 1, then text columns (a title, then a
    description or content), joined by a space. Items are ``TextItem(text, label)``, with
    ``label`` 0-based: ``classes[label]`` is its name.

    Subclasses give ``name`` (the cache folder), ``title``, ``classes``, ``columns`` (the names of
    the text columns, for error messages) and ``sources`` (tried in turn to download)."""

    name: str
    title: str
    classes: list[str]
    columns: tuple[str, ...]
    sources: list[CsvFile | CsvArchive]

    def __init__(self, split: str = "train", root: str | Path | None = None, download: bool = True):
        if split not in SPLITS:
            raise ValueError(f"{self.title} has the splits {list(SPLITS)}, not {split!r}")
        self.split = split
        if root is not None:
            self.path = self.find_file(Path(root), split)
        else:
            self.path = self.cached_file(split, download)
        self.texts, self.labels = read_text_csv(self.path, len(self.classes), self.columns)

    def __len__(self) -> int:
        return len(self.texts)

    def get(self, index: int) -> TextItem:
        index = check_index(index, len(self))
        return TextItem(text=self.texts[index], label=int(self.labels[index]))

    def find_file(self, root: Path, split: str) -> Path:
        """``root/<split>.csv``, or the same inside the folder the published archive unpacks to
        (``root/ag_news_csv/train.csv``); DataError naming both when neither exists."""
        candidates = [root / f"{split}.csv"]
        candidates += [
            root / source.folder / f"{split}.csv"
            for source in self.sources
            if isinstance(source, CsvArchive)
        ]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        raise DataError(
            f"{self.title}'s {split}.csv is not in {root} (looked for "
            + " and ".join(str(c) for c in candidates)
            + f"); the folder should hold {self.title}'s train.csv and test.csv"
        )

    def cached_file(self, split: str, download: bool) -> Path:
        """``<split>.csv`` in the dataset's cache folder, downloaded there when missing."""
        folder = cache_dir(self.name)
        path = folder / f"{split}.csv"
        if path.is_file():
            return path
        if not download:
            raise DataError(
                f"{path.name} is not in the cache folder {folder} and download=False; pass "
                f"root= a folder that holds {self.title}'s train.csv and test.csv"
            )
        failures = []
        for source in self.sources:
            try:
                if isinstance(source, CsvArchive):
                    fetch_archive(source, folder)
                elif source.split == split:
                    download_verified([source.url], path, source.md5, algorithm="md5")
                else:
                    continue
            except ChecksumError:
                raise
            except DataError as error:
                if offline():
                    raise
                failures.append(str(error))
                continue
            if path.is_file():
                return path
        raise DataError(
            f"could not download {self.title}'s {path.name}: "
            + "; ".join(failures or ["no source publishes it"])
        )


class AgNewsDataset(TextClassificationDataset):
    """AG News (Zhang, Zhao and LeCun, 2015): news articles in 4 classes, 120,000 to train and
    7,600 to test. ``text`` is the title, a space, and the description.

    With ``root``, ``train.csv`` / ``test.csv`` are read from that folder (or from its
    ``ag_news_csv`` subfolder) and nothing is downloaded. Without it they come from the cache
    folder (``$BURNISH_CACHE/ag_news`` or ``~/.cache/burnish/ag_news``), downloaded there first
    when missing and ``download`` is true (not when ``BURNISH_OFFLINE`` is set), each checked
    against its published MD5 sum. Raises DataError when a file is missing, malformed or cannot
    be downloaded, ChecksumError when a download does not match, ValueError for another split.
    """

    name = "ag_news"
    title = "AG News"
    classes = ["World", "Sports", "Business", "Sci/Tech"]
    columns = ("title", "description")
    sources = [
        # URLs and MD5 sums of the CSV files as torchtext's datasets/ag_news.py lists them.
        CsvFile(
            "train",
            "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/train.csv",
            "b1a00f826fdfbd249f79597b59e1dc12",
        ),
        CsvFile(
            "test",
            "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/test.csv",
            "d52ea96a97a2d943681189a97654912d",
        ),
        # fast.ai's copy of the original archive; MD5 as fastai's fastai/data/checks.txt lists it
        # (11,784,419 bytes).
        CsvArchive(
            "https://s3.amazonaws.com/fast-ai-nlp/ag_news_csv.tgz",
            "b86f328f4dbd072486591cb7a5644dcd",
            "ag_news_csv",
        ),
    ]


class DbPediaDataset(TextClassificationDataset):
    """DBpedia-14 (Zhang, Zhao and LeCun, 2015): Wikipedia abstracts of 14 kinds of thing,
    560,000 to train and 70,000 to test. ``text`` is the title, a space, and the content.

    ``root``, ``download``, the cache (``$BURNISH_CACHE/dbpedia``) and the errors are as for
    ``AgNewsDataset``; the download is fast.ai's archive of the two files (68 MB, MD5-checked),
    unpacked into the cache and then removed."""

    name = "dbpedia"
    title = "DBpedia"
    classes = [
        "Company",
        "EducationalInstitution",
        "Artist",
        "Athlete",
        "OfficeHolder",
        "MeanOfTransportation",
        "Building",
        "NaturalPlace",
        "Village",
        "Animal",
        "Plant",
        "Album",
        "Film",
        "WrittenWork",
    ]
    columns = ("title", "content")
    sources = [
        # MD5 as fastai's fastai/data/checks.txt lists it (68,341,743 bytes).
        CsvArchive(
            "https://s3.amazonaws.com/fast-ai-nlp/dbpedia_csv.tgz",
            "239c7837b9e79db34486f3de6a00e38e",
            "dbpedia_csv",
        ),
    ]


def fetch_archive(source: CsvArchive, folder: Path) -> None:
    """Download ``source`` into ``folder``, check it, take ``train.csv`` and ``test.csv`` out of
    it into ``folder`` and delete it. Only those two regular files are read, each at most
    ``MAX_MEMBER_BYTES``, and written under names chosen here: no path in the archive is used."""
    archive = folder / source.url.rsplit("/", 1)[-1]
    download_verified([source.url], archive, source.md5, algorithm="md5")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for split in SPLITS:
                member_name = f"{source.folder}/{split}.csv"
                try:
                    member = tar.getmember(member_name)
                except KeyError:
                    raise DataError(f"{archive} holds no {member_name}") from None
                if not member.isfile():
                    raise DataError(f"{member_name} in {archive} is not a regular file")
                if member.size > MAX_MEMBER_BYTES:
                    raise DataError(
                        f"{member_name} in {archive} is {member.size} bytes, more than the "
                        f"{MAX_MEMBER_BYTES} a CSV file of it may have"
                    )
                if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
                    tarfile.data_filter(member, str(folder))  # raises what extraction would
                extract_member(tar, member, folder / f"{split}.csv")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise DataError(f"{archive} (from {source.url}) could not be unpacked: {error}") from error
    finally:
        archive.unlink(missing_ok=True)


def extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    """Copy ``member`` of ``tar`` to ``path``, which appears whole or not at all."""
    source = tar.extractfile(member)
    if source is None:
        raise DataError(f"{member.name} in {tar.name} has no data")  # type: ignore[str-bytes-safe]
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as file, source:
            while chunk := source.read(CHUNK):
                file.write(chunk)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_text_csv(
    path: Path, class_count: int, columns: tuple[str, ...]
) -> tuple[list[str], np.ndarray]:
    """The texts and 0-based labels of the CSV file at ``path``: rows of a class index from 1 to
    ``class_count``, then the ``columns``, joined by a space and cleaned (``clean_text``).
    DataError naming the file, the line and the problem for a malformed row."""
    texts: list[str] = []
    labels: list[int] = []
    fields = 1 + len(columns)
    line = 1
    try:
        with path.open(newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            for row in reader:
                if row:
                    label = parse_row(row, fields, class_count, columns)
                    texts.append(clean_text(" ".join(row[1:])))
                    labels.append(label)
                line = reader.line_num + 1
    except ValueError as error:  # csv.Error and UnicodeDecodeError are ValueErrors
        raise DataError(f"{path}, line {line}: {error}") from None
    except OSError as error:
        raise DataError(f"{path} could not be read: {error}") from error
    return texts, np.array(labels, dtype=np.int64)


def parse_row(row: list[str], fields: int, class_count: int, columns: tuple[str, ...]) -> int:
    """The 0-based label of ``row``; ValueError saying what is wrong with it."""
    if len(row) != fields:
        raise ValueError(
            f"{len(row)} fields, but rows have {fields} (class index, {', '.join(columns)})"
        )
    try:
        label = int(row[0])
    except ValueError:
        raise ValueError(f"the class index {row[0]!r} is not a whole number") from None
    if not 1 <= label <= class_count:
        raise ValueError(f"the class index {label} is outside 1-{class_count}")
    return label - 1


# "#36;" where the original had "&#36;" ("$"): the published files lost the ampersands.
BARE_ENTITY = re.compile(r"(?<!&)#(\d{1,7});")


def clean_text(text: str) -> str:
    """``text`` with the escapes of the published files undone: HTML entities ("&lt;", "&amp;",
    and numeric ones missing their "&", "#39;" for "'"), backslashes (which stand for the
    line breaks of the original) made spaces, and runs of whitespace made one space."""
    text = BARE_ENTITY.sub(lambda match: f"&#{match[1]};", text)
    text = html.unescape(text).replace("\\", " ")
    return " ".join(text.split())
