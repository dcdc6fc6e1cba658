"""cocotb testbench of bridge (a): the MELO RTL engine as the receiver inside the cluster scenario.

The scenario (:class:`hwcosim.cosim.designs.melo.bridge.MeloScenario`) runs in this process and is the client;
:class:`MeloRTLDevice` hands every arriving packet to ``hwcosim.hdl.melo.MeloEngineRTL`` at the cycle of its
arrival and returns, at the cycle of the response beat, the released PSNs and the response.
Writes ``metrics.json``: the scenario result and the transcript (every input event word, every
released-PSN word, every response word) that :func:`hwcosim.cosim.designs.melo.bridge.check_transcript`
compares with the golden model.
"""

from __future__ import annotations

import time

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from hwcosim.cosim.designs.melo.bridge import MeloScenario, MeloScenarioParams, _summary
from hwcosim.cosim.flow.bridge import ClockMap, co_simulate
from hwcosim.cosim.flow.bridge_rtl import RTLSerialDevice, reset_with_clock
from hwcosim.cosim.tb.common import inputs, write_metrics
from hwcosim.models.melo.engine import pack_event, unpack_response_beat


class MeloRTLDevice(RTLSerialDevice):
    """``hwcosim.hdl.melo.MeloEngineRTL`` behind the bridge's device interface (one packet at a time).

    A packet's input beat is offered at its arrival cycle; released-PSN beats are collected up
    to the packet's response beat, whose transfer cycle is the completion (both sinks always
    ready). Released-PSN beats that appear after a response would be attributed to the next
    packet; the transcript check compares the streams in order either way.
    """

    def __init__(self, dut, clk, clock: ClockMap, params):
        super().__init__(clk, clock)
        self.dut, self.p = dut, params
        self.events: list[int] = []
        self.deliv: list[int] = []
        self.resp: list[int] = []
        self.latencies: list[int] = []
        self.dmask = (1 << params.psn_bits) - 1

    async def run(self, request, start):
        conn, psn = request
        dut = self.dut
        word = pack_event(self.p, conn, psn)
        dut.i__valid.value = 1
        dut.i__payload.value = word
        while True:  # the input beat
            await ReadOnly()
            taken = bool(dut.i__ready.value)
            await RisingEdge(dut.clk)
            if taken:
                break
        dut.i__valid.value = 0
        self.events.append(word)
        delivered, resp = [], None
        while resp is None:
            await ReadOnly()
            if dut.d__valid.value == 1:
                w = int(dut.d__payload.value)
                self.deliv.append(w)
                delivered.append(w & self.dmask)
            if dut.r__valid.value == 1:
                resp = int(dut.r__payload.value)
            await RisingEdge(dut.clk)
            if self.clk.now - start > 10_000:
                raise AssertionError(f"no response from the engine for packet conn={conn} psn={psn}")
        end = self.clk.now  # the response beat transferred on this edge
        self.resp.append(resp)
        r, _used = unpack_response_beat(self.p, resp)
        self.latencies.append(end - start)
        return end, (delivered, r.kind, r.cum_psn)


@cocotb.test()
async def melo_bridge(dut):
    cfg = inputs()
    p = MeloScenarioParams.from_dict(cfg["scenario"])
    clock = ClockMap(p.f_clk_mhz * 1e6)
    period_ns = 1e3 / p.f_clk_mhz
    assert abs(period_ns - round(period_ns)) < 1e-9, f"f_clk_mhz={p.f_clk_mhz} needs an integer period in ns"
    for name in ("i__valid", "d__ready", "r__ready"):
        getattr(dut, name).value = 0
    clk = await reset_with_clock(dut, int(round(period_ns)))
    while str(dut.idle.value) != "1":  # the engine's initialisation pass
        await RisingEdge(dut.clk)
        if clk.now > 100_000:
            raise AssertionError("the engine did not finish its initialisation pass")
    dut.d__ready.value = 1
    dut.r__ready.value = 1
    # scenario time 0 = this cycle: re-base the clock
    clk.t0_ps += clk.now * clk.period_ps
    dev = MeloRTLDevice(dut, clk, clock, p.engine)
    scn = MeloScenario(p)
    t0 = time.perf_counter()
    await co_simulate(scn, dev)
    wall = time.perf_counter() - t0
    res = _summary(scn, dev.latencies, wall, dev.busy_cycles)
    res["sim_cycles"] = clk.now
    write_metrics({"result": res, "transcript": {"events": dev.events, "deliv": dev.deliv, "resp": dev.resp}})
