"""Memory images of packed words for RTL: ``$readmemh`` text and raw little-endian binary.

A *word* is a row of equal-width *lanes*; lane ``i`` occupies bits
``[i * lane_bits, (i + 1) * lane_bits)`` of the word (bit 0 = LSB), the layout of
:mod:`hwcosim.models.bbs.spmxv` and the CSB ``.hex`` of :mod:`hwcosim.pruning.formats.csb`. A weight lane is
``value | index << W``: the W-bit two's-complement value in its low bits, the index above
(:func:`weight_lanes`).

- hex (``$readmemh``): one word per line, ``ceil(word_bits / 4)`` lowercase hex digits, most
  significant digit first, ``\\n`` after every line;
- bin: ``ceil(word_bits / 8)`` bytes per word, little-endian (byte 0 holds bits 0-7), words
  back to back; bits above ``word_bits`` are zero.

Packing is vectorised (``numpy.packbits``), so any word width works, including words wider than
64 bits. The readers refuse odd line lengths, non-hex digits, set bits above ``word_bits``,
sizes that are not a whole number of words and word counts other than the expected one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_bytes
from hwcosim.models.errors import UsageError
from hwcosim.pruning.formats.csb import FormatError

__all__ = [
    "weight_lanes",
    "pack_words",
    "unpack_words",
    "to_hex",
    "from_hex",
    "to_bin",
    "from_bin",
    "write_image",
    "read_image",
    "word_bytes",
    "hex_digits",
]


def word_bytes(word_bits: int) -> int:
    return -(-word_bits // 8)


def hex_digits(word_bits: int) -> int:
    return -(-word_bits // 4)


def weight_lanes(values: np.ndarray, indices: np.ndarray, value_bits: int) -> np.ndarray:
    """Lanes ``(values mod 2**W) | indices << W`` as int64 (same shape as the inputs)."""
    v = np.asarray(values, dtype=np.int64) & ((1 << value_bits) - 1)
    return v | (np.asarray(indices, dtype=np.int64) << value_bits)


def pack_words(lanes: np.ndarray, lane_bits: int) -> np.ndarray:
    """Lanes (n_words, n_lanes) of non-negative ints < 2**lane_bits -> bytes (n_words, word_bytes).

    Little-endian: byte 0 of a word holds its bits 0-7; lane 0 is the least significant.
    """
    lanes = np.asarray(lanes, dtype=np.int64)
    if lanes.ndim != 2:
        raise UsageError(f"lanes must be 2-D (words, lanes), got shape {lanes.shape}")
    if lanes.size and (lanes.min() < 0 or lanes.max() >> lane_bits):
        raise UsageError(f"a lane value does not fit in {lane_bits} bits")
    n, nl = lanes.shape
    bits = ((lanes[:, :, None] >> np.arange(lane_bits, dtype=np.int64)) & 1).astype(np.uint8)
    bits = bits.reshape(n, nl * lane_bits)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.concatenate([bits, np.zeros((n, pad), dtype=np.uint8)], axis=1)
    return np.packbits(bits, axis=1, bitorder="little")


def unpack_words(packed: np.ndarray, lane_bits: int, n_lanes: int) -> np.ndarray:
    """Inverse of :func:`pack_words`: bytes (n_words, word_bytes) -> lanes int64 (n_words, n_lanes)."""
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8), axis=1, bitorder="little")
    bits = bits[:, : n_lanes * lane_bits].reshape(-1, n_lanes, lane_bits).astype(np.int64)
    return (bits << np.arange(lane_bits, dtype=np.int64)).sum(axis=-1)


def _check_high_bits(packed: np.ndarray, word_bits: int, where: str) -> None:
    extra = packed.shape[1] * 8 - word_bits
    if extra and packed.size:
        top = packed[:, -1] >> (8 - extra)
        if top.any():
            bad = int(np.flatnonzero(top)[0])
            raise FormatError(f"{where}: word {bad} has bits set above bit {word_bits - 1}")


def to_hex(packed: np.ndarray, word_bits: int) -> str:
    """``$readmemh`` text of packed words (one per line)."""
    packed = np.asarray(packed, dtype=np.uint8)
    if packed.shape[0] == 0:
        return ""
    digits = hex_digits(word_bits)
    text = np.ascontiguousarray(packed[:, ::-1]).tobytes().hex()
    width = 2 * packed.shape[1]
    lines = np.frombuffer(text.encode(), dtype=f"S{width}")
    if width != digits:  # drop the leading (always zero) nibble of an odd digit count
        lines = lines.astype(f"S{width}").view(np.uint8).reshape(-1, width)[:, width - digits :]
        lines = lines.copy().view(f"S{digits}").ravel()
    return b"\n".join(lines).decode() + "\n"


def from_hex(text: str, word_bits: int, n_words: int | None = None, where: str = "hex image") -> np.ndarray:
    """Parse ``$readmemh`` text written by :func:`to_hex` into packed bytes (n_words, word_bytes)."""
    digits, nb = hex_digits(word_bits), word_bytes(word_bits)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    else:
        raise FormatError(f"{where}: truncated (the last line has no newline)")
    if n_words is not None and len(lines) != n_words:
        raise FormatError(f"{where}: {len(lines)} words, expected {n_words}")
    bad = [i for i, ln in enumerate(lines) if len(ln) != digits]
    if bad:
        raise FormatError(
            f"{where}: line {bad[0] + 1} has {len(lines[bad[0]])} hex digits, expected {digits}"
        )
    joined = "".join(("0" if digits % 2 else "") + ln for ln in lines)
    try:
        raw = bytes.fromhex(joined)
    except ValueError:
        raise FormatError(f"{where}: holds characters that are not hex digits") from None
    packed = np.frombuffer(raw, dtype=np.uint8).reshape(len(lines), nb)[:, ::-1].copy()
    _check_high_bits(packed, word_bits, where)
    return packed


def to_bin(packed: np.ndarray) -> bytes:
    """Raw binary image: the packed words back to back."""
    return np.ascontiguousarray(packed, dtype=np.uint8).tobytes()


def from_bin(
    data: bytes, word_bits: int, n_words: int | None = None, where: str = "binary image"
) -> np.ndarray:
    """Parse a raw binary image into packed bytes (n_words, word_bytes)."""
    nb = word_bytes(word_bits)
    if len(data) % nb:
        raise FormatError(f"{where}: {len(data)} bytes is not a whole number of {nb}-byte words (truncated?)")
    packed = np.frombuffer(data, dtype=np.uint8).reshape(-1, nb).copy()
    if n_words is not None and packed.shape[0] != n_words:
        raise FormatError(f"{where}: {packed.shape[0]} words, expected {n_words}")
    _check_high_bits(packed, word_bits, where)
    return packed


def image_bytes(packed: np.ndarray, word_bits: int, kind: str) -> bytes:
    """The file content of an image of ``kind`` ``"hex"`` or ``"bin"``."""
    if kind == "hex":
        return to_hex(packed, word_bits).encode()
    if kind == "bin":
        return to_bin(packed)
    raise UsageError(f"memory image kind must be 'hex' or 'bin', not {kind!r}")


def write_image(path: str | Path, packed: np.ndarray, word_bits: int, kind: str = "hex") -> Path:
    """Write a memory image atomically."""
    return write_bytes(path, image_bytes(packed, word_bits, kind))


def read_image(path: str | Path, word_bits: int, kind: str = "hex", n_words: int | None = None) -> np.ndarray:
    """Read and validate a memory image; returns packed bytes (n_words, word_bytes)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FormatError(f"{path}: memory image missing") from None
    if kind == "hex":
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise FormatError(f"{path}: not a text hex image") from None
        return from_hex(text, word_bits, n_words, where=str(path))
    if kind == "bin":
        return from_bin(data, word_bits, n_words, where=str(path))
    raise UsageError(f"memory image kind must be 'hex' or 'bin', not {kind!r}")
