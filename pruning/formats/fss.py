"""FSS storage: the region-major format of fine-grained structured sparsity.

Zhang et al., "Fine-Grained Structured Sparse Computing for FPGA-Based AI Inference", IEEE TCAD
44(7), 2025 (doi 10.1109/TCAD.2024.3524356); pattern in :mod:`hwcosim.pruning.patterns.fss`. Every
``r_h x r_w`` region keeps exactly ``N`` weights, so like CSB the format needs no pointers or
counts: ``N`` values and ``N`` in-region indices per region. The layout is ours (the paper's
exact memory layout is not public to us):

- regions in row-major order over the region grid (region row, then region column);
- inside a region, slot ``j`` holds the ``j``-th kept weight in row-major in-region order; its
  index ``i * r_w + c`` (``ceil(log2(r_h * r_w))`` bits) strictly increases with ``j``.

Arrays: ``values`` (raw fixed point of a :class:`hwcosim.models.fixedpoint.Q`) and ``indices``, both
``(rows // r_h, cols // r_w, N)``. On disk: ``<stem>.npz`` (values int32, indices uint16),
``<stem>.json`` (manifest ``hwcosim-fss`` v1: shape, region, n, index_bits, value format,
sha256s) and optionally a memory image (``.hex`` and/or ``.bin``, :mod:`.memimage`): one word
per region, region-major, lane ``j`` = slot ``j`` = ``value | index << W``.
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
from hwcosim.pruning.patterns._common import pair
from hwcosim.pruning.patterns.fss import FSS, from_regions, to_regions

__all__ = ["FSSMatrix", "encode", "save", "load", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "hwcosim-fss"
FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class FSSMatrix:
    """An FSS-sparse matrix in region-major form.

    Attributes
    ----------
    shape : (rows, cols)
    region : (r_h, r_w)
    fmt : Q
    values : int64 array (rows // r_h, cols // r_w, n)
    indices : int64 array (rows // r_h, cols // r_w, n), strictly increasing along the last axis.
    """

    shape: tuple[int, int]
    region: tuple[int, int]
    fmt: Q
    values: np.ndarray
    indices: np.ndarray

    def __post_init__(self):
        self.validate()

    @property
    def n(self) -> int:
        return self.values.shape[-1]

    @property
    def region_size(self) -> int:
        return self.region[0] * self.region[1]

    @property
    def index_bits(self) -> int:
        return max(1, int(self.region_size - 1).bit_length())

    @property
    def lane_bits(self) -> int:
        return self.fmt.width + self.index_bits

    @property
    def word_bits(self) -> int:
        return self.n * self.lane_bits

    @property
    def sparsity(self) -> float:
        return 1.0 - self.n / self.region_size

    def validate(self) -> None:
        """Raise :class:`FormatError` unless the arrays form a well-formed FSS matrix."""
        rows, cols = self.shape
        rh, rw = self.region
        if rh < 1 or rw < 1 or rows % rh or cols % rw or rh * rw < 2:
            raise FormatError(f"FSS: a {rows} x {cols} matrix cannot be tiled by {rh} x {rw} regions")
        v, i = self.values, self.indices
        want = (rows // rh, cols // rw)
        if v.ndim != 3 or v.shape != i.shape or v.shape[:2] != want:
            raise FormatError(
                f"FSS arrays must have shape ({want[0]}, {want[1]}, n); "
                f"got values {v.shape}, indices {i.shape}"
            )
        if not 1 <= v.shape[2] <= self.region_size:
            raise FormatError(f"FSS: n={v.shape[2]} must lie in [1, {self.region_size}]")
        if i.min() < 0 or i.max() >= self.region_size:
            raise FormatError(f"FSS indices must lie in [0, {self.region_size}); found {i.min()}..{i.max()}")
        if v.shape[2] > 1 and not (np.diff(i, axis=-1) > 0).all():
            raise FormatError("FSS indices must increase strictly within each region")
        if v.min() < self.fmt.min_raw or v.max() > self.fmt.max_raw:
            raise FormatError(f"FSS values exceed their format {self.fmt}")

    def to_dense_raw(self) -> np.ndarray:
        """Raw dense matrix (rows, cols) int64, zeros where pruned."""
        gr, gc, _ = self.values.shape
        t = np.zeros((gr, gc, self.region_size), dtype=np.int64)
        np.put_along_axis(t, self.indices, self.values, axis=-1)
        return from_regions(t, self.region)

    def to_dense(self) -> np.ndarray:
        return dequantize(self.to_dense_raw(), self.fmt)

    def mask(self) -> np.ndarray:
        gr, gc, _ = self.values.shape
        t = np.zeros((gr, gc, self.region_size), dtype=bool)
        np.put_along_axis(t, self.indices, True, axis=-1)
        return from_regions(t, self.region)

    def packed_words(self) -> np.ndarray:
        """Memory words, one per region (region-major): bytes (regions, ceil(word_bits / 8))."""
        lanes = memimage.weight_lanes(self.values, self.indices, self.fmt.width).reshape(-1, self.n)
        return memimage.pack_words(lanes, self.lane_bits)

    @property
    def payload_bytes(self) -> int:
        """Bytes of values + indices at their bit widths (the memory image without padding)."""
        return -(-self.values.size * self.lane_bits // 8)


def encode(
    w: np.ndarray,
    region,
    n: int | None = None,
    sparsity: float | None = None,
    fmt: Q | None = None,
    mask: np.ndarray | None = None,
) -> FSSMatrix:
    """Prune (unless ``mask`` is given) and encode a float matrix as FSS.

    Parameters
    ----------
    w : float array (rows, cols)
    region : (r_h, r_w)
    n, sparsity : int or float, optional
        Pruning target (one of them) when ``mask`` is not given.
    fmt : Q, optional
        Value format; default: 8 bits with the most fractional bits that hold the largest kept
        magnitude (:meth:`Q.fitting`).
    mask : bool array (rows, cols), optional
        A keep-mask with the same count in every region (checked).
    """
    region = pair(region, "FSS region")
    w = np.asarray(w, dtype=np.float64)
    if mask is None:
        mask = FSS(region=region, n=n, sparsity=sparsity).mask(w)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != w.shape:
        raise PatternError(f"mask shape {mask.shape} differs from weight shape {w.shape}")
    mr = to_regions(mask, region)
    counts = mr.sum(axis=-1)
    if counts.min() != counts.max() or counts.min() < 1:
        raise PatternError(
            f"the mask keeps {counts.min()}..{counts.max()} weights per {region[0]}x{region[1]} "
            "region; FSS needs the same count (>= 1) in every region"
        )
    k = int(counts.flat[0])
    if fmt is None:
        fmt = Q.fitting(float(np.abs(w[mask]).max()), 8)
    idx = np.argsort(~mr, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(to_regions(w, region), idx, axis=-1)
    return FSSMatrix(tuple(w.shape), region, fmt, quantize(vals, fmt), idx.astype(np.int64))


def save(
    m: FSSMatrix, out_dir: str | Path, stem: str = "weights", images=("hex",), extra: dict | None = None
) -> dict:
    """Write ``<stem>.npz``, ``<stem>.json`` and the memory images named in ``images``
    (``"hex"``, ``"bin"``) into ``out_dir``, atomically. Returns the manifest."""
    packed = m.packed_words() if images else None
    blobs = {kind: memimage.image_bytes(packed, m.word_bits, kind) for kind in images}
    fields = {
        "shape": list(m.shape),
        "region": list(m.region),
        "n": m.n,
        "index_bits": m.index_bits,
        "value_format": m.fmt.to_dict(),
        "sparsity": m.sparsity,
        "image": {
            "word_bits": m.word_bits,
            "lane_bits": m.lane_bits,
            "words": int(m.values.shape[0] * m.values.shape[1]),
            "order": "region-major (region row, region col); lane j = slot j = value | index << W",
        },
        **(extra or {}),
    }
    return save_bundle(
        out_dir,
        stem,
        FORMAT_NAME,
        FORMAT_VERSION,
        {"values": m.values.astype(np.int32), "indices": m.indices.astype(np.uint16)},
        fields,
        blobs,
    )


def load(path: str | Path, verify_images: bool = True) -> FSSMatrix:
    """Read an FSS matrix from its manifest, its ``.npz`` or their folder.

    Raises
    ------
    FormatError
        Missing, corrupt or truncated files, checksum or shape mismatches, broken FSS rules,
        and (with ``verify_images``) memory images that disagree with the arrays.
    """
    man, arrays, mpath = load_bundle(path, FORMAT_NAME, FORMAT_VERSION)
    shape = tuple(field(man, "shape", mpath, lambda s: [int(x) for x in s]))
    region = tuple(field(man, "region", mpath, lambda s: [int(x) for x in s]))
    n = field(man, "n", mpath)
    fmt = field(man, "value_format", mpath, Q.from_dict)
    if len(shape) != 2 or len(region) != 2:
        raise FormatError(f"{mpath}: shape and region must have two entries each")
    try:
        values, indices = arrays["values"].astype(np.int64), arrays["indices"].astype(np.int64)
    except KeyError as e:
        raise FormatError(f"{mpath}: array {e} missing") from None
    if values.ndim != 3 or values.shape[-1] != n:
        raise FormatError(f"{mpath}: values have shape {values.shape}, the manifest says n={n}")
    m = FSSMatrix(shape, region, fmt, values, indices)
    if verify_images:
        _verify_images(man, mpath, m.packed_words(), m.word_bits)
    return m


def _verify_images(man: dict, mpath: Path, packed: np.ndarray, word_bits: int) -> None:
    files = man.get("files", {})
    if not isinstance(files, dict):
        raise FormatError(f"{mpath}: manifest field 'files' must be an object")
    for kind in ("hex", "bin"):
        entry = files.get(kind)
        if entry is None:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise FormatError(f"{mpath}: manifest entry files.{kind} needs a 'file' name")
        got = memimage.read_image(mpath.parent / entry["file"], word_bits, kind, n_words=packed.shape[0])
        if not np.array_equal(got, packed):
            raise FormatError(f"{mpath.parent / entry['file']}: memory image disagrees with the arrays")
