"""Cycle model of the KV-Direct pipeline (models.kvdirect.cycles): the documented latencies, the
reservation-station slot limit, and cycle counts against the RTL."""

import shutil

import pytest
from hwcosim.models.kvdirect.cycles import EX_STAGES, simulate_cycles
from hwcosim.models.kvdirect.rtl_model import GET, PIPE_CYCLES, PUT, PipelineParams, Request, bucket_of, make_stream

P = PipelineParams(memory_bytes=8192, entries=8, rs_slots=64)


def _keys_in_distinct_buckets(n: int, p: PipelineParams) -> list[int]:
    seen, keys = set(), []
    k = 1
    while len(keys) < n:
        b = bucket_of(k, p.n_buckets)
        if b not in seen:
            seen.add(b)
            keys.append(k)
        k += 1
    return keys


@pytest.mark.parametrize("latency", [5, 40])
def test_one_op_takes_latency_plus_thirteen(latency):
    # RTL docstring: 5 hash + 1 dispatch + 1 memory port + the memory round trip + 4 execute + 1 response FIFO
    # + the output beat, counted from the accept cycle to the response beat inclusive
    r = simulate_cycles(P, [Request(0, GET, 7)], latency, 4)
    assert r["cycles"] == latency + 13 == latency + PIPE_CYCLES and r["mem_reads"] == 1 and r["mem_writes"] == 0


def test_forwarding_runs_a_same_bucket_chain_at_one_op_per_execute_pass():
    # a forwarded successor enters the execute pipeline when its predecessor retires: one op per 4 cycles
    reqs = [Request(i, PUT, 7, i) for i in range(6)]
    on = simulate_cycles(P, reqs, 40, 4, forward=True)
    off = simulate_cycles(P, reqs, 40, 4, forward=False)
    assert on["cycles"] == 40 + 13 + 5 * EX_STAGES
    assert on["forwarded"] == 5 and on["mem_reads"] == 1 and on["mem_writes"] == 1
    assert off["mem_reads"] == 6 and off["forwarded"] == 0
    assert off["cycles"] > 6 * 40  # every op of the chain pays its own round trip


def test_few_slots_serialise_different_buckets():
    keys = _keys_in_distinct_buckets(16, P)
    reqs = [Request(i, GET, k) for i, k in enumerate(keys)]
    many = simulate_cycles(P, reqs, 40, 8)
    one = simulate_cycles(PipelineParams(memory_bytes=8192, entries=8, rs_slots=1), reqs, 40, 8)
    assert many["chained"] == 0 and one["chained"] == 15
    assert one["cycles"] > 10 * many["cycles"] / 2  # false dependencies: one round trip per op, not overlapped
    assert simulate_cycles(PipelineParams(memory_bytes=8192, entries=2, rs_slots=64), reqs, 40, 2)["cycles"] > \
        many["cycles"]  # fewer entries, fewer reads in flight


def test_wrong_arguments():
    with pytest.raises(ValueError, match="latency and outstanding"):
        simulate_cycles(P, [Request(0, GET, 1)], 0, 4)
    with pytest.raises(ValueError, match="at least one request"):
        simulate_cycles(P, [], 10, 4)


@pytest.mark.sim
@pytest.mark.slow  # ~80 s of Icarus per run on the shared machine: make bench, not make test
@pytest.mark.parametrize("forward", [True, False], ids=["forward", "no-forward"])
def test_cycle_model_tracks_the_rtl(tmp_path, forward):
    from hwcosim.cosim.designs.kvdirect.pipeline import run_pipeline

    sim = "icarus" if shutil.which("iverilog") else "verilator"  # Icarus compiles instantly
    p = PipelineParams(memory_bytes=8192, entries=8, rs_slots=4)  # 64 buckets on 4 slots: many false dependencies
    reqs = make_stream(80, 60, "zipf", 3)
    rtl = run_pipeline(p, reqs, latency=20, outstanding=8, forward=forward, test_dir=tmp_path, sim=sim, waves=False)
    model = simulate_cycles(p, reqs, 20, 8, forward)
    rm = rtl.metrics
    assert rm["mismatches"] == 0
    # forwarding on: cycle for cycle on every stream measured so far; off: within 0.35 % (Zipf, 2,000 ops)
    assert model["cycles"] == pytest.approx(rm["cycles"], rel=0 if forward else 0.01)
    assert model["mem_reads"] == rm["mem_reads"]
    assert model["chained"] == rm["dut_chained"] and model["forwarded"] == rm["dut_forwarded"]
