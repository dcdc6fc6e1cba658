"""cocotb testbench of the BBS LSTM engine in delta mode against
:func:`hwcosim.models.bbs.lstm_delta.lstm_delta_golden`.

Inputs (written by :func:`hwcosim.cosim.designs.bbs.lstm_delta.run_lstm_delta`): ``inputs.json`` with the
parameter set, ``budget`` (J), ``theta`` (raw threshold) and the traffic pattern (``p_idle``,
``p_stall``, ``seed``); ``arrays.npz`` with CSB ``values``/``indices``, ``bias``, ``xs``
(N, T, I raw), ``expected`` (N, T, H raw hidden states of the delta golden model),
``beats_per_group`` (N, T: ``J_t``), ``selected`` and ``candidates`` (N, T column counts).

Every hidden-state word is compared; the DUT's ``delta_selected`` / ``delta_candidates`` /
``mac_beats`` counters are compared with the model's counts. Writes ``metrics.json`` (cycles
from the first input beat accepted to the last hidden beat, the :class:`DeltaCycleModel`
expectation, counters, mismatches, ``h_rtl``).
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from hwcosim.cosim.tb.common import (
    CycleCounter,
    StreamDriver,
    StreamSink,
    arrays,
    inputs,
    start_clock_and_reset,
    write_metrics,
)
from hwcosim.models.bbs.lstm import LSTMParams, pack_bias_beats, pack_x_beats, unpack_h_beats
from hwcosim.models.bbs.lstm_delta import DeltaCycleModel
from hwcosim.models.bbs.spmxv import pack_weight_beats


def _int(sig) -> int:
    """A counter's value, -1 if it holds X/Z (reported as a mismatch, not a crash)."""
    v = sig.value
    return int(v) if v.is_resolvable else -1


@cocotb.test()
async def lstm_delta_matches_golden(dut):
    cfg = inputs()
    p = LSTMParams.from_dict(cfg["params"])
    a = arrays()
    xs, expected, bpg = a["xs"], a["expected"], a["beats_per_group"]
    n, T = xs.shape[0], xs.shape[1]
    seed = int(cfg.get("seed", 1))
    p_idle = float(cfg.get("p_idle", 0.0))

    dut.seq_len.value = T
    dut.delta_theta.value = int(cfg["theta"])
    await start_clock_and_reset(dut)
    counter = CycleCounter(dut.clk)
    wdrv = StreamDriver(dut, "wload", counter, p_idle, seed)
    bdrv = StreamDriver(dut, "bload", counter, p_idle, seed + 1)
    xdrv = StreamDriver(dut, "x", counter, p_idle, seed + 2)
    sink = StreamSink(dut, "h", counter, float(cfg.get("p_stall", 0.0)), seed + 3)

    wl = cocotb.start_soon(wdrv.send(pack_weight_beats(p.bbs, a["values"], a["indices"])))
    bl = cocotb.start_soon(bdrv.send(pack_bias_beats(p, a["bias"])))
    await wl
    await bl
    await RisingEdge(dut.clk)
    assert int(dut.loaded.value) == 1, "weights and biases sent but 'loaded' is low"
    cocotb.start_soon(xdrv.send(pack_x_beats(p, xs)))

    beats = n * T * p.hidden // p.units
    model = DeltaCycleModel(p)
    expected_cycles = model.expected(bpg)
    await sink.wait_for(beats, 50 * (expected_cycles + 200))
    await ClockCycles(dut.clk, 40)  # nothing more may come out
    await ReadOnly()

    got = unpack_h_beats(p, sink.words)
    want = expected.reshape(-1)
    extra = len(sink.words) - beats
    got = got[: want.size]
    mism = np.flatnonzero(got != want)
    cycles = sink.cycles[beats - 1] - xdrv.transfers[0] + 1
    G = p.rows // p.pes
    metrics = {
        "n_seq": n, "seq_len": T, "beats": beats, "cycles": int(cycles), "expected": expected_cycles,
        "theta": int(cfg["theta"]), "budget": int(cfg["budget"]),
        "model_mac_beats": int(G * bpg.sum()), "model_selected": int(a["selected"].sum()),
        "model_candidates": int(a["candidates"].sum()),
        "dut_cycles": _int(dut.cycles), "dut_mac_beats": _int(dut.mac_beats),
        "dut_steps": _int(dut.steps), "dut_stall_out": _int(dut.stall_out),
        "dut_delta_selected": _int(dut.delta_selected), "dut_delta_candidates": _int(dut.delta_candidates),
        "mismatches": int(mism.size), "extra_beats": int(extra), "protocol_errors": sink.protocol_errors[:5],
        "h_rtl": got.reshape(n, T, p.hidden).tolist(),
    }
    write_metrics(metrics)
    if mism.size:
        H = p.hidden
        first = [(int(i // (T * H)), int(i // H % T), int(i % H), int(got[i]), int(want[i])) for i in mism[:8]]
        raise AssertionError(f"{mism.size} of {want.size} hidden words differ; (seq, step, unit, rtl, golden): {first}")
    assert extra == 0, f"{extra} unexpected output beats"
    assert not sink.protocol_errors, sink.protocol_errors[:5]
    assert metrics["dut_steps"] == n * T, metrics
    assert metrics["dut_mac_beats"] == metrics["model_mac_beats"], metrics
    assert metrics["dut_delta_selected"] == metrics["model_selected"], metrics
    assert metrics["dut_delta_candidates"] == metrics["model_candidates"], metrics
