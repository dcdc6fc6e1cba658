"""Reliability layer: fault injection, telemetry, ByteRobust (closed forms, hand-worked cases)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.cluster import JobSpec, clos, placement
from hwcosim.models.systems.cluster.topology import GBPS, LinkKind
from hwcosim.models.systems.reliability import (
    BYTEROBUST_MIX,
    Fault,
    FaultKind,
    FaultMix,
    FaultySimulator,
    sample_faults,
)
from hwcosim.models.systems.reliability.byterobust import (
    ETTRParams,
    backup_hosts,
    dual_phase_replay,
    simulate_ettr,
    standby_count,
)
from hwcosim.models.systems.reliability.sim import agg_switch_links
from scipy.stats import binom


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
    # (the counter signature of a dead NIC is produced by the chunk-level transport now:
    # tests/test_cluster_transport.py::test_nic_down_stalls_with_posted_chunks_never_done)


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
def _machines(n_hosts, bad, gph=1, kind="nan_at"):
    """Machines of which ``bad`` carry a defect (a replay on them fails), as a replay handle."""
    from hwcosim.models.systems.cluster.transport import Effects
    from hwcosim.models.systems.reliability.replay import MachineReplay

    w = Effects(n_hosts * gph, n_hosts, 0)
    for h in bad:
        getattr(w, kind)[int(h) * gph] = 0.0
    return MachineReplay(w, gph, 1.0)


@pytest.mark.parametrize("m,n", [(2, 3), (3, 3), (3, 5), (4, 4)])
def test_dual_phase_replay_names_one_faulty_rank(m, n):
    for x in range(m * n):
        r = _machines(m * n, [x])
        sus, det = dual_phase_replay(m, n, r)
        assert sus.tolist() == [x] and det["replays"] == 2
        assert len(r.calls) == 2 * n  # every group of both phases replayed, on the transport


def test_dual_phase_replay_never_misses():
    rng = np.random.default_rng(0)
    for _ in range(50):
        bad = rng.choice(20, size=rng.integers(1, 4), replace=False)
        sus, _ = dual_phase_replay(4, 5, _machines(20, bad))
        assert set(bad.tolist()) <= set(sus.tolist())
    sus, det = dual_phase_replay(2, 3, _machines(6, [0, 5]))  # x//2: groups 0, 2; x%3: 0, 2 => {0, 5}
    assert sus.tolist() == [0, 5] and det["phase1_failed"] == [0, 2]
    # a machine that hangs (not NaN) fails its replays too; GPUs 2.. of an 8-GPU machine count
    sus, _ = dual_phase_replay(3, 3, _machines(9, [4], gph=8, kind="hang_at"))
    assert sus.tolist() == [4]
    with pytest.raises(UsageError, match="replay must be a callable"):
        dual_phase_replay(2, 3, [0])  # the faulty machines themselves are not an input any more


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


# ---- C4D and Mycroft (on the chunk-level transport's telemetry only) --------------------------
from hwcosim.models.systems.reliability import c4d, mycroft  # noqa: E402
from hwcosim.models.systems.reliability.mechanics import run_job  # noqa: E402


def _tel_run(fault, until=30.0, gph=1):
    topo = clos(1, 2, 4 // gph, gpus_per_host=gph, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, hop_latency_s=0.0)
    spec = JobSpec("j", dp=8, compute_s=1.0, grad_bytes=1e9, iterations=12, alpha_s=0.0)
    return run_job(topo, spec, placement(spec, np.arange(8)), [] if fault is None else [fault], until)


T_COMM = 2 * 7 / 8 * 1e9 / (100 * GBPS)  # 0.14 s


@pytest.mark.parametrize("kind,t,cls", [
    (FaultKind.GPU_FAIL, 2.5, c4d.NONCOMM_HANG),   # mid-compute of iteration 3: rank never posts
    (FaultKind.HANG, 2.5, c4d.NONCOMM_HANG),
    (FaultKind.NIC_DOWN, 3.35, c4d.COMM_HANG),     # mid all-reduce: every rank posted, no completion
    (FaultKind.HANG, 3.35, c4d.COMM_HANG),
    (FaultKind.GPU_SLOW, 2.5, c4d.NONCOMM_SLOW),
])
def test_c4d_classifies_and_localises(kind, t, cls):
    sev = 2.0 if kind == FaultKind.GPU_SLOW else 1.0
    s = _tel_run(Fault(0, kind, t, 5, severity=sev))
    d = c4d.diagnose(s.tel, c4d.C4DParams(), now=30.0)
    assert d is not None and d.cls == cls and 5 in d.ranks
    if cls in (c4d.NONCOMM_HANG, c4d.COMM_HANG):
        last = [r for r in s.tel.records(30.0)][-1]
        assert d.t == pytest.approx(np.ceil(np.nanmax(last.enter) + 10.0))  # hang_s after the last post, polled


def test_c4d_comm_slow_finds_the_lossy_link():
    topo = clos(1, 2, 4, gpus_per_host=1, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, hop_latency_s=0.0)
    up = topo.link_block(LinkKind.TOR_UP).start  # ToR 0 uplink: the ring hop 3 -> 4 crosses it
    s = _tel_run(Fault(0, FaultKind.LINK_LOSSY, 2.5, up, severity=0.2))
    d = c4d.diagnose(s.tel, c4d.C4DParams(), now=30.0)
    assert d.cls == c4d.COMM_SLOW and d.link == up and d.connection == (3, 4)


def test_c4d_healthy_is_silent_and_overhead_stream_by_hand():
    assert c4d.diagnose(_tel_run(None).tel, c4d.C4DParams(), now=30.0) is None
    trials = [{"kind": FaultKind.HANG, "expected": c4d.COMM_HANG, "symptom": True, "localised": True,
               "delay_s": 12.0, "slowdown": float("inf")},
              {"kind": FaultKind.GPU_SLOW, "expected": c4d.NONCOMM_SLOW, "symptom": True, "localised": True,
               "delay_s": 30.0, "slowdown": 2.0}]
    faults = [Fault(0, FaultKind.HANG, 1000.0, 3), Fault(1, FaultKind.GPU_SLOW, 5000.0, 4, 3600.0, 2.0),
              Fault(2, FaultKind.HANG, 5100.0, 5)]  # the third lands while C4D's restart is under way
    op = c4d.OverheadParams(days=1.0, restart_s=600.0, ckpt_every_s=1800.0, timeout_s=1800.0)
    a = c4d.simulate_overhead(trials, op, "c4d", 0, faults)
    # hang: 12 s stalled + restart + 1000 s since the start; slow: 30 s at half speed + restart + the
    # work since the last checkpoint of the segment that began at 1612 s ((5030 - 1612) mod 1800)
    assert a["overhead_s"] == pytest.approx(12 + 600 + 1000 + 15 + 600 + (5030 - 1612) % 1800)
    assert a["counts"]["absorbed"] == 1 and a["counts"]["localised"] == 2
    b = c4d.simulate_overhead(trials, op, "timeout", 0, faults)
    # the timeout baseline: 1800 s stalled + restart + 1000 s redone; the slow fault runs its hour at half
    # speed; the second hang: 1800 s + restart + (5100 - 3400) mod 1800 s since the last checkpoint
    assert b["overhead_s"] == pytest.approx(1800 + 600 + 1000 + 1800 + 1800 + 600 + (5100 - 3400) % 1800)


def test_mycroft_rules():
    p = mycroft.MycroftParams()
    place = np.arange(8).reshape(1, 8, 1)
    samp = mycroft.sample_ranks(place, 10, 0)
    assert sorted(samp.tolist()) == list(range(8))  # fewer than 10 ranks: all of them
    two = mycroft.sample_ranks(np.arange(16).reshape(1, 8, 2), 10, 0)
    assert two.size == 10 and np.unique(two).size == 10 and {0, 1} <= set((two % 2).tolist())
    s = _tel_run(Fault(0, FaultKind.NIC_DOWN, 3.35, 5))
    t_trig, typ = mycroft.trigger(s.tel, p, np.array([0]), 30.0)
    posted = 2 * (1.0 + T_COMM) + 1.0  # iteration 3's all-reduce starts at about 3.28 s
    # the window is window_m x the all-reduce's healthy duration in the completion logs (T_COMM here)
    assert typ == "failure" and t_trig == pytest.approx(np.ceil((posted + p.window_m * T_COMM) / 0.1) * 0.1,
                                                        abs=0.11)
    t_rc, rc2 = mycroft.root_cause_at(s.tel, t_trig, typ, p)  # the evidence is in the logs at the trigger
    # the verdict is out when the logs are gathered and analysed: every state-log row of the window
    # (96 B) through the analyser's link at the rate the job's healthy all-reduces showed (100 Gb/s
    # NICs: 1 GB ring chunks at line rate), one chunk service time per host, 1 us per row
    col = rc2["collect"]
    w = p.window_m * T_COMM
    rows = s.tel.state_log(t_trig - w, t_trig)
    assert col["rows"] == rows.size > 0 and col["hosts"] == np.unique(rows.src).size
    assert col["rate_Bps"] == pytest.approx(100 * GBPS, rel=0.02)
    s_chunk = s.tel.conns["dp"][4] / col["rate_Bps"]
    assert col["total_s"] == pytest.approx(96 * rows.size / col["rate_Bps"] + col["hosts"] * s_chunk + 1e-6 * rows.size)
    assert t_rc == pytest.approx(t_trig + col["total_s"]) and rc2["rule"] == "T > D"
    rc = mycroft.root_cause(s.tel, t_rc, typ)
    assert rc["component"] == "network" and 5 in rc["flow"] and rc["rule"] == "T > D"
    s = _tel_run(Fault(0, FaultKind.HANG, 3.35, 2))  # hung mid all-reduce: received, never forwarded
    rc = mycroft.root_cause(s.tel, 20.0, "failure")
    assert rc["ranks"] == [2] and rc["component"] == "gpu" and rc["rule"] == "D_in > G_out"
    s = _tel_run(Fault(0, FaultKind.GPU_FAIL, 3.35, 6))  # died mid all-reduce: its logs stop
    rc = mycroft.root_cause(s.tel, 20.0, "failure")
    assert rc["ranks"] == [6] and rc["rule"] == "state log silent"
    s = _tel_run(Fault(0, FaultKind.GPU_FAIL, 2.5, 6))  # died in compute: never posted
    assert mycroft.root_cause(s.tel, 20.0, "failure")["ranks"] == [6]
    s = _tel_run(Fault(0, FaultKind.GPU_SLOW, 2.5, 1, severity=3.0))
    t_trig, typ = mycroft.trigger(s.tel, p, np.array([0]), 30.0)
    assert typ == "straggler"
    t_rc, rc = mycroft.root_cause_at(s.tel, t_trig, typ, p)
    assert rc["ranks"] == [1] and rc["component"] == "gpu" and t_trig < t_rc < t_trig + 0.5
    assert mycroft.trigger(_tel_run(None).tel, p, np.array([0]), 30.0) is None  # finished job: no trigger


def test_mycroft_host_lag_is_walked_to_the_overloaded_proxy():
    # two GPUs per host; host 1 (GPUs 2, 3) overloaded: its proxies post late, the walk along the
    # blocked flows ends at the flow whose receiver is not blocked itself
    s = _tel_run(Fault(0, FaultKind.CPU_OVERLOAD, 2.5, 1, duration=100.0, severity=4.0), gph=2)
    rows = s.tel.state_log(4.0, 30.0)
    last = s.tel.records(30.0)[-1]
    rows = rows.select(rows.inst == last.idx)
    rc = mycroft._counter_rules(s.tel, rows, stalled=False)
    assert rc is not None and rc["component"] == "host" and rc["ranks"][0] // 2 == 1


def test_detectors_see_telemetry_only_shuffle():
    """Replace the fault list with a shuffled one after the run: every diagnosis is unchanged,
    and the telemetry holds no fault object."""
    import dataclasses

    rng = np.random.default_rng(1)
    kinds = [FaultKind.NIC_DOWN, FaultKind.HANG, FaultKind.GPU_SLOW, FaultKind.GPU_FAIL]
    for kind in kinds:
        faults = [Fault(0, kind, 3.35, 5, severity=2.0 if kind == FaultKind.GPU_SLOW else 1.0)]
        s = _tel_run(faults[0])
        before = (c4d.diagnose(s.tel, c4d.C4DParams(), 30.0), mycroft.trigger(s.tel, mycroft.MycroftParams(),
                                                                             np.array([0, 4]), 30.0))
        rc_before = mycroft.root_cause(s.tel, 20.0, "failure")
        others = [Fault(0, k, float(rng.uniform(0, 30)), int(rng.integers(8)),
                        severity=2.0 if k == FaultKind.GPU_SLOW else 1.0) for k in kinds if k != kind]
        faults[:] = list(rng.permutation(np.array(others + faults, dtype=object)))
        s.fx = None  # the mechanics are gone too: only the telemetry is left
        s.colls = None
        after = (c4d.diagnose(s.tel, c4d.C4DParams(), 30.0), mycroft.trigger(s.tel, mycroft.MycroftParams(),
                                                                            np.array([0, 4]), 30.0))
        assert before == after and mycroft.root_cause(s.tel, 20.0, "failure") == rc_before

        def walk(x, depth=0):
            assert not isinstance(x, Fault)
            if depth > 4:
                return
            if dataclasses.is_dataclass(x):
                for f in dataclasses.fields(x):
                    walk(getattr(x, f.name), depth + 1)
            elif isinstance(x, dict):
                for v in x.values():
                    walk(v, depth + 1)
            elif isinstance(x, (list, tuple)):
                for v in x[:50]:
                    walk(v, depth + 1)
            elif isinstance(x, str):
                assert x not in kinds

        walk(s.tel)


@pytest.mark.slow
def test_studies_quick_run():
    r = c4d.run_study(quick=True)
    assert r["precision"] > 0.7 and r["recall_symptomatic"] > 0.6
    m = mycroft.run_study(quick=True)
    assert m["component_accuracy"] > 0.4
    assert sum(map(sum, m["confusion"]["counts"])) == len(m["trials"])


def test_cli_bad_input(tmp_path, capsys):
    from hwcosim.cosim.cli.reliability import main

    code = main(["c4d", "--seed", "-1", "-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seed -1: out of range" in err[0]
    f = tmp_path / "file"
    f.write_text("x")
    code = main(["byterobust", "--quick", "-o", str(f)])
    assert code == 2 and capsys.readouterr().err.startswith("error: output path")


# ---- ByteRobust closed loop (monitors and localisation on telemetry) -----------------------------
from hwcosim.models.systems.reliability import closedloop as cl  # noqa: E402
from hwcosim.models.systems.reliability.study import setup as _study_setup  # noqa: E402


@pytest.fixture(scope="module")
def slice_setup():
    return _study_setup(0, iterations=60)


def test_loop_monitors_detect_and_localise_from_telemetry(slice_setup):
    p = cl.LoopParams()
    st = slice_setup
    cases = {  # kind, explicit -> (first signal, action, delay bound)
        (FaultKind.GPU_FAIL, True): ("inspection: xid", "evict"),
        (FaultKind.GPU_FAIL, False): ("process exit", "reattempt"),
        (FaultKind.HANG, False): ("zero RDMA traffic", "evict"),
        (FaultKind.NIC_DOWN, True): ("inspection: link", "evict"),
        (FaultKind.NAN, False): ("nan loss", "evict"),
    }
    for (kind, ex), (sig, action) in cases.items():
        r = cl.play_fault(Fault(0, kind, 100.0, 37, explicit=ex), st, p, 3)
        sf = r["slice_fault"]
        assert r["signal"] == sig and r["localise"]["action"] == action, (kind, r)
        if action == "evict":
            assert r["right"] and r["localise"]["target"] == sf.target // st.topo.gpus_per_host
        if sig == "inspection: link":  # a link down for link_hold_iters healthy iterations (a flap heals sooner)
            hold = p.link_hold_iters * st.it_s
            assert hold <= r["detect_s"] <= hold + p.inspect_period_s + p.report_s + 1e-9
        elif sig.startswith("inspection") or sig == "process exit":
            assert r["detect_s"] <= p.inspect_period_s + p.report_s + 1e-9
        if sig == "zero RDMA traffic":  # 10 minutes after the last RDMA progress, which precedes the onset
            assert p.hang_s - st.it_s <= r["detect_s"] <= p.hang_s + st.it_s
        if kind in (FaultKind.GPU_FAIL, FaultKind.HANG, FaultKind.NIC_DOWN):
            # the baseline's timeout: a collective open for 10 minutes
            assert r["timeout_s"] == pytest.approx(p.timeout_s, abs=st.it_s)
    r = cl.play_fault(Fault(0, FaultKind.LINK_LOSSY, 100.0, 0, 3600.0, 0.3, True), st, p, 3)
    assert r["localise"]["action"] == "isolate" and r["localise"]["target"] == r["slice_fault"].target


def test_loop_accounting_by_hand():
    p = cl.LoopParams(n_gpus=64, days=1.0, hot_update_s=(50.0, 50.0), requeue_s=(500.0, 500.0))
    f = Fault(0, FaultKind.GPU_FAIL, 1000.5, 3, explicit=True)
    played = {0: {"slowdown": np.inf, "stalled": True, "signal": "inspection: xid", "detect_s": 3.0,
                  "localise": {"action": "evict", "target": 0, "cost_s": 0.0, "how": "xid"}, "right": True,
                  "timeout_s": 600.0}}
    br = cl.run_loop(p, "byterobust", [f], played, 0)
    assert br["loss_s"]["detect"] == 3.0 and br["loss_s"]["restart"] == 50.0
    assert br["loss_s"]["lost_work"] == pytest.approx(0.5)  # per-step checkpoint at 1000 s
    rq = cl.run_loop(p, "requeue", [f], played, 0)
    assert rq["loss_s"]["detect"] == 600.0 and rq["loss_s"]["restart"] == 500.0
    assert rq["loss_s"]["lost_work"] == pytest.approx(1000.5)  # no hourly checkpoint yet
    for r in (br, rq):
        assert r["ettr"] * p.horizon_s + sum(r["loss_s"].values()) == pytest.approx(p.horizon_s)
    # a wrong eviction: the fault is still there, the job fails again and everything is requeued
    played[0] = {**played[0], "right": False}
    wr = cl.run_loop(p, "byterobust", [f], played, 0)
    assert wr["wrong_evictions"] == 1 and wr["loss_s"]["restart"] == 50.0 + 3.0 + 500.0
