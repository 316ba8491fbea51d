"""Image folders (PNG, PGM/PPM, .npy) and CSV files as datasets."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from burnish.data import CsvDataset, DataError, ImageFolderDataset, read_image


def png_bytes(
    image: np.ndarray, colour: int, filters: list[int], depth: int = 8, palette: bytes = b""
) -> bytes:
    """``image`` (uint8, or uint16 with ``depth=16``) as a PNG, each row filtered with the given
    type (0-4), in turn."""
    height = image.shape[0]
    samples = image.astype(">u2") if depth == 16 else image
    rows = samples.reshape(height, -1).view(np.uint8).astype(np.int32)
    step = (1 if image.ndim == 2 else image.shape[2]) * depth // 8
    body = bytearray()
    previous = np.zeros(rows.shape[1], np.int32)
    for y in range(height):
        kind = filters[y % len(filters)]
        row = rows[y]
        left = np.concatenate([np.zeros(step, np.int32), row[:-step]])
        upper_left = np.concatenate([np.zeros(step, np.int32), previous[:-step]])
        if kind == 0:
            predicted = np.zeros_like(row)
        elif kind == 1:
            predicted = left
        elif kind == 2:
            predicted = previous
        elif kind == 3:
            predicted = (left + previous) // 2
        else:
            estimate = left + previous - upper_left
            distances = np.stack([abs(estimate - left), abs(estimate - previous)])
            distances = np.concatenate([distances, [abs(estimate - upper_left)]])
            choice = np.argmin(distances, axis=0)
            predicted = np.choose(choice, [left, previous, upper_left])
        body += bytes([kind]) + ((row - predicted) & 0xFF).astype(np.uint8).tobytes()
        previous = row

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", image.shape[1], height, depth, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + (chunk(b"PLTE", palette) if palette else b"")
        + chunk(b"IDAT", zlib.compress(bytes(body)))
        + chunk(b"IEND", b"")
    )


RNG = np.random.default_rng(0)
GREY = RNG.integers(0, 256, (7, 5), dtype=np.uint8)
RGB = RNG.integers(0, 256, (4, 6, 3), dtype=np.uint8)


@pytest.mark.parametrize("filters", [[0], [1], [2], [3], [4], [0, 1, 2, 3, 4]])
def test_png_rows_unfilter(tmp_path, filters):
    (tmp_path / "grey.png").write_bytes(png_bytes(GREY, 0, filters))
    (tmp_path / "rgb.png").write_bytes(png_bytes(RGB, 2, filters))
    np.testing.assert_array_equal(read_image(tmp_path / "grey.png"), GREY)
    np.testing.assert_array_equal(read_image(tmp_path / "rgb.png"), RGB)


def test_16_bit_and_palette_pngs(tmp_path):
    deep = RNG.integers(0, 65536, (3, 4), dtype=np.uint16)
    (tmp_path / "deep.png").write_bytes(png_bytes(deep, 0, [1, 4], depth=16))
    decoded = read_image(tmp_path / "deep.png")
    assert decoded.dtype == np.uint16
    np.testing.assert_array_equal(decoded, deep)
    colours = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)
    indices = RNG.integers(0, 3, (4, 5), dtype=np.uint8)
    (tmp_path / "palette.png").write_bytes(png_bytes(indices, 3, [0], palette=colours.tobytes()))
    np.testing.assert_array_equal(read_image(tmp_path / "palette.png"), colours[indices])


def test_netpbm_and_npy_images(tmp_path):
    (tmp_path / "a.pgm").write_bytes(b"P5\n# a comment\n5 7\n255\n" + GREY.tobytes())
    (tmp_path / "b.ppm").write_bytes(b"P6 6 4 255\n" + RGB.tobytes())
    text = " ".join(str(v) for v in GREY.ravel())
    (tmp_path / "c.pgm").write_text(f"P2\n5 7\n255\n{text}\n")
    np.save(tmp_path / "d.npy", GREY.astype(np.float32))
    np.testing.assert_array_equal(read_image(tmp_path / "a.pgm"), GREY)
    np.testing.assert_array_equal(read_image(tmp_path / "b.ppm"), RGB)
    np.testing.assert_array_equal(read_image(tmp_path / "c.pgm"), GREY)
    assert read_image(tmp_path / "d.npy").dtype == np.float32


def test_unsupported_images_are_named(tmp_path):
    (tmp_path / "x.png").write_bytes(b"GIF89a......")
    with pytest.raises(DataError, match="is not a PNG, PGM/PPM or .npy image"):
        read_image(tmp_path / "x.png")


def test_image_folder_labels_by_sorted_folder(tmp_path):
    for name in ("cat", "ant"):
        (tmp_path / name).mkdir()
    (tmp_path / "cat" / "1.png").write_bytes(png_bytes(GREY, 0, [4]))
    (tmp_path / "cat" / "2.pgm").write_bytes(b"P5 5 7 255\n" + GREY.tobytes())
    np.save(tmp_path / "ant" / "a.npy", GREY)
    (tmp_path / "ant" / "notes.txt").write_text("not an image")
    dataset = ImageFolderDataset(tmp_path)
    assert dataset.classes == ["ant", "cat"]
    assert len(dataset) == 3
    assert [item.label for item in dataset] == [0, 1, 1]
    assert dataset[1].path.name == "1.png"
    np.testing.assert_array_equal(dataset[2].image, GREY)


def test_image_folder_without_classes_or_images(tmp_path):
    with pytest.raises(DataError, match="no class folder"):
        ImageFolderDataset(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no image"):
        ImageFolderDataset(tmp_path)


def test_csv_rows_as_dicts_typed_dicts_and_tuples(tmp_path):
    path = tmp_path / "iris.csv"
    path.write_text("length,width,species\n5.1,3.5,setosa\n7.0,3.2,versicolor\n\n")
    assert CsvDataset(path)[1] == {"length": "7.0", "width": "3.2", "species": "versicolor"}
    typed = CsvDataset(path, types={"length": float})
    assert typed[0] == {"length": 5.1, "width": "3.5", "species": "setosa"}
    rows = CsvDataset(path, types=[float, float, str])
    assert len(rows) == 2 and list(rows) == [(5.1, 3.5, "setosa"), (7.0, 3.2, "versicolor")]


def test_csv_without_header_and_with_another_delimiter(tmp_path):
    path = tmp_path / "plain.tsv"
    path.write_text("1\ta\n2\tb\n")
    dataset = CsvDataset(path, types=[int, str], header=False, delimiter="\t")
    assert list(dataset) == [(1, "a"), (2, "b")]
    assert CsvDataset(path, header=False, delimiter="\t")[0] == {"0": "1", "1": "a"}


def test_csv_errors_name_line_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("x,y\n1,2\n3,oops\n")
    with pytest.raises(DataError, match="line 3, column 'y': cannot convert 'oops'"):
        CsvDataset(path, types=[int, int])
    with pytest.raises(DataError, match="no column \\['z'\\]"):
        CsvDataset(path, types={"z": int})
    path.write_text("x,y\n1,2,3\n")
    with pytest.raises(DataError, match="line 2: 3 fields, but 2 columns"):
        CsvDataset(path)
