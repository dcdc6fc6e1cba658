"""Temporal-sparsity (delta) mode of the BBS LSTM engine: golden model, cycle model, float reference.

Beyond Cao et al. (FPGA 2019). The delta idea is DeltaRNN / DeltaLSTM (Neil et al., 2017; Gao
et al., "EdgeDRNN", 2020; Gao, Delbruck, Liu, "Spartus", 2022): an RNN input changes slowly, so
instead of ``W v_t`` the engine computes ``M_t = M_{t-1} + W (v_t - vhat_{t-1})`` and skips
the columns whose change is below a threshold. This module is the specification
:class:`hwcosim.hdl.bbs.lstm.LSTMLayer` meets when built with ``delta_budget=J``.

Why a *bank-balanced* delta rule (our design decision)
------------------------------------------------------
The BBS engine is row-major: one weight beat carries, for each of ``P`` rows, one nonzero of
each of the ``B`` banks, at up to ``P * B`` different columns. Skipping a beat because "all of
its columns have a zero delta" (option (i), :func:`beat_skip_fraction`) rarely happens: on the
trained digits layer (P = B = 8, k = 2 of 9) it would skip 6% of the beats at theta = 0 (all of
them at a sequence's first step, where h = 0), 16% at theta = 0.3 (where the accuracy has
already collapsed); on the unpruned layer 15% at theta = 0.1 where the rule below skips 39%
(``hwcosim bench``, ``bbs_lstm_delta``). It also gives no bound on a step's work. Instead the
delta mode runs *column-major inside each bank*:

- Per step, in every bank ``b``, at most ``J`` columns (the ``J`` largest ``|delta|`` above the
  threshold) are *selected* (Spartus balances its column work with column-balanced targeted
  dropout at training time; here the balance is enforced at run time, per bank).
- Weight beat ``j' < J_t`` of row group ``g`` carries, in lane (PE ``p``, bank ``b``), the
  weight of row ``g P + p`` at the ``j'``-th selected column of bank ``b`` (0 when that row
  keeps no weight there, found by comparing the column with the row's ``k`` stored in-bank
  indices), so the SpMxV multiplies only selected columns.
- ``J_t = max(1, max_b |selected_b|) <= J`` beats per row group instead of ``k``: a step costs
  ``rows/P * J_t`` weight cycles (plus the unchanged recurrence gap), data dependent and never
  more than ``rows/P * J``. Bank balance holds by construction: every bank sends at most ``J``.

Arithmetic (bit-exact spec)
---------------------------
Logical vector ``v_t = [x_t; 0 (pad); h_{t-1}]`` (``cols`` elements, :mod:`hwcosim.models.bbs.lstm`
layout: element ``e`` lies in bank ``e % B`` at in-bank address ``e // B``).

1. Sequence start: reference ``vhat = 0`` (all ``cols``), memory ``M = 0`` (all ``rows``),
   cell ``c = 0``, ``h = 0``.
2. ``d = v_t - vhat`` exactly (raw ``vec_fmt`` LSBs; format ``Q(vec.int_bits + 1, vec.frac)``).
3. Candidate: ``|d| > theta`` (``theta`` a raw unsigned integer in ``vec_fmt`` LSBs, a register
   of the RTL; ``theta = 0`` makes every changed element a candidate).
4. Selection, per bank: the ``J`` candidates of largest ``|d|``, ties to the lower in-bank
   address.
5. ``vhat[e] = v_t[e]`` for selected ``e`` (others keep their old reference); ``d_sel`` = ``d``
   on selected elements, 0 elsewhere.
6. ``M += W d_sel`` exactly: the SpMxV result is not rounded (its output format is its full
   accumulator, ``acc_frac`` fractional bits), and ``M`` is kept with ``acc_frac`` fractional
   bits in ``acc_bits(weight_fmt, vec_fmt, B k)`` bits. No saturation is needed: by linearity
   ``M = W vhat`` exactly and every ``vhat`` element lies in ``vec_fmt``, so ``M`` obeys the same
   bound as the non-delta accumulator.
7. ``z = sat_gate(requantize(M, acc_frac, gate_fmt) + bias)`` and the element-wise unit of
   :func:`hwcosim.models.bbs.lstm.elementwise`, unchanged.

Consequence: with ``theta = 0`` and ``J = bank_size`` every changed element is selected,
``vhat = v_t`` and the delta mode is bit-identical to :func:`hwcosim.models.bbs.lstm.lstm_golden`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.bbs.lstm import LSTMCycleModel, LSTMParams, LSTMWeights, _sigmoid, column_perm, elementwise
from hwcosim.models.bbs.spmxv import packed_weights
from hwcosim.models.errors import UsageError
from hwcosim.models.fixedpoint import Q, acc_bits, requantize, saturate

__all__ = ["delta_fmt", "mem_bits", "check_budget", "select_columns", "lstm_delta_golden", "lstm_delta_float",
           "DeltaCycleModel", "beat_skip_fraction", "dense_ops_per_step"]


def delta_fmt(p: LSTMParams) -> Q:
    """Format of an exact delta of two ``vec_fmt`` values: one more integer bit."""
    return Q(p.vec_fmt.int_bits + 1, p.vec_fmt.frac_bits)


def mem_bits(p: LSTMParams) -> int:
    """Width of the pre-activation memory M (``acc_frac`` fractional bits); never overflows."""
    return acc_bits(p.weight_fmt, p.vec_fmt, p.banks * p.k)


def check_budget(p: LSTMParams, budget: int) -> int:
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or not 1 <= budget <= p.bank_size:
        raise UsageError(f"delta budget J must be an integer in [1, bank_size={p.bank_size}] "
                         f"(selected columns per bank per step), not {budget!r}")
    if p.bank_size > p.rows // p.pes:
        raise UsageError(f"delta mode needs bank_size={p.bank_size} <= rows/P={p.rows // p.pes} (a step of "
                         "one beat per row group must cover the next vector's load); use fewer banks or PEs")
    return int(budget)


def select_columns(p: LSTMParams, d: np.ndarray, theta, budget: int) -> np.ndarray:
    """Selection mask of the delta rule (steps 3-4 above).

    Parameters
    ----------
    d : int or float array (n, cols)
        Deltas, logical order.
    theta : scalar
        Threshold (same units as ``d``); candidates have ``|d| > theta``.
    budget : int
        J, selected columns per bank at most.

    Returns
    -------
    bool array (n, cols)
    """
    d = np.asarray(d)
    n = d.shape[0]
    S, B = p.bank_size, p.banks
    a = np.abs(d).reshape(n, S, B)                    # [seq, in-bank address, bank]
    cand = a > theta
    key = np.where(cand, a, -1).astype(np.float64)
    order = np.argsort(-key, axis=1, kind="stable")[:, :budget, :]   # largest first, lower address on ties
    sel = np.zeros((n, S, B), dtype=bool)
    np.put_along_axis(sel, order, np.take_along_axis(cand, order, axis=1), axis=1)
    return sel.reshape(n, p.cols)


def _exact_spmxv(p: LSTMParams, wts: LSTMWeights, v_phys: np.ndarray, packed=None) -> np.ndarray:
    """Exact (unrounded) W v in raw ``acc_frac`` units, physical rows; ``v_phys`` (n, cols).

    The compiled CSB kernel (:mod:`hwcosim.models.csb_kernels`, int64: the same sums as the numpy gather
    and einsum it replaced, bit for bit); ``packed`` (:func:`~models.bbs.spmxv.packed_weights`)
    packs the matrix once per layer run. Measured here (loaded 2-core host, best of 7): the digits
    layer (256 x 72, 2 of 9 per bank), 360 sequences, 1.75 ms with the einsum against 0.16 ms;
    4096 x 2048, 16 sequences, 514 ms against 2.4 ms.
    """
    if packed is None:
        packed = packed_weights(p.bbs, wts.values, wts.indices)
    return packed.spmm(np.asarray(v_phys, dtype=np.int64))


def lstm_delta_golden(p: LSTMParams, wts: LSTMWeights, xs: np.ndarray, theta: int, budget: int,
                      stats: bool = False):
    """Bit-exact delta-mode layer.

    Parameters
    ----------
    xs : int array (N, T, I), raw ``vec_fmt``.
    theta : int
        Raw threshold (``vec_fmt`` LSBs), ``0 <= theta < 2**vec_fmt.width``.
    budget : int
        J, selected columns per bank per step.
    stats : bool
        Also return a dict: ``beats_per_group`` (N, T) = ``J_t``; ``selected`` and ``candidates``
        (N, T) column counts; ``mem`` (N, T, rows) the memory ``M`` after each step;
        ``sel_mask`` and ``cand_mask`` (N, T, cols) bool, logical order.

    Returns
    -------
    h, c : int64 (N, T, H); and the stats dict when ``stats``.
    """
    xs = np.asarray(xs, dtype=np.int64)
    if xs.ndim != 3 or xs.shape[2] != p.input_size:
        raise UsageError(f"xs must have shape (N, T, {p.input_size}), got {xs.shape}")
    theta = int(theta)
    if not 0 <= theta < (1 << p.vec_fmt.width):
        raise UsageError(f"theta must be a raw integer in [0, 2**{p.vec_fmt.width}), not {theta}")
    check_budget(p, budget)
    n, T, _ = xs.shape
    H = p.hidden
    cperm = column_perm(p)
    pk = packed_weights(p.bbs, wts.values, wts.indices)
    h = np.zeros((n, H), dtype=np.int64)
    c = np.zeros((n, H), dtype=np.int64)
    vhat = np.zeros((n, p.cols), dtype=np.int64)
    M = np.zeros((n, p.rows), dtype=np.int64)
    hs = np.empty((n, T, H), dtype=np.int64)
    cs = np.empty((n, T, H), dtype=np.int64)
    st = {"beats_per_group": np.empty((n, T), dtype=np.int64), "selected": np.empty((n, T), dtype=np.int64),
          "candidates": np.empty((n, T), dtype=np.int64), "mem": np.empty((n, T, p.rows), dtype=np.int64),
          "sel_mask": np.empty((n, T, p.cols), dtype=bool), "cand_mask": np.empty((n, T, p.cols), dtype=bool)}
    for t in range(T):
        v = np.zeros((n, p.cols), dtype=np.int64)
        v[:, :p.input_size] = xs[:, t]
        v[:, p.x_pad:] = h
        d = v - vhat
        sel = select_columns(p, d, theta, budget)
        dsel = np.where(sel, d, 0)
        vhat = np.where(sel, v, vhat)
        M = M + _exact_spmxv(p, wts, dsel[:, cperm], pk)
        y = requantize(M, p.bbs.acc_frac, p.gate_fmt)
        z = saturate(y + wts.bias, p.gate_fmt).reshape(n, H, 4)
        h, c = elementwise(p, z, c)
        hs[:, t], cs[:, t] = h, c
        per_bank = sel.reshape(n, p.bank_size, p.banks).sum(axis=1)
        st["beats_per_group"][:, t] = np.maximum(1, per_bank.max(axis=1))
        st["selected"][:, t] = sel.sum(axis=1)
        st["candidates"][:, t] = (np.abs(d) > theta).sum(axis=1)
        st["mem"][:, t] = M
        st["sel_mask"][:, t] = sel
        st["cand_mask"][:, t] = np.abs(d) > theta
    return (hs, cs, st) if stats else (hs, cs)


def lstm_delta_float(p: LSTMParams, w: np.ndarray, b: np.ndarray, xs: np.ndarray, theta: float, budget: int):
    """Float DeltaLSTM reference with the same rule (float threshold, same per-bank budget on the
    same logical bank layout), exact sigmoid/tanh; ``w`` (4H, I+H) logical. Returns
    ``(h (N, T, H), selected fraction of the I+H real columns)``."""
    w = np.asarray(w, dtype=np.float64)
    xs = np.asarray(xs, dtype=np.float64)
    n, T, I_ = xs.shape
    H = p.hidden
    wl = np.zeros((p.rows, p.cols))
    wl[:, :I_] = w[:, :I_]
    wl[:, p.x_pad:] = w[:, I_:]
    h = np.zeros((n, H))
    c = np.zeros((n, H))
    vhat = np.zeros((n, p.cols))
    M = np.zeros((n, p.rows))
    hs = np.empty((n, T, H))
    nsel = 0
    for t in range(T):
        v = np.zeros((n, p.cols))
        v[:, :I_] = xs[:, t]
        v[:, p.x_pad:] = h
        d = v - vhat
        sel = select_columns(p, d, theta, budget)
        nsel += int(sel.sum())
        vhat = np.where(sel, v, vhat)
        M = M + np.where(sel, d, 0.0) @ wl.T
        z = M + b
        i, f, g, o = _sigmoid(z[:, :H]), _sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), _sigmoid(z[:, 3 * H:])
        c = f * c + i * g
        h = o * np.tanh(c)
        hs[:, t] = h
    return hs, nsel / (n * T * (I_ + H))


@dataclass(frozen=True)
class DeltaCycleModel:
    """Cycles of the delta mode (free-flowing streams, weights loaded), exact vs the RTL.

    A step of ``J_t`` beats per row group costs ``rows/P * J_t`` weight cycles; the rest is the
    non-delta model's: first-vector head, the recurrence gap between the steps of a sequence,
    :meth:`hwcosim.models.bbs.lstm.LSTMCycleModel.seq_tail` after the last beat (``bank_size <= rows/P`` is required,
    so the next sequence's first vector always loads while the current last step computes).
    """

    p: LSTMParams

    def step_beats(self, beats_per_group: np.ndarray) -> np.ndarray:
        return (self.p.rows // self.p.pes) * np.asarray(beats_per_group, dtype=np.int64)

    def expected(self, beats_per_group: np.ndarray) -> int:
        """``beats_per_group``: (N, T) ``J_t`` of :func:`lstm_delta_golden`."""
        bpg = np.asarray(beats_per_group)
        n, T = bpg.shape
        base = LSTMCycleModel(self.p)
        head = self.p.bank_size - self.p.x_beats + 1
        return int(head + base.seq_tail() + self.step_beats(bpg).sum() + n * (T - 1) * base.step_gap())

    def steady_cycles(self, beats_per_group: np.ndarray) -> int:
        """Steady-state cycles of ``N`` sequences (steps + recurrence gaps, no head/tail)."""
        bpg = np.asarray(beats_per_group)
        n, T = bpg.shape
        return int(self.step_beats(bpg).sum() + n * (T - 1) * LSTMCycleModel(self.p).step_gap())


def dense_ops_per_step(p: LSTMParams) -> int:
    """Dense-equivalent ops of one step (2 per weight of the dense fused matrix), as in Cao et al."""
    return 2 * p.rows * (p.input_size + p.hidden)


def beat_skip_fraction(p: LSTMParams, wts: LSTMWeights, active: np.ndarray) -> float:
    """Option (i), measured: fraction of the *non-delta* weight beats (row group, slot) whose
    ``P * B`` lanes all fall on inactive columns. ``active`` (n, cols) bool, logical order."""
    act_phys = np.asarray(active)[:, column_perm(p)].reshape(len(active), p.banks, p.bank_size)
    G, P, K, B = p.rows // p.pes, p.pes, p.k, p.banks
    lane_act = act_phys[:, np.arange(B)[None, None, :], wts.indices]          # (n, rows, k, B)
    lane_act = lane_act.reshape(len(active), G, P, K, B)
    beat_needed = lane_act.any(axis=(2, 4))                                    # (n, G, K)
    return float(1.0 - beat_needed.mean())
