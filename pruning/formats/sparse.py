"""CSR and BSR storage, interoperable with :mod:`scipy.sparse`.

The general-purpose formats the structured ones are measured against (Yao et al., AAAI 2019,
compare Balanced Sparsity with CSR-based unstructured sparsity and with block sparsity, whose
natural container is BSR). :func:`to_csr` / :func:`to_bsr` turn a weight matrix and a
keep-mask into a ``scipy.sparse`` array that stores exactly the kept entries (a kept weight that
happens to be zero is stored too, so the mask survives a round trip); :func:`from_scipy` goes
back to ``(dense, mask)``.

On disk: ``<stem>.npz`` with ``data``, ``indices`` (int32), ``indptr`` (int64) in scipy's
canonical layout (column indices sorted and unique within a row; BSR ``data`` is
``(nnz_blocks, b_r, b_c)``), and ``<stem>.json`` (manifest ``hwcosim-csr`` v1: kind ``csr`` or
``bsr``, shape, blocksize, nnz, value format or ``null``, sha256s). With a value format the
data are stored as raw fixed-point int32 and :func:`load` dequantises them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, dequantize, quantize
from hwcosim.pruning.base import PatternError
from hwcosim.pruning.formats._bundle import field, load_bundle, save_bundle
from hwcosim.pruning.formats.csb import FormatError
from hwcosim.pruning.patterns._common import pair, split

__all__ = ["to_csr", "to_bsr", "from_scipy", "save", "load", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "hwcosim-csr"
FORMAT_VERSION = 1


def _check(w, mask):
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2:
        raise PatternError(f"CSR/BSR hold 2-D matrices, got shape {w.shape}")
    mask = np.ones(w.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if mask.shape != w.shape:
        raise PatternError(f"mask shape {mask.shape} differs from weight shape {w.shape}")
    return w, mask


def to_csr(w: np.ndarray, mask: np.ndarray | None = None) -> sp.csr_array:
    """CSR of ``w`` (rows, cols) storing exactly the entries where ``mask`` is True (default: all)."""
    w, mask = _check(w, mask)
    r, c = np.nonzero(mask)  # row-major, so columns are sorted within each row
    indptr = np.zeros(w.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=w.shape[0]), out=indptr[1:])
    return sp.csr_array((w[r, c], c.astype(np.int32), indptr), shape=w.shape)


def to_bsr(w: np.ndarray, mask: np.ndarray | None, blocksize) -> sp.bsr_array:
    """BSR with ``blocksize`` (b_r, b_c) tiles, storing the tiles where ``mask`` is set.

    The mask must keep or prune each tile whole (block sparsity); a partly kept tile is refused.
    """
    w, mask = _check(w, mask)
    br, bc = pair(blocksize, "BSR blocksize")
    gr, gc = split(w.shape, (br, bc), "block")
    t = mask.reshape(gr, br, gc, bc)
    anyk, allk = t.any(axis=(1, 3)), t.all(axis=(1, 3))
    if (anyk != allk).any():
        raise PatternError(
            f"the mask keeps some {br}x{bc} blocks partly; BSR needs whole blocks "
            "(prune with --pattern block)"
        )
    bi, bj = np.nonzero(allk)
    data = w.reshape(gr, br, gc, bc).transpose(0, 2, 1, 3)[bi, bj]
    indptr = np.zeros(gr + 1, dtype=np.int64)
    np.cumsum(np.bincount(bi, minlength=gr), out=indptr[1:])
    return sp.bsr_array((data, bj.astype(np.int32), indptr), shape=w.shape, blocksize=(br, bc))


def from_scipy(a) -> tuple[np.ndarray, np.ndarray]:
    """``(dense float64, mask)`` of any scipy sparse array or matrix; the mask marks stored entries."""
    if not sp.issparse(a):
        raise PatternError(f"expected a scipy.sparse array, got {type(a).__name__}")
    coo = a.tocoo()
    dense = np.zeros(a.shape, dtype=np.float64)
    mask = np.zeros(a.shape, dtype=bool)
    np.add.at(dense, (coo.row, coo.col), coo.data.astype(np.float64))
    mask[coo.row, coo.col] = True
    return dense, mask


def save(
    a, out_dir: str | Path, stem: str = "weights", fmt: Q | None = None, extra: dict | None = None
) -> dict:
    """Write a scipy CSR or BSR array as ``<stem>.npz`` + ``<stem>.json`` (atomically).

    Other scipy formats are converted to CSR. With ``fmt`` the values are quantised (raw int32).
    """
    if not sp.issparse(a):
        raise PatternError(f"expected a scipy.sparse array, got {type(a).__name__}")
    kind = "bsr" if a.format == "bsr" else "csr"
    a = a.copy() if kind == "bsr" else a.tocsr(copy=True)
    a.sum_duplicates()
    a.sort_indices()
    data = np.asarray(a.data)
    data = quantize(data, fmt).astype(np.int32) if fmt is not None else data.astype(np.float64)
    blocksize = list(a.blocksize) if kind == "bsr" else [1, 1]
    fields = {
        "kind": kind,
        "shape": list(a.shape),
        "blocksize": blocksize,
        "nnz": int(a.nnz),
        "value_format": fmt.to_dict() if fmt is not None else None,
        **(extra or {}),
    }
    arrays = {"data": data, "indices": a.indices.astype(np.int32), "indptr": a.indptr.astype(np.int64)}
    return save_bundle(out_dir, stem, FORMAT_NAME, FORMAT_VERSION, arrays, fields)


def _two_ints(s) -> list[int]:
    out = [int(x) for x in s]
    if len(out) != 2:
        raise UsageError(f"expected two integers, got {len(out)}")
    return out


def load(path: str | Path):
    """Read a CSR/BSR file; returns ``(scipy array, Q or None)`` with float64 data.

    Raises
    ------
    FormatError
        Corrupt, truncated or mismatched files; pointers or indices that break scipy's
        canonical layout (non-monotone ``indptr``, out-of-range or unsorted column indices).
    """
    man, arrays, mpath = load_bundle(path, FORMAT_NAME, FORMAT_VERSION)
    kind = field(man, "kind", mpath, str)
    rows, cols = field(man, "shape", mpath, _two_ints)
    br, bc = field(man, "blocksize", mpath, _two_ints)
    fmt = man.get("value_format")
    fmt = None if fmt is None else field(man, "value_format", mpath, Q.from_dict)
    data, indices, indptr = arrays.get("data"), arrays.get("indices"), arrays.get("indptr")
    if data is None or indices is None or indptr is None:
        raise FormatError(f"{mpath}: the .npz needs arrays data, indices and indptr")
    if kind not in ("csr", "bsr") or br < 1 or bc < 1 or rows % br or cols % bc:
        raise FormatError(f"{mpath}: bad kind {kind!r} or blocksize {br}x{bc} for shape {rows}x{cols}")
    gr, gc = rows // br, cols // bc
    want_data = (indices.size, br, bc) if kind == "bsr" else (indices.size,)
    if indptr.shape != (gr + 1,) or indices.ndim != 1 or data.shape != want_data:
        raise FormatError(
            f"{mpath}: array shapes do not fit a {kind} of {rows}x{cols} "
            f"(indptr {indptr.shape}, indices {indices.shape}, data {data.shape})"
        )
    if indptr[0] != 0 or indptr[-1] != indices.size or (np.diff(indptr) < 0).any():
        raise FormatError(f"{mpath}: indptr must start at 0, never decrease and end at nnz={indices.size}")
    if indices.size and (indices.min() < 0 or indices.max() >= gc):
        raise FormatError(f"{mpath}: column indices must lie in [0, {gc})")
    starts = np.zeros(indices.size, dtype=bool)
    starts[indptr[:-1][indptr[:-1] < indices.size]] = True
    if indices.size > 1 and not ((np.diff(indices) > 0) | starts[1:]).all():
        raise FormatError(f"{mpath}: column indices must be sorted and unique within each row")
    values = dequantize(data, fmt) if fmt is not None else data.astype(np.float64)
    if kind == "bsr":
        return sp.bsr_array((values, indices, indptr), shape=(rows, cols), blocksize=(br, bc)), fmt
    return sp.csr_array((values, indices, indptr), shape=(rows, cols)), fmt
