"""CSB (Compressed Sparse Banks), the decoding-free format of the BBS accelerator.

Cao et al., FPGA 2019. A bank-balanced matrix keeps the same ``k`` nonzeros in each of the
``B`` banks of every row, so CSB needs no row pointers or per-bank counts. Per row, slot ``j``
holds the ``j``-th nonzero (in column order) of *every* bank side by side, so one memory word
feeds all ``B`` multipliers of a PE in one cycle; each value carries its index inside its bank
(``ceil(log2(bank_size))`` bits), which addresses the matching vector bank directly.

Arrays: ``values`` and ``indices`` of shape ``(rows, k, banks)``; values are raw fixed-point
integers of a named :class:`hwcosim.models.fixedpoint.Q` format (quantised with saturation).

On disk (``save``/``load``), written atomically:

- ``<stem>.npz``: ``values`` (int32), ``indices`` (uint16);
- ``<stem>.json``: manifest: format name and version, shape, banks, bank_size, k, index_bits,
  value format, the sha256 of each array's bytes, the scale of the float source;
- ``<stem>.hex``: the ``$readmemh`` image, one CSB word per line in (row, slot) order; a word is
  ``B`` lanes, lane ``b`` at bit offset ``b * (W + I)`` holding the W-bit two's-complement
  value in its low bits and the I-bit index above (the lane layout of :mod:`hwcosim.models.bbs.spmxv`).
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_bytes, write_text
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, dequantize, quantize
from hwcosim.models.safeparse import json_loads, one_line
from hwcosim.pruning.base import PatternError
from hwcosim.pruning.patterns.bank_balanced import BankBalanced

__all__ = ["CSBMatrix", "FormatError", "encode", "save", "load", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "hwcosim-csb"
FORMAT_VERSION = 1


class FormatError(UsageError):
    """A weight file that is corrupt, truncated or does not match its manifest."""


@dataclass(frozen=True, eq=False)
class CSBMatrix:
    """A bank-balanced sparse matrix in CSB form.

    Attributes
    ----------
    shape : (rows, cols)
    banks : int
    fmt : Q
        Format of the raw ``values``.
    values : int64 array (rows, k, banks)
    indices : int64 array (rows, k, banks), in-bank column indices, increasing in ``k``.
    """

    shape: tuple[int, int]
    banks: int
    fmt: Q
    values: np.ndarray
    indices: np.ndarray

    def __post_init__(self):
        self.validate()

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def bank_size(self) -> int:
        return self.cols // self.banks

    @property
    def k(self) -> int:
        return self.values.shape[1]

    @property
    def index_bits(self) -> int:
        return max(1, int(self.bank_size - 1).bit_length())

    @property
    def sparsity(self) -> float:
        return 1.0 - self.k / self.bank_size

    def validate(self) -> None:
        """Raise :class:`FormatError` unless the arrays are a well-formed CSB matrix."""
        rows, cols = self.shape
        if self.banks < 1 or cols % self.banks or cols // self.banks < 2:
            raise FormatError(f"CSB: {cols} columns cannot form {self.banks} banks of >= 2 columns")
        v, i = self.values, self.indices
        if v.ndim != 3 or v.shape != i.shape or v.shape[0] != rows or v.shape[2] != self.banks:
            raise FormatError(f"CSB arrays must have shape (rows={rows}, k, banks={self.banks}); "
                              f"got values {v.shape}, indices {i.shape}")
        k = v.shape[1]
        if not 1 <= k <= self.bank_size:
            raise FormatError(f"CSB: k={k} must lie in [1, bank_size={self.bank_size}]")
        if i.min() < 0 or i.max() >= self.bank_size:
            raise FormatError(f"CSB indices must lie in [0, {self.bank_size}); found {i.min()}..{i.max()}")
        if k > 1 and not (np.diff(i, axis=1) > 0).all():
            raise FormatError("CSB indices must increase strictly within each bank (slot j = j-th nonzero)")
        if v.min() < self.fmt.min_raw or v.max() > self.fmt.max_raw:
            raise FormatError(f"CSB values exceed their format {self.fmt}")

    def to_dense_raw(self) -> np.ndarray:
        """Raw dense matrix (rows, cols) int64 with zeros where pruned."""
        rows, _ = self.shape
        dense = np.zeros((rows, self.banks, self.bank_size), dtype=np.int64)
        r = np.arange(rows)[:, None, None]
        b = np.arange(self.banks)[None, None, :]
        dense[r, b, self.indices] = self.values
        return dense.reshape(self.shape)

    def to_dense(self) -> np.ndarray:
        return dequantize(self.to_dense_raw(), self.fmt)

    def words(self) -> list[int]:
        """The CSB memory words, (row, slot) order: ``rows * k`` words of ``B`` lanes."""
        w = self.fmt.width
        lane = (self.values & ((1 << w) - 1)) | (self.indices << w)
        lane = lane.reshape(-1, self.banks)
        words = np.zeros(lane.shape[0], dtype=object)
        for b in range(self.banks):
            words += lane[:, b].astype(object) << (b * (w + self.index_bits))
        return [int(x) for x in words]


def encode(w: np.ndarray, banks: int, sparsity: float | None = None, fmt: Q | None = None,
           mask: np.ndarray | None = None) -> CSBMatrix:
    """Prune (unless ``mask`` is given) and encode a float matrix as CSB.

    Parameters
    ----------
    w : float array (rows, cols)
    banks : int
    sparsity : float, optional
        Bank-balanced pruning target; needed when ``mask`` is not given.
    fmt : Q, optional
        Value format; default: 8 bits with the most fractional bits that hold ``max|w|``.
    mask : bool array (rows, cols), optional
        A bank-balanced keep-mask (checked).
    """
    pattern = None
    if mask is None:
        if sparsity is None:
            raise PatternError("give either a sparsity or a bank-balanced mask to encode CSB")
        pattern = BankBalanced(banks=banks, sparsity=sparsity)
        mask = pattern.mask(w)
    w = np.asarray(w, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != w.shape:
        raise PatternError(f"mask shape {mask.shape} differs from weight shape {w.shape}")
    rows, cols = w.shape
    size = cols // banks if banks > 0 and cols % banks == 0 else 0
    if size < 2:
        raise PatternError(f"{cols} columns do not split into {banks} banks of >= 2 columns")
    counts = mask.reshape(rows, banks, size).sum(axis=-1)
    if counts.min() != counts.max() or counts.min() < 1:
        raise PatternError("the mask is not bank-balanced (unequal or zero nonzeros per bank); "
                           "prune with --pattern bbs first")
    k = int(counts.flat[0])
    if fmt is None:
        fmt = Q.fitting(float(np.abs(w[mask]).max()), 8)
    # Column order inside each bank: a stable argsort of ~mask puts kept columns first, in order.
    mb = mask.reshape(rows, banks, size)
    idx = np.argsort(~mb, axis=-1, kind="stable")[..., :k]  # (rows, banks, k)
    vals = np.take_along_axis(w.reshape(rows, banks, size), idx, axis=-1)
    values = quantize(vals, fmt).transpose(0, 2, 1).copy()
    indices = idx.transpose(0, 2, 1).astype(np.int64).copy()
    return CSBMatrix((rows, cols), banks, fmt, values, indices)


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def manifest_digest(man: dict) -> str:
    """sha256 of a manifest's canonical JSON (sorted keys, no spaces), its own ``manifest_sha256`` left out."""
    body = {k: v for k, v in man.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(man: dict) -> dict:
    """``man`` with ``manifest_sha256`` set: every field of the manifest is covered by a checksum."""
    man["manifest_sha256"] = manifest_digest(man)
    return man


def check_seal(man: dict, path: Path) -> None:
    """FormatError unless ``man`` carries the checksum of its own fields (an edited field is refused)."""
    got = man.get("manifest_sha256")
    if not isinstance(got, str):
        raise FormatError(f"{path}: manifest has no manifest_sha256 (written by an older hwcosim, or edited); "
                          "export the weights again")
    if got != manifest_digest(man):
        raise FormatError(f"{path}: manifest fields do not match its manifest_sha256; the manifest was edited "
                          "after the export")


def check_file(path: Path, digest, what: str) -> None:
    """FormatError unless ``path`` exists and its sha256 is ``digest`` (memory images the FPGA loads)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FormatError(f"{path}: missing; the manifest lists this {what}") from None
    except OSError as e:
        raise FormatError(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    if not isinstance(digest, str) or hashlib.sha256(data).hexdigest() != digest:
        raise FormatError(f"{path}: the {what} does not match its sha256 in the manifest; it was changed after "
                          "the export")


def save(m: CSBMatrix, out_dir: str | Path, stem: str = "weights", extra: dict | None = None) -> dict:
    """Write ``<stem>.npz``, ``<stem>.json`` and ``<stem>.hex`` into ``out_dir`` (atomically).

    Returns the manifest.
    """
    out_dir = Path(out_dir)
    values = m.values.astype(np.int32)
    indices = m.indices.astype(np.uint16)
    buf = io.BytesIO()
    np.savez(buf, values=values, indices=indices)
    manifest = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION,
        "shape": list(m.shape), "banks": m.banks, "bank_size": m.bank_size, "k": m.k,
        "index_bits": m.index_bits, "value_format": m.fmt.to_dict(), "sparsity": m.sparsity,
        "arrays": {"values": {"dtype": "int32", "sha256": _sha(values)},
                   "indices": {"dtype": "uint16", "sha256": _sha(indices)}},
        "hex": {"file": f"{stem}.hex", "word_bits": m.banks * (m.fmt.width + m.index_bits),
                "lane_bits": m.fmt.width + m.index_bits, "order": "row, slot; lane b = bank b"},
        **(extra or {}),
    }
    digits = -(-manifest["hex"]["word_bits"] // 4)
    hex_text = "".join(f"{w:0{digits}x}\n" for w in m.words())
    manifest["hex"]["sha256"] = hashlib.sha256(hex_text.encode()).hexdigest()
    write_bytes(out_dir / f"{stem}.npz", buf.getvalue())
    write_text(out_dir / f"{stem}.hex", hex_text)
    seal(manifest)
    write_text(out_dir / f"{stem}.json", json.dumps(manifest, indent=2) + "\n")
    return manifest


def load(path: str | Path) -> CSBMatrix:
    """Read a CSB matrix from its manifest (``.json``), its ``.npz`` or their folder.

    Raises
    ------
    FormatError
        Missing files, a manifest of another format or version, checksums that do not match,
        arrays inconsistent with the manifest or with the CSB rules.
    """
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.json"))
        found = [f for f in found if _is_csb_manifest(f)]
        if len(found) != 1:
            raise FormatError(f"{path}: expected exactly one CSB manifest (*.json), found {len(found)}")
        path = found[0]
    if path.suffix == ".npz":
        path = path.with_suffix(".json")
    if not path.exists():
        raise FormatError(f"{path}: no such CSB manifest; give the .json written by 'hwcosim prune'")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise FormatError(f"{path}: cannot read the manifest ({e.strerror or e})") from None
    man = json_loads(raw, f"{path}: manifest", FormatError, "manifest")
    if not isinstance(man, dict) or man.get("format") != FORMAT_NAME:
        found = man.get("format") if isinstance(man, dict) else None
        raise FormatError(f"{path}: not a CSB manifest (format {found!r})")
    if man.get("version") != FORMAT_VERSION:
        raise FormatError(f"{path}: CSB version {man.get('version')!r} is not supported (want {FORMAT_VERSION})")
    check_seal(man, path)
    hx = man.get("hex")
    if not isinstance(hx, dict) or not isinstance(hx.get("file"), str) or Path(hx["file"]).name != hx["file"]:
        raise FormatError(f"{path}: manifest has no valid 'hex' entry (the $readmemh image)")
    check_file(path.parent / hx["file"], hx.get("sha256"), "$readmemh image")
    npz = path.with_suffix(".npz")
    from hwcosim.models.budget import check_npz

    check_npz(npz, FormatError, names={"values", "indices"})  # declared sizes vs the budget, before unpacking
    try:
        with open(npz, "rb") as f, np.load(f, allow_pickle=False) as z:  # (numpy leaks a handle it opens)
            values, indices = z["values"], z["indices"]
    except FileNotFoundError:
        raise FormatError(f"{npz}: missing; the manifest needs its .npz beside it") from None
    except Exception as e:  # zipfile/numpy raise many types on damaged bytes (incl. NotImplementedError)
        raise FormatError(f"{npz}: corrupt or truncated ({type(e).__name__}: {one_line(e)})") from None
    try:
        arrays = man["arrays"]
        for name, a in (("values", values), ("indices", indices)):
            if str(a.dtype) != arrays[name]["dtype"] or _sha(a) != arrays[name]["sha256"]:
                raise FormatError(f"{npz}: array {name!r} does not match the manifest checksum; "
                                  "the file is corrupt or from another export")
        shape = tuple(int(s) for s in man["shape"])
        if len(shape) != 2:
            raise UsageError(f"shape must have two entries, got {list(shape)}")
        banks, k = int(man["banks"]), int(man["k"])
        fmt = Q.from_dict(man["value_format"])
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"{path}: manifest is missing or has a bad field ({e})") from None
    if values.shape != (shape[0], k, banks):
        raise FormatError(f"{npz}: values have shape {values.shape}, manifest says ({shape[0]}, {k}, {banks})")
    return CSBMatrix(shape, banks, fmt, values.astype(np.int64), indices.astype(np.int64))


def _is_csb_manifest(f: Path) -> bool:
    try:
        return json.loads(f.read_text()).get("format") == FORMAT_NAME
    except (ValueError, RecursionError, MemoryError, AttributeError, OSError):
        return False
