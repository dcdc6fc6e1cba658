"""Typed register maps: one definition per AXI top, from which everything else is derived.

A top declares its AXI4-Lite registers once, as a :class:`RegisterMap` of :class:`Register`
(name, byte address, access, doc) with named :class:`Field` s (bits, access, reset, doc). From that
one object come:

- the RTL decode: :attr:`Register.word` (the word address the register file's ``widx`` / ``ridx``
  compare with), :attr:`Field.bit` / :attr:`Field.lsb` (bit positions of commands and flags),
  :meth:`Register.pack` (the value of a read-only identification register);
- the host and testbench constants: :meth:`RegisterMap.addresses` (``{name: byte address}``),
  :meth:`RegisterMap.masks` (``{field: mask}`` of one register, e.g. the CTRL command bits),
  :meth:`RegisterMap.writable` (the registers a write changes);
- the documentation: :meth:`RegisterMap.markdown` (a table of registers, each followed by its
  fields) for the design's docs page;
- the formal checks' expectations (the same addresses, writable set and write-only registers).

A :class:`Register` is a :class:`hwcosim.hdl.common.axil_regs.Reg`, so the map is also what
:class:`~hwcosim.hdl.common.axil_regs.AxiLiteRegFile` is built from.

Access codes: ``r`` (read-only), ``w`` (write-only: reads 0), ``rw``; a field's access may also
be ``w1`` (a command: a write of 1 acts, the bit is not stored) or ``rc`` (read, sticky: cleared by
a command, not by a write to the register itself). A field's ``reset`` is an int, or a string
naming a build parameter (``"max_row_groups"``) when the value depends on the build.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwcosim.hdl.common.axil_regs import Reg, _cell
from hwcosim.models.errors import UsageError

__all__ = ["Field", "Register", "RegisterMap"]

FIELD_ACCESS = ("r", "w", "rw", "w1", "rc")


@dataclass(frozen=True)
class Field:
    """Bits of a register: ``name``, ``bits`` (one bit index, or ``(msb, lsb)``), ``access``, ``reset``, ``doc``."""

    name: str
    bits: int | tuple[int, int]
    access: str = "r"
    reset: int | str = 0
    doc: str = ""

    def __post_init__(self):
        if not self.name.isidentifier() or not self.name.isupper():
            raise ValueError(f"field name {self.name!r} must be an upper-case identifier, e.g. START")
        hi, lo = (self.bits, self.bits) if isinstance(self.bits, int) else self.bits
        if not 0 <= lo <= hi < 32:
            raise ValueError(f"field {self.name}: bits {self.bits!r} must lie in 31..0 with msb >= lsb")
        if self.access not in FIELD_ACCESS:
            raise ValueError(f"field {self.name}: access {self.access!r} must be one of {FIELD_ACCESS}")

    @property
    def lsb(self) -> int:
        return self.bits if isinstance(self.bits, int) else self.bits[1]

    @property
    def msb(self) -> int:
        return self.bits if isinstance(self.bits, int) else self.bits[0]

    @property
    def width(self) -> int:
        return self.msb - self.lsb + 1

    @property
    def mask(self) -> int:
        """The field's bits in the register word (``1 << bit`` for a one-bit field)."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def bit(self) -> int:
        """The bit index of a one-bit field (for ``wdata[f.bit]`` in the RTL)."""
        if self.width != 1:
            raise ValueError(f"field {self.name} is {self.width} bits wide, not one bit")
        return self.lsb

    @property
    def slice(self) -> slice:
        """``slice(lsb, msb + 1)``, for ``value[f.slice]`` in the RTL."""
        return slice(self.lsb, self.msb + 1)

    def bits_text(self) -> str:
        return str(self.lsb) if self.width == 1 else f"{self.msb}:{self.lsb}"


@dataclass(frozen=True)
class Register(Reg):
    """A :class:`~hwcosim.hdl.common.axil_regs.Reg` with named fields (none: one 32-bit value)."""

    fields: tuple[Field, ...] = ()

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "fields", tuple(self.fields))
        names = [f.name for f in self.fields]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"register {self.name}: field {dup[0]} appears twice")
        used = 0
        for f in self.fields:
            if used & f.mask:
                raise ValueError(f"register {self.name}: field {f.name} overlaps another field")
            used |= f.mask

    @property
    def word(self) -> int:
        """The word address (``addr >> 2``): what the register file's ``widx`` / ``ridx`` compare with."""
        return self.addr >> 2

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r}; it has {[f.name for f in self.fields]}")

    def __getattr__(self, name: str) -> Field:
        # fields by attribute: REGISTER_MAP["CTRL"].SOFT_RESET.bit (only called for unknown attributes)
        if name.isupper():
            try:
                return self.field(name)
            except KeyError as e:
                raise AttributeError(str(e)) from None
        raise AttributeError(name)

    def masks(self) -> dict[str, int]:
        """``{field: mask}``, e.g. the CTRL command bits a host ORs together."""
        return {f.name: f.mask for f in self.fields}

    def cat(self, **values):
        """The register word as an Amaranth value: ``values`` (one per field, by name) placed at their
        fields' bits, lowest first, unused bits between them 0 (``Cat`` of the fields in bit order)."""
        from amaranth.hdl import Cat, Const

        missing = [f.name for f in self.fields if f.name not in values]
        extra = [n for n in values if n not in {f.name for f in self.fields}]
        if missing or extra:
            raise UsageError(f"register {self.name}: give every field once (missing {missing}, unknown {extra})")
        parts, pos = [], 0
        for f in sorted(self.fields, key=lambda f: f.lsb):
            if f.lsb > pos:
                parts.append(Const(0, f.lsb - pos))
            parts.append(values[f.name])
            pos = f.msb + 1
        return Cat(*parts)

    def unpack(self, word: int) -> dict[str, int]:
        """``{field: value}`` of a register word read back (the host side of :meth:`pack`)."""
        return {f.name: (int(word) & f.mask) >> f.lsb for f in self.fields}

    def pack(self, **values: int) -> int:
        """The register word holding ``values`` in the named fields (each must fit its field)."""
        word = 0
        for name, v in values.items():
            f = self.field(name)
            if not 0 <= v < 1 << f.width:
                raise UsageError(f"{self.name}.{name} = {v} does not fit {f.width} bits")
            word |= v << f.lsb
        return word


class RegisterMap:
    """An ordered, iterable map of :class:`Register` s (what :class:`AxiLiteRegFile` takes).

    ``m["CTRL"]`` or ``m.CTRL`` is a register, ``m.CTRL.START`` its field.
    """

    def __init__(self, *regs: Register, title: str = ""):
        for r in regs:
            if not isinstance(r, Register):
                raise TypeError(f"a RegisterMap holds Register entries, not {r!r}")
        for kind, key in (("name", lambda r: r.name), ("address", lambda r: r.addr)):
            seen = [key(r) for r in regs]
            dup = sorted({k for k in seen if seen.count(k) > 1}, key=str)
            if dup:
                raise ValueError(f"register {kind} {dup[0]!r} appears twice in the map")
        self.regs = tuple(regs)
        self.title = title
        self._by_name = {r.name: r for r in regs}

    def __iter__(self):
        return iter(self.regs)

    def __len__(self) -> int:
        return len(self.regs)

    def __getitem__(self, name: str) -> Register:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no register {name!r} in the map; it has {list(self._by_name)}") from None

    def __getattr__(self, name: str) -> Register:
        if name.isupper() and name in self.__dict__.get("_by_name", {}):
            return self._by_name[name]
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"RegisterMap({', '.join(r.name for r in self.regs)})"

    # ---- host / testbench constants ---------------------------------------------------------
    def addresses(self) -> dict[str, int]:
        """``{name: byte address}``."""
        return {r.name: r.addr for r in self.regs}

    def masks(self, name: str) -> dict[str, int]:
        """``{field: mask}`` of register ``name``."""
        return self[name].masks()

    def writable(self) -> tuple[str, ...]:
        """Names of the registers a write changes (the others answer SLVERR to a write)."""
        return tuple(r.name for r in self.regs if "w" in r.access)

    def write_only(self) -> tuple[str, ...]:
        """Names of the mapped registers a read answers with 0."""
        return tuple(r.name for r in self.regs if r.access == "w")

    # ---- documentation ----------------------------------------------------------------------
    def markdown(self, title: str = "") -> str:
        """Markdown: the register table (address, name, access, description), then one table of the
        fields of every register that has them (bits, field, access, reset, description)."""
        from hwcosim.hdl.common.axil_regs import register_map_markdown

        out = [register_map_markdown(self.regs, title)]
        names = {"r": "R", "w": "W", "rw": "RW", "w1": "W1 (command)", "rc": "R (sticky)"}
        for r in sorted(self.regs, key=lambda r: r.addr):
            if not r.fields:
                continue
            out += ["", f"`{r.name}` (`{r.addr:#04x}`) fields:", "",
                    "| bits | field | access | reset | description |", "|---|---|---|---|---|"]
            for f in sorted(r.fields, key=lambda f: f.lsb):
                reset = f"`{f.reset}`" if isinstance(f.reset, str) else str(f.reset)
                out.append(f"| {f.bits_text()} | `{f.name}` | {names[f.access]} | {reset} | "
                           f"{_cell(f.doc)} |")
        return "\n".join(out)
