"""N:M compressed storage with NVIDIA-style index metadata.

A row of ``cols`` weights with ``N`` kept in every group of ``M`` compresses to ``cols * N / M``
values (the "compressed matrix" of cuSPARSELt / hipSPARSELt) plus, for every kept value, its
position inside its group: ``b = ceil(log2 M)`` bits (2 bits for 2:4). Patterns:
:mod:`hwcosim.pruning.patterns.nm`.

Metadata bit layout (ours, modelled on the PTX ISA's description of the sparse ``mma.sp``
metadata for 16-bit operands, where each 4-element group contributes two 2-bit indices):

- per row, the kept elements in order (group 0 slot 0, group 0 slot 1, ..., group 1 slot 0,
  ...); within a group the indices strictly increase;
- index ``t`` of the row occupies bits ``[t * b, (t + 1) * b)`` of the row's metadata, bit 0
  being the LSB of byte 0 (LSB-first, little-endian); the row is padded with zero bits to a
  whole byte.

For 2:4 this puts group ``g``'s first index in bits ``4g..4g+1`` and its second in
``4g+2..4g+3`` of the row's metadata: read as little-endian 16-bit words, each word holds the
4-bit selectors of four consecutive groups (16 dense columns), the 2-bit-per-element form NVIDIA
describes. (Example: kept positions (0, 1) give nibble ``0b0100 = 0x4``, (2, 3) give ``0xE``.)
cuSPARSELt additionally permutes metadata across threads for its tensor-core tiles
(``cusparseLtSpMMACompress``); that opaque, architecture-specific reordering is not reproduced:
this file is the logical layout an accelerator or a converter starts from.

On disk: ``<stem>.npz`` with ``values`` int32 (rows, cols * N / M) and ``metadata`` uint8
(rows, ceil(cols * N / M * b / 8)); manifest ``hwcosim-nm`` v1; optional memory image with
one word per (row, group): ``N`` lanes ``value | index << W``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hwcosim.models.fixedpoint import Q, dequantize, quantize
from hwcosim.pruning.base import PatternError
from hwcosim.pruning.formats import memimage
from hwcosim.pruning.formats._bundle import field, load_bundle, save_bundle
from hwcosim.pruning.formats.csb import FormatError
from hwcosim.pruning.formats.fss import _verify_images
from hwcosim.pruning.patterns.nm import NM

__all__ = [
    "NMMatrix",
    "encode",
    "save",
    "load",
    "pack_metadata",
    "unpack_metadata",
    "FORMAT_NAME",
    "FORMAT_VERSION",
]

FORMAT_NAME = "hwcosim-nm"
FORMAT_VERSION = 1


def index_bits(m: int) -> int:
    return max(1, int(m - 1).bit_length())


def pack_metadata(indices: np.ndarray, m: int) -> np.ndarray:
    """In-group indices (rows, groups, n) -> metadata bytes (rows, ceil(groups * n * b / 8))."""
    rows = indices.shape[0]
    return memimage.pack_words(indices.reshape(rows, -1), index_bits(m))


def unpack_metadata(meta: np.ndarray, m: int, groups: int, n: int) -> np.ndarray:
    """Metadata bytes (rows, nbytes) -> in-group indices int64 (rows, groups, n)."""
    rows = meta.shape[0]
    return memimage.unpack_words(meta, index_bits(m), groups * n).reshape(rows, groups, n)


@dataclass(frozen=True, eq=False)
class NMMatrix:
    """An N:M-sparse matrix, compressed.

    Attributes
    ----------
    shape : (rows, cols)
    m : int
        Group length M.
    fmt : Q
    values : int64 array (rows, cols // m, n)
    indices : int64 array (rows, cols // m, n), in-group positions, strictly increasing.
    """

    shape: tuple[int, int]
    m: int
    fmt: Q
    values: np.ndarray
    indices: np.ndarray

    def __post_init__(self):
        self.validate()

    @property
    def n(self) -> int:
        return self.values.shape[-1]

    @property
    def index_bits(self) -> int:
        return index_bits(self.m)

    @property
    def lane_bits(self) -> int:
        return self.fmt.width + self.index_bits

    @property
    def word_bits(self) -> int:
        return self.n * self.lane_bits

    @property
    def sparsity(self) -> float:
        return 1.0 - self.n / self.m

    def validate(self) -> None:
        rows, cols = self.shape
        if self.m < 2 or cols % self.m:
            raise FormatError(f"N:M: {cols} columns do not split into groups of m={self.m}")
        v, i = self.values, self.indices
        if v.ndim != 3 or v.shape != i.shape or v.shape[:2] != (rows, cols // self.m):
            raise FormatError(
                f"N:M arrays must have shape ({rows}, {cols // self.m}, n); "
                f"got values {v.shape}, indices {i.shape}"
            )
        if not 1 <= v.shape[2] <= self.m:
            raise FormatError(f"N:M: n={v.shape[2]} must lie in [1, m={self.m}]")
        if i.min() < 0 or i.max() >= self.m:
            raise FormatError(f"N:M indices must lie in [0, {self.m}); found {i.min()}..{i.max()}")
        if v.shape[2] > 1 and not (np.diff(i, axis=-1) > 0).all():
            raise FormatError("N:M indices must increase strictly within each group")
        if v.min() < self.fmt.min_raw or v.max() > self.fmt.max_raw:
            raise FormatError(f"N:M values exceed their format {self.fmt}")

    def to_dense_raw(self) -> np.ndarray:
        rows, cols = self.shape
        t = np.zeros((rows, cols // self.m, self.m), dtype=np.int64)
        np.put_along_axis(t, self.indices, self.values, axis=-1)
        return t.reshape(rows, cols)

    def to_dense(self) -> np.ndarray:
        return dequantize(self.to_dense_raw(), self.fmt)

    def compressed(self) -> np.ndarray:
        """Raw values as the compressed matrix (rows, cols * n / m)."""
        return self.values.reshape(self.shape[0], -1)

    def metadata(self) -> np.ndarray:
        return pack_metadata(self.indices, self.m)

    def packed_words(self) -> np.ndarray:
        lanes = memimage.weight_lanes(self.values, self.indices, self.fmt.width).reshape(-1, self.n)
        return memimage.pack_words(lanes, self.lane_bits)

    @property
    def payload_bytes(self) -> int:
        return -(-self.values.size * self.lane_bits // 8)


def encode(
    w: np.ndarray, n: int = 2, m: int = 4, fmt: Q | None = None, mask: np.ndarray | None = None
) -> NMMatrix:
    """Prune to N:M (unless ``mask`` is given) and compress.

    Parameters
    ----------
    w : float array (rows, cols)
    n, m : int
    fmt : Q, optional
        Default: 8 bits fitting the largest kept magnitude.
    mask : bool array (rows, cols), optional
        An N:M keep-mask (checked: exactly ``n`` per group).
    """
    w = np.asarray(w, dtype=np.float64)
    pat = NM(n=n, m=m)
    if mask is None:
        mask = pat.mask(w)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != w.shape:
        raise PatternError(f"mask shape {mask.shape} differs from weight shape {w.shape}")
    pat.check(mask)
    rows, cols = w.shape
    if fmt is None:
        fmt = Q.fitting(float(np.abs(w[mask]).max()), 8)
    g = mask.reshape(rows, cols // m, m)
    idx = np.argsort(~g, axis=-1, kind="stable")[..., :n]
    vals = np.take_along_axis(w.reshape(rows, cols // m, m), idx, axis=-1)
    return NMMatrix((rows, cols), m, fmt, quantize(vals, fmt), idx.astype(np.int64))


def save(
    m: NMMatrix, out_dir: str | Path, stem: str = "weights", images=("hex",), extra: dict | None = None
) -> dict:
    """Write ``<stem>.npz`` (compressed values + metadata), ``<stem>.json`` and images, atomically."""
    packed = m.packed_words() if images else None
    blobs = {kind: memimage.image_bytes(packed, m.word_bits, kind) for kind in images}
    fields = {
        "shape": list(m.shape),
        "n": m.n,
        "m": m.m,
        "index_bits": m.index_bits,
        "value_format": m.fmt.to_dict(),
        "sparsity": m.sparsity,
        "metadata_layout": "per row: index of kept element t at bits [t*b, (t+1)*b), LSB-first, "
        "bytes little-endian, zero-padded to a byte",
        "image": {
            "word_bits": m.word_bits,
            "lane_bits": m.lane_bits,
            "words": int(m.values.shape[0] * m.values.shape[1]),
            "order": "(row, group); lane j = slot j = value | index << W",
        },
        **(extra or {}),
    }
    arrays = {"values": m.compressed().astype(np.int32), "metadata": m.metadata()}
    return save_bundle(out_dir, stem, FORMAT_NAME, FORMAT_VERSION, arrays, fields, blobs)


def load(path: str | Path, verify_images: bool = True) -> NMMatrix:
    """Read an N:M matrix; :class:`FormatError` on any inconsistency (as :func:`.fss.load`)."""
    man, arrays, mpath = load_bundle(path, FORMAT_NAME, FORMAT_VERSION)
    shape = tuple(field(man, "shape", mpath, lambda s: [int(x) for x in s]))
    n, m = field(man, "n", mpath), field(man, "m", mpath)
    fmt = field(man, "value_format", mpath, Q.from_dict)
    if len(shape) != 2 or m < 2 or n < 1 or shape[1] % m:
        raise FormatError(f"{mpath}: inconsistent shape {shape} / n={n} / m={m}")
    rows, cols = shape
    groups = cols // m
    values, meta = arrays.get("values"), arrays.get("metadata")
    if values is None or meta is None:
        raise FormatError(f"{mpath}: the .npz needs arrays 'values' and 'metadata'")
    if values.shape != (rows, groups * n):
        raise FormatError(f"{mpath}: values have shape {values.shape}, expected {(rows, groups * n)}")
    nbytes = -(-groups * n * index_bits(m) // 8)
    if meta.shape != (rows, nbytes) or meta.dtype != np.uint8:
        raise FormatError(f"{mpath}: metadata is {meta.dtype}{meta.shape}, expected uint8{(rows, nbytes)}")
    pad = nbytes * 8 - groups * n * index_bits(m)
    if pad and (meta[:, -1] >> (8 - pad)).any():
        raise FormatError(f"{mpath}: metadata padding bits are not zero (corrupt)")
    idx = unpack_metadata(meta, m, groups, n)
    mat = NMMatrix(shape, m, fmt, values.astype(np.int64).reshape(rows, groups, n), idx)
    if verify_images:
        _verify_images(man, mpath, mat.packed_words(), mat.word_bits)
    return mat
