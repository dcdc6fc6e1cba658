"""Balanced / bank-balanced sparse matrix-vector and matrix-matrix products in numpy, working
directly on CSB arrays.

Cao et al., FPGA 2019 (BBS, CSB format) and Yao et al., AAAI 2019 (Balanced Sparsity, whose
masks equal BBS with ``bank_size = block``; see :mod:`hwcosim.pruning.patterns.balanced`). A CSB matrix
holds ``values`` and in-bank ``indices`` of shape ``(rows, k, banks)``; the column of slot
``(r, j, b)`` is ``b * bank_size + indices[r, j, b]``. Because every row holds the same
``k * banks`` nonzeros, the product is a dense gather followed by a batched dot product: no row
pointers, no per-row loop, no load imbalance:

- SpMV: ``y[r] = sum_n V[r, n] * x[C[r, n]]`` with ``V``, ``C`` of shape ``(rows, k * banks)``;
- SpMM: ``Y[r, :] = sum_n V[r, n] * X[C[r, n], :]``, evaluated over row chunks so the gathered
  block ``X[C]`` stays small (``chunk_elems`` elements).

Integer (raw fixed-point) values and vectors give exact int64 results, as the golden model
:mod:`hwcosim.models.bbs.spmxv` computes before requantisation. :class:`CSBKernel` precomputes the global
column indices once (as a CSR matrix stores its column indices), which is what a repeated
product (an LSTM step, a benchmark) should use.
"""

from __future__ import annotations

import numpy as np

__all__ = ["csb_columns", "csb_spmv", "csb_spmm", "CSBKernel"]


def _check(values: np.ndarray, indices: np.ndarray, bank_size: int) -> None:
    if values.ndim != 3 or values.shape != indices.shape:
        raise ValueError(
            f"CSB values and indices must share a (rows, k, banks) shape; got {values.shape}, {indices.shape}"
        )
    if bank_size < 1 or (indices.size and (indices.min() < 0 or indices.max() >= bank_size)):
        raise ValueError(f"CSB in-bank indices must lie in [0, bank_size={bank_size})")


def csb_columns(indices: np.ndarray, bank_size: int) -> np.ndarray:
    """Global column of every CSB slot: (rows, k, banks) -> int64 (rows, k * banks)."""
    rows, _, banks = indices.shape
    offs = np.arange(banks, dtype=np.int64) * bank_size
    return (indices.astype(np.int64) + offs).reshape(rows, -1)


def _result_dtype(values, x):
    return np.result_type(values.dtype, x.dtype)


def csb_spmv(values: np.ndarray, indices: np.ndarray, x: np.ndarray, bank_size: int) -> np.ndarray:
    """``W @ x`` for a CSB matrix ``W`` of ``banks * bank_size`` columns.

    Parameters
    ----------
    values, indices : arrays (rows, k, banks)
    x : array (banks * bank_size,)
    bank_size : int

    Returns
    -------
    array (rows,) of ``result_type(values, x)``
    """
    _check(values, indices, bank_size)
    cols = csb_columns(indices, bank_size)
    x = np.asarray(x)
    if x.shape != (values.shape[2] * bank_size,):
        raise ValueError(f"x must have shape ({values.shape[2] * bank_size},), got {x.shape}")
    return np.einsum("ij,ij->i", values.reshape(values.shape[0], -1), np.take(x, cols))


def _spmm(v: np.ndarray, cols: np.ndarray, X: np.ndarray, chunk_elems: int) -> np.ndarray:
    rows, nnz = v.shape
    batch = X.shape[1]
    out = np.empty((rows, batch), dtype=np.result_type(v.dtype, X.dtype))
    step = max(1, chunk_elems // max(1, nnz * batch))
    for s in range(0, rows, step):  # loop over row chunks only; each chunk is one batched matmul
        g = np.take(X, cols[s : s + step], axis=0)  # (rc, nnz, batch); take is ~3x faster than X[idx]
        out[s : s + step] = np.matmul(v[s : s + step, None, :], g)[:, 0, :]
    return out


def csb_spmm(
    values: np.ndarray, indices: np.ndarray, X: np.ndarray, bank_size: int, chunk_elems: int = 1 << 17
) -> np.ndarray:
    """``W @ X`` for a CSB matrix ``W`` and a dense ``X`` of shape (cols, batch).

    Returns an array (rows, batch). ``chunk_elems`` bounds the gathered temporary.
    """
    _check(values, indices, bank_size)
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] != values.shape[2] * bank_size:
        raise ValueError(f"X must have shape ({values.shape[2] * bank_size}, batch), got {X.shape}")
    return _spmm(values.reshape(values.shape[0], -1), csb_columns(indices, bank_size), X, chunk_elems)


class CSBKernel:
    """A CSB matrix prepared for repeated products (global columns computed once).

    Parameters
    ----------
    values, indices : arrays (rows, k, banks)
    bank_size : int
    dtype : numpy dtype, optional
        Compute dtype of the values (default: keep theirs).
    """

    def __init__(self, values: np.ndarray, indices: np.ndarray, bank_size: int, dtype=None):
        _check(values, indices, bank_size)
        self.shape = (values.shape[0], values.shape[2] * bank_size)
        self.v = np.ascontiguousarray(values.reshape(values.shape[0], -1), dtype=dtype)
        cols = csb_columns(indices, bank_size)
        self.cols = cols.astype(np.int32) if self.shape[1] < 2**31 else cols

    @classmethod
    def from_csb(cls, m, dtype=np.float64) -> CSBKernel:
        """From a :class:`hwcosim.pruning.formats.csb.CSBMatrix` (dequantised values)."""
        return cls(m.values * m.fmt.lsb, m.indices, m.bank_size, dtype=dtype)

    def spmv(self, x: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", self.v, np.take(x, self.cols))

    def spmm(self, X: np.ndarray, chunk_elems: int = 1 << 17) -> np.ndarray:
        if X.ndim == 1:
            return self.spmv(X)
        return _spmm(self.v, self.cols, X, chunk_elems)

    def __matmul__(self, x):
        return self.spmm(np.asarray(x))
