"""cocotb testbench of the BBS LSTM layer engine against :func:`hwcosim.models.bbs.lstm.lstm_golden`.

Inputs (written by :func:`hwcosim.cosim.designs.bbs.lstm.run_lstm`): ``inputs.json`` with the parameter set,
``seq_len`` and the traffic pattern (``p_idle``: idle probability before each input/load beat;
``p_stall``: probability the ``h`` sink refuses a cycle; ``seed``); ``arrays.npz`` with CSB
``values``/``indices``, ``bias`` (raw gate_fmt, physical order), ``xs`` (N, T, I raw) and
``expected`` (N, T, H raw hidden states of the golden model).

Every hidden-state word is compared. Writes ``metrics.json``: cycles from the first input beat
accepted to the last hidden beat, ideal/expected of :class:`hwcosim.models.bbs.lstm.LSTMCycleModel`,
the DUT's counters, mismatches, and the hidden states the RTL produced (``h_rtl``), so the
caller can compute task accuracy from the RTL's own output.
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
from hwcosim.models.bbs.lstm import LSTMCycleModel, LSTMParams, pack_bias_beats, pack_x_beats, unpack_h_beats
from hwcosim.models.bbs.spmxv import pack_weight_beats


@cocotb.test()
async def lstm_matches_golden(dut):
    cfg = inputs()
    p = LSTMParams.from_dict(cfg["params"])
    a = arrays()
    xs, expected = a["xs"], a["expected"]
    n, T = xs.shape[0], xs.shape[1]
    seed = int(cfg.get("seed", 1))
    p_idle = float(cfg.get("p_idle", 0.0))

    dut.seq_len.value = T
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
    model = LSTMCycleModel(p)
    budget = 50 * (model.expected(n, T) + 200)
    await sink.wait_for(beats, budget)
    await ClockCycles(dut.clk, 40)  # nothing more may come out
    await ReadOnly()

    got = unpack_h_beats(p, sink.words)
    want = expected.reshape(-1)
    extra = len(sink.words) - beats
    got = got[: want.size]
    mism = np.flatnonzero(got != want)
    cycles = sink.cycles[beats - 1] - xdrv.transfers[0] + 1
    metrics = {
        "n_seq": n, "seq_len": T, "beats": beats, "cycles": int(cycles), "ideal": model.ideal(n, T),
        "expected": model.expected(n, T), "utilisation": model.utilisation(cycles, n, T),
        "dut_cycles": int(dut.cycles.value), "dut_mac_beats": int(dut.mac_beats.value),
        "dut_steps": int(dut.steps.value), "dut_stall_out": int(dut.stall_out.value),
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
    assert metrics["dut_mac_beats"] >= n * T * p.bbs.weight_beats, metrics
    assert metrics["dut_steps"] == n * T, metrics
