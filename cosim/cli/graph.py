"""``hwcosim graph`` subcommands and the graph benchmarks.

- ``hwcosim graph run ALGO [--graph NAME|rmat] [--scale S] [-k K] [--method M]
  [--executor compiled|serial|processes|dask|dask-compiled|gram] [--threads T] [--scheduler ADDRESS]``:
  one algorithm, a table, JSON.
- ``hwcosim graph partition [--graph ...] [-k K]``: replication factor and balance of the three
  partitioners, JSON + PNG.
- ``hwcosim graph bench [--quick] [--gram-only] [--out-of-core-scales 22,23,24] [--out-of-core-only]``:
  edges/s/core of the engine vs scipy SpMV and igraph, and the GraM scale-out on 1, 2, 4 Dask worker
  processes (strong and weak scaling, bytes per superstep vs the cut), JSON + PNG; with
  ``--out-of-core-scales``, PageRank out of core at those R-MAT scales against the in-memory engine.
- ``hwcosim graph outofcore [--scale S] [--edge-factor E] [--seed N] [--store DIR] [--blocks B]
  [--iterations I] [--evict]``: PageRank with the graph on disk as memory-mapped CSR blocks
  (:mod:`hwcosim.models.systems.graph.outofcore`), JSON + ranks.
- ``hwcosim graph compiled-bench [--quick] [--scales 18,19,20] [--threads N] [--repeats R]``: the
  compiled executor vs scipy, GraphBLAS and igraph, strong scaling
  (:mod:`hwcosim.models.systems.graph.bench_compiled`).
- ``hwcosim graph gnn [--quick]``: GNN rewriter study (speedup, peak memory), JSON + PNG.
- ``hwcosim graph tux2 --algo mf|lr|lda --staleness S --workers W [--epochs E] [--batches B]
  [--executor processes|dask|threads|simulated]``: one TuX2 algorithm under SSP with bound S against BSP
  and the plain form, simulated and (default) on W worker processes, JSON + PNG.
- ``hwcosim graph tux2-bench [--quick]``: SSP s = 1, 2, 4 vs BSP for MF, LR, LDA, measured on worker
  processes (loss vs wall s) beside the simulated worker model; code lines.
- ``hwcosim graph tux2-gas [--quick]``: TuX2 MEGA under SSP vs MF and LR as gather-apply-scatter
  programs (the PowerGraph baseline), stragglers from the PAI per-worker mini-batch traces.
- ``hwcosim graph tux2-procs [--quick]``: SSP s = 0, 1, 2, 4 on 2 worker processes, loss vs wall s,
  repeated; and the workers' start-up and memory with the graph pickled vs in shared memory.

Outputs go under ``build/graph`` by default. The benchmarks and reports are in
:mod:`hwcosim.models.systems.graph.bench`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hwcosim.cosim.cli.util import add_options, entry, lazy, staged
from hwcosim.cosim.cli.util import fail as _fail
from hwcosim.cosim.cli.util import out_dir as _out_dir_base

__all__ = ["register", "main"]

_BENCH = "hwcosim.models.systems.graph.bench"


def _out_dir(arg: str | None) -> Path:
    return _out_dir_base(arg, "build/graph")


def _cmd_run(args) -> int:
    from hwcosim.models.systems.graph.algorithms import ALGORITHMS, run
    from hwcosim.models.systems.graph.bench import load_graph, run_report
    from hwcosim.models.systems.graph.engine import make_executor
    from hwcosim.models.systems.graph.partition import METHODS

    # the numeric options are checked against their ranges by the parser (cosim/cli/ranges.py)
    if args.algorithm not in ALGORITHMS:
        _fail(f"unknown algorithm {args.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if args.method not in METHODS:
        _fail(f"unknown method {args.method!r}; choose one of {', '.join(METHODS)}")
    g = load_graph(args.graph, args.scale, args.edge_factor, args.seed)
    if args.executor not in _EXECUTORS:
        _fail(f"unknown executor {args.executor!r}; choose one of {', '.join(_EXECUTORS)}")
    kind = "dask" if args.scheduler and args.executor not in ("dask", "dask-compiled", "gram") else args.executor
    params = {}
    if args.algorithm in ("bfs", "sssp"):  # a vertex id as the graph file numbers it; default the least
        params["source"] = int(g.vertex_ids.min()) if args.source is None else args.source
        g.index(params["source"], "--source")  # an id that is not a vertex: one line naming the graph's ids
    try:
        r = run(g, args.algorithm, k=args.partitions, method=args.method,
                executor=make_executor(kind, args.workers, args.scheduler, _threads(args.threads)), **params)
    except OSError as e:
        _fail(f"cannot reach the Dask scheduler {args.scheduler!r}: {e}")
    print(f"wrote {run_report(_out_dir(args.output), args.algorithm, g, r, args.partitions)}")
    return 0


def _cmd_partition(args) -> int:
    from hwcosim.models.systems.graph.bench import load_graph, partition_report

    g = load_graph(args.graph, args.scale, args.edge_factor, args.seed)
    partition_report(_out_dir(args.output), g, args.partitions, args.seed)
    return 0


_EXECUTORS = ("compiled", "serial", "processes", "dask", "dask-compiled", "gram")


def _threads(n: int | None) -> int | None:
    """``--threads`` (its range is checked by the parser), at most 4 x the cores."""
    if n is not None and n > 4 * (os.cpu_count() or 1):
        _fail(f"--threads must be <= {4 * (os.cpu_count() or 1)}, not {n}")
    return n


def _cmd_tux2(args) -> int:
    from hwcosim.models.systems.graph.bench import run_tux2

    path = run_tux2(_out_dir(args.output), algo=args.algo, staleness=args.staleness, workers=args.workers,
                    seed=args.seed, epochs=args.epochs, batches=args.batches, partitioner=args.partitioner,
                    full=args.full, executor="threads" if args.threads else args.executor)
    print(f"wrote {path} and {path.stem}.png")
    return 0


def _cmd_compiled_bench(args) -> int:
    from hwcosim.models.systems.graph.bench_compiled import bench_graph_compiled

    scales = tuple(int(x) for x in args.scales.split(",")) if args.scales else None  # each checked in 8..24
    staged(bench_graph_compiled, _out_dir(args.output), args.quick, scales=scales, threads=_threads(args.threads),
           repeats=args.repeats)
    return 0


def _cmd_outofcore(args) -> int:
    from hwcosim.models.systems.graph.bench import outofcore_report
    from hwcosim.models.systems.graph.outofcore import pagerank_rmat_out_of_core

    def go(out):
        r, info = pagerank_rmat_out_of_core(args.scale, args.edge_factor, args.seed, store=args.store,
                                            blocks=args.blocks, iterations=args.iterations, evict=args.evict)
        return outofcore_report(out, r, info, args.scale, args.edge_factor, args.seed)

    path = staged(go, _out_dir(args.output))
    print(f"wrote {_out_dir(args.output) / path.name}")
    return 0


def _study(fn):
    def cmd(args) -> int:
        staged(fn, _out_dir(args.output), args.quick)
        return 0
    return cmd


_OUT = ("-o --output", "output folder (default build/graph)", dict(metavar="DIR"))
_QUICK = ("--quick", "the small setting (1 M edges / small graphs)", True)


def _graph_args(s):
    add_options(s, [
        ("--graph", "rmat, karate, lesmis, florentine, davis, or a PATH: SNAP edge list (.txt/.tsv/.csv/.el, "
         "optionally .gz), Matrix Market .mtx or scipy .npz (default rmat)", dict(default="rmat")),
        ("--scale", "R-MAT scale: 2**scale vertices (default 14)", dict(type=int, default=14)),
        ("--edge-factor", "R-MAT edges per vertex (default 16)", dict(type=int, default=16)),
        ("--seed", "seed (default 0)", dict(type=int, default=0)),
        ("-k --partitions", "partition count (default 4)", dict(type=int, default=4)), _OUT])


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``graph`` (run, partition, bench, gnn, tux2, tux2-bench) to an argparse subparsers object."""
    p = subparsers.add_parser("graph", help="partitioned graph engine (GraM/PowerLyra) and GNN rewrites",
                              description="Partitioned graph engine, GraM algorithms, TuX2 (MEGA/SSP) ML algorithms "
                                          "and GNN algebraic rewrites.")
    sub = p.add_subparsers(dest="graph_cmd",
                           metavar="{run,partition,bench,outofcore,compiled-bench,gnn,tux2,tux2-bench}")
    sub.required = True
    s = sub.add_parser("run", help="run pagerank|bfs|cc|sssp on a graph",
                       description="Run one algorithm; JSON + table.")
    s.add_argument("algorithm", help="pagerank, bfs, cc or sssp")
    _graph_args(s)
    add_options(s, [
        ("--method", "edge-cut, vertex-cut or hybrid (default hybrid)", dict(default="hybrid")),
        ("--executor", "compiled (numba kernels on nogil threads, default), serial, processes, dask, "
         "dask-compiled (Dask tasks running the compiled partition kernel), or gram (GraM scale-out: partitions "
         "resident on Dask worker processes, only boundary messages move; needs -k >= --workers)",
         dict(default="compiled")),
        ("--threads", "threads of the compiled executor, 1 .. 4 x cores (default every core, at most one per "
         "524,288 edges)", dict(type=int, default=None)),
        ("--workers", "processes or Dask workers (default 2)", dict(type=int, default=2)),
        ("--scheduler", "Dask scheduler address (implies --executor dask unless gram or dask-compiled)",
         dict(metavar="ADDRESS")),
        ("--source", "BFS/SSSP source: a vertex id as the graph file numbers it (default the least id)",
         dict(type=int, default=None))])
    s.set_defaults(func=_cmd_run)
    s = sub.add_parser("partition", help="replication factor and balance of the partitioners")
    _graph_args(s)
    s.set_defaults(func=_cmd_partition)
    s = sub.add_parser("tux2", help="TuX2 MF/LR/LDA under SSP vs BSP (MEGA model, worker processes)",
                       description="Run one TuX2 algorithm under stale-synchronous parallel execution with "
                                   "bound S and under BSP (S = 0) with W workers: on the simulated cluster "
                                   "(convergence per simulated second) and, with --executor processes (the "
                                   "default on a multi-CPU host), on W real worker processes (convergence per "
                                   "measured wall second); JSON + PNG + table.")
    add_options(s, [
        ("--algo", "mf (synthetic ratings), lr (digits), lda (bars corpus)", dict(default="mf")),
        ("--staleness", "SSP staleness bound S >= 0; 0 is BSP (default 2)", dict(type=int, default=2)),
        ("--workers", "workers = graph partitions (default 4)", dict(type=int, default=4)),
        ("--epochs", "passes over the data (default per algorithm)", dict(type=int, default=None)),
        ("--batches", "mini-batches per epoch (default per algorithm)", dict(type=int, default=None)),
        ("--partitioner", "bicut (default), hybrid, vertex-cut, edge-cut", dict(default="bicut")),
        ("--seed", "seed of data, initial state and worker speeds (default 0)", dict(type=int, default=0)),
        ("--full", "the larger data setting of the benchmark", True),
        ("--executor", "measured run besides the simulation: processes (one OS process per worker, shared-memory "
         "masters; default with more than one CPU), dask (one task per worker of a local Dask cluster, masters and "
         "SSP gate in a Dask actor), threads (a model: modelled speeds slept for real) or simulated (the "
         "simulation only; default on one CPU)"),
        ("--threads", "the same as --executor threads", True), _OUT])
    s.set_defaults(func=_cmd_tux2)
    s = sub.add_parser("compiled-bench", help="compiled executor: edges/s/core vs scipy, GraphBLAS, igraph; scaling",
                       description="PageRank, BFS, CC on Graph500 R-MAT graphs: the compiled executor on 1..N "
                                   "threads vs scipy, python-graphblas (same threads) and igraph; JSON + PNG.")
    add_options(s, [("--quick", "scale 16 only", True),
                    ("--scales", "comma-separated R-MAT scales, 8..24 (default 18,19,20)"),
                    ("--threads", "largest thread count (default every core)", dict(type=int, default=None)),
                    ("--repeats", "runs per point, the best kept (default 3)", dict(type=int, default=None)), _OUT])
    s.set_defaults(func=_cmd_compiled_bench)
    hlp = "edges/s/core: engine vs scipy SpMV vs igraph; GraM scale-out on 1, 2, 4 Dask worker processes"
    s = sub.add_parser("bench", help=hlp, description=hlp + "; writes JSON + PNG.")
    add_options(s, [_QUICK, ("--gram-only", "only the GraM scale-out study (graph_gram_dask.json)", True),
                    ("--out-of-core-scales", "also PageRank out of core (graph_outofcore.json) at these "
                     "comma-separated R-MAT scales, 8..26, against the in-memory engine at the smallest "
                     "(--quick: scale 12 only)"),
                    ("--out-of-core-only", "only the out-of-core study (default scales 22,23,24)", True), _OUT])
    s.set_defaults(func=_cmd_bench)
    hlp = "PageRank out of core: an R-MAT graph on disk as memory-mapped CSR blocks, streamed one block at a time"
    s = sub.add_parser("outofcore", help=hlp, description=hlp + " (int32 ids, a JSON header with CRC-32s); "
                       "writes JSON + the ranks (.npy).")
    add_options(s, [
        ("--scale", "R-MAT scale: 2**scale vertices (default 14)", dict(type=int, default=14)),
        ("--edge-factor", "R-MAT edges per vertex (default 16)", dict(type=int, default=16)),
        ("--seed", "seed (default 0)", dict(type=int, default=0)),
        ("--store", "folder of the on-disk graph: reused if it holds one, else built there and kept (default a "
         "temporary folder, deleted)", dict(metavar="DIR")),
        ("--blocks", "CSR blocks (default one per 128 MiB of source ids)", dict(type=int, default=None)),
        ("--iterations", "exactly this many iterations (default: to convergence, tol 1e-10)",
         dict(type=int, default=None)),
        ("--evict", "drop every block from the page cache after use (each iteration reads the device)", True),
        _OUT])
    s.set_defaults(func=_cmd_outofcore)
    for name, fn, hlp in (("gnn", "bench_gnn_rewrite", "GNN rewriter: speedup and peak memory vs untransformed"),
                          ("tux2-bench", "bench_tux2", "TuX2: SSP s=1,2,4 vs BSP for MF, LR, LDA on worker processes "
                           "(measured) and the worker model (simulated); code lines"),
                          ("tux2-gas", "bench_tux2_gas", "TuX2 MEGA under SSP s=0,1,2,4 vs MF and LR as GAS programs "
                           "(PowerGraph model, BSP), PAI stragglers: time to a common loss; code lines")):
        s = sub.add_parser(name, help=hlp, description=hlp + "; writes JSON + PNG.")
        add_options(s, [_QUICK, _OUT])
        s.set_defaults(func=_study(lazy(f"{_BENCH}:{fn}")))
    hlp = "TuX2 on worker processes: SSP s=1,2,4 vs BSP for MF and LR, loss vs measured wall seconds"
    s = sub.add_parser("tux2-procs", help=hlp, description=hlp + " (load average recorded); writes JSON + PNG.")
    add_options(s, [("--quick", "the small setting (smaller MF data, fewer epochs, 2 repeats)", True),
                    ("--workers", "worker processes (default 2)", dict(type=int, default=2)),
                    ("--repeats", "runs per staleness (default 2 with --quick, else 5)", dict(type=int, default=None)),
                    _OUT])
    s.set_defaults(func=_cmd_tux2_procs)
    return p


def _cmd_bench(args) -> int:
    ooc = tuple(int(x) for x in args.out_of_core_scales.split(",")) if args.out_of_core_scales else None

    def both(out, quick):
        if not args.out_of_core_only:
            if not args.gram_only:
                lazy(f"{_BENCH}:bench_graph_engine")(out, quick)
            lazy(f"{_BENCH}:bench_gram_dask")(out, quick)
        if ooc or args.out_of_core_only:
            lazy(f"{_BENCH}:bench_graph_outofcore")(out, quick, scales=ooc)

    staged(both, _out_dir(args.output), args.quick)
    return 0


def _cmd_tux2_procs(args) -> int:
    staged(lazy(f"{_BENCH}:bench_tux2_procs"), _out_dir(args.output), args.quick, workers=args.workers,
           repeats=args.repeats)
    return 0


main = entry("graph")
