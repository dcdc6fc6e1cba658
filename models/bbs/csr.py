"""Golden model of the unbalanced row-wise CSR SpMxV engine (the ESE-style baseline of BBS).

Cao et al. (FPGA 2019) compare bank-balanced sparsity against an engine that runs a matrix
pruned *unstructured* (global magnitude) to the same sparsity, on the same number of
multipliers, in a row-wise compressed format in the manner of ESE (Han et al., "ESE: Efficient
Speech Recognition Engine with Sparse LSTM on FPGA", FPGA 2017). This module is the
specification that :mod:`hwcosim.hdl.bbs.csr` meets bit for bit.

Engine (see :class:`hwcosim.hdl.bbs.csr.CSRSpMxV`). ``M`` processing elements, one multiplier each;
row ``r`` belongs to PE ``r % M`` (static interleaving, as ESE assigns rows to PEs). Each PE
holds its rows' nonzeros as a list of entries ``(value, column, last)`` (CSR order: row by row,
``last`` marks a row's final nonzero) and does one multiply-accumulate per cycle. A row without
nonzeros still costs one entry (value 0, ``last`` = 1) so that its zero result is produced.
A PE with a short list idles while the longest list finishes: the product ends when the most
loaded PE ends, ``max_p sum_{r in PE p} max(1, nnz(r))`` cycles. This imbalance is what
bank-balanced pruning removes.

Stream words (bit 0 = LSB), shared with :mod:`hwcosim.hdl.bbs.csr` and the cocotb testbench:

- weight beat ``t`` (``t < depth``, the longest list): ``M`` lanes, lane ``p`` at offset
  ``p * (W + C + 2)`` holding ``value`` (W bits, two's complement), ``col`` (C bits), ``last``
  and ``valid`` (1 bit each) from low to high; a lane with ``valid = 0`` is a bubble (PE ``p``'s
  list has ended). One more bit above all lanes marks the final beat of the product.
- vector beat ``t`` (``t < cols / L``): ``L`` elements, element ``l`` at offset ``l * XW``
  holding ``x[t * L + l]`` (plain order).
- output beat ``g`` (``g < rows / M``): ``M`` results, result ``p`` at offset ``p * OW`` for
  row ``g * M + p``.

Arithmetic is that of :mod:`hwcosim.models.bbs.spmxv`: exact products and sums, one requantisation of the
row sum to ``out_fmt`` (round half up, saturate). So on the same matrix the CSR engine and the
BBS engine produce the same words.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, acc_bits, requantize

__all__ = ["CSRParams", "CSRWeights", "PIPELINE_LATENCY", "encode", "decode", "spmxv_csr", "spmxv_entries",
           "pack_weight_beats", "pack_vector_beats", "unpack_output_beats", "CSRCycleModel", "pe_loads",
           "cycles_from_mask"]

#: Cycles from the final weight beat's acceptance to the first output beat's ``valid``:
#: vector read, multiply, accumulate, requantise into the result memory, result-memory read.
PIPELINE_LATENCY = 5


# Largest shapes the generator accepts (as for BBSParams): a typo is refused, not elaborated for hours.
_LIMITS = {"rows": 1 << 16, "cols": 1 << 16, "mults": 1024, "depth": 1 << 20, "lanes": 1024}


@dataclass(frozen=True)
class CSRParams:
    """Shape and formats of the CSR engine (one object for the model, RTL, testbench and build).

    Parameters
    ----------
    rows, cols : int
        Matrix shape; ``rows`` must divide by ``mults``, ``cols`` by ``lanes``.
    mults : int
        PEs M, one multiplier each (compare with ``P * B`` of the BBS engine).
    depth : int
        Entries per PE list the weight stream may carry (the longest list of the matrices to
        run; it sizes nothing in the RTL except the cycle model).
    lanes : int
        Vector elements per vector beat (L).
    weight_fmt, vec_fmt, out_fmt : Q
    """

    rows: int
    cols: int
    mults: int
    depth: int = 1
    lanes: int = 8
    weight_fmt: Q = field(default_factory=lambda: Q(2, 6))
    vec_fmt: Q = field(default_factory=lambda: Q(4, 12))
    out_fmt: Q = field(default_factory=lambda: Q(8, 8))

    def __post_init__(self):
        for name in ("rows", "cols", "mults", "depth", "lanes"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise UsageError(f"CSR {name} must be a positive integer, not {v!r}")
            if v > _LIMITS[name]:
                raise UsageError(f"CSR {name}={v} is beyond what this generator builds (at most "
                                 f"{_LIMITS[name]}); split the matrix into tiles or use fewer {name}")
        if self.rows % self.mults:
            raise UsageError(f"CSR: {self.rows} rows do not split over {self.mults} PEs; "
                             "use a PE count that divides the row count or pad with zero rows")
        if self.lanes & (self.lanes - 1):
            raise UsageError(f"CSR: lanes={self.lanes} must be a power of two (a column splits into "
                             "vector-word address and lane select)")
        if self.cols % self.lanes:
            raise UsageError(f"CSR: {self.cols} columns do not split into vector beats of {self.lanes}; "
                             "choose a lane count that divides the column count")
        for name in ("weight_fmt", "vec_fmt", "out_fmt"):
            if not isinstance(getattr(self, name), Q):
                raise UsageError(f"CSR {name} must be a models.fixedpoint.Q, not {getattr(self, name)!r}")

    @property
    def col_bits(self) -> int:
        return max(1, int(self.cols - 1).bit_length())

    @property
    def lane_width(self) -> int:
        return self.weight_fmt.width + self.col_bits + 2

    @property
    def row_groups(self) -> int:
        return self.rows // self.mults

    @property
    def vector_beats(self) -> int:
        return self.cols // self.lanes

    @property
    def acc_width(self) -> int:
        return acc_bits(self.weight_fmt, self.vec_fmt, self.cols)

    @property
    def acc_frac(self) -> int:
        return self.weight_fmt.frac_bits + self.vec_fmt.frac_bits

    def to_dict(self) -> dict:
        return {"rows": self.rows, "cols": self.cols, "mults": self.mults, "depth": self.depth,
                "lanes": self.lanes, "weight_fmt": self.weight_fmt.to_dict(), "vec_fmt": self.vec_fmt.to_dict(),
                "out_fmt": self.out_fmt.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> CSRParams:
        return cls(rows=int(d["rows"]), cols=int(d["cols"]), mults=int(d["mults"]), depth=int(d["depth"]),
                   lanes=int(d["lanes"]), weight_fmt=Q.from_dict(d["weight_fmt"]),
                   vec_fmt=Q.from_dict(d["vec_fmt"]), out_fmt=Q.from_dict(d["out_fmt"]))


@dataclass(frozen=True, eq=False)
class CSRWeights:
    """Per-PE entry lists, padded with bubbles to the longest: arrays of shape (depth, M).

    ``loads[p]`` is the length of PE ``p``'s list (multiplier-busy cycles per product);
    ``nnz`` the stored nonzeros (excluding empty-row entries).
    """

    value: np.ndarray
    col: np.ndarray
    last: np.ndarray
    valid: np.ndarray
    loads: np.ndarray
    nnz: int

    @property
    def depth(self) -> int:
        return int(self.value.shape[0])


def _check_matrix(p: CSRParams, w: np.ndarray) -> np.ndarray:
    w = np.asarray(w)
    if w.shape != (p.rows, p.cols):
        raise UsageError(f"matrix must have shape (rows, cols) = {(p.rows, p.cols)}, got {w.shape}")
    if not np.issubdtype(w.dtype, np.integer):
        raise UsageError(f"matrix must hold raw integers in {p.weight_fmt}, got dtype {w.dtype}")
    w = w.astype(np.int64)
    if w.min() < p.weight_fmt.min_raw or w.max() > p.weight_fmt.max_raw:
        raise UsageError(f"matrix values exceed the weight format {p.weight_fmt}")
    return w


def pe_loads(mask: np.ndarray, mults: int) -> np.ndarray:
    """Per-PE list lengths of a keep-mask (rows, cols) in the engine's row order: row ``r`` on PE
    ``r % mults``, ``max(1, nnz(r))`` entries per row (an empty row still costs its ``last``
    entry). Equals ``encode(p, w).loads`` for ``mask = (w != 0)``; vectorised, no encoding."""
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2 or mask.shape[0] % mults:
        raise UsageError(f"mask must be 2-D with a row count divisible by {mults} PEs, got shape {mask.shape}")
    per_row = np.maximum(np.count_nonzero(mask, axis=1), 1)
    return per_row.reshape(-1, mults).sum(axis=0).astype(np.int64)


def cycles_from_mask(p: CSRParams, mask: np.ndarray) -> dict:
    """Cycles per product of the engine on any matrix with nonzero pattern ``mask`` (rows, cols),
    in the engine's (physical) row order, without weights: what :class:`CSRCycleModel` gives for
    ``encode(p, w)`` with ``mask = (w != 0)`` (exact against the RTL).

    Returns dict ``per_product``, ``depth`` (longest PE list), ``ideal`` (``ceil(nnz / M)``),
    ``utilisation`` (stored nonzeros / (per_product * M)), ``nnz``, ``loads``.
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (p.rows, p.cols):
        raise UsageError(f"mask must have shape (rows, cols) = {(p.rows, p.cols)}, got {mask.shape}")
    loads = pe_loads(mask, p.mults)
    depth = int(loads.max())
    per = max(depth, p.vector_beats, p.row_groups)
    nnz = int(np.count_nonzero(mask))
    return {"per_product": per, "depth": depth, "ideal": -(-nnz // p.mults), "nnz": nnz,
            "utilisation": nnz / (per * p.mults), "loads": loads}


def encode(p: CSRParams, w: np.ndarray) -> CSRWeights:
    """Raw matrix (rows, cols) -> per-PE CSR entry lists (row ``r`` on PE ``r % M``)."""
    w = _check_matrix(p, w)
    M = p.mults
    per_pe: list[list[tuple[int, int, int]]] = [[] for _ in range(M)]
    for r in range(p.rows):  # encoding runs once per matrix; rows <= a few thousand
        cols = np.flatnonzero(w[r])
        ent = [(int(w[r, c]), int(c), 0) for c in cols] or [(0, 0, 0)]
        ent[-1] = (ent[-1][0], ent[-1][1], 1)
        per_pe[r % M].extend(ent)
    loads = np.array([len(e) for e in per_pe], dtype=np.int64)
    depth = int(loads.max())
    arr = np.zeros((4, depth, M), dtype=np.int64)
    for pe, ent in enumerate(per_pe):
        a = np.asarray(ent, dtype=np.int64)
        arr[0, :len(ent), pe], arr[1, :len(ent), pe], arr[2, :len(ent), pe] = a[:, 0], a[:, 1], a[:, 2]
        arr[3, :len(ent), pe] = 1
    return CSRWeights(value=arr[0], col=arr[1], last=arr[2], valid=arr[3], loads=loads,
                      nnz=int(np.count_nonzero(w)))


def decode(p: CSRParams, e: CSRWeights) -> np.ndarray:
    """Entry lists -> raw dense matrix (the inverse of :func:`encode`)."""
    w = np.zeros((p.rows, p.cols), dtype=np.int64)
    for pe in range(p.mults):
        r = pe
        for t in range(e.depth):
            if not e.valid[t, pe]:
                break
            w[r, e.col[t, pe]] += e.value[t, pe]
            if e.last[t, pe]:
                r += p.mults
    return w


#: Dense multiply-adds (vectors x rows x cols) from which :func:`spmxv_csr` uses the compiled exact
#: sparse product (:func:`hwcosim.models.csb_kernels.coo_mm_int`) instead of numpy's int64 matmul (which
#: has no BLAS path). Measured here (loaded 2-core host, best of 7, 87.5 % sparse): 256 x 72 with
#: 360 vectors 2.9 ms dense against 0.17 ms; 4096 x 2048 with 16 vectors 760 ms against 55 ms;
#: one vector of 256 x 72 0.009 ms dense against 0.013 ms, so the dense product stays for that.
#: Both are exact int64 sums, so the result is the same bit for bit either way.
_COMPILED_MIN_WORK = 1 << 16


def spmxv_csr(p: CSRParams, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bit-exact result of the engine on raw matrix ``w`` (rows, cols) and raw vector(s) ``x``
    ((cols,) or (n, cols)); int64 (rows,) or (n, rows) in ``out_fmt``."""
    w = _check_matrix(p, w)
    x = np.asarray(x, dtype=np.int64)
    single = x.ndim == 1
    xb = np.atleast_2d(x)
    if xb.shape[1] != p.cols:
        raise UsageError(f"vector length {xb.shape[1]} does not match the matrix's {p.cols} columns")
    if xb.min() < p.vec_fmt.min_raw or xb.max() > p.vec_fmt.max_raw:
        raise UsageError(f"vector values exceed the vector format {p.vec_fmt}")
    if xb.shape[0] * w.size >= _COMPILED_MIN_WORK:
        from hwcosim.models.csb_kernels import coo_mm_int  # numba loads here, not where testbenches import this

        r, c = np.nonzero(w)                   # row-major: each output row stays in cache
        acc = coo_mm_int(w[r, c], r, c, xb.T, p.rows).T
    else:
        acc = xb @ w.T
    y = requantize(acc, p.acc_frac, p.out_fmt)
    return y[0] if single else y


def spmxv_entries(p: CSRParams, e: CSRWeights, x: np.ndarray) -> np.ndarray:
    """The same result computed the way the engine does, entry by entry per PE (vectorised over
    PEs and vectors); used to check :func:`encode` against :func:`spmxv_csr`."""
    xb = np.atleast_2d(np.asarray(x, dtype=np.int64))
    n, M = xb.shape[0], p.mults
    acc = np.zeros((n, M), dtype=np.int64)
    row = np.zeros(M, dtype=np.int64)
    out = np.zeros((n, p.row_groups, M), dtype=np.int64)
    for t in range(e.depth):
        v = e.valid[t].astype(bool)
        acc += np.where(v, e.value[t] * xb[:, e.col[t]], 0)
        done = v & (e.last[t] == 1)
        pes = np.flatnonzero(done)
        out[:, row[pes], pes] = acc[:, pes]
        acc[:, pes] = 0
        row[pes] += 1
    y = requantize(out.reshape(n, p.rows), p.acc_frac, p.out_fmt)
    return y[0] if np.asarray(x).ndim == 1 else y


def _lanes_to_words(lanes: np.ndarray, width: int) -> list[int]:
    words = np.zeros(lanes.shape[0], dtype=object)
    for i in range(lanes.shape[1]):
        words += lanes[:, i].astype(object) << (i * width)
    return [int(w) for w in words]


def pack_weight_beats(p: CSRParams, e: CSRWeights) -> list[int]:
    """Weight stream for one product: ``e.depth`` beats of ``M`` lanes + the end-of-product bit."""
    W, C = p.weight_fmt.width, p.col_bits
    if e.value.shape[1] != p.mults:
        raise UsageError(f"entry lists are for {e.value.shape[1]} PEs, the engine has {p.mults}")
    lane = ((e.value & ((1 << W) - 1)) | (e.col << W) | (e.last << (W + C)) | (e.valid << (W + C + 1)))
    words = _lanes_to_words(lane, p.lane_width)
    words[-1] |= 1 << (p.mults * p.lane_width)
    return words


def pack_vector_beats(p: CSRParams, x: np.ndarray) -> list[int]:
    x = np.asarray(x, dtype=np.int64)
    if x.shape != (p.cols,):
        raise UsageError(f"vector must have shape ({p.cols},), got {x.shape}")
    xw = p.vec_fmt.width
    return _lanes_to_words((x & ((1 << xw) - 1)).reshape(p.vector_beats, p.lanes), xw)


def unpack_output_beats(p: CSRParams, words: list[int]) -> np.ndarray:
    ow = p.out_fmt.width
    mask = (1 << ow) - 1
    out = np.empty((len(words), p.mults), dtype=np.int64)
    for g, word in enumerate(words):
        for lane in range(p.mults):
            v = (int(word) >> (lane * ow)) & mask
            out[g, lane] = v - (1 << ow) if v >> (ow - 1) else v
    return out.reshape(-1)


@dataclass(frozen=True)
class CSRCycleModel:
    """Cycles of the CSR engine with streams that never stall, exact against the RTL.

    Per product the weight port takes ``depth`` beats (the longest PE list); vector ``n + 1``
    (``cols / L`` beats) loads into the idle buffer meanwhile; ``rows / M`` output beats leave
    from a double-buffered result memory while the next product computes. From the first vector
    beat accepted to the last output beat: ``V + (n-1) * max(depth, V, G) + depth +
    PIPELINE_LATENCY + G - 1`` with ``V = cols/L``, ``G = rows/M``.
    """

    p: CSRParams
    e: CSRWeights

    def per_product(self) -> int:
        return max(self.e.depth, self.p.vector_beats, self.p.row_groups)

    def expected(self, n_vectors: int = 1) -> int:
        p = self.p
        return (p.vector_beats + (n_vectors - 1) * self.per_product() + self.e.depth + PIPELINE_LATENCY
                + p.row_groups - 1)

    def ideal(self, n_vectors: int = 1) -> int:
        """Every multiplier busy with a stored nonzero: ``ceil(nnz / M)`` per product."""
        return n_vectors * -(-self.e.nnz // self.p.mults)

    def utilisation(self, cycles_per_product: float) -> float:
        """Fraction of multiplier-cycles doing a stored nonzero."""
        return self.e.nnz / (cycles_per_product * self.p.mults)
