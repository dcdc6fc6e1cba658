"""Out-of-core PageRank: the streamed R-MAT edges equal the in-memory generator's, the CSR block store
gives the serial engine's ranks, damaged block files and over-budget scales are refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.graph.algorithms import run
from hwcosim.models.systems.graph.graph import RMATParams, rmat
from hwcosim.models.systems.graph.outofcore import (
    BlockStore,
    build_blocks,
    build_rmat_store,
    check_ooc_budget,
    pagerank_out_of_core,
    pagerank_rmat_out_of_core,
    write_rmat_edges,
)


@pytest.fixture(scope="module")
def store12(tmp_path_factory):
    p = RMATParams(scale=12, edge_factor=16, seed=5)
    root = tmp_path_factory.mktemp("ooc")
    info = build_rmat_store(p, root / "s", blocks=3)
    return p, info["blocks_dir"]


def test_edge_stream_equals_the_in_memory_generator(tmp_path):
    p = RMATParams(scale=9, edge_factor=8, seed=11)
    e = write_rmat_edges(p, tmp_path / "e", chunk=1000)  # several chunks, as rmat(chunk=1000) draws them
    g = rmat(p, chunk=1000)
    meta = json.loads((e / "edges.json").read_text())
    assert meta["dtype"] == "int32" and meta["m"] == g.m
    assert np.array_equal(np.fromfile(e / "src.bin", np.int32), g.src)
    assert np.array_equal(np.fromfile(e / "dst.bin", np.int32), g.dst)


def test_pagerank_equals_the_serial_engine(store12):
    p, blocks = store12
    st = BlockStore(blocks)
    assert len(st.blocks) == 3 and st.header["id_dtype"] == "int32"
    assert all(b[3]["dtype"] == "int32" and b[4]["dtype"] == "int32" for b in st.blocks)
    g = rmat(p)
    ref = run(g, "pagerank", k=2)
    r = pagerank_out_of_core(st)
    assert r.steps == ref.steps
    assert np.abs(r.state - ref.state).max() <= 1e-12
    assert r.bytes_per_iteration == st.block_bytes() == sum(
        (b[1] - b[0] + 1) * 4 + b[2] * 4 for b in st.blocks)  # int32 offsets and ids, read once per iteration
    fixed = pagerank_out_of_core(st, iterations=4, evict=True, damping=0.9)
    ref4 = run(g, "pagerank", damping=0.9, tol=1e-300, max_steps=4)
    assert fixed.steps == 4 and np.abs(fixed.state - ref4.state).max() <= 1e-12


def test_a_truncated_or_corrupt_block_file_is_refused(store12, tmp_path):
    import shutil

    _, blocks = store12
    bad = tmp_path / "bad"
    shutil.copytree(blocks, bad)
    f = bad / "block1.src.npy"
    data = f.read_bytes()
    f.write_bytes(data[:-4])
    with pytest.raises(UsageError, match="block1.src.npy.*truncated") as e:
        BlockStore(bad)
    assert "\n" not in str(e.value)
    flipped = bytearray(data)
    flipped[-5] ^= 0xFF  # same size, one id changed
    f.write_bytes(bytes(flipped))
    with pytest.raises(UsageError, match="block1.src.npy.*CRC-32"):
        pagerank_out_of_core(bad)
    (bad / "blocks.json").write_text("{")
    with pytest.raises(UsageError, match="blocks.json"):
        BlockStore(bad)


def test_the_budget_refuses_a_scale_whose_vectors_do_not_fit(monkeypatch, tmp_path):
    monkeypatch.setenv("HWCOSIM_MEM_BUDGET", "2M")
    with pytest.raises(UsageError, match="memory budget") as e:
        pagerank_rmat_out_of_core(16, store=tmp_path / "s")
    assert "\n" not in str(e.value) and not (tmp_path / "s").exists()
    with pytest.raises(UsageError, match="memory budget"):
        check_ooc_budget(1 << 16, 1 << 10, "scale 16")


def test_store_reuse_and_staging(tmp_path):
    r1, info = pagerank_rmat_out_of_core(8, 4, 1, store=tmp_path / "s", blocks=2)
    assert info["built"] and info["blocks"] == 2 and not (tmp_path / "s" / "edges").exists()
    r2, info2 = pagerank_rmat_out_of_core(8, 4, 1, store=tmp_path / "s")
    assert not info2["built"] and np.array_equal(r1.state, r2.state)
    assert [p.name for p in tmp_path.iterdir()] == ["s"]  # no staging folder left behind
    with pytest.raises(UsageError, match="already exists"):
        write_rmat_edges(RMATParams(scale=8), tmp_path / "s")
    with pytest.raises(UsageError, match="edges.json"):
        build_blocks(tmp_path / "none", tmp_path / "b")


@pytest.mark.slow
def test_bench_quick_runs_small_scale_in_child_processes(tmp_path):
    from hwcosim.models.systems.graph.bench import bench_graph_outofcore

    res = bench_graph_outofcore(tmp_path, True, scales=(24,))  # --quick ignores the large scales
    assert [p["scale"] for p in res["scales"]] == [12] and res["in_memory"]["scale"] == 12
    pt = res["scales"][0]
    assert pt["max_abs_diff_vs_in_memory"] <= 1e-12
    assert pt["device"]["bytes_per_iteration"] == pt["page_cache"]["bytes_per_iteration"] > 0
    assert (tmp_path / "graph_outofcore.json").exists() and (tmp_path / "graph_outofcore.png").exists()
