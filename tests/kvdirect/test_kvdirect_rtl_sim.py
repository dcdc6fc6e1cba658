"""RTL simulation of the KV-Direct pipeline vs the golden store: every response, the memory image."""

import pytest

import cosim.designs.kvdirect.pipeline as ck
from cosim.designs.kvdirect.pipeline import run_pipeline
from cosim.flow.runner import SimFailure
from models.kvdirect.rtl_model import ATOMIC, PipelineParams, Request, Response, make_stream

pytestmark = pytest.mark.sim

# A: 64 buckets, 8 entries, 16 RS slots (false dependencies between buckets sharing a slot).
# B: 16 buckets, 16 entries, 64 RS slots (crowded buckets: many FULL answers, no false dependency).
PA = PipelineParams(memory_bytes=8192, entries=8, rs_slots=16)
PB = PipelineParams(memory_bytes=4096, hash_index_ratio=0.25, entries=16, rs_slots=64)


@pytest.mark.parametrize("dist", ["uniform", "zipf", "burst"])
@pytest.mark.parametrize("p", [PA, PB], ids=["A", "B"])
def test_no_forwarding_matches_golden_and_its_traffic(tmp_path, p, dist):
    reqs = make_stream(250, 40, dist, seed=len(dist), burst=5)
    res = run_pipeline(p, reqs, latency=12, outstanding=min(8, p.entries), forward=False, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0 and mt["bad_lines"] == 0
    # without forwarding every op makes exactly the golden store's memory accesses
    assert (mt["mem_reads"], mt["mem_writes"]) == (mt["golden_reads"], mt["golden_writes"]), mt
    assert mt["dut_forwarded"] == 0
    assert mt["dut_chained"] > 0  # dependencies did occur and were ordered


@pytest.mark.parametrize("p_idle,p_stall,p_mem_stall,jitter", [(0.0, 0.0, 0.0, 0), (0.3, 0.4, 0.0, 0),
                                                               (0.1, 0.2, 0.3, 25)])
@pytest.mark.parametrize("p", [PA, PB], ids=["A", "B"])
def test_forwarding_with_idle_backpressure_and_reordered_memory(tmp_path, p, p_idle, p_stall, p_mem_stall, jitter):
    reqs = make_stream(300, 30, "zipf", seed=int(10 * p_idle + 100 * p_stall), burst=0)
    res = run_pipeline(p, reqs, latency=20, outstanding=min(6, p.entries), jitter=jitter, forward=True,
                       p_idle=p_idle, p_stall=p_stall, p_mem_stall=p_mem_stall, seed=3, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0 and mt["bad_lines"] == 0
    assert mt["dut_forwarded"] > 0
    assert mt["mem_reads"] + mt["dut_forwarded"] == mt["golden_reads"]  # each op: one read or a forward
    assert mt["max_outstanding"] <= 6


def test_same_key_bursts_forward_and_beat_the_stalled_chain(tmp_path):
    """Atomic adds on one key: forwarding runs the chain at one op per execute pass (4 cycles), not per round trip."""
    reqs = [Request(0, 1, 77, 1)] + [Request(i & 0xFF, ATOMIC, 77, i, 0) for i in range(1, 120)]
    on = run_pipeline(PA, reqs, latency=40, outstanding=8, forward=True, test_dir=tmp_path / "on").metrics
    off = run_pipeline(PA, reqs, latency=40, outstanding=8, forward=False, test_dir=tmp_path / "off").metrics
    assert on["mismatches"] == off["mismatches"] == 0
    assert off["mem_reads"] == len(reqs) and on["mem_reads"] < len(reqs) // 4
    # without forwarding each add waits for the previous one's round trip (>= 40 cycles)
    assert off["cycles"] >= 40 * (len(reqs) - 1)
    assert on["ops_per_cycle"] > 8 * off["ops_per_cycle"]


def test_a_wrong_golden_response_fails_the_simulation(tmp_path, monkeypatch):
    real = ck.golden_run

    def corrupt(*a, **k):
        resp, img, tr = real(*a, **k)
        r = resp[17]
        resp[17] = Response(r.tag, r.status, r.existed, r.value ^ 1)
        return resp, img, tr

    monkeypatch.setattr(ck, "golden_run", corrupt)
    with pytest.raises(SimFailure, match="1 of 60 responses differ"):
        run_pipeline(PA, make_stream(60, 20, "uniform", 1), latency=5, outstanding=4, test_dir=tmp_path)


def test_a_wrong_golden_memory_image_fails_the_simulation(tmp_path, monkeypatch):
    real = ck.golden_run

    def corrupt(*a, **k):
        resp, img, tr = real(*a, **k)
        img = img.copy()
        img[64 * 3 + 60] ^= 0x10  # the bitmap / pointer area of bucket 3
        return resp, img, tr

    monkeypatch.setattr(ck, "golden_run", corrupt)
    with pytest.raises(SimFailure, match="1 of 64 bucket lines differ"):
        run_pipeline(PA, make_stream(60, 20, "uniform", 1), latency=5, outstanding=4, test_dir=tmp_path)
