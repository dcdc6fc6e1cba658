"""The host-link protocol (:mod:`hwcosim.models.hostlink`) and the host bridge RTL
(:class:`hwcosim.hdl.common.host_bridge.HostBridge`) at byte level in Amaranth's simulator.

The bridge is wired to a real AXI4-Lite register file (a read-write scratch register, a read-only
identification register) and a stream loop-back FIFO; every response frame is parsed by the same
decoder the host uses. Covered: PING, register write/read, SLVERR on an unmapped address, stream
words out and back in order with TLAST, a header with a bad CRC (not executed, answered), a
payload with a bad CRC (flagged), a read of more words than exist (TIMEOUT, zeros), bad channel,
and the host's frame checks (sync, length, CRC).
"""

import pytest
from amaranth import Module
from amaranth.hdl import Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile, Reg
from hwcosim.hdl.common.host_bridge import HostBridge
from hwcosim.models.hostlink import (
    OP,
    STATUS,
    crc8,
    decode_response,
    divisor_for,
    encode_command,
    encode_payload,
    response_length,
    status_text,
)

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

TIMEOUT = 64
ID = 0xC0FFEE42


# --- the protocol in Python ------------------------------------------------------------------
def test_crc8_check_value():
    # CRC-8 (poly 0x07, init 0): the catalogue's check value of "123456789"
    assert crc8(b"123456789") == 0xF4
    assert crc8(b"") == 0


def test_command_layout():
    f = encode_command(OP["WRITE_REG"], 0x1C, 0xDEADBEEF)
    assert f[0] == 0xA5 and f[1] == 1 and f[2:4] == b"\x1c\x00" and f[4:8] == bytes.fromhex("efbeadde")
    assert f[8] == crc8(f[1:8]) and len(f) == 9
    p = encode_payload([1, 0x01020304])
    assert p[:8] == bytes.fromhex("0100000004030201") and p[8] == crc8(p[:8])


def _resp(op, status, val, data=b""):
    body = bytes([op]) + data + bytes([status]) + val.to_bytes(4, "little")
    return bytes([0x5A]) + body + bytes([crc8(body)])


def test_decode_response():
    r = decode_response(_resp(2, 0, 0x12345678), 2)
    assert (r.op, r.status, r.value, r.data) == (2, 0, 0x12345678, ())
    r = decode_response(_resp(4, 0, 2, bytes(range(8))), 4, nwords=2)
    assert r.data == (0x03020100, 0x07060504) and r.value == 2
    # a header with a bad CRC is answered with 8 bytes even for READ_STREAM
    r = decode_response(_resp(4, STATUS["BAD_CRC"], 0), 4, nwords=5)
    assert r.status == STATUS["BAD_CRC"] and status_text(r.status) == "BAD_CRC"
    assert status_text(2) == "SLVERR" and status_text(0) == "OK"


@pytest.mark.parametrize("frame,msg", [
    (b"\x00" + _resp(2, 0, 1)[1:], "does not start"),
    (_resp(2, 0, 1)[:-1] + b"\x00", "CRC"),
    (_resp(2, 0, 1) + b"\x00", "expected 8"),
    (_resp(1, 0, 1), "expected 2"),
])
def test_decode_refuses_bad_frames(frame, msg):
    with pytest.raises(ValueError, match=msg):
        decode_response(frame, 2)


def test_wrong_arguments():
    with pytest.raises(ValueError, match="opcode"):
        encode_command(9)
    with pytest.raises(ValueError, match="arg"):
        encode_command(OP["READ_REG"], 1 << 16)
    with pytest.raises(ValueError, match="word"):
        encode_payload([-1])
    assert response_length(OP["READ_STREAM"], 3) == 20 and response_length(OP["PING"], 3) == 8


def test_divisor_for():
    assert divisor_for(25e6, 115200) == 217
    assert divisor_for(25e6, 921600) == 27       # 0.47 % fast
    with pytest.raises(ValueError, match="at least 4"):
        divisor_for(1e6, 921600)
    with pytest.raises(ValueError, match="off by"):
        divisor_for(5e6, 921600)                 # 5.43 -> 5: 8.5 % fast


# --- the bridge RTL ----------------------------------------------------------------------------
class _Harness(wiring.Component):
    """HostBridge + a register file (0x00 ID read-only, 0x04 SCRATCH read-write) + a FIFO looping
    output channel 0 back to input channel 0."""

    def __init__(self):
        super().__init__({"rx": In(stream.Signature(8)), "tx": Out(stream.Signature(8)),
                          "last_seen": Out(1), "words_in": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.br = br = HostBridge(out_channels=1, in_channels=1, addr_width=8, timeout=TIMEOUT)
        m.submodules.rf = rf = AxiLiteRegFile((Reg("ID", 0x00, "r", "id"), Reg("SCRATCH", 0x04, "rw", "s")))
        m.submodules.fifo = fifo = SyncFIFO(width=33, depth=16)
        wiring.connect(m, wiring.flipped(self.rx), br.rx)
        wiring.connect(m, br.tx, wiring.flipped(self.tx))
        for n in ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr", "arvalid", "rready"):
            m.d.comb += getattr(rf, f"s_axil_{n}").eq(getattr(br, f"m_axil_{n}"))
        for n in ("awready", "wready", "bresp", "bvalid", "arready", "rdata", "rresp", "rvalid"):
            m.d.comb += getattr(br, f"m_axil_{n}").eq(getattr(rf, f"s_axil_{n}"))
        scratch = Signal(32)
        m.d.comb += [rf.w_ok.eq(rf.w_writable), rf.r_ID.eq(ID), rf.r_SCRATCH.eq(scratch)]
        with m.If(rf.wr & (rf.widx == 1)):
            m.d.sync += scratch.eq(rf.wdata)
        m.d.comb += [fifo.w_data.eq(br.m_axis0_tdata | br.m_axis0_tlast << 32), fifo.w_en.eq(br.m_axis0_tvalid),
                     br.m_axis0_tready.eq(fifo.w_rdy), br.s_axis0_tdata.eq(fifo.r_data[:32]),
                     br.s_axis0_tvalid.eq(fifo.r_rdy), fifo.r_en.eq(br.s_axis0_tready)]
        with m.If(fifo.r_en & fifo.r_rdy):
            m.d.sync += [self.last_seen.eq(fifo.r_data[32]), self.words_in.eq(self.words_in + 1)]
        return m


def _exchange(frames: list[bytes], n_responses: list[int], max_cycles: int = 20000):
    dut = _Harness()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got = bytearray()
    state = {}

    async def host(ctx):
        for f in frames:
            for b in f:
                ctx.set(dut.rx.valid, 1)
                ctx.set(dut.rx.payload, b)
                while True:
                    ready = ctx.get(dut.rx.ready)
                    await ctx.tick()
                    if ready:
                        break
                ctx.set(dut.rx.valid, 0)
                await ctx.tick()
        for _ in range(max_cycles):
            if len(got) >= sum(n_responses):
                break
            await ctx.tick()
        await ctx.tick().repeat(TIMEOUT * 4)
        state["last_seen"] = ctx.get(dut.last_seen)

    async def sink(ctx):
        ctx.set(dut.tx.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(dut.tx.valid, dut.tx.payload):
            if valid:
                got.append(payload)

    sim.add_testbench(host)
    sim.add_process(sink)
    sim.run_until(1e-8 * (max_cycles + 2000 + 40 * sum(len(f) for f in frames)))
    out, i = [], 0
    for n in n_responses:
        out.append(bytes(got[i:i + n]))
        i += n
    assert i == len(got), f"{len(got) - i} bytes more than expected"
    return out, state


def test_bridge_registers_and_ping():
    cmds = [(OP["PING"], 0, 0x1234ABCD), (OP["READ_REG"], 0x00, 0), (OP["WRITE_REG"], 0x04, 0x55AA00FF),
            (OP["READ_REG"], 0x04, 0), (OP["READ_REG"], 0x40, 0), (OP["WRITE_REG"], 0x00, 7)]
    frames = [encode_command(*c) for c in cmds]
    resp, _ = _exchange(frames, [8] * len(cmds))
    r = [decode_response(f, c[0]) for f, c in zip(resp, cmds)]
    assert r[0].value == 0x1234ABCD and r[0].status == 0
    assert r[1].value == ID and r[1].status == 0
    assert r[2].status == 0 and r[2].value == 0x55AA00FF
    assert r[3].value == 0x55AA00FF
    assert r[4].status == 2 and r[4].value == 0           # unmapped: SLVERR
    assert r[5].status == 2                               # read-only: SLVERR


def test_bridge_streams_loop_back():
    words = [0xDEADBEEF, 1, 0x80000000, 0x01020304, 0xFFFFFFFF]
    frames = [encode_command(OP["WRITE_STREAM"], 0, len(words)) + encode_payload(words),
              encode_command(OP["READ_STREAM"], 0, len(words))]
    resp, st = _exchange(frames, [8, 8 + 4 * len(words)])
    w = decode_response(resp[0], OP["WRITE_STREAM"])
    r = decode_response(resp[1], OP["READ_STREAM"], len(words))
    assert w.status == 0 and w.value == len(words)
    assert r.status == 0 and list(r.data) == words and r.value == len(words)
    assert st["last_seen"] == 1                           # TLAST on the last word


def test_bridge_bad_header_crc_is_not_executed():
    bad = bytearray(encode_command(OP["WRITE_REG"], 0x04, 0x11111111))
    bad[5] ^= 0x40
    frames = [bytes(bad), encode_command(OP["READ_REG"], 0x04, 0)]
    resp, _ = _exchange(frames, [8, 8])
    assert decode_response(resp[0], OP["WRITE_REG"]).status == STATUS["BAD_CRC"]
    assert decode_response(resp[1], OP["READ_REG"]).value == 0       # the write did not happen


def test_bridge_payload_crc_and_timeout_and_bad_channel():
    pay = bytearray(encode_payload([5, 6]))
    pay[-1] ^= 1
    frames = [encode_command(OP["WRITE_STREAM"], 0, 2) + bytes(pay),
              encode_command(OP["READ_STREAM"], 0, 3),                  # only 2 words exist
              encode_command(OP["READ_STREAM"], 3, 1),                  # no such channel
              encode_command(OP["WRITE_STREAM"], 2, 1) + encode_payload([9]),
              encode_command(OP["PING"], 0, 77)]
    resp, _ = _exchange(frames, [8, 20, 12, 8, 8], max_cycles=40000)
    assert decode_response(resp[0], OP["WRITE_STREAM"]).status == STATUS["PAYLOAD_CRC"]
    r = decode_response(resp[1], OP["READ_STREAM"], 3)
    assert r.status == STATUS["TIMEOUT"] and r.data == (5, 6, 0) and r.value == 2
    r = decode_response(resp[2], OP["READ_STREAM"], 1)
    assert r.status == STATUS["BAD_CMD"] and r.data == (0,)
    assert decode_response(resp[3], OP["WRITE_STREAM"]).status == STATUS["BAD_CMD"]
    assert decode_response(resp[4], OP["PING"]).value == 77           # still in step


def test_bridge_wrong_arguments():
    with pytest.raises(ValueError, match="out_channels"):
        HostBridge(out_channels=17)
    with pytest.raises(ValueError, match="timeout"):
        HostBridge(timeout=1)
