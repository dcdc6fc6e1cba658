"""RTL simulation of the KV-Direct pipeline vs the golden store: every response, the memory image."""

import hwcosim.cosim.designs.kvdirect.pipeline as ck
import pytest
from hwcosim.cosim.designs.kvdirect.pipeline import run_pipeline
from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.models.kvdirect.rtl_model import ATOMIC, PipelineParams, Request, Response, make_stream

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


def _colliding_stream(p, sizes, n_ops: int, seed: int) -> list[Request]:
    """PUTs, GETs and DELETEs on groups of keys that share a bucket (``sizes``: keys per group),
    with values from {1, 2}. A bucket holds two inline KVs, so with two keys PUTs repeat a
    key's value where it stands (no write) or after a DELETE of the other key left an earlier
    free run (the KV moves: a write), updates land in full buckets, and a third key finds its
    bucket full."""
    import random

    from hwcosim.models.kvdirect.rtl_model import DELETE, GET, PUT, bucket_of

    rng = random.Random(seed)
    groups, by_bucket, k = [], {}, 1
    while len(groups) < len(sizes):
        b = bucket_of(k, p.n_buckets)
        by_bucket.setdefault(b, []).append(k)
        if len(by_bucket[b]) == sizes[len(groups)]:
            groups.append(by_bucket[b])
            by_bucket[b] = [None] * 9          # a bucket serves one group
        k += 1
    ops = rng.choices([PUT, GET, DELETE], weights=[4, 1, 2], k=n_ops)
    return [Request(i & 0xFF, op, rng.choice(rng.choice(groups)), rng.choice((1, 2)))
            for i, op in enumerate(ops)]


@pytest.mark.parametrize("forward", [False, True], ids=["chained", "forwarded"])
def test_repeated_puts_in_crowded_buckets_write_only_when_the_bucket_changes(tmp_path, forward):
    from hwcosim.models.kvdirect.rtl_model import OK, PUT, RTLStore, bucket_of, execute, key_to_bytes

    reqs = _colliding_stream(PA, (2, 2, 3), 300, seed=7)
    # the stream reaches every case of the PUT's write decision (counted on the golden store)
    cases = {"same value, not written": 0, "same value, moved": 0, "update in a full bucket": 0}
    store = RTLStore(PA)
    keys = {r.key for r in reqs}
    for r in reqs:
        before = store.get(key_to_bytes(r.key))
        neighbours = sum(store.get(key_to_bytes(q)) is not None for q in keys
                         if q != r.key and bucket_of(q, PA.n_buckets) == bucket_of(r.key, PA.n_buckets))
        resp = execute(store, r)
        if r.opcode == PUT and resp.status == OK and before is not None:
            if int.from_bytes(before, "little") == r.operand:
                cases["same value, not written" if store.last.writes == 0 else "same value, moved"] += 1
            if neighbours == 1:
                cases["update in a full bucket"] += 1
    assert all(cases.values()), cases
    res = run_pipeline(PA, reqs, latency=10, outstanding=6, forward=forward, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0 and mt["bad_lines"] == 0
    if not forward:
        assert (mt["mem_reads"], mt["mem_writes"]) == (mt["golden_reads"], mt["golden_writes"]), mt


def test_more_entries_than_one_match_flag_group(tmp_path):
    """32 entries (the bridge's engine, whose simulation build this shares): the dispatch stage's
    registered match flags cover 16 entries each, and with a long memory latency a hot key's
    chain spans both groups."""
    from hwcosim.cosim.designs.kvdirect.bridge import ENGINE

    assert ENGINE.entries == 32
    reqs = make_stream(300, 12, "zipf", seed=5)
    res = run_pipeline(ENGINE, reqs, latency=60, outstanding=8, forward=True, test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0 and mt["bad_lines"] == 0
    assert mt["dut_chained"] > 32
