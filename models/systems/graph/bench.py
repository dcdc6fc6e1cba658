"""The graph benchmarks and the reports of ``hwcosim graph``.

Benchmarks (``(out_dir, quick, **options) -> dict``; JSON + PNG into ``out_dir``, tables printed):
:func:`bench_graph_engine` (edges/s/core of the engine vs scipy SpMV and igraph),
:func:`bench_gnn_rewrite`, :func:`bench_tux2`, :func:`bench_tux2_procs`, :func:`bench_gram_dask` (GraM
scale-out on Dask worker processes); the compiled executor's
is :func:`hwcosim.models.systems.graph.bench_compiled.bench_graph_compiled`. :func:`load_graph`,
:func:`run_report`, :func:`partition_report` and :func:`tux2_report` serve ``hwcosim graph run``,
``partition`` and ``tux2``.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import numpy as np
from hwcosim.models.benchio import g4, print_table
from hwcosim.models.benchio import write_json as _write_json
from hwcosim.models.errors import UsageError

__all__ = ["bench_graph_engine", "bench_graph_outofcore", "bench_gnn_rewrite", "bench_tux2", "bench_tux2_procs",
           "bench_gram_dask", "load_graph", "bench_tux2_gas", "run_report", "partition_report", "tux2_report",
           "run_tux2", "outofcore_report"]


def _bar_png(path: Path, labels, groups: dict, ylabel: str, title: str, log: bool = False) -> Path:
    from hwcosim.models.benchio import bar_png

    return bar_png(path, labels, groups, ylabel, title, log=log, figsize=(7.5, 4), fontsize=8)


_table = functools.partial(print_table, cell=g4)


def load_graph(name: str, scale: int, edge_factor: int, seed: int):
    """``rmat`` (R-MAT of ``scale``), a bundled real graph, or a user's graph file; else UsageError."""
    from hwcosim.models.systems.graph.graph import REAL_GRAPHS, RMATParams, check_rmat_budget, load_real, rmat

    if name == "rmat":
        check_rmat_budget(RMATParams(scale=scale, edge_factor=edge_factor, seed=seed))
        return rmat(RMATParams(scale=scale, edge_factor=edge_factor, seed=seed))
    if name in REAL_GRAPHS:
        return load_real(name)
    if Path(name).suffix or Path(name).exists():  # a user's graph file
        from hwcosim.models.systems.graph.io import GraphFormatError, read_graph

        try:
            return read_graph(name)
        except GraphFormatError as e:
            raise UsageError(str(e)) from e
    raise UsageError(f"unknown graph {name!r}; give rmat, one of {', '.join(REAL_GRAPHS)}, or a graph file (SNAP edge "
                     "list .txt/.tsv/.csv/.el[.gz], Matrix Market .mtx, scipy .npz)")


# ---- benchmarks ----------------------------------------------------------------------------------
# Full-setting limits of bench_graph_engine (edges). Above them a runner is skipped and the reason
# recorded in the JSON; the figures that set them were measured on the 2-core, 23 GB host.
_DASK_MAX_EDGES = 1 << 22       # scattering partitions to worker processes copies them through TCP
_EXTRAS_MAX_EDGES = 1 << 22     # BFS/CC/SSSP/converged PageRank: CC symmetrises (2x edges), ~100 steps
_ALL_CUTS_MAX_EDGES = 1 << 25   # the three partitioners at k = 8; above, only the hybrid cut
_IGRAPH_MEM_FRACTION = 0.7      # igraph only if its estimated peak fits in this share of free memory
_IGRAPH_B_PER_EDGE = 48         # igraph_t (4 x int64 per edge) + the edge vector its reader fills
_IGRAPH_BUILD_BUDGET_S = 900.0  # ... and its (Python-level) graph construction fits this budget
# python-igraph converts an edge array element by element through Python objects: one call on a whole
# array peaked near 100 B/edge of transient memory (0.58 GB growth at 4 M edges) and a 134 M-edge run
# was OOM-killed at 24 GB; Graph.add_edges in chunks avoids that but re-indexes the whole graph on every
# call (14 s to add one edge to a 4 M-edge graph), so the baseline reads a fixed-width text edge list
# with igraph's C parser instead: about the same build time, and only igraph's own storage in memory
_IGRAPH_WRITE_CHUNK = 1 << 22


def _rss() -> int:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except ImportError:  # pragma: no cover
        return 0


def _available() -> int:
    try:
        import psutil

        return psutil.virtual_memory().available
    except ImportError:  # pragma: no cover
        return 1 << 62


def _igraph_point(g, iterations: int, calib: dict) -> dict:
    """igraph PageRank solve times (prpack, arpack); skipped, with the reason, if it would not fit.

    ``calib`` carries bytes/edge and build seconds/edge measured at the first (smallest) size.
    """
    try:
        import igraph
    except ImportError:
        return {"skipped": "igraph not installed"}
    if calib:
        # read from a file, the peak is igraph's own storage (from, to and two index vectors of int64:
        # 32 B/edge) plus its parser's edge vector (16 B/edge), or the growth measured at the
        # calibration size if that is larger
        need = max(calib["bytes_per_edge"], _IGRAPH_B_PER_EDGE) * g.m
        avail = _available()
        if need > _IGRAPH_MEM_FRACTION * avail:
            return {"skipped": f"estimated igraph peak {need / 2**30:.1f} GiB "
                               f"({calib['bytes_per_edge']:.0f} B/edge measured at {calib['m']} edges) exceeds "
                               f"{_IGRAPH_MEM_FRACTION:.0%} of the {avail / 2**30:.1f} GiB available"}
        est = calib["build_s_per_edge"] * g.m
        if est > _IGRAPH_BUILD_BUDGET_S:
            return {"skipped": f"estimated igraph graph construction {est:.0f} s (igraph parses the edge "
                               f"list text; {calib['build_s_per_edge'] * 1e6:.2f} us/edge "
                               f"measured at {calib['m']} edges) exceeds the {_IGRAPH_BUILD_BUDGET_S:.0f} s budget"}
    r0 = _rss()
    t0 = time.perf_counter()
    stats: dict = {}
    h = _igraph_graph(igraph, g, stats)
    out = {"build_s": time.perf_counter() - t0, "build": "Read_Edgelist of a fixed-width text file",
           "ecount": h.ecount()}
    if h.ecount() != g.m or h.vcount() != g.n:
        raise RuntimeError(f"igraph built {h.vcount()} vertices / {h.ecount()} edges from {g.n} / {g.m}")
    for impl in ("prpack", "arpack"):
        t0 = time.perf_counter()
        h.pagerank(damping=0.85, implementation=impl)
        out[f"{impl}_solve_s"] = time.perf_counter() - t0
    out["rss_growth_bytes"] = _rss() - r0
    out.update(stats)
    if not calib:
        calib.update(m=g.m, bytes_per_edge=max(stats["read_rss_growth_bytes"], 1) / g.m,
                     build_s_per_edge=out["build_s"] / g.m)
    # prpack solves to convergence; one sweep's cost is not exposed, so edges/s counts one pass
    out["prpack_edges_per_s_lower_bound"] = g.m / out["prpack_solve_s"]
    del h
    return out


def _write_edgelist(path: Path, n: int, src: np.ndarray, dst: np.ndarray) -> None:
    """``src dst`` lines, zero-padded to one width, formatted with numpy a chunk at a time."""
    width = len(str(max(n - 1, 0)))
    with open(path, "wb") as f:
        for i in range(0, len(src), _IGRAPH_WRITE_CHUNK):
            pair = np.column_stack([src[i:i + _IGRAPH_WRITE_CHUNK], dst[i:i + _IGRAPH_WRITE_CHUNK]])
            text = np.empty(pair.shape + (width + 1,), np.uint8)
            for j in range(width - 1, -1, -1):
                text[:, :, j] = 48 + pair % 10
                pair //= 10
            text[:, 0, width], text[:, 1, width] = 32, 10
            f.write(text.tobytes())


def _igraph_graph(igraph, g, stats: dict | None = None):
    """``g`` as a directed igraph graph (through a temporary edge-list file, see above).

    ``stats``, if given, receives ``read_rss_growth_bytes``: the memory growth of the igraph read
    alone (the formatting buffers of the write are one chunk, whatever the graph size).
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hwcosim-igraph-") as d:
        path = Path(d) / "edges.txt"
        _write_edgelist(path, g.n, g.src, g.dst)
        r0 = _rss()
        h = igraph.Graph.Read_Edgelist(str(path), directed=True)
        if stats is not None:
            stats["read_rss_growth_bytes"] = _rss() - r0
    if h.vcount() < g.n:                     # trailing vertices without edges
        h.add_vertices(g.n - h.vcount())
    return h


def _engine_point(p, iterations: int, workers: int, dask: bool, calib: dict, prog) -> dict:
    """One graph size of :func:`bench_graph_engine`."""
    import gc

    from hwcosim.models.systems.graph.algorithms import PageRank, pagerank_scipy, run
    from hwcosim.models.systems.graph.engine import DaskExecutor, Engine, ProcessExecutor
    from hwcosim.models.systems.graph.graph import rmat
    from hwcosim.models.systems.graph.partition import METHODS, partition

    skipped = {}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    g = rmat(p)
    pt = {"graph": {"scale": p.scale, "edge_factor": p.edge_factor, "a": p.a, "b": p.b, "c": p.c,
                    "n": g.n, "m": g.m, "generate_s": time.perf_counter() - t0}}
    prog.update(description=f"R-MAT scale {p.scale}: partitioning")
    pt["partitioning"] = {}
    cuts = METHODS if g.m <= _ALL_CUTS_MAX_EDGES else ("hybrid",)
    if len(cuts) < len(METHODS):
        skipped["partitioning"] = f"only the hybrid cut above {_ALL_CUTS_MAX_EDGES} edges (time)"
    for m in cuts:
        t0 = time.perf_counter()
        P = partition(g, 8, m)
        pt["partitioning"][m] = {"replication_factor": P.replication_factor, "edge_balance": P.edge_balance,
                                 "vertex_balance": P.vertex_balance, "seconds": time.perf_counter() - t0}
        del P
    prog_pr = PageRank(tol=1e-300, max_steps=iterations)
    rows = {}
    prog.update(description=f"R-MAT scale {p.scale}: engine serial")
    r = Engine(g, k=1).run(prog_pr)
    rows["engine serial (1 core)"] = {"seconds": r.seconds, "cores": 1, "state": r.state}
    gc.collect()
    prog.update(description=f"R-MAT scale {p.scale}: engine processes")
    P = partition(g, 2 * workers, "hybrid")
    from hwcosim.models.systems.graph.compiled import CompiledExecutor

    for t in sorted({1, workers}):  # the compiled executor on the same partitioning (bench graph_compiled: more)
        Engine(g, P, executor=CompiledExecutor(t)).run(PageRank(tol=1e-300, max_steps=1))  # plan + numba cache
        r = Engine(g, P, executor=CompiledExecutor(t)).run(prog_pr)
        rows[f"engine compiled ({t} thread{'s' if t > 1 else ''})"] = {"seconds": r.seconds, "cores": t,
                                                                      "state": r.state}
    r = Engine(g, P, executor=ProcessExecutor(workers)).run(prog_pr)
    rows[f"engine processes ({workers})"] = {"seconds": r.seconds, "cores": workers, "state": r.state,
                                             "setup_s": r.setup_seconds}
    if dask and g.m <= _DASK_MAX_EDGES:
        prog.update(description=f"R-MAT scale {p.scale}: engine dask")
        r = Engine(g, P, executor=DaskExecutor(workers=workers, processes=True)).run(prog_pr)
        rows[f"engine dask LocalCluster ({workers})"] = {"seconds": r.seconds, "cores": workers, "state": r.state,
                                                         "setup_s": r.setup_seconds}
    elif dask:
        skipped["dask"] = (f"above {_DASK_MAX_EDGES} edges: scattering the partitions to Dask worker processes "
                           "serialises them through TCP and holds a second copy (memory and minutes of setup)")
    del P, r
    gc.collect()
    prog.update(description=f"R-MAT scale {p.scale}: scipy")
    x, s = pagerank_scipy(g, iterations)
    rows["scipy CSR SpMV (1 core)"] = {"seconds": s, "cores": 1, "state": x}
    gc.collect()
    prog.update(description=f"R-MAT scale {p.scale}: igraph")
    pt["igraph"] = _igraph_point(g, iterations, calib)
    gc.collect()
    ref = rows["scipy CSR SpMV (1 core)"]["state"]
    pt["pagerank"] = {}
    for k, v in rows.items():
        eps = g.m * iterations / v["seconds"]
        pt["pagerank"][k] = {"seconds": v["seconds"], "setup_s": v.get("setup_s", 0.0), "edges_per_s": eps,
                             "edges_per_s_per_core": eps / v["cores"],
                             "max_abs_diff_vs_scipy": float(np.abs(v["state"] - ref).max())}
    if "prpack_solve_s" in pt["igraph"]:
        pt["pagerank"]["igraph prpack (1 core, solve)"] = {
            "seconds": pt["igraph"]["prpack_solve_s"], "setup_s": pt["igraph"]["build_s"],
            "edges_per_s": pt["igraph"]["prpack_edges_per_s_lower_bound"],
            "edges_per_s_per_core": pt["igraph"]["prpack_edges_per_s_lower_bound"],
            "note": "whole solve to convergence counted as one pass over the edges (a lower bound)"}
    if g.m <= _EXTRAS_MAX_EDGES:
        prog.update(description=f"R-MAT scale {p.scale}: bfs/cc/sssp")
        r = run(g, "pagerank", tol=1e-10, max_steps=500)
        pt["engine_pagerank_converged"] = {"steps": r.steps, "seconds": r.seconds}
        for alg, kw in (("bfs", {"source": int(np.argmax(g.out_degree()))}), ("cc", {}),
                        ("sssp", {"source": int(np.argmax(g.out_degree()))})):
            r = run(g, alg, **kw)
            pt[alg] = {"steps": r.steps, "seconds": r.seconds}
    else:
        skipped["bfs_cc_sssp_converged_pagerank"] = f"above {_EXTRAS_MAX_EDGES} edges (time budget)"
    pt["skipped"] = skipped
    # other work on the host slows every runner; the ratios are taken in one process, the absolute
    # rates are only as good as this load (1-minute load average at the start and end of the size)
    pt["host_load_avg_1m"] = [load0, os.getloadavg()[0]]
    return pt


def bench_graph_engine(out_dir: Path, quick: bool, seed: int = 0, iterations: int = 10,
                       workers: int | None = None, dask: bool = True, scales: tuple | None = None,
                       edge_factor: int = 16) -> dict:
    """Edges per second per core: engine (1 core, compiled threads, process pool, Dask) vs scipy SpMV vs igraph.

    PageRank with a fixed iteration count on Graph500 R-MAT graphs (edge factor 16): scale 16
    (1 M edges) when ``quick``; scales 16, 20, 22, 23 (1 M, 17 M, 67 M, 134 M edges) otherwise.
    Per size: the partitioners' replication factor and balance at k = 8, and (small sizes) BFS,
    CC, SSSP and converged PageRank. Runners that would not fit are skipped with the reason in
    the JSON. ``graph_engine.json`` is rewritten after every size, so a long run leaves the sizes
    done so far.
    """
    from hwcosim.models.systems.graph.graph import RMATParams
    from rich.progress import Progress

    workers = workers or min(2, os.cpu_count() or 1)
    scales = tuple(scales) if scales else ((16,) if quick else (16, 20, 22, 23))
    res = {"iterations": iterations, "workers": workers, "cores_on_host": os.cpu_count(),
           "limits": {"dask_max_edges": _DASK_MAX_EDGES, "extras_max_edges": _EXTRAS_MAX_EDGES,
                      "all_cuts_max_edges": _ALL_CUTS_MAX_EDGES, "igraph_mem_fraction": _IGRAPH_MEM_FRACTION,
                      "igraph_build_budget_s": _IGRAPH_BUILD_BUDGET_S},
           "sizes": []}
    out = Path(out_dir)
    calib: dict = {}
    with Progress(transient=True) as prog:
        task = prog.add_task("graph bench", total=len(scales))
        for sc in scales:
            pt = _engine_point(RMATParams(scale=sc, edge_factor=edge_factor, seed=seed), iterations, workers,
                               dask, calib, _ProgTask(prog, task))
            res["sizes"].append(pt)
            _write_json(out / "graph_engine.json", res)
            prog.advance(task)
    res["igraph_calibration"] = calib
    _write_json(out / "graph_engine.json", res)
    runners = sorted({k for pt in res["sizes"] for k in pt["pagerank"]})
    labels = [f"{pt['graph']['m'] / 1e6:.0f} M" for pt in res["sizes"]]
    _bar_png(out / "graph_engine.png", labels,
             {r: [pt["pagerank"].get(r, {}).get("edges_per_s_per_core", 0.0) / 1e6 for pt in res["sizes"]]
              for r in runners}, "M edges / s / core", "PageRank iteration on R-MAT graphs (0 = skipped)")
    for pt in res["sizes"]:
        gm = pt["graph"]
        base = pt["pagerank"]["scipy CSR SpMV (1 core)"]["edges_per_s_per_core"]
        _table(f"PageRank, R-MAT scale {gm['scale']} ({gm['m'] / 1e6:.1f} M edges), {iterations} iterations",
               ["runner", "setup s", "steps s", "M edges/s", "M edges/s/core", "vs scipy"],
               [[n, v["setup_s"], v["seconds"], v["edges_per_s"] / 1e6, v["edges_per_s_per_core"] / 1e6,
                 v["edges_per_s_per_core"] / base] for n, v in pt["pagerank"].items()])
        for k, why in pt["skipped"].items():
            print(f"  skipped {k}: {why}")
        if "skipped" in pt["igraph"]:
            print(f"  skipped igraph: {pt['igraph']['skipped']}")
    last = res["sizes"][-1]
    _table(f"Partitioning, k = 8, {last['graph']['m'] / 1e6:.1f} M edges",
           ["method", "replication factor", "edge balance", "vertex balance"],
           [[m, v["replication_factor"], v["edge_balance"], v["vertex_balance"]]
            for m, v in last["partitioning"].items()])
    return res


class _ProgTask:
    """A rich progress task handle (description updates)."""

    def __init__(self, prog, task):
        self.prog, self.task = prog, task

    def update(self, description: str) -> None:
        self.prog.update(self.task, description=description)


def _curves_png(path: Path, panels: list, title: str) -> Path:
    """Convergence curves: ``panels`` = [(title, xlabel, ylabel, {label: (x, y)})], one row per two panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(11, 3.2 * rows), squeeze=False)
    for ax, (ttl, xl, yl, curves) in zip(axes.flat, panels):
        for label, (x, y) in curves.items():
            ax.plot(x, y, label=label, lw=1.2)
        ax.set_title(ttl, fontsize=9)
        ax.set_xlabel(xl, fontsize=8)
        ax.set_ylabel(yl, fontsize=8)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=100)
    return path


def _tux2_panels(algos: dict) -> list:
    panels = []
    for algo, a in algos.items():
        for runs, key, xl in (("runs", "sim_time", "simulated s (worker model)"),
                              ("threads_runs", "wall_time", "wall s of threads sleeping modelled durations (a model)"),
                              ("processes_runs", "wall_time", "measured wall s (worker processes)"),
                              ("dask_runs", "wall_time", "measured wall s (Dask workers)")):
            if runs not in a:
                continue
            curves = {(f"s={s}" if s != "0" else "BSP (s=0)"): ([h[key] for h in r["history"]],
                                                                [h["loss"] for h in r["history"]])
                      for s, r in a[runs].items()}
            k = a.get(f"{runs.split('_')[0]}_partitioning", a["partitioning"])["k"] if runs != "runs" \
                else a["partitioning"]["k"]
            what = {"processes_runs": "processes", "dask_runs": "Dask workers"}.get(runs, "workers")
            panels.append((f"{algo}: {a['data']['name']}, {k} {what}", xl, a["metric"], curves))
    return panels


_TUX2_PAPER = ("TuX2 (NSDI 2017) per SPECS.md: MF, LDA, LR in ~25 % of the code of ML-platform versions; "
               "~10x faster than PowerGraph/PowerLyra; >= 48 % faster than two ML systems. SPECS.md states no "
               "SSP-vs-BSP figure, so our SSP gain has no confirmed paper number to compare with.")


def _tux2_tables(res: dict) -> None:
    for algo, a in res["algos"].items():
        rk = next((k for k in ("processes_runs", "dask_runs") if k in a), "threads_runs")
        rn = rk.split("_")[0]
        _table(f"TuX2 {algo} on {a['data']['name']} ({a['data']['edges']} edges, {a['partitioning']['k']} workers, "
               f"{a['epochs']} epochs x {a['batches']} batches); target {a['metric']} = {a['target_loss']:.4g}",
               ["staleness (steps)", "final loss", "sim s", "sim s to target", "SSP gain (sim)", "max stale (steps)",
                f"{rn} wall s", f"{rn} gain"],
               [[s, r["final_loss"], r["sim_time"], r["sim_time_to_target"], r["sim_time_speedup_vs_bsp"],
                 r["max_staleness"], a.get(rk, {}).get(s, {}).get("wall_time", "-"),
                 a.get(rk, {}).get(s, {}).get("wall_time_speedup_vs_bsp", "-")]
                for s, r in a["runs"].items()]
               + [["plain", a["plain"]["final_loss"], "-", "-", "-", "-", a["plain"]["wall_time"], "-"]])
    _table("Code lines (not blank/comment/docstring)",
           ["algorithm", "TuX2 form (lines)", "plain numpy (lines)", "ratio"],
           [[k, v["tux2"], v["plain"], v["ratio"]] for k, v in res["line_counts"].items()])


def bench_tux2(out_dir: Path, quick: bool, seed: int = 0, real_workers: int | None = None) -> dict:
    """TuX2 SSP (s = 1, 2, 4) vs BSP for MF, LR, LDA: convergence per measured and simulated second.

    See :func:`hwcosim.models.systems.graph.tux2_algos.study`: every configuration runs on real worker
    processes (``processes_runs``: loss against measured wall seconds; ``real_workers``
    processes, default the host's CPUs, 2 to 4) and in the simulated cluster of the worker model
    (``runs``: loss against simulated seconds, 4 or 8 modelled workers; a model, labelled so).
    Writes ``tux2.json`` and ``tux2.png``; the load average is recorded per measured run.
    """
    from hwcosim.models.systems.graph.tux2_algos import study
    from rich.progress import Progress

    real_workers = real_workers or max(2, min(4, os.cpu_count() or 1))
    with Progress(transient=True) as prog:
        task = prog.add_task("tux2", total=None)
        res = study(quick=quick, seed=seed, progress=lambda d: prog.update(task, description=d), real="processes",
                    real_workers=real_workers)
    res["paper"] = _TUX2_PAPER
    out = Path(out_dir)
    _write_json(out / "tux2.json", res)
    _curves_png(out / "tux2.png", _tux2_panels(res["algos"]),
                f"TuX2: SSP vs BSP; left: simulated worker model, right: measured on {res['real_workers']} worker "
                f"processes (load average {res['host']['loadavg_start'][0]:.1f} on {res['host']['cpus']} CPUs)")
    _tux2_tables(res)
    return res


def _tux2_procs_png(path: Path, res: dict) -> Path:
    """Loss vs measured wall seconds, every repeat of every staleness (one colour per staleness)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    algos = res["algos"]
    fig, axes = plt.subplots(1, len(algos), figsize=(5.5 * len(algos), 3.8), squeeze=False)
    for ax, (algo, a) in zip(axes.flat, algos.items()):
        for i, (s, runs) in enumerate(a["runs"].items()):
            for j, r in enumerate(runs):
                ax.plot([h["wall_time"] for h in r["history"]], [h["loss"] for h in r["history"]], color=f"C{i}",
                        lw=1.0, alpha=0.8, label=(f"s={s}" if s != "0" else "BSP (s=0)") if j == 0 else None)
        one = a["one_worker"]["history"]
        ax.plot([h["wall_time"] for h in one], [h["loss"] for h in one], "k--", lw=1.0, label="1 worker process")
        ax.axhline(a["target_loss"], color="grey", lw=0.6, ls=":")
        ax.set_title(f"{algo}: {a['data']['name']}, {a['data']['edges']} edges, {res['workers']} processes", fontsize=9)
        ax.set_xlabel("measured wall seconds", fontsize=8)
        ax.set_ylabel(a["metric"], fontsize=8)
        ax.legend(fontsize=7)
    la = res["host"]
    fig.suptitle(f"TuX2 on worker processes: SSP vs BSP ({la['cpus']} CPUs, load average "
                 f"{la['loadavg_start'][0]:.1f} -> {la['loadavg_end'][0]:.1f})", fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=100)
    return path


def _tux2_procs_tables(res: dict) -> None:
    def med(x):
        return "-" if x is None else x["median"]

    for algo, a in res["algos"].items():
        _table(f"TuX2 {algo} on {res['workers']} worker processes ({a['data']['edges']} edges, {a['clocks']} clocks, "
               f"{res['repeats']} repeats, medians); target {a['metric']} {a['target_loss']:.4g}; 1 worker "
               f"process: {a['one_worker']['wall_time']:.3g} s; BSP - simulated BSP: "
               f"{a['bsp_max_abs_diff_vs_simulated']:.2g}",
               ["staleness (steps)", "wall s", "s to target", "best s to target", "s to 90 %", "gain (target)",
                "best gain", "gain (90 %)", "clocks to target", "clocks/s", "wait s/worker", "CPU share",
                "final loss", "max stale (steps)"],
               [[s, med(r["wall_time"]), med(r["wall_s_to_target"]), (r["wall_s_to_target"] or {}).get("min", "-"),
                 med(r["wall_s_to_90pct"]), r["speedup_vs_bsp_to_target"] or "-",
                 r["speedup_vs_bsp_to_target_best"] or "-", r["speedup_vs_bsp_to_90pct"] or "-",
                 med(r["clocks_to_target"]), med(r["clocks_per_s"]), med(r["wait_s_per_worker"]),
                 med(r["cpu_share"]), med(r["final_loss"]),
                 r["max_staleness"]]
                for s, r in a["summary"].items()])
    h = res["host"]
    print(f"host: {h['cpus']} CPUs, 1-min load average {h['loadavg_start'][0]:.2f} at start, "
          f"{h['loadavg_end'][0]:.2f} at end (shared machine)")


def bench_tux2_procs(out_dir: Path, quick: bool, seed: int = 0, workers: int = 2, repeats: int | None = None,
                     sharing_scales: tuple | None = None) -> dict:
    """TuX2 on 2 real worker processes: SSP s = 1, 2, 4 vs BSP, loss vs measured wall seconds (MF, LR).

    See :func:`hwcosim.models.systems.graph.tux2_procs.process_study`. Also (``graph_sharing``,
    :func:`~models.systems.graph.tux2_procs.graph_sharing_study`) the start-up time and worker
    memory with the graph pickled to every worker vs attached from shared memory, on R-MAT
    ratings of scale 18, 19, 20 (14 with ``quick``; ``sharing_scales`` overrides, ``()`` skips).
    Writes ``tux2_procs.json``, ``tux2_procs.png`` and ``tux2_graph_sharing.png``.
    """
    from hwcosim.models.systems.graph.tux2_procs import graph_sharing_study, process_study
    from rich.progress import Progress

    scales = tuple(sharing_scales) if sharing_scales is not None else ((14,) if quick else (18, 19, 20))
    out = Path(out_dir)
    with Progress(transient=True) as prog:
        task = prog.add_task("tux2 processes", total=None)
        res = process_study(quick=quick, seed=seed, workers=workers, repeats=repeats,
                            progress=lambda d: prog.update(task, description=d))
        _write_json(out / "tux2_procs.json", res)
        if scales:
            res["graph_sharing"] = graph_sharing_study(scales, workers=workers, seed=seed,
                                                       progress=lambda d: prog.update(task, description=d))
    _write_json(out / "tux2_procs.json", res)
    _tux2_procs_png(out / "tux2_procs.png", res)
    _tux2_procs_tables(res)
    if scales:
        _graph_sharing_report(out / "tux2_graph_sharing.png", res["graph_sharing"])
    return res


def _graph_sharing_report(path: Path, gs: dict) -> None:
    rows = gs["scales"]
    labels = [f"scale {r['scale']}\n{r['edges'] / 1e6:.1f} M edges" for r in rows]
    groups = {}
    for how in ("pickled", "shared"):
        groups[f"start-up s, graph {how}"] = [r["runs"][how]["startup_s"] for r in rows]
        groups[f"worker private GB (USS, max), {how}"] = [(r["runs"][how]["worker_uss_max"] or 0) / 1e9 for r in rows]
    _bar_png(path, labels, groups, "seconds / GB",
             f"TuX2 MF on {gs['workers']} processes: graph pickled to each worker vs shared memory")
    _table(f"TuX2 worker start-up and memory, graph pickled vs shared ({gs['workers']} processes)",
           ["scale", "edges", "graph MB", "pickle MB", "start-up s pickled", "start-up s shared", "ratio",
            "worker RSS MB pickled", "worker RSS MB shared", "worker USS MB pickled", "worker USS MB shared",
            "max |diff|"],
           [[r["scale"], r["edges"], r["graph_bytes"] / 1e6, r["engine_pickle_bytes"] / 1e6,
             r["runs"]["pickled"]["startup_s"], r["runs"]["shared"]["startup_s"],
             r["startup_ratio_pickled_over_shared"],
             (r["runs"]["pickled"]["worker_rss_max"] or 0) / 1e6, (r["runs"]["shared"]["worker_rss_max"] or 0) / 1e6,
             (r["runs"]["pickled"]["worker_uss_max"] or 0) / 1e6, (r["runs"]["shared"]["worker_uss_max"] or 0) / 1e6,
             r["max_abs_diff_shared_vs_pickled"]] for r in rows])


def bench_gnn_rewrite(out_dir: Path, quick: bool, seed: int = 0) -> dict:
    """GNN rewriter study (:func:`hwcosim.models.systems.graph.gnn.study`) and the rewrites against the
    unfused graphs and a fused SpMM baseline (:func:`~hwcosim.models.systems.graph.gnn.fused_study`,
    JSON key ``fused``, ``gnn_fused.png``)."""
    from hwcosim.models.systems.graph.gnn import fused_study, study

    res = study(quick=quick, seed=seed)
    res["fused"] = fused_study(quick=quick, seed=seed)
    out = Path(out_dir)
    _write_json(out / "gnn_rewrite.json", res)
    labels = [f"{r['model']}\n{r['graph']}" for r in res["rows"]]
    _bar_png(out / "gnn_rewrite.png", labels,
             {"speedup": [r["speedup"] for r in res["rows"]],
              "peak memory ratio (rewritten / original)": [r["peak_ratio"] for r in res["rows"]]},
             "ratio", "GNN algebraic rewrites vs untransformed operator graphs")
    _table("GNN rewrites", ["model", "graph", "orig ms", "rewritten ms", "speedup", "orig peak MB", "new peak MB",
                            "max |diff|", "reorder gain"],
           [[r["model"], r["graph"], r["orig_ms"], r["new_ms"], r["speedup"], r["orig_peak_mb"], r["new_peak_mb"],
             r["max_abs_diff"], r["reorder_gain"]] for r in res["rows"]])
    _gnn_fused_report(out, res["fused"])
    return res


def _gnn_fused_report(out: Path, fz: dict) -> None:
    rows = fz["rows"]
    from hwcosim.models.benchio import bar_png

    labels = ["\n".join([*r["model"].split(), r["graph"].replace("rmat-", ""), f"{r['threads']} thr"]) for r in rows]
    bar_png(out / "gnn_fused.png", labels,
            {"rewrite vs unfused": [r["speedup_vs_unfused"] for r in rows],
             "rewrite vs fused SpMM": [r["speedup_vs_fused"] for r in rows]},
            "speedup (x)", "GNN rewrites vs the unfused graph and a fused SpMM baseline", log=True,
            figsize=(max(7.5, 0.42 * len(rows)), 4.5), fontsize=6)
    small = "" if all(r["edges_ok"] for r in rows) else " -- below 1 M edges: timing noise, not a figure"
    _table(f"GNN rewrites vs unfused and fused SpMM (median ms of {rows[0]['repeats']}, interleaved){small}",
           ["model", "graph", "edges", "BLAS threads", "unfused ms", "rewrite ms", "fused ms", "vs unfused x",
            "vs fused x", "max rel diff", "load 1 min"],
           [[r["model"], r["graph"], r["edges"], r["blas_threads"], r["unfused_ms"], r["rewrite_ms"], r["fused_ms"],
             r["speedup_vs_unfused"], r["speedup_vs_fused"], max(r["max_rel_diff_fused"], r["max_rel_diff_rewrite"]),
             r["loadavg_1min"][1]] for r in rows])
    bands = "; ".join(f"{m} " + ", ".join(f"{k} {v[0]:.2f}-{v[1]:.2f}" for k, v in b.items() if v and k != "all")
                      for m, b in fz["sensitivity"].items())
    print(f"rewrite / fused-SpMM ratio is sensitive to BLAS threads, feature width and graph density: {bands} "
          f"(all results allclose at rtol {fz['rtol']:g}: "
          f"{all(r['allclose_fused'] and r['allclose_rewrite'] for r in rows)})")


def run_report(out: Path, algorithm: str, g, r, k: int) -> Path:
    """``run_<algorithm>_<graph>.json`` of one engine run and its table; returns the JSON's path.

    ``state`` is an object keyed by vertex id (a graph file's own ids): rank, level or distance
    (``Infinity`` where unreachable), or the component's label (its least vertex id)."""
    state = g.values_by_id(r.state.astype(np.int64) if algorithm == "cc" else r.state)
    path = _write_json(out / f"run_{algorithm}_{g.name}.json",
                       {"algorithm": algorithm, "graph": g.name, "n": g.n, "m": g.m, "steps": r.steps,
                        "seconds": r.seconds, "edges_per_s": r.edges_per_second, "executor": r.executor,
                        "partitioning": r.partitioning, "state_keys": "vertex id", "state": state})
    fin = np.isfinite(r.state)
    _table(f"{algorithm} on {g.name}",
           ["n", "m", "executor", "k", "RF (replicas/vertex)", "steps", "s", "M edges/s", "finite (vertices)",
            "sum (state units)"],
           [[g.n, g.m, r.executor, k, r.partitioning["replication_factor"], r.steps, r.seconds,
             r.edges_per_second / 1e6, int(fin.sum()), float(r.state[fin].sum())]])
    return path


def partition_report(out: Path, g, k: int, seed: int) -> dict:
    """The three partitioners on ``g`` at ``k`` parts: ``partition_<graph>.json`` + ``.png`` and a table."""
    from hwcosim.models.atomic import staged_dir
    from hwcosim.models.systems.graph.partition import METHODS, partition

    res = {m: partition(g, k, m, seed=seed).summary() for m in METHODS}
    with staged_dir(out) as st:  # both files appear together, at the end
        _write_json(st / f"partition_{g.name}.json", res)
        _bar_png(st / f"partition_{g.name}.png", list(METHODS),
                 {"replication factor": [res[m]["replication_factor"] for m in METHODS],
                  "edge balance": [res[m]["edge_balance"] for m in METHODS]}, "", f"{g.name}, k = {k}")
    _table(f"Partitioning {g.name}, k = {k}",
           ["method", "replication factor", "edge balance", "vertex balance"],
           [[m, v["replication_factor"], v["edge_balance"], v["vertex_balance"]] for m, v in res.items()])
    return res


def tux2_report(out: Path, stem: str, res: dict, title: str) -> None:
    """``<stem>.json`` + ``<stem>.png`` of a TuX2 study (both appear together, at the end) and its tables."""
    from hwcosim.models.atomic import staged_dir

    with staged_dir(out) as st:
        _write_json(st / f"{stem}.json", res)
        _curves_png(st / f"{stem}.png", _tux2_panels(res["algos"]), title)
    _tux2_tables(res)


def _default_tux2_executor() -> str:
    """Real worker processes when the host has more than one CPU, else the simulation only."""
    return "processes" if (os.cpu_count() or 1) > 1 else "simulated"


def run_tux2(out: Path, algo: str = "mf", staleness: int = 2, workers: int = 4, seed: int = 0,
             epochs: int | None = None, batches: int | None = None, partitioner: str = "bicut", full: bool = False,
             executor: str | None = None) -> Path:
    """One TuX2 algorithm under SSP with bound ``staleness`` and under BSP with ``workers`` workers,
    simulated and (``executor``: processes, dask, threads; default processes on a multi-CPU host,
    else simulated only) measured; ``tux2_<algo>_s<S>_w<W>.json`` + ``.png`` into ``out`` and the
    tables; returns the JSON's path. Bad values raise UsageError (one line naming the option)."""
    from hwcosim.models.systems.graph.tux2 import EXECUTORS, PARTITIONERS
    from hwcosim.models.systems.graph.tux2_algos import ALGOS, _setup, study
    from rich.progress import Progress

    if algo not in ALGOS:
        raise UsageError(f"unknown algorithm {algo!r}; choose one of {', '.join(ALGOS)}")
    if partitioner not in PARTITIONERS:
        raise UsageError(f"unknown partitioner {partitioner!r}; choose one of {', '.join(PARTITIONERS)}")
    s = staleness
    g = _setup(algo, not full, seed)[0]
    if epochs is not None and not 1 <= epochs <= 100000:
        raise UsageError(f"--epochs must be {'>= 1' if epochs < 1 else '<= 100000'}, not {epochs}")
    if batches is not None and not 1 <= batches <= g.n_a:
        raise UsageError(f"--batches must be {'>= 1' if batches < 1 else f'<= {g.n_a}'}, not {batches}")
    if workers > g.n_a:
        raise UsageError(f"--workers {workers} exceeds the {g.n_a} {g.types[0]} vertices of {g.name}")
    executor = executor or _default_tux2_executor()
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    out = Path(out)
    try:
        with Progress(transient=True) as bar:
            task = bar.add_task("tux2", total=None)
            res = study(not full, seed, (algo,), tuple(sorted({0, s})), workers,
                        progress=lambda d: bar.update(task, description=d), partitioner=partitioner,
                        epochs=epochs, batches=batches, real="none" if executor == "simulated" else executor)
    except ValueError as e:
        raise UsageError(str(e)) from e
    stem = f"tux2_{algo}_s{s}_w{workers}"
    res["algos"][algo]["executor"] = executor
    tux2_report(out, stem, res, f"TuX2 {algo}: staleness {s} vs BSP")
    return out / f"{stem}.json"


# ---- GraM scale-out: scaling study ------------------------------------------------------------------
def _gram_load1() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _gram_best_run(make_engine, program, repeats: int):
    """Warm once (kernels, plan, shards), then ``repeats`` runs: (the fastest, every run's seconds)."""
    make_engine().run(type(program)(tol=program.tol, max_steps=1))
    best, secs = None, []
    for _ in range(repeats):
        r = make_engine().run(program)
        secs.append(r.seconds)
        if best is None or r.seconds < best.seconds:
            best = r
    return best, secs


def gram_scaling_point(g, P, W: int, client, iterations: int, repeats: int) -> dict:
    """PageRank (``iterations`` fixed supersteps) on ``W`` workers of ``client``'s cluster beside the
    in-process compiled engine on ``min(W, cores)`` threads, same graph and partitioning."""
    from hwcosim.models.systems.graph.algorithms import PageRank
    from hwcosim.models.systems.graph.compiled import CompiledExecutor
    from hwcosim.models.systems.graph.engine import Engine
    from hwcosim.models.systems.graph.gram_dask import GramDaskExecutor

    ncpu = os.cpu_count() or 1
    prog = PageRank(tol=1e-300, max_steps=iterations)
    load0 = _gram_load1()
    ex = GramDaskExecutor(workers=W, client=client).open()
    try:
        t0 = time.perf_counter()
        ex.load(g, P)
        load_s = time.perf_counter() - t0
        rg, secs_g = _gram_best_run(lambda: Engine(g, P, executor=ex), prog, repeats)
    finally:
        ex.close()
    threads = min(W, ncpu)
    rc, secs_c = _gram_best_run(lambda: Engine(g, P, executor=CompiledExecutor(threads)), prog, repeats)
    ref = Engine(g, P).run(prog).state  # the serial engine: the reference the results must equal
    cut = rg.partitioning["cut"]
    steps = rg.partitioning["supersteps"]
    bps = float(np.mean([s["bytes"] for s in steps]))
    eps_g, eps_c = rg.edges_per_second, rc.edges_per_second
    cores = min(W, ncpu)

    def rel(a, b):  # element-wise relative difference
        return float((np.abs(a - b) / np.maximum(np.abs(b), 1e-300)).max())

    return {
        "workers": W, "partitions": P.k, "method": P.method, "n": g.n, "m": g.m, "iterations": rg.steps,
        "gram": {"seconds": rg.seconds, "edges_per_s": eps_g, "edges_per_s_per_core": eps_g / cores,
                 "edges_per_s_per_worker": eps_g / W, "shard_load_s": load_s,
                 "client_cpu_s": rg.cpu_seconds, "repeat_seconds": secs_g,
                 "superstep_s_mean": float(np.mean([s["seconds"] for s in steps])),
                 "compute_s_mean": float(np.mean([s["max_compute_s"] for s in steps]))},
        "compiled": {"threads": threads, "seconds": rc.seconds, "edges_per_s": eps_c,
                     "edges_per_s_per_core": eps_c / threads, "repeat_seconds": secs_c},
        "ratio_gram_to_compiled": eps_g / eps_c,
        "max_rel_diff_vs_serial": rel(rg.state, ref),
        "allclose_to_serial_rtol_1e-12": bool(np.allclose(rg.state, ref, rtol=1e-12, atol=0)),
        "compiled_max_rel_diff_vs_serial": rel(rc.state, ref),
        "max_rel_diff_vs_compiled": rel(rg.state, rc.state),
        "bytes_per_superstep": bps,
        "value_bytes_per_superstep": float(np.mean([s["value_bytes"] for s in steps])),
        "batches_per_superstep": float(np.mean([s["batches"] for s in steps])),
        "cut": cut,
        "bytes_per_cut_entry": bps / max(cut["ghost_entries"] + cut["message_slots"], 1),
        # what the broadcast executor (DaskExecutor) moves per superstep on the same partitioning, by
        # construction: the whole value vector to every worker, every partition's partials back
        "broadcast_executor_bytes_per_superstep": 8 * (W * g.n + sum(int(p.dst_unique.size) for p in P.parts)),
        "cores_used": cores, "oversubscribed": W > ncpu,
        "load_avg_1m": [load0, _gram_load1()],
    }


def gram_scaling_study(quick: bool = False, seed: int = 0, workers: tuple | None = None,
                       strong_scale: int | None = None, weak_scale: int | None = None, iterations: int = 10,
                       repeats: int | None = None, edge_factor: int = 16, method: str = "hybrid", progress=None,
                       client=None) -> dict:
    """Strong and weak scaling of PageRank over ``workers`` Dask worker processes (the headline of the
    GraM scale-out; :func:`gram_scaling_point` per point).

    Strong: one R-MAT graph of ``strong_scale`` (default 20; 11 when ``quick``) on every worker
    count. Weak: ``weak_scale + log2(W)`` (default 18; 10 when ``quick``), the same edges per
    worker. ``k = W`` partitions (``method``). One ``LocalCluster`` of ``max(workers)`` processes
    (or the cluster of ``client``) serves every point (a point on ``W`` workers uses the first ``W``);
    its start is recorded.
    """
    from hwcosim.models.systems.graph.gram_dask import GramDaskExecutor
    from hwcosim.models.systems.graph.graph import RMATParams, rmat
    from hwcosim.models.systems.graph.partition import partition

    ncpu = os.cpu_count() or 1
    workers = tuple(workers or ((1, 2) if quick else (1, 2, 4)))
    if any(w < 1 or w & (w - 1) for w in workers):
        raise UsageError(f"worker counts must be powers of two (weak scaling doubles the graph), not {workers}")
    strong_scale = strong_scale or (11 if quick else 20)
    weak_scale = weak_scale or (10 if quick else 18)
    repeats = repeats or (1 if quick else 3)
    say = progress or (lambda _d: None)
    res = {"iterations": iterations, "repeats": repeats, "edge_factor": edge_factor, "method": method,
           "seed": seed, "workers": list(workers), "host_cores": ncpu,
           "oversubscribed": [w for w in workers if w > ncpu],
           "note": (f"{ncpu} cores on the host: {', '.join(str(w) for w in workers if w > ncpu) or 'no'} worker "
                    f"count(s) oversubscribe them (more worker processes than cores), so per-core rates there "
                    f"divide by {ncpu} cores and time-share with the client and other work on the host"),
           "load_avg_1m_start": _gram_load1(), "strong": [], "weak": []}
    t0 = time.perf_counter()
    with GramDaskExecutor(workers=max(workers), client=client) as ex:
        res["cluster_start_s"] = time.perf_counter() - t0
        graphs: dict = {}
        for mode in ("strong", "weak"):
            for W in workers:
                scale = strong_scale if mode == "strong" else weak_scale + W.bit_length() - 1
                if scale not in graphs:
                    graphs.clear()
                    say(f"GraM Dask: R-MAT scale {scale}")
                    graphs[scale] = rmat(RMATParams(scale=scale, edge_factor=edge_factor, seed=seed), weights=False)
                g = graphs[scale]
                say(f"GraM Dask: {mode} scaling, scale {scale}, {W} worker(s)")
                pt = gram_scaling_point(g, partition(g, W, method), W, ex.client, iterations, repeats)
                pt["scale"] = scale
                res[mode].append(pt)
    for mode in ("strong", "weak"):
        pts = res[mode]
        base = pts[0]["gram"]["edges_per_s"] / pts[0]["workers"]
        for pt in pts:
            if mode == "strong":
                pt["speedup_vs_1_worker"] = pts[0]["gram"]["seconds"] / pt["gram"]["seconds"]
            pt["efficiency_per_worker"] = pt["gram"]["edges_per_s"] / pt["workers"] / base
    res["load_avg_1m_end"] = _gram_load1()
    res["paper"] = dict(GRAM_PAPER)
    top = res["strong"][-1]
    secs = top["gram"]["repeat_seconds"]
    work = top["m"] * top["iterations"] / top["cores_used"]
    res["headline"] = {
        "what": f"PageRank on {top['workers']} Dask worker processes, R-MAT scale {top['scale']}, strong scaling",
        "edges_per_s_per_core": top["gram"]["edges_per_s_per_core"],
        "edges_per_s_per_core_band": [work / max(secs), work / min(secs)],
        "band_over": "the repeats of the point (host load; the best is the headline)",
        "ratio_gram_to_compiled": top["ratio_gram_to_compiled"],
        "speedup_vs_1_worker": top["speedup_vs_1_worker"],
        "bytes_per_superstep": top["bytes_per_superstep"],
        "cut_bytes_per_superstep": top["cut"]["dense_bytes_per_superstep"],
        "broadcast_executor_bytes_per_superstep": top["broadcast_executor_bytes_per_superstep"],
        "vs_paper_edges_per_s_per_core": (top["gram"]["edges_per_s_per_core"]
                                          / GRAM_PAPER["edges_per_s_per_core_lower_bound"]),
    }
    return res


#: GraM's headline (SoCC 2015, abstract): a PageRank iteration on a synthetic graph of over one trillion
#: edges in 140 s on 64 servers, 1,024 physical cores; per core a lower bound (the graph has *over* 1e12 edges)
GRAM_PAPER = {
    "source": "Wu et al., GraM: Scaling Graph Computation to the Trillions, SoCC 2015, abstract",
    "edges": 1e12, "seconds_per_iteration": 140.0, "servers": 64, "cores": 1024,
    "edges_per_s_per_core_lower_bound": 1e12 / 140.0 / 1024,
    "sensitive_to": "edges per core (1e9 there, cache misses per edge grow with the graph), the network (RDMA "
                    "between servers there, loopback TCP between processes here), the per-superstep coordination "
                    "cost against the superstep's work, and cores per process (16 threads per server there, one "
                    "thread per worker process here)",
}


# ---- GraM scale-out on Dask worker processes ---------------------------------------------------------
def _gram_png(path: Path, res: dict) -> Path:
    """Left: M edges/s of PageRank vs worker processes (strong and weak; GraM on Dask and the in-process
    compiled engine). Right: bytes per superstep against the cut and the broadcast executor (log)."""
    from hwcosim.models.atomic import save_png
    from hwcosim.models.benchio import pyplot

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for mode, ls in (("strong", "-"), ("weak", "--")):
        pts = res[mode]
        w = [p["workers"] for p in pts]
        a.plot(w, [p["gram"]["edges_per_s"] / 1e6 for p in pts], "o" + ls, label=f"GraM on Dask, {mode}")
        a.plot(w, [p["compiled"]["edges_per_s"] / 1e6 for p in pts], "s" + ls, label=f"compiled in-process, {mode}")
    a.set_xscale("log", base=2)
    a.set_xlabel(f"worker processes ({res['host_cores']} cores on the host)")
    a.set_ylabel("M edges / s")
    a.set_title("PageRank on R-MAT, strong and weak scaling")
    a.legend(fontsize=7)
    pts = [p for p in res["strong"] + res["weak"] if p["workers"] > 1]
    labels = [f"{p['workers']}w s{p['scale']}" for p in pts]
    x = np.arange(len(pts))
    for i, (key, name) in enumerate((("bytes_per_superstep", "sent (counted)"),
                                     ("cut_dense", "cut x 8 B"),
                                     ("broadcast_executor_bytes_per_superstep", "broadcast executor"))):
        vals = [p["cut"]["dense_bytes_per_superstep"] if key == "cut_dense" else p[key] for p in pts]
        b.bar(x + (i - 1) * 0.27, np.array(vals) / 2**20, 0.27, label=name)
    b.set_xticks(x, labels, fontsize=7)
    b.set_yscale("log")
    b.set_ylabel("MiB per superstep")
    b.set_title("Bytes moved per superstep")
    b.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    return path


def bench_gram_dask(out_dir: Path, quick: bool, seed: int = 0, workers: tuple | None = None,
                    strong_scale: int | None = None, weak_scale: int | None = None, iterations: int = 10,
                    repeats: int | None = None, client=None) -> dict:
    """GraM scale-out: PageRank on 1, 2, 4 Dask worker processes with resident shards and boundary-only
    messages (:func:`gram_scaling_study`), strong and weak scaling,
    against the in-process compiled engine; ``graph_gram_dask.json`` + ``.png`` and tables. ``client``: run
    on that Dask client's cluster instead of starting a ``LocalCluster``."""
    from rich.progress import Progress

    with Progress(transient=True) as prog:
        task = prog.add_task("GraM Dask", total=None)
        res = gram_scaling_study(quick, seed, workers, strong_scale, weak_scale, iterations, repeats,
                            progress=lambda d: prog.update(task, description=d), client=client)
    out = Path(out_dir)
    _write_json(out / "graph_gram_dask.json", res)
    _gram_png(out / "graph_gram_dask.png", res)
    for mode in ("strong", "weak"):
        _table(f"GraM on Dask worker processes, {mode} scaling, PageRank {iterations} iterations "
               f"({res['host_cores']} cores; load avg {res['load_avg_1m_start']:.1f})",
               ["workers", "scale", "M edges", "gram s", "gram M edges/s/core", "compiled M edges/s/core",
                "gram/compiled ratio", "bytes/superstep", "cut entries", "bytes/cut entry",
                "broadcast bytes/superstep"],
               [[p["workers"], p["scale"], p["m"] / 1e6, p["gram"]["seconds"], p["gram"]["edges_per_s_per_core"] / 1e6,
                 p["compiled"]["edges_per_s_per_core"] / 1e6, p["ratio_gram_to_compiled"], p["bytes_per_superstep"],
                 p["cut"]["ghost_entries"] + p["cut"]["message_slots"], p["bytes_per_cut_entry"],
                 p["broadcast_executor_bytes_per_superstep"]] for p in res[mode]])
    print(f"  {res['note']}")
    return res


# ---- TuX2 against a GAS (PowerGraph-model) baseline, PAI stragglers -----------------------------------
_TUX2_GAS_PAPER = ("paper: TuX2 (Xiao et al., NSDI 2017, abstract): an order of magnitude (~10x) faster than "
                   "PowerGraph/PowerLyra (C++ engines, clusters, up to 64 B edges); MF/LR/LDA in ~25 % of the code "
                   "of ML-platform versions - not of GAS programs. Its per-algorithm MF/LR evaluation figures were "
                   "not found in the searchable copies, so only the abstract's figures are compared")


def _tux2_gas_png(path: Path, res: dict) -> Path:
    """Loss vs time per staleness (TuX2) and GAS, one panel per algorithm; the band as bars."""
    from hwcosim.models.atomic import save_png
    from hwcosim.models.benchio import pyplot

    plt = pyplot()
    algos = res["algos"]
    fig, axes = plt.subplots(1, 2 * len(algos), figsize=(5.2 * 2 * len(algos), 3.8), squeeze=False)
    unit = "wall s (threads; modelled durations slept)" if res["executor"] == "threads" else "simulated s"
    for i, (algo, a) in enumerate(algos.items()):
        ax, bx = axes[0, 2 * i], axes[0, 2 * i + 1]
        r = a["runs"]
        key = r["time_key"]
        for s, v in r["tux2"].items():
            ax.plot([h[key] for h in v["history"]], [h["loss"] for h in v["history"]], lw=1.1,
                    label=f"TuX2 MEGA s={s}" if s != "0" else "TuX2 MEGA BSP (s=0)")
        gh = r["gas"]["history"]
        ax.plot([h[key] for h in gh], [h["loss"] for h in gh], "k--", lw=1.2, label="GAS (PowerGraph model), BSP")
        ax.axhline(r["target_loss"], color="grey", lw=0.6, ls=":")
        ax.set_title(f"{algo}: {a['data']['name']}, {a['data']['edges']} edges, {res['workers']} workers, "
                     f"PAI job {res['stragglers']['job']}", fontsize=8)
        ax.set_xlabel(unit, fontsize=8)
        ax.set_ylabel(a["metric"], fontsize=8)
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        labels = [f"job {b['job']}\n{b['batches']} batches" for b in a["band"]]
        x = np.arange(len(labels))
        ss = list(a["band"][0]["speedup_vs_gas"]) if a["band"] else []
        for k, s in enumerate(ss):
            bx.bar(x + (k - (len(ss) - 1) / 2) * 0.8 / len(ss), [b["speedup_vs_gas"][s] or 0 for b in a["band"]],
                   0.8 / len(ss), label=f"s={s}")
        bx.axhline(1.0, color="grey", lw=0.6)
        bx.set_xticks(x, labels, fontsize=7)
        bx.set_ylabel("GAS time / TuX2 time to target (x)", fontsize=8)
        bx.set_title(f"{algo}: band (simulated), PAI jobs and batch counts", fontsize=8)
        bx.legend(fontsize=7)
    fig.suptitle("TuX2 MEGA under SSP vs a GAS baseline, stragglers from real PAI per-worker mini-batch times",
                 fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=100)
    return path


def bench_tux2_gas(out_dir: Path, quick: bool, seed: int = 0, job: int = 1, workers: int = 10) -> dict:
    """TuX2 MEGA (SSP s = 0, 1, 2, 4) vs MF and LR as plain GAS programs (PowerGraph model, vertex-cut,
    BSP), time to a common target loss, stragglers from PAI job ``job``: see
    :func:`hwcosim.models.systems.graph.gas.gas_vs_tux2` (headline: ``best_speedup_vs_gas``).
    Writes ``tux2_gas.json`` and ``tux2_gas.png``; prints the tables, the paper's figures and the band."""
    from hwcosim.models.systems.graph.gas import gas_vs_tux2
    from rich.progress import Progress

    with Progress(transient=True) as prog:
        task = prog.add_task("TuX2 vs GAS", total=None)
        res = gas_vs_tux2(quick=quick, seed=seed, job=job, workers=workers,
                          progress=lambda d: prog.update(task, description=d))
    res["paper"] = _TUX2_GAS_PAPER
    out = Path(out_dir)
    _write_json(out / "tux2_gas.json", res)
    _tux2_gas_png(out / "tux2_gas.png", res)
    unit = "wall s" if res["executor"] == "threads" else "sim s"
    for algo, a in res["algos"].items():
        r = a["runs"]
        rows = [[f"TuX2 s={s}", v["final_loss"], v["time"], v["time_to_target"] if v["time_to_target"] is not None
                 else "-", v["speedup_vs_gas"] or "-", v["speedup_vs_bsp"] or "-"] for s, v in r["tux2"].items()]
        g = r["gas"]
        rows.append([f"GAS ({g['steps']} supersteps)", g["final_loss"], g["time"],
                     g["time_to_target"] if g["time_to_target"] is not None else "-", "-", "-"])
        _table(f"TuX2 vs GAS, {algo} on {a['data']['name']} ({a['data']['edges']} edges, {res['workers']} workers, "
               f"TuX2 {a['epochs']} epochs x {a['batches']} batches; PAI job {res['stragglers']['job']}); target "
               f"{a['metric']} {r['target_loss']:.4g}",
               ["system", "final loss", f"run ({unit})", f"to target ({unit})", "speedup vs GAS (x)",
                "speedup vs BSP (x)"], rows)
        _table(f"{algo}: band over PAI jobs and mini-batch counts (simulated)",
               ["PAI job (id)", "batches (count)", "GAS to target (sim s)"]
               + [f"TuX2 s={s} vs GAS (x)" for s in res["staleness"]],
               [[b["job"], b["batches"], b["gas_time_to_target"] if b["gas_time_to_target"] is not None else "-"]
                + [b["speedup_vs_gas"][str(s)] or "-" for s in res["staleness"]] for b in a["band"]])
    lc = res["line_counts"]
    _table("Code lines (not blank/comment/docstring), counted the same way for both forms",
           ["algorithm", "GAS functions (lines)", "TuX2 functions (lines)", "TuX2/GAS functions (ratio)",
            "GAS class (lines)", "TuX2 class (lines)"],
           [[k, v["gas_functions"], v["tux2_functions"], v["tux2_over_gas_functions"], v["gas_class"], v["tux2_class"]]
            for k, v in lc.items()])
    print(res["paper"])
    for algo, a in res["algos"].items():
        b, sb = a["band_speedup_vs_gas"], a["band_ssp_speedup_vs_bsp"]
        r = a["runs"]
        if r["best_speedup_vs_gas"]:
            la = res["host"]
            print(f"ours ({algo}, {r['executor']}, PAI job {res['stragglers']['job']}): GAS time / TuX2 time to the "
                  f"target: BSP {r['bsp_speedup_vs_gas']:.2f}x, best staleness {r['best_speedup_vs_gas']:.2f}x "
                  f"({la['cpus']} CPUs, load average {la['loadavg_start'][0]:.1f} -> {la['loadavg_end'][0]:.1f})")
        else:
            print(f"ours ({algo}): GAS did not reach the target")
        if b:
            jobs = ", ".join(str(j) for j in sorted({x["job"] for x in a["band"]}))
            bss = ", ".join(str(x) for x in sorted({x["batches"] for x in a["band"]}))
            print(f"sensitive to: straggler job (PAI {jobs}), staleness {res['staleness']}, batch size ({bss} "
                  f"batches): TuX2 vs GAS {b[0]:.2f}x .. {b[1]:.2f}x; SSP vs BSP {sb[0]:.2f}x .. {sb[1]:.2f}x")
    return res


# ---- out of core: R-MAT scales beyond memory, CSR blocks on disk ----------------------------------------
OOC_SCALES = (22, 23, 24)
OOC_QUICK_SCALES = (12,)
_OOC_MEM_FRACTION = 0.7  # the in-memory baseline only if graph_bytes fits this share of the free memory


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _ooc_child_inmem(scale: int, edge_factor: int, seed: int, iterations: int, ranks: str) -> dict:
    """In a fresh process: R-MAT in memory, the compiled executor's PageRank (1 and every thread)."""
    from hwcosim.models.systems.graph.algorithms import PageRank
    from hwcosim.models.systems.graph.compiled import CompiledExecutor
    from hwcosim.models.systems.graph.engine import Engine
    from hwcosim.models.systems.graph.graph import RMATParams, rmat
    from hwcosim.models.systems.graph.partition import partition

    rss0 = _peak_rss()
    t0 = time.perf_counter()
    g = rmat(RMATParams(scale=scale, edge_factor=edge_factor, seed=seed))
    gen = time.perf_counter() - t0
    P = partition(g, 4, "edge-cut")
    out = {"scale": scale, "n": g.n, "m": g.m, "generate_s": gen, "runs": {}}
    for t in sorted({1, os.cpu_count() or 1}):
        Engine(g, P, executor=CompiledExecutor(t)).run(PageRank(tol=1e-300, max_steps=1))  # plan + numba cache
        r = Engine(g, P, executor=CompiledExecutor(t)).run(PageRank(tol=1e-300, max_steps=iterations))
        out["runs"][f"compiled ({t} thread{'s' if t > 1 else ''})"] = {
            "threads": t, "seconds": r.seconds, "setup_s": r.setup_seconds, "steps": r.steps,
            "edges_per_s": r.edges_per_second, "edges_per_s_per_core": r.edges_per_second / t}
    np.save(ranks, r.state)
    out["peak_rss_bytes"] = _peak_rss()
    out["start_rss_bytes"] = rss0
    return out


def _ooc_child_build(scale: int, edge_factor: int, seed: int, work: str, blocks) -> dict:
    from hwcosim.models.systems.graph.graph import RMATParams
    from hwcosim.models.systems.graph.outofcore import build_rmat_store

    rss0 = _peak_rss()
    r = build_rmat_store(RMATParams(scale=scale, edge_factor=edge_factor, seed=seed), work, blocks)
    r.update(peak_rss_bytes=_peak_rss(), start_rss_bytes=rss0)
    return r


def _ooc_child_run(store: str, iterations: int, evict: bool, ranks: str | None) -> dict:
    from hwcosim.models.systems.graph.outofcore import BlockStore, pagerank_out_of_core

    rss0 = _peak_rss()
    t0 = time.perf_counter()
    st = BlockStore(store)  # sizes and CRC-32 of every file checked
    verify = time.perf_counter() - t0
    r = pagerank_out_of_core(st, iterations=iterations, evict=evict)
    if ranks:
        np.save(ranks, r.state)
    return {"verify_s": verify, "seconds": r.seconds, "steps": r.steps, "edges_per_s": r.edges_per_second,
            "bytes_per_iteration": r.bytes_per_iteration, "blocks": r.blocks,
            "device_bytes_per_iteration": r.device_bytes_read / r.steps if r.device_bytes_read >= 0 else None,
            "max_block_edges": st.max_block_edges(), "peak_rss_bytes": _peak_rss(), "start_rss_bytes": rss0}


def _in_child(fn, *args):
    """``fn(*args)`` in a fresh (spawned) process, so its peak RSS is its own."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(fn, args)


def bench_graph_outofcore(out_dir: Path, quick: bool, scales: tuple | None = None, seed: int = 0,
                          iterations: int = 10, edge_factor: int = 16, blocks: int | None = None,
                          work_dir: str | os.PathLike | None = None) -> dict:
    """PageRank out of core (:mod:`~models.systems.graph.outofcore`) at R-MAT ``scales`` (default 22, 23,
    24; ``quick``: scale 12 whatever ``scales`` says) against the compiled in-memory engine at the
    smallest scale. Every stage runs in its own spawned process (its peak RSS is its own): the
    in-memory run, the build (edge stream + external block build), PageRank reading the blocks from
    the device (each block evicted from the page cache after use) and from the page cache. The
    on-disk files go under ``work_dir`` (default the system temporary folder) and are deleted.
    Writes ``graph_outofcore.json`` + ``.png``; the JSON is rewritten after every scale.
    """
    import shutil
    import tempfile

    from hwcosim.models.systems.graph.graph import graph_bytes
    from hwcosim.models.systems.graph.outofcore import check_ooc_budget

    scales = OOC_QUICK_SCALES if quick else tuple(sorted(scales or OOC_SCALES))
    for sc in scales:
        if not 1 <= sc <= 30:
            raise UsageError(f"out-of-core scale must be in [1, 30], not {sc}")
        check_ooc_budget(1 << sc, (edge_factor << sc) // max(1, blocks or 8), f"R-MAT scale {sc}")
    out = Path(out_dir)
    work = Path(tempfile.mkdtemp(prefix="hwcosim-ooc-", dir=work_dir))
    res = {"iterations": iterations, "edge_factor": edge_factor, "seed": seed, "cores_on_host": os.cpu_count(),
           "work_dir": str(work.parent), "in_memory": None, "scales": [],
           "note": ("out-of-core PageRank runs one thread (numba pull kernel per block); 'device' evicts every block "
                    "from the page cache after use, so each iteration reads the blocks from storage; 'page cache' "
                    "reads them from memory the kernel does not count as its own; peak RSS is per process "
                    "(ru_maxrss), including Python and numpy (start_rss_bytes)")}
    try:
        import psutil

        free = psutil.virtual_memory().available
    except ImportError:  # pragma: no cover
        free = 1 << 62
    base = scales[0]
    load0 = os.getloadavg()[0]
    try:
        need = graph_bytes(1 << base, edge_factor << base)
        if need <= _OOC_MEM_FRACTION * free:
            res["in_memory"] = _in_child(_ooc_child_inmem, base, edge_factor, seed, iterations, str(work / "mem.npy"))
        else:
            res["in_memory"] = {"scale": base, "skipped": f"estimated {need / 2**30:.1f} GiB, over "
                                f"{_OOC_MEM_FRACTION:.0%} of the {free / 2**30:.1f} GiB free"}
        for sc in scales:
            store = work / f"s{sc}"
            b = _in_child(_ooc_child_build, sc, edge_factor, seed, str(store), blocks)
            pt = {"scale": sc, "n": 1 << sc, "m": edge_factor << sc, "build": b}
            ranks = str(work / "ooc.npy") if sc == base and "runs" in (res["in_memory"] or {}) else None
            pt["device"] = _in_child(_ooc_child_run, b["blocks_dir"], iterations, True, ranks)
            pt["page_cache"] = _in_child(_ooc_child_run, b["blocks_dir"], iterations, False, None)
            if ranks:
                pt["max_abs_diff_vs_in_memory"] = float(np.abs(np.load(ranks) - np.load(work / "mem.npy")).max())
            shutil.rmtree(store)
            res["scales"].append(pt)
            _write_json(out / "graph_outofcore.json", res)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["host_load_avg_1m"] = [load0, os.getloadavg()[0]]
    _write_json(out / "graph_outofcore.json", res)
    _ooc_png(out / "graph_outofcore.png", res)
    _ooc_tables(res)
    return res


def _ooc_rows(res: dict) -> list:
    rows = []
    mem = res["in_memory"] or {}
    for name, r in mem.get("runs", {}).items():
        rows.append([f"in memory, {name}", mem["scale"], mem["m"] / 1e6, r["edges_per_s"] / 1e6,
                     mem["peak_rss_bytes"] / 2**30, 0.0, mem["generate_s"] + r["setup_s"]])
    for pt in res["scales"]:
        for mode in ("device", "page_cache"):
            r = pt[mode]
            rows.append([f"out of core, {mode.replace('_', ' ')}", pt["scale"], pt["m"] / 1e6, r["edges_per_s"] / 1e6,
                         r["peak_rss_bytes"] / 2**30, r["bytes_per_iteration"] / 2**20,
                         pt["build"]["generate_s"] + pt["build"]["build_s"]])
    return rows


def _ooc_tables(res: dict) -> None:
    _table(f"PageRank out of core vs in memory, R-MAT edge factor {res['edge_factor']}, {res['iterations']} iterations",
           ["run", "scale", "M edges", "M edges/s", "peak RSS (GiB)", "disk MiB/iteration", "build s"],
           _ooc_rows(res))
    _table("Out-of-core build and device reads",
           ["scale", "blocks (count)", "generate s", "block build s", "edge file MiB", "block MiB",
            "build peak RSS (GiB)", "device MiB/iteration"],
           [[pt["scale"], pt["device"]["blocks"], pt["build"]["generate_s"], pt["build"]["build_s"],
             pt["build"]["edge_bytes"] / 2**20, pt["build"]["block_bytes"] / 2**20,
             pt["build"]["peak_rss_bytes"] / 2**30,
             (pt["device"]["device_bytes_per_iteration"] or 0) / 2**20] for pt in res["scales"]])
    mem = res["in_memory"] or {}
    if "skipped" in mem:
        print(f"  in-memory baseline at scale {mem['scale']} skipped: {mem['skipped']}")
    print(f"  {res['note']}")


def _ooc_png(path: Path, res: dict) -> Path:
    from hwcosim.models.atomic import save_png
    from hwcosim.models.benchio import pyplot

    plt = pyplot()
    rows = _ooc_rows(res)
    labels = [f"{r[0].replace('out of core, ', 'ooc ').replace('in memory, ', 'mem ')}\ns{r[1]}" for r in rows]
    fig, axs = plt.subplots(1, 3, figsize=(12, 4))
    for ax, col, yl in zip(axs, (3, 4, 5), ("M edges / s", "peak RSS (GiB)", "disk MiB / iteration")):
        ax.bar(range(len(rows)), [r[col] for r in rows])
        ax.set_xticks(range(len(rows)), labels, fontsize=6, rotation=60)
        ax.set_ylabel(yl)
    fig.suptitle(f"PageRank out of core (CSR blocks on disk) vs in memory, {res['iterations']} iterations")
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return path


def outofcore_report(out: Path, r, info: dict, scale: int, edge_factor: int, seed: int) -> Path:
    """``pagerank_outofcore_rmat-s<scale>.json`` (counters, the 10 highest ranks) and ``.npy`` (every rank,
    by vertex id) of one out-of-core run (``hwcosim graph outofcore``), and its table; returns the JSON."""
    stem = f"pagerank_outofcore_rmat-s{scale}-e{edge_factor}"
    np.save(out / f"{stem}.npy", r.state)
    top = np.argsort(-r.state, kind="stable")[:10]
    path = _write_json(out / f"{stem}.json", {
        "algorithm": "pagerank", "graph": {"rmat_scale": scale, "edge_factor": edge_factor, "seed": seed,
                                           "n": info["n"], "m": info["m"]},
        "steps": r.steps, "seconds": r.seconds, "edges_per_s": r.edges_per_second, "blocks": r.blocks,
        "bytes_per_iteration": r.bytes_per_iteration, "device_bytes_read": r.device_bytes_read,
        "peak_rss_bytes": _peak_rss(), "store": info, "ranks_file": f"{stem}.npy",
        "top": {int(v): float(r.state[v]) for v in top}})
    _table(f"PageRank out of core, R-MAT scale {scale} (edge factor {edge_factor})",
           ["n (vertices)", "m (edges)", "blocks (count)", "steps", "s", "M edges/s", "disk MiB/iteration",
            "peak RSS (GiB)", "sum (rank)"],
           [[info["n"], info["m"], r.blocks, r.steps, r.seconds, r.edges_per_second / 1e6,
             r.bytes_per_iteration / 2**20, _peak_rss() / 2**30, float(r.state.sum())]])
    return path
