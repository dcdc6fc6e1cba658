"""cocotb testbench of bridge (b): BBS SpMxV or FSS GEMM RTL as the serving device.

The serving scenario (:class:`hwcosim.cosim.designs.fss.bridge.ServeScenario`) runs in this process;
:class:`ServeRTLDevice` runs each batch's data through the engine at the batch's start cycle and
measures its cycles (first input beat to last result beat), compares every result word with the
golden model, and caches the count per batch shape (see :mod:`hwcosim.cosim.designs.fss.bridge`). Writes
``metrics.json``: the scenario result and the word-for-word check; fails on any mismatch.
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge
from hwcosim.cosim.designs.fss.bridge import ServeScenario, ServeScenarioParams, request_inputs
from hwcosim.cosim.flow.bridge import ClockMap, co_simulate
from hwcosim.cosim.flow.bridge_rtl import RTLSerialDevice, reset_with_clock
from hwcosim.cosim.tb.common import StreamDriver, StreamSink, arrays, inputs, tb_dir, write_metrics, write_outputs


class ServeRTLDevice(RTLSerialDevice):
    """The engine behind the bridge's device interface: one batch at a time, cycles cached per shape."""

    def __init__(self, dut, clk, clock: ClockMap, sp: ServeScenarioParams, p, values, indices):
        super().__init__(clk, clock)
        self.dut, self.sp, self.p = dut, sp, p
        self.values, self.indices = values, indices
        self.cache: dict[int, int] = {}
        self.words_compared = 0
        self.mismatches: list[str] = []
        self.simulated = 0
        self.seed = sp.seed
        # the evidence of every simulated batch, one row per vector (BBS) or activation column (FSS)
        self.x_rows: list[np.ndarray] = []
        self.rtl_rows: list[np.ndarray] = []
        self.want_rows: list[np.ndarray] = []
        if sp.device == "bbs":
            from hwcosim.models.bbs.spmxv import pack_weight_beats
        else:
            from hwcosim.models.fss.gemm import pack_weight_beats
        self.wwords = pack_weight_beats(p, values, indices)

    async def run(self, req, start):
        shape = req["shape"]
        simulated = not (self.sp.cache and shape in self.cache)
        if simulated:
            cycles = await self._run_batch(req, start)
            self.cache.setdefault(shape, cycles)
            self.simulated += 1
        else:
            cycles = self.cache[shape]
        return start + cycles, {"shape": shape, "cycles": cycles, "simulated": simulated}

    async def _run_batch(self, req, start) -> int:
        sp, p, dut = self.sp, self.p, self.dut
        x = np.concatenate([request_inputs(sp, p, r, s, req["bucket"]) for r, s in zip(req["requests"], req["sizes"])])
        shape = req["shape"]
        self.seed += 3
        if sp.device == "bbs":
            from hwcosim.models.bbs.spmxv import pack_vector_beats, spmxv, unpack_output_beats

            xs = x  # (shape, cols)
            want = spmxv(p, self.values, self.indices, xs)
            xwords = [w for v in xs for w in pack_vector_beats(p, v)]
            wwords = self.wwords * shape
            beats = shape * p.row_groups
        else:
            from hwcosim.models.fss.gemm import gemm, pack_act_beats, unpack_output_beats

            xt = np.zeros((sp.cols, shape), dtype=np.int64)
            xt[:, : x.shape[0]] = x.T
            want = gemm(p, self.values, self.indices, xt)
            xwords = pack_act_beats(p, xt)
            wwords = self.wwords * (shape // p.pe_cols)
            beats = (shape // p.pe_cols) * (sp.rows // p.rows_per_group)
        xdrv = StreamDriver(dut, "x", self.clk, 0.0, self.seed)
        wdrv = StreamDriver(dut, "w", self.clk, 0.0, self.seed + 1)
        sink = StreamSink(dut, "y", self.clk, sp.p_stall, self.seed + 2)
        cocotb.start_soon(xdrv.send(xwords))
        cocotb.start_soon(wdrv.send(wwords))
        budget = 100 * (len(wwords) + len(xwords)) + 1000
        while len(sink.words) < beats:
            await RisingEdge(dut.clk)
            if self.clk.now - start > budget:
                raise AssertionError(f"batch of shape {shape}: {len(sink.words)} of {beats} result beats after "
                                     f"{budget} cycles")
        sink._task.cancel()
        dut.y__ready.value = 0
        if sp.device == "bbs":
            got = unpack_output_beats(p, sink.words[:beats]).reshape(want.shape)
        else:
            got = unpack_output_beats(p, sink.words[:beats], sp.rows, shape)
        bad = np.argwhere(got != want)
        self.words_compared += int(want.size)
        if sp.device == "bbs":
            self.x_rows.append(xs)
            self.rtl_rows.append(np.asarray(got))
            self.want_rows.append(want)
        else:
            self.x_rows.append(xt.T)
            self.rtl_rows.append(np.asarray(got).T)
            self.want_rows.append(want.T)
        if len(bad):
            i = tuple(bad[0])
            self.mismatches.append(f"batch shape {shape}: {len(bad)} of {want.size} words differ, first at "
                                   f"{list(i)}: rtl {int(got[i])} vs golden {int(want[i])}")
        if sink.protocol_errors:
            self.mismatches.append(f"stream protocol: {sink.protocol_errors[:3]}")
        return sink.cycles[beats - 1] - start + 1


@cocotb.test()
async def serve_bridge(dut):
    cfg = inputs()
    sp = ServeScenarioParams.from_dict(cfg["scenario"])
    a = arrays()
    if sp.device == "bbs":
        from hwcosim.models.bbs.spmxv import BBSParams

        p = BBSParams.from_dict(cfg["params"])
    else:
        from hwcosim.models.fss.gemm import FSSParams

        p = FSSParams.from_dict(cfg["params"])
        dut.cfg_k_regions.value = sp.cols // p.r_w
        dut.cfg_row_groups.value = sp.rows // p.rows_per_group
    for name in ("w__valid", "x__valid", "y__ready"):
        getattr(dut, name).value = 0
    clock = ClockMap(sp.f_clk_mhz * 1e6)
    period_ns = 1e3 / sp.f_clk_mhz
    assert abs(period_ns - round(period_ns)) < 1e-9, f"f_clk_mhz={sp.f_clk_mhz} needs an integer period in ns"
    clk = await reset_with_clock(dut, int(round(period_ns)))
    dev = ServeRTLDevice(dut, clk, clock, sp, p, a["values"], a["indices"])
    scn = ServeScenario(sp, p)
    t0 = time.perf_counter()
    await co_simulate(scn, dev)
    wall = time.perf_counter() - t0
    res = scn.result()
    res.update({"wall_s": wall, "shapes_simulated": dev.simulated, "sim_cycles": clk.now})
    check = {"words_compared": dev.words_compared, "mismatches": len(dev.mismatches),
             "batches_simulated": dev.simulated, "cache": sp.cache}
    write_metrics({"result": res, "check": check})
    if dev.x_rows:  # the run folder's evidence (cosim.designs.fss.bridge.save_evidence seals it)
        from hwcosim.cosim.flow.runs import add_arrays

        add_arrays(tb_dir(), xs=np.concatenate(dev.x_rows), expected=np.concatenate(dev.want_rows),
                   batch_rows=np.asarray([len(x) for x in dev.x_rows], dtype=np.int64))
        write_outputs(rtl=np.concatenate(dev.rtl_rows))
    assert not dev.mismatches, dev.mismatches[:5]
