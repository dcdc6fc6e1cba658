"""Run the FSS sparse GEMM RTL on FSS weights and activations, and compare with the golden model.

Zhang et al., "Fine-Grained Structured Sparse Computing for FPGA-Based AI Inference", IEEE TCAD
44(7), 2025. The engine is :class:`hwcosim.hdl.fss.FSSGemm`, the specification :mod:`hwcosim.models.fss.gemm`.
"""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.errors import UsageError
from hwcosim.models.fss.gemm import CycleModel, FSSParams, gemm, pack_weight_beats

__all__ = ["run_gemm", "TOP", "TOP_AXI", "pack_axi_weight_words", "run_gemm_axi", "recheck"]

TOP = "fss_gemm"
TOP_AXI = "fss_axi"


def run_gemm(p: FSSParams, values: np.ndarray, indices: np.ndarray, x: np.ndarray, *,
             p_idle_w: float = 0.0, p_idle_x: float = 0.0, p_stall: float = 0.0, seed: int = 1,
             test_dir: str | os.PathLike | None = None, sim: str | None = None,
             waves: bool | None = None, raise_on_fail: bool = True) -> runner.SimResult:
    """Simulate ``FSSGemm(p)`` on raw FSS ``values``/``indices`` (gr, gc, n) and raw ``x`` (cols, T).

    Every result word is compared with :func:`hwcosim.models.fss.gemm.gemm` inside the testbench; the returned
    metrics hold the measured cycles, the ideal/expected counts and the DUT's counters. Raises
    :class:`hwcosim.cosim.flow.runner.SimFailure` on any mismatch (unless ``raise_on_fail`` is False).
    """
    from hwcosim.hdl.fss import FSSGemm

    values = np.asarray(values, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    x = np.asarray(x, dtype=np.int64)
    expected = gemm(p, values, indices, x)
    rows, cols = values.shape[0] * p.r_h, values.shape[1] * p.r_w
    res = runner.run(
        FSSGemm(p), TOP, "hwcosim.cosim.designs.fss.tb_gemm",
        inputs={"params": p.to_dict(), "rows": rows, "cols": cols, "T": int(x.shape[1]),
                "p_idle_w": p_idle_w, "p_idle_x": p_idle_x, "p_stall": p_stall, "seed": seed},
        arrays={"values": values, "indices": indices, "x": x, "expected": expected},
        test_dir=test_dir, sim=sim, waves=waves, raise_on_fail=raise_on_fail)
    res.metrics.setdefault("ideal", CycleModel(p).ideal(rows, cols, int(x.shape[1])))
    return res


def pack_axi_weight_words(p: FSSParams, values: np.ndarray, indices: np.ndarray) -> list[int]:
    """The ``s_axis_w`` words of one layer load into :class:`hwcosim.hdl.fss.axi_top.FSSAxiTop`.

    Each weight beat of :func:`hwcosim.models.fss.gemm.pack_weight_beats` (row group, then region column) is
    cut into ``ceil(weight_beat_bits / 32)`` 32-bit words, least significant word first; the
    last word's unused upper bits are zero. ``row_groups * k_regions * words`` words in all.
    """
    nw = -(-p.weight_beat_bits // 32)
    return [(beat >> (32 * i)) & 0xFFFFFFFF for beat in pack_weight_beats(p, values, indices) for i in range(nw)]


def run_gemm_axi(p: FSSParams, values: np.ndarray, indices: np.ndarray, xs: list[np.ndarray], *,
                 testcase: str = "axi_fss_golden", p_pause_in: float = 0.0, p_pause_out: float = 0.0,
                 seed: int = 1, test_dir: str | os.PathLike | None = None, sim: str | None = None,
                 waves: bool | None = None, raise_on_fail: bool = True) -> runner.SimResult:
    """Simulate :class:`hwcosim.hdl.fss.axi_top.FSSAxiTop` under cocotbext-axi BFMs
    (:mod:`hwcosim.cosim.designs.fss.tb_axi`).

    One weight load of raw FSS ``values``/``indices`` (gr, gc, n), then one run per activation
    matrix in ``xs`` (each (cols, T), T a multiple of ``pe_cols``), on the same loaded weights.
    ``testcase`` picks the scenario: ``axi_fss_golden`` (runs, counters), ``axi_fss_errors``
    (refused commands, SLVERR), ``axi_fss_long_stall`` (m_axis_y refused for thousands of cycles)
    or ``axi_fss_resets`` (SOFT_RESET and rst during a weight load and during a run). Every
    result word is compared with :func:`hwcosim.models.fss.gemm.gemm` in the testbench; raises
    :class:`hwcosim.cosim.flow.runner.SimFailure` on a mismatch or a failed register check.
    """
    from hwcosim.hdl.fss.axi_top import FSSAxiTop

    values = np.asarray(values, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    xs = [np.asarray(x, dtype=np.int64) for x in xs]
    if not xs:
        raise UsageError("run_gemm_axi needs at least one activation matrix")
    rows, cols = values.shape[0] * p.r_h, values.shape[1] * p.r_w
    arrays = {"values": values, "indices": indices}
    for i, x in enumerate(xs):
        arrays[f"x{i}"] = x
        arrays[f"expected{i}"] = gemm(p, values, indices, x)
    return runner.run(
        FSSAxiTop(p), TOP_AXI, "hwcosim.cosim.designs.fss.tb_axi", testcase=testcase,
        inputs={"params": p.to_dict(), "rows": rows, "cols": cols, "runs": len(xs),
                "p_pause_in": p_pause_in, "p_pause_out": p_pause_out, "seed": seed},
        arrays=arrays, test_dir=test_dir, sim=sim, waves=waves, raise_on_fail=raise_on_fail)


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved FSS GEMM run (the serving bridge, ``hwcosim cosim serve --device fss``)
    without simulating: ``gemm`` recomputed from the saved weights and activations (``xs``, one row
    per activation column) against the RTL's saved words (``rtl``, one row per column; positions:
    column, row)."""
    from hwcosim.cosim.flow.runs import word_diff

    p = FSSParams.from_dict(params)
    want = gemm(p, arrays["values"], arrays["indices"], np.asarray(arrays["xs"], dtype=np.int64).T).T
    got = np.asarray(outputs["rtl"])
    res = word_diff(got, want)
    res["saved_expected_agrees"] = bool(np.array_equal(np.asarray(arrays["expected"]), want))
    return res
