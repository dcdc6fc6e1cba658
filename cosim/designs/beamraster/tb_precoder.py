"""cocotb testbench of the BeamRaster precoder against :func:`hwcosim.models.beamraster.datapath.precode_fixed`.

Inputs (written by :func:`hwcosim.cosim.designs.beamraster.precoder.run_precoder`): ``inputs.json`` with the
parameter set
and the traffic pattern (``p_idle_s``, ``p_idle_c``: probability of an idle cycle before each
symbol / coefficient beat; ``p_stall``: probability the output sink refuses a cycle; ``seed``;
``coef_first``: load every coefficient set before the first symbol), ``arrays.npz`` with
``s_re``/``s_im`` (raw symbols), ``beams``, ``P_re``/``P_im`` (coefficient sets per frame) and
``x_re``/``x_im`` (golden antenna samples). Every output word is compared. Writes
``metrics.json``: cycles from the first symbol beat to the last output beat, the cycle model's
ideal and expected counts, the DUT's counters, mismatches.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from hwcosim.cosim.flow.runs import as_words, word_diff
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
from hwcosim.models.beamraster.datapath import (
    CycleModel,
    PrecoderParams,
    pack_coef_beats,
    pack_symbol_beats,
    unpack_output_beats,
)


@cocotb.test()
async def precoder_matches_golden(dut):
    cfg = inputs()
    p = PrecoderParams.from_dict(cfg["params"])
    a = arrays()
    n = a["s_re"].shape[0]
    seed = int(cfg.get("seed", 1))

    await start_clock_and_reset(dut)
    counter = CycleCounter(dut.clk)
    sdrv = StreamDriver(dut, "s", counter, cfg.get("p_idle_s", 0.0), seed)
    cdrv = StreamDriver(dut, "c", counter, cfg.get("p_idle_c", 0.0), seed + 1)
    sink = StreamSink(dut, "x", counter, cfg.get("p_stall", 0.0), seed + 2)

    swords = pack_symbol_beats(p, a["s_re"], a["s_im"])
    cwords = pack_coef_beats(p, a["beams"], a["P_re"], a["P_im"])
    ctask = cocotb.start_soon(cdrv.send(cwords))
    if cfg.get("coef_first", True):
        # the first set (and the second, which loads into the free bank) before any symbol
        while len(cdrv.transfers) < min(len(cwords), 2 * p.coef_beats):
            await RisingEdge(dut.clk)
    cocotb.start_soon(sdrv.send(swords))

    beats = n * p.ant_groups
    model = CycleModel(p)
    await sink.wait_for(beats, 50 * (model.expected(n) + len(cwords) + 100))
    await ClockCycles(dut.clk, 16)  # nothing more may come out
    await ReadOnly()
    del ctask

    got_re, got_im = unpack_output_beats(p, sink.words[:beats])
    want_re, want_im = a["x_re"], a["x_im"]
    bad = np.flatnonzero(((got_re != want_re) | (got_im != want_im)).reshape(-1))
    cycles = sink.cycles[beats - 1] - sdrv.transfers[0] + 1
    metrics = {
        "n_symbols": int(n), "beats": int(beats), "cycles": int(cycles), "ideal": model.ideal(n),
        "expected": model.expected(n), "symbols_per_cycle": n / cycles,
        "dut_cycles": int(dut.cycles.value), "dut_sym_beats": int(dut.sym_beats.value),
        "dut_out_beats": int(dut.out_beats.value), "dut_coef_beats": int(dut.coef_beats.value),
        "dut_issues": int(dut.issues.value), "dut_stall_out": int(dut.stall_out.value),
        "dut_starve_coef": int(dut.starve_coef.value),
        "mismatches": int(bad.size), "extra_beats": int(len(sink.words) - beats),
        "protocol_errors": sink.protocol_errors[:5],
        "out_re": got_re.tolist() if cfg.get("return_output") else None,
        "out_im": got_im.tolist() if cfg.get("return_output") else None,
    }
    metrics["mismatch_list"] = word_diff(np.stack([got_re, got_im], -1), np.stack([want_re, want_im], -1))[
        "mismatch_list"]  # [symbol, antenna, 0 re / 1 im, rtl, golden]
    write_metrics(metrics)
    write_outputs(rtl_re=got_re, rtl_im=got_im, rtl_words=as_words(sink.words))
    if bad.size:
        first = [(int(i // p.M), int(i % p.M), int(got_re.flat[i]), int(got_im.flat[i]), int(want_re.flat[i]),
                  int(want_im.flat[i])) for i in bad[:6]]
        raise AssertionError(f"{bad.size} of {want_re.size} antenna samples differ; "
                             f"(symbol, antenna, rtl re, rtl im, golden re, golden im): {first}")
    assert metrics["extra_beats"] == 0, f"{metrics['extra_beats']} unexpected output beats"
    assert not sink.protocol_errors, sink.protocol_errors[:5]
    assert metrics["dut_issues"] == n * p.K * p.ant_groups, metrics
