"""A real SNAP graph through the engine, in the file's own vertex ids, against exact solves.

wiki-Vote (Wikipedia adminship votes until January 2008: 7,115 nodes, 103,689 edges; ids 3 .. 8,297)
from the Stanford Large Network Dataset Collection (Leskovec, Huttenlocher, Kleinberg, "Signed
Networks in Social Media", CHI 2010; "Predicting Positive and Negative Links in Online Social
Networks", WWW 2010), read from the data directory through ``dataset("snap-wiki-vote")`` (never
copied). Each engine result is checked against a solve done here, independently of the reader and
of the engine: the test parses the file itself, numbers the ids itself and solves with scipy
(PageRank: the linear system; BFS levels and weakly connected components: scipy.sparse.csgraph).
Also the small gap.txt case of issue 45 (ids 10, 20, 30, 40), through the library and the CLI.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.graph.algorithms import run
from hwcosim.models.systems.graph.compiled import CompiledExecutor
from hwcosim.models.systems.graph.io import read_graph
from scipy.sparse import csgraph
from scipy.sparse.linalg import spsolve

NODES, EDGES = 7115, 103689  # the README's (and SNAP's) counts
DAMPING = 0.85


@pytest.fixture(scope="module")
def wiki(shared_data):
    from hwcosim.models.data import dataset

    path = dataset("snap-wiki-vote", "wiki-Vote.txt")
    g = read_graph(path, progress=False)
    # the reference: the file parsed here, ids numbered here
    raw = np.loadtxt(path, dtype=np.int64, comments="#")
    ids, inv = np.unique(raw, return_inverse=True)
    inv = inv.reshape(raw.shape)
    a = sp.csr_matrix((np.ones(len(raw)), (inv[:, 0], inv[:, 1])), shape=(ids.size, ids.size))
    return g, ids, a


def test_wiki_vote_loads_with_its_own_ids(wiki):
    g, ids, _ = wiki
    assert (g.n, g.m) == (NODES, EDGES)
    assert np.array_equal(g.vertex_ids, ids) and (ids[0], ids[-1]) == (3, 8297)  # 1,183 ids below 8,297 unused
    assert np.array_equal(g.vertex_ids[g.index(ids)], ids)
    with pytest.raises(UsageError, match="source 0 is not a vertex of wiki-Vote.txt"):
        run(g, "bfs", source=0)


def _exact_pagerank(a: sp.csr_matrix, d: float) -> np.ndarray:
    """x = (1-d)/n + d (A^T D^-1 x + (dangling . x)/n): the rank-one dangling term only scales the
    solution of (I - d A^T D^-1) y = 1, and summing the equation gives sum(x) = 1."""
    n = a.shape[0]
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)
    m = (sp.identity(n, format="csc") - d * (a.T @ sp.diags(inv))).tocsc()
    y = spsolve(m, np.ones(n))
    return y / y.sum()


def test_wiki_vote_pagerank_matches_the_exact_solve(wiki):
    g, ids, a = wiki
    x = _exact_pagerank(a, DAMPING)
    r = run(g, "pagerank", k=4, executor=CompiledExecutor(2), damping=DAMPING, tol=1e-16, max_steps=2000)
    got = g.values_by_id(r.state)
    want = dict(zip(ids.tolist(), x.tolist()))
    assert got.keys() == want.keys()
    err = np.array([got[v] - want[v] for v in want])
    assert np.abs(err).sum() < 1e-10, np.abs(err).sum()
    assert abs(sum(got.values()) - 1) < 1e-12  # no mass on nonexistent vertices


def test_wiki_vote_bfs_and_components_match_csgraph(wiki):
    g, ids, a = wiki
    deg = np.asarray(a.sum(axis=1)).ravel()
    source = int(ids[np.argmax(deg)])  # a file id: the most active voter
    lev = csgraph.shortest_path(a, indices=int(np.searchsorted(ids, source)), unweighted=True)
    r = run(g, "bfs", k=4, executor=CompiledExecutor(2), source=source)
    got = g.values_by_id(r.state)
    assert got == dict(zip(ids.tolist(), lev.tolist()))  # exactly, inf where unreachable
    assert 0 < np.isinf(lev).sum() < NODES

    ncomp, lab = csgraph.connected_components(a, directed=True, connection="weak")
    least = np.full(ncomp, np.iinfo(np.int64).max)
    np.minimum.at(least, lab, ids)  # each component labelled by its least file id
    r = run(g, "cc", k=4, executor=CompiledExecutor(2))
    assert g.values_by_id(r.state) == dict(zip(ids.tolist(), least[lab].astype(float).tolist()))
    assert ncomp > 1


GAP = "10 20\n20 30\n30 40\n"


def test_gap_ids_library(tmp_path):
    p = tmp_path / "gap.txt"
    p.write_text(GAP)
    g = read_graph(p)
    assert g.n == 4 and g.vertex_ids.tolist() == [10, 20, 30, 40]
    assert g.values_by_id(run(g, "bfs", source=10).state) == {10: 0, 20: 1, 30: 2, 40: 3}
    assert g.values_by_id(run(g, "bfs", source=30).state) == {10: np.inf, 20: np.inf, 30: 0, 40: 1}
    assert g.values_by_id(run(g, "cc").state) == {10: 10, 20: 10, 30: 10, 40: 10}
    assert g.values_by_id(run(g, "sssp", source=20).state) == {10: np.inf, 20: 0, 30: 1, 40: 2}
    for bad in (0, 3, 11, 41):
        with pytest.raises(UsageError, match=f"source {bad} is not a vertex of gap.txt"):
            run(g, "bfs", source=bad)
    x = run(g, "pagerank", tol=1e-14, max_steps=1000).state
    assert abs(x.sum() - 1) < 1e-12 and g.n == x.size  # four vertices share the mass, nothing else


def test_gap_ids_cli(tmp_path, capsys):
    from hwcosim.cosim.cli import main

    p = tmp_path / "gap.txt"
    p.write_text(GAP)
    out = tmp_path / "o"
    assert main(["graph", "run", "bfs", "--graph", str(p), "--source", "10", "-k", "2", "-o", str(out)]) == 0
    r = json.loads((out / "run_bfs_gap.txt.json").read_text())
    assert r["n"] == 4 and r["state_keys"] == "vertex id"
    assert r["state"] == {"10": 0.0, "20": 1.0, "30": 2.0, "40": 3.0}
    assert main(["graph", "run", "cc", "--graph", str(p), "-k", "2", "-o", str(out)]) == 0
    assert json.loads((out / "run_cc_gap.txt.json").read_text())["state"] == {v: 10 for v in ("10", "20", "30", "40")}
    assert main(["graph", "run", "bfs", "--graph", str(p), "-o", str(out)]) == 0  # default: the least id, 10
    assert json.loads((out / "run_bfs_gap.txt.json").read_text())["state"]["10"] == 0.0
    capsys.readouterr()
    assert main(["graph", "run", "bfs", "--graph", str(p), "--source", "0", "-o", str(tmp_path / "o2")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "--source 0 is not a vertex of gap.txt" in err[0] and "10 .. 40" in err[0]
    assert not (tmp_path / "o2").exists()


def test_wiki_vote_through_the_cli(wiki, tmp_path):
    """``hwcosim graph run`` on the real file: results keyed by the file's ids, against the exact solves."""
    from hwcosim.cosim.cli import main
    from hwcosim.models.data import dataset

    g, ids, a = wiki
    path = str(dataset("snap-wiki-vote", "wiki-Vote.txt"))
    assert main(["graph", "run", "pagerank", "--graph", path, "-k", "2", "-o", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "run_pagerank_wiki-Vote.txt.json").read_text())
    assert r["n"] == NODES and r["m"] == EDGES
    x = dict(zip(map(str, ids.tolist()), _exact_pagerank(a, DAMPING).tolist()))
    assert r["state"].keys() == x.keys()
    # the CLI stops at the engine's default tol (L1 step < n tol): L1 error <= d/(1-d) n tol
    assert sum(abs(r["state"][v] - x[v]) for v in x) < DAMPING / (1 - DAMPING) * NODES * 1e-10
    source = int(ids[np.argmax(np.asarray(a.sum(axis=1)).ravel())])
    assert main(["graph", "run", "bfs", "--graph", path, "--source", str(source), "-o", str(tmp_path)]) == 0
    lev = csgraph.shortest_path(a, indices=int(np.searchsorted(ids, source)), unweighted=True)
    got = json.loads((tmp_path / "run_bfs_wiki-Vote.txt.json").read_text())["state"]
    assert got == dict(zip(map(str, ids.tolist()), lev.tolist()))
