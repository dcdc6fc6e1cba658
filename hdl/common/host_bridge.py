"""Host bridge: the framed byte protocol of :mod:`hwcosim.models.hostlink` to an AXI4-Lite master and
AXI4-Stream channels.

A board top puts it between a UART (:mod:`hwcosim.hdl.common.uart`) and a design: the host's commands
become AXI4-Lite reads and writes of the design's register file and 32-bit words on its
AXI4-Stream inputs and outputs, and every command is answered with one response frame (the
protocol, the status bits and the recovery rules are in :mod:`hwcosim.models.hostlink`).

Behaviour. One command at a time, byte by byte: a header (9 bytes including ``0xA5``) is
collected and its CRC-8 checked, then the command runs:

- ``WRITE_REG`` / ``READ_REG``: one AXI4-Lite transaction (``AWVALID``/``WVALID`` held until each
  is taken, independently; ``BREADY``/``RREADY`` high while waiting). The response carries
  ``BRESP``/``RRESP`` and the data. AXI4-Lite has no watchdog: the slave must answer.
- ``WRITE_STREAM``: four payload bytes make a word (little-endian), presented on
  ``m_axis<c>_t*`` until taken, while the payload CRC accumulates; the last word carries
  ``TLAST``. The receiver is not read while a word waits, so a design must take a word within
  one byte time to avoid a UART overrun (the BRAM loaders of the board tops take one per cycle).
- ``READ_STREAM``: the response header goes out first, then each word taken from
  ``s_axis<c>_t*`` as four bytes.
- ``PING``: the response echoes the value.

A word not taken (or not given) within ``timeout`` cycles sets ``TIMEOUT`` in the status; the
rest of the command then runs without waiting (words dropped, or sent as zero), so every frame
completes and the host stays in step.

Throughput is the UART's: a byte is processed in a few cycles, far below a byte time at any
standard rate. Resources: a 64-bit header register, a 32-bit word register, a 32-bit count, two
CRC-8 registers, a ``log2(timeout)``-bit watchdog and the FSM.

Ports (flat, named as a shell's block design expects): ``rx``/``tx`` byte streams (to the UART),
``m_axil_*`` (AXI4-Lite master, ``addr_width``-bit byte address), ``m_axis<c>_tdata/tvalid/tready/
tlast`` for each output channel ``c`` and ``s_axis<c>_tdata/tvalid/tready`` for each input channel.
"""

from __future__ import annotations

from amaranth import Elaboratable, Module
from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from hwcosim.models.errors import UsageError
from hwcosim.models.hostlink import OP, STATUS, SYNC_CMD, SYNC_RESP, crc8

__all__ = ["HostBridge", "HostBoardTop", "crc8_step", "board_pins", "uart_bridge", "bridge_axil", "link_words_to_beat",
           "beat_to_link_words"]


def crc8_step(crc, byte):
    """The CRC-8/0x07 register after one more ``byte`` (combinational: the CRC is linear over GF(2),
    so each output bit is the XOR of the input bits whose single-bit CRC has that bit set)."""
    v = crc ^ byte
    cols = [crc8(bytes([1 << j])) for j in range(8)]
    return Cat(*(Cat(*(v[j] for j in range(8) if cols[j] >> i & 1)).xor() for i in range(8)))


class HostBridge(wiring.Component):
    """Framed host protocol -> AXI4-Lite master + AXI4-Stream channels (see the module docstring).

    Parameters
    ----------
    out_channels : int
        AXI4-Stream output channels (host -> design), 0..16.
    in_channels : int
        AXI4-Stream input channels (design -> host), 0..16.
    addr_width : int
        AXI4-Lite byte-address width, 3..16.
    timeout : int
        Watchdog on stream words, in cycles (>= 2).
    """

    def __init__(self, out_channels: int = 1, in_channels: int = 1, addr_width: int = 8,
                 timeout: int = 1 << 24):
        for name, v in (("out_channels", out_channels), ("in_channels", in_channels)):
            if not isinstance(v, int) or not 0 <= v <= 16:
                raise UsageError(f"host bridge: {name} must be 0..16, not {v!r}")
        if not isinstance(addr_width, int) or not 3 <= addr_width <= 16:
            raise UsageError(f"host bridge: addr_width must be 3..16 bits, not {addr_width!r}")
        if not isinstance(timeout, int) or timeout < 2:
            raise UsageError(f"host bridge: timeout must be at least 2 cycles, not {timeout!r}")
        self.out_channels, self.in_channels = out_channels, in_channels
        self.addr_width, self.timeout = addr_width, timeout
        a = addr_width
        members = {"rx": In(stream.Signature(8)), "tx": Out(stream.Signature(8)),
                   "m_axil_awaddr": Out(a), "m_axil_awvalid": Out(1), "m_axil_awready": In(1),
                   "m_axil_wdata": Out(32), "m_axil_wstrb": Out(4), "m_axil_wvalid": Out(1),
                   "m_axil_wready": In(1), "m_axil_bresp": In(2), "m_axil_bvalid": In(1), "m_axil_bready": Out(1),
                   "m_axil_araddr": Out(a), "m_axil_arvalid": Out(1), "m_axil_arready": In(1),
                   "m_axil_rdata": In(32), "m_axil_rresp": In(2), "m_axil_rvalid": In(1), "m_axil_rready": Out(1)}
        for c in range(out_channels):
            members.update({f"m_axis{c}_tdata": Out(32), f"m_axis{c}_tvalid": Out(1), f"m_axis{c}_tready": In(1),
                            f"m_axis{c}_tlast": Out(1)})
        for c in range(in_channels):
            members.update({f"s_axis{c}_tdata": In(32), f"s_axis{c}_tvalid": In(1), f"s_axis{c}_tready": Out(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        rx, tx = self.rx, self.tx
        hdr = Signal(64)                  # OP, ARG, VAL, CRC as received (byte 0 at the LSB)
        op, arg, val, hcrc = hdr[0:8], hdr[8:24], hdr[24:56], hdr[56:64]
        nb = Signal(range(9))             # bytes collected (header, word)
        crc = Signal(8)                   # running CRC of the header / payload / response
        count = Signal(32)                # stream words left
        word = Signal(32)
        status = Signal(8)
        rval = Signal(32)                 # the response's V field
        moved = Signal(32)                # stream words the design took / gave
        bad_ch = Signal()
        timed_out = Signal()
        wdog = Signal(range(self.timeout + 1))
        aw_done, w_done = Signal(), Signal()
        byte_in = rx.valid & rx.ready

        def send(m, value, nxt, update_crc=True):
            m.d.comb += [tx.valid.eq(1), tx.payload.eq(value)]
            with m.If(tx.ready):
                if update_crc:
                    m.d.sync += crc.eq(crc8_step(crc, value))
                m.next = nxt

        out_sel = [Signal(name=f"och{c}") for c in range(self.out_channels)]
        for c, s in enumerate(out_sel):
            m.d.comb += s.eq((arg == c) & ~bad_ch)
        in_valid = Const(0) if not self.in_channels else \
            Cat(getattr(self, f"s_axis{c}_tvalid") & (arg == c) for c in range(self.in_channels)).any()
        in_data = Signal(32)
        for c in range(self.in_channels):
            with m.If(arg == c):
                m.d.comb += in_data.eq(getattr(self, f"s_axis{c}_tdata"))
        m.d.comb += [self.m_axil_awaddr.eq(arg), self.m_axil_araddr.eq(arg), self.m_axil_wdata.eq(val),
                     self.m_axil_wstrb.eq(0xF)]
        for c in range(self.out_channels):
            m.d.comb += [getattr(self, f"m_axis{c}_tdata").eq(word), getattr(self, f"m_axis{c}_tlast").eq(count == 1)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += rx.ready.eq(1)
                with m.If(byte_in & (rx.payload == SYNC_CMD)):
                    m.d.sync += [nb.eq(0), crc.eq(0)]
                    m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += rx.ready.eq(1)
                with m.If(byte_in):
                    m.d.sync += [hdr.eq(Cat(hdr[8:], rx.payload)), nb.eq(nb + 1)]
                    with m.If(nb != 7):
                        m.d.sync += crc.eq(crc8_step(crc, rx.payload))
                    with m.Else():
                        m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [status.eq(0), rval.eq(0), moved.eq(0), timed_out.eq(0), wdog.eq(0), nb.eq(0),
                             count.eq(val), aw_done.eq(0), w_done.eq(0),
                             bad_ch.eq(Mux(op == OP["WRITE_STREAM"], arg >= self.out_channels,
                                           arg >= self.in_channels))]
                with m.If(crc != hcrc):
                    m.d.sync += status.eq(STATUS["BAD_CRC"])
                    m.next = "R_SYNC"
                with m.Elif(op == OP["WRITE_REG"]):
                    m.next = "AXIL_W"
                with m.Elif(op == OP["READ_REG"]):
                    m.next = "AXIL_AR"
                with m.Elif(op == OP["WRITE_STREAM"]):
                    m.d.sync += crc.eq(0)
                    with m.If(arg >= self.out_channels):
                        m.d.sync += status.eq(STATUS["BAD_CMD"])
                    m.next = "WS_BYTES"
                with m.Elif(op == OP["READ_STREAM"]):
                    with m.If(arg >= self.in_channels):
                        m.d.sync += status.eq(STATUS["BAD_CMD"])
                    m.next = "R_SYNC"
                with m.Elif(op == OP["PING"]):
                    m.d.sync += rval.eq(val)
                    m.next = "R_SYNC"
                with m.Else():
                    m.d.sync += status.eq(STATUS["BAD_CMD"])
                    m.next = "R_SYNC"

            # --- AXI4-Lite ------------------------------------------------------------------------
            with m.State("AXIL_W"):
                m.d.comb += [self.m_axil_awvalid.eq(~aw_done), self.m_axil_wvalid.eq(~w_done),
                             self.m_axil_bready.eq(aw_done & w_done)]
                with m.If(self.m_axil_awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(self.m_axil_wready):
                    m.d.sync += w_done.eq(1)
                with m.If(aw_done & w_done & self.m_axil_bvalid):
                    m.d.sync += [status.eq(self.m_axil_bresp), rval.eq(val)]
                    m.next = "R_SYNC"
            with m.State("AXIL_AR"):
                m.d.comb += self.m_axil_arvalid.eq(1)
                with m.If(self.m_axil_arready):
                    m.next = "AXIL_R"
            with m.State("AXIL_R"):
                m.d.comb += self.m_axil_rready.eq(1)
                with m.If(self.m_axil_rvalid):
                    m.d.sync += [status.eq(self.m_axil_rresp), rval.eq(self.m_axil_rdata)]
                    m.next = "R_SYNC"

            # --- WRITE_STREAM: payload words out, then the payload CRC ----------------------------
            with m.State("WS_BYTES"):
                m.d.comb += rx.ready.eq(count != 0)
                with m.If(count == 0):
                    m.next = "WS_CRC"
                with m.Elif(byte_in):
                    m.d.sync += [word.eq(Cat(word[8:], rx.payload)), nb.eq(nb + 1),
                                 crc.eq(crc8_step(crc, rx.payload))]
                    with m.If(nb == 3):
                        m.d.sync += [nb.eq(0), wdog.eq(0)]
                        m.next = "WS_PUSH"
            with m.State("WS_PUSH"):
                taken = Signal()
                for c in range(self.out_channels):
                    m.d.comb += getattr(self, f"m_axis{c}_tvalid").eq(out_sel[c] & ~timed_out)
                    with m.If(out_sel[c] & getattr(self, f"m_axis{c}_tready")):
                        m.d.comb += taken.eq(1)
                with m.If(taken & ~timed_out):
                    m.d.sync += [moved.eq(moved + 1), count.eq(count - 1)]
                    m.next = "WS_BYTES"
                with m.Elif(timed_out | bad_ch | (wdog == self.timeout - 1)):
                    m.d.sync += [count.eq(count - 1), timed_out.eq(timed_out | ~bad_ch)]
                    m.next = "WS_BYTES"
                with m.Else():
                    m.d.sync += wdog.eq(wdog + 1)
            with m.State("WS_CRC"):
                m.d.comb += rx.ready.eq(1)
                with m.If(byte_in):
                    with m.If(rx.payload != crc):
                        m.d.sync += status.eq(status | STATUS["PAYLOAD_CRC"])
                    m.next = "R_SYNC"

            # --- the response: 0x5A, OP, [words], STATUS, V, CRC ----------------------------------
            with m.State("R_SYNC"):
                with m.If(timed_out):
                    m.d.sync += status.eq(status | STATUS["TIMEOUT"])
                with m.If(op == OP["WRITE_STREAM"]):
                    m.d.sync += rval.eq(moved)
                m.d.sync += crc.eq(0)
                send(m, SYNC_RESP, "R_OP", update_crc=False)
            with m.State("R_OP"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(op)]
                with m.If(tx.ready):
                    m.d.sync += crc.eq(crc8_step(crc, op))
                    with m.If((op == OP["READ_STREAM"]) & ~status[2] & (count != 0)):
                        m.d.sync += wdog.eq(0)
                        m.next = "RS_WAIT"
                    with m.Else():
                        m.next = "R_STATUS"
            with m.State("RS_WAIT"):
                for c in range(self.in_channels):
                    m.d.comb += getattr(self, f"s_axis{c}_tready").eq((arg == c) & ~bad_ch & ~timed_out)
                with m.If(~bad_ch & ~timed_out & in_valid):
                    m.d.sync += [word.eq(in_data), moved.eq(moved + 1), nb.eq(0)]
                    m.next = "RS_BYTES"
                with m.Elif(timed_out | bad_ch | (wdog == self.timeout - 1)):
                    m.d.sync += [word.eq(0), timed_out.eq(timed_out | ~bad_ch), nb.eq(0)]
                    m.next = "RS_BYTES"
                with m.Else():
                    m.d.sync += wdog.eq(wdog + 1)
            with m.State("RS_BYTES"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(word[:8])]
                with m.If(tx.ready):
                    m.d.sync += [crc.eq(crc8_step(crc, word[:8])), word.eq(word >> 8), nb.eq(nb + 1)]
                    with m.If(nb == 3):
                        m.d.sync += [count.eq(count - 1), wdog.eq(0)]
                        with m.If(count == 1):
                            m.d.sync += rval.eq(moved)
                            m.next = "R_STATUS_T"
                        with m.Else():
                            m.next = "RS_WAIT"
            with m.State("R_STATUS_T"):           # a READ_STREAM's timeout flag joins the status
                with m.If(timed_out):
                    m.d.sync += status.eq(status | STATUS["TIMEOUT"])
                m.next = "R_STATUS"
            with m.State("R_STATUS"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(status)]
                with m.If(tx.ready):
                    m.d.sync += [crc.eq(crc8_step(crc, status)), word.eq(rval), nb.eq(0)]
                    m.next = "R_VAL"
            with m.State("R_VAL"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(word[:8])]
                with m.If(tx.ready):
                    m.d.sync += [crc.eq(crc8_step(crc, word[:8])), word.eq(word >> 8), nb.eq(nb + 1)]
                    with m.If(nb == 3):
                        m.next = "R_CRC"
            with m.State("R_CRC"):
                send(m, crc, "IDLE", update_crc=False)
        return m


def board_pins(m, platform, host, n_leds: int) -> None:
    """Wire a board top's host (``rx``/``tx``/``leds``) to the platform's UART 0 and its first
    ``n_leds`` LEDs (fewer when the board has fewer)."""
    uart = platform.request("uart", 0)
    m.d.comb += [host.rx.eq(uart.rx.i), uart.tx.o.eq(host.tx)]
    for i in range(n_leds):
        try:
            led = platform.request("led", i)
        except Exception:  # a board with fewer LEDs (amaranth raises ResourceError)
            break
        m.d.comb += led.o.eq(host.leds[i])


# --- the pieces every board top shares ----------------------------------------------------------

def uart_bridge(m, host, divisor: int, *, out_channels: int, in_channels: int, timeout: int):
    """UART receiver and transmitter on ``host``'s ``rx``/``tx`` pins, a :class:`HostBridge` between
    them (``m.submodules.urx``/``utx``/``bridge``). Returns ``(bridge, line_error)``, the latter high
    once the receiver has seen a framing error or an overrun. A host given ``bridge_ports`` (one slot of a
    shared bridge: :class:`hwcosim.hdl.compiled.board.BridgePorts`) gets those instead and builds neither."""
    from hwcosim.hdl.common.uart import UartRx, UartTx

    if getattr(host, "bridge_ports", None) is not None:
        return host.bridge_ports, Const(0)
    m.submodules.urx = urx = UartRx(divisor)
    m.submodules.utx = utx = UartTx(divisor)
    m.submodules.bridge = br = HostBridge(out_channels=out_channels, in_channels=in_channels, addr_width=8,
                                          timeout=timeout)
    wiring.connect(m, urx.o, br.rx)
    wiring.connect(m, br.tx, utx.i)
    m.d.comb += [urx.rx.eq(host.rx), host.tx.eq(utx.tx)]
    return br, (urx.frame_errors != 0) | (urx.overruns != 0)


def bridge_axil(m, br: HostBridge, target, addr_width: int = 8) -> None:
    """The bridge's AXI4-Lite master onto ``target``'s flat ``s_axil_*`` slave ports."""
    from hwcosim.hdl.common.axil_regs import axil_members

    for name, member in axil_members(addr_width).items():
        mine, its = getattr(br, "m_axil" + name[len("s_axil"):]), getattr(target, name)
        m.d.comb += its.eq(mine) if member.flow == In else mine.eq(its)


def link_words_to_beat(m, br: HostBridge, k: int, bits: int, name: str):
    """Link words of the bridge's output channel ``k`` gathered into a ``bits``-bit beat (least
    significant word first; ``ceil(bits / 32)`` words). Returns ``(beat, valid, take)``: ``beat``
    and ``valid`` hold until the caller drives ``take`` high (the beat is consumed); no word is
    taken while a beat waits."""
    nw = -(-bits // 32)
    reg = Signal(32 * nw, name=f"{name}_words")
    cnt = Signal(range(max(nw, 2)), name=f"{name}_cnt")
    full, take = Signal(name=f"{name}_full"), Signal(name=f"{name}_take")
    tvalid, tdata = getattr(br, f"m_axis{k}_tvalid"), getattr(br, f"m_axis{k}_tdata")
    m.d.comb += getattr(br, f"m_axis{k}_tready").eq(~full)
    with m.If(take):
        m.d.sync += full.eq(0)
    with m.If(tvalid & ~full):
        m.d.sync += reg.eq(Cat(reg[32:], tdata) if nw > 1 else tdata)
        with m.If(cnt == nw - 1):
            m.d.sync += [cnt.eq(0), full.eq(1)]
        with m.Else():
            m.d.sync += cnt.eq(cnt + 1)
    return reg[:bits], full, take


def beat_to_link_words(m, br: HostBridge, k: int, fifo, name: str, clear=None) -> None:
    """The beats of ``fifo`` (a FIFO with ``r_data``/``r_rdy``/``r_en``) out on the bridge's input
    channel ``k``, each as ``ceil(width / 32)`` words, least significant first; ``clear`` (optional)
    restarts at the first word of a beat."""
    nw = -(-fifo.width // 32)
    cnt = Signal(range(max(nw, 2)), name=f"{name}_cnt")
    padded = Signal(32 * nw, name=f"{name}_beat")
    ready = getattr(br, f"s_axis{k}_tready")
    last = cnt == nw - 1
    words = [padded[32 * i:32 * i + 32] for i in range(nw)]
    word = words[0]
    for i in range(1, nw):
        word = Mux(cnt == i, words[i], word)
    m.d.comb += [padded.eq(fifo.r_data), getattr(br, f"s_axis{k}_tvalid").eq(fifo.r_rdy),
                 getattr(br, f"s_axis{k}_tdata").eq(word), fifo.r_en.eq(ready & last)]
    if nw > 1:
        with m.If(fifo.r_rdy & ready):
            m.d.sync += cnt.eq(Mux(last, 0, cnt + 1))
        if clear is not None:
            with m.If(clear):
                m.d.sync += cnt.eq(0)


class HostBoardTop(Elaboratable):
    """A board top: the host made by ``make_host(divisor)`` (a component with ``rx``/``tx``/``leds``)
    on the board's UART 0 and first ``n_leds`` LEDs, clocked by the oscillator or through an ECP5 PLL
    (``pll``, :class:`hwcosim.hdl.common.clocking.PllSettings`); the UART divisor follows the clock
    (``clock_hz`` and ``divisor`` are set when elaborated)."""

    def __init__(self, make_host, baud: int = 115200, pll=None, n_leds: int = 4):
        self.make_host, self.baud, self.pll, self.n_leds = make_host, baud, pll, n_leds

    def elaborate(self, platform):
        from hwcosim.hdl.common.clocking import board_clock
        from hwcosim.models.hostlink import divisor_for

        m = Module()
        self.clock_hz = board_clock(m, platform, self.pll)
        self.divisor = divisor_for(self.clock_hz, self.baud)
        m.submodules.host = host = self.make_host(self.divisor)
        board_pins(m, platform, host, self.n_leds)
        return m


class HostCore(wiring.Component):
    """Base of a board top's core: UART pins ``rx``/``tx`` and ``leds``, a parameter set of type
    ``params_type`` (refused otherwise), the UART ``divisor`` (clock cycles per bit) and the bridge's
    watchdog ``timeout`` on stream words (cycles). Subclasses build the bridge with
    :func:`uart_bridge` in ``elaborate``."""

    #: the parameter class the core takes
    params_type: type = object

    def __init__(self, params, divisor: int, timeout: int = 1 << 24):
        if not isinstance(params, self.params_type):
            t = self.params_type
            raise TypeError(f"{type(self).__name__} takes a {t.__module__}.{t.__qualname__}, not {params!r}")
        self.params, self.divisor, self.timeout = params, divisor, timeout
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8)})
