"""AG News and DBpedia: parsing their CSV files, errors naming file and line, downloads (plain
files and a .tgz archive, MD5-checked) from a local mirror, offline behaviour."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from urllib.error import URLError

import pytest

from burnish.data import AgNewsDataset, ChecksumError, DataError, DbPediaDataset, TextItem
from burnish.data import download as download_module
from burnish.data import text as text_module
from burnish.data.download import download_verified

AG_TRAIN = (
    '"3","Wall St. Bears Claw Back (Reuters)","Reuters - Short-sellers, Wall Street\'s '
    'dwindling\\band of ultra-cynics, are seeing green again. #36;50 &lt;b&gt;"\n'
    '"2","Cup final","A ""great"" game,\nwon late"\n'
    "1,Summit,Leaders meet\n"
)
AG_TEST = '"4","New chip","Faster and cooler"\n'


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_ag_news_rows_become_cleaned_text_items(tmp_path):
    write(tmp_path, "train.csv", AG_TRAIN)
    dataset = AgNewsDataset("train", root=tmp_path)
    assert len(dataset) == 3
    assert dataset[0] == TextItem(
        "Wall St. Bears Claw Back (Reuters) Reuters - Short-sellers, Wall Street's dwindling "
        "band of ultra-cynics, are seeing green again. $50 <b>",
        2,
    )
    assert dataset[1] == TextItem('Cup final A "great" game, won late', 1)
    assert dataset[-1].label == 0
    assert [dataset.classes[item.label] for item in dataset] == ["Business", "Sports", "World"]
    with pytest.raises(AttributeError):
        dataset[0].label = 1  # items are frozen


def test_the_archive_folder_inside_root_is_found(tmp_path):
    write(tmp_path / "ag_news_csv", "test.csv", AG_TEST)
    assert AgNewsDataset("test", root=tmp_path)[0] == TextItem("New chip Faster and cooler", 3)


def test_dbpedia_has_fourteen_classes(tmp_path):
    write(tmp_path, "test.csv", '14,"Moby-Dick","A novel by Herman Melville."\n1,Acme,A firm.\n')
    dataset = DbPediaDataset("test", root=tmp_path)
    assert len(DbPediaDataset.classes) == 14
    assert [dataset.classes[item.label] for item in dataset] == ["WrittenWork", "Company"]
    write(tmp_path, "train.csv", "15,Title,Content\n")
    with pytest.raises(DataError, match=r"train\.csv, line 1: the class index 15 is outside 1-14"):
        DbPediaDataset("train", root=tmp_path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('1,a,b\n2,"only two"\n', r"line 2: 2 fields, but rows have 3 \(class index, title, desc"),
        ("1,a,b\nsport,a,b\n", r"line 2: the class index 'sport' is not a whole number"),
        ('1,"a\nb",c\n5,a,b\n', r"line 3: the class index 5 is outside 1-4"),
        ("1,a,b\n0,a,b\n", r"line 2: the class index 0 is outside 1-4"),
    ],
)
def test_a_bad_row_is_named_with_its_file_and_line(tmp_path, text, problem):
    path = write(tmp_path, "train.csv", text)
    with pytest.raises(DataError, match=problem) as error:
        AgNewsDataset("train", root=tmp_path)
    assert str(path) in str(error.value)


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    (tmp_path / "test.csv").write_bytes(b'1,a,b\n2,"caf\xe9",b\n')
    with pytest.raises(DataError, match=r"test\.csv, line \d+: .*utf-8"):
        AgNewsDataset("test", root=tmp_path)


def test_a_missing_file_and_a_bad_split_are_named(tmp_path):
    with pytest.raises(DataError, match=r"AG News's test\.csv is not in .*train\.csv and test"):
        AgNewsDataset("test", root=tmp_path)
    with pytest.raises(ValueError, match=r"\['train', 'test'\], not 'valid'"):
        AgNewsDataset("valid", root=tmp_path)


def no_network(*args, **kwargs):
    raise AssertionError("nothing may be downloaded here")


def test_without_download_a_missing_file_says_to_pass_root(tmp_path, monkeypatch):
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path))
    monkeypatch.setattr(download_module, "urlopen", no_network)
    with pytest.raises(DataError) as error:
        AgNewsDataset("train", download=False)
    message = str(error.value)
    assert "train.csv is not in the cache folder" in message
    assert str(tmp_path / "ag_news") in message
    assert "download=False" in message and "root=" in message


def test_offline_nothing_is_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path))
    monkeypatch.setenv("BURNISH_OFFLINE", "1")
    monkeypatch.setattr(download_module, "urlopen", no_network)
    with pytest.raises(DataError, match="BURNISH_OFFLINE is set"):
        DbPediaDataset("test")


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def tgz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_plain_files_download_into_the_cache_once(tmp_path, monkeypatch):
    mirror = write(tmp_path / "mirror", "test.csv", AG_TEST)
    source = text_module.CsvFile("test", mirror.as_uri(), md5(mirror.read_bytes()))
    monkeypatch.setattr(AgNewsDataset, "sources", [source])
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    assert AgNewsDataset("test")[0].label == 3
    assert (tmp_path / "cache" / "ag_news" / "test.csv").read_text() == AG_TEST
    monkeypatch.setattr(download_module, "urlopen", no_network)
    assert len(AgNewsDataset("test")) == 1  # from the cache


def test_an_archive_is_unpacked_into_the_cache_and_removed(tmp_path, monkeypatch):
    data = tgz({"dbpedia_csv/train.csv": b"2,A,B\n", "dbpedia_csv/test.csv": b"3,C,D\n"})
    archive = tmp_path / "dbpedia_csv.tgz"
    archive.write_bytes(data)
    source = text_module.CsvArchive(archive.as_uri(), md5(data), "dbpedia_csv")
    monkeypatch.setattr(DbPediaDataset, "sources", [source])
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    assert DbPediaDataset("test")[0] == TextItem("C D", 2)
    cache = tmp_path / "cache" / "dbpedia"
    assert sorted(path.name for path in cache.iterdir()) == ["test.csv", "train.csv"]
    assert DbPediaDataset("train")[0].label == 1


def test_the_next_source_is_tried_when_one_is_unreachable(tmp_path, monkeypatch):
    data = tgz({"ag_news_csv/train.csv": AG_TRAIN.encode(), "ag_news_csv/test.csv": b"1,a,b\n"})
    archive = tmp_path / "ag_news_csv.tgz"
    archive.write_bytes(data)
    sources = [
        text_module.CsvFile("test", (tmp_path / "nowhere.csv").as_uri(), "0" * 32),
        text_module.CsvArchive(archive.as_uri(), md5(data), "ag_news_csv"),
    ]
    monkeypatch.setattr(AgNewsDataset, "sources", sources)
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    assert AgNewsDataset("test")[0] == TextItem("a b", 0)


def test_an_archive_with_a_link_or_without_the_file_is_refused(tmp_path, monkeypatch):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("dbpedia_csv/train.csv")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    for data, problem in [
        (buffer.getvalue(), "is not a regular file"),
        (tgz({"../train.csv": b"1,a,b\n"}), "holds no dbpedia_csv/train.csv"),
    ]:
        archive = tmp_path / "dbpedia_csv.tgz"
        archive.write_bytes(data)
        source = text_module.CsvArchive(archive.as_uri(), md5(data), "dbpedia_csv")
        monkeypatch.setattr(DbPediaDataset, "sources", [source])
        monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
        with pytest.raises(DataError, match=problem):
            DbPediaDataset("train")
        assert not (tmp_path / "cache" / "dbpedia" / "train.csv").exists()
        assert not (tmp_path / "train.csv").exists()


def test_an_oversized_archive_member_is_refused(tmp_path, monkeypatch):
    data = tgz({"dbpedia_csv/train.csv": b"1,a,b\n" * 100, "dbpedia_csv/test.csv": b"1,a,b\n"})
    archive = tmp_path / "dbpedia_csv.tgz"
    archive.write_bytes(data)
    monkeypatch.setattr(text_module, "MAX_MEMBER_BYTES", 64)
    source = text_module.CsvArchive(archive.as_uri(), md5(data), "dbpedia_csv")
    monkeypatch.setattr(DbPediaDataset, "sources", [source])
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError, match="600 bytes, more than the 64"):
        DbPediaDataset("train")


def test_an_md5_mismatch_keeps_nothing(tmp_path, monkeypatch):
    mirror = write(tmp_path / "mirror", "test.csv", AG_TEST)
    monkeypatch.setattr(
        AgNewsDataset, "sources", [text_module.CsvFile("test", mirror.as_uri(), "0" * 32)]
    )
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ChecksumError, match=f"has MD5 {md5(mirror.read_bytes())}, but the publ"):
        AgNewsDataset("test")
    assert not (tmp_path / "cache" / "ag_news" / "test.csv").exists()


def test_download_verified_checks_sha256_by_default_and_knows_its_algorithms(tmp_path):
    source = write(tmp_path, "data.bin", "hello")
    sha256 = hashlib.sha256(b"hello").hexdigest()
    copy = download_verified([source.as_uri()], tmp_path / "copy", sha256)
    assert copy.read_bytes() == b"hello"
    with pytest.raises(ChecksumError, match="has SHA-256"):
        download_verified([source.as_uri()], tmp_path / "other", md5(b"hello"))
    with pytest.raises(ValueError, match="md5 or sha256, not 'sha1'"):
        download_verified([source.as_uri()], tmp_path / "other", sha256, algorithm="sha1")


def test_an_unreachable_source_is_a_data_error(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise URLError("no route to host")

    monkeypatch.setattr(download_module, "urlopen", offline)
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path))
    with pytest.raises(DataError, match="could not download AG News's test.csv.*no route"):
        AgNewsDataset("test")
