"""Run the FSS sparse GEMM RTL on FSS weights and activations, and compare with the golden model.

Zhang et al., "Fine-Grained Structured Sparse Computing for FPGA-Based AI Inference", IEEE TCAD
44(7), 2025. The engine is :class:`hdl.fss.FSSGemm`, the specification :mod:`models.fss`.
"""

from __future__ import annotations

import os

import numpy as np

from cosim import runner
from models.fss import CycleModel, FSSParams, gemm

__all__ = ["run_gemm", "TOP"]

TOP = "fss_gemm"


def run_gemm(p: FSSParams, values: np.ndarray, indices: np.ndarray, x: np.ndarray, *,
             p_idle_w: float = 0.0, p_idle_x: float = 0.0, p_stall: float = 0.0, seed: int = 1,
             test_dir: str | os.PathLike | None = None, sim: str | None = None,
             waves: bool | None = None, raise_on_fail: bool = True) -> runner.SimResult:
    """Simulate ``FSSGemm(p)`` on raw FSS ``values``/``indices`` (gr, gc, n) and raw ``x`` (cols, T).

    Every result word is compared with :func:`models.fss.gemm` inside the testbench; the returned
    metrics hold the measured cycles, the ideal/expected counts and the DUT's counters. Raises
    :class:`cosim.runner.SimFailure` on any mismatch (unless ``raise_on_fail`` is False).
    """
    from hdl.fss import FSSGemm

    values = np.asarray(values, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    x = np.asarray(x, dtype=np.int64)
    expected = gemm(p, values, indices, x)
    rows, cols = values.shape[0] * p.r_h, values.shape[1] * p.r_w
    res = runner.run(
        FSSGemm(p), TOP, "cosim.tb.fss_gemm",
        inputs={"params": p.to_dict(), "rows": rows, "cols": cols, "T": int(x.shape[1]),
                "p_idle_w": p_idle_w, "p_idle_x": p_idle_x, "p_stall": p_stall, "seed": seed},
        arrays={"values": values, "indices": indices, "x": x, "expected": expected},
        test_dir=test_dir, sim=sim, waves=waves, raise_on_fail=raise_on_fail)
    res.metrics.setdefault("ideal", CycleModel(p).ideal(rows, cols, int(x.shape[1])))
    return res
