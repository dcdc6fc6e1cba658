"""Compiled executor: the same results as the serial engine and scipy, for any thread count."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hwcosim.cosim.cli.graph import main
from hwcosim.models.systems.graph import (
    BFS,
    SSSP,
    ConnectedComponents,
    Engine,
    Graph,
    PageRank,
    RMATParams,
    pagerank_scipy,
    partition,
    rmat,
)
from hwcosim.models.systems.graph.compiled import CompiledExecutor, build_plan, compiled_partition_step
from hwcosim.models.systems.graph.engine import DaskExecutor, partition_step
from scipy.sparse.csgraph import connected_components


@pytest.fixture(scope="module")
def small_rmat():
    return rmat(RMATParams(scale=10, edge_factor=8, seed=5))


def _path(n):
    return Graph(n, np.arange(n - 1), np.arange(1, n))


def _star(n):  # hub 0 -> leaves, and every leaf -> hub
    leaves = np.arange(1, n)
    return Graph(n, np.r_[np.zeros(n - 1, np.int64), leaves], np.r_[leaves, np.zeros(n - 1, np.int64)])


def _disconnected():
    # two triangles, a 2-path, an isolated vertex (7) and a self loop on 9
    src = [0, 1, 2, 3, 4, 5, 6, 9, 10]
    dst = [1, 2, 0, 4, 5, 3, 8, 9, 11]
    return Graph(12, src, dst)


GRAPHS = {"path": lambda: _path(9), "star": lambda: _star(7), "disconnected": _disconnected}
SETUPS = [("edge-cut", "range"), ("edge-cut", "hash"), ("hybrid", "hash"), ("vertex-cut", "hash")]


def _progs(g):
    src = int(np.argmax(g.out_degree()))
    return [PageRank(tol=1e-300, max_steps=12), BFS(source=src), SSSP(source=src)]


def _check(got, ref, prog):
    if isinstance(prog, PageRank):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)
    else:
        assert np.array_equal(got, ref), (prog, got, ref)


@pytest.mark.parametrize("method,masters", SETUPS)
def test_rmat_equals_serial_engine_any_threads(small_rmat, method, masters):
    g, sym = small_rmat, small_rmat.symmetrised()
    P = partition(g, 4, method, masters=masters)
    Ps = partition(sym, 4, method, masters=masters)
    cases = [(g, P, p) for p in _progs(g)] + [(sym, Ps, ConnectedComponents())]
    for gg, PP, prog in cases:
        ref = Engine(gg, PP).run(prog)
        r1 = Engine(gg, PP, executor=CompiledExecutor(1)).run(prog)
        r2 = Engine(gg, PP, executor=CompiledExecutor(2)).run(prog)
        _check(r1.state, ref.state, prog)
        assert np.array_equal(r1.state, r2.state), prog  # bit-identical over thread counts
        assert r1.steps == r2.steps == ref.steps
        assert r1.executor.startswith("compiled")


def test_rmat_equals_scipy(small_rmat):
    g = small_rmat
    P = partition(g, 3, "edge-cut", masters="range")
    r = Engine(g, P, executor=CompiledExecutor(2)).run(PageRank(tol=1e-300, max_steps=15))
    x, _ = pagerank_scipy(g, 15)
    np.testing.assert_allclose(r.state, x, rtol=1e-12, atol=0)
    sym = g.symmetrised()
    cc = Engine(sym, partition(sym, 3, "hybrid"), executor=CompiledExecutor(2)).run(ConnectedComponents()).state
    _, lab = connected_components(sym.adjacency(), directed=False)
    least = {}
    for v, c in enumerate(lab.tolist()):
        least.setdefault(c, v)
    assert np.array_equal(cc, np.array([least[c] for c in lab.tolist()], float))


@pytest.mark.parametrize("name", GRAPHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_small_graphs(name, threads):
    g = GRAPHS[name]()
    sym = g.symmetrised()
    for method, masters in SETUPS:
        for k in (1, 3):
            P, Ps = partition(g, k, method, masters=masters), partition(sym, k, method, masters=masters)
            for gg, PP, prog in [(g, P, p) for p in _progs(g)] + [(sym, Ps, ConnectedComponents())]:
                ref = Engine(gg, PP).run(prog).state
                _check(Engine(gg, PP, executor=CompiledExecutor(threads)).run(prog).state, ref, prog)


def test_known_answers():
    g = _path(6)
    lev = Engine(g, k=2, executor=CompiledExecutor(2)).run(BFS(source=0)).state
    assert lev.tolist() == [0, 1, 2, 3, 4, 5]
    lev = Engine(g, k=2, executor=CompiledExecutor(2)).run(BFS(source=3)).state
    assert lev.tolist() == [np.inf, np.inf, np.inf, 0, 1, 2]
    d = _disconnected().symmetrised()
    cc = Engine(d, k=3, executor=CompiledExecutor(2)).run(ConnectedComponents()).state
    assert cc.tolist() == [0, 0, 0, 3, 3, 3, 6, 7, 6, 9, 10, 10]


def test_more_threads_than_partitions_and_plan_layout(small_rmat):
    P = partition(small_rmat, 3, "hybrid", threshold=8)
    plan = build_plan(P)
    assert build_plan(P) is plan  # cached
    assert plan.slots > 0  # the hybrid cut has mirrors: remote segments with buffer slots
    assert sum(int(p[-1]) for p in plan.seg_ptr) == small_rmat.m
    assert sum(o.size for o in plan.owned) == small_rmat.n
    ref = Engine(small_rmat, P).run(BFS(source=1)).state
    assert np.array_equal(Engine(small_rmat, P, executor=CompiledExecutor(8)).run(BFS(source=1)).state, ref)


def test_pagerank_gather_ids_put_hubs_first_and_keep_every_edge(small_rmat):
    P = partition(small_rmat, 3, "edge-cut")
    plan = build_plan(P)
    src_g, gid = plan.gather()
    assert plan.gather()[1] is gid  # built once
    n = small_rmat.n
    assert np.array_equal(np.sort(gid), np.arange(n))  # a permutation of the vertices
    deg = small_rmat.out_degree()
    by_gid = np.empty(n, np.int64)
    by_gid[gid] = deg
    assert np.all(np.diff(by_gid) <= 0)  # gather ids in decreasing out-degree
    for p in range(plan.k):
        assert np.array_equal(src_g[p], gid[plan.src[p]])
    # the ranks do not depend on where the values are gathered from: same as the generic kernel
    ref = Engine(small_rmat, P).run(PageRank(tol=1e-300, max_steps=12)).state
    got = Engine(small_rmat, P, executor=CompiledExecutor(2)).run(PageRank(tol=1e-300, max_steps=12)).state
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


def test_generic_kernel_matches_partition_step(small_rmat):
    P = partition(small_rmat, 3, "vertex-cut")
    v = np.random.default_rng(0).random(small_rmat.n)
    v[::3] = np.inf
    for op in ("copy", "add_weight", "add_one", "mul_weight"):
        for comb in ("sum", "min"):
            for part in P.parts:
                a, b = compiled_partition_step(part, v, op, comb), partition_step(part, v, op, comb)
                if comb == "min":
                    assert np.array_equal(a, b)
                else:
                    np.testing.assert_allclose(a, b, rtol=1e-12)
    with pytest.raises(ValueError, match="edge operators"):
        compiled_partition_step(P.parts[0], v, lambda x, w: x, "sum")


def test_dask_runs_the_compiled_kernel(small_rmat):
    P = partition(small_rmat, 3, "hybrid")
    ref = Engine(small_rmat, P).run(BFS(source=2)).state
    got = Engine(small_rmat, P, executor=DaskExecutor(workers=2, processes=False, kernel="compiled")).run(BFS(source=2))
    assert np.array_equal(got.state, ref)


def test_bad_threads():
    for bad in (0, -1, 2.5, 10**6):
        with pytest.raises(ValueError, match="thread count"):
            CompiledExecutor(bad)
    with pytest.raises(ValueError, match="master placement"):
        partition(_path(4), 2, masters="metis")


@pytest.mark.parametrize("argv", [["run", "bfs", "--threads", "0"], ["run", "bfs", "--threads", "two"],
                                  ["run", "bfs", "--threads", "100000"], ["run", "bfs", "--executor", "gpu"],
                                  ["compiled-bench", "--threads", "0"], ["compiled-bench", "--scales", "30"]])
def test_cli_bad_threads_exit_2(tmp_path, capsys, argv):
    assert main(argv + ["--graph", "karate"] * (argv[0] == "run") + ["-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_cli_threads(tmp_path):
    import json

    for t in ("1", "2"):
        assert main(["run", "cc", "--graph", "rmat", "--scale", "9", "--threads", t, "-o", str(tmp_path / t)]) == 0
    a, b = (json.loads((tmp_path / t / "run_cc_rmat-s9-e16.json").read_text()) for t in ("1", "2"))
    assert a["state"] == b["state"] and a["executor"] == "compiled (1 threads)" and b["executor"].startswith("compiled")


@pytest.mark.parametrize("method,masters", [("edge-cut", "range"), ("hybrid", "hash")])
def test_push_pull_auto_identical(small_rmat, method, masters):
    g, sym = small_rmat, small_rmat.symmetrised()
    src = int(np.argmax(g.out_degree()))
    for gg, prog in ((g, BFS(source=src)), (g, BFS(source=7)), (sym, ConnectedComponents())):
        P = partition(gg, 3, method, masters=masters)
        ref = Engine(gg, P).run(prog)
        runs = {d: Engine(gg, P, executor=CompiledExecutor(2, direction=d)).run(prog) for d in ("auto", "pull", "push")}
        for d, r in runs.items():
            assert np.array_equal(r.state, ref.state) and r.steps == ref.steps, (d, prog)
        assert runs["push"].partitioning["push_steps"] == ref.steps
        assert runs["pull"].partitioning["push_steps"] == 0
    with pytest.raises(ValueError, match="direction"):
        CompiledExecutor(1, direction="sideways")


def test_compiled_bench_tiny(tmp_path):
    import json

    from hwcosim.models.systems.graph.bench_compiled import bench_graph_compiled

    res = bench_graph_compiled(tmp_path, True, scales=(8,), threads=2, repeats=1)
    on_disk = json.loads((tmp_path / "graph_compiled.json").read_text())
    assert (tmp_path / "graph_compiled.png").read_bytes()[:4] == b"\x89PNG"
    pt = on_disk["sizes"][0]
    assert pt["graph"]["m"] == 16 * 256 and len(pt["load_avg_1m"]) == 2 and on_disk["threads"] == [1, 2]
    for alg, a in pt["algorithms"].items():
        assert a["ours_identical_over_thread_counts"], alg
        assert set(a["ours"]) == {"1", "2"} and a["scipy"]["edges_per_s"] > 0
        if alg != "pagerank":
            assert a["ours_equals_scipy"], alg
        for v in a["graphblas"].values():
            assert v.get("equals_ours", True) and v.get("max_rel_diff_vs_ours", 0.0) < 1e-12
    assert pt["algorithms"]["pagerank"]["max_rel_diff_ours_vs_scipy"] < 1e-12
    # scipy on the degree-ordered relabelling: the same ranks, permuted
    assert pt["algorithms"]["pagerank"]["scipy_degree_ordered"]["max_rel_diff_vs_scipy"] < 1e-12
    assert res["summary"]["pagerank"]["ours_1t_vs_scipy_degree_ordered"] > 0
    assert all(r[a]["equals_serial_engine"] for r in on_disk["real_graphs"]["graphs"].values()
               for a in ("pagerank", "bfs", "cc"))
    assert "parallel_efficiency_2t" in res["summary"]["bfs"]


def test_default_thread_count_follows_graph_size():
    """The default (None) uses at most one thread per AUTO_EDGES_PER_THREAD edges; explicit counts stay."""
    from hwcosim.models.systems.graph import compiled

    small = rmat(RMATParams(scale=8, edge_factor=8, seed=1))
    assert small.m < compiled.AUTO_EDGES_PER_THREAD
    r = Engine(small, k=4, executor=CompiledExecutor()).run(PageRank(max_steps=3))
    assert r.executor == "compiled (1 threads)"
    r2 = Engine(small, k=4, executor=CompiledExecutor(2)).run(PageRank(max_steps=3))
    assert r2.executor == "compiled (2 threads)" and np.array_equal(r.state, r2.state)
    old = compiled.AUTO_EDGES_PER_THREAD
    try:  # the same graph counts as large when the threshold is below its edge count
        compiled.AUTO_EDGES_PER_THREAD = max(1, small.m // 2)
        want = min(os.cpu_count() or 1, 2)
        assert Engine(small, k=4, executor=CompiledExecutor()).run(PageRank(max_steps=3)).executor == \
            f"compiled ({want} threads)"
    finally:
        compiled.AUTO_EDGES_PER_THREAD = old


def test_shipped_debian_graph_loads_as_its_header_says():
    from hwcosim.models.systems.graph.graph import LARGE_REAL_GRAPHS
    from hwcosim.models.systems.graph.io import read_graph

    g = read_graph(LARGE_REAL_GRAPHS["debian-deps"], progress=False)
    # the header's 264,122 edges; its 63,436 packages (ids 0 .. 63,435) include 4,022 with no edge,
    # which an edge list cannot hold: the vertices are the 59,414 distinct ids of the edges
    assert (g.n, g.m) == (59414, 264122)
    assert g.vertex_ids[0] == 0 and g.vertex_ids[-1] == 63435
    assert not np.any(g.src == g.dst)
    r = Engine(g, k=4, executor=CompiledExecutor()).run(PageRank(tol=1e-300, max_steps=5))
    x, _ = pagerank_scipy(g, 5)
    np.testing.assert_allclose(r.state, x, rtol=1e-12)
