"""Partitioned graph engine: partitioners, executors, GraM algorithms vs networkx."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hwcosim.models.systems.graph import (
    BFS,
    METHODS,
    SSSP,
    ConnectedComponents,
    DaskExecutor,
    Engine,
    Graph,
    PageRank,
    ProcessExecutor,
    RMATParams,
    load_real,
    pagerank_scipy,
    partition,
    rmat,
    run,
)

REAL = ["karate", "lesmis", "florentine", "davis"]


@pytest.fixture(scope="module")
def small_rmat():
    return rmat(RMATParams(scale=10, edge_factor=8, seed=3))


def test_init():
    g = Graph(3, [0, 1], [1, 2])
    assert g.m == 2 and g.weight.tolist() == [1.0, 1.0]
    assert g.out_degree().tolist() == [1, 1, 0]


def test_wrong_graph():
    with pytest.raises(ValueError, match="Edge endpoints"):
        Graph(2, [0], [5])
    with pytest.raises(ValueError, match="Vertex count"):
        Graph(0, [], [])
    with pytest.raises(ValueError, match="Unknown graph"):
        load_real("nope")
    with pytest.raises(ValueError, match="scale"):
        RMATParams(scale=0)
    with pytest.raises(ValueError, match="damping"):
        PageRank(damping=1.5)


def test_real_graphs_match_networkx_sizes():
    ref = {"karate": nx.karate_club_graph(), "lesmis": nx.les_miserables_graph(),
           "florentine": nx.florentine_families_graph(), "davis": nx.davis_southern_women_graph()}
    for name, h in ref.items():
        g = load_real(name)
        assert g.n == h.number_of_nodes() and g.m == 2 * h.number_of_edges()


def test_rmat_degree_skew_and_determinism():
    p = RMATParams(scale=12, edge_factor=16, seed=7)
    a, b = rmat(p), rmat(p)
    assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
    assert a.m == 16 * 4096
    # Graph500 skew: the top 1% of vertices by out-degree hold far more than 1% of the edges
    deg = np.sort(a.out_degree())[::-1]
    assert deg[:41].sum() / a.m > 0.15
    # quadrant probabilities: the top bit of an unpermuted src is 1 with probability c + d = 0.24
    u = rmat(p, permute=False)
    frac = ((u.src >> 11) & 1).mean()
    assert abs(frac - 0.24) < 0.01


@pytest.mark.parametrize("method", METHODS)
def test_partition_covers_every_edge_once(small_rmat, method):
    P = partition(small_rmat, 5, method)
    edges = np.concatenate([p.src * small_rmat.n + p.dst for p in P.parts])
    assert np.array_equal(np.sort(edges), np.sort(small_rmat.src * small_rmat.n + small_rmat.dst))
    assert 1.0 <= P.replication_factor <= 5.0
    assert P.edge_balance >= 1.0
    # replication factor by hand: vertices present per partition / n
    present = sum(np.union1d(np.union1d(p.src, p.dst), np.flatnonzero(P.master == p.pid)).size for p in P.parts)
    assert P.replication_factor == pytest.approx(present / small_rmat.n)


def test_hybrid_cut_replicates_less_than_edge_cut_on_power_law():
    g = rmat(RMATParams(scale=13, edge_factor=16, seed=1))
    rf = {m: partition(g, 16, m, threshold=64).replication_factor for m in METHODS}
    assert rf["hybrid"] < rf["edge-cut"] and rf["hybrid"] < rf["vertex-cut"]


def test_partition_by_hand():
    # a star into vertex 0 of in-degree 4 plus an edge 1->2; k=1 keeps everything together
    g = Graph(5, [1, 2, 3, 4, 1], [0, 0, 0, 0, 2])
    P = partition(g, 1, "edge-cut")
    assert P.replication_factor == 1.0 and P.parts[0].dst_unique.tolist() == [0, 2]
    assert P.parts[0].seg_start.tolist() == [0, 4]
    with pytest.raises(ValueError, match="Partition count"):
        partition(g, 0)
    with pytest.raises(ValueError, match="Unknown partitioning"):
        partition(g, 2, "metis")


def _nx_vec(d, n, fill=np.inf):
    v = np.full(n, fill)
    for i, x in d.items():
        v[i] = x
    return v


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("method", METHODS)
def test_real_graphs_vs_networkx(name, method):
    g = load_real(name)
    h = g.to_networkx()
    pr = run(g, "pagerank", k=3, method=method, tol=1e-14, max_steps=2000).state
    ref = nx.pagerank(h, weight=None, tol=1e-14, max_iter=5000)
    np.testing.assert_allclose(pr, _nx_vec(ref, g.n), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(run(g, "bfs", k=3, method=method, source=0).state,
                                  _nx_vec(nx.single_source_shortest_path_length(h, 0), g.n))
    np.testing.assert_allclose(run(g, "sssp", k=3, method=method, source=0).state,
                               _nx_vec(nx.single_source_dijkstra_path_length(h, 0), g.n), rtol=1e-12)
    cc = run(g, "cc", k=3, method=method).state
    for comp in nx.connected_components(h.to_undirected()):
        assert set(cc[list(comp)].tolist()) == {float(min(comp))}


def test_rmat_vs_networkx(small_rmat):
    g = small_rmat
    mh = nx.MultiDiGraph()
    mh.add_nodes_from(range(g.n))
    mh.add_edges_from(zip(g.src.tolist(), g.dst.tolist()))
    pr = run(g, "pagerank", k=4, tol=1e-13, max_steps=2000).state
    np.testing.assert_allclose(pr, _nx_vec(nx.pagerank(mh, weight=None, tol=1e-13, max_iter=5000), g.n),
                               atol=1e-11)
    h = g.to_networkx()
    src = int(np.argmax(g.out_degree()))
    np.testing.assert_array_equal(run(g, "bfs", k=4, source=src).state,
                                  _nx_vec(nx.single_source_shortest_path_length(h, src), g.n))
    np.testing.assert_allclose(run(g, "sssp", k=4, source=src, method="vertex-cut").state,
                               _nx_vec(nx.single_source_dijkstra_path_length(h, src), g.n), rtol=1e-12)
    cc = run(g, "cc", k=4, method="edge-cut").state
    comps = list(nx.weakly_connected_components(h))
    assert len(np.unique(cc)) == len(comps)
    for comp in comps:
        assert set(cc[list(comp)].tolist()) == {float(min(comp))}


def test_pagerank_matches_scipy_spmv(small_rmat):
    r = run(small_rmat, "pagerank", k=3, tol=1e-300, max_steps=15)
    x, _ = pagerank_scipy(small_rmat, 15)
    assert r.steps == 15
    np.testing.assert_allclose(r.state, x, rtol=1e-12)


def test_multiprocess_and_dask_identical_to_serial(small_rmat):
    P = partition(small_rmat, 4, "hybrid")
    sym = small_rmat.symmetrised()
    Ps = partition(sym, 4, "hybrid")
    progs = [(P, PageRank(tol=1e-300, max_steps=8)), (P, BFS(source=1)), (P, SSSP(source=1)),
             (Ps, ConnectedComponents())]
    ser = [Engine(small_rmat if p is P else sym, p).run(prog).state for p, prog in progs]
    for make in (lambda: ProcessExecutor(2), lambda: DaskExecutor(workers=2, processes=False)):
        for (p, prog), ref in zip(progs, ser):
            got = Engine(small_rmat if p is P else sym, p, executor=make()).run(prog)
            assert np.array_equal(got.state, ref), (got.executor, prog)
    # and partitioning only reorders float sums: k=1 agrees to rounding
    one = Engine(small_rmat, k=1).run(PageRank(tol=1e-300, max_steps=8)).state
    np.testing.assert_allclose(one, ser[0], rtol=1e-12)
