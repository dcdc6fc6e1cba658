"""CSB (bank-balanced sparse) products: SpMV and SpMM, float32/float64 and exact integer; compiled
with a numpy fallback. The one CSB kernel module of the toolkit.

Cao et al., FPGA 2019 (BBS and its CSB format). A CSB matrix holds, for every row, ``k`` values
per bank of ``bank_size`` columns, with the column inside the bank as a small integer: one byte
when ``bank_size <= 256`` (two otherwise), 5 bytes per nonzero in float32 against 8 for a CSR
matrix with int32 column indices (plus its row pointers). Balance is what makes the loop simple:
every row has the same length, so there is no row pointer, and the row loop splits evenly over
threads. For the product the in-bank index is widened once to a 16-bit column (up to 65,536
columns; 6 bytes per nonzero): adding the bank's base column inside the loop costs more than the
byte it saves (measured on 4096 x 4096 at 90%: 1.17x scipy from uint8 plus a base table, 1.9x
from uint16 columns).

The kernels are numba functions (``nogil``; the ``_par`` variants use ``prange`` over rows):

- :func:`spmv`: ``y[r] = sum_{j,b} V[r,j,b] * x[b * bank_size + I[r,j,b]]``;
- :func:`spmm`: the same for a batch ``X`` of shape (batch, cols) -> (batch, rows), each
  gathered column read once per row for the whole batch;
- integer inputs (raw fixed-point values and vectors) give exact int64 accumulations, the
  ones :func:`hwcosim.models.bbs.spmxv.spmxv` requantises (it uses :func:`spmm_int`).

The numpy path (Cao et al.'s balance again: every row holds the same ``k * banks`` nonzeros, so the
product is a dense gather followed by a batched dot product, ``y[r] = sum_n V[r, n] * x[C[r, n]]``
with ``V``, ``C`` of shape ``(rows, k * banks)``; SpMM over row chunks so the gathered block stays
small) runs when numba is not installed, for tiny products (below :data:`TINY_WORK` multiply-adds,
where loading the compiled kernel costs more than any product saves), or when asked for
(``backend="numpy"``). Both paths give the same int64 sums for integer inputs; float sums agree to
rounding (the compiled loop reassociates: ``fastmath``).

:class:`CSBPacked` keeps the packed arrays (contiguous, index dtype chosen by the bank size);
``threads`` selects the serial or the parallel kernel (numba's thread count is set by
``numba.set_num_threads``). ``W @ x`` (``x`` of shape (cols,) or (cols, batch)) is the
column-major form of :meth:`CSBPacked.spmm` (batch, cols).
"""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError

try:  # numba is a declared dependency; the numpy fallback keeps models importable without it
    from numba import njit, prange

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

__all__ = ["CSBPacked", "spmv", "spmm", "spmm_int", "coo_mm_int", "csb_columns", "HAVE_NUMBA", "TINY_WORK",
           "BACKENDS", "index_dtype"]

#: products of fewer multiply-adds (nonzeros x batch) take the numpy path under ``backend="auto"``
TINY_WORK = 1024
#: ``backend`` values: ``auto`` (compiled unless numba is missing or the product is tiny), ``numba``, ``numpy``
BACKENDS = ("auto", "numba", "numpy")


def index_dtype(bank_size: int):
    """The narrowest unsigned type holding an in-bank index: uint8 up to 256 columns per bank."""
    return np.uint8 if bank_size <= 256 else np.uint16 if bank_size <= 65536 else np.uint32


if HAVE_NUMBA:
    # v: (rows, K) values; col: (rows, K) unsigned column of each value (uint16 up to 65536 columns).
    # Unsigned indices spare numba's negative-index check; float32 accumulates in float32 (as
    # scipy's float32 CSR does), integers exactly in int64. Two accumulators hide the add latency.
    @njit(nogil=True, cache=True, fastmath=True, inline="always")
    def _row(v, col, x, r):
        K = v.shape[1]
        a0 = v.dtype.type(0)
        a1 = v.dtype.type(0)
        n = 0
        while n + 1 < K:
            a0 += v[r, n] * x[col[r, n]]
            a1 += v[r, n + 1] * x[col[r, n + 1]]
            n += 2
        if n < K:
            a0 += v[r, n] * x[col[r, n]]
        return a0 + a1

    @njit(nogil=True, cache=True, fastmath=True)
    def _spmv(v, col, x, y):
        for r in range(v.shape[0]):
            y[r] = _row(v, col, x, r)

    @njit(nogil=True, cache=True, parallel=True, fastmath=True)
    def _spmv_par(v, col, x, y):
        for r in prange(v.shape[0]):
            y[r] = _row(v, col, x, r)

    @njit(nogil=True, cache=True, fastmath=True, inline="always")
    def _mm_rows(v, col, xt, yt, r0, r1, acc):
        # rows r0..r1-1: four nonzeros per pass over the batch, so each partial row of yt is loaded
        # and stored once per four gathered rows of xt (1.8-2.5x scipy's CSR x dense at batch 8-64,
        # against 0.8x for one nonzero per pass, measured here)
        K = v.shape[1]
        batch = xt.shape[1]
        for r in range(r0, r1):
            for m in range(batch):
                yt[r, m] = 0
            n = 0
            while n + 3 < K:
                w0 = v[r, n]
                w1 = v[r, n + 1]
                w2 = v[r, n + 2]
                w3 = v[r, n + 3]
                c0 = col[r, n]
                c1 = col[r, n + 1]
                c2 = col[r, n + 2]
                c3 = col[r, n + 3]
                for m in range(batch):
                    yt[r, m] += (w0 * xt[c0, m] + w1 * xt[c1, m]) + (w2 * xt[c2, m] + w3 * xt[c3, m])
                n += 4
            while n < K:
                w0 = v[r, n]
                c0 = col[r, n]
                for m in range(batch):
                    yt[r, m] += w0 * xt[c0, m]
                n += 1

    @njit(nogil=True, cache=True, fastmath=True)
    def _spmm(v, col, xt, yt):
        # xt: (cols, batch) contiguous; yt: (rows, batch): each gathered row of xt serves the whole batch
        acc = np.empty(xt.shape[1], dtype=yt.dtype)
        _mm_rows(v, col, xt, yt, 0, v.shape[0], acc)

    @njit(nogil=True, cache=True, parallel=True, fastmath=True)
    def _spmm_par(v, col, xt, yt, chunks):
        rows = v.shape[0]
        step = (rows + chunks - 1) // chunks
        for c in prange(chunks):
            acc = np.empty(xt.shape[1], dtype=yt.dtype)
            _mm_rows(v, col, xt, yt, c * step, min(rows, (c + 1) * step), acc)


def csb_columns(indices: np.ndarray, bank_size: int) -> np.ndarray:
    """Global column of every CSB slot: in-bank ``indices`` (rows, k, banks) -> int64 (rows, k * banks)."""
    rows, _, banks = indices.shape
    offs = np.arange(banks, dtype=np.int64) * bank_size
    return (indices.astype(np.int64) + offs).reshape(rows, -1)


# ---- the numpy path: a gather, then a batched dot product (no per-row loop) ----------------------
def _numpy_spmv(v, cols, x):
    return np.einsum("ij,ij->i", v, np.take(x, cols))


def _numpy_spmm(v, cols, xt, chunk_elems: int = 1 << 17):
    # xt (cols, batch) -> (rows, batch); loop over row chunks only, each chunk one batched matmul, so
    # the gathered block (rows in the chunk, nnz, batch) stays below chunk_elems elements
    rows, nnz = v.shape
    batch = xt.shape[1]
    out = np.empty((rows, batch), dtype=np.result_type(v.dtype, xt.dtype))
    step = max(1, chunk_elems // max(1, nnz * batch))
    for s in range(0, rows, step):
        g = np.take(xt, cols[s : s + step], axis=0)  # take is faster than fancy indexing here
        out[s : s + step] = np.matmul(v[s : s + step, None, :], g)[:, 0, :]
    return out


class CSBPacked:
    """A CSB matrix packed for the compiled kernels.

    Parameters
    ----------
    values : array (rows, k, banks)
        Float values (computed in ``dtype``), or integers (raw fixed point: exact int64 products).
    indices : int array (rows, k, banks)
        In-bank column of each value, in ``[0, bank_size)``.
    bank_size : int
    dtype : float dtype, optional
        Compute dtype of float values: float32 (default) or float64. Integers always compute in int64.
    backend : str
        ``auto`` (default: compiled, numpy when numba is missing or a product is below
        :data:`TINY_WORK` multiply-adds), ``numba`` (compiled; numpy only without numba) or ``numpy``.
    """

    def __init__(self, values, indices, bank_size: int, dtype=None, backend: str = "auto"):
        values = np.asarray(values)
        indices = np.asarray(indices)
        if values.ndim != 3 or values.shape != indices.shape:
            raise UsageError(f"CSB values and indices must share a (rows, k, banks) shape; got {values.shape}, "
                             f"{indices.shape}")
        if bank_size < 1 or (indices.size and (indices.min() < 0 or indices.max() >= bank_size)):
            raise UsageError(f"CSB in-bank indices must lie in [0, bank_size={bank_size})")
        if backend not in BACKENDS:
            raise UsageError(f"CSB backend {backend!r} must be one of {BACKENDS}")
        self.backend = backend
        self.integer = values.dtype.kind in "iub"
        fdt = np.dtype(np.float32 if dtype is None else dtype)
        if not self.integer and fdt not in (np.float32, np.float64):
            raise UsageError(f"CSB float values compute in float32 or float64, not {fdt}")
        self.rows, self.k, self.banks = values.shape
        K = self.k * self.banks
        self.bank_size = int(bank_size)
        self.cols = self.banks * self.bank_size
        self.v = np.ascontiguousarray(values.reshape(self.rows, K), dtype=np.int64 if self.integer else fdt)
        #: the storage layout: the column inside the bank, one byte up to 256 columns per bank
        self.idx = np.ascontiguousarray(indices.reshape(self.rows, K), dtype=index_dtype(bank_size))
        #: the compute layout: the column, 16 bits up to 65536 columns. Adding the bank base in the loop
        #: costs more than the extra byte (4096 x 4096 at 90%: 1.17x scipy from uint8 + a base table,
        #: 1.9x from uint16 columns, measured here), so the kernels read these.
        cdt = np.uint16 if self.cols <= 1 << 16 else np.uint32
        base = np.arange(self.banks, dtype=np.int64) * self.bank_size
        self.col = np.ascontiguousarray((self.idx.reshape(self.rows, self.k, self.banks) + base).reshape(self.rows, K),
                                        dtype=cdt)
        self.cols = self.banks * self.bank_size
        self._np_col = None                     # intp columns for the numpy path, made on first use

    @classmethod
    def from_csb(cls, m, dtype=np.float32, backend: str = "auto") -> CSBPacked:
        """From a :class:`hwcosim.pruning.formats.csb.CSBMatrix`: its dequantised values in ``dtype``."""
        return cls(m.values * m.fmt.lsb, m.indices, m.bank_size, dtype=dtype, backend=backend)

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of the matrix."""
        return (self.rows, self.cols)

    def _use_numpy(self, batch: int, backend: str | None) -> bool:
        b = self.backend if backend is None else backend
        if b not in BACKENDS:
            raise UsageError(f"CSB backend {b!r} must be one of {BACKENDS}")
        return not HAVE_NUMBA or b == "numpy" or (b == "auto" and self.v.size * batch < TINY_WORK)

    def _cols_np(self):
        if self._np_col is None:
            self._np_col = self.col.astype(np.intp)
        return self._np_col

    @property
    def nnz(self) -> int:
        return self.v.size

    @property
    def nbytes(self) -> int:
        """Bytes of the stored matrix (values + in-bank indices): 5 per nonzero in float32/uint8."""
        return self.v.nbytes + self.idx.nbytes

    @property
    def compute_nbytes(self) -> int:
        """Bytes a product streams (values + 16-bit columns): 6 per nonzero in float32."""
        return self.v.nbytes + self.col.nbytes

    def _x(self, x, batch: bool):
        x = np.asarray(x)
        if self.integer:
            if x.dtype.kind not in "iub":
                raise UsageError("an integer CSB matrix takes integer (raw fixed-point) vectors")
            x = x.astype(np.int64)
        else:
            x = x.astype(self.v.dtype, copy=False)
        want = 2 if batch else 1
        if x.ndim != want or x.shape[-1] != self.cols:
            raise UsageError(f"x must have shape {'(batch, ' if batch else '('}{self.cols}), got {x.shape}")
        return x

    def spmv(self, x, threads: int = 1, backend: str | None = None) -> np.ndarray:
        """``W @ x`` for one vector ``x`` (cols,) -> (rows,). ``backend`` overrides the matrix's."""
        x = np.ascontiguousarray(self._x(x, False))
        if self._use_numpy(1, backend):
            return _numpy_spmv(self.v, self._cols_np(), x)
        if self.integer:  # exact: the batched kernel accumulates in int64
            return self._mm(x[:, None], threads, backend)[:, 0]
        y = np.empty(self.rows, dtype=self.v.dtype)
        (_spmv_par if threads > 1 else _spmv)(self.v, self.col, x, y)
        return y

    def _mm(self, xt, threads: int, backend: str | None) -> np.ndarray:
        # xt: (cols, batch) of the compute dtype -> (rows, batch)
        if self._use_numpy(xt.shape[1], backend):
            return _numpy_spmm(self.v, self._cols_np(), xt)
        xt = np.ascontiguousarray(xt)
        yt = np.empty((self.rows, xt.shape[1]), dtype=self.v.dtype)
        if threads > 1:
            _spmm_par(self.v, self.col, xt, yt, max(threads, min(self.rows, 8 * threads)))
        else:
            _spmm(self.v, self.col, xt, yt)
        return yt

    def spmm(self, X, threads: int = 1, backend: str | None = None) -> np.ndarray:
        """``X @ W.T`` for a batch ``X`` (batch, cols) -> (batch, rows)."""
        X = self._x(X, True)
        return np.ascontiguousarray(self._mm(X.T, threads, backend).T)

    def matmul(self, x, threads: int = 1, backend: str | None = None) -> np.ndarray:
        """``W @ x`` with ``x`` of shape (cols,) -> (rows,) or (cols, batch) -> (rows, batch)."""
        x = np.asarray(x)
        if x.ndim == 1:
            return self.spmv(x, threads, backend)
        if x.ndim != 2 or x.shape[0] != self.cols:
            raise UsageError(f"x must have shape ({self.cols},) or ({self.cols}, batch), got {x.shape}")
        return self._mm(self._x(x.T, True).T, threads, backend)

    def __matmul__(self, x):
        return self.matmul(x)


def spmv(values, indices, x, bank_size: int, threads: int = 1, dtype=None, backend: str = "auto") -> np.ndarray:
    """One-shot SpMV (packs the matrix first; keep a :class:`CSBPacked` for repeated products)."""
    return CSBPacked(values, indices, bank_size, dtype=dtype, backend=backend).spmv(x, threads)


def spmm(values, indices, X, bank_size: int, threads: int = 1, dtype=None, backend: str = "auto") -> np.ndarray:
    """One-shot SpMM: ``X`` (batch, cols) -> (batch, rows)."""
    return CSBPacked(values, indices, bank_size, dtype=dtype, backend=backend).spmm(X, threads)


def spmm_int(values, indices, X, bank_size: int) -> np.ndarray:
    """Exact int64 accumulations of integer CSB ``values`` times integer vectors ``X`` (n, cols)."""
    return CSBPacked(np.asarray(values, dtype=np.int64), indices, bank_size).spmm(np.asarray(X, dtype=np.int64))


# ---- integer COO product (FSS regions: the nonzeros are not balanced per row) -------------------
if HAVE_NUMBA:
    @njit(nogil=True, cache=True)
    def _coo_mm_int(v, r, c, x, y):
        # y[r[k], :] += v[k] * x[c[k], :], nonzeros in row-major order (each output row stays in
        # cache while its nonzeros stream past); int64 throughout, so the sums are exact
        T = x.shape[1]
        for k in range(v.shape[0]):
            w = v[k]
            rk = r[k]
            ck = c[k]
            for m in range(T):
                y[rk, m] += w * x[ck, m]


def coo_mm_int(values, rows, cols, x, n_rows: int) -> np.ndarray:
    """Exact ``W @ x`` (int64) for integer nonzeros ``values`` at (``rows``, ``cols``) and integer
    ``x`` of shape (cols, T); the nonzeros should be sorted by row for speed (any order is exact)."""
    v = np.ascontiguousarray(values, dtype=np.int64)
    r = np.ascontiguousarray(rows, dtype=np.int64)
    c = np.ascontiguousarray(cols, dtype=np.int64)
    x = np.ascontiguousarray(x, dtype=np.int64)
    y = np.zeros((n_rows, x.shape[1]), dtype=np.int64)
    if HAVE_NUMBA:
        _coo_mm_int(v, r, c, x, y)
    else:  # pragma: no cover
        np.add.at(y, r, v[:, None] * x[c])
    return y
