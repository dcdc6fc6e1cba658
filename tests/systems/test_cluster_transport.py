"""Chunk-level transport: closed forms, fault mechanics and the counters they produce."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.systems.cluster import JobSpec, clos, placement
from hwcosim.models.systems.cluster.topology import GBPS, LinkKind
from hwcosim.models.systems.cluster.transport import Effects, TransportParams, TransportSim, p2p_conns, ring_conns
from hwcosim.models.systems.reliability import Fault, FaultKind
from hwcosim.models.systems.reliability.mechanics import effects_from_faults, run_job

P = TransportParams()


def star8(ports=1):
    return clos(1, 1, 8, gpus_per_host=1, nic_ports=ports, nic_gbps=100.0, hop_latency_s=0.0)


SPEC = JobSpec("j", dp=8, compute_s=0.1, grad_bytes=1e8, iterations=4, alpha_s=0.0)
COMM = 2 * 7 / 8 * 1e8 / (100 * GBPS)


def sim(fault=None, topo=None, spec=SPEC, until=np.inf, params=None):
    topo = topo or star8()
    faults = [] if fault is None else [fault] if isinstance(fault, Fault) else fault
    return run_job(topo, spec, placement(spec, np.arange(spec.n_gpus)), faults, until, params=params)


def test_ring_structure():
    c = ring_conns("dp", np.arange(8).reshape(2, 4), 4e6, 2, P)
    assert c.n == 16 and c.K == 2 * 3 * 1 and c.d == 1
    # connection i goes src -> dst; dep is the connection into src, succ the one out of dst
    assert np.all(c.dst[c.dep] == c.src) and np.all(c.src[c.succ] == c.dst)
    assert np.all(c.chan[c.dep] == c.chan)
    big = ring_conns("dp", np.arange(4)[None], 4 * 2 * 10 * P.chunk_bytes, 2, P)
    assert big.d == P.max_chunks_per_step and big.q == pytest.approx(10 / P.max_chunks_per_step)
    pp = p2p_conns("pp", [0, 1], [2, 3], 3 * P.chunk_bytes, 1, P)
    assert pp.K == 3 and (pp.dep == -1).all()


def test_healthy_ring_matches_the_closed_form():
    s = sim()
    it = s.iteration_times
    assert it.size == 4 and np.allclose(it, it[0])
    # bandwidth term of the closed form plus the pipeline fill (a few chunk kernel/proxy times)
    assert 0.1 + COMM < it[0] < (0.1 + COMM) * 1.001


def test_p2p_and_tp_steps_run():
    topo = clos(1, 1, 2, gpus_per_host=4, nic_ports=1, nic_gbps=100.0, hop_latency_s=0.0)
    spec = JobSpec("j", dp=1, tp=4, pp=2, compute_s=0.05, act_bytes=1e7, tp_bytes=1e8, iterations=2, alpha_s=0.0)
    s = sim(topo=topo, spec=spec)
    assert [c.label for c in s.colls] == ["pp", "tp"]
    pp = 1e7 / (100 * GBPS)  # one P2P per NIC direction at the port rate
    tp = 2 * 3 / 4 * 1e8 / (2400 * GBPS)  # NVLink ring
    assert 0.05 + pp + tp < s.iteration_times[0] < (0.05 + pp + tp) * 1.01


def test_transport_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="ring all-reduce and P2P only"):
        TransportSim(star8(), JobSpec("t", dp=8, algo="tree", grad_bytes=1.0), placement(SPEC, np.arange(8)))


def test_gpu_slow_stretches_compute_only():
    s = sim(Fault(0, FaultKind.GPU_SLOW, 0.0, 5, duration=100.0, severity=3.0))
    t0 = sim().iteration_times[0]
    # compute 0.1 s x (0.95 x 3 + 0.05) on rank 5; the ring waits for it; its first chunk's
    # kernel (3 x chunk / gpu_bw) is 3x slower too, which the pipeline fill carries
    g0 = 3 * (1e8 / 8 / 4) / P.gpu_bw
    assert s.iteration_times[0] == pytest.approx(t0 + 0.1 * (0.95 * 3 + 0.05) - 0.1 + 2 * g0, rel=1e-9)
    r = s.tel.colls[0]
    assert int(np.argmax(r.enter)) == 5


def test_cpu_overload_makes_the_proxy_lag():
    topo = clos(1, 1, 4, gpus_per_host=2, nic_ports=1, nic_gbps=100.0, hop_latency_s=0.0)
    s = sim(Fault(0, FaultKind.CPU_OVERLOAD, 0.0, 1, duration=100.0, severity=4.0), topo=topo)
    healthy = sim(topo=topo)
    assert s.iteration_times[0] > healthy.iteration_times[0] + 0.005
    r = s.tel.colls[0]
    src = s.tel.conns["dp"][0]
    on_host = src // 2 == 1
    # the overloaded proxies post at most one slot per q x (proxy x 4 + 3 x scheduling delay)
    q = (1e8 / 8 / 4) / P.chunk_bytes
    cs = q * (P.proxy_s * 4 + P.sched_s * 3)
    assert np.diff(r.T[:, on_host], axis=0).min() >= cs * (1 - 1e-9)
    assert np.diff(r.T[:, ~on_host], axis=0).min() < cs / 2


def test_nic_down_stalls_with_posted_chunks_never_done():
    t = 0.1 + COMM / 2  # mid all-reduce of iteration 1
    s = sim(Fault(0, FaultKind.NIC_DOWN, t, 4), until=5.0)
    assert s.iter_end == []
    st = s.tel.state_at(5.0)
    stuck = st.T - st.D
    flows = sorted(zip(st.src[stuck > 0].tolist(), st.dst[stuck > 0].tolist()))
    assert flows == [(3, 4), (4, 5)]
    assert stuck.max() == P.window  # the sender into the dead NIC filled its window with posted chunks
    assert [e[1:] for e in s.tel.hw(5.0)] == [("link", lk, "down") for lk in sorted(
        [star8().link_block(LinkKind.PORT_UP).start + 4, star8().link_block(LinkKind.PORT_DN).start + 4])]


def test_hang_receives_but_never_forwards():
    t = 0.1 + COMM / 2
    s = sim(Fault(0, FaultKind.HANG, t, 2), until=5.0)
    st = s.tel.state_at(5.0)
    d_in = st.D[st.dst == 2].max()
    g_out = st.G[st.src == 2].min()
    assert d_in > g_out
    assert 2 in st.src  # the process lives: its proxy still writes state logs
    assert not (st.T > st.D).any()  # nothing posted is left undone
    assert s.tel.hw(5.0) == []  # no hardware check sees a hang


def test_gpu_fail_silences_the_rank_and_raises_xid():
    s = sim(Fault(0, FaultKind.GPU_FAIL, 0.1 + COMM / 2, 6, explicit=True), until=5.0)
    st = s.tel.state_at(5.0)
    assert 6 not in st.src and st.size > 0
    assert s.tel.hw(5.0, "xid") == [(pytest.approx(0.1 + COMM / 2), "xid", 6, "error")]
    assert s.tel.hw(5.0, "proc") == [(pytest.approx(0.1 + COMM / 2), "proc", 6, "exit")]
    s = sim(Fault(0, FaultKind.GPU_FAIL, 0.05, 6, explicit=False), until=5.0)  # in compute, no hardware error
    r = s.tel.colls[0]
    assert np.isnan(r.enter[6]) and np.isfinite(np.delete(r.enter, 6)).all()
    assert [e[1] for e in s.tel.hw(5.0)] == ["proc"]  # the agent sees the exit, no hardware sensor fires


def test_lossy_link_resends_and_counts_drops_on_that_link():
    topo = clos(1, 2, 1, gpus_per_host=1, nic_ports=1, nic_gbps=100.0, aggs_per_pod=1, hop_latency_s=0.0)
    spec = JobSpec("j", dp=2, compute_s=0.1, grad_bytes=4e8, iterations=6, alpha_s=0.0)
    up = topo.link_block(LinkKind.TOR_UP).start
    p = TransportParams(nak_s=0.0)
    s = sim(Fault(0, FaultKind.LINK_LOSSY, 0.0, up, severity=0.5), topo=topo, spec=spec, params=p)
    comm = 2 * 1 / 2 * 4e8 / (100 * GBPS)
    # every NCCL chunk is sent 1/keep = 2 times on average: the hop over the link runs at half rate
    mean_comm = float(np.mean(s.iteration_times)) - 0.1
    assert mean_comm == pytest.approx(2 * comm, rel=0.05)
    drops = s.tel.drops(0.0, np.inf, topo.n_links)
    assert drops[up] > 0 and drops.sum() == drops[up]
    chunks = 6 * 2 * (1 / 2) * spec.grad_bytes / P.chunk_bytes  # NCCL chunks over the lossy hop (one ring hop)
    assert drops[up] == pytest.approx(chunks, rel=0.1)  # (1 - keep) / keep = 1 resend per chunk


def test_flapping_port_halves_its_connection():
    topo = star8(ports=1)
    spec = JobSpec("j", dp=8, compute_s=0.1, grad_bytes=1e9, iterations=3, alpha_s=0.0)
    s = sim(Fault(0, FaultKind.NIC_FLAP, 0.0, 0, duration=100.0, severity=0.004), topo=topo, spec=spec)
    comm = 2 * 7 / 8 * 1e9 / (100 * GBPS)
    assert float(np.mean(s.iteration_times)) - 0.1 == pytest.approx(2 * comm, rel=0.05)


def test_switch_failure_reroutes_by_epoch():
    topo = clos(1, 2, 4, gpus_per_host=1, nic_ports=1, aggs_per_pod=2, hop_latency_s=0.0)
    s = sim(Fault(0, FaultKind.SWITCH_FAIL, 0.05, 0), topo=topo)
    assert len(s.epochs) == 2 and len(s.iter_end) == SPEC.iterations
    from hwcosim.models.systems.reliability.sim import agg_switch_links

    dead = agg_switch_links(topo, 0)
    assert not np.isin(s.colls[0].paths[1], dead).any()


def test_effects_know_no_fault_names():
    fx = effects_from_faults(star8(), [Fault(0, FaultKind.NAN, 1.0, 3)])
    assert isinstance(fx, Effects) and fx.nan_at[3] == 1.0
    s = sim(Fault(0, FaultKind.NAN, 0.15, 2))
    assert [x[2] for x in s.tel.losses] == [False, True, True, True]


def test_state_log_period_and_writer():
    s = sim(until=0.5)
    st = s.tel.state_log()
    assert np.allclose(np.round(st.t / 0.1), st.t / 0.1)
    assert (st.G >= st.T).all() and (st.T >= st.D).all() and (st.G - st.D <= P.window).all()
