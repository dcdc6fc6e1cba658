"""MELO packet simulator: delivery checks, closed forms, loss models, workloads."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hwcosim.models.melo import sim as melo_sim
from hwcosim.models.melo.sim import DeliveryError, LossModel, SimParams, _LossStream, simulate
from hwcosim.models.melo.workloads import DATA_MINING, WEB_SEARCH, poisson_flows

FLOWS = dict(workload="websearch", n_flows=40, load=0.6, max_flow_bytes=150e3, duration_us=1e6)


@pytest.mark.parametrize("scheme", ["gbn", "sr", "melo"])
@pytest.mark.parametrize(
    "net",
    [
        dict(loss=LossModel(0.03)),
        dict(loss=LossModel(0.02, mean_burst=5.0), reorder_prob=0.05, ack_loss=0.02),
        dict(loss=LossModel(0.05), pool_blocks=1, n_conns=6),  # MELO pool runs dry
    ],
)
def test_every_byte_delivered_once_in_order(scheme, net):
    p = SimParams(scheme=scheme, **({"n_conns": 8} | FLOWS | net), seed=3)
    r = simulate(p)  # raises DeliveryError on any violation
    assert r.complete
    assert len(r.fct_us) == p.n_flows and min(r.fct_us) > 0
    assert r.retx_pkts > 0 and r.sent_pkts >= r.delivered_pkts + r.retx_pkts
    if scheme == "melo" and p.pool_blocks == 1:
        assert r.melo_nack_pool > 0  # the fallback was exercised, and nothing was lost


class _DupGBN(melo_sim._GBNReceiver):
    def rx(self, c, psn):
        res = super().rx(c, psn)
        if res is not None and res[0] and psn == 5:
            return res[0] * 2, res[1], res[2]  # releases PSN 5 twice
        return res


class _LossyGBN(melo_sim._GBNReceiver):
    def rx(self, c, psn):
        res = super().rx(c, psn)
        if res is not None and res[0] and psn == 7 and c == 0:
            return [], res[1], res[2]  # forgets to release PSN 7 and everything after it on conn 0
        return res


def test_checker_catches_duplicate(monkeypatch):
    monkeypatch.setattr(melo_sim, "_GBNReceiver", _DupGBN)
    with pytest.raises(DeliveryError, match="released PSN 5, expected 6"):
        simulate(SimParams(scheme="gbn", n_conns=2, duration_us=50))


def test_checker_catches_missing_bytes(monkeypatch):
    monkeypatch.setattr(melo_sim, "_GBNReceiver", _LossyGBN)
    with pytest.raises(DeliveryError, match="conn 0"):
        simulate(SimParams(scheme="gbn", n_conns=1, **FLOWS))


def test_lossless_backlogged_closed_form():
    """No loss: the link never idles; a packet sent in slot s is delivered in slot s + d."""
    for scheme in ("gbn", "sr", "melo"):
        p = SimParams(scheme=scheme, n_conns=3, duration_us=200.0)
        r = simulate(p)
        slots = round(p.duration_us * 1e3 / p.slot_ns)
        assert r.delivered_pkts == slots - p.one_way_slots
        assert r.sent_pkts == slots and r.retx_pkts == 0 and r.timeouts == 0


def test_single_flow_fct_closed_form():
    """One flow on an idle lossless link: FCT = (packets - 1 + one-way delay) slots."""
    p = SimParams(scheme="melo", n_conns=1, workload="websearch", n_flows=1, duration_us=1e6, seed=11)
    r = simulate(p)
    arr, size = poisson_flows(
        WEB_SEARCH, 1, p.load, p.link_gbps, np.random.default_rng(np.random.SeedSequence(p.seed).spawn(4)[3])
    )
    pkts = math.ceil(int(size[0]) / p.mtu_bytes)
    assert r.fct_us[0] == pytest.approx((pkts - 1 + p.one_way_slots) * p.slot_ns / 1e3)


def test_melo_with_ample_pool_equals_full_bitmap_sr():
    """If MELO never runs out of blocks it must behave exactly like a full per-connection bitmap."""
    kw = dict(n_conns=12, loss=LossModel(0.03), reorder_prob=0.02, pool_blocks=4096, seed=5, **FLOWS)
    a, b = simulate(SimParams(scheme="sr", **kw)), simulate(SimParams(scheme="melo", **kw))
    assert b.melo_nack_pool == 0
    assert (a.sent_pkts, a.retx_pkts, a.timeouts, a.fct_us) == (
        b.sent_pkts,
        b.retx_pkts,
        b.timeouts,
        b.fct_us,
    )


def test_melo_beats_gbn_on_lossy_single_connection():
    kw = dict(n_conns=1, loss=LossModel(0.02), duration_us=1500.0, seed=2)
    g, m = simulate(SimParams(scheme="gbn", **kw)), simulate(SimParams(scheme="melo", **kw))
    assert m.goodput_gbps > 1.5 * g.goodput_gbps
    assert g.mem_avg_B == (24 + 1) / 8 and m.mem_avg_B > g.mem_avg_B


def test_memory_accounting_lossless():
    p = SimParams(scheme="melo", n_conns=10, duration_us=100.0)
    r = simulate(p)
    ep = p.engine_params()
    assert r.melo_peak_blocks == 0
    assert r.mem_avg_B == pytest.approx(ep.metadata_bits / 8 + ep.allocator_bits / 8 / 10)
    assert r.mem_provisioned_B == pytest.approx(ep.on_chip_bits / 8 / 10)
    s = simulate(SimParams(scheme="sr", n_conns=10, duration_us=100.0))
    assert s.mem_avg_B == (24 + p.window) / 8


def test_same_seed_same_result():
    kw = dict(scheme="melo", n_conns=5, loss=LossModel(0.02, 3.0), reorder_prob=0.1, **FLOWS)
    a, b = simulate(SimParams(seed=1, **kw)), simulate(SimParams(seed=1, **kw))
    c = simulate(SimParams(seed=2, **kw))
    assert a.fct_us == b.fct_us and a.sent_pkts == b.sent_pkts
    assert a.fct_us != c.fct_us


@pytest.mark.parametrize("rate, burst", [(0.01, 1.0), (0.05, 1.0), (0.02, 4.0), (0.05, 10.0)])
def test_loss_models_rate_and_burst(rate, burst):
    s = _LossStream(LossModel(rate, burst), np.random.default_rng(0), chunk=1 << 16)
    seq = []
    for _ in range(8):
        s.refill()
        seq += s.buf
    x = np.array(seq, dtype=np.int8)
    n = len(x)
    # burst lengths: runs of ones
    d = np.diff(np.concatenate([[0], x, [0]]))
    runs = np.flatnonzero(d == -1) - np.flatnonzero(d == 1)
    # tolerance: 6 sigma of the run-count-driven estimate
    assert abs(x.mean() - rate) < 6 * math.sqrt(rate * burst / n) + 1e-4
    assert runs.mean() == pytest.approx(1.0 / (1.0 - rate) if burst == 1.0 else burst, rel=0.1)


def test_workload_cdfs():
    # closed-form mean of the piecewise-linear web-search CDF, by hand (KB, segment midpoints)
    pts = [
        (0, 0),
        (10, 0.15),
        (20, 0.2),
        (30, 0.3),
        (50, 0.4),
        (80, 0.53),
        (200, 0.6),
        (1000, 0.7),
        (2000, 0.8),
        (5000, 0.9),
        (10000, 0.97),
        (30000, 1.0),
    ]
    mean_kb = sum((p1 - p0) * (s0 + s1) / 2 for (s0, p0), (s1, p1) in zip(pts[:-1], pts[1:], strict=True))
    assert WEB_SEARCH.mean() == pytest.approx(mean_kb * 1e3)
    rng = np.random.default_rng(1)
    x = WEB_SEARCH.sample(rng, 200_000)
    assert x.dtype == np.int64 and x.min() >= 1 and x.max() <= 30e6
    assert np.mean(x <= 10e3) == pytest.approx(0.15, abs=0.01)
    assert np.mean(x <= 1e6) == pytest.approx(0.70, abs=0.01)
    assert x.mean() == pytest.approx(WEB_SEARCH.mean(), rel=0.03)
    y = DATA_MINING.sample(rng, 200_000, max_bytes=1e6)
    assert y.max() == 1_000_000 and y.mean() == pytest.approx(DATA_MINING.mean(1e6), rel=0.03)
    assert np.mean(y <= 10e3) == pytest.approx(0.80, abs=0.01)


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"scheme": "tcp"}, "scheme"),
        ({"n_conns": 200_000}, "n_conns"),
        ({"workload": "hadoop"}, "workload"),
        ({"loss": 0.01}, "LossModel"),
        ({"max_blocks_per_conn": 2}, "cover a window"),
        ({"rtt_us": 0}, "rtt_us"),
    ],
)
def test_wrong_params(kw, word):
    with pytest.raises(ValueError, match=word):
        SimParams(**kw)
    with pytest.raises(ValueError, match="mean_burst"):
        LossModel(0.01, 0.5)
