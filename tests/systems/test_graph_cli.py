"""``hwcosim graph`` CLI: outputs, bad input -> one error line and exit 2."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from hwcosim.cosim.cli.graph import main


def test_run_writes_json(tmp_path, capsys):
    assert main(["run", "pagerank", "--graph", "karate", "-k", "3", "-o", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "run_pagerank_karate.json").read_text())
    ref = nx.pagerank(nx.karate_club_graph(), weight=None)
    assert r["state_keys"] == "vertex id" and sorted(map(int, r["state"])) == list(range(34))
    np.testing.assert_allclose([r["state"][str(i)] for i in range(34)], [ref[i] for i in range(34)], atol=1e-5)
    assert r["partitioning"]["k"] == 3


def test_run_processes(tmp_path):
    assert main(["run", "bfs", "--graph", "rmat", "--scale", "8", "--executor", "processes", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "run_bfs_rmat-s8-e16.json").exists()


def test_partition_png(tmp_path):
    assert main(["partition", "--graph", "rmat", "--scale", "10", "-k", "4", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "partition_rmat-s10-e16.png").read_bytes()[:4] == b"\x89PNG"
    res = json.loads((tmp_path / "partition_rmat-s10-e16.json").read_text())
    assert set(res) == {"edge-cut", "vertex-cut", "hybrid"}


@pytest.mark.parametrize("argv", [["run", "nope"], ["run", "bfs", "--graph", "cora"], ["run", "bfs", "-k", "0"],
                                  ["run", "bfs", "--method", "metis"],
                                  ["run", "sssp", "--graph", "karate", "--source", "99"],
                                  ["partition", "--scale", "40"]])
def test_bad_input(tmp_path, capsys, argv):
    code = main(argv + ["-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_output_is_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    code = main(["run", "bfs", "--graph", "karate", "-o", str(f)])
    assert code == 2
