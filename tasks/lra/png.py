"""A small PNG codec in numpy + zlib, so image tasks need no Pillow.

Reads what the LRA data holds (8-bit greyscale, greyscale+alpha, RGB, RGBA and palette images,
non-interlaced, any of the five row filters) and writes 8-bit greyscale or RGB.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # colour type -> samples per pixel


class PNGError(ValueError):
    """Bytes that are not a PNG this codec reads."""


def _chunks(data: bytes):
    """Yield ``(type, payload)`` of each chunk, checking the signature."""
    if not data.startswith(SIGNATURE):
        raise PNGError("not a PNG file (bad signature)")
    pos = len(SIGNATURE)
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        yield kind, data[pos + 8 : pos + 8 + length]
        pos += 12 + length


def _paeth_row(raw: bytes, prev: bytes, bpp: int) -> bytearray:
    row = bytearray(raw)
    for i in range(len(row)):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        predictor = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        row[i] = (row[i] + predictor) & 0xFF
    return row


def _average_row(raw: bytes, prev: bytes, bpp: int) -> bytearray:
    row = bytearray(raw)
    for i in range(len(row)):
        left = row[i - bpp] if i >= bpp else 0
        row[i] = (row[i] + ((left + prev[i]) >> 1)) & 0xFF
    return row


def _unfilter(filtered: np.ndarray, height: int, stride: int, bpp: int) -> np.ndarray:
    """Undo the per-row filters; Sub and Up are vectorised, Average and Paeth run per byte."""
    rows = filtered.reshape(height, stride + 1)
    out = np.empty((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, raw = int(rows[y, 0]), rows[y, 1:]
        if kind == 0:
            out[y] = raw
        elif kind == 1:  # Sub: a running sum per channel, modulo 256
            out[y] = np.cumsum(raw.reshape(-1, bpp), axis=0, dtype=np.uint8).reshape(-1)
        elif kind == 2:
            out[y] = raw + prev
        elif kind == 3:
            out[y] = np.frombuffer(_average_row(raw.tobytes(), prev.tobytes(), bpp), dtype=np.uint8)
        elif kind == 4:
            out[y] = np.frombuffer(_paeth_row(raw.tobytes(), prev.tobytes(), bpp), dtype=np.uint8)
        else:
            raise PNGError(f"unknown row filter {kind}")
        prev = out[y]
    return out


def decode_png(data: bytes) -> np.ndarray:
    """Pixels of a PNG as uint8: (H, W) for greyscale, (H, W, C) otherwise; palettes become RGB."""
    header, palette, idat = None, None, []
    for kind, payload in _chunks(data):
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", payload)
        elif kind == b"PLTE":
            palette = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat.append(payload)
        elif kind == b"IEND":
            break
    if header is None or not idat:
        raise PNGError("PNG without IHDR or IDAT")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace != 0:
        raise PNGError(f"unsupported PNG: bit depth {depth}, colour type {colour}, interlace {interlace}")
    channels = CHANNELS[colour]
    try:
        filtered = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    except zlib.error as exc:
        raise PNGError(f"corrupt PNG data ({exc})") from exc
    if filtered.size != height * (width * channels + 1):
        raise PNGError("PNG data length does not match its header")
    pixels = _unfilter(filtered, height, width * channels, channels).reshape(height, width, channels)
    if colour == 3:
        if palette is None:
            raise PNGError("palette PNG without PLTE")
        return palette[pixels[..., 0]]
    return pixels[..., 0] if channels == 1 else pixels


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def encode_png(pixels: np.ndarray) -> bytes:
    """PNG bytes of a uint8 image, (H, W) greyscale or (H, W, 3) RGB, rows unfiltered."""
    if pixels.dtype != np.uint8 or pixels.ndim not in (2, 3) or (pixels.ndim == 3 and pixels.shape[2] != 3):
        raise ValueError(f"encode_png takes uint8 (H, W) or (H, W, 3), got {pixels.dtype} {pixels.shape}")
    height, width = pixels.shape[:2]
    colour = 0 if pixels.ndim == 2 else 2
    rows = pixels.reshape(height, -1)
    filtered = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rows], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(filtered.tobytes(), 6)) + _chunk(b"IEND", b"")
