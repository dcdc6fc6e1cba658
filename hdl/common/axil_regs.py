"""One AXI4-Lite register file for every AXI top: named, documented registers behind a slave.

A top level declares its register map once, as a tuple of :class:`Reg` (name, byte address,
access, one line of documentation), instantiates :class:`AxiLiteRegFile` with it and connects its
own flat ``s_axil_*`` ports with :func:`connect_axil`. The register file owns the protocol; the top
owns the meaning of the registers:

- a write is accepted when ``AWVALID`` and ``WVALID`` are both high and no response is pending
  (address and data together; ``AWREADY = WREADY`` = that condition, ``WSTRB`` ignored). In that
  cycle ``wr`` is high with ``widx`` (the word address) and ``wdata``; the top answers with ``w_ok``
  (OKAY when high, else SLVERR), and the register file raises ``BVALID`` the next cycle with that
  ``BRESP``, held until ``BREADY``. ``w_writable`` tells the top whether the address names a
  register with write access (a top whose responses depend only on the address drives
  ``w_ok`` from it);
- a read is accepted when ``ARVALID`` is high and no read data is pending (``ARREADY = ~RVALID``).
  In that cycle ``rd`` is high; the next cycle ``RVALID`` rises with ``RDATA`` = the value the top
  drives on ``r_<NAME>`` (0 for a write-only register) and ``RRESP`` = OKAY, or ``RDATA`` = 0 and
  ``RRESP`` = SLVERR for an address outside the map (``bad_read`` is high in the accepting cycle),
  all held until ``RREADY``.

One write and one read may be accepted in the same cycle; every response takes one cycle. The
byte address has ``addr_width`` bits, bits 1:0 ignored. :func:`register_map_markdown` renders the
map for the documentation (``hwcosim`` docs pages of the designs with an AXI top).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Cat, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Reg", "AxiLiteRegFile", "axil_members", "connect_axil", "register_map_markdown", "regs_by_name",
           "writable"]

OKAY, SLVERR = 0b00, 0b10
ACCESS = ("r", "w", "rw")


@dataclass(frozen=True)
class Reg:
    """One 32-bit register: ``name``, byte ``addr`` (a multiple of 4), ``access`` r / w / rw, ``doc``."""

    name: str
    addr: int
    access: str
    doc: str

    def __post_init__(self):
        if not self.name.isidentifier() or not self.name.isupper():
            raise ValueError(f"register name {self.name!r} must be an upper-case identifier, e.g. CTRL")
        if self.addr < 0 or self.addr % 4:
            raise ValueError(f"register {self.name}: address {self.addr:#x} must be a non-negative multiple of 4")
        if self.access not in ACCESS:
            raise ValueError(f"register {self.name}: access {self.access!r} must be one of {ACCESS}")


def regs_by_name(regs) -> dict[str, int]:
    """``{name: byte address}`` of a register map."""
    return {r.name: r.addr for r in regs}


def writable(regs) -> tuple[str, ...]:
    """Names of the registers a write changes."""
    return tuple(r.name for r in regs if "w" in r.access)


def axil_members(addr_width: int = 8, prefix: str = "s_axil") -> dict:
    """The flat AXI4-Lite slave ports (as a shell's block design names them), for a signature."""
    p = prefix
    return {f"{p}_awaddr": In(addr_width), f"{p}_awvalid": In(1), f"{p}_awready": Out(1),
            f"{p}_wdata": In(32), f"{p}_wstrb": In(4), f"{p}_wvalid": In(1), f"{p}_wready": Out(1),
            f"{p}_bresp": Out(2), f"{p}_bvalid": Out(1), f"{p}_bready": In(1),
            f"{p}_araddr": In(addr_width), f"{p}_arvalid": In(1), f"{p}_arready": Out(1),
            f"{p}_rdata": Out(32), f"{p}_rresp": Out(2), f"{p}_rvalid": Out(1), f"{p}_rready": In(1)}


class AxiLiteRegFile(wiring.Component):
    """AXI4-Lite slave over a register map (see the module docstring for the timing).

    Parameters
    ----------
    regs : sequence of Reg
        The register map; names and addresses unique, addresses below ``2 ** addr_width``.
    addr_width : int
        Byte-address width of ``AWADDR`` / ``ARADDR`` (3..16, default 8).

    Attributes
    ----------
    s_axil_* : AXI4-Lite slave ports (flat names).
    wr, widx, wdata : a write accepted this cycle, its word address and data.
    w_writable : the accepted write's address names a register with write access.
    w_ok : In; the response of the write accepted this cycle (1 OKAY, 0 SLVERR).
    rd, bad_read : a read accepted this cycle; and its address is outside the map.
    r_<NAME> : In(32) for every register; the value a read returns (write-only: ignored, reads 0).
    """

    def __init__(self, regs, addr_width: int = 8):
        regs = tuple(regs)
        if not 3 <= addr_width <= 16:
            raise ValueError(f"AXI4-Lite address width {addr_width} must be 3..16 bits")
        if not regs:
            raise ValueError("a register file needs at least one register")
        for kind, key in (("name", lambda r: r.name), ("address", lambda r: r.addr)):
            seen = [key(r) for r in regs]
            dup = sorted({k for k in seen if seen.count(k) > 1}, key=str)
            if dup:
                raise ValueError(f"register {kind} {dup[0]!r} appears twice in the map")
        big = [r for r in regs if r.addr >= 1 << addr_width]
        if big:
            raise ValueError(f"register {big[0].name} at {big[0].addr:#x} is beyond a {addr_width}-bit address")
        self.regs, self.addr_width = regs, addr_width
        members = axil_members(addr_width)
        members.update({"wr": Out(1), "widx": Out(addr_width - 2), "wdata": Out(32), "w_writable": Out(1),
                        "w_ok": In(1), "rd": Out(1), "bad_read": Out(1)})
        members.update({f"r_{r.name}": In(32) for r in regs if "r" in r.access})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        widx, ridx = self.s_axil_awaddr[2:], self.s_axil_araddr[2:]
        wr = self.s_axil_awvalid & self.s_axil_wvalid & ~self.s_axil_bvalid
        rd = self.s_axil_arvalid & ~self.s_axil_rvalid
        m.d.comb += [self.wr.eq(wr), self.widx.eq(widx), self.wdata.eq(self.s_axil_wdata),
                     self.s_axil_awready.eq(wr), self.s_axil_wready.eq(wr), self.s_axil_arready.eq(~self.s_axil_rvalid),
                     self.rd.eq(rd)]
        w_regs = [r for r in self.regs if "w" in r.access]
        m.d.comb += self.w_writable.eq(Cat(widx == r.addr >> 2 for r in w_regs).any() if w_regs else 0)

        with m.If(wr):
            m.d.sync += [self.s_axil_bvalid.eq(1), self.s_axil_bresp.eq(Mux(self.w_ok, OKAY, SLVERR))]
        with m.Elif(self.s_axil_bready):
            m.d.sync += self.s_axil_bvalid.eq(0)

        # (a Mux of comparisons, not a switch of constants: Yosys would make that a ROM, whose
        # contents k-induction treats as free state)
        mapped = Cat(*(ridx == r.addr >> 2 for r in self.regs)).any()
        m.d.comb += self.bad_read.eq(rd & ~mapped)
        with m.If(rd):
            m.d.sync += [self.s_axil_rvalid.eq(1), self.s_axil_rresp.eq(Mux(mapped, OKAY, SLVERR))]
            with m.Switch(ridx):
                for r in self.regs:
                    with m.Case(r.addr >> 2):
                        m.d.sync += self.s_axil_rdata.eq(getattr(self, f"r_{r.name}") if "r" in r.access else 0)
                with m.Default():
                    m.d.sync += self.s_axil_rdata.eq(0)
        with m.Elif(self.s_axil_rready):
            m.d.sync += self.s_axil_rvalid.eq(0)
        return m


def connect_axil(m: Module, top, regfile: AxiLiteRegFile, prefix: str = "s_axil") -> None:
    """Wire the top's flat AXI4-Lite ports to the register file's (combinationally)."""
    for name, member in axil_members(regfile.addr_width, prefix).items():
        mine, its = getattr(top, name), getattr(regfile, "s_axil" + name[len(prefix):])
        m.d.comb += (its.eq(mine) if member.flow == In else mine.eq(its))


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a ``|`` escaped)."""
    return text.replace("|", "\\|")


def register_map_markdown(regs, title: str = "") -> str:
    """The register map as a Markdown table (address, name, access, description)."""
    rows = [f"### {title}", ""] if title else []
    rows += ["| address | register | access | description |", "|---|---|---|---|"]
    names = {"r": "R", "w": "W", "rw": "RW"}
    for r in sorted(regs, key=lambda r: r.addr):
        rows.append(f"| `{r.addr:#04x}` | `{r.name}` | {names[r.access]} | {_cell(r.doc)} |")
    return "\n".join(rows)
