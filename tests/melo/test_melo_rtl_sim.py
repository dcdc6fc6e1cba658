"""RTL simulation of the MELO receiver engine vs the golden model: every released PSN, every
response word (kind, cumulative PSN, pool occupancy) and the counters compared; no block leaks."""

import json

import pytest
from hwcosim.cosim.designs.melo.engine import golden_streams, in_order_traffic, lossy_traffic, run_melo_engine
from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.models.melo.engine import MeloEngineParams

pytestmark = pytest.mark.sim

# a moderate pool, a pool far too small (exhaustion fallback, 8-bit PSNs wrap), odd sizes
MODERATE = MeloEngineParams(n_conns=16, psn_bits=12, block_bits=16, pool_blocks=24, max_blocks_per_conn=3)
TINY_POOL = MeloEngineParams(n_conns=8, psn_bits=8, block_bits=8, pool_blocks=3, max_blocks_per_conn=4)
ODD = MeloEngineParams(n_conns=5, psn_bits=10, block_bits=32, pool_blocks=7, max_blocks_per_conn=2)


def _report(tmp_path, name, p, metrics):
    out = tmp_path.parent.parent / "reports"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"melo_engine_{name}.json").write_text(json.dumps({"case": name, **p.__dict__, **metrics}, indent=1))
    print(f"\n{name}: {metrics['data_events']} packets in {metrics['cycles']} cycles "
          f"= {metrics['pkts_per_cycle']:.3f} packets/cycle, {metrics['delivered']} released")


def _delivered_per_conn(p, words):
    mask = (1 << p.psn_bits) - 1
    per = {}
    for w in words:
        per.setdefault(w >> p.psn_bits, []).append(w & mask)
    return per


@pytest.mark.parametrize("name,p,n_pkts", [("moderate", MODERATE, 40), ("tiny_pool", TINY_POOL, 30),
                                           ("odd", ODD, 50)])
@pytest.mark.parametrize("p_idle,p_stall", [(0.0, 0.0), (0.3, 0.5)])
def test_lossy_traffic_matches_golden(tmp_path, name, p, n_pkts, p_idle, p_stall):
    events = lossy_traffic(p, n_pkts, loss=0.08, dup=0.05, seed=len(name))
    g = golden_streams(p, events)
    # the stimulus exercises every path: in order, buffered, duplicates, drops
    st = g["stats"]
    assert st["acks"] and st["sacks"] and st["dups"] and st["nack_pool"] + st["nack_window"]
    res = run_melo_engine(p, events, golden=g, p_idle=p_idle, p_stall_d=p_stall, p_stall_r=p_stall,
                          seed=7, test_dir=tmp_path)
    mt = res.metrics
    assert mt["responses"] == g["data_events"] and mt["delivered"] == len(g["deliv"])
    # quiescence: every block is back on the free list, read from the status port
    assert g["quiescent"] and mt["free_count"] == p.pool_blocks and mt["blocks_in_use"] == 0
    # nothing lost: every connection released all its PSNs exactly once, in order
    per = _delivered_per_conn(p, g["deliv"])
    starts = {c: psn for c, psn, op in events if op}
    M = 1 << p.psn_bits
    for c in range(p.n_conns):
        assert per[c] == [(starts[c] + i) % M for i in range(n_pkts)]
    if p is TINY_POOL:
        assert st["nack_pool"] > 0 and mt["dut_stats"]["peak_blocks"] == p.pool_blocks
    if p_stall:
        assert mt["dut_stall_r"] > 0 and mt["dut_stall_d"] > 0
    else:  # free-flowing streams: the cycle model predicts the whole run to the cycle
        assert mt["cycles"] == g["model_cycles"], (mt["cycles"], g["model_cycles"])
    _report(tmp_path, f"{name}_idle{p_idle}_stall{p_stall}", p, mt)


def test_in_order_traffic_runs_at_two_cycles_per_packet(tmp_path):
    """The stated throughput: loss-free in-order packets take 2 cycles each (1/2 packet/cycle:
    classify into registered flags (META), act on them (DECIDE); the next packet's metadata read
    overlaps both), and the cycle model predicts the run to the cycle."""
    n = 4
    events = in_order_traffic(MODERATE, n)
    g = golden_streams(MODERATE, events)
    res = run_melo_engine(MODERATE, events, golden=g, test_dir=tmp_path)
    mt = res.metrics
    N = MODERATE.n_conns * n
    # first event taken at t, its response leaves at t + 4; one more packet every 2 cycles
    assert mt["cycles"] == 2 * N + 3 == g["model_cycles"], mt
    assert mt["dut_stats"]["acks"] == N and mt["dut_stats"]["allocs"] == 0


def test_back_to_back_packets_of_one_connection_are_forwarded(tmp_path):
    """Every packet of one connection follows its predecessor at once: the metadata read of the
    next one misses the write-back of the previous one and is forwarded (in order, then holes,
    duplicates and a run released behind them), still 2 cycles per in-order packet."""
    p = MODERATE
    events = [(3, 4090, True)] + [(3, (4090 + i) % 4096, False) for i in range(24)]
    events += [(3, (4090 + i) % 4096, False) for i in (26, 25, 27, 40, 90, 26, 24, 30, 29, 28, 31, 20)]
    events += [(3, (4090 + i) % 4096, False) for i in range(32, 45)]
    g = golden_streams(p, events)
    st = g["stats"]
    assert st["sacks"] and st["dups"] and st["nack_window"] and st["allocs"] and st["frees"]
    res = run_melo_engine(p, events, golden=g, test_dir=tmp_path)
    assert res.metrics["cycles"] == g["model_cycles"], (res.metrics["cycles"], g["model_cycles"])
    head = events[:25]
    mt = run_melo_engine(p, head, test_dir=tmp_path / "head").metrics
    assert mt["cycles"] == 2 * 24 + 3


def test_a_wrong_golden_word_fails_the_simulation(tmp_path):
    """The comparison is real: one corrupted response word (its occupancy field) must fail."""
    p = ODD
    events = lossy_traffic(p, 10, seed=3)
    g = golden_streams(p, events)
    i = next(j for j, w in enumerate(g["resp"]) if w >> p.response_bits)  # a word with blocks in use
    g["resp"][i] ^= 1 << p.response_bits
    with pytest.raises(SimFailure, match=f"1 of {len(g['resp'])} response words differ; first at {i}"):
        run_melo_engine(p, events, golden=g, test_dir=tmp_path)


def test_a_wrong_release_fails_the_simulation(tmp_path):
    p = ODD
    events = lossy_traffic(p, 10, seed=4)
    g = golden_streams(p, events)
    g["deliv"][5] += 1
    with pytest.raises(SimFailure, match="released-PSN stream differs from the golden model at beat 5"):
        run_melo_engine(p, events, golden=g, test_dir=tmp_path)


def test_events_outside_the_contract_are_dropped_and_counted(tmp_path):
    """conn >= n_conns and an open on a connection holding blocks leave no trace but a count."""
    p = ODD  # 5 connections: ids 5..7 are addressable by the 3-bit field but do not exist
    events = [(0, 100, True), (0, 103, False), (6, 1, False), (0, 7, True), (7, 0, True),
              (0, 101, False), (0, 100, False), (0, 102, False), (0, 7, True), (0, 7, False), (3, 0, False)]
    g = golden_streams(p, events)
    assert g["rejected"] == 3 and g["quiescent"]
    res = run_melo_engine(p, events, golden=g, test_dir=tmp_path)
    assert res.metrics["dut_rejected"] == 3 and res.metrics["delivered"] == 6
