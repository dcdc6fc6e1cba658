"""Board top of a compiled model: one engine per distinct engine configuration of the model behind
ONE UART host bridge (``hwcosim build OUT/ --board ulx3s-85f``, ``hwcosim board run OUT/``).

Blocks: :class:`hwcosim.hdl.common.uart.UartRx` / :class:`~hwcosim.hdl.common.uart.UartTx` ->
:class:`hwcosim.hdl.common.host_bridge.HostBridge` (16-bit AXI4-Lite addresses, ``2 n`` output and
``n`` input stream channels for ``n`` engines) -> :class:`AxiLiteDecode` and the stream channels ->
the engines' own board-top cores, unchanged (:class:`hwcosim.hdl.bbs.board.SpMxVHost`,
:class:`hwcosim.hdl.bbs.board_lstm.LSTMHost`, :class:`hwcosim.hdl.fss.board.FSSHost`), each given
the bridge-side ports of its slot (:class:`BridgePorts`) instead of a UART and a bridge of its own.

The host protocol (:mod:`hwcosim.models.hostlink`) is unchanged; engine ``e`` is addressed as

- registers: byte address ``e << 8 | A`` for its own register ``A`` (:func:`reg_address`); an
  address whose engine field (bits 15:8) names no engine answers DECERR (``BRESP``/``RRESP`` 3);
- streams: its output channels ``c`` (0 weights, 1 inputs) are the bridge's ``2 e + c``
  (:func:`out_channel`), its input channel 0 (results) the bridge's ``e`` (:func:`in_channel`).

So each engine's host session (``hwcosim.cosim.designs.*.board.session``) runs unchanged through an
address-offsetting link (:class:`hwcosim.cosim.flow.board.EngineLink`). Layers of equal configuration
share an engine; their weights are reloaded through the engine's own loader before each layer.

The decode relies on one property of the master, which :class:`HostBridge` has: the address is
held from ``AWVALID`` (``ARVALID``) to the end of its response (both come from the bridge's command
register), so the write, response and read channels are routed by the address alone.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass

from amaranth import Elaboratable, Module
from amaranth.hdl import Cat, Const, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hwcosim.hdl.common.axil_regs import axil_members
from hwcosim.hdl.common.host_bridge import HostBoardTop, HostBridge, bridge_axil
from hwcosim.models.errors import UsageError

__all__ = ["ENGINE_CORES", "MAX_ENGINES", "SUB_WIDTH", "SEL_WIDTH", "DECERR", "CompiledTopParams", "AxiLiteDecode",
           "BridgePorts", "CompiledHost", "board_top", "reg_address", "out_channel", "in_channel"]

#: engine name -> ("module:Core" of its board-top core, "module:Params" of its parameter class)
ENGINE_CORES = {"bbs-spmxv": ("hwcosim.hdl.bbs.board:SpMxVHost", "hwcosim.models.bbs.spmxv:BBSParams"),
                "bbs-lstm": ("hwcosim.hdl.bbs.board_lstm:LSTMHost", "hwcosim.models.bbs.lstm:LSTMParams"),
                "fss-gemm": ("hwcosim.hdl.fss.board:FSSHost", "hwcosim.models.fss.gemm:FSSParams")}
#: engines one top holds: two output channels each, and the bridge has at most 16
MAX_ENGINES = 8
#: address bits of one engine's register file, and of the engine field above them
SUB_WIDTH, SEL_WIDTH = 8, 8
#: the AXI response of an address that names no engine
DECERR = 3
#: each engine core's own output and input stream channels
_OUT_PER_ENGINE, _IN_PER_ENGINE = 2, 1


def _resolve(ref: str):
    mod, name = ref.split(":")
    return getattr(importlib.import_module(mod), name)


def reg_address(engine: int, addr: int) -> int:
    """The bridge address of register ``addr`` of engine ``engine``."""
    return engine << SUB_WIDTH | addr


def out_channel(engine: int, channel: int) -> int:
    """The bridge output channel of engine ``engine``'s output channel ``channel``."""
    return _OUT_PER_ENGINE * engine + channel


def in_channel(engine: int, channel: int) -> int:
    """The bridge input channel of engine ``engine``'s input channel ``channel``."""
    return _IN_PER_ENGINE * engine + channel


@dataclass(frozen=True)
class CompiledTopParams:
    """The engines of a compiled model's board top: ``((engine name, parameters), ...)`` in slot order."""

    engines: tuple

    def __post_init__(self):
        if not 1 <= len(self.engines) <= MAX_ENGINES:
            raise UsageError(f"a compiled board top holds 1..{MAX_ENGINES} engines, not {len(self.engines)}")
        for name, p in self.engines:
            if name not in ENGINE_CORES:
                raise UsageError(f"no board-top core for engine {name!r}; known: {', '.join(ENGINE_CORES)}")
            if not isinstance(p, _resolve(ENGINE_CORES[name][1])):
                raise UsageError(f"engine {name!r} takes {ENGINE_CORES[name][1]}, not {type(p).__name__}")

    def to_dict(self) -> dict:
        return {"engines": [{"engine": n, "params": p.to_dict()} for n, p in self.engines]}

    @classmethod
    def from_dict(cls, d: dict) -> CompiledTopParams:
        return cls(tuple((e["engine"], _resolve(ENGINE_CORES[e["engine"]][1]).from_dict(e["params"]))
                         for e in d["engines"]))

    def key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


class AxiLiteDecode(wiring.Component):
    """One AXI4-Lite slave port (``s_axil_*``, ``SUB_WIDTH + SEL_WIDTH`` address bits) onto ``n`` master
    ports (``m<e>_axil_*``, ``SUB_WIDTH`` bits): the address's upper field selects the engine; an
    engine field ``>= n`` is answered here with DECERR (a write after both its address and data were
    taken, a read one cycle after its address). The master must hold the address until the response
    (see the module docstring)."""

    def __init__(self, n: int):
        if not 1 <= n <= MAX_ENGINES:
            raise UsageError(f"AXI4-Lite decode: 1..{MAX_ENGINES} engines, not {n}")
        self.n = n
        members = axil_members(SUB_WIDTH + SEL_WIDTH)
        for e in range(n):
            members.update({k: v.flip() for k, v in axil_members(SUB_WIDTH, f"m{e}_axil").items()})
        super().__init__(members)

    def port(self, e: int, name: str):
        return getattr(self, f"m{e}_axil_{name}")

    def elaborate(self, platform):
        m = Module()
        s = lambda name: getattr(self, f"s_axil_{name}")  # noqa: E731
        wsel, rsel = s("awaddr")[SUB_WIDTH:], s("araddr")[SUB_WIDTH:]
        for e in range(self.n):
            p = lambda name, e=e: self.port(e, name)  # noqa: E731
            hw, hr = wsel == e, rsel == e
            m.d.comb += [p("awaddr").eq(s("awaddr")[:SUB_WIDTH]), p("araddr").eq(s("araddr")[:SUB_WIDTH]),
                         p("wdata").eq(s("wdata")), p("wstrb").eq(s("wstrb")),
                         p("awvalid").eq(s("awvalid") & hw), p("wvalid").eq(s("wvalid") & hw),
                         p("bready").eq(s("bready") & hw), p("arvalid").eq(s("arvalid") & hr),
                         p("rready").eq(s("rready") & hr)]
            with m.If(hw):
                m.d.comb += [s(k).eq(p(k)) for k in ("awready", "wready", "bresp", "bvalid")]
            with m.If(hr):
                m.d.comb += [s(k).eq(p(k)) for k in ("arready", "rdata", "rresp", "rvalid")]
        # no engine at this address: answer DECERR
        err_aw, err_w, err_r = Signal(), Signal(), Signal()
        with m.If(wsel >= self.n):
            m.d.comb += [s("awready").eq(~err_aw), s("wready").eq(~err_w), s("bvalid").eq(err_aw & err_w),
                         s("bresp").eq(DECERR)]
            with m.If(s("awvalid") & ~err_aw):
                m.d.sync += err_aw.eq(1)
            with m.If(s("wvalid") & ~err_w):
                m.d.sync += err_w.eq(1)
            with m.If(err_aw & err_w & s("bready")):
                m.d.sync += [err_aw.eq(0), err_w.eq(0)]
        with m.If(rsel >= self.n):
            m.d.comb += [s("arready").eq(~err_r), s("rvalid").eq(err_r), s("rresp").eq(DECERR)]
            with m.If(s("arvalid") & ~err_r):
                m.d.sync += err_r.eq(1)
            with m.If(err_r & s("rready")):
                m.d.sync += err_r.eq(0)
        return m


class BridgePorts:
    """The bridge-side ports one engine core sees, named as :class:`HostBridge`'s (``m_axil_*``,
    ``m_axis<c>_*`` for its output channels, ``s_axis<c>_*`` for its input channels): plain signals
    the combined top wires to the shared bridge. A core given them (``core.bridge_ports``) builds no
    UART or bridge of its own (:func:`hwcosim.hdl.common.host_bridge.uart_bridge`)."""

    def __init__(self, prefix: str, out_channels: int = _OUT_PER_ENGINE, in_channels: int = _IN_PER_ENGINE):
        self.out_channels, self.in_channels = out_channels, in_channels
        for name, member in axil_members(SUB_WIDTH, "m_axil").items():
            setattr(self, name, Signal(member.shape, name=f"{prefix}_{name}"))
        for c in range(out_channels):
            for k, w in (("tdata", 32), ("tvalid", 1), ("tready", 1), ("tlast", 1)):
                setattr(self, f"m_axis{c}_{k}", Signal(w, name=f"{prefix}_m_axis{c}_{k}"))
        for c in range(in_channels):
            for k, w in (("tdata", 32), ("tvalid", 1), ("tready", 1)):
                setattr(self, f"s_axis{c}_{k}", Signal(w, name=f"{prefix}_s_axis{c}_{k}"))


class CompiledHost(wiring.Component):
    """Every engine of ``params`` (:class:`CompiledTopParams`) behind one UART host bridge (see the module
    docstring).

    Parameters
    ----------
    params : CompiledTopParams
    divisor : int
        UART clock cycles per bit.
    timeout : int
        The bridge's watchdog on stream words, in cycles.

    Attributes
    ----------
    rx : In(1), tx : Out(1)
        The UART lines (8N1).
    leds : Out(8)
        bit ``e``: engine ``e``'s first LED (its busy or stream-valid light); bit 7: a UART framing
        error or overrun seen.
    """

    def __init__(self, params: CompiledTopParams, divisor: int, timeout: int = 1 << 24):
        if not isinstance(params, CompiledTopParams):
            raise TypeError(f"CompiledHost takes a CompiledTopParams, not {params!r}")
        self.params, self.divisor, self.timeout = params, divisor, timeout
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8)})

    def elaborate(self, platform):
        from hwcosim.hdl.common.uart import UartRx, UartTx

        m = Module()
        n = len(self.params.engines)
        m.submodules.urx = urx = UartRx(self.divisor)
        m.submodules.utx = utx = UartTx(self.divisor)
        m.submodules.bridge = br = HostBridge(out_channels=_OUT_PER_ENGINE * n, in_channels=_IN_PER_ENGINE * n,
                                              addr_width=SUB_WIDTH + SEL_WIDTH, timeout=self.timeout)
        wiring.connect(m, urx.o, br.rx)
        wiring.connect(m, br.tx, utx.i)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx)]
        m.submodules.decode = dec = AxiLiteDecode(n)
        bridge_axil(m, br, dec, SUB_WIDTH + SEL_WIDTH)
        leds = []
        for e, (name, p) in enumerate(self.params.engines):
            ports = BridgePorts(f"e{e}")
            core = _resolve(ENGINE_CORES[name][0])(p, self.divisor, self.timeout)
            core.bridge_ports = ports
            m.submodules[f"engine{e}"] = core
            for k, member in axil_members(SUB_WIDTH, "m_axil").items():
                mine, its = getattr(ports, k), dec.port(e, k[len("m_axil_"):])
                # the decoder's master outputs drive the core; the core's slave outputs drive the decoder
                m.d.comb += mine.eq(its) if member.flow == In else its.eq(mine)
            for c in range(_OUT_PER_ENGINE):
                b = out_channel(e, c)
                m.d.comb += [getattr(ports, f"m_axis{c}_{k}").eq(getattr(br, f"m_axis{b}_{k}"))
                             for k in ("tdata", "tvalid", "tlast")]
                m.d.comb += getattr(br, f"m_axis{b}_tready").eq(getattr(ports, f"m_axis{c}_tready"))
            for c in range(_IN_PER_ENGINE):
                b = in_channel(e, c)
                m.d.comb += [getattr(br, f"s_axis{b}_{k}").eq(getattr(ports, f"s_axis{c}_{k}"))
                             for k in ("tdata", "tvalid")]
                m.d.comb += getattr(ports, f"s_axis{c}_tready").eq(getattr(br, f"s_axis{b}_tready"))
            leds.append(core.leds[0])
        line_error = (urx.frame_errors != 0) | (urx.overruns != 0)
        m.d.comb += self.leds.eq(Cat(*leds[:7], Const(0, 7 - min(n, 7)), line_error))
        return m


def board_top(params: CompiledTopParams, baud: int = 115200, pll=None) -> Elaboratable:
    """The board top: :class:`CompiledHost` on the board's UART 0 and LEDs, clocked by the oscillator or
    an ECP5 PLL."""
    return HostBoardTop(lambda divisor: CompiledHost(params, divisor), baud, pll, n_leds=8)
