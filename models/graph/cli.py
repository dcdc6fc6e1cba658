"""``hwcosim graph`` subcommands and the graph benchmarks.

- ``hwcosim graph run ALGO [--graph NAME|rmat] [--scale S] [-k K] [--method M]
  [--executor serial|processes|dask] [--scheduler ADDRESS]``: one algorithm, a table, JSON.
- ``hwcosim graph partition [--graph ...] [-k K]``: replication factor and balance of the three
  partitioners, JSON + PNG.
- ``hwcosim graph bench [--quick]``: edges/s/core of the engine vs scipy SpMV and igraph, JSON + PNG.
- ``hwcosim graph gnn [--quick]``: GNN rewriter study (speedup, peak memory), JSON + PNG.

Outputs go under ``build/graph`` by default. Benchmarks for ``hwcosim bench``:
:func:`bench_graph_engine`, :func:`bench_gnn_rewrite` (``(out_dir, quick) -> dict``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["register", "main", "bench_graph_engine", "bench_gnn_rewrite"]


from models.cliutil import fail as _fail
from models.cliutil import out_dir as _out_dir_base
from models.cliutil import write_json as _write_json


def _out_dir(arg: str | None) -> Path:
    return _out_dir_base(arg, "build/graph")


def _bar_png(path: Path, labels, groups: dict, ylabel: str, title: str, log: bool = False) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..atomic import atomic_path

    fig, ax = plt.subplots(figsize=(7.5, 4))
    n = len(groups)
    x = np.arange(len(labels))
    for i, (name, vals) in enumerate(groups.items()):
        ax.bar(x + (i - (n - 1) / 2) * 0.8 / n, vals, 0.8 / n, label=name)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return path


def _table(title, cols, rows):
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*[f"{x:.4g}" if isinstance(x, float) else str(x) for x in r])
    Console().print(t)


def _load_graph(name: str, scale: int, edge_factor: int, seed: int):
    from .graph import REAL_GRAPHS, RMATParams, load_real, rmat

    if name == "rmat":
        return rmat(RMATParams(scale=scale, edge_factor=edge_factor, seed=seed))
    if name in REAL_GRAPHS:
        return load_real(name)
    _fail(f"unknown graph {name!r}; choose rmat or one of {', '.join(REAL_GRAPHS)}")


# ---- benchmarks ----------------------------------------------------------------------------------
def bench_graph_engine(out_dir: Path, quick: bool, seed: int = 0, iterations: int = 10,
                       workers: int | None = None, dask: bool = True) -> dict:
    """Edges per second per core: engine (1 core, process pool, Dask) vs scipy SpMV vs igraph.

    PageRank with a fixed iteration count on a Graph500 R-MAT graph: scale 16, edge factor 16
    (1 M edges) when ``quick``; scale 22, edge factor 24 (100 M edges) otherwise. BFS, CC and
    SSSP times on the same graph; replication factor and balance of each partitioner at k = 8.
    """
    from rich.progress import Progress

    from .algorithms import PageRank, pagerank_scipy, run
    from .engine import DaskExecutor, Engine, ProcessExecutor
    from .graph import RMATParams, rmat
    from .partition import METHODS, partition

    workers = workers or min(2, os.cpu_count() or 1)
    p = RMATParams(scale=16, edge_factor=16, seed=seed) if quick else RMATParams(scale=22, edge_factor=24, seed=seed)
    res = {"graph": {"scale": p.scale, "edge_factor": p.edge_factor, "a": p.a, "b": p.b, "c": p.c},
           "iterations": iterations, "workers": workers, "cores_on_host": os.cpu_count()}
    with Progress(transient=True) as prog:
        task = prog.add_task("graph bench", total=8)
        t0 = time.perf_counter()
        g = rmat(p)
        res["graph"].update(n=g.n, m=g.m, generate_s=time.perf_counter() - t0)
        prog.advance(task)
        res["partitioning"] = {}
        for m in METHODS:
            t0 = time.perf_counter()
            P = partition(g, 8, m)
            res["partitioning"][m] = {"replication_factor": P.replication_factor, "edge_balance": P.edge_balance,
                                      "vertex_balance": P.vertex_balance, "seconds": time.perf_counter() - t0}
        prog.advance(task)
        prog_pr = PageRank(tol=1e-300, max_steps=iterations)
        rows = {}
        r = Engine(g, k=1).run(prog_pr)
        rows["engine serial (1 core)"] = {"seconds": r.seconds, "cores": 1, "state": r.state}
        prog.advance(task)
        P = partition(g, 2 * workers, "hybrid")
        r = Engine(g, P, executor=ProcessExecutor(workers)).run(prog_pr)
        rows[f"engine processes ({workers})"] = {"seconds": r.seconds, "cores": workers, "state": r.state,
                                                 "setup_s": r.setup_seconds}
        prog.advance(task)
        if dask:
            r = Engine(g, P, executor=DaskExecutor(workers=workers, processes=True)).run(prog_pr)
            rows[f"engine dask LocalCluster ({workers})"] = {"seconds": r.seconds, "cores": workers, "state": r.state,
                                                 "setup_s": r.setup_seconds}
        prog.advance(task)
        x, s = pagerank_scipy(g, iterations)
        rows["scipy CSR SpMV (1 core)"] = {"seconds": s, "cores": 1, "state": x}
        prog.advance(task)
        try:
            import igraph

            h = igraph.Graph(n=g.n, edges=np.column_stack([g.src, g.dst]), directed=True)
            t0 = time.perf_counter()
            for impl in ("prpack", "arpack"):
                t0 = time.perf_counter()
                h.pagerank(damping=0.85, implementation=impl)
                res[f"igraph_{impl}_solve_s"] = time.perf_counter() - t0
        except ImportError:
            res["igraph"] = "not installed"
        prog.advance(task)
        ref = rows["scipy CSR SpMV (1 core)"]["state"]
        res["pagerank"] = {}
        for k, v in rows.items():
            eps = g.m * iterations / v["seconds"]
            res["pagerank"][k] = {"seconds": v["seconds"], "setup_s": v.get("setup_s", 0.0), "edges_per_s": eps,
                                  "edges_per_s_per_core": eps / v["cores"],
                                  "max_abs_diff_vs_scipy": float(np.abs(v["state"] - ref).max())}
        # converged engine PageRank vs igraph, same tolerance scale
        r = run(g, "pagerank", tol=1e-10, max_steps=500)
        res["engine_pagerank_converged"] = {"steps": r.steps, "seconds": r.seconds}
        for alg, kw in (("bfs", {"source": int(np.argmax(g.out_degree()))}), ("cc", {}),
                        ("sssp", {"source": int(np.argmax(g.out_degree()))})):
            r = run(g, alg, **kw)
            res[alg] = {"steps": r.steps, "seconds": r.seconds}
        prog.advance(task)
    out = Path(out_dir)
    _write_json(out / "graph_engine.json", res)
    names = list(res["pagerank"])
    _bar_png(out / "graph_engine.png", [n.replace(" (", "\n(") for n in names],
             {"M edges/s/core": [res["pagerank"][n]["edges_per_s_per_core"] / 1e6 for n in names]},
             "M edges / s / core", f"PageRank iteration, R-MAT {g.m / 1e6:.0f} M edges")
    _table(f"PageRank, R-MAT scale {p.scale} ({g.m / 1e6:.1f} M edges), {iterations} iterations",
           ["runner", "setup s", "steps s", "M edges/s", "M edges/s/core", "vs scipy"],
           [[n, v["setup_s"], v["seconds"], v["edges_per_s"] / 1e6, v["edges_per_s_per_core"] / 1e6,
             v["edges_per_s_per_core"] / res["pagerank"]["scipy CSR SpMV (1 core)"]["edges_per_s_per_core"]]
            for n, v in res["pagerank"].items()])
    _table("Partitioning, k = 8", ["method", "replication factor", "edge balance", "vertex balance"],
           [[m, v["replication_factor"], v["edge_balance"], v["vertex_balance"]]
            for m, v in res["partitioning"].items()])
    return res


def bench_gnn_rewrite(out_dir: Path, quick: bool, seed: int = 0) -> dict:
    """GNN rewriter study: see :func:`models.graph.gnn.study`."""
    from .gnn import study

    res = study(quick=quick, seed=seed)
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
    return res


# ---- commands ------------------------------------------------------------------------------------
def _cmd_run(args) -> int:
    from .algorithms import ALGORITHMS, run
    from .engine import make_executor
    from .partition import METHODS

    if args.algorithm not in ALGORITHMS:
        _fail(f"unknown algorithm {args.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if args.method not in METHODS:
        _fail(f"unknown method {args.method!r}; choose one of {', '.join(METHODS)}")
    if args.partitions < 1 or args.workers < 1:
        _fail(f"--partitions and --workers must be >= 1, not {args.partitions} and {args.workers}")
    if not 1 <= args.scale <= 26:
        _fail(f"--scale must be in [1, 26], not {args.scale}")
    g = _load_graph(args.graph, args.scale, args.edge_factor, args.seed)
    kind = "dask" if args.scheduler else args.executor
    params = {"source": args.source} if args.algorithm in ("bfs", "sssp") else {}
    if args.source >= g.n:
        _fail(f"--source {args.source} is not a vertex of a {g.n}-vertex graph")
    try:
        r = run(g, args.algorithm, k=args.partitions, method=args.method,
                executor=make_executor(kind, args.workers, args.scheduler), **params)
    except OSError as e:
        _fail(f"cannot reach the Dask scheduler {args.scheduler!r}: {e}")
    out = _out_dir(args.output)
    path = _write_json(out / f"run_{args.algorithm}_{g.name}.json",
                       {"algorithm": args.algorithm, "graph": g.name, "n": g.n, "m": g.m, "steps": r.steps,
                        "seconds": r.seconds, "edges_per_s": r.edges_per_second, "executor": r.executor,
                        "partitioning": r.partitioning, "state": r.state})
    fin = np.isfinite(r.state)
    _table(f"{args.algorithm} on {g.name}",
           ["n", "m", "executor", "k", "RF", "steps", "s", "M edges/s", "finite", "sum"],
           [[g.n, g.m, r.executor, args.partitions, r.partitioning["replication_factor"], r.steps, r.seconds,
             r.edges_per_second / 1e6, int(fin.sum()), float(r.state[fin].sum())]])
    print(f"wrote {path}")
    return 0


def _cmd_partition(args) -> int:
    from .partition import METHODS, partition

    if args.partitions < 1:
        _fail(f"--partitions must be >= 1, not {args.partitions}")
    if not 1 <= args.scale <= 26:
        _fail(f"--scale must be in [1, 26], not {args.scale}")
    g = _load_graph(args.graph, args.scale, args.edge_factor, args.seed)
    res = {m: partition(g, args.partitions, m, seed=args.seed).summary() for m in METHODS}
    out = _out_dir(args.output)
    _write_json(out / f"partition_{g.name}.json", res)
    _bar_png(out / f"partition_{g.name}.png", list(METHODS),
             {"replication factor": [res[m]["replication_factor"] for m in METHODS],
              "edge balance": [res[m]["edge_balance"] for m in METHODS]}, "", f"{g.name}, k = {args.partitions}")
    _table(f"Partitioning {g.name}, k = {args.partitions}",
           ["method", "replication factor", "edge balance", "vertex balance"],
           [[m, v["replication_factor"], v["edge_balance"], v["vertex_balance"]] for m, v in res.items()])
    return 0


def _study(fn):
    def cmd(args) -> int:
        fn(_out_dir(args.output), args.quick)
        return 0
    return cmd


def _graph_args(s):
    s.add_argument("--graph", default="rmat", help="rmat or karate, lesmis, florentine, davis (default rmat)")
    s.add_argument("--scale", type=int, default=14, help="R-MAT scale: 2**scale vertices (default 14)")
    s.add_argument("--edge-factor", type=int, default=16, help="R-MAT edges per vertex (default 16)")
    s.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    s.add_argument("-k", "--partitions", type=int, default=4, help="partition count (default 4)")
    s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/graph)")


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``graph`` (run, partition, bench, gnn) to an argparse subparsers object."""
    p = subparsers.add_parser("graph", help="partitioned graph engine (GraM/PowerLyra) and GNN rewrites",
                              description="Partitioned graph engine, GraM algorithms and GNN algebraic rewrites.")
    sub = p.add_subparsers(dest="graph_cmd", metavar="{run,partition,bench,gnn}")
    sub.required = True
    s = sub.add_parser("run", help="run pagerank|bfs|cc|sssp on a graph",
                       description="Run one algorithm; JSON + table.")
    s.add_argument("algorithm", help="pagerank, bfs, cc or sssp")
    _graph_args(s)
    s.add_argument("--method", default="hybrid", help="edge-cut, vertex-cut or hybrid (default hybrid)")
    s.add_argument("--executor", default="serial", choices=["serial", "processes", "dask"])
    s.add_argument("--workers", type=int, default=2, help="processes or Dask workers (default 2)")
    s.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address (implies --executor dask)")
    s.add_argument("--source", type=int, default=0, help="BFS/SSSP source vertex (default 0)")
    s.set_defaults(func=_cmd_run)
    s = sub.add_parser("partition", help="replication factor and balance of the partitioners")
    _graph_args(s)
    s.set_defaults(func=_cmd_partition)
    for name, fn, hlp in (("bench", bench_graph_engine, "edges/s/core: engine vs scipy SpMV vs igraph"),
                          ("gnn", bench_gnn_rewrite, "GNN rewriter: speedup and peak memory vs untransformed")):
        s = sub.add_parser(name, help=hlp, description=hlp + "; writes JSON + PNG.")
        s.add_argument("--quick", action="store_true", help="the small setting (1 M edges / small graphs)")
        s.add_argument("-o", "--output", metavar="DIR", help="output folder (default build/graph)")
        s.set_defaults(func=_study(fn))
    return p


def main(argv=None) -> int:
    """Stand-alone entry: ``python -m models.graph.cli run pagerank --graph karate``."""
    ap = argparse.ArgumentParser(prog="hwcosim")
    sub = ap.add_subparsers(dest="cmd", required=True)
    register(sub)
    args = ap.parse_args(["graph", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
