"""GraM-style scale-out executor: resident shards on Dask worker processes, boundary messages only."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.graph import BFS, SSSP, ConnectedComponents, Engine, PageRank, RMATParams, partition, rmat
from hwcosim.models.systems.graph.engine import VertexProgram, make_executor

pytest.importorskip("distributed")
from hwcosim.models.systems.graph.gram_dask import GramDaskExecutor, build_shards, shard_cut  # noqa: E402


@pytest.fixture(scope="module")
def graphs():
    g = rmat(RMATParams(scale=9, edge_factor=8, seed=5))
    sym = g.symmetrised()
    return g, partition(g, 4, "hybrid"), sym, partition(sym, 4, "hybrid")


@pytest.fixture(scope="module")
def cluster():
    """One LocalCluster of 2 worker processes for the module (its start is the test's main cost)."""
    with GramDaskExecutor(workers=2) as ex:
        yield ex


def _cases(graphs):
    g, P, sym, Ps = graphs
    return [(g, P, PageRank(tol=1e-300, max_steps=12)), (g, P, BFS(source=int(np.argmax(g.out_degree())))),
            (g, P, SSSP(source=1)), (sym, Ps, ConnectedComponents())]


def test_equals_serial_on_two_and_one_worker_processes(graphs, cluster):
    one = GramDaskExecutor(workers=1, client=cluster.client)  # the first worker of the same cluster
    for ex in (cluster, one.open()):
        for gg, PP, prog in _cases(graphs):
            ref = Engine(gg, PP).run(prog)
            got = Engine(gg, PP, executor=ex).run(prog)
            assert got.steps == ref.steps, (ex.workers, prog)
            if isinstance(prog, PageRank):
                np.testing.assert_allclose(got.state, ref.state, rtol=1e-12, atol=0)
            else:
                assert np.array_equal(got.state, ref.state), (ex.workers, prog)  # BFS, SSSP, CC exactly
    one.close()
    assert cluster.client is not None and cluster.client.status == "running"  # a given client is left up


def test_converged_pagerank_and_bytes_are_the_cut(graphs, cluster):
    g, P, _, _ = graphs
    ref = Engine(g, P).run(PageRank())
    got = Engine(g, P, executor=cluster).run(PageRank())
    assert got.steps == ref.steps
    np.testing.assert_allclose(got.state, ref.state, rtol=1e-12, atol=0)
    cut = got.partitioning["cut"]
    # PageRank sends every boundary entry each superstep, densely: 8 bytes per ghost and per message slot
    assert {s["bytes"] for s in got.partitioning["supersteps"]} == {cut["dense_bytes_per_superstep"]}
    assert sum(cut["edges_per_worker"]) == g.m and sum(cut["vertices_per_worker"]) == g.n
    # a BFS frontier is sparse: its batches carry only the active entries
    bfs = Engine(g, P, executor=cluster).run(BFS(source=int(np.argmax(g.out_degree()))))
    assert min(s["bytes"] for s in bfs.partitioning["supersteps"]) < cut["dense_bytes_per_superstep"] / 4


def test_shards_and_cut_without_a_cluster(graphs):
    g, P, _, _ = graphs
    sh = build_shards(P, 2, g.out_degree())
    cut = shard_cut(sh)
    owned = np.sort(np.concatenate([s["owned"] for s in sh]))
    assert np.array_equal(owned, np.arange(g.n))  # every vertex has exactly one owner
    # a ghost is read by its reader and sent by its owner: both sides list the same number of entries
    assert cut["ghost_entries"] == sum(v.size for s in sh for v in s["send_val"].values())
    assert cut["message_slots"] == sum(v.size for s in sh for v in s["recv_msg"].values())
    one = shard_cut(build_shards(P, 1, g.out_degree()))
    assert one["ghost_entries"] == one["message_slots"] == 0  # one worker: nothing crosses
    with pytest.raises(UsageError, match="partitions"):
        build_shards(P, 5, g.out_degree())


def test_unknown_program_and_bad_workers(graphs):
    class Custom(VertexProgram):
        pass

    g, P, _, _ = graphs
    with pytest.raises(UsageError, match="pagerank, bfs, cc and sssp"):
        GramDaskExecutor(workers=1).run_fused(g, P, Custom(), 3)
    with pytest.raises(UsageError, match="worker count"):
        make_executor("gram", workers=0)
    assert isinstance(make_executor("gram", workers=2), GramDaskExecutor)


def test_quick_scaling_bench_writes_json_and_png(tmp_path, cluster, monkeypatch):
    """``hwcosim graph bench --quick``'s GraM part at tiny sizes, on the module's cluster."""
    import json

    from hwcosim.models.systems.graph.bench import bench_gram_dask

    monkeypatch.setenv("COLUMNS", "200")
    res = bench_gram_dask(tmp_path, True, strong_scale=9, weak_scale=8, iterations=3, client=cluster.client)
    on_disk = json.loads((tmp_path / "graph_gram_dask.json").read_text())
    assert (tmp_path / "graph_gram_dask.png").stat().st_size > 0
    assert on_disk["host_cores"] == res["host_cores"] and "load_avg_1m_start" in on_disk
    for mode, scales in (("strong", [9, 9]), ("weak", [8, 9])):
        pts = on_disk[mode]
        assert [p["workers"] for p in pts] == [1, 2] and [p["scale"] for p in pts] == scales
        assert pts[0]["bytes_per_superstep"] == 0  # one worker: nothing crosses
        two = pts[1]
        assert two["bytes_per_superstep"] == two["cut"]["dense_bytes_per_superstep"] > 0
        assert two["bytes_per_superstep"] < two["broadcast_executor_bytes_per_superstep"]
        assert all(p["allclose_to_serial_rtol_1e-12"] and p["max_rel_diff_vs_serial"] < 1e-12 for p in pts)
