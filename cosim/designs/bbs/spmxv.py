"""Run the BBS SpMxV RTL on CSB weights and vectors, and compare with the golden model."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow import runner
from hwcosim.models.bbs.spmxv import BBSParams, CycleModel, spmxv

__all__ = ["run_spmxv", "recheck"]


def run_spmxv(p: BBSParams, values: np.ndarray, indices: np.ndarray, xs: np.ndarray, *,
              p_idle_w: float = 0.0, p_idle_x: float = 0.0, p_stall: float = 0.0, seed: int = 1,
              test_dir: str | os.PathLike | None = None, sim: str | None = None,
              waves: bool | None = None, raise_on_fail: bool = True) -> runner.SimResult:
    """Simulate ``SpMxV(p)`` on raw CSB ``values``/``indices`` and raw vectors ``xs`` (n, cols).

    Every result word is compared with :func:`hwcosim.models.bbs.spmxv.spmxv` inside the testbench; the
    returned metrics hold the measured cycles, the ideal and the DUT's counters. Raises
    :class:`hwcosim.cosim.flow.runner.SimFailure` on any mismatch.
    """
    from hwcosim.hdl.bbs import SpMxV

    xs = np.atleast_2d(np.asarray(xs, dtype=np.int64))
    expected = spmxv(p, values, indices, xs)
    res = runner.run(
        SpMxV(p), "bbs_spmxv", "hwcosim.cosim.designs.bbs.tb_spmxv",
        inputs={"params": p.to_dict(), "p_idle_w": p_idle_w, "p_idle_x": p_idle_x, "p_stall": p_stall,
                "seed": seed},
        arrays={"values": np.asarray(values, dtype=np.int64), "indices": np.asarray(indices, dtype=np.int64),
                "xs": xs, "expected": expected},
        test_dir=test_dir, sim=sim, waves=waves, raise_on_fail=raise_on_fail)
    res.metrics.setdefault("ideal", CycleModel(p).ideal(len(xs)))
    return res


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved run (``hwcosim sim``, ``hwcosim board run bbs-spmxv --sim``) without simulating:
    the golden model recomputed from the saved inputs (not the saved golden words) against the RTL's
    saved output words (``rtl``; positions are (vector, row))."""
    from hwcosim.cosim.flow.runs import word_diff

    p = BBSParams.from_dict(params)
    want = spmxv(p, arrays["values"], arrays["indices"], np.atleast_2d(arrays["xs"]))
    got = np.asarray(outputs["rtl"])
    res = word_diff(got.reshape(want.shape) if got.size == want.size else got, want)
    saved = arrays["expected"] if "expected" in arrays else outputs["golden"]
    res["saved_expected_agrees"] = bool(np.array_equal(np.asarray(saved).reshape(-1), want.reshape(-1)))
    return res
