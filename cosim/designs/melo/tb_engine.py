"""cocotb testbench of the MELO receiver engine against :class:`hwcosim.models.melo.engine.MeloEngineModel`.

Inputs (written by :func:`hwcosim.cosim.designs.melo.engine.run_melo_engine`), all in ``inputs.json`` (response words
can exceed 64 bits, so they travel as JSON integers): ``params``; ``events`` (input words);
``deliv`` and ``resp`` (the golden output words); ``stats``, ``free_count``, ``quiescent`` (the
golden model's final state); ``p_idle`` (probability of an idle cycle before each input beat),
``p_stall_d`` / ``p_stall_r`` (probability that an output sink refuses a cycle), ``seed``.

Checks: every released-PSN word and every response word (which carries the pool occupancy after
the packet) equal the golden words, in order; no extra beat appears; the stream rule holds on
both outputs; the engine reaches ``idle``; its counters equal the golden statistics; and at
quiescence ``free_count == pool_blocks`` (no block leaked). Writes ``metrics.json``.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from hwcosim.cosim.flow.runs import as_words
from hwcosim.cosim.tb.common import (
    CycleCounter,
    StreamDriver,
    StreamSink,
    inputs,
    start_clock_and_reset,
    write_metrics,
    write_outputs,
)
from hwcosim.models.melo.engine import KIND_NAMES, MeloEngineParams, unpack_response_beat

_STATS = ("packets", "acks", "sacks", "dups", "nack_pool", "nack_window", "allocs", "frees")


def _first_mismatch(got: list[int], want: list[int]) -> int | None:
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return i
    return None if len(got) == len(want) else min(len(got), len(want))


def _fmt_resp(p, w):
    if w is None:
        return "(none)"
    r, used = unpack_response_beat(p, w)
    return f"{KIND_NAMES[r.kind]} conn={r.conn} cum={r.cum_psn} psn={r.psn} used={used}"


@cocotb.test()
async def melo_engine_matches_golden(dut):
    cfg = inputs()
    p = MeloEngineParams(**cfg["params"])
    events, exp_d, exp_r = cfg["events"], cfg["deliv"], cfg["resp"]
    seed = int(cfg.get("seed", 1))
    p_idle, p_sd, p_sr = (float(cfg.get(k, 0.0)) for k in ("p_idle", "p_stall_d", "p_stall_r"))

    for name in ("i__valid", "d__ready", "r__ready"):
        getattr(dut, name).value = 0
    await start_clock_and_reset(dut)
    counter = CycleCounter(dut.clk)
    # wait for the initialisation pass (under Icarus, i.ready reads X until the FSM first
    # changes state: Amaranth's combinational always-blocks are not evaluated at time zero)
    while str(dut.idle.value) != "1":
        if counter.now > max(p.n_conns, p.pool_blocks) + 50:
            raise AssertionError("the engine did not finish its initialisation pass")
        await RisingEdge(dut.clk)
    drv = StreamDriver(dut, "i", counter, p_idle, seed)
    dsink = StreamSink(dut, "d", counter, p_sd, seed + 1)
    rsink = StreamSink(dut, "r", counter, p_sr, seed + 2)
    cocotb.start_soon(drv.send(events))

    slow = 1.0 / ((1.0 - p_idle) * (1.0 - max(p_sd, p_sr)) + 1e-9)
    budget = int(slow * 12 * (len(events) + len(exp_d) + p.max_blocks_per_conn * len(events))) \
        + max(p.n_conns, p.pool_blocks) + 500
    await rsink.wait_for(len(exp_r), budget)
    await dsink.wait_for(len(exp_d), budget)
    start = counter.now
    while not int(dut.idle.value):
        if counter.now - start > 1000:
            raise AssertionError("the engine did not return to idle after the last response")
        await RisingEdge(dut.clk)
    await ClockCycles(dut.clk, 20)  # nothing more may come out
    await ReadOnly()

    n_open = sum(1 for w in events if w >> (p.psn_bits + p.conn_bits))
    data_events = len(exp_r)
    cycles = rsink.cycles[-1] - drv.transfers[n_open] + 1 if data_events else 0
    dut_stats = {k: int(getattr(dut, k).value) for k in _STATS}
    dut_stats["peak_blocks"] = int(dut.peak_blocks.value)
    metrics = {
        "events": len(events), "data_events": data_events, "responses": len(rsink.words),
        "delivered": len(dsink.words), "cycles": int(cycles),
        "pkts_per_cycle": data_events / cycles if cycles else 0.0,
        "dut_cycles": int(dut.cycles.value), "dut_delivered": int(dut.delivered.value),
        "dut_stall_d": int(dut.stall_d.value), "dut_stall_r": int(dut.stall_r.value),
        "dut_rejected": int(dut.rejected.value), "free_count": int(dut.free_count.value),
        "blocks_in_use": int(dut.blocks_in_use.value), "dut_stats": dut_stats,
        "protocol_errors": (dsink.protocol_errors + rsink.protocol_errors)[:5],
    }
    write_metrics(metrics)
    write_outputs(rtl_deliv=as_words(dsink.words), rtl_resp=as_words(rsink.words))

    i = _first_mismatch(rsink.words, exp_r)
    if i is not None:
        got = rsink.words[i] if i < len(rsink.words) else None
        want = exp_r[i] if i < len(exp_r) else None
        n_bad = sum(a != b for a, b in zip(rsink.words, exp_r)) + abs(len(rsink.words) - len(exp_r))
        raise AssertionError(f"{n_bad} of {len(exp_r)} response words differ; first at {i}: "
                             f"rtl {_fmt_resp(p, got)} vs golden {_fmt_resp(p, want)}")
    i = _first_mismatch(dsink.words, exp_d)
    if i is not None:
        mask = (1 << p.psn_bits) - 1

        def fmt(w):
            return "(none)" if w is None else f"conn={w >> p.psn_bits} psn={w & mask}"

        got = dsink.words[i] if i < len(dsink.words) else None
        want = exp_d[i] if i < len(exp_d) else None
        raise AssertionError(f"released-PSN stream differs from the golden model at beat {i} of {len(exp_d)}: "
                             f"rtl {fmt(got)} vs golden {fmt(want)}")
    assert not metrics["protocol_errors"], metrics["protocol_errors"]
    want_stats = {k: cfg["stats"][k] for k in (*_STATS, "peak_blocks")}
    assert dut_stats == want_stats, f"counters {dut_stats} != golden {want_stats}"
    assert metrics["dut_delivered"] == len(exp_d), metrics
    assert metrics["dut_rejected"] == cfg.get("rejected", 0), metrics
    assert metrics["free_count"] == cfg["free_count"], f"free_count {metrics['free_count']} != {cfg['free_count']}"
    if cfg["quiescent"]:
        assert metrics["free_count"] == p.pool_blocks and metrics["blocks_in_use"] == 0, \
            f"blocks leaked at quiescence: free_count {metrics['free_count']} of {p.pool_blocks}"
