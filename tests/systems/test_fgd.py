"""The trace-driven GPU-sharing scheduler and the FGD study (models/systems/cluster/fgd.py)."""

import numpy as np
import pytest
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.cluster import fgd
from hwcosim.models.systems.cluster.fgd import MILLI, POLICIES, Cluster, TaskSet, TaskTypes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _types(rows, models=1):
    """Task types from (cpu, num, milli, allowed-model list or None, p)."""
    acc = np.ones((len(rows), models), dtype=bool)
    for i, r in enumerate(rows):
        if r[3] is not None:
            acc[i] = [m in r[3] for m in range(models)]
    return TaskTypes(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]),
                     np.array([r[2] for r in rows]), acc, np.array([r[4] for r in rows], dtype=float))


def _frag(gpus, cpu, model, types):
    g = np.zeros((1, 8), dtype=np.int64)
    g[0, :len(gpus)] = gpus
    return float(fgd.node_fragmentation(g, np.array([cpu]), np.array([model]), types)[0])


# ---- the fragmentation measure on hand-computed cases -------------------------------------------
def test_fragmentation_hand_computed():
    # node: GPUs with 1000, 1000, 500, 200 milli left, 10 CPUs left
    types = _types([(1000, 1, 300, None, 0.5),     # shares 300: only the 200 left is a fragment
                    (4000, 2, MILLI, None, 0.25),  # two whole GPUs: the 500 and 200 are fragments
                    (20000, 1, MILLI, None, 0.25)])  # too little CPU: all 2700 left are fragments
    assert _frag([1000, 1000, 500, 200], 10000, 0, types) == pytest.approx(0.5 * 200 + 0.25 * 700 + 0.25 * 2700)


def test_fragmentation_cases():
    one = lambda c, n, m, acc=None: _types([(c, n, m, acc, 1.0)], models=2)  # noqa: E731
    # an idle node is no fragment to a task that fits
    assert _frag([1000] * 4, 8000, 0, one(1000, 1, 500)) == 0
    # a task needing more whole GPUs than the node has: every idle GPU is a fragment
    assert _frag([1000] * 2, 8000, 0, one(1000, 4, MILLI)) == 2000
    # GPU-type constraint not met: everything left is a fragment
    assert _frag([1000, 300], 8000, 0, one(1000, 1, 200, acc=[1])) == 1300
    assert _frag([1000, 300], 8000, 1, one(1000, 1, 200, acc=[1])) == 0
    # whole-GPU task: partly used GPUs are fragments; fully used GPUs are not counted at all
    assert _frag([1000, 300, 0], 8000, 0, one(1000, 1, MILLI)) == 300
    # sharing task: GPUs with less left than its share
    assert _frag([400, 250, 100], 8000, 0, one(1000, 1, 300)) == 350
    # too few fitting GPUs for a multi-GPU task: all left is a fragment
    assert _frag([1000, 900, 900], 8000, 0, one(1000, 2, MILLI)) == 2800


def test_fgd_picks_least_fragmenting_gpu():
    """FGD puts a 500-milli share on the GPU whose remaining 500 stays useful, not on the idle one."""
    cl = Cluster(["a"], np.array([64000]), np.array([1 << 20]), np.array([2]), np.array([0]), ["T4"])
    tasks = TaskSet(np.array([1000, 1000]), np.array([1, 1]), np.array([1, 1]), np.array([500, 500]),
                    ["", ""], np.ones((2, 1), dtype=bool))
    types = _types([(1000, 1, MILLI, None, 0.5), (1000, 1, 500, None, 0.5)])
    r = fgd.simulate(cl, tasks, types, "fgd", np.array([0, 1]), 0, np.array([0.0]), placements=True)
    (_, n0, g0), (_, n1, g1) = r["placements"]
    assert g0 == g1  # the second share goes onto the same GPU, keeping the other one whole


# ---- placement respects every resource and constraint (property test) --------------------------
@st.composite
def _small_case(draw):
    models = ["A", "B", "C"]
    n = draw(st.integers(1, 6))
    ngpu = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=n, max_size=n))
    cpu = draw(st.lists(st.sampled_from([8000, 16000, 64000]), min_size=n, max_size=n))
    mem = draw(st.lists(st.sampled_from([16384, 65536]), min_size=n, max_size=n))
    model = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    cl = Cluster([f"n{i}" for i in range(n)], np.array(cpu), np.array(mem), np.array(ngpu), np.array(model), models)
    m = draw(st.integers(1, 40))
    num = draw(st.lists(st.sampled_from([0, 1, 1, 1, 2, 4, 8]), min_size=m, max_size=m))
    milli = [MILLI if k > 1 else (0 if k == 0 else draw(st.sampled_from([100, 250, 500, 730, MILLI]))) for k in num]
    spec = [draw(st.sampled_from(["", "", "A", "B|C"])) if k else "" for k in num]
    tcpu = draw(st.lists(st.sampled_from([500, 2000, 8000]), min_size=m, max_size=m))
    tmem = draw(st.lists(st.sampled_from([1024, 8192, 32768]), min_size=m, max_size=m))
    tasks = TaskSet(np.array(tcpu), np.array(tmem), np.array(num), np.array(milli), spec,
                    fgd._access(spec, models))
    policy = draw(st.sampled_from(POLICIES))
    return cl, tasks, policy, draw(st.integers(0, 3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_small_case())
def test_placement_respects_resources_and_constraints(case):
    cl, tasks, policy, seed = case
    if not (tasks.num > 0).any():
        tasks.num[0], tasks.milli[0] = 1, 500
    types = fgd.task_types(tasks)
    order = np.arange(tasks.n)
    r = fgd.simulate(cl, tasks, types, policy, order, seed, np.array([0.0, 1e9]), placements=True)
    cpu, mem = cl.cpu.copy(), cl.mem.copy()
    gpu = np.zeros((cl.n, 8), dtype=int)
    for i, k in enumerate(cl.ngpu):
        gpu[i, :k] = MILLI
    for t, node, gids in r["placements"]:
        k, m = int(tasks.num[t]), int(tasks.milli[t])
        ok = (cpu >= tasks.cpu[t]) & (mem >= tasks.mem[t])
        if k:
            ok &= tasks.access[t][cl.model] & ((gpu >= m).sum(axis=1) >= k)
        if node < 0:
            assert not ok.any(), "a task was dropped although some node could take it"
            continue
        assert ok[node]
        assert len(gids) == k and len(set(gids)) == k
        for g in gids:
            assert g < cl.ngpu[node]
            assert gpu[node, g] >= m
            if m >= MILLI:
                assert gpu[node, g] == MILLI  # whole-GPU tasks get idle GPUs only
            gpu[node, g] -= m
        if k:
            assert cl.models[cl.model[node]] in (tasks.spec[t].split("|") if tasks.spec[t] else cl.models)
        cpu[node] -= tasks.cpu[t]
        mem[node] -= tasks.mem[t]
    assert (cpu >= 0).all() and (mem >= 0).all() and (gpu >= 0).all()
    assert r["unallocated"][-1] == pytest.approx(gpu.sum() / MILLI)


def test_bad_inputs():
    with pytest.raises(UsageError):
        fgd.load_tasks("nope", ["A"])
    cl = Cluster(["a"], np.array([1]), np.array([1]), np.array([1]), np.array([0]), ["A"])
    with pytest.raises(UsageError):
        fgd.subsample_nodes(cl, 0)


# ---- the study on the real trace ----------------------------------------------------------------
@pytest.fixture(scope="module")
def quick(shared_data):
    return fgd.run_fgd_study(quick=True)


def test_trace_loaded(quick):
    assert quick["trace_nodes"] == 1213 and quick["trace_gpus"] == 6212 and quick["trace_tasks"] == 8152
    # the quick cluster keeps the trace's node mix at 1/8
    assert abs(quick["gpus"] - 6212 / 8) < 0.05 * 6212 / 8


def test_fgd_beats_random_fit(quick):
    """FGD leaves fewer unallocated GPUs than random-fit at the end of every seed's arrivals (and so
    at the mean), and it is the best policy at the end."""
    for rf, rr in zip(quick["runs"]["fgd"], quick["runs"]["random"]):
        assert rf["unallocated_end"] < rr["unallocated_end"]
    ends = {p: m["unallocated"][-1] for p, m in quick["mean"].items()}
    assert min(ends, key=ends.get) == "fgd"
    assert all(v["at_end"]["reduction"] > 0 for v in quick["fgd_vs"].values())


def test_study_deterministic(shared_data, tmp_path):
    kw = dict(seeds=(7,), node_fraction=0.04, policies=("packing", "fgd"))
    a = fgd.run_fgd_study(**kw)
    b = fgd.run_fgd_study(out_dir=tmp_path, **kw)
    b.pop("files")
    assert a == b
    assert (tmp_path / "fgd_default.json").is_file() and (tmp_path / "fgd_default.png").is_file()
    c = fgd.run_fgd_study(**{**kw, "seeds": (8,)})
    assert c["mean"] != a["mean"]
