"""Golden model of the FSS sparse GEMM engine: the specification the RTL (:mod:`hwcosim.hdl.fss`) meets.

Zhang, Cao, Dai, Geng, Yao, Xiao, Liu, Wu, Zhang, Sun, Ji, Wang, Huang, "Fine-Grained Structured
Sparse Computing for FPGA-Based AI Inference", IEEE TCAD 44(7), 2025
(doi 10.1109/TCAD.2024.3524356): "local randomness, global regularity". The weight matrix
``W`` (rows x cols) is tiled into ``r_h x r_w`` regions; every region keeps exactly ``N``
nonzeros, placed anywhere inside it (:mod:`hwcosim.pruning.patterns.fss`), stored region-major as
``N`` (value, in-region index ``i * r_w + c``) pairs per region (:mod:`hwcosim.pruning.formats.fss`).

The engine computes ``Y = W @ X`` for a dense activation matrix ``X`` (cols x T): a batch of
vectors, or the im2col columns of a convolution. The micro-architecture is ours (the paper's
RTL is not public to us); what it takes from the paper is that a constant ``N`` per region
makes all PE rows advance in lock-step, so ONE activation read per cycle feeds the whole array.

Engine (``PR x PC`` PEs, ``N`` multipliers each, ``PR * PC * N`` in total):

- PE ``(a, t)`` owns region row ``g * PR + a`` (``r_h`` output rows) and activation column
  ``tau * PC + t`` of the current column tile ``tau``.
- Each cycle one weight beat brings one region word (``N`` slots) for every PE row, all at
  the same region column ``c``. The activation staging buffer is banked ``r_w x PC`` ways (bank
  ``(b, t)`` holds ``X[c * r_w + b, tau * PC + t]`` at address ``c``); one read of all banks at
  address ``c`` gives every PE the ``r_w`` activations of its region column, and each slot picks
  its operand ``x[idx % r_w]`` through an ``r_w``-way multiplexer: no bank conflicts, whatever
  the placement inside the region (local randomness).
- The ``N`` products of a PE are summed per output row ``idx // r_w`` into ``r_h``
  accumulators; after ``cols / r_w`` cycles a row group is finished and its
  ``PR * r_h * PC`` results leave in one output beat.
- The activation buffer is double-buffered: tile ``tau + 1`` loads (``cols / r_w`` beats)
  while tile ``tau`` computes. Weights are re-streamed once per column tile (from HBM); the
  AXI top level :class:`hwcosim.hdl.fss.axi_top.FSSAxiTop` instead holds them in on-chip memory.

Dense and N:M configurations of the same engine: ``region = (1, N)`` with ``n = N`` is a dense
engine with the same ``PR * PC * N`` multipliers (no index bits, no multiplexers);
``region = (1, M)`` is N:M sparsity.

Arithmetic (:mod:`hwcosim.models.fixedpoint`): products and sums exact, accumulators of
``acc_width`` bits, one requantisation per result to ``out_fmt`` (round half up, saturate).

Stream words (bit 0 = LSB), shared with :mod:`hwcosim.hdl.fss` and the cocotb testbench:

- weight beat: ``PR * N`` lanes; lane ``a * N + j`` at offset ``(a * N + j) * (W + I)`` holds
  slot ``j`` of region ``(g * PR + a, c)``: ``value`` (W bits) low, ``index`` (I bits) above
  (``I = 0`` in the dense configuration). Beats in order tile ``tau``, row group ``g``, region
  column ``c``.
- activation beat ``c`` of tile ``tau``: ``r_w * PC`` elements, element ``t * r_w + b`` at
  offset ``(t * r_w + b) * XW`` holding ``X[c * r_w + b, tau * PC + t]``.
- output beat ``(tau, g)``: ``PR * r_h * PC`` results; lane ``(a * r_h + i) * PC + t`` at
  offset ``lane * OW`` holds ``Y[(g * PR + a) * r_h + i, tau * PC + t]``.

The layer shape (rows, cols) is a run-time setting of the engine (two configuration inputs),
bounded by ``max_rows`` / ``max_cols``; T is open-ended (any number of column tiles).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, acc_bits, dequantize, requantize

__all__ = ["FSSParams", "PIPELINE_LATENCY", "gemm", "gemm_float", "regions_to_dense", "dense_to_regions",
           "pack_weight_beats", "pack_act_beats", "unpack_output_beats", "pad_layer", "CycleModel",
           "HBM", "U280_HBM", "WEIGHT_MODES", "layer_performance"]

#: Cycles from a weight beat's acceptance to its row group's output ``valid`` when the output
#: queue is empty (RTL pipeline, one register stage each): buffer read, buffer data (a block RAM
#: output drives only a flip-flop), operand select, multiply, adder trees' first level (slot pairs),
#: the rest of the trees, accumulate, round, clip into the output queue. (4 before the stages were
#: split for the clock on an LFE5U-85F; 8 before the rounding and the clip were
#: split and the output register became a queue, so that the pipeline never stalls.)
PIPELINE_LATENCY = 9


def _pos_int(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise UsageError(f"FSS {name} must be a positive integer, not {v!r}")
    return int(v)


@dataclass(frozen=True)
class FSSParams:
    """One parameter set shared by the golden model, the RTL, the testbench and the build.

    Parameters
    ----------
    region : (int, int)
        Region shape ``(r_h, r_w)``; at least 2 weights.
    n : int
        Nonzeros per region, ``1 <= n <= r_h * r_w`` (``n == r_h * r_w``: dense).
    pe_rows, pe_cols : int
        PE array shape ``PR x PC``: region rows and activation columns processed in parallel.
    max_rows, max_cols : int
        Largest layer the engine accepts (counter and buffer sizes). ``max_cols`` divides by
        ``r_w``; ``max_rows`` by ``r_h * pe_rows``.
    weight_fmt, act_fmt, out_fmt : Q
        Fixed-point formats of weights, activations and results.
    """

    region: tuple[int, int] = (2, 8)
    n: int = 4
    pe_rows: int = 2
    pe_cols: int = 2
    max_rows: int = 64
    max_cols: int = 64
    weight_fmt: Q = field(default_factory=lambda: Q(2, 6))
    act_fmt: Q = field(default_factory=lambda: Q(4, 12))
    out_fmt: Q = field(default_factory=lambda: Q(8, 8))

    def __post_init__(self):
        reg = self.region
        if isinstance(reg, list):
            reg = tuple(reg)
        if not isinstance(reg, tuple) or len(reg) != 2:
            raise UsageError(f"FSS region must be a pair (r_h, r_w), e.g. (2, 8), not {self.region!r}")
        object.__setattr__(self, "region", (_pos_int(reg[0], "region rows"), _pos_int(reg[1], "region cols")))
        for name in ("n", "pe_rows", "pe_cols", "max_rows", "max_cols"):
            object.__setattr__(self, name, _pos_int(getattr(self, name), name))
        if self.region_size < 2:
            raise UsageError("a 1x1 FSS region leaves nothing to choose; use a region of >= 2 weights")
        if self.n > self.region_size:
            raise UsageError(f"FSS n={self.n} exceeds the region size {self.region_size}; choose n <= "
                             f"{self.region_size}")
        if self.max_cols % self.r_w:
            raise UsageError(f"FSS max_cols={self.max_cols} must be a multiple of the region width {self.r_w}")
        if self.max_rows % self.rows_per_group:
            raise UsageError(f"FSS max_rows={self.max_rows} must be a multiple of r_h * pe_rows = "
                             f"{self.rows_per_group}")
        for name in ("weight_fmt", "act_fmt", "out_fmt"):
            if not isinstance(getattr(self, name), Q):
                raise UsageError(f"FSS {name} must be a models.fixedpoint.Q, not {getattr(self, name)!r}")

    # -- derived sizes ----------------------------------------------------------------------
    @property
    def r_h(self) -> int:
        return self.region[0]

    @property
    def r_w(self) -> int:
        return self.region[1]

    @property
    def region_size(self) -> int:
        return self.r_h * self.r_w

    @property
    def latency(self) -> int:
        """Cycles from a weight beat's acceptance to its result beat's ``valid``."""
        return PIPELINE_LATENCY

    @property
    def dense(self) -> bool:
        """Every weight of a region is kept: slot j is position j, no index is streamed."""
        return self.n == self.region_size

    @property
    def index_bits(self) -> int:
        return 0 if self.dense else max(1, int(self.region_size - 1).bit_length())

    @property
    def lane_width(self) -> int:
        return self.weight_fmt.width + self.index_bits

    @property
    def weight_beat_bits(self) -> int:
        return self.pe_rows * self.n * self.lane_width

    @property
    def rows_per_group(self) -> int:
        return self.r_h * self.pe_rows

    @property
    def max_k_regions(self) -> int:
        return self.max_cols // self.r_w

    @property
    def max_row_groups(self) -> int:
        return self.max_rows // self.rows_per_group

    @property
    def multipliers(self) -> int:
        return self.pe_rows * self.pe_cols * self.n

    @property
    def acc_width(self) -> int:
        # an output row meets at most min(n, r_w) weights per region, k_regions regions
        return acc_bits(self.weight_fmt, self.act_fmt, self.max_k_regions * min(self.n, self.r_w))

    @property
    def acc_frac(self) -> int:
        return self.weight_fmt.frac_bits + self.act_fmt.frac_bits

    @property
    def sparsity(self) -> float:
        return 1.0 - self.n / self.region_size

    @property
    def out_lanes(self) -> int:
        return self.pe_rows * self.r_h * self.pe_cols

    def check_shape(self, rows: int, cols: int) -> None:
        """Raise ValueError unless a ``rows x cols`` layer runs on this engine (see :func:`pad_layer`)."""
        if rows < 1 or cols < 1 or rows % self.rows_per_group or cols % self.r_w:
            raise UsageError(f"a {rows} x {cols} layer does not tile into row groups of {self.rows_per_group} "
                             f"and region columns of {self.r_w}; pad it with models.fss.gemm.pad_layer")
        if rows > self.max_rows or cols > self.max_cols:
            raise UsageError(f"a {rows} x {cols} layer exceeds the engine's {self.max_rows} x {self.max_cols}; "
                             "raise max_rows / max_cols")

    def to_dict(self) -> dict:
        return {"region": list(self.region), "n": self.n, "pe_rows": self.pe_rows, "pe_cols": self.pe_cols,
                "max_rows": self.max_rows, "max_cols": self.max_cols,
                "weight_fmt": self.weight_fmt.to_dict(), "act_fmt": self.act_fmt.to_dict(),
                "out_fmt": self.out_fmt.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> FSSParams:
        return cls(region=tuple(int(v) for v in d["region"]), n=int(d["n"]), pe_rows=int(d["pe_rows"]),
                   pe_cols=int(d["pe_cols"]), max_rows=int(d["max_rows"]), max_cols=int(d["max_cols"]),
                   weight_fmt=Q.from_dict(d["weight_fmt"]), act_fmt=Q.from_dict(d["act_fmt"]),
                   out_fmt=Q.from_dict(d["out_fmt"]))


# -- region helpers (models may not import pruning; same layout as pruning.patterns.fss) ------
def dense_to_regions(a: np.ndarray, region: tuple[int, int]) -> np.ndarray:
    """(rows, cols) -> (rows // r_h, cols // r_w, r_h * r_w), row-major inside a region."""
    rh, rw = region
    r, c = a.shape
    return a.reshape(r // rh, rh, c // rw, rw).transpose(0, 2, 1, 3).reshape(r // rh, c // rw, rh * rw)


def regions_to_dense(values: np.ndarray, indices: np.ndarray, region: tuple[int, int]) -> np.ndarray:
    """Region-major (values, indices) of shape (gr, gc, n) -> dense int64 (gr * r_h, gc * r_w)."""
    rh, rw = region
    gr, gc, _ = values.shape
    t = np.zeros((gr, gc, rh * rw), dtype=np.int64)
    np.put_along_axis(t, np.asarray(indices, dtype=np.int64), np.asarray(values, dtype=np.int64), axis=-1)
    return t.reshape(gr, gc, rh, rw).transpose(0, 2, 1, 3).reshape(gr * rh, gc * rw)


def _check_weights(p: FSSParams, values, indices) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(values, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    if values.ndim != 3 or values.shape != indices.shape or values.shape[2] != p.n:
        raise UsageError(f"FSS arrays must have shape (rows // r_h, cols // r_w, n={p.n}); "
                         f"got values {values.shape}, indices {indices.shape}")
    p.check_shape(values.shape[0] * p.r_h, values.shape[1] * p.r_w)
    if indices.min() < 0 or indices.max() >= p.region_size:
        raise UsageError(f"FSS indices must lie in [0, {p.region_size}), got {indices.min()}..{indices.max()}")
    if p.n > 1 and not (np.diff(indices, axis=-1) > 0).all():
        raise UsageError("FSS indices must increase strictly within each region (pruning.formats.fss order)")
    if values.min() < p.weight_fmt.min_raw or values.max() > p.weight_fmt.max_raw:
        raise UsageError(f"FSS values exceed the weight format {p.weight_fmt}")
    return values, indices


def _check_acts(p: FSSParams, x, cols: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    if x.ndim != 2 or x.shape[0] != cols:
        raise UsageError(f"activations must have shape (cols={cols}, T), got {x.shape}")
    if x.shape[1] % p.pe_cols:
        raise UsageError(f"T={x.shape[1]} activation columns do not fill tiles of {p.pe_cols}; "
                         "pad with models.fss.gemm.pad_layer")
    if x.min() < p.act_fmt.min_raw or x.max() > p.act_fmt.max_raw:
        raise UsageError(f"activations exceed the activation format {p.act_fmt}")
    return x


def gemm(p: FSSParams, values: np.ndarray, indices: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bit-exact ``Y = W @ X``: raw results in ``out_fmt``.

    Parameters
    ----------
    values, indices : int arrays, shape (rows // r_h, cols // r_w, n)
        FSS weights (raw ``weight_fmt`` values, in-region indices ``i * r_w + c``).
    x : int array, shape (cols, T)
        Raw activations in ``act_fmt``; T a multiple of ``pe_cols``.

    Returns
    -------
    int64 array, shape (rows, T)
    """
    values, indices = _check_weights(p, values, indices)
    rows, cols = values.shape[0] * p.r_h, values.shape[1] * p.r_w
    x = _check_acts(p, x, cols)
    # exact: |products| < 2**62 for <= 32-bit formats and the sizes allowed here
    if rows * cols * x.shape[1] < _COMPILED_FROM:
        acc = regions_to_dense(values, indices, p.region) @ x
    else:  # numpy has no integer BLAS: the compiled sparse product is 3-8x faster from 1024 x 1024 x 64
        from hwcosim.models.csb_kernels import coo_mm_int

        r, c = region_coords(indices, p.region)
        acc = coo_mm_int(values.reshape(-1), r, c, x, rows)
    return requantize(acc, p.acc_frac, p.out_fmt)


#: Dense work (rows x cols x T) from which :func:`gemm` uses the compiled integer product
#: (below it the dense int64 product is faster than loading the compiled kernel).
_COMPILED_FROM = 1 << 24


def region_coords(indices: np.ndarray, region: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Absolute (row, col) of every region nonzero, flattened region-major like ``indices.reshape(-1)``."""
    rh, rw = region
    idx = np.asarray(indices, dtype=np.int64)
    gr, gc, _ = idx.shape
    r = np.arange(gr, dtype=np.int64)[:, None, None] * rh + idx // rw
    c = np.arange(gc, dtype=np.int64)[None, :, None] * rw + idx % rw
    return np.broadcast_to(r, idx.shape).reshape(-1), np.broadcast_to(c, idx.shape).reshape(-1)


def gemm_float(dense_w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Float reference ``W @ X`` (W pruned or dense, unquantised)."""
    return np.asarray(dense_w, dtype=np.float64) @ np.asarray(x, dtype=np.float64)


def pad_layer(p: FSSParams, w: np.ndarray, x: np.ndarray | None = None):
    """Zero-pad a float weight (rows, cols) and activations (cols, T) to the engine's tiling.

    Rows pad to a multiple of ``r_h * pe_rows``, cols to ``r_w``, T to ``pe_cols``. Padded weight
    regions that are all zero still hold ``n`` (zero) weights after pruning; padded outputs are
    dropped by the caller (``y[:rows, :T]``).
    """
    w = np.asarray(w)
    r, c = w.shape
    rr = -(-r // p.rows_per_group) * p.rows_per_group
    cc = -(-c // p.r_w) * p.r_w
    wp = np.zeros((rr, cc), dtype=w.dtype)
    wp[:r, :c] = w
    if x is None:
        return wp
    x = np.asarray(x)
    t = x.shape[1]
    tt = -(-t // p.pe_cols) * p.pe_cols
    xp = np.zeros((cc, tt), dtype=x.dtype)
    xp[:c, :t] = x
    return wp, xp


def _lanes_to_words(lanes: np.ndarray, width: int) -> list[int]:
    """Pack unsigned lanes (beats, lanes) into one Python int per beat, lane 0 at the LSB."""
    words = np.zeros(lanes.shape[0], dtype=object)
    for i in range(lanes.shape[1]):  # loop over lanes, vectorised over beats
        words += lanes[:, i].astype(object) << (i * width)
    return [int(v) for v in words]


def pack_weight_beats(p: FSSParams, values: np.ndarray, indices: np.ndarray) -> list[int]:
    """Weight words for ONE column tile: ``row_groups * k_regions`` beats (repeat per tile)."""
    values, indices = _check_weights(p, values, indices)
    gr, gc, n = values.shape
    wbits = p.weight_fmt.width
    lane = values & ((1 << wbits) - 1)
    if p.index_bits:
        lane = lane | (indices << wbits)
    # (gr, gc, n) -> (groups, PR, gc, n) -> beats ordered (group, c), lanes (a, j)
    lane = lane.reshape(gr // p.pe_rows, p.pe_rows, gc, n).transpose(0, 2, 1, 3)
    return _lanes_to_words(lane.reshape(-1, p.pe_rows * n), p.lane_width)


def pack_act_beats(p: FSSParams, x: np.ndarray) -> list[int]:
    """Activation words for all tiles: ``(T / PC) * (cols / r_w)`` beats of ``r_w * PC`` elements."""
    x = np.asarray(x, dtype=np.int64)
    cols, t = x.shape
    if cols % p.r_w or t % p.pe_cols:
        raise UsageError(f"activations {x.shape} must be (multiple of {p.r_w}, multiple of {p.pe_cols})")
    xw = p.act_fmt.width
    lanes = (x & ((1 << xw) - 1)).reshape(cols // p.r_w, p.r_w, t // p.pe_cols, p.pe_cols)
    lanes = lanes.transpose(2, 0, 3, 1).reshape(-1, p.pe_cols * p.r_w)  # (tau, c) x (t, b)
    return _lanes_to_words(lanes, xw)


def unpack_output_beats(p: FSSParams, words: list[int], rows: int, t: int) -> np.ndarray:
    """Output words (tile-major, then row group) -> raw results (rows, T)."""
    ow = p.out_fmt.width
    n_lanes = p.out_lanes
    big = np.array([int(w) for w in words], dtype=object)
    lanes = np.empty((len(words), n_lanes), dtype=np.int64)
    mask = (1 << ow) - 1
    for i in range(n_lanes):
        lanes[:, i] = ((big >> (i * ow)) & mask).astype(np.int64)
    lanes = np.where(lanes >> (ow - 1), lanes - (1 << ow), lanes)
    tiles, groups = t // p.pe_cols, rows // p.rows_per_group
    if len(words) != tiles * groups:
        raise ValueError(f"{len(words)} output words for {tiles} tiles x {groups} row groups")
    y = lanes.reshape(tiles, groups, p.rows_per_group, p.pe_cols)
    return y.transpose(1, 2, 0, 3).reshape(rows, t)


# -- cycle and memory-system models --------------------------------------------------------
@dataclass(frozen=True)
class CycleModel:
    """Cycles of the FSS GEMM engine on a ``rows x cols`` layer with T activation columns.

    Ideal (compute bound, every multiplier busy every cycle): ``tiles * row_groups * k_regions``
    with ``tiles = T / PC``, ``row_groups = rows / (r_h PR)``, ``k_regions = cols / r_w``;
    the engine does exactly ``N`` useful MACs per PE per cycle, so this equals
    ``nonzero MACs / multipliers``. Expected RTL count with streams that never stall: the first
    tile's activation load (``k_regions`` beats; later loads overlap compute in the double
    buffer because ``k_regions <= row_groups * k_regions``) plus the pipeline latency.

    ``weight_lead`` is the cycle in which the first weight beat is offered (0: waiting at the
    start, as in the engine's own tests); compute starts when both the first tile and that beat
    are there, so the first term is ``max(k_regions, weight_lead)``. The AXI top's weight replay
    offers its first beat in cycle :data:`hwcosim.hdl.fss.axi_top.WEIGHT_LEAD` (2: block RAM read, output
    register), hidden behind any tile of two or more region columns.
    """

    p: FSSParams
    weight_lead: int = 0

    def _dims(self, rows: int, cols: int, t: int) -> tuple[int, int, int]:
        self.p.check_shape(rows, cols)
        if t < 1 or t % self.p.pe_cols:
            raise UsageError(f"T={t} must be a positive multiple of pe_cols={self.p.pe_cols}")
        return t // self.p.pe_cols, rows // self.p.rows_per_group, cols // self.p.r_w

    def weight_beats(self, rows: int, cols: int, t: int) -> int:
        tiles, g, k = self._dims(rows, cols, t)
        return tiles * g * k

    def ideal(self, rows: int, cols: int, t: int) -> int:
        return self.weight_beats(rows, cols, t)

    def expected(self, rows: int, cols: int, t: int) -> int:
        tiles, g, k = self._dims(rows, cols, t)
        return max(k, self.weight_lead) + (tiles - 1) * max(g * k, k) + g * k + self.p.latency

    def macs(self, rows: int, cols: int, t: int) -> int:
        """Stored-weight multiply-accumulates (nonzero slots x activation columns)."""
        return rows * cols // self.p.region_size * self.p.n * t

    def utilisation(self, cycles: int, rows: int, cols: int, t: int) -> float:
        return self.macs(rows, cols, t) / (cycles * self.p.multipliers)


@dataclass(frozen=True)
class HBM:
    """An HBM-fed memory system: ``channels`` pseudo-channels of ``gbps_per_channel`` GB/s each.

    ``efficiency`` scales the peak (HBM rarely sustains more than ~85-90% of it on streaming
    reads; 1.0 is the peak). U280: 32 pseudo-channels, ~460 GB/s in total (:data:`U280_HBM`).
    """

    channels: int = 32
    gbps_per_channel: float = 14.375
    efficiency: float = 1.0

    def __post_init__(self):
        _pos_int(self.channels, "HBM channels")
        if not self.gbps_per_channel > 0 or not 0 < self.efficiency <= 1:
            raise UsageError(f"HBM bandwidth per channel must be > 0 and efficiency in (0, 1], "
                             f"not {self.gbps_per_channel}, {self.efficiency}")

    @property
    def bytes_per_s(self) -> float:
        return self.channels * self.gbps_per_channel * 1e9 * self.efficiency


U280_HBM = HBM(channels=32, gbps_per_channel=460.0 / 32)


#: Where the weights live during a layer (see :func:`layer_performance`).
WEIGHT_MODES = ("stream", "resident")


def layer_performance(p: FSSParams, rows: int, cols: int, t: int, hbm: HBM = U280_HBM,
                      clock_mhz: float = 250.0, cycles: int | None = None, weights: str = "stream") -> dict:
    """Roofline of one layer: compute time (cycles at ``clock_mhz``) vs HBM transfer time.

    Traffic: the FSS weight stream (``lane_width`` bits per stored weight), the activations
    once and the results once. ``weights`` says how often the weights cross the HBM interface:

    - ``"stream"`` (default): once per column tile of ``pe_cols`` activation columns, as
      :class:`hwcosim.hdl.fss.FSSGemm` consumes them (it keeps no weights on chip). The weight bandwidth
      then equals one weight beat per compute cycle whatever T is, so whether a layer is memory
      bound depends on the PE array (``pe_rows * n * lane_width`` bits per cycle), not on T.
    - ``"resident"``: once per layer; later tiles reuse an on-chip copy, as
      :class:`hwcosim.hdl.fss.axi_top.FSSAxiTop` does (it loads the weights into on-chip memory once and
      runs any number of activation batches on them). Decode (small T) is then weight-bandwidth
      bound and prefill (large T) compute bound.

    ``cycles`` defaults to the ideal; pass a measured count to use it instead. Returns a dict
    with both times (also in cycles), the bytes by kind, the bound (``"compute"`` or
    ``"memory"``), the arithmetic intensity (stored-weight MACs per HBM byte) and the achieved
    rate.
    """
    if weights not in WEIGHT_MODES:
        raise UsageError(f"weights must be one of {', '.join(WEIGHT_MODES)}, not {weights!r}")
    if not clock_mhz > 0:
        raise UsageError(f"clock_mhz must be > 0, not {clock_mhz!r}")
    cm = CycleModel(p)
    tiles = t // p.pe_cols
    cyc = cm.ideal(rows, cols, t) if cycles is None else int(cycles)
    w_bytes = rows * cols // p.region_size * p.n * p.lane_width / 8
    a_bytes = cols * t * p.act_fmt.width / 8
    o_bytes = rows * t * p.out_fmt.width / 8
    w_total = w_bytes * (tiles if weights == "stream" else 1)
    total = w_total + a_bytes + o_bytes
    hz = clock_mhz * 1e6
    t_compute = cyc / hz
    t_memory = total / hbm.bytes_per_s
    need = p.weight_beat_bits / 8 * hz  # weight bandwidth at one beat per cycle
    macs = cm.macs(rows, cols, t)
    return {"rows": rows, "cols": cols, "T": t, "weights": weights, "cycles": cyc, "clock_mhz": clock_mhz,
            "t_compute_s": t_compute, "t_memory_s": t_memory, "memory_cycles": t_memory * hz,
            "bytes": total, "weight_bytes": w_total, "act_bytes": a_bytes, "out_bytes": o_bytes,
            "weight_bytes_per_tile": w_bytes, "weight_stream_gbps": need / 1e9, "hbm_gbps": hbm.bytes_per_s / 1e9,
            "hbm_bytes_per_cycle": hbm.bytes_per_s / hz, "macs": macs, "macs_per_byte": macs / total,
            "bound": "compute" if t_compute >= t_memory else "memory",
            "time_s": max(t_compute, t_memory),
            "effective_gmacs": macs / max(t_compute, t_memory) / 1e9}


def dequantize_out(p: FSSParams, y: np.ndarray) -> np.ndarray:
    return dequantize(y, p.out_fmt)
