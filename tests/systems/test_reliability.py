"""Reliability layer: fault injection, telemetry, ByteRobust (closed forms, hand-worked cases)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binom

from models.systems.cluster import JobSpec, clos, placement
from models.systems.cluster.topology import GBPS, LinkKind
from models.systems.reliability import BYTEROBUST_MIX, Fault, FaultKind, FaultMix, FaultySimulator, sample_faults
from models.systems.reliability.byterobust import (
    ETTRParams,
    backup_hosts,
    dual_phase_replay,
    simulate_ettr,
    standby_count,
)
from models.systems.reliability.sim import agg_switch_links
from models.systems.reliability.telemetry import flow_counters, inspect_nodes


def star8(ports=1):
    return clos(1, 1, 8, gpus_per_host=1, nic_ports=ports, nic_gbps=100.0, hop_latency_s=0.0)


SPEC = JobSpec("j", dp=8, compute_s=0.1, grad_bytes=1e8, iterations=4, alpha_s=0.0)
COMM = 2 * 7 / 8 * 1e8 / (100 * GBPS)  # ring all-reduce closed form on a 100 Gb/s star


def run(fault=None, topo=None, until=10.0, spec=SPEC):
    topo = topo or star8()
    s = FaultySimulator(topo, seed=0)
    s.add_job(spec, placement(spec, np.arange(spec.n_gpus)))
    for f in ([] if fault is None else [fault] if isinstance(fault, Fault) else fault):
        s.inject(f)
    return s.run(until=until)


# ---- faults ---------------------------------------------------------------------------------
def test_mix_is_byterobust():
    # CUDA 36.1 + OOM 10.1 + disk 5.0 + HDFS 2.0 = 53.2 of 78.1 listed
    assert BYTEROBUST_MIX[FaultKind.GPU_FAIL] == pytest.approx(53.2 / 78.1)
    assert BYTEROBUST_MIX[FaultKind.HANG] == pytest.approx(9.9 / 78.1)
    assert BYTEROBUST_MIX[FaultKind.NAN] == pytest.approx(0.3 / 78.1)
    assert sum(BYTEROBUST_MIX.values()) == pytest.approx(1.0)


def test_sampling_seeded_and_poisson():
    m = FaultMix(rate_per_gpu_day=1e-2)
    a = sample_faults(m, 1000, 86400 * 10, seed=3)
    b = sample_faults(m, 1000, 86400 * 10, seed=3)
    assert a == b and a != sample_faults(m, 1000, 86400 * 10, seed=4)
    # mean 100 faults; 5 sigma
    counts = [len(sample_faults(m, 1000, 86400 * 10, seed=s)) for s in range(20)]
    assert abs(np.mean(counts) - 100) < 5 * 10 / np.sqrt(20)
    only = sample_faults(FaultMix(weights={FaultKind.NAN: 1.0}), 8, 100.0, 0, n=30)
    assert {f.kind for f in only} == {FaultKind.NAN}


def test_wrong_faults():
    with pytest.raises(ValueError, match="kind"):
        Fault(0, "meteor", 0.0, 0)
    with pytest.raises(ValueError, match="slow-down factor"):
        Fault(0, FaultKind.GPU_SLOW, 0.0, 0, severity=0.5)
    with pytest.raises(ValueError, match="unknown fault kinds"):
        FaultMix(weights={"meteor": 1.0})
    with pytest.raises(ValueError, match="switch_fail target"):
        run(Fault(0, FaultKind.SWITCH_FAIL, 0.0, 99))
    with pytest.raises(ValueError, match="not a GPU id"):
        run(Fault(0, FaultKind.GPU_FAIL, 0.0, 8))


def test_healthy_closed_form():
    s = run()
    assert np.allclose(s.jobs[0].iteration_times, 0.1 + COMM)


def test_gpu_slow_closed_form_and_revert():
    # slow x3 from 0 for one iteration's compute: iteration 1 = 0.3 + comm, then healthy
    s = run(Fault(0, FaultKind.GPU_SLOW, 0.0, 5, duration=0.2, severity=3.0))
    it = s.jobs[0].iteration_times
    assert it[0] == pytest.approx(0.3 + COMM) and np.allclose(it[1:], 0.1 + COMM)


def test_cpu_overload_slows_the_host():
    topo = clos(1, 1, 2, gpus_per_host=4, nic_ports=1, nic_gbps=100.0, hop_latency_s=0.0)
    s = run(Fault(0, FaultKind.CPU_OVERLOAD, 0.0, 1, duration=100.0, severity=2.0), topo=topo)
    assert s.slow.tolist() == [1, 1, 1, 1, 2, 2, 2, 2]
    assert s.jobs[0].iteration_times[0] > 0.2


def test_fail_stop_and_hang_stall_and_nan_flags():
    for kind in (FaultKind.GPU_FAIL, FaultKind.HANG):
        s = run(Fault(0, kind, 0.15, 2))  # during iteration 2's compute
        assert len(s.jobs[0].iter_end) == 1 and 0 in s.stalls
        assert s.jobs[0].finished is None
    s = run(Fault(0, FaultKind.NAN, 0.15, 2))
    assert [x[3] for x in s.telemetry.losses] == [False, True, True, True]


def test_nic_down_hangs_the_collective():
    t_comm = 0.1 + COMM / 2  # mid all-reduce of iteration 1
    s = run(Fault(0, FaultKind.NIC_DOWN, t_comm, 4))
    rec = s.telemetry.collectives
    assert len(rec) == 1 and np.isnan(rec[0].t_end)
    fc = flow_counters(s)
    assert fc.D.size == 8 and np.all(fc.rate == 0)
    posted = fc.T > fc.D  # posted but never done: network / receiver side (Mycroft's T > D)
    assert sorted(zip(fc.src[posted].tolist(), fc.dst[posted].tolist())) == [(3, 4), (4, 5)]
    assert np.all(fc.G[~posted] == fc.D[~posted])  # the rest of the ring idles
    assert inspect_nodes(s) == [(0, "nic", 4)]


def test_lossy_link_halves_bandwidth_closed_form():
    # two hosts on different ToRs, one ToR uplink lane: keep 50% of it => ring hop at half rate if
    # the uplink is the bottleneck; make uplink capacity = one port (oversub 1, 1 host per ToR)
    topo = clos(1, 2, 1, gpus_per_host=1, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, hop_latency_s=0.0)
    spec = JobSpec("j", dp=2, compute_s=0.1, grad_bytes=1e8, iterations=2, alpha_s=0.0)
    up = topo.link_block(LinkKind.TOR_UP).start
    s = run(Fault(0, FaultKind.LINK_LOSSY, 0.0, up, severity=0.5), topo=topo, spec=spec)
    comm = 2 * 1 / 2 * 1e8 / (100 * GBPS)
    assert np.allclose(s.jobs[0].iteration_times, 0.1 + 2 * comm)


def test_switch_fail_reroutes():
    topo = clos(1, 2, 4, gpus_per_host=1, nic_ports=1, aggs_per_pod=2, hop_latency_s=0.0)
    links = agg_switch_links(topo, 0)
    assert links.size == 2 * 2 + 2 * 8  # tor-up/down of 2 ToRs + agg-up/down to 8 cores
    s = run(Fault(0, FaultKind.SWITCH_FAIL, 0.0, 0), topo=topo)
    assert len(s.jobs[0].iter_end) == SPEC.iterations  # ECMP routes around, the job completes
    assert not s.router.alive[links].any()


def test_flap_toggles_and_clears():
    topo = star8(ports=2)
    s = run(Fault(0, FaultKind.NIC_FLAP, 0.0, 0, duration=0.3, severity=0.1), topo=topo)
    assert len(s.jobs[0].iter_end) == SPEC.iterations
    assert s.router.alive.all()  # cleared at the end


def test_collective_timestamps_show_the_straggler():
    s = run(Fault(0, FaultKind.GPU_SLOW, 0.0, 6, duration=100.0, severity=2.0))
    r = s.telemetry.collectives[0]
    assert int(np.argmax(r.enter)) == 6 and r.enter[6] == pytest.approx(0.2)
    assert r.t_start == pytest.approx(0.2) and r.t_end == pytest.approx(0.2 + COMM)
    assert s.telemetry.samples_cost()["timestamps"] == 8 * SPEC.iterations


# ---- ByteRobust -------------------------------------------------------------------------------
@pytest.mark.parametrize("m,n", [(2, 3), (3, 3), (3, 5), (4, 4)])
def test_dual_phase_replay_names_one_faulty_rank(m, n):
    for x in range(m * n):
        sus, det = dual_phase_replay(m, n, [x])
        assert sus.tolist() == [x] and det["replays"] == 2


def test_dual_phase_replay_never_misses():
    rng = np.random.default_rng(0)
    for _ in range(50):
        bad = rng.choice(20, size=rng.integers(1, 4), replace=False)
        sus, _ = dual_phase_replay(4, 5, bad)
        assert set(bad.tolist()) <= set(sus.tolist())
    sus, det = dual_phase_replay(2, 3, [0, 5])  # x//2: groups 0, 2; x%3: 0, 2 => {0, 5} plus none else
    assert sus.tolist() == [0, 5] and det["phase1_failed"] == [0, 2]


def test_standby_p99_by_hand():
    # Bin(10, 0.5): cdf(7) = 0.9453, cdf(8) = 0.9893, cdf(9) = 0.99902 => 9
    assert standby_count(10, 0.5) == 9
    assert standby_count(100, 0.0) == 0
    k = standby_count(1200, 0.0038)
    assert binom.cdf(k, 1200, 0.0038) >= 0.99 > binom.cdf(k - 1, 1200, 0.0038)
    with pytest.raises(ValueError, match="p_fail"):
        standby_count(10, 1.5)


def test_backup_hosts_outside_every_group():
    pp, dp, tp = 4, 6, 8
    b = backup_hosts(pp, dp, tp)
    host = (np.arange(pp * dp * tp) // 8).reshape(pp, dp, tp)
    assert sorted(b.tolist()) == list(range(pp * dp))  # one backup per host
    for s, d, t in itertools.product(range(pp), range(dp), range(tp)):
        h = host[s, d, t]
        groups = set(host[s, :, t]) | set(host[:, d, t]) | set(host[s, d, :])
        assert b[h] not in groups
    assert (backup_hosts(1, 4, 8) == -1).all()  # PP = 1, TP = host: every host shares a DP group


def _small(days=30.0):
    return ETTRParams(n_gpus=1024, days=days, mix=FaultMix(rate_per_gpu_day=5e-3))


def test_ettr_accounting_adds_up():
    p = _small()
    for system in ("byterobust", "requeue"):
        r = simulate_ettr(p, system, seed=1)
        assert r["productive_s"] + sum(r["loss_s"].values()) == pytest.approx(r["wall_s"])
        assert 0 < r["ettr"] < 1
    br, rq = simulate_ettr(p, "byterobust", 1), simulate_ettr(p, "requeue", 1)
    assert br["ettr"] > rq["ettr"]


def test_ettr_no_faults_is_checkpoint_overhead_only():
    p = ETTRParams(n_gpus=64, days=1.0, mix=FaultMix(rate_per_gpu_day=0.0))
    r = simulate_ettr(p, "byterobust", 0)
    assert r["ettr"] == pytest.approx(10.0 / 10.025)
    r = simulate_ettr(p, "requeue", 0)
    assert r["ettr"] == pytest.approx(3600 / 3660)


def test_one_gpu_failure_by_hand():
    kw = dict(n_gpus=64, days=1.0, hot_update_s=(50.0, 50.0), requeue_s=(500.0, 500.0))
    p = ETTRParams(mix=FaultMix(rate_per_gpu_day=1e-2), **kw)
    f = [Fault(0, FaultKind.GPU_FAIL, 1000.5, 3, explicit=True)]
    br = simulate_ettr(p, "byterobust", 0, faults=f)
    assert br["standbys"] == standby_count(8, 1e-2 * 8)
    assert br["loss_s"]["detect"] == 10.0 and br["loss_s"]["restart"] == 50.0
    assert br["loss_s"]["lost_work"] == pytest.approx(0.5)  # since the step checkpoint at 1000 s
    rq = simulate_ettr(p, "requeue", 0, faults=f)
    assert rq["loss_s"]["detect"] == 600.0 and rq["loss_s"]["restart"] == 500.0
    assert rq["loss_s"]["lost_work"] == pytest.approx(1000.5)  # no hourly checkpoint yet
    # no standby (zero modelled failure rate => pool of 0): ByteRobust waits like a requeue
    br0 = simulate_ettr(ETTRParams(mix=FaultMix(rate_per_gpu_day=0.0), **kw), "byterobust", 0, faults=f)
    assert br0["standbys"] == 0 and br0["loss_s"]["restart"] == 500.0


# ---- nothing lost ----------------------------------------------------------------------------
@pytest.mark.parametrize("system", ["byterobust", "requeue"])
def test_nothing_lost(system):
    p = _small(days=60.0)
    faults = sample_faults(p.mix, p.n_gpus, p.horizon_s, 5, p.gpus_per_host)
    r = simulate_ettr(p, system, 5, faults=faults)
    # every injected fault is detected, absorbed by a restart, or reported missed
    assert len(r["outcomes"]) == r["faults"] == len(faults)
    assert sorted(o["fid"] for o in r["outcomes"]) == [f.fid for f in faults]
    assert sum(r["status"].values()) == r["faults"]
    assert {o["status"] for o in r["outcomes"]} <= {"detected", "absorbed", "missed"}
    if system == "requeue":
        assert r["status"]["missed"] > 0  # slow faults have no detector in the baseline
    for rec in r["recoveries"]:
        # never resume from a state older than the last completed (uncontaminated) checkpoint
        assert rec["resume_ckpt_t"] >= rec["last_ckpt_t"] or rec["planned"]
        assert rec["resume_ckpt_t"] <= rec["t_fail"] or rec["planned"]
        # never drop a rank: the host count is unchanged, machines distinct, the bad one gone
        assert rec["hosts_after"] == rec["hosts_before"] == p.hosts == rec["distinct_after"]
        assert not rec["old_machine_kept"]


# ---- C4D and Mycroft ---------------------------------------------------------------------------
from models.systems.reliability import c4d, mycroft  # noqa: E402


def _c4d_run(fault, until=30.0):
    topo = clos(1, 2, 4, gpus_per_host=1, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, hop_latency_s=0.0)
    spec = JobSpec("j", dp=8, compute_s=1.0, grad_bytes=1e9, iterations=12, alpha_s=0.0)
    return run(fault, topo=topo, spec=spec, until=until)


@pytest.mark.parametrize("kind,t,cls", [
    (FaultKind.GPU_FAIL, 2.5, c4d.NONCOMM_HANG),   # mid-compute of iteration 3: rank never posts
    (FaultKind.HANG, 2.5, c4d.NONCOMM_HANG),
    (FaultKind.NIC_DOWN, 3.05, c4d.COMM_HANG),     # mid all-reduce: every rank posted, no completion
    (FaultKind.GPU_SLOW, 2.5, c4d.NONCOMM_SLOW),
])
def test_c4d_classifies_and_localises(kind, t, cls):
    sev = 2.0 if kind == FaultKind.GPU_SLOW else 1.0
    s = _c4d_run(Fault(0, kind, t, 5, severity=sev))
    d = c4d.diagnose(s, 0, c4d.C4DParams())
    assert d is not None and d.cls == cls and 5 in d.ranks
    if cls in (c4d.NONCOMM_HANG, c4d.COMM_HANG):
        last_progress = max(float(np.max(r.enter[np.isfinite(r.enter)])) for r in s.telemetry.collectives[-1:])
        assert d.t == pytest.approx(np.ceil(last_progress + 10.0))  # hang_s after progress stops, polled


def test_c4d_comm_slow_finds_the_lossy_link():
    topo = clos(1, 2, 4, gpus_per_host=1, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, hop_latency_s=0.0)
    up = topo.link_block(LinkKind.TOR_UP).start  # ToR 0 uplink: the ring hop 3 -> 4 crosses it
    s = _c4d_run(Fault(0, FaultKind.LINK_LOSSY, 2.5, up, severity=0.1))  # 40 of 400 Gb/s
    d = c4d.diagnose(s, 0, c4d.C4DParams())
    assert d.cls == c4d.COMM_SLOW and d.link == up and d.connection == (3, 4)


def test_c4d_healthy_is_silent_and_overhead_closed_form():
    assert c4d.diagnose(_c4d_run(None), 0, c4d.C4DParams()) is None
    assert c4d.overhead(10.0, True, 1.0, 0.0, 600.0, 1800.0, True, 1800.0) == 10 + 600 + 900
    assert c4d.overhead(0.0, False, 2.0, 3600.0, 600.0, 1800.0, False, 1800.0) == 1800.0


def test_mycroft_rules():
    p = mycroft.MycroftParams()
    place = np.arange(8).reshape(1, 8, 1)
    samp = mycroft.sample_ranks(place, 10, 0)
    assert sorted(samp.tolist()) == list(range(8))  # fewer than 10 ranks: all of them
    two = mycroft.sample_ranks(np.arange(16).reshape(1, 8, 2), 10, 0)
    assert two.size == 10 and np.unique(two).size == 10 and {0, 1} <= set((two % 2).tolist())
    s = _c4d_run(Fault(0, FaultKind.NIC_DOWN, 3.05, 5))
    samp = np.array([0])
    t_trig, typ = mycroft.trigger(s, 0, p, samp)
    posted = 2 * (1.0 + 2 * 7 / 8 * 1e9 / (100 * GBPS)) + 1.0  # iteration 3's all-reduce: 3.28 s
    assert typ == "failure" and t_trig == pytest.approx(np.ceil((posted + 10.0) / 0.1) * 0.1)  # 10 s window
    rc = mycroft.root_cause(s, 0, typ)
    assert rc["component"] == "network" and rc["ranks"] == [5] and rc["rule"] == "T > D"
    s = _c4d_run(Fault(0, FaultKind.HANG, 3.35, 2))  # hung mid all-reduce (3.28-3.42 s): received, never forwarded
    rc = mycroft.root_cause(s, 0, "failure")
    assert rc == {"ranks": [2], "component": "gpu", "rule": "D_in > G_out"}
    s = _c4d_run(Fault(0, FaultKind.GPU_FAIL, 2.5, 6))
    assert mycroft.root_cause(s, 0, "failure")["ranks"] == [6]
    s = _c4d_run(Fault(0, FaultKind.GPU_SLOW, 2.5, 1, severity=3.0))
    t_trig, typ = mycroft.trigger(s, 0, p, np.array([0]))
    assert typ == "straggler"
    rc = mycroft.root_cause(s, 0, typ)
    assert rc["ranks"] == [1] and rc["component"] == "gpu"
    assert mycroft.trigger(_c4d_run(None), 0, p, np.array([0])) is None  # finished job: no trigger


@pytest.mark.slow
def test_studies_quick_run():
    r = c4d.run_study(quick=True)
    assert r["precision"] > 0.9 and r["recall_symptomatic"] > 0.9
    m = mycroft.run_study(quick=True)
    assert m["component_accuracy"] > 0.4


def test_cli_bad_input(tmp_path, capsys):
    from cosim.cli.reliability import main

    code = main(["c4d", "--seed", "-1", "-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seed -1: out of range" in err[0]
    f = tmp_path / "file"
    f.write_text("x")
    code = main(["byterobust", "--quick", "-o", str(f)])
    assert code == 2 and capsys.readouterr().err.startswith("error: output path")
