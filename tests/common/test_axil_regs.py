"""The one AXI4-Lite register file (hdl.common.axil_regs): protocol, map validation, and that every
AXI top of the registry is built on it."""

from __future__ import annotations

import pytest
from amaranth import Module
from amaranth.sim import Simulator
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile, Reg, register_map_markdown, regs_by_name, writable

MAP = (Reg("CTRL", 0x00, "w", "commands"), Reg("VALUE", 0x04, "rw", "a value"), Reg("ID", 0x08, "r", "id"))


class _Top:
    """A register file with a VALUE register kept by the 'design' (as a top does)."""

    def __init__(self):
        from amaranth import Signal

        self.rf = AxiLiteRegFile(MAP)
        self.value = Signal(32)

    def module(self):
        m = Module()
        m.submodules.rf = rf = self.rf
        m.d.comb += [rf.w_ok.eq(rf.w_writable), rf.r_VALUE.eq(self.value), rf.r_ID.eq(0xC0FFEE)]
        with m.If(rf.wr & (rf.widx == 1)):
            m.d.sync += self.value.eq(rf.wdata)
        return m


def _run(body):
    top = _Top()
    sim = Simulator(top.module())
    sim.add_clock(1e-8)
    async def tb(ctx):
        await body(ctx, top.rf)

    sim.add_testbench(tb)
    sim.run()


async def _write(ctx, rf, addr, data):
    ctx.set(rf.s_axil_awaddr, addr)
    ctx.set(rf.s_axil_wdata, data)
    ctx.set(rf.s_axil_awvalid, 1)
    ctx.set(rf.s_axil_wvalid, 1)
    ctx.set(rf.s_axil_bready, 1)
    await ctx.tick().until(rf.s_axil_awready)
    ctx.set(rf.s_axil_awvalid, 0)
    ctx.set(rf.s_axil_wvalid, 0)
    await ctx.tick().until(rf.s_axil_bvalid)
    return ctx.get(rf.s_axil_bresp)


async def _read(ctx, rf, addr):
    ctx.set(rf.s_axil_araddr, addr)
    ctx.set(rf.s_axil_arvalid, 1)
    ctx.set(rf.s_axil_rready, 1)
    await ctx.tick().until(rf.s_axil_arready)
    ctx.set(rf.s_axil_arvalid, 0)
    await ctx.tick().until(rf.s_axil_rvalid)
    return ctx.get(rf.s_axil_rdata), ctx.get(rf.s_axil_rresp)


def test_sim_write_read_and_errors():
    seen = {}

    async def body(ctx, rf):
        seen["w_value"] = await _write(ctx, rf, 0x04, 0x1234_5678)
        seen["r_value"] = await _read(ctx, rf, 0x04)
        seen["r_id"] = await _read(ctx, rf, 0x08)
        seen["r_ctrl"] = await _read(ctx, rf, 0x00)        # write-only: OKAY, 0
        seen["r_unmapped"] = await _read(ctx, rf, 0x40)
        seen["w_readonly"] = await _write(ctx, rf, 0x08, 1)
        seen["w_unmapped"] = await _write(ctx, rf, 0x44, 1)
        seen["r_after"] = await _read(ctx, rf, 0x04)

    _run(body)
    assert seen["w_value"] == 0 and seen["r_value"] == (0x1234_5678, 0)
    assert seen["r_id"] == (0xC0FFEE, 0) and seen["r_ctrl"] == (0, 0)
    assert seen["r_unmapped"] == (0, 2)
    assert seen["w_readonly"] == 2 and seen["w_unmapped"] == 2
    assert seen["r_after"] == (0x1234_5678, 0)   # refused writes changed nothing


@pytest.mark.parametrize("regs,msg", [
    ((Reg("A", 0, "r", ""), Reg("A", 4, "r", "")), "name 'A' appears twice"),
    ((Reg("A", 0, "r", ""), Reg("B", 0, "r", "")), "address 0 appears twice"),
    ((Reg("A", 0x100, "r", ""),), "beyond a 8-bit address"),
    ((), "at least one register"),
])
def test_wrong_maps(regs, msg):
    with pytest.raises(ValueError, match=msg):
        AxiLiteRegFile(regs)


@pytest.mark.parametrize("kw,msg", [(dict(name="ctrl", addr=0, access="r"), "upper-case"),
                                    (dict(name="A", addr=2, access="r"), "multiple of 4"),
                                    (dict(name="A", addr=0, access="x"), "access")])
def test_wrong_reg(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Reg(doc="", **kw)


def test_map_helpers():
    assert regs_by_name(MAP) == {"CTRL": 0, "VALUE": 4, "ID": 8}
    assert writable(MAP) == ("CTRL", "VALUE")
    md = register_map_markdown(MAP)
    assert "| `0x04` | `VALUE` | RW | a value |" in md


def _has_regfile(component) -> bool:
    from amaranth.hdl import Fragment

    frag = Fragment.get(component, None)

    def walk(f):
        for sub, _name, _src in f.subfragments:
            if isinstance(getattr(sub, "origins", None), tuple) and any(isinstance(o, AxiLiteRegFile)
                                                                        for o in sub.origins):
                return True
            if walk(sub):
                return True
        return False

    return walk(frag)


def test_every_axi_top_uses_the_register_file():
    from hwcosim.cosim.registry import designs, resolve

    tops = [d for d in designs().values() if d.register_map]
    assert len(tops) >= 2     # bbs-lstm-axi and fss-axi
    for d in tops:
        c = d.build(d.default_params())
        assert c.regfile_cls is AxiLiteRegFile
        assert _has_regfile(c), d.name
        assert resolve(d.register_map) and all(isinstance(r, Reg) for r in resolve(d.register_map))
