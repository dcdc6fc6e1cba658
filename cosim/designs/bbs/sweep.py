"""Sweep adapter of the BBS SpMxV (``hwcosim sweep``): workload, derivation, simulation, metrics."""

from __future__ import annotations

import dataclasses

from hwcosim.cosim.flow.sweep import COMMON_SOURCES as _COMMON
from hwcosim.cosim.flow.sweep import MAX_BBS_WEIGHTS, Adapter, _replace  # noqa: F401
from hwcosim.models.errors import UsageError


# BBS SpMxV: P x B x sparsity (sparsity sets k, the nonzeros kept per bank) ---------------------------
def _bbs_derive(base, s: dict):
    from hwcosim.pruning.patterns.bank_balanced import BankBalanced

    if "k" in s:
        raise UsageError("k (nonzeros per bank) follows from sparsity; sweep or set sparsity instead")
    p = _replace(base, s)
    if p.rows * p.cols > MAX_BBS_WEIGHTS:
        raise UsageError(f"rows x cols = {p.rows} x {p.cols} exceeds {MAX_BBS_WEIGHTS} weights, more than an RTL "
                         "simulation finishes; sweep smaller matrices")
    if p.cols % p.banks:
        raise UsageError(f"cols={p.cols} does not split into banks={p.banks}; choose banks dividing cols")
    k = BankBalanced(banks=p.banks, sparsity=float(s["sparsity"])).k(p.cols)
    return dataclasses.replace(p, k=k)


def _bbs_simulate(p, w: dict, sim: str, test_dir) -> dict:
    import numpy as np
    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.pruning.formats.csb import encode

    rng = np.random.default_rng(int(w["seed"]))
    dense = rng.normal(0.0, 0.5, size=(p.rows, p.cols))
    m = encode(dense, p.banks, float(w["sparsity"]), fmt=p.weight_fmt)
    if m.k != p.k:
        raise AssertionError(f"CSB encoding kept k={m.k} per bank, the parameters say {p.k}")
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(int(w["vectors"]), p.cols))
    res = run_spmxv(p, m.values, m.indices, xs, p_idle_w=float(w["p_idle"]), p_idle_x=float(w["p_idle"]),
                    p_stall=float(w["p_stall"]), seed=int(w["seed"]) + 1, test_dir=test_dir, sim=sim, waves=False)
    return res.metrics


def _bbs_metrics(p, w: dict, raw: dict, clock_mhz: float) -> dict:
    n = int(w["vectors"])
    seconds = raw["cycles"] / (clock_mhz * 1e6)
    nnz = p.rows * p.banks * p.k
    return {"cycles": raw["cycles"], "ideal_cycles": raw["ideal"], "cycles_over_ideal": raw["cycles"] / raw["ideal"],
            "utilisation": raw["utilisation"], "multipliers": p.pes * p.banks, "k": p.k,
            "sparsity": p.sparsity, "gops": 2.0 * nnz * n / seconds / 1e9,
            "dense_equiv_gops": 2.0 * p.rows * p.cols * n / seconds / 1e9,
            "us_per_vector": seconds / n * 1e6, "mismatches": raw["mismatches"]}


ADAPTER = Adapter(
        design="bbs-spmxv",
        workload={"sparsity": 0.875, "vectors": 4, "seed": 0, "p_idle": 0.0, "p_stall": 0.0},
        sources=_COMMON + ("cosim/designs/bbs/sweep.py", "models/bbs/spmxv.py", "cosim/designs/bbs/spmxv.py",
                           "cosim/designs/bbs/tb_spmxv.py",
                           "pruning/formats/csb.py", "pruning/patterns/bank_balanced.py", "pruning/base.py"),
        derive=_bbs_derive, simulate=_bbs_simulate, metrics=_bbs_metrics,
        plots=(("metrics.multipliers", "metrics.cycles", "min"), ("metrics.multipliers", "metrics.utilisation", "max"),
               ("metrics.multipliers", "metrics.gops", "max")),
        synth_plots=(("resources.LUT", "metrics.cycles", "min"), ("resources.DSP", "metrics.cycles", "min"),
                     ("resources.DSP", "metrics.utilisation", "max"), ("resources.LUT", "metrics.gops", "max")),
        clock_mhz=200.0,
        columns=("metrics.k", "metrics.cycles", "metrics.ideal_cycles", "metrics.utilisation", "metrics.gops"))
