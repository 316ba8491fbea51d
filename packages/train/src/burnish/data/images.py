"""Reading images into NumPy without dependencies: PNG (8-bit), PGM/PPM (Netpbm) and .npy."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from .errors import DataError

IMAGE_SUFFIXES = (".png", ".pgm", ".ppm", ".pnm", ".npy")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Channels per pixel of each PNG colour type (3, palette, is expanded to RGB).
PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def read_image(path: str | Path) -> np.ndarray:
    """The image at ``path``: [height, width] for grey, [height, width, channels] for colour.

    PNG and PGM/PPM give uint8 (16-bit files give uint16); ``.npy`` gives the array as saved.
    PNG support covers non-interlaced 8- and 16-bit grey, grey+alpha, RGB, RGBA and 8-bit
    palette images. Raises DataError for other formats and malformed files."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    raw = path.read_bytes()
    if raw.startswith(PNG_SIGNATURE):
        return decode_png(raw, str(path))
    if raw[:2] in (b"P2", b"P3", b"P5", b"P6"):
        return decode_netpbm(raw, str(path))
    raise DataError(f"{path} is not a PNG, PGM/PPM or .npy image (first bytes {raw[:8]!r})")


def decode_netpbm(raw: bytes, name: str) -> np.ndarray:
    """A PGM (P2 text, P5 binary) or PPM (P3, P6) image."""
    kind = raw[:2]
    fields: list[bytes] = []
    position = 2
    # The header is 3 numbers (width, height, maxval) separated by whitespace and # comments.
    while len(fields) < 3:
        while position < len(raw) and raw[position : position + 1].isspace():
            position += 1
        if raw[position : position + 1] == b"#":
            position = raw.find(b"\n", position) + 1 or len(raw)
            continue
        start = position
        while position < len(raw) and raw[position : position + 1].isdigit():
            position += 1
        if start == position:
            raise DataError(f"{name}: malformed Netpbm header")
        fields.append(raw[start:position])
    width, height, maxval = (int(f) for f in fields)
    channels = 3 if kind in (b"P3", b"P6") else 1
    shape = (height, width, channels) if channels == 3 else (height, width)
    dtype = np.dtype(np.uint8) if maxval < 256 else np.dtype(">u2")
    count = height * width * channels
    if kind in (b"P2", b"P3"):
        values = np.array(raw[position:].split()[:count], dtype=np.int64)
    else:
        body = raw[position + 1 :]  # one whitespace byte ends the header
        values = np.frombuffer(body, dtype, min(count, len(body) // dtype.itemsize))
    if values.size != count:
        raise DataError(f"{name}: {values.size} samples for a {width}x{height} image")
    return values.astype(dtype.newbyteorder("=")).reshape(shape)


def decode_png(raw: bytes, name: str) -> np.ndarray:
    """A PNG image (see ``read_image`` for what is supported)."""
    position = len(PNG_SIGNATURE)
    header = None
    palette = None
    data = bytearray()
    while position + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[position : position + 8])
        body = raw[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            data += body
        elif kind == b"IEND":
            break
    if header is None:
        raise DataError(f"{name}: a PNG without its IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if colour not in PNG_CHANNELS or depth not in (8, 16) or interlace:
        raise DataError(
            f"{name}: PNG of colour type {colour}, bit depth {depth}, interlace {interlace} is "
            "not supported (8- or 16-bit, non-interlaced only)"
        )
    channels = PNG_CHANNELS[colour]
    pixel_bytes = channels * depth // 8
    stride = width * pixel_bytes
    try:
        filtered = np.frombuffer(zlib.decompress(bytes(data)), np.uint8)
    except zlib.error as error:
        raise DataError(f"{name}: corrupt PNG data ({error})") from None
    if filtered.size != height * (stride + 1):
        raise DataError(f"{name}: PNG data of {filtered.size} bytes for {width}x{height}")
    rows = unfilter(filtered.reshape(height, stride + 1), pixel_bytes)
    if depth == 16:
        image = rows.view(">u2").astype(np.uint16).reshape(height, width, channels)
    else:
        image = rows.reshape(height, width, channels)
    if colour == 3:
        if palette is None:
            raise DataError(f"{name}: a palette PNG without its PLTE chunk")
        return palette[image[..., 0]]
    return image[..., 0] if channels == 1 else image


def unfilter(rows: np.ndarray, pixel_bytes: int) -> np.ndarray:
    """Undo PNG's per-row filters (none, sub, up, average, Paeth); ``rows`` lead with the type."""
    height, width = rows.shape[0], rows.shape[1] - 1
    out = np.zeros((height, width), np.uint8)
    previous = np.zeros(width, np.int32)
    for y in range(height):
        kind = rows[y, 0]
        line = rows[y, 1:].astype(np.int32)
        if kind == 0:
            current = line
        elif kind == 2:
            current = (line + previous) & 0xFF
        elif kind in (1, 3, 4):
            current = unfilter_sequential(line, previous, pixel_bytes, kind)
        else:
            raise DataError(f"unknown PNG filter type {kind} on row {y}")
        out[y] = current
        previous = current.astype(np.int32)
    return out


def unfilter_sequential(line: np.ndarray, previous: np.ndarray, pixel_bytes: int,
                        kind: int) -> np.ndarray:
    """Sub (1), average (3) and Paeth (4) depend on the bytes just decoded: done in order."""
    current = [0] * len(line)
    above = previous.tolist()
    values = line.tolist()
    for i, value in enumerate(values):
        left = current[i - pixel_bytes] if i >= pixel_bytes else 0
        if kind == 1:
            predicted = left
        elif kind == 3:
            predicted = (left + above[i]) // 2
        else:
            upper_left = above[i - pixel_bytes] if i >= pixel_bytes else 0
            estimate = left + above[i] - upper_left
            distances = (abs(estimate - left), abs(estimate - above[i]), abs(estimate - upper_left))
            predicted = (left, above[i], upper_left)[distances.index(min(distances))]
        current[i] = (value + predicted) & 0xFF
    return np.array(current, np.int32)
