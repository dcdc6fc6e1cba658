"""cocotb testbench of the FSS sparse GEMM engine against :func:`hwcosim.models.fss.gemm.gemm`, word by word.

Inputs (written by :func:`hwcosim.cosim.designs.fss.gemm.run_gemm`): ``inputs.json`` with the parameter set, the
layer shape (``rows``, ``cols``, ``T``) and the traffic pattern (``p_idle_w``, ``p_idle_x``:
probability of an idle cycle before each input beat; ``p_stall``: probability that the output
sink refuses a cycle; ``seed``); ``arrays.npz`` with ``values``/``indices`` (FSS, raw), ``x``
(activations (cols, T), raw) and ``expected`` (golden results (rows, T), raw). Writes
``metrics.json``: cycles from the first activation beat to the last result beat, the ideal and
expected counts of :class:`hwcosim.models.fss.gemm.CycleModel`, the DUT's counters and the mismatches.
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
from hwcosim.models.fss.gemm import (
    PIPELINE_LATENCY,
    CycleModel,
    FSSParams,
    pack_act_beats,
    pack_weight_beats,
    unpack_output_beats,
)


@cocotb.test()
async def gemm_matches_golden(dut):
    cfg = inputs()
    p = FSSParams.from_dict(cfg["params"])
    rows, cols, t = int(cfg["rows"]), int(cfg["cols"]), int(cfg["T"])
    a = arrays()
    expected = a["expected"]
    seed = int(cfg.get("seed", 1))

    dut.cfg_k_regions.value = cols // p.r_w
    dut.cfg_row_groups.value = rows // p.rows_per_group
    await start_clock_and_reset(dut)
    counter = CycleCounter(dut.clk)
    wdrv = StreamDriver(dut, "w", counter, cfg.get("p_idle_w", 0.0), seed)
    xdrv = StreamDriver(dut, "x", counter, cfg.get("p_idle_x", 0.0), seed + 1)
    sink = StreamSink(dut, "y", counter, cfg.get("p_stall", 0.0), seed + 2)

    tiles = t // p.pe_cols
    wwords = pack_weight_beats(p, a["values"], a["indices"])
    cocotb.start_soon(xdrv.send(pack_act_beats(p, a["x"])))
    cocotb.start_soon(wdrv.send(wwords * tiles))

    beats = tiles * (rows // p.rows_per_group)
    model = CycleModel(p)
    budget = 50 * (model.expected(rows, cols, t) + 100)
    await sink.wait_for(beats, budget)
    await ClockCycles(dut.clk, 2 * PIPELINE_LATENCY + 8)  # nothing more may come out
    await ReadOnly()

    extra = len(sink.words) - beats
    got = unpack_output_beats(p, sink.words[:beats], rows, t)
    mism = np.argwhere(got != expected)
    cycles = sink.cycles[beats - 1] - xdrv.transfers[0] + 1
    metrics = {
        "rows": rows, "cols": cols, "T": t, "beats": beats, "cycles": int(cycles),
        "ideal": model.ideal(rows, cols, t), "expected": model.expected(rows, cols, t),
        "utilisation": model.utilisation(cycles, rows, cols, t),
        "dut_cycles": int(dut.cycles.value), "dut_mac_beats": int(dut.mac_beats.value),
        "dut_stall_out": int(dut.stall_out.value), "dut_starve_w": int(dut.starve_w.value),
        "mismatches": int(len(mism)), "words_compared": int(expected.size), "extra_beats": int(extra),
        "protocol_errors": sink.protocol_errors[:5],
    }
    write_metrics(metrics)
    write_outputs(rtl=got)  # (rows, T)
    if len(mism):
        first = [(int(r), int(c), int(got[r, c]), int(expected[r, c])) for r, c in mism[:8]]
        raise AssertionError(f"{len(mism)} of {expected.size} result words differ; (row, col, rtl, golden): {first}")
    assert extra == 0, f"{extra} unexpected output beats after the last result"
    assert not sink.protocol_errors, sink.protocol_errors[:5]
    assert metrics["dut_mac_beats"] == len(wwords) * tiles, metrics
