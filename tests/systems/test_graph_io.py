"""Users' graph files: SNAP edge lists (plain and gzip), Matrix Market, .npz; bad files refused with
the line number, and hwcosim graph run --graph PATH on them."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from hwcosim.cosim.cli import main
from hwcosim.models.systems.graph.io import GraphFormatError, read_graph

SNAP = "# Directed graph: toy\n# FromNodeId\tToNodeId\n0\t1\n1\t2\n2\t0\n2\t3\n"


def test_snap_plain_and_gzip(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text(SNAP)
    g = read_graph(p)
    assert g.n == 4 and g.m == 4 and g.src.tolist() == [0, 1, 2, 2] and g.dst.tolist() == [1, 2, 0, 3]
    gz = tmp_path / "g.txt.gz"
    gz.write_bytes(gzip.compress(SNAP.encode()))
    g2 = read_graph(gz)
    assert np.array_equal(g2.src, g.src) and np.array_equal(g2.dst, g.dst)


def test_weights_commas_and_the_files_ids_are_kept(tmp_path):
    p = tmp_path / "w.csv"
    p.write_text("% comment\n1000000,5,0.5\n5,77,2\n")
    g = read_graph(p)
    assert g.n == 3 and g.weight.tolist() == [0.5, 2.0]
    assert g.ids.tolist() == [5, 77, 1000000]  # internal index -> the file's id
    assert g.src.tolist() == [2, 0] and g.dst.tolist() == [0, 1]
    assert g.index(77) == 1 and g.index(np.array([1000000, 5])).tolist() == [2, 0]  # the inverse
    assert g.values_by_id([0.1, 0.2, 0.3]) == {5: 0.1, 77: 0.2, 1000000: 0.3}


def test_matrix_market_and_npz(tmp_path):
    a = sp.random(20, 20, density=0.2, random_state=1, format="coo")
    scipy.io.mmwrite(tmp_path / "a.mtx", a)
    g = read_graph(tmp_path / "a.mtx")
    assert g.n == 20 and g.m == a.nnz and np.allclose(np.sort(g.weight), np.sort(a.data))
    assert g.vertex_ids.tolist() == list(range(1, 21))  # Matrix Market's one-based rows are the ids
    assert g.vertex_ids[g.src].tolist() == (a.row + 1).tolist()
    sp.save_npz(tmp_path / "a.npz", a.tocsr())
    g = read_graph(tmp_path / "a.npz")
    assert g.m == a.nnz and g.ids is None and g.vertex_ids.tolist() == list(range(20))


def test_id_map_and_its_inverse():
    from hwcosim.models.errors import UsageError
    from hwcosim.models.systems.graph.graph import Graph

    g = Graph(3, [0, 1], [1, 2], ids=np.array([30, 10, 20]))  # unsorted ids are allowed
    assert g.index(10) == 1 and g.index(np.array([20, 30])).tolist() == [2, 0]
    assert g.symmetrised().ids.tolist() == [30, 10, 20]
    assert sorted(g.to_networkx().edges()) == [(10, 20), (30, 10)]
    for bad in (0, 15, 31, -1):
        with pytest.raises(UsageError, match=f"vertex {bad} is not a vertex of graph"):
            g.index(bad)
    with pytest.raises(UsageError, match="not a vertex id"):
        g.index(1.5)
    assert Graph(3, [0], [1], ids=np.arange(3)).ids is None  # 0 .. n-1 is the identity
    with pytest.raises(UsageError, match="distinct"):
        Graph(3, [0], [1], ids=[5, 6, 5])
    with pytest.raises(UsageError, match="one per vertex"):
        Graph(3, [0], [1], ids=[5, 6])


@pytest.mark.parametrize("text,where", [
    ("0 1\n1 x\n", ":2: a non-integer vertex id"),
    ("0 1\n-3 2\n", ":2: a negative vertex id"),
    ("0 1\n1\n", ":2: 1 columns"),
    ("0 1 1.0\n1 2\n", ":2: a different number of columns"),
    ("0 1 nan\n", ":1: a non-finite weight"),
    ("# only comments\n", "holds no edges"),
])
def test_bad_edge_lists_name_the_line(tmp_path, text, where):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(GraphFormatError, match=where.replace("(", r"\(")):
        read_graph(p)


def test_truncated_gzip_and_short_mtx(tmp_path):
    gz = tmp_path / "t.txt.gz"
    gz.write_bytes(gzip.compress((SNAP * 200).encode())[:-30])
    with pytest.raises(GraphFormatError, match="truncated or corrupt gzip"):
        read_graph(gz)
    m = tmp_path / "s.mtx"
    m.write_text("%%MatrixMarket matrix coordinate pattern general\n4 4 5\n1 2\n2 3\n")
    with pytest.raises(GraphFormatError, match="promises 5 entries, the file holds 2"):
        read_graph(m)


def test_cli_runs_on_a_users_graph(tmp_path, capsys):
    p = tmp_path / "g.txt"
    p.write_text(SNAP)
    out = tmp_path / "o"
    assert main(["graph", "run", "pagerank", "--graph", str(p), "-k", "2", "-o", str(out)]) == 0
    files = list(out.glob("*.json"))
    assert files and json.loads(files[0].read_text())
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1\n1 -2\n")
    assert main(["graph", "run", "pagerank", "--graph", str(bad), "-o", str(tmp_path / "o2")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "bad.txt:2" in err[0]
    assert not (tmp_path / "o2").exists()
