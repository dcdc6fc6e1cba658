"""``hwcosim bench``: performance measured as ratios against a baseline run in the same process.

- BBS SpMxV: RTL cycles (Verilator) against the ideal ``rows / P * k`` per vector, over a grid of
  (P, B) on a 256 x 256 matrix at 87.5% sparsity, with free-flowing streams and with random
  idle/stall traffic. Written to ``bbs_spmxv_cycles.json`` and plotted.
- Other packages register their benchmarks in :data:`BENCHES` (name -> callable(out_dir, quick)).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["run_bench", "bench_bbs_spmxv", "BENCHES"]


def bench_bbs_spmxv(out_dir: Path, quick: bool = False) -> dict:
    from rich.console import Console
    from rich.table import Table

    from cosim.bbs import run_spmxv
    from models.atomic import write_text
    from models.bbs import BBSParams
    from models.fixedpoint import quantize
    from pruning.formats.csb import encode

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
    for c in ("P", "B", "k", "traffic", "cycles", "ideal", "cycles/ideal", "utilisation", "mismatches"):
        t.add_column(c, justify="right")
    for r in results:
        t.add_row(str(r["pes"]), str(r["banks"]), str(r["k"]), r["traffic"], str(r["cycles"]), str(r["ideal"]),
                  f"{r['cycles_over_ideal']:.3f}", f"{r['utilisation']:.1%}", str(r["mismatches"]))
    Console().print(t)
    _plot(results, out_dir / "bbs_spmxv_cycles.png")
    return out


def _plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from models.atomic import save_png

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


#: name -> callable(out_dir, quick) -> dict; packages add their benchmarks here.
def _kernels(out_dir: Path, quick: bool) -> dict:
    from pruning.bench import run_kernel_bench

    return run_kernel_bench(out_dir, quick=quick)


def _lazy(module: str, name: str) -> Callable[[Path, bool], dict]:
    def run(out_dir: Path, quick: bool) -> dict:
        import importlib

        return getattr(importlib.import_module(module), name)(out_dir, quick)

    run.__name__ = name
    return run


BENCHES: dict[str, Callable[[Path, bool], dict]] = {
    "bbs_spmxv": bench_bbs_spmxv,
    "kernels": _kernels,
    "bbs_lstm": _lazy("cosim.bbs_lstm_bench", "bench_bbs_lstm"),
    "bbs_lstm_delta": _lazy("cosim.bbs_lstm_bench", "bench_bbs_lstm_delta"),
    "melo_engine": _lazy("cosim.melo", "bench_melo_engine"),
    "kvdirect_rtl": _lazy("cosim.kvdirect", "bench_kvdirect_rtl"),
    "kvdirect_resources": _lazy("cosim.kvdirect", "bench_kvdirect_resources"),
    "fss_layers": _lazy("cosim.fss_bench", "bench_fss_layers"),
    "fss_synth": _lazy("cosim.fss_bench", "bench_fss_synth"),
    "beamraster_realtime": _lazy("cosim.beamraster", "bench_beamraster_realtime"),
    "beamraster_dsp": _lazy("cosim.beamraster", "bench_beamraster_dsp"),
    "cluster_arnold": _lazy("models.cluster.cli", "bench_arnold"),
    "cluster_c4p": _lazy("models.cluster.cli", "bench_c4p"),
    "cluster_crux": _lazy("models.cluster.cli", "bench_crux"),
    "cluster_speed": _lazy("models.cluster.cli", "bench_cluster_speed"),
    "reliability_byterobust": _lazy("models.reliability.cli", "bench_byterobust"),
    "reliability_c4d": _lazy("models.reliability.cli", "bench_c4d"),
    "reliability_mycroft": _lazy("models.reliability.cli", "bench_mycroft"),
    "graph_engine": _lazy("models.graph.cli", "bench_graph_engine"),
    "gnn_rewrite": _lazy("models.graph.cli", "bench_gnn_rewrite"),
    "tux2": _lazy("models.graph.cli", "bench_tux2"),
    "cognn": _lazy("models.jobs.cli", "bench_cognn"),
    "cpualloc": _lazy("models.jobs.cli", "bench_cpualloc"),
    "sim_speed": _lazy("cosim.simspeed", "bench_simspeed"),
    "cosim_bridges": _lazy("cosim.bridges.cli", "bench_bridges"),
    "sweeps": _lazy("cosim.sweep", "bench_sweeps"),
}


def select_benches(only: str | None) -> list[str]:
    """Names of the benches to run: all of them, or the comma-separated ``--only`` list."""
    if not only:
        return list(BENCHES)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown or not names:
        from cosim.cli import UsageError

        raise UsageError(f"--only: unknown bench {', '.join(unknown) or '(empty)'}; "
                         f"choose from {', '.join(BENCHES)}")
    return names


def run_bench(args) -> int:
    names = select_benches(getattr(args, "only", None))
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.json"
    summary: dict = {}
    if getattr(args, "only", None) and index.exists():
        # a partial run keeps the other benches' entries
        try:
            summary = json.loads(index.read_text())
        except (OSError, ValueError):
            summary = {}
    from models.atomic import write_text

    for name in names:
        t0 = time.monotonic()
        print(f"bench {name} ...", flush=True)
        BENCHES[name](out, args.quick)
        summary[name] = {"seconds": round(time.monotonic() - t0, 1), "quick": bool(args.quick),
                         "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_text(index, json.dumps(summary, indent=2) + "\n")
    print(f"benchmarks written to {out}/")
    return 0
