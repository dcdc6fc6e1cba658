"""Golden model of the BBS LSTM layer engine: the specification :mod:`hwcosim.hdl.bbs.lstm` meets.

Cao et al., "Efficient and Effective Sparse LSTM on FPGA with Bank-Balanced Sparsity",
FPGA 2019 (doi 10.1145/3289602.3293898): the four gate products of an LSTM step run as ONE
sparse matrix-vector product on the BBS SpMxV engine (:mod:`hwcosim.models.bbs.spmxv`), followed by an
element-wise unit (activations, cell and hidden state updates).

Layer (fused layout of :mod:`hwcosim.models.nn.lstm`)::

    z_t = W @ [x_t; h_{t-1}] + b      W: (4H, I+H), gate rows (i, f, g, o)
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g);   h_t = sigmoid(o) * tanh(c_t)

Hardware layout (chosen so that the vector can be streamed one engine beat at a time, in the
order its elements become available):

- **Logical vector** ``v = [x_t; 0 (pad to x_pad); h_{t-1}]`` of ``cols = x_pad + H`` elements,
  ``x_pad`` = ``I`` rounded up to a multiple of ``B``.
- **Columns.** Bank ``b`` holds the logical elements ``e`` with ``e % B == b`` (interleaved
  banks), at in-bank address ``e // B``; physical column ``b * S + t`` is logical element
  ``t * B + b`` (``S = cols / B``). Then SpMxV vector beat ``t`` is simply ``v[t*B:(t+1)*B]``:
  the ``x_pad / B`` input beats come first, then the ``H / B`` hidden-state beats, each sent as
  soon as its ``B`` hidden values leave the element-wise unit. Bank-balanced pruning is applied
  to these (interleaved) banks.
- **Rows.** Physical row ``4 u + q`` is gate ``q`` (0=i, 1=f, 2=g, 3=o) of hidden unit ``u``,
  so every SpMxV output beat of ``P`` rows carries all four gates of ``U = P / 4`` units.

Fixed point (rules of :mod:`hwcosim.models.fixedpoint`): the SpMxV result is requantised to
``gate_fmt``; ``z = sat(y + b)`` in ``gate_fmt``; activations are PLAN piecewise-linear
approximations (Amin, Curtis, Hayes-Gill, IEE Proc. Circuits Devices Syst. 144(6), 1997: slopes
1/4, 1/8, 1/32 -> shifts only) with ``act_frac`` fractional bits, computed exactly as
:func:`plan_sigmoid` / :func:`plan_tanh` state; ``c_t`` is the exact ``f*c + i*g``
requantised to ``cell_fmt``; ``h_t`` is ``o * tanh(c_t)`` requantised to ``vec_fmt``.

What overlaps (see :class:`LSTMCycleModel`): the input part ``x_{t+1}`` of the next vector is
written into the idle vector buffer while step ``t`` computes, and the hidden part is written
beat by beat as ``h_t`` leaves the element-wise unit, so no separate load pass is paid; the
first step of the *next sequence* (``h = 0``) needs nothing from the current one and loads and
starts fully overlapped. What cannot overlap at batch 1: every row of step ``t + 1`` reads all of
``h_t``, so each step inside a sequence pays the drain latency :data:`STEP_GAP` (SpMxV pipeline,
element-wise pipeline (:data:`EW_LATENCY`), feedback FIFO, vector write).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.bbs.spmxv import PIPELINE_LATENCY, BBSParams, packed_weights, spmxv
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, dequantize, quantize, requantize, saturate

__all__ = ["LSTMParams", "plan_sigmoid", "plan_tanh", "column_perm", "row_perm", "to_physical",
           "LSTMWeights", "prepare_weights", "lstm_golden", "lstm_float", "elementwise",
           "pack_x_beats", "pack_bias_beats", "unpack_h_beats", "LSTMCycleModel", "EW_LATENCY", "STEP_GAP",
           "SEQ_TAIL", "csr_step_cycles", "gops"]

#: Pipeline depth of the RTL element-wise unit (:class:`hwcosim.hdl.bbs.lstm.ElementWise`), from a SpMxV
#: result beat's acceptance to its ``h`` beat's ``valid``: operands, gate sums, ``|z|``, PLAN
#: activations, products ``f*c`` and ``i*g``, their sum, the sum rounded, ``c_t`` (clipped),
#: ``|c_t|``, ``tanh(c_t)``, ``o * tanh(c_t)``, the product rounded, ``h`` (clipped). At most two
#: carry chains or one multiplier per stage (it was 4 stages, with the whole gate-to-cell path in
#: one of them; then 10, with the sum and the cell's requantisation in one; then 11, rounding and
#: clipping in one stage for ``c_t`` and for ``h``: each limited the clock on an LFE5U-85F, the
#: figures are in ``CHANGELOG.md``).
EW_LATENCY = 13
#: Idle weight-port cycles between step t's last weight beat and step t+1's first (RTL, no
#: stalls, ``U <= B``) with the default SpMxV (:data:`hwcosim.models.bbs.spmxv.PIPELINE_LATENCY`):
#: SpMxV pipeline + element-wise unit (:data:`EW_LATENCY`) + feedback FIFO (2,
#: ``SyncFIFOBuffered``) + vector-buffer write to weight acceptance (1), minus the cycle of the
#: weight beat itself. Measured equal in simulation; :meth:`LSTMCycleModel.step_gap` adds the
#: SpMxV's optional stages (``out_stage``, ``mul_stage``) and the width converter.
STEP_GAP = PIPELINE_LATENCY + EW_LATENCY + 2
#: Cycles after the last weight beat of a sequence up to and including its last hidden beat
#: (default SpMxV; :meth:`LSTMCycleModel.seq_tail` in general).
SEQ_TAIL = PIPELINE_LATENCY + EW_LATENCY


@dataclass(frozen=True)
class LSTMParams:
    """One parameter set shared by the golden model, the RTL, the testbench and the build.

    Parameters
    ----------
    input_size, hidden : int
        I and H. ``H`` must divide by ``banks`` and by ``pes / 4``.
    banks : int
        Banks B (multipliers per PE).
    k : int
        Nonzeros kept per bank (bank size ``S = (x_pad + H) / B``).
    pes : int
        SpMxV PEs P, a multiple of 4 (one output beat = the 4 gates of P/4 units).
    weight_fmt, vec_fmt, gate_fmt, cell_fmt : Q
        Weights; x and h; gate pre-activations (SpMxV output and bias); cell state.
    act_frac : int
        Fractional bits of the activation outputs (format ``Q(2, act_frac)``).
    out_stage, mul_stage : bool
        The SpMxV's optional pipeline registers (see :class:`hwcosim.models.bbs.spmxv.BBSParams`): one
        more cycle of latency each, for the clock; identical results.
    skid : bool
        Zero-latency skid buffers between the SpMxV and the element-wise unit and into the SpMxV's
        weight port (registered ready: the stall net stops at them), for the clock; identical
        results and cycles.
    """

    input_size: int
    hidden: int
    banks: int
    k: int
    pes: int = 4
    weight_fmt: Q = field(default_factory=lambda: Q(2, 6))
    vec_fmt: Q = field(default_factory=lambda: Q(2, 10))
    gate_fmt: Q = field(default_factory=lambda: Q(6, 10))
    cell_fmt: Q = field(default_factory=lambda: Q(6, 10))
    act_frac: int = 10
    out_stage: bool = False
    mul_stage: bool = False
    skid: bool = False

    def __post_init__(self):
        for name in ("input_size", "hidden", "banks", "k", "pes", "act_frac"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise UsageError(f"LSTM {name} must be a positive integer, not {v!r}")
        if self.pes % 4:
            raise UsageError(f"LSTM: pes={self.pes} must be a multiple of 4 (each output beat carries "
                             "the four gates of pes/4 hidden units); use 4, 8, 16, ...")
        if self.hidden % self.banks:
            raise UsageError(f"LSTM: hidden={self.hidden} must divide by banks={self.banks} "
                             "(hidden-state beats fill whole banks); choose banks dividing hidden")
        if self.hidden % self.units:
            raise UsageError(f"LSTM: hidden={self.hidden} must divide by pes/4={self.units}")
        u, b = self.units, self.banks
        if u % b and b % u:
            raise UsageError(f"LSTM: pes/4={u} and banks={b} must divide one another "
                             "(width conversion of hidden-state beats)")
        for name in ("weight_fmt", "vec_fmt", "gate_fmt", "cell_fmt"):
            if not isinstance(getattr(self, name), Q):
                raise UsageError(f"LSTM {name} must be a models.fixedpoint.Q, not {getattr(self, name)!r}")
        if self.gate_fmt.frac_bits < 4 or self.cell_fmt.frac_bits < 4:
            raise UsageError(f"LSTM: gate_fmt {self.gate_fmt} and cell_fmt {self.cell_fmt} need >= 4 "
                             "fractional bits (the PLAN breakpoint 2.375 of tanh(x) = 2 sigmoid(2x) - 1)")
        if self.act_frac < 5 or self.act_frac > 14:
            raise UsageError(f"LSTM: act_frac={self.act_frac} must lie in [5, 14] (PLAN offsets need 5 bits)")
        _ = self.bbs  # validates the SpMxV shape (bank size >= 2, k <= bank size)

    # -- derived -----------------------------------------------------------------------------
    @property
    def units(self) -> int:
        """Hidden units per SpMxV output beat (U = P / 4)."""
        return self.pes // 4

    @property
    def x_pad(self) -> int:
        return -(-self.input_size // self.banks) * self.banks

    @property
    def cols(self) -> int:
        return self.x_pad + self.hidden

    @property
    def rows(self) -> int:
        return 4 * self.hidden

    @property
    def bank_size(self) -> int:
        return self.cols // self.banks

    @property
    def x_beats(self) -> int:
        return self.x_pad // self.banks

    @property
    def h_beats(self) -> int:
        return self.hidden // self.banks

    @property
    def act_fmt(self) -> Q:
        return Q(2, self.act_frac)

    @property
    def bbs(self) -> BBSParams:
        return BBSParams(rows=self.rows, cols=self.cols, banks=self.banks, k=self.k, pes=self.pes,
                         weight_fmt=self.weight_fmt, vec_fmt=self.vec_fmt, out_fmt=self.gate_fmt,
                         out_stage=self.out_stage, mul_stage=self.mul_stage)

    def to_dict(self) -> dict:
        return {"input_size": self.input_size, "hidden": self.hidden, "banks": self.banks, "k": self.k,
                "pes": self.pes, "weight_fmt": self.weight_fmt.to_dict(), "vec_fmt": self.vec_fmt.to_dict(),
                "gate_fmt": self.gate_fmt.to_dict(), "cell_fmt": self.cell_fmt.to_dict(),
                "act_frac": self.act_frac, "out_stage": bool(self.out_stage), "mul_stage": bool(self.mul_stage),
                "skid": bool(self.skid)}

    @classmethod
    def from_dict(cls, d: dict) -> LSTMParams:
        return cls(input_size=int(d["input_size"]), hidden=int(d["hidden"]), banks=int(d["banks"]),
                   k=int(d["k"]), pes=int(d["pes"]), weight_fmt=Q.from_dict(d["weight_fmt"]),
                   vec_fmt=Q.from_dict(d["vec_fmt"]), gate_fmt=Q.from_dict(d["gate_fmt"]),
                   cell_fmt=Q.from_dict(d["cell_fmt"]), act_frac=int(d["act_frac"]),
                   out_stage=bool(d.get("out_stage", False)), mul_stage=bool(d.get("mul_stage", False)),
                   skid=bool(d.get("skid", False)))


# -- activations -----------------------------------------------------------------------------

def _shift(a: np.ndarray, sh: int) -> np.ndarray:
    return a >> sh if sh >= 0 else a << -sh


def plan_sigmoid(x: np.ndarray, x_frac: int, out_frac: int) -> np.ndarray:
    """PLAN sigmoid, bit-exact with the RTL.

    ``x`` raw with ``x_frac`` fractional bits (``x_frac >= 3``); result raw with ``out_frac``
    (>= 5) fractional bits. With ``a = |x|``: ``a >= 5`` -> 1; ``a >= 2.375`` -> a/32 + 27/32;
    ``a >= 1`` -> a/8 + 5/8; else a/4 + 1/2, where ``a/2**s`` is truncated (floor) to
    ``out_frac`` bits; negative ``x`` gives ``1 - y``. Max error vs the true sigmoid ~0.019.
    """
    x = np.asarray(x, dtype=np.int64)
    a = np.abs(x)
    one = 1 << out_frac

    def lin(s, off32):
        return _shift(a, x_frac + s - out_frac) + (off32 << out_frac >> 5)

    y = np.where(a >= 5 << x_frac, one,
                 np.where(a >= 19 << (x_frac - 3), lin(5, 27),
                          np.where(a >= 1 << x_frac, lin(3, 20), lin(2, 16))))
    return np.where(x < 0, one - y, y)


def plan_tanh(x: np.ndarray, x_frac: int, out_frac: int) -> np.ndarray:
    """tanh(x) = 2 sigmoid(2x) - 1 on the PLAN sigmoid: ``plan_sigmoid(x, x_frac-1, out_frac+1) - 2**out_frac``."""
    return plan_sigmoid(x, x_frac - 1, out_frac + 1) - (1 << out_frac)


def _sigmoid(z):
    return 0.5 * (np.tanh(0.5 * z) + 1.0)


# -- layouts ---------------------------------------------------------------------------------

def column_perm(p: LSTMParams) -> np.ndarray:
    """``perm[phys] = logical``: physical column ``b*S + t`` holds logical element ``t*B + b``."""
    S, B = p.bank_size, p.banks
    pos = np.arange(p.cols)
    return (pos % S) * B + pos // S


def row_perm(p: LSTMParams) -> np.ndarray:
    """``perm[phys] = logical``: physical row ``4u + q`` is logical row ``q*H + u``."""
    r = np.arange(p.rows)
    return (r % 4) * p.hidden + r // 4


def to_physical(p: LSTMParams, w: np.ndarray) -> np.ndarray:
    """Logical fused matrix (4H, I+H) -> physical (4H, cols): padded, rows and columns permuted."""
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (p.rows, p.input_size + p.hidden):
        raise UsageError(f"W must have shape (4H, I+H) = {(p.rows, p.input_size + p.hidden)}, got {w.shape}")
    wl = np.zeros((p.rows, p.cols))
    wl[:, :p.input_size] = w[:, :p.input_size]
    wl[:, p.x_pad:] = w[:, p.input_size:]
    return wl[row_perm(p)][:, column_perm(p)]


def to_logical(p: LSTMParams, wp: np.ndarray) -> np.ndarray:
    """Inverse of :func:`to_physical` (drops the padding columns)."""
    wl = np.empty((p.rows, p.cols), dtype=np.asarray(wp).dtype)
    wl[np.ix_(row_perm(p), column_perm(p))] = wp
    return np.concatenate([wl[:, :p.input_size], wl[:, p.x_pad:]], axis=1)


@dataclass(frozen=True, eq=False)
class LSTMWeights:
    """Quantised layer weights in hardware order.

    ``values``/``indices``: CSB (rows, k, banks) of the physical matrix; ``bias``: raw
    ``gate_fmt`` (4H,) in physical row order; ``w_float``/``b_float``: the pruned float layer
    in logical order (the float reference).
    """

    values: np.ndarray
    indices: np.ndarray
    bias: np.ndarray
    w_float: np.ndarray
    b_float: np.ndarray


def bbs_mask(p: LSTMParams, w: np.ndarray, sparsity: float) -> np.ndarray:
    """Bank-balanced keep-mask of a logical W for the hardware's (interleaved) banks, logical order.

    Implemented here with numpy (exact top-k per bank, ties to the lower column), so ``models``
    need not import ``pruning``; :func:`hwcosim.pruning.formats.csb.encode` on the physical matrix
    yields the same kept set.
    """
    wp = np.abs(to_physical(p, w)).reshape(p.rows, p.banks, p.bank_size)
    keep = max(1, int(round(p.bank_size * (1 - sparsity))))
    order = np.argsort(-wp, axis=-1, kind="stable")[..., :keep]
    m = np.zeros_like(wp, dtype=bool)
    np.put_along_axis(m, order, True, axis=-1)
    return to_logical(p, m.reshape(p.rows, p.cols))


def prepare_weights(p: LSTMParams, w: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> LSTMWeights:
    """Quantise a logical fused layer (W (4H, I+H), b (4H,)) for the engine.

    ``mask`` (logical, bool) must keep exactly ``p.k`` weights in every physical bank; default
    :func:`bbs_mask` at sparsity ``1 - k / bank_size``.
    """
    w = np.asarray(w, dtype=np.float64)
    if mask is None:
        mask = bbs_mask(p, w, 1 - p.k / p.bank_size)
    wm = np.where(mask, w, 0.0)
    mp = to_physical(p, mask.astype(float)).astype(bool)
    counts = mp.reshape(p.rows, p.banks, p.bank_size).sum(-1)
    if counts.min() != p.k or counts.max() != p.k:
        raise UsageError(f"mask keeps {counts.min()}..{counts.max()} weights per bank; the engine needs "
                         f"exactly k={p.k}: prune with bbs_mask")
    wp = to_physical(p, wm).reshape(p.rows, p.banks, p.bank_size)
    mb = mp.reshape(p.rows, p.banks, p.bank_size)
    idx = np.argsort(~mb, axis=-1, kind="stable")[..., :p.k]  # kept columns in order
    vals = quantize(np.take_along_axis(wp, idx, axis=-1), p.weight_fmt)
    b = np.asarray(b, dtype=np.float64)
    return LSTMWeights(values=vals.transpose(0, 2, 1).copy(), indices=idx.transpose(0, 2, 1).astype(np.int64).copy(),
                       bias=quantize(b[row_perm(p)], p.gate_fmt), w_float=wm, b_float=b)


# -- golden model ----------------------------------------------------------------------------

def elementwise(p: LSTMParams, z: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Element-wise unit. ``z`` raw gate_fmt (..., H, 4) [unit, gate], ``c`` raw cell_fmt (..., H).

    Returns (h raw vec_fmt, c_new raw cell_fmt).
    """
    A, gf, cf = p.act_frac, p.gate_fmt.frac_bits, p.cell_fmt.frac_bits
    i = plan_sigmoid(z[..., 0], gf, A)
    f = plan_sigmoid(z[..., 1], gf, A)
    g = plan_tanh(z[..., 2], gf, A)
    o = plan_sigmoid(z[..., 3], gf, A)
    F = A + max(cf, A)
    acc = (f * c << (F - A - cf)) + (i * g << (F - 2 * A))
    c_new = requantize(acc, F, p.cell_fmt)
    tc = plan_tanh(c_new, cf, A)
    h = requantize(o * tc, 2 * A, p.vec_fmt)
    return h, c_new


def lstm_golden(p: LSTMParams, wts: LSTMWeights, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bit-exact layer, step by step.

    Parameters
    ----------
    xs : int array (N, T, I), raw ``vec_fmt`` inputs.

    Returns
    -------
    h, c : int64 arrays (N, T, H): raw hidden states (``vec_fmt``) and cell states (``cell_fmt``).
    """
    xs = np.asarray(xs, dtype=np.int64)
    if xs.ndim != 3 or xs.shape[2] != p.input_size:
        raise UsageError(f"xs must have shape (N, T, {p.input_size}), got {xs.shape}")
    n, T, _ = xs.shape
    H = p.hidden
    h = np.zeros((n, H), dtype=np.int64)
    c = np.zeros((n, H), dtype=np.int64)
    hs = np.empty((n, T, H), dtype=np.int64)
    cs = np.empty((n, T, H), dtype=np.int64)
    cperm = column_perm(p)
    pk = packed_weights(p.bbs, wts.values, wts.indices)           # checked and packed once per run
    for t in range(T):  # the recurrence is inherent; each step is vectorised over sequences
        v = np.zeros((n, p.cols), dtype=np.int64)
        v[:, :p.input_size] = xs[:, t]
        v[:, p.x_pad:] = h
        y = spmxv(p.bbs, wts.values, wts.indices, v[:, cperm], packed=pk)      # (n, 4H) physical rows
        z = saturate(y + wts.bias, p.gate_fmt).reshape(n, H, 4)
        h, c = elementwise(p, z, c)
        hs[:, t], cs[:, t] = h, c
    return hs, cs


def lstm_float(w: np.ndarray, b: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Float reference (exact sigmoid/tanh, float64) of a logical layer; returns h (N, T, H).

    The product stays dense BLAS: ``w`` is any pruned matrix (no bank structure to exploit), and
    at the digits layer's size (256 x 72, 78 % sparse) the compiled sparse product only ties with
    one-thread BLAS at a batch of 32 (25 vs 23 us) and gains 1.5x at 360 (146 vs 223 us; at 50 %
    density BLAS wins 1.6x), measured here on the loaded 2-core host; ``hwcosim.pruning.csb_bench``
    records the same comparison (``study_sizes``) on every run of the ``csb_kernels`` bench.
    """
    w = np.asarray(w, dtype=np.float64)
    xs = np.asarray(xs, dtype=np.float64)
    n, T, _ = xs.shape
    H = w.shape[0] // 4
    h = np.zeros((n, H))
    c = np.zeros((n, H))
    hs = np.empty((n, T, H))
    for t in range(T):
        z = np.concatenate([xs[:, t], h], axis=1) @ w.T + b
        i, f, g, o = _sigmoid(z[:, :H]), _sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), _sigmoid(z[:, 3 * H:])
        c = f * c + i * g
        h = o * np.tanh(c)
        hs[:, t] = h
    return hs


# -- stream words ----------------------------------------------------------------------------

def _words(lanes: np.ndarray, width: int) -> list[int]:
    lanes = np.asarray(lanes, dtype=np.int64) & ((1 << width) - 1)
    out = np.zeros(lanes.shape[0], dtype=object)
    for i in range(lanes.shape[1]):
        out += lanes[:, i].astype(object) << (i * width)
    return [int(v) for v in out]


def pack_x_beats(p: LSTMParams, xs: np.ndarray) -> list[int]:
    """Input stream: one beat per time step (sequence-major), element ``i`` at ``i * XW``."""
    xs = np.asarray(xs, dtype=np.int64)
    return _words(xs.reshape(-1, p.input_size), p.vec_fmt.width)


def pack_bias_beats(p: LSTMParams, bias: np.ndarray) -> list[int]:
    """Bias stream: ``4H / P`` beats of ``P`` raw gate_fmt values (physical row order)."""
    return _words(np.asarray(bias).reshape(-1, p.pes), p.gate_fmt.width)


def unpack_h_beats(p: LSTMParams, words: list[int]) -> np.ndarray:
    """Hidden-state output beats (``U`` values each, units in order) -> raw (len * U,)."""
    w = p.vec_fmt.width
    out = np.empty((len(words), p.units), dtype=np.int64)
    for j, word in enumerate(words):
        for u in range(p.units):
            v = (int(word) >> (u * w)) & ((1 << w) - 1)
            out[j, u] = v - (1 << w) if v >> (w - 1) else v
    return out.reshape(-1)


# -- performance -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LSTMCycleModel:
    """Cycles of the LSTM engine (streams that never stall, weights loaded), exact vs the RTL.

    Ideal: ``T * rows/P * k`` per sequence (every multiplier busy with a stored nonzero).
    Expected, from the input beat of the first step accepted to the last hidden beat leaving:
    the first vector load (``S - x_beats + 1`` cycles counted from that beat), ``T`` passes of
    ``rows/P * k`` weight beats per sequence, :meth:`step_gap` drain cycles between consecutive
    steps of a sequence (the recurrence), ``max(0, S - rows/P*k)`` between sequences (the next
    sequence's first vector loads while the current sequence's last step computes) and
    :meth:`seq_tail` after the last weight beat. The pipeline depths are the RTL's: the SpMxV's
    (``p.bbs.latency``, with its optional stages) and :data:`EW_LATENCY`.
    """

    p: LSTMParams

    @property
    def step_ideal(self) -> int:
        return self.p.bbs.weight_beats

    def step_gap(self) -> int:
        """Recurrence gap (:data:`STEP_GAP` with this layer's SpMxV latency); a ``U > B`` width
        converter adds ``U/B - 1`` beats after the last entry."""
        return STEP_GAP + self.p.bbs.latency - PIPELINE_LATENCY + max(0, self.p.units // self.p.banks - 1)

    def seq_tail(self) -> int:
        """Cycles after a sequence's last weight beat up to and including its last hidden beat."""
        return self.p.bbs.latency + EW_LATENCY

    def seq_gap(self) -> int:
        return max(0, self.p.bank_size - self.step_ideal)

    def ideal(self, n_seq: int, T: int) -> int:
        return n_seq * T * self.step_ideal

    def expected(self, n_seq: int, T: int) -> int:
        head = self.p.bank_size - self.p.x_beats + 1
        return (head + self.seq_tail() + n_seq * T * self.step_ideal + n_seq * (T - 1) * self.step_gap()
                + (n_seq - 1) * self.seq_gap())

    def steady_step(self) -> int:
        """Cycles per step inside a long sequence."""
        return self.step_ideal + self.step_gap()

    def macs(self, n_seq: int, T: int) -> int:
        return n_seq * T * self.p.rows * self.p.k * self.p.banks

    def utilisation(self, cycles: int, n_seq: int, T: int) -> float:
        return self.macs(n_seq, T) / (cycles * self.p.pes * self.p.banks)


def csr_step_cycles(mask: np.ndarray, multipliers: int, row_overhead: int = 0) -> dict:
    """Cycle model of an unbalanced row-wise CSR engine (ESE-style, Han et al., FPGA 2017).

    ``multipliers`` PEs with one multiplier each; row ``r`` goes to PE ``r % multipliers``; a PE
    does one multiply per cycle through its rows' nonzeros (``row_overhead`` extra cycles per
    row). A step ends when the most loaded PE ends (the recurrence synchronises every step).
    Rows are dealt in the order given: pass the physical-order mask (:func:`to_physical`) to
    match the CSR RTL. :func:`hwcosim.models.bbs.csr.cycles_from_mask` is the exact model of that RTL
    (empty rows cost one entry; a product never ends before the vector has loaded); the bench
    uses it.

    Returns dict ``cycles`` (per step), ``ideal`` (nnz / multipliers), ``utilisation``, ``loads``.
    """
    mask = np.asarray(mask, dtype=bool)
    nnz_row = mask.sum(axis=1)
    loads = np.bincount(np.arange(mask.shape[0]) % multipliers, weights=nnz_row + row_overhead,
                        minlength=multipliers).astype(np.int64)
    cyc = int(loads.max())
    nnz = int(nnz_row.sum())
    return {"cycles": cyc, "ideal": -(-nnz // multipliers), "utilisation": nnz / (cyc * multipliers),
            "loads": loads}


def gops(p: LSTMParams, clock_mhz: float, step_cycles: float) -> dict:
    """Effective throughput: dense-equivalent ops per step (2 per weight of the dense fused matrix)
    over the step time. This is the convention of Cao et al. (dense ops / time)."""
    dense_ops = 2 * p.rows * (p.input_size + p.hidden)
    sparse_ops = 2 * p.rows * p.k * p.banks
    t = step_cycles / (clock_mhz * 1e6)
    return {"dense_ops_per_step": dense_ops, "sparse_ops_per_step": sparse_ops, "step_cycles": step_cycles,
            "clock_mhz": clock_mhz, "effective_gops": dense_ops / t / 1e9, "sparse_gops": sparse_ops / t / 1e9}


def dequant_h(p: LSTMParams, h: np.ndarray) -> np.ndarray:
    return dequantize(h, p.vec_fmt)
