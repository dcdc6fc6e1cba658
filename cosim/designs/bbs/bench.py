"""BBS SpMxV bench: RTL cycles (Verilator) against the ideal ``rows / P * k`` per vector, over a
grid of (P, B) on a 256 x 256 matrix at 87.5% sparsity, with free-flowing streams and with random
idle/stall traffic. Written to ``bbs_spmxv_cycles.json`` and plotted."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from hwcosim.models.tables import show

__all__ = ["bench_bbs_spmxv"]


def bench_bbs_spmxv(out_dir: Path, quick: bool = False) -> dict:
    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.models.atomic import write_text
    from hwcosim.models.bbs.spmxv import BBSParams
    from hwcosim.models.fixedpoint import quantize
    from hwcosim.pruning.formats.csb import encode
    from rich.table import Table

    rows = cols = 256
    sparsity = 0.875
    pes_grid = (2, 4, 8) if quick else (2, 4, 8, 16)
    banks_grid = (4, 8) if quick else (4, 8, 16)
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.3, size=(rows, cols))
    results = []
    for banks in banks_grid:
        m = encode(w, banks, sparsity)
        for pes in pes_grid:
            p = BBSParams(rows=rows, cols=cols, banks=banks, k=m.k, pes=pes, weight_fmt=m.fmt)
            xs = quantize(rng.uniform(-1, 1, size=(4, cols)), p.vec_fmt)
            for label, idle, stall in (("free-flowing", 0.0, 0.0), ("idle 20% / stall 20%", 0.2, 0.2)):
                t0 = time.monotonic()
                res = run_spmxv(p, m.values, m.indices, xs, p_idle_w=idle, p_idle_x=idle, p_stall=stall,
                                seed=pes * 100 + banks)
                mt = res.metrics
                results.append({"pes": pes, "banks": banks, "k": p.k, "traffic": label, "cycles": mt["cycles"],
                                "ideal": mt["ideal"], "expected": mt["expected"],
                                "cycles_over_ideal": mt["cycles"] / mt["ideal"],
                                "utilisation": mt["utilisation"], "mismatches": mt["mismatches"],
                                "sim_seconds": round(time.monotonic() - t0, 1)})
    out = {"matrix": [rows, cols], "sparsity": sparsity, "vectors": 4, "simulator": res.sim, "results": results}
    write_text(out_dir / "bbs_spmxv_cycles.json", json.dumps(out, indent=2) + "\n")
    t = Table(title=f"BBS SpMxV RTL cycles vs ideal, {rows}x{cols} at {sparsity:.1%}, 4 vectors")
    for c in ("P", "B", "k", "traffic", "cycles", "ideal cycles", "cycles/ideal", "utilisation", "mismatches"):
        t.add_column(c, justify="right")
    for r in results:
        t.add_row(str(r["pes"]), str(r["banks"]), str(r["k"]), r["traffic"], str(r["cycles"]), str(r["ideal"]),
                  f"{r['cycles_over_ideal']:.3f}", f"{r['utilisation']:.1%}", str(r["mismatches"]))
    show(t)
    _plot(results, out_dir / "bbs_spmxv_cycles.png")
    return out


def _plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    fig, ax = plt.subplots(figsize=(6, 4))
    for banks in sorted({r["banks"] for r in results}):
        for traffic, style in (("free-flowing", "-o"), ("idle 20% / stall 20%", "--s")):
            pts = sorted((r["pes"], r["utilisation"]) for r in results
                         if r["banks"] == banks and r["traffic"] == traffic)
            if pts:
                ax.plot(*zip(*pts), style, label=f"B={banks}, {traffic}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("PEs (P)")
    ax.set_ylabel("multiplier utilisation (ideal = 1)")
    ax.set_ylim(0, 1.05)
    ax.set_title("BBS SpMxV: measured utilisation in RTL simulation")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path, dpi=120)
