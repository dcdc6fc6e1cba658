"""Golden model of the BeamRaster precoder datapath: the specification :mod:`hwcosim.hdl.beamraster` meets.

Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed Precoders",
IEEE TMC 18(5), 2019 (equations ours, see :mod:`hwcosim.models.beamraster.precoders`).

For every subcarrier-symbol ``n`` the datapath turns the ``K`` users' symbols ``s`` into the
transmit vector ``x`` of ``M`` antennas, in two steps:

1. **pre-distortion** ``s' = P s`` (``K x K`` complex, ``P`` chosen per subcarrier group);
2. **beam synthesis** ``x[m] = sum_k tw[(m * (b_k XOR M/2)) mod M] * s'_k``, where ``b_k`` is user
   ``k``'s selected beam and ``tw[i] = exp(2j pi i / M)``. This is ``sqrt(M) F[:, beams] s'``
   with the DFT beam bank of :func:`hwcosim.models.beamraster.precoders.dft_beams`: every coefficient of
   every DFT beam is an ``M``-th root of unity, so the whole pre-computed bank is one table of
   ``M`` twiddles (``M`` a power of two: ``(b - M/2) mod M = b XOR M/2``).

Fixed point (rules of :mod:`hwcosim.models.fixedpoint`): complex products are exact
(``re = ar*br - ai*bi``, ``im = ar*bi + ai*br``), sums are exact, and each step requantises once
(round half up, saturate): ``s'`` to ``mid_fmt``, ``x`` to ``out_fmt``. Twiddles are quantised
once (round to nearest, saturate) to ``tw_fmt``.

Scaling (host side, :func:`frame_coefficients`): with the column-normalised float ``P`` (total
power 1) the host loads ``P_hw = quantize(backoff * P)``; then ``x_hw ~ backoff * sqrt(M) * W s``
and each antenna's RMS is ``backoff`` for unit-power symbols (0.5 by default: 12 dB headroom
in ``out_fmt = Q3.13``).

Frames and coefficient sets. A frame is ``symbols_per_frame`` OFDM symbols of
``groups * sc_per_group`` subcarriers; subcarrier ``f`` of a symbol uses pre-distortion group
``f // sc_per_group``. Each frame consumes one *coefficient set* of ``1 + groups * K`` beats.

Stream words (bit 0 = LSB), shared with the RTL and the testbench:

- symbol beat (``s``), one per subcarrier-symbol: ``K`` complex symbols, user ``k`` at offset
  ``2 * k * SW``: real part in the low ``SW`` bits, imaginary part above (two's complement).
- coefficient beat (``c``), width ``max(2 K PW, K * log2 M)``: beat 0 of a set holds the beams,
  ``b_k`` at offset ``k * log2 M``; beat ``1 + g * K + k`` holds row ``k`` of group ``g``'s
  ``P``: element ``j`` at offset ``2 * j * PW`` (real low, imaginary high).
- output beat (``x``): ``L`` complex samples, lane ``l`` at offset ``2 * l * OW`` holding antenna
  ``a * L + l``; a subcarrier-symbol gives ``M / L`` beats, ``a = 0 .. M/L - 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, quantize, requantize

__all__ = ["PrecoderParams", "twiddles", "beam_coefficients", "precode_fixed", "precode_float",
           "frame_coefficients", "pack_symbol_beats", "pack_coef_beats", "unpack_output_beats",
           "CycleModel", "pd_latency", "pd_tree_stages", "BM_LATENCY", "S_BANKS", "ecp5_params", "qam16", "scenario",
           "fixed_point_sum_rate"]

#: ``s'`` buffers between the two stages: the pre-distortion stage runs up to three symbols ahead
#: of the beam stage, which covers its pipeline latency while ``3 K M / L >= K + pd_latency``.
S_BANKS = 4
#: Cycles from a beam-stage issue to the output register: the user's beam and ``s'`` (picked
#: from their buffer), twiddle index, twiddle, the four real products of each lane, accumulate,
#: requantise.
BM_LATENCY = 6


def pd_tree_stages(K: int) -> int:
    """Register stages of the pre-distortion adder tree: ``1 + ceil(log2 K)`` adder levels (the
    first forms ``re*re - im*im``), two levels per 10 ns cycle."""
    levels = 1 + (K - 1).bit_length()
    return (levels + 1) // 2


def pd_latency(K: int) -> int:
    """Cycles from a row's issue (its memory read) to the first beam-stage issue that can use
    its ``s'``, for the last row of a symbol: the memory read, a register on the read data, the
    products (registered twice: the DSP's output register, then the fabric), the adder-tree
    stages, the requantised sum (a register: the clock on an LFE5U-85F needs it) and the write."""
    return 6 + pd_tree_stages(K)


def _pos_int(name: str, v) -> None:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
        raise UsageError(f"BeamRaster {name} must be a positive integer, not {v!r}")


# Largest parameters the generator accepts: far above a massive-MIMO array (M=256) or an LTE frame
# (100 resource blocks x 14 symbols), low enough that a typo is refused instead of hanging.
_LIMITS = {"M": 4096, "K": 4096, "lanes": 4096, "groups": 1 << 16, "sc_per_group": 1 << 16,
           "symbols_per_frame": 1 << 16}


@dataclass(frozen=True)
class PrecoderParams:
    """Parameters shared by the golden model, the RTL, the testbench and the Verilog build.

    Parameters
    ----------
    M : int
        Antennas, a power of two >= 4 (the twiddle table has ``M`` entries).
    K : int
        Users (1 <= K <= M), each on a distinct beam.
    lanes : int
        Antennas computed in parallel (L, divides M): ``4 L`` real multipliers in the beam stage.
    groups : int
        Pre-distortion groups per OFDM symbol (one ``K x K`` matrix each).
    sc_per_group : int
        Subcarriers sharing one pre-distortion matrix (12 = an LTE resource block).
    symbols_per_frame : int
        OFDM symbols per frame (coefficient sets swap only between frames).
    sym_fmt, pd_fmt, mid_fmt, tw_fmt, out_fmt : Q
        Formats of the symbols, pre-distortion coefficients, pre-distorted symbols ``s'``,
        twiddles and antenna samples.
    """

    M: int = 64
    K: int = 8
    lanes: int = 64
    groups: int = 4
    sc_per_group: int = 3
    symbols_per_frame: int = 2
    sym_fmt: Q = field(default_factory=lambda: Q(2, 14))
    pd_fmt: Q = field(default_factory=lambda: Q(2, 14))
    mid_fmt: Q = field(default_factory=lambda: Q(2, 14))
    tw_fmt: Q = field(default_factory=lambda: Q(2, 14))
    out_fmt: Q = field(default_factory=lambda: Q(3, 13))

    def __post_init__(self):
        for name in ("M", "K", "lanes", "groups", "sc_per_group", "symbols_per_frame"):
            _pos_int(name, getattr(self, name))
            if getattr(self, name) > _LIMITS[name]:
                raise UsageError(f"BeamRaster {name}={getattr(self, name)} is beyond what this generator builds "
                                 f"(at most {_LIMITS[name]}); use a smaller {name}")
        if self.M < 4 or self.M & (self.M - 1):
            raise UsageError(f"BeamRaster M={self.M} antennas: the twiddle table needs a power of two >= 4 "
                             "(e.g. 64, 128, 256)")
        if self.K > self.M:
            raise UsageError(f"BeamRaster K={self.K} users exceed the M={self.M} beams; use K <= M")
        if self.M % self.lanes:
            raise UsageError(f"BeamRaster lanes={self.lanes} does not divide M={self.M}; use a power of two <= M")
        for name in ("sym_fmt", "pd_fmt", "mid_fmt", "tw_fmt", "out_fmt"):
            if not isinstance(getattr(self, name), Q):
                raise UsageError(f"BeamRaster {name} must be a models.fixedpoint.Q, not {getattr(self, name)!r}")
        if self.tw_fmt.max_value + self.tw_fmt.lsb < 1.0 or self.tw_fmt.frac_bits < 4:
            raise UsageError(f"BeamRaster tw_fmt {self.tw_fmt} cannot hold unit-magnitude twiddles with at least "
                             "4 fractional bits; use Q2.14 or Q1.15")

    # --- derived sizes ---------------------------------------------------------------------
    @property
    def beam_bits(self) -> int:
        return int(self.M).bit_length() - 1

    @property
    def ant_groups(self) -> int:
        """Output beats per subcarrier-symbol (M / L)."""
        return self.M // self.lanes

    @property
    def sc_per_symbol(self) -> int:
        return self.groups * self.sc_per_group

    @property
    def frame_len(self) -> int:
        """Subcarrier-symbols per frame."""
        return self.sc_per_symbol * self.symbols_per_frame

    @property
    def coef_beats(self) -> int:
        """Beats of one coefficient set: the beams, then ``groups * K`` rows."""
        return 1 + self.groups * self.K

    @property
    def coef_width(self) -> int:
        return max(2 * self.K * self.pd_fmt.width, self.K * self.beam_bits)

    @property
    def pd_acc_width(self) -> int:
        """Bits of a pre-distortion sum: product + 1 (complex add) + log2 K."""
        return self.pd_fmt.width + self.sym_fmt.width + 1 + max(0, int(self.K - 1).bit_length())

    @property
    def bm_acc_width(self) -> int:
        return self.tw_fmt.width + self.mid_fmt.width + 1 + max(0, int(self.K - 1).bit_length())

    @property
    def real_multipliers(self) -> int:
        """4 per complex MAC: K in the pre-distortion stage, L in the beam stage."""
        return 4 * (self.K + self.lanes)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("M", "K", "lanes", "groups", "sc_per_group", "symbols_per_frame")}
        for k in ("sym_fmt", "pd_fmt", "mid_fmt", "tw_fmt", "out_fmt"):
            d[k] = getattr(self, k).to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> PrecoderParams:
        kw = {k: int(d[k]) for k in ("M", "K", "lanes", "groups", "sc_per_group", "symbols_per_frame")}
        kw.update({k: Q.from_dict(d[k]) for k in ("sym_fmt", "pd_fmt", "mid_fmt", "tw_fmt", "out_fmt")})
        return cls(**kw)


def twiddles(p: PrecoderParams) -> tuple[np.ndarray, np.ndarray]:
    """Raw twiddle table ``tw[i] = exp(2j pi i / M)`` in ``tw_fmt``: (re, im), each ``(M,)``."""
    ang = 2 * np.pi * np.arange(p.M) / p.M
    return quantize(np.cos(ang), p.tw_fmt), quantize(np.sin(ang), p.tw_fmt)


def beam_coefficients(p: PrecoderParams, beams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw coefficients ``(M, K)`` of the selected beams: ``tw[(m * (b XOR M/2)) mod M]``."""
    beams = np.asarray(beams, dtype=np.int64)
    idx = (np.arange(p.M)[:, None] * (beams[None, :] ^ (p.M // 2))) & (p.M - 1)
    tr, ti = twiddles(p)
    return tr[idx], ti[idx]


def _check_sets(p: PrecoderParams, beams, P_re, P_im, n_frames: int):
    beams = np.asarray(beams, dtype=np.int64).reshape(n_frames, p.K)
    P_re = np.asarray(P_re, dtype=np.int64).reshape(n_frames, p.groups, p.K, p.K)
    P_im = np.asarray(P_im, dtype=np.int64).reshape(n_frames, p.groups, p.K, p.K)
    if beams.min() < 0 or beams.max() >= p.M:
        raise UsageError(f"beam indices must lie in [0, {p.M}), got {beams.min()}..{beams.max()}")
    for a in (P_re, P_im):
        if a.min() < p.pd_fmt.min_raw or a.max() > p.pd_fmt.max_raw:
            raise UsageError(f"pre-distortion coefficients exceed {p.pd_fmt}")
    return beams, P_re, P_im


def precode_fixed(p: PrecoderParams, s_re, s_im, beams, P_re, P_im):
    """Bit-exact datapath.

    Parameters
    ----------
    s_re, s_im : int arrays (N, K)
        Raw symbols in ``sym_fmt``; ``N`` is a whole number of frames.
    beams : int array (F, K)
        Beam of every user, per frame.
    P_re, P_im : int arrays (F, groups, K, K)
        Raw pre-distortion matrices in ``pd_fmt``, per frame and group.

    Returns
    -------
    (x_re, x_im) : int64 arrays (N, M) in ``out_fmt``; and (sp_re, sp_im) (N, K) in ``mid_fmt``.
    """
    s_re = np.asarray(s_re, dtype=np.int64)
    s_im = np.asarray(s_im, dtype=np.int64)
    N = s_re.shape[0]
    if s_re.shape != (N, p.K) or s_im.shape != (N, p.K) or N % p.frame_len:
        raise UsageError(f"symbols must have shape (N, K={p.K}) with N a multiple of the frame length "
                         f"{p.frame_len}, got {s_re.shape}")
    for a in (s_re, s_im):
        if a.min() < p.sym_fmt.min_raw or a.max() > p.sym_fmt.max_raw:
            raise UsageError(f"symbols exceed {p.sym_fmt}")
    F = N // p.frame_len
    beams, P_re, P_im = _check_sets(p, beams, P_re, P_im, F)
    n = np.arange(N)
    frame = n // p.frame_len
    grp = (n % p.sc_per_symbol) // p.sc_per_group
    Pr, Pi = P_re[frame, grp], P_im[frame, grp]          # (N, K, K)
    acc_r = np.einsum("nkj,nj->nk", Pr, s_re) - np.einsum("nkj,nj->nk", Pi, s_im)
    acc_i = np.einsum("nkj,nj->nk", Pr, s_im) + np.einsum("nkj,nj->nk", Pi, s_re)
    frac1 = p.pd_fmt.frac_bits + p.sym_fmt.frac_bits
    sp_r, sp_i = requantize(acc_r, frac1, p.mid_fmt), requantize(acc_i, frac1, p.mid_fmt)
    x_r = np.empty((N, p.M), dtype=np.int64)
    x_i = np.empty((N, p.M), dtype=np.int64)
    frac2 = p.tw_fmt.frac_bits + p.mid_fmt.frac_bits
    for f in range(F):  # one beam set per frame; vectorised over the frame's symbols
        cr, ci = beam_coefficients(p, beams[f])            # (M, K)
        sl = slice(f * p.frame_len, (f + 1) * p.frame_len)
        ar = sp_r[sl] @ cr.T - sp_i[sl] @ ci.T
        ai = sp_i[sl] @ cr.T + sp_r[sl] @ ci.T
        x_r[sl], x_i[sl] = requantize(ar, frac2, p.out_fmt), requantize(ai, frac2, p.out_fmt)
    return (x_r, x_i), (sp_r, sp_i)


def precode_float(M: int, s: np.ndarray, beams: np.ndarray, P: np.ndarray) -> np.ndarray:
    """Float reference ``x = sqrt(M) F[:, beams] P s``: s (N, K) complex, P (N, K, K) -> (N, M)."""
    from hwcosim.models.beamraster.precoders import dft_beams

    sp = np.einsum("nkj,nj->nk", P, s)
    return math.sqrt(M) * sp @ dft_beams(M)[:, beams].T


def frame_coefficients(p: PrecoderParams, P: np.ndarray, backoff: float = 0.5):
    """Host side: float column-normalised ``P`` (groups, K, K) -> raw ``(P_re, P_im)`` in ``pd_fmt``."""
    P = np.asarray(P, dtype=np.complex128) * backoff
    return quantize(P.real, p.pd_fmt), quantize(P.imag, p.pd_fmt)


def _pack(lanes: np.ndarray, width: int) -> list[int]:
    """(beats, lanes) unsigned lane values -> one int per beat, lane 0 at the LSB."""
    words = np.zeros(lanes.shape[0], dtype=object)
    for i in range(lanes.shape[1]):
        words += lanes[:, i].astype(object) << (i * width)
    return [int(w) for w in words]


def _interleave(re, im, width):
    mask = (1 << width) - 1
    re, im = np.asarray(re, dtype=np.int64), np.asarray(im, dtype=np.int64)
    out = np.empty(re.shape[:-1] + (2 * re.shape[-1],), dtype=np.int64)
    out[..., 0::2], out[..., 1::2] = re & mask, im & mask
    return out


def pack_symbol_beats(p: PrecoderParams, s_re, s_im) -> list[int]:
    """One word per subcarrier-symbol: K complex symbols."""
    return _pack(_interleave(s_re, s_im, p.sym_fmt.width).reshape(-1, 2 * p.K), p.sym_fmt.width)


def pack_coef_beats(p: PrecoderParams, beams, P_re, P_im) -> list[int]:
    """Coefficient sets for ``F`` frames: ``F * (1 + groups * K)`` words."""
    n_frames = np.asarray(beams).reshape(-1, p.K).shape[0]
    beams, P_re, P_im = _check_sets(p, beams, P_re, P_im, n_frames)
    rows = _interleave(P_re, P_im, p.pd_fmt.width).reshape(n_frames, p.groups * p.K, 2 * p.K)
    words = []
    for f in range(n_frames):
        words += _pack(beams[f][None, :], p.beam_bits)
        words += _pack(rows[f], p.pd_fmt.width)
    return words


def unpack_output_beats(p: PrecoderParams, words: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Output words -> raw (x_re, x_im), shape (len(words) * L / M, M)."""
    ow = p.out_fmt.width
    mask = (1 << ow) - 1
    n = len(words)
    raw = np.empty((n, 2 * p.lanes), dtype=np.int64)
    for b, w in enumerate(words):
        w = int(w)
        for i in range(2 * p.lanes):
            raw[b, i] = (w >> (i * ow)) & mask
    raw = np.where(raw >> (ow - 1), raw - (1 << ow), raw)
    raw = raw.reshape(n // p.ant_groups, p.M, 2)
    return raw[..., 0], raw[..., 1]


@dataclass(frozen=True)
class CycleModel:
    """Cycles of the precoder datapath (RTL in :mod:`hwcosim.hdl.beamraster`).

    The beam stage computes ``L`` antennas of one user per cycle, so a subcarrier-symbol takes
    ``K * M / L`` cycles there; the pre-distortion stage takes ``K`` cycles (one row of ``P``
    per cycle with ``K`` complex multipliers) and overlaps it through ``S_BANKS`` ``s'``
    buffers. The ideal is the beam-stage bound; with streams that never stall and coefficient
    sets that arrive in time the RTL adds only the pipeline fill: the pre-distortion of the first
    symbol (``K + pd_latency(K)``) and the beam stage's latency (``BM_LATENCY``).
    """

    p: PrecoderParams

    @property
    def cycles_per_symbol(self) -> int:
        return self.p.K * self.p.ant_groups

    def ideal(self, n_symbols: int) -> int:
        return n_symbols * self.cycles_per_symbol

    def expected(self, n_symbols: int) -> int:
        """From the first symbol beat's acceptance to the last output beat's transfer, inclusive."""
        return self.p.K + pd_latency(self.p.K) + self.ideal(n_symbols) + BM_LATENCY

    @property
    def beam_bound(self) -> bool:
        """Whether the beam stage bounds throughput: ``(S_BANKS - 1) K M / L >= K + pd_latency``.

        With ``S_BANKS`` ``s'`` buffers the pre-distortion of symbol ``n + S_BANKS - 1``
        (``1 + K + pd_latency - 1`` cycles from the buffer's release) must finish within
        ``S_BANKS - 1`` beam-stage symbols; otherwise (e.g. ``K = 1`` with ``L = M``) bubbles
        appear and :meth:`expected` is a lower bound.
        """
        return (S_BANKS - 1) * self.cycles_per_symbol >= self.p.K + pd_latency(self.p.K)

    def symbols_per_cycle(self) -> float:
        return 1.0 / self.cycles_per_symbol

    def clock_hz(self, symbols_per_second: float, instances: int = 1) -> float:
        """Clock needed to sustain ``symbols_per_second`` subcarrier-symbols on ``instances`` copies."""
        return symbols_per_second * self.cycles_per_symbol / instances

    def cmacs(self, n_symbols: int) -> int:
        """Complex MACs done: ``K^2 + K M`` per subcarrier-symbol."""
        return n_symbols * (self.p.K ** 2 + self.p.K * self.p.M)


def ecp5_params() -> PrecoderParams:
    """The precoder for a Lattice LFE5U-85F (156 MULT18X18D): the default 64 antennas, 8 users
    and LTE-like frame, with the beam stage folded over 16 lanes instead of 64.

    The datapath needs ``4 (K + L)`` 16 x 16 multipliers: 288 with the default ``L = 64`` (more
    than the part has), 96 (62 %) with ``L = 16``. The beam stage then shares its multipliers
    over ``M / L = 4`` antenna groups: ``K M / L = 32`` cycles per subcarrier-symbol instead of 8.
    """
    return PrecoderParams(M=64, K=8, lanes=16, groups=100, sc_per_group=12, symbols_per_frame=14)


def qam16(n: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-average-power 16-QAM symbols, shape (n, K)."""
    lv = np.array([-3.0, -1.0, 1.0, 3.0]) / math.sqrt(10.0)
    return lv[rng.integers(0, 4, (n, K))] + 1j * lv[rng.integers(0, 4, (n, K))]


def scenario(p: PrecoderParams, n_frames: int = 1, snr_db: float = 30.0, seed: int = 0, kind: str = "geometric",
             order: int | None = 1, backoff: float = 0.5) -> dict:
    """A channel-driven stimulus for the datapath: BeamRaster coefficients per frame and 16-QAM symbols.

    Each frame draws a channel (``sc_per_symbol`` subcarriers, seed ``seed + frame``), selects
    beams and computes the pre-distortion of each group from the group's first subcarrier
    (**ours**). Returns the raw arrays the RTL takes, the float pieces behind them, and the
    per-subcarrier channels for :func:`fixed_point_sum_rate`.
    """
    from hwcosim.models.beamraster.channel import ChannelParams, make_channel
    from hwcosim.models.beamraster.precoders import beamraster

    snr = 10 ** (snr_db / 10)
    rng = np.random.default_rng(seed)
    Hs, beams, Pf, Pr, Pi = [], [], [], [], []
    for f in range(n_frames):
        H = make_channel(ChannelParams(M=p.M, K=p.K, n_sc=p.sc_per_symbol, kind=kind, seed=seed + f))
        _, b, P = beamraster(H, snr, order=order, return_parts=True)
        Pg = P[:: p.sc_per_group]                          # (groups, K, K)
        r, i = frame_coefficients(p, Pg, backoff)
        Hs.append(H), beams.append(b), Pf.append(Pg), Pr.append(r), Pi.append(i)
    N = n_frames * p.frame_len
    s = qam16(N, p.K, rng)
    return {"H": np.stack(Hs), "beams": np.stack(beams), "P": np.stack(Pf), "P_re": np.stack(Pr),
            "P_im": np.stack(Pi), "s": s, "s_re": quantize(s.real, p.sym_fmt), "s_im": quantize(s.imag, p.sym_fmt),
            "snr": snr, "backoff": backoff}


def fixed_point_sum_rate(p: PrecoderParams, sc: dict, x_re: np.ndarray, x_im: np.ndarray) -> dict:
    """Sum rate with the datapath's output vs the float precoder it implements.

    The error ``e = x_hw / (backoff sqrt(M)) - W s`` (coefficient quantisation, rounding and
    saturation together) is treated as extra noise at each receiver, its power averaged over
    the symbols of each subcarrier: a conservative bound, since the coefficient part of ``e``
    is a fixed linear distortion.
    """
    from hwcosim.models.beamraster.precoders import dft_beams, sum_rate

    F = dft_beams(p.M)
    n = np.arange(x_re.shape[0])
    frame, f_sc = n // p.frame_len, n % p.sc_per_symbol
    grp = f_sc // p.sc_per_group
    W = np.einsum("fmk,fgkj->fgmj", F[:, sc["beams"]].transpose(1, 0, 2), sc["P"])  # (F, groups, M, K)
    Wn = W[frame, grp]                                               # (N, M, K)
    x_fl = np.einsum("nmk,nk->nm", Wn, sc["s"])
    x_hw = (x_re + 1j * x_im) * p.out_fmt.lsb / (sc["backoff"] * math.sqrt(p.M))
    e = x_hw - x_fl
    rates_fx, rates_fl = [], []
    for fr in range(sc["H"].shape[0]):
        H = sc["H"][fr]                                              # (sc_per_symbol, K, M)
        Wsc = W[fr][np.arange(p.sc_per_symbol) // p.sc_per_group]    # (sc, M, K)
        sel = frame == fr
        he = np.einsum("fkm,nm->nfk", H, e[sel])                     # every symbol through every subcarrier
        own = f_sc[sel]
        d = np.zeros((p.sc_per_symbol, p.K))
        for f in range(p.sc_per_symbol):
            d[f] = np.mean(np.abs(he[own == f, f]) ** 2, axis=0)
        rates_fx.append(sum_rate(H, Wsc, sc["snr"], distortion=d))
        rates_fl.append(sum_rate(H, Wsc, sc["snr"]))
    evm = float(np.sqrt(np.mean(np.abs(e) ** 2) / np.mean(np.abs(x_fl) ** 2)))
    fx, fl = float(np.mean(rates_fx)), float(np.mean(rates_fl))
    sat = int(np.sum((np.abs(x_re) >= p.out_fmt.max_raw) | (np.abs(x_im) >= p.out_fmt.max_raw)))
    return {"sum_rate_fixed": fx, "sum_rate_float": fl, "fraction": fx / fl, "evm": evm, "saturated": sat}
