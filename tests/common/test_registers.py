"""Typed register maps (hdl.common.registers): fields, the derived constants, decode values and docs."""

from __future__ import annotations

import pytest
from hwcosim.hdl.common.axil_regs import Reg
from hwcosim.hdl.common.registers import Field, Register, RegisterMap

MAP = RegisterMap(
    Register("CTRL", 0x00, "w", "commands", fields=(Field("GO", 0, "w1", 0, "start"),
                                                    Field("CLEAR", 2, "w1", 0, "clear | reset"))),
    Register("SIZE", 0x04, "rw", "a size", fields=(Field("SIZE", (15, 0), "rw", "max_size", "the size"),)),
    Register("CONFIG", 0x08, "r", "build", fields=(Field("A", (7, 0), "r", "a", "a"),
                                                  Field("B", (23, 16), "r", "b", "b"))),
    Register("COUNT", 0x0C, "r", "a counter"),
)


def test_derived_constants():
    assert MAP.addresses() == {"CTRL": 0, "SIZE": 4, "CONFIG": 8, "COUNT": 12}
    assert MAP.masks("CTRL") == {"GO": 1, "CLEAR": 4}
    assert MAP.writable() == ("CTRL", "SIZE") and MAP.write_only() == ("CTRL",)
    assert MAP.CTRL is MAP["CTRL"] and MAP.CTRL.word == 0 and MAP.COUNT.word == 3
    assert MAP.CTRL.CLEAR.bit == 2 and MAP.SIZE.SIZE.slice == slice(0, 16) and MAP.SIZE.SIZE.width == 16
    assert all(isinstance(r, Reg) for r in MAP) and len(MAP) == 4


def test_pack_unpack_and_cat():
    from amaranth.hdl import Signal

    w = MAP.CONFIG.pack(A=3, B=200)
    assert w == 3 | 200 << 16 and MAP.CONFIG.unpack(w) == {"A": 3, "B": 200}
    with pytest.raises(ValueError, match="does not fit"):
        MAP.CONFIG.pack(A=256)
    v = MAP.CONFIG.cat(A=Signal(8), B=Signal(8))
    assert len(v) == 24                                   # bits 15:8 filled with zeros
    with pytest.raises(ValueError, match="missing"):
        MAP.CONFIG.cat(A=Signal(8))
    with pytest.raises(ValueError, match="one bit"):
        _ = MAP.SIZE.SIZE.bit


@pytest.mark.parametrize("make, msg", [
    (lambda: Field("go", 0), "upper-case"),
    (lambda: Field("GO", 32), "31..0"),
    (lambda: Field("GO", (3, 5)), "msb >= lsb"),
    (lambda: Field("GO", 0, "x"), "access"),
    (lambda: Register("R", 0, "r", "", fields=(Field("A", (3, 0)), Field("B", 3))), "overlaps"),
    (lambda: Register("R", 0, "r", "", fields=(Field("A", 0), Field("A", 1))), "twice"),
    (lambda: RegisterMap(Register("R", 0, "r", ""), Register("S", 0, "r", "")), "twice"),
    (lambda: RegisterMap(Reg("R", 0, "r", "")), "Register"),
])
def test_wrong_definitions(make, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        make()


def test_markdown_lists_registers_and_fields():
    md = MAP.markdown()
    assert "| `0x04` | `SIZE` | RW | a size |" in md
    assert "| 2 | `CLEAR` | W1 (command) | 0 | clear \\| reset |" in md
    assert "| 15:0 | `SIZE` | RW | `max_size` | the size |" in md
    assert "`COUNT` (" not in md                          # no field table for a plain 32-bit value


@pytest.mark.parametrize("module", ["hwcosim.hdl.bbs.axi_top", "hwcosim.hdl.fss.axi_top"])
def test_axi_tops_derive_their_constants(module):
    import importlib

    top = importlib.import_module(module)
    m = top.REGISTER_MAP
    assert isinstance(m, RegisterMap)
    assert top.REGS == m.addresses() and top.WRITABLE == m.writable()
    for name in ("CTRL", "STATUS", "ERROR"):
        assert getattr(top, name) == m.masks(name)
        # every register with fields documents every field
        assert all(f.doc for f in m[name].fields)
