"""CoGNN: numpy GNN training, memory cost functions vs tracemalloc, grouping policies, simulation."""

import numpy as np
import pytest
from hwcosim.cosim.cli.jobs import main as cli_main
from hwcosim.models.systems.jobs.cognn import (
    MODELS,
    POLICIES,
    GNNTask,
    estimate_memory,
    group_tasks,
    make_graph,
    measure_memory,
    offline_graphs,
    simulate,
    task_stream,
    train,
)


@pytest.fixture(scope="module")
def graphs():
    return offline_graphs()


def _t(tid, mem, solo=1.0, arrival=0.0, util=0.5):
    return GNNTask(tid, "gcn", "g", 16, 2, arrival, mem, solo, util)


def test_wrong_params():
    with pytest.raises(ValueError, match="model"):
        GNNTask(0, "mlp", "g", 16, 2, 0.0, 1, 1.0, 0.5)
    with pytest.raises(ValueError, match="policy"):
        group_tasks([], "random", 1, 1)
    with pytest.raises(ValueError, match="model"):
        estimate_memory("mlp", 10, 20, 4, 8, 2, 2)


def test_graphs_offline(graphs):
    names = {g.name for g in graphs}
    assert {"digits-knn", "cancer-knn", "wine-knn"} <= names
    for g in graphs:
        assert np.all((g.src == g.dst).sum() == g.n)  # one self loop per node
        key = set(zip(g.src.tolist(), g.dst.tolist()))
        assert all((d, s) in key for s, d in key)  # symmetric


@pytest.mark.parametrize("kind", MODELS)
def test_training_learns(graphs, kind):
    g = next(g for g in graphs if g.name == "wine-knn")
    # GIN sums over ~12 neighbours without normalisation: it needs a smaller step
    r = train(kind, g, hidden=32, layers=2, epochs=60, lr=0.01 if kind == "gin" else 0.1)
    assert r["loss"][-1] < 0.7 * r["loss"][0]
    assert r["test_acc"] > 0.8  # wine kNN graph: classes are well separated


@pytest.mark.parametrize("kind", MODELS)
def test_gradients_match_finite_differences(kind):
    from hwcosim.models.systems.jobs import cognn as C

    rng = np.random.default_rng(1)
    n = 12
    g = make_graph("t", rng.integers(0, n, (20, 2)), rng.standard_normal((n, 5)), rng.integers(0, 3, n))
    P = [{k: v.astype(np.float64) for k, v in p.items()} for p in C._init(kind, C._dims(g, 8, 2), rng, 8)]
    A = C._adjacency(kind, g)
    A = A.astype(np.float64) if A is not None else None
    x = g.x.astype(np.float64)

    def loss(grad=False):
        h, cs, os_ = x, [], []
        for i, p in enumerate(P):
            h, c = C._forward(kind, g, A, p, h, i == len(P) - 1)
            cs.append(c)
            os_.append(h)
        z = h - h.max(1, keepdims=True)
        pr = np.exp(z)
        pr /= pr.sum(1, keepdims=True)
        val = -np.log(pr[np.arange(n), g.y]).mean()
        if not grad:
            return val
        dz = pr
        dz[np.arange(n), g.y] -= 1
        dz /= n
        G = [None] * len(P)
        for i in range(len(P) - 1, -1, -1):
            dz, G[i] = C._backward(kind, g, A, P[i], cs[i], os_[i], dz, i == len(P) - 1, i > 0)
        return val, G

    _, G = loss(True)
    # GAT keeps float32 attention denominators: finite differences are noisier there
    tol = 0.1 if kind == "gat" else 1e-4
    for i in range(2):
        for k in P[i]:
            idx = tuple(0 for _ in P[i][k].shape)
            P[i][k][idx] += 1e-5
            lp = loss()
            P[i][k][idx] -= 2e-5
            lm = loss()
            P[i][k][idx] += 1e-5
            fd = (lp - lm) / 2e-5
            assert abs(fd - G[i][k][idx]) <= tol * max(abs(fd), 1e-3), (i, k, fd, G[i][k][idx])


def test_memory_estimate_error(graphs, capsys):
    errs = []
    for g in graphs:
        for k in MODELS:
            for h, L in ((16, 2), (64, 3)):
                m = measure_memory(k, g, h, L, epochs=1)
                e = estimate_memory(k, g.n, g.e, g.f, h, L, g.c)
                errs.append((e - m) / m)
    errs = np.abs(errs)
    with capsys.disabled():
        print(f"\nCoGNN memory estimate: mean |error| {errs.mean():.1%}, max {errs.max():.1%} over {errs.size} runs")
    assert errs.mean() < 0.15 and errs.max() < 0.5


def test_estimate_scales_with_dimensions():
    a = estimate_memory("gat", 1000, 10000, 64, 64, 2, 10)
    assert estimate_memory("gat", 1000, 20000, 64, 64, 2, 10) > a
    assert estimate_memory("gat", 1000, 10000, 64, 128, 2, 10) > a
    assert estimate_memory("gat", 1000, 10000, 64, 64, 3, 10) > a


def test_group_policies():
    ts = [_t(i, m) for i, m in enumerate([5, 1, 4, 2, 3])]
    assert [[t.mem_bytes for t in g] for g in group_tasks(ts, "in_order", 6, 4)] == [[5, 1], [4, 2], [3]]
    assert [[t.mem_bytes for t in g] for g in group_tasks(ts, "ascending_small", 6, 4)] == [[1, 2, 3], [4], [5]]
    assert [[t.mem_bytes for t in g] for g in group_tasks(ts, "ascending_large", 6, 4)] == [[5], [4], [3, 2, 1]]
    assert [[t.mem_bytes for t in g] for g in group_tasks(ts, "balanced", 6, 4)] == [[1, 5], [2, 4], [3]]
    assert [len(g) for g in group_tasks(ts, "ascending_small", 100, 2)] == [2, 2, 1]
    for p in POLICIES:
        gs = group_tasks(ts, p, 6, 4)
        assert sorted(t.tid for g in gs for t in g) == list(range(5))
        assert all(sum(t.mem_bytes for t in g) <= 6 for g in gs)


def test_simulation(graphs):
    tasks = task_stream(graphs, 60, seed=0)
    cap = 1.5 * np.quantile([t.mem_bytes for t in tasks], 0.9)
    seq = simulate(tasks, "sequential", cap)
    sjf = simulate(tasks, "sequential_sjf", cap)
    naive = simulate(tasks, "naive", cap)
    small = simulate(tasks, "ascending_small", cap)
    assert seq["oom_events"] == 0 and sjf["oom_events"] == 0 and naive["oom_events"] > 0
    assert all(simulate(tasks, p, cap)["oom_events"] == 0 for p in POLICIES)
    assert small["mean_jct_s"] < seq["mean_jct_s"] and small["makespan_s"] <= seq["makespan_s"]
    # shortest-first reorders only: same work, same makespan, lower mean JCT
    assert sjf["makespan_s"] == pytest.approx(seq["makespan_s"]) and sjf["mean_jct_s"] < seq["mean_jct_s"]
    # co-location itself (not only reordering) pays: in-order or balanced grouping beats sequential
    # (arrival order) on JCT or makespan, with the safety margin on
    for p in ("in_order", "balanced"):
        r = simulate(tasks, p, cap, margin=0.5)
        assert r["oom_events"] == 0
        assert r["mean_jct_s"] < seq["mean_jct_s"] or r["makespan_s"] < seq["makespan_s"], p
    # in_order keeps arrival order, so its gain is co-location alone; smallest-memory-first grouping
    # beats shortest-first sequential, so its gain is not only the reordering
    assert simulate(tasks, "in_order", cap, margin=0.5)["makespan_s"] < seq["makespan_s"]
    assert simulate(tasks, "ascending_small", cap, margin=0.5)["mean_jct_s"] < sjf["mean_jct_s"]
    assert simulate(tasks, "ascending_small", cap) == small  # deterministic
    with pytest.raises(ValueError, match="mode"):
        simulate(tasks, "fastest", cap)


def test_oom_judged_on_true_peaks_and_margin():
    """Grouping trusts the estimates; OOM follows the true peaks. Two tasks estimated at 4 + 5 = 9
    fit a cap of 10, but their true peaks (5 + 6) do not: without margin the group fails once
    (10% of the longer task lost, then one by one), with a 25% margin they are never grouped."""
    a = GNNTask(0, "gcn", "g", 16, 2, 0.0, 4, 10.0, 0.3, true_mem_bytes=5)
    b = GNNTask(1, "gcn", "g", 16, 2, 0.0, 5, 20.0, 0.3, true_mem_bytes=6)
    r0 = simulate([a, b], "in_order", 10, workers=4, margin=0.0)
    assert r0["oom_events"] == 1 and r0["oom_tasks"] == 2
    assert r0["makespan_s"] == pytest.approx(2.0 + 10.0 + 20.0)
    r1 = simulate([a, b], "in_order", 10, workers=4, margin=0.25)
    assert r1["oom_events"] == 0 and r1["makespan_s"] == pytest.approx(30.0)
    ok = [GNNTask(0, "gcn", "g", 16, 2, 0.0, 4, 10.0, 0.3, true_mem_bytes=4), b]
    r2 = simulate(ok, "in_order", 12, workers=4)   # truly fits: co-located, max(20, 0.3*30) = 20 s
    assert r2["oom_events"] == 0 and r2["makespan_s"] == pytest.approx(20.0)
    assert [len(g) for g in group_tasks([a, b], "in_order", 10, 4, margin=0.25)] == [1, 1]


def test_task_stream_measures_true_peaks(graphs):
    small = [g for g in graphs if g.n < 200]
    cache = {}
    calls = []
    ts = task_stream(small, 6, seed=1, measure=True, cache=cache, progress=lambda k, n: calls.append(k))
    assert all(t.true_mem_bytes > 0 and t.peak == t.true_mem_bytes for t in ts)
    assert len(cache) == len(calls) == len({(t.graph, t.kind, t.hidden, t.layers) for t in ts})
    errs = [t.mem_bytes / t.peak - 1 for t in ts]
    assert max(abs(e) for e in errs) < 0.6


def test_cli_cognn(tmp_path):
    import json

    assert cli_main(["cognn", "--quick", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "cognn.json").exists() and (tmp_path / "cognn_memory.png").exists()
    res = json.loads((tmp_path / "cognn.json").read_text())
    assert res["margin"] > 0 and res["stream_estimate_error"]["measured_configurations"] > 0
    assert {"sequential", "sequential_sjf", "naive", *POLICIES} == set(res["schedule"])
    assert all(res["schedule"][p]["oom_events"] == 0 for p in POLICIES)  # margin covers the estimator
    tr = res["trace"]  # measured co-location on the trace's arrivals (skipped without a data directory)
    assert "skipped" in tr or ({"timeslice", "naive", *POLICIES} <= set(tr["schedule"])
                               and tr["colocation"]["by_k"]["2"]["efficiency"] > 0)
    code = cli_main(["cognn", "--quick", "--workers", "0", "-o", str(tmp_path)])
    assert code == 2


def test_colocation_needs_a_queue_and_memory_room():
    from hwcosim.models.systems.jobs.cognn import run_colocation_study

    r = run_colocation_study(rates=(0.25,), cap_mults=(1.5, 12.0), n_tasks=80)
    row = {(x["cap_mult"], x["policy"]): x for x in r["rows"]}
    # balanced pairs the smallest task with the largest: under a tight cap every group is one task
    assert row[(1.5, "balanced")]["mean_group"] == 1.0 and row[(1.5, "balanced")]["makespan_gain"] == pytest.approx(0)
    # more memory room -> larger groups -> a larger makespan gain for smallest-first grouping
    assert row[(12.0, "ascending_small")]["mean_group"] > row[(1.5, "ascending_small")]["mean_group"]
    assert row[(12.0, "ascending_small")]["makespan_gain"] > row[(1.5, "ascending_small")]["makespan_gain"] > 0


# -- measured co-location, MPS-like and time-slicing baselines, trace arrivals -------------------------
def test_simulate_measured_baselines():
    from hwcosim.models.systems.jobs.cognn import simulate_measured

    ts = [_t(i, 10, solo=10.0) for i in range(4)]
    eff = {2: 1.5}
    tsl = simulate_measured(ts, "timeslice", 100, eff, workers=2)
    mps = simulate_measured(ts, "naive", 100, eff, workers=2)
    co = simulate_measured(ts, "in_order", 100, eff, workers=2)
    assert tsl["makespan_s"] == pytest.approx(40.0)  # plain time-slicing: no overlap
    assert mps["makespan_s"] == pytest.approx(2 * 20 / 1.5) == pytest.approx(co["makespan_s"])
    oom = simulate_measured(ts, "naive", 15, eff, workers=2)  # memory-blind spatial sharing
    assert oom["oom_events"] > 0 and simulate_measured(ts, "in_order", 15, eff, workers=2)["oom_events"] == 0
    assert simulate(ts, "naive", 100, 2)["makespan_s"] != mps["makespan_s"]  # the utilisation model is restored


def test_measure_colocation_tiny(graphs):
    from hwcosim.models.systems.jobs.cognn import measure_colocation

    m = measure_colocation(ks=(2,), reps=1, epochs=1, kinds=("gcn", "sage"), graphs=graphs)
    e = m["by_k"]["2"]
    assert e["efficiency"] > 0 and e["slowdown_median"] > 0 and len(m["load_average"]) == 3


def test_trace_arrivals(shared_data):
    from hwcosim.models.systems.jobs.cognn import trace_arrivals

    a = trace_arrivals(20, seed=1)
    assert len(a) == 20 and a[0] == 0 and np.all(np.diff(a) >= 0)
    with pytest.raises(ValueError):
        trace_arrivals(10**6)
