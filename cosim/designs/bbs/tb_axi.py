"""cocotb testbench of the AXI top level of the BBS LSTM engine (:class:`hwcosim.hdl.bbs.axi_top.LSTMAxiTop`),
driven only through cocotbext-axi bus functional models.

``AxiStreamSource`` loads the weights/biases (``s_axis_w``) and sends inputs (``s_axis_x``),
``AxiStreamSink`` takes hidden states (``m_axis_h``, one frame per step by ``tlast``) and
``AxiLiteMaster`` programs and polls the registers. Idle and back-pressure come from seeded
random pause generators (``p_pause_in`` on both sources, ``p_pause_out`` on the sink). Every
hidden word is compared with :func:`hwcosim.models.bbs.lstm.lstm_golden` (``expected`` in
``arrays.npz``). The sequences run as two START commands (all but the last sequence, then
the last), after checking that a START before loading is refused with ``ERROR.START_UNLOADED``.
Writes ``metrics.json`` with the register values read back.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource
from hwcosim.cosim.tb.common import arrays, inputs, write_metrics
from hwcosim.cosim.tb.common import pauses as _pauses
from hwcosim.cosim.tb.common import to_bytes as _to_bytes
from hwcosim.hdl.bbs.axi_top import CTRL, ERROR, REGISTER_MAP, REGS, STATUS, bytes_up
from hwcosim.models.bbs.lstm import LSTMCycleModel, LSTMParams, pack_bias_beats, pack_x_beats, unpack_h_beats
from hwcosim.models.bbs.spmxv import pack_weight_beats


def _split32(word: int, nwords: int) -> list[int]:
    return [(int(word) >> (32 * i)) & 0xFFFFFFFF for i in range(nwords)]


class TB:
    def __init__(self, dut, p_in: float, p_out: float, seed: int):
        self.dut = dut
        Clock(dut.clk, 10, unit="ns").start()
        self.wsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_w"), dut.clk, dut.rst)
        self.xsrc = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_x"), dut.clk, dut.rst)
        self.hsink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_h"), dut.clk, dut.rst)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.wsrc.set_pause_generator(_pauses(p_in, seed))
        self.xsrc.set_pause_generator(_pauses(p_in, seed + 1))
        self.hsink.set_pause_generator(_pauses(p_out, seed + 2))

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def rd(self, name: str) -> int:
        return await self.axil.read_dword(REGS[name])

    async def wr(self, name: str, value: int):
        await self.axil.write_dword(REGS[name], value)


@cocotb.test()
async def axi_lstm_matches_golden(dut):
    cfg = inputs()
    p = LSTMParams.from_dict(cfg["params"])
    a = arrays()
    xs, expected = a["xs"], a["expected"]
    n, T = xs.shape[0], xs.shape[1]
    tb = TB(dut, float(cfg.get("p_pause_in", 0.0)), float(cfg.get("p_pause_out", 0.0)), int(cfg.get("seed", 1)))
    await tb.reset()

    config = await tb.rd("CONFIG")
    assert config == REGISTER_MAP.CONFIG.pack(P=p.pes, B=p.banks, K=p.k), hex(config)
    await tb.wr("CTRL", CTRL["START"])          # START before loading: refused, ERROR.START_UNLOADED
    err_unloaded = await tb.rd("ERROR")
    status0 = await tb.rd("STATUS")
    assert err_unloaded == ERROR["START_UNLOADED"] and status0 == STATUS["ERROR"], (err_unloaded, status0)
    await tb.wr("CTRL", CTRL["CLEAR_ERROR"])
    assert await tb.rd("ERROR") == 0

    bbs = p.bbs
    nw = -(-(bbs.pes * bbs.banks * bbs.lane_width) // 32)
    nb = -(-(p.pes * p.gate_fmt.width) // 32)
    words = [w for beat in pack_weight_beats(bbs, a["values"], a["indices"]) for w in _split32(beat, nw)]
    words += [w for beat in pack_bias_beats(p, a["bias"]) for w in _split32(beat, nb)]
    await tb.wsrc.send(AxiStreamFrame(_to_bytes(words, 4)))
    await tb.wsrc.wait()
    for _ in range(50):
        if (await tb.rd("STATUS")) & STATUS["LOADED"]:
            break
    else:
        raise AssertionError("STATUS.loaded did not rise after the weights and biases were sent")

    xbytes = bytes_up(p.input_size * p.vec_fmt.width) // 8
    hbytes = bytes_up(p.units * p.vec_fmt.width) // 8
    beats_per_step = p.hidden // p.units
    runs = [(0, n - 1), (n - 1, n)] if n > 1 else [(0, n)]
    got = []
    model = LSTMCycleModel(p)
    statuses = []
    for lo, hi in runs:
        await tb.wr("SEQ_LEN", T)
        await tb.wr("NUM_SEQ", hi - lo)
        await tb.wr("CTRL", CTRL["START"])
        await tb.xsrc.send(AxiStreamFrame(_to_bytes(pack_x_beats(p, xs[lo:hi]), xbytes)))
        for _ in range((hi - lo) * T):
            frame = await tb.hsink.recv()
            data = bytes(frame.tdata)
            assert len(data) == beats_per_step * hbytes, f"a step frame holds {len(data)} bytes"
            got.append([int.from_bytes(data[i * hbytes:(i + 1) * hbytes], "little") for i in range(beats_per_step)])
        budget = 50 * (model.expected(hi - lo, T) + 200)
        for _ in range(budget // 8):
            st = await tb.rd("STATUS")
            if st & STATUS["DONE"]:
                break
        else:
            raise AssertionError(f"STATUS.done did not rise (STATUS={st:#x})")
        statuses.append(st)
    await ClockCycles(dut.clk, 40)
    assert tb.hsink.empty(), "hidden beats after the last step"

    h = unpack_h_beats(p, [w for step in got for w in step])
    want = expected.reshape(-1)
    mism = np.flatnonzero(h != want)
    regs = {k.lower(): await tb.rd(k) for k in ("CYCLES", "MAC_BEATS", "STEPS", "STALL_OUT", "RUN_CYCLES", "ERROR")}
    metrics = {"n_seq": n, "seq_len": T, "mismatches": int(mism.size), "statuses": statuses,
               "expected_cycles": sum(model.expected(hi - lo, T) for lo, hi in runs),
               "err_start_unloaded": err_unloaded, **{f"reg_{k}": v for k, v in regs.items()},
               "h_rtl": h.reshape(n, T, p.hidden).tolist()}
    write_metrics(metrics)
    if mism.size:
        H = p.hidden
        first = [(int(i // (T * H)), int(i // H % T), int(i % H), int(h[i]), int(want[i])) for i in mism[:8]]
        raise AssertionError(f"{mism.size} of {want.size} hidden words differ; (seq, step, unit, rtl, golden): {first}")
    assert regs["steps"] == n * T and regs["mac_beats"] == n * T * bbs.weight_beats, regs
    assert regs["error"] == 0 and all(s == 0b1010 for s in statuses), (regs, statuses)
