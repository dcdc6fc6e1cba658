"""cocotb testbench of the row-wise CSR SpMxV engine against :func:`hwcosim.models.bbs.csr.spmxv_csr`.

Inputs (written by :func:`hwcosim.cosim.designs.bbs.csr.run_csr`): ``inputs.json`` with the parameter set and
the traffic pattern (``p_idle``: idle probability before each input beat; ``p_stall``: output
refusal probability; ``seed``); ``arrays.npz`` with the entry lists (``value``, ``col``,
``last``, ``valid``, ``loads``, ``nnz``), ``xs`` (n, cols raw) and ``expected`` (n, rows raw).
Every result word is compared. Writes ``metrics.json``: cycles from the first vector beat to
the last result beat, the cycle model's expected count, the DUT's counters and mismatches.
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
from hwcosim.models.bbs.csr import (
    CSRCycleModel,
    CSRParams,
    CSRWeights,
    pack_vector_beats,
    pack_weight_beats,
    unpack_output_beats,
)


@cocotb.test()
async def csr_matches_golden(dut):
    cfg = inputs()
    p = CSRParams.from_dict(cfg["params"])
    a = arrays()
    e = CSRWeights(value=a["value"], col=a["col"], last=a["last"], valid=a["valid"], loads=a["loads"],
                   nnz=int(a["nnz"]))
    xs, expected = a["xs"], a["expected"]
    n = xs.shape[0]
    seed = int(cfg.get("seed", 1))
    p_idle = float(cfg.get("p_idle", 0.0))

    await start_clock_and_reset(dut)
    counter = CycleCounter(dut.clk)
    wdrv = StreamDriver(dut, "w", counter, p_idle, seed)
    xdrv = StreamDriver(dut, "x", counter, p_idle, seed + 1)
    sink = StreamSink(dut, "y", counter, float(cfg.get("p_stall", 0.0)), seed + 2)
    cocotb.start_soon(xdrv.send([w for x in xs for w in pack_vector_beats(p, x)]))
    cocotb.start_soon(wdrv.send(pack_weight_beats(p, e) * n))

    beats = n * p.row_groups
    model = CSRCycleModel(p, e)
    await sink.wait_for(beats, 50 * (model.expected(n) + 100))
    await ClockCycles(dut.clk, 16)  # nothing more may come out
    await ReadOnly()

    got = unpack_output_beats(p, sink.words)
    want = expected.reshape(-1)
    extra = len(sink.words) - beats
    mism = np.flatnonzero(got[: want.size] != want)
    cycles = sink.cycles[beats - 1] - xdrv.transfers[0] + 1
    metrics = {
        "n_vectors": n, "beats": beats, "cycles": int(cycles), "expected": model.expected(n),
        "ideal": model.ideal(n), "depth": e.depth, "nnz": e.nnz, "per_product": model.per_product(),
        "utilisation_steady": model.utilisation(model.per_product()),
        # measured: cycles between the last result beats of consecutive products (steady state)
        "product_intervals": [int(sink.cycles[(j + 1) * p.row_groups - 1] - sink.cycles[j * p.row_groups - 1])
                              for j in range(1, n)],
        "dut_cycles": int(dut.cycles.value), "dut_w_beats": int(dut.w_beats.value),
        "dut_busy_lanes": int(dut.busy_lanes.value), "dut_stall_out": int(dut.stall_out.value),
        "mismatches": int(mism.size), "extra_beats": int(extra), "protocol_errors": sink.protocol_errors[:5],
    }
    write_metrics(metrics)
    write_outputs(rtl=got)  # every result beat's words, in order (vector, row)
    if mism.size:
        first = [(int(i // p.rows), int(i % p.rows), int(got[i]), int(want[i])) for i in mism[:8]]
        raise AssertionError(f"{mism.size} of {want.size} result words differ; (vector, row, rtl, golden): {first}")
    assert extra == 0, f"{extra} unexpected output beats after the last result"
    assert not sink.protocol_errors, sink.protocol_errors[:5]
    assert metrics["dut_w_beats"] == n * e.depth, metrics
    assert metrics["dut_busy_lanes"] == n * int(e.loads.sum()), metrics
