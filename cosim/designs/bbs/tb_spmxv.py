"""cocotb testbench of the BBS SpMxV engine against :func:`hwcosim.models.bbs.spmxv.spmxv`, word by word.

Inputs (written by :func:`hwcosim.cosim.designs.bbs.spmxv.run_spmxv`): ``inputs.json`` with the parameter set and the
traffic pattern (``p_idle_w``, ``p_idle_x``: probability of an idle cycle before each input beat;
``p_stall``: probability that the output sink refuses a cycle; ``seed``), ``arrays.npz`` with
``values``/``indices`` (CSB, raw), ``xs`` (vectors, raw) and ``expected`` (golden results, raw).
Writes ``metrics.json``: cycles measured from the first vector beat to the last result beat, the
ideal and expected counts of :class:`hwcosim.models.bbs.spmxv.CycleModel`, the DUT's counters, mismatches.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly
from hwcosim.cosim.tb.common import (
    CycleCounter,
    StreamDriver,
    StreamSink,
    arrays,
    inputs,
    start_clock_and_reset,
    write_metrics,
    write_outputs,
)
from hwcosim.models.bbs.spmxv import BBSParams, CycleModel, pack_vector_beats, pack_weight_beats, unpack_output_beats


@cocotb.test()
async def spmxv_matches_golden(dut):
    cfg = inputs()
    p = BBSParams.from_dict(cfg["params"])
    a = arrays()
    xs, expected = a["xs"], a["expected"]
    n = xs.shape[0]
    seed = int(cfg.get("seed", 1))

    await start_clock_and_reset(dut)
    counter = CycleCounter(dut.clk)
    wdrv = StreamDriver(dut, "w", counter, cfg.get("p_idle_w", 0.0), seed)
    xdrv = StreamDriver(dut, "x", counter, cfg.get("p_idle_x", 0.0), seed + 1)
    sink = StreamSink(dut, "y", counter, cfg.get("p_stall", 0.0), seed + 2)

    wwords = pack_weight_beats(p, a["values"], a["indices"])
    xwords = [w for x in xs for w in pack_vector_beats(p, x)]
    cocotb.start_soon(xdrv.send(xwords))
    cocotb.start_soon(wdrv.send(wwords * n))

    beats = n * p.row_groups
    model = CycleModel(p)
    budget = 50 * (model.expected(n) + 100)
    await sink.wait_for(beats, budget)
    await ClockCycles(dut.clk, 2 * 4 + 8)  # nothing more may come out
    await ReadOnly()

    got = unpack_output_beats(p, sink.words).reshape(-1)
    want = expected.reshape(-1)
    extra = len(sink.words) - beats
    mism = np.flatnonzero(got[: want.size] != want) if got.size >= want.size else np.arange(want.size)
    cycles = sink.cycles[beats - 1] - xdrv.transfers[0] + 1
    metrics = {
        "n_vectors": n, "beats": beats, "cycles": int(cycles), "ideal": model.ideal(n),
        "expected": model.expected(n), "utilisation": model.utilisation(cycles, n),
        "dut_cycles": int(dut.cycles.value), "dut_mac_beats": int(dut.mac_beats.value),
        "dut_stall_out": int(dut.stall_out.value), "dut_starve_w": int(dut.starve_w.value),
        "mismatches": int(mism.size), "extra_beats": int(extra), "protocol_errors": sink.protocol_errors[:5],
    }
    metrics["mismatch_list"] = [[int(i // p.rows), int(i % p.rows), int(got[i]), int(want[i])] for i in mism[:1000]]
    write_metrics(metrics)
    write_outputs(rtl_words=np.asarray(sink.words, dtype=object).astype(str), rtl=got)
    if mism.size:
        first = [(int(i // p.rows), int(i % p.rows), int(got[i]), int(want[i])) for i in mism[:8]]
        raise AssertionError(f"{mism.size} of {want.size} result words differ; (vector, row, rtl, golden): {first}")
    assert extra == 0, f"{extra} unexpected output beats after the last result"
    assert not sink.protocol_errors, sink.protocol_errors[:5]
    assert metrics["dut_mac_beats"] == n * p.weight_beats, metrics
