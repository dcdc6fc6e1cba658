"""Golden model of the BBS sparse matrix-vector (SpMxV) engine: the specification the RTL meets.

Cao et al., "Efficient and Effective Sparse LSTM on FPGA with Bank-Balanced Sparsity",
FPGA 2019 (doi 10.1145/3289602.3293898).

Weights arrive in CSB (compressed sparse banks) order: for row ``r`` and slot ``j`` the
``j``-th nonzero of every bank, each with its index inside the bank. The engine has ``P``
processing elements (PEs); row ``r`` belongs to PE ``r % P``, so rows are processed in row
groups ``g = r // P``. Each cycle every PE takes one CSB word (``B`` (value, index) lanes),
reads ``B`` vector elements from its private banked copy of the vector (one memory per bank,
so no conflicts), multiplies, reduces through an adder tree and accumulates. After ``k``
cycles the ``P`` rows of a group are done and leave as one output beat.

Arithmetic (see :mod:`hwcosim.models.fixedpoint`): products and sums are exact; the accumulator has
``acc_width`` bits; the row result is requantised once to ``out_fmt`` (round half up,
saturate).

Stream words (bit 0 = LSB), shared with :mod:`hwcosim.hdl.bbs` and the cocotb testbench:

- weight beat: ``P * B`` lanes, lane ``p * B + b`` at offset ``(p * B + b) * (W + I)``
  holding ``value`` (W-bit two's complement) in its low bits and ``index`` (I bits) above.
  Beats are ordered by row group, then slot ``j``.
- vector beat ``t`` (``t < bank_size``): ``B`` elements, element ``b`` at offset ``b * XW``
  holding ``x[b * bank_size + t]``, i.e. one element per bank per beat.
- output beat ``g``: ``P`` results, result ``p`` at offset ``p * OW``, for row ``g * P + p``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, acc_bits, dequantize, requantize

if TYPE_CHECKING:  # the compiled kernels (numba) load on first use: testbenches import this module
    from hwcosim.models.csb_kernels import CSBPacked

__all__ = ["BBSParams", "PIPELINE_LATENCY", "spmxv", "packed_weights", "spmxv_float", "pack_weight_beats",
           "pack_vector_beats", "unpack_output_beats", "CycleModel"]

#: Cycles from a weight beat's acceptance to its result beat's ``valid`` (RTL pipeline depth):
#: vector read, multiply, adder tree, accumulate/requantise into the output register.
PIPELINE_LATENCY = 4


# Largest shapes the generator accepts: far above any FPGA's on-chip memory and multipliers, low
# enough that a typo (rows=10**20) is refused at once instead of hanging the elaboration.
_LIMITS = {"rows": 1 << 16, "cols": 1 << 16, "banks": 1024, "k": 1 << 16, "pes": 1024}


@dataclass(frozen=True)
class BBSParams:
    """One parameter set shared by the golden model, the RTL, the testbench and the build.

    Parameters
    ----------
    rows, cols : int
        Matrix shape. ``rows`` must divide by ``pes``; ``cols`` by ``banks``.
    banks : int
        Banks per row (B): one multiplier per bank in every PE.
    k : int
        Nonzeros kept per bank (1 <= k <= bank_size).
    pes : int
        Processing elements (P); each finishes one row every ``k`` cycles.
    weight_fmt, vec_fmt, out_fmt : Q
        Fixed-point formats of weights, vector elements and results.
    out_stage : bool
        Register the accumulated sum before requantising it (one more cycle of latency, see
        :attr:`latency`): the accumulate and the round-and-saturate each get a cycle, which is what
        limits the clock otherwise (nextpnr on an LFE5U-85F; see docs/boards/results.json).
        Results are identical.
    mul_stage : bool
        Register every product twice: in the DSP block's output register (on an ECP5 build, see
        :mod:`hwcosim.hdl.common.dsp`) and again in the fabric beside the adder tree, so that neither the
        multiplier nor the route from the DSP rows shares a cycle with the tree: one more cycle of
        latency. Results are identical.
    """

    rows: int
    cols: int
    banks: int
    k: int
    pes: int = 1
    weight_fmt: Q = field(default_factory=lambda: Q(2, 6))
    vec_fmt: Q = field(default_factory=lambda: Q(4, 12))
    out_fmt: Q = field(default_factory=lambda: Q(8, 8))
    out_stage: bool = False
    mul_stage: bool = False

    def __post_init__(self):
        for name in ("rows", "cols", "banks", "k", "pes"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise UsageError(f"BBS {name} must be a positive integer, not {v!r}")
            if v > _LIMITS[name]:
                raise UsageError(f"BBS {name}={v} is beyond what this generator builds (at most "
                                 f"{_LIMITS[name]}); split the matrix into tiles or use fewer {name}")
        if self.cols % self.banks:
            raise UsageError(f"BBS: {self.cols} columns do not split into {self.banks} equal banks; "
                             "choose a bank count that divides the column count")
        if self.bank_size < 2:
            raise UsageError(f"BBS: banks of {self.bank_size} column are too small; use fewer banks")
        if self.k > self.bank_size:
            raise UsageError(f"BBS: k={self.k} nonzeros per bank exceeds the bank size {self.bank_size}")
        if self.rows % self.pes:
            raise UsageError(f"BBS: {self.rows} rows do not split over {self.pes} PEs; "
                             f"use a PE count that divides {self.rows} or pad the matrix with zero rows")
        for name in ("weight_fmt", "vec_fmt", "out_fmt"):
            if not isinstance(getattr(self, name), Q):
                raise UsageError(f"BBS {name} must be a models.fixedpoint.Q, not {getattr(self, name)!r}")
        for name in ("out_stage", "mul_stage"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise UsageError(f"BBS {name} must be True or False, not {getattr(self, name)!r}")

    @property
    def latency(self) -> int:
        """Cycles from a weight beat's acceptance to its result beat's ``valid``."""
        return PIPELINE_LATENCY + int(self.out_stage) + int(self.mul_stage)

    @property
    def bank_size(self) -> int:
        return self.cols // self.banks

    @property
    def index_bits(self) -> int:
        """Bits of an in-bank index: ceil(log2(bank_size))."""
        return max(1, int(self.bank_size - 1).bit_length())

    @property
    def row_groups(self) -> int:
        return self.rows // self.pes

    @property
    def acc_width(self) -> int:
        return acc_bits(self.weight_fmt, self.vec_fmt, self.banks * self.k)

    @property
    def acc_frac(self) -> int:
        return self.weight_fmt.frac_bits + self.vec_fmt.frac_bits

    @property
    def weight_beats(self) -> int:
        """Weight beats per matrix-vector product."""
        return self.row_groups * self.k

    @property
    def vector_beats(self) -> int:
        return self.bank_size

    @property
    def lane_width(self) -> int:
        return self.weight_fmt.width + self.index_bits

    @property
    def sparsity(self) -> float:
        return 1.0 - self.k / self.bank_size

    def to_dict(self) -> dict:
        return {"rows": self.rows, "cols": self.cols, "banks": self.banks, "k": self.k, "pes": self.pes,
                "weight_fmt": self.weight_fmt.to_dict(), "vec_fmt": self.vec_fmt.to_dict(),
                "out_fmt": self.out_fmt.to_dict(), "out_stage": bool(self.out_stage),
                "mul_stage": bool(self.mul_stage)}

    @classmethod
    def from_dict(cls, d: dict) -> BBSParams:
        return cls(rows=int(d["rows"]), cols=int(d["cols"]), banks=int(d["banks"]), k=int(d["k"]),
                   pes=int(d["pes"]), weight_fmt=Q.from_dict(d["weight_fmt"]),
                   vec_fmt=Q.from_dict(d["vec_fmt"]), out_fmt=Q.from_dict(d["out_fmt"]),
                   out_stage=bool(d.get("out_stage", False)), mul_stage=bool(d.get("mul_stage", False)))


def _check_csb(p: BBSParams, values: np.ndarray, indices: np.ndarray) -> None:
    shape = (p.rows, p.k, p.banks)
    if values.shape != shape or indices.shape != shape:
        raise UsageError(f"CSB arrays must have shape (rows, k, banks) = {shape}, "
                         f"got values {values.shape}, indices {indices.shape}")
    if indices.min() < 0 or indices.max() >= p.bank_size:
        raise UsageError(f"CSB indices must lie in [0, {p.bank_size}), got {indices.min()}..{indices.max()}")
    if values.min() < p.weight_fmt.min_raw or values.max() > p.weight_fmt.max_raw:
        raise UsageError(f"CSB values exceed the weight format {p.weight_fmt}")


def packed_weights(p: BBSParams, values: np.ndarray, indices: np.ndarray) -> CSBPacked:
    """Check a CSB matrix against ``p`` and pack it for the compiled kernel, once for many products.

    Packing (int64 values, 16-bit columns) costs more than a product of a few vectors: a 4096 x
    2048 matrix at 87.5 % (1 M nonzeros), 16 vectors, took 54 ms packed per call against 2.4 ms
    with the matrix packed once (measured here on the loaded 2-core host), so a layer run over
    ``T`` steps packs once and passes ``packed`` to :func:`spmxv`.
    """
    values = np.asarray(values, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    _check_csb(p, values, indices)
    from hwcosim.models.csb_kernels import CSBPacked

    return CSBPacked(values, indices, p.bank_size)


def spmxv(p: BBSParams, values: np.ndarray, indices: np.ndarray, x: np.ndarray, *,
          packed: CSBPacked | None = None) -> np.ndarray:
    """Bit-exact SpMxV: raw results in ``out_fmt``.

    Parameters
    ----------
    values : int array, shape (rows, k, banks)
        Raw weights in ``weight_fmt``.
    indices : int array, shape (rows, k, banks)
        In-bank column index of each value.
    x : int array, shape (cols,) or (n, cols)
        Raw vector(s) in ``vec_fmt``.

    packed : CSBPacked, optional
        :func:`packed_weights` of ``values``/``indices`` (checked and packed once); default: packed here.

    Returns
    -------
    int64 array, shape (rows,) or (n, rows)
    """
    if packed is None:
        packed = packed_weights(p, values, indices)
    elif packed.rows != p.rows or packed.cols != p.cols or not packed.integer:
        raise UsageError(f"packed matrix is {packed.rows} x {packed.cols} (integer: {packed.integer}); "
                         f"this SpMxV needs an integer {p.rows} x {p.cols} one")
    x = np.asarray(x, dtype=np.int64)
    single = x.ndim == 1
    xb = np.atleast_2d(x)
    if xb.shape[1] != p.cols:
        raise UsageError(f"vector length {xb.shape[1]} does not match the matrix's {p.cols} columns")
    if xb.min() < p.vec_fmt.min_raw or xb.max() > p.vec_fmt.max_raw:
        raise UsageError(f"vector values exceed the vector format {p.vec_fmt}")
    # exact int64 accumulations acc[n, r] = sum_{j,b} values[r,j,b] * x[n, b * bank_size + indices[r,j,b]]
    # by the compiled CSB kernel (models.csb_kernels)
    acc = packed.spmm(xb)
    y = requantize(acc, p.acc_frac, p.out_fmt)
    return y[0] if single else y


def spmxv_float(dense_w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Float reference: the pruned (unquantised) matrix times the float vector(s)."""
    return np.asarray(x, dtype=np.float64) @ np.asarray(dense_w, dtype=np.float64).T


def _lanes_to_words(lanes: np.ndarray, width: int) -> list[int]:
    """Pack unsigned lane values (beats, lanes) into one Python int per beat, lane 0 at LSB."""
    words = np.zeros(lanes.shape[0], dtype=object)
    for i in range(lanes.shape[1]):  # loop over lanes (<= a few hundred), vectorised over beats
        words += lanes[:, i].astype(object) << (i * width)
    return [int(w) for w in words]


def pack_weight_beats(p: BBSParams, values: np.ndarray, indices: np.ndarray) -> list[int]:
    """Weight stream words for one matrix pass: ``row_groups * k`` beats of ``P*B`` lanes."""
    values = np.asarray(values, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    _check_csb(p, values, indices)
    w = p.weight_fmt.width
    lane = (values & ((1 << w) - 1)) | (indices << w)  # (rows, k, banks)
    # rows -> (groups, P); order beats by (g, j), lanes by (p, b)
    lane = lane.reshape(p.row_groups, p.pes, p.k, p.banks).transpose(0, 2, 1, 3)
    return _lanes_to_words(lane.reshape(p.weight_beats, p.pes * p.banks), p.lane_width)


def pack_vector_beats(p: BBSParams, x: np.ndarray) -> list[int]:
    """Vector stream words: ``bank_size`` beats, element ``b`` of beat ``t`` = x[b*S + t]."""
    x = np.asarray(x, dtype=np.int64)
    if x.shape != (p.cols,):
        raise UsageError(f"vector must have shape ({p.cols},), got {x.shape}")
    xw = p.vec_fmt.width
    lanes = (x & ((1 << xw) - 1)).reshape(p.banks, p.bank_size).T  # (t, b)
    return _lanes_to_words(lanes, xw)


def unpack_output_beats(p: BBSParams, words: list[int]) -> np.ndarray:
    """Output words (one per row group) -> raw results, shape (len(words) * P,)."""
    ow = p.out_fmt.width
    out = np.empty((len(words), p.pes), dtype=np.int64)
    mask = (1 << ow) - 1
    for g, word in enumerate(words):
        for lane in range(p.pes):
            v = (int(word) >> (lane * ow)) & mask
            out[g, lane] = v - (1 << ow) if v >> (ow - 1) else v
    return out.reshape(-1)


@dataclass(frozen=True)
class CycleModel:
    """Cycle counts of the SpMxV engine.

    The ideal is the compute bound: every PE multiplier busy every cycle, i.e.
    ``row_groups * k`` cycles per vector. The expected count of the RTL with streams that never
    stall adds the first vector's load (``bank_size`` beats; later loads overlap compute through
    the double-buffered vector memory as long as ``bank_size <= row_groups * k``) and the
    pipeline latency.
    """

    p: BBSParams

    def ideal(self, n_vectors: int = 1) -> int:
        return n_vectors * self.p.weight_beats

    def expected(self, n_vectors: int = 1) -> int:
        per = max(self.p.weight_beats, self.p.vector_beats)
        return self.p.vector_beats + (n_vectors - 1) * per + self.p.weight_beats + self.p.latency

    def macs(self, n_vectors: int = 1) -> int:
        """Multiply-accumulates done (stored nonzero slots x vectors)."""
        return n_vectors * self.p.rows * self.p.k * self.p.banks

    def utilisation(self, cycles: int, n_vectors: int = 1) -> float:
        """Fraction of multiplier-cycles doing a stored nonzero."""
        return self.macs(n_vectors) / (cycles * self.p.pes * self.p.banks)


def dequantize_out(p: BBSParams, y: np.ndarray) -> np.ndarray:
    return dequantize(y, p.out_fmt)
