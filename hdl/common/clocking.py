"""Board clocking: the ECP5 sysCLOCK PLL (``EHXPLLL``) from a board's oscillator to a design clock.

:func:`ecp5_pll_settings` finds divider settings for an output frequency; :class:`ECP5PLL` is the
primitive wired as a single-output PLL with feedback from its own output (``FEEDBK_PATH="CLKOP"``),
so that ``f_out = f_in / CLKI_DIV * CLKFB_DIV`` and ``f_vco = f_out * CLKOP_DIV``.

The limits are Lattice's (ECP5 and ECP5-5G Family Data Sheet, FPGA-DS-02012, table "sysCLOCK PLL
Timing"; ECP5 and ECP5-5G sysCLOCK PLL/DLL Design and Usage Guide, FPGA-TN-02200 / TN1263):

- input (CLKI) 8 to 400 MHz, phase-detector input (``f_in / CLKI_DIV``) 3.125 to 400 MHz,
- VCO 400 to 800 MHz, output (CLKOP) 3.125 to 400 MHz,
- CLKI_DIV and CLKOP_DIV 1 to 128; CLKFB_DIV 1 to 80 (the stricter of the bounds in circulation:
  the FPGA Libraries Reference Guide's EHXPLLL entry).

Among the settings that hit the asked frequency the search prefers the highest phase-detector
frequency (smallest input divider: less jitter multiplication) and then the VCO nearest the middle
of its range.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Elaboratable, Module
from amaranth.hdl import ClockDomain, ClockSignal, Instance, ResetSignal, Signal
from hwcosim.models.errors import UsageError

__all__ = ["ECP5_PLL_LIMITS", "PllSettings", "ecp5_pll_settings", "ecp5_pll_nearest", "ECP5PLL",
           "board_clock"]

#: Lattice's limits for the ECP5 EHXPLLL (see the module docstring), frequencies in MHz
ECP5_PLL_LIMITS = {"fin": (8.0, 400.0), "pfd": (3.125, 400.0), "vco": (400.0, 800.0), "fout": (3.125, 400.0),
                   "clki_div": (1, 128), "clkfb_div": (1, 80), "clkop_div": (1, 128)}

#: relative difference under which an achievable frequency counts as the asked one
TOLERANCE = 1e-4


@dataclass(frozen=True)
class PllSettings:
    """One EHXPLLL configuration (frequencies in MHz)."""

    fin_mhz: float
    clki_div: int
    clkfb_div: int
    clkop_div: int

    @property
    def pfd_mhz(self) -> float:
        return self.fin_mhz / self.clki_div

    @property
    def fout_mhz(self) -> float:
        return self.fin_mhz * self.clkfb_div / self.clki_div

    @property
    def vco_mhz(self) -> float:
        return self.fout_mhz * self.clkop_div

    def to_dict(self) -> dict:
        return {"fin_mhz": self.fin_mhz, "clki_div": self.clki_div, "clkfb_div": self.clkfb_div,
                "clkop_div": self.clkop_div, "pfd_mhz": round(self.pfd_mhz, 6), "vco_mhz": round(self.vco_mhz, 6),
                "fout_mhz": round(self.fout_mhz, 6)}


def _within(v: float, lim: tuple) -> bool:
    return lim[0] - 1e-9 <= v <= lim[1] + 1e-9


def _candidates(fin_mhz: float):
    L = ECP5_PLL_LIMITS
    if not _within(fin_mhz, L["fin"]):
        raise UsageError(f"ECP5 PLL: input clock {fin_mhz:g} MHz is outside {L['fin'][0]:g}..{L['fin'][1]:g} MHz")
    for idiv in range(L["clki_div"][0], L["clki_div"][1] + 1):
        if not _within(fin_mhz / idiv, L["pfd"]):
            continue
        for fb in range(L["clkfb_div"][0], L["clkfb_div"][1] + 1):
            fout = fin_mhz * fb / idiv
            if not _within(fout, L["fout"]):
                continue
            for odiv in range(L["clkop_div"][0], L["clkop_div"][1] + 1):
                if _within(fout * odiv, L["vco"]):
                    yield PllSettings(fin_mhz, idiv, fb, odiv)


def _rank(s: PllSettings) -> tuple:
    mid = sum(ECP5_PLL_LIMITS["vco"]) / 2
    return (s.clki_div, abs(s.vco_mhz - mid), s.clkop_div)


def ecp5_pll_nearest(fin_mhz: float, fout_mhz: float) -> PllSettings:
    """The valid setting whose output is nearest ``fout_mhz`` (ties: see the module docstring)."""
    return min(_candidates(fin_mhz), key=lambda s: (round(abs(s.fout_mhz - fout_mhz), 9), _rank(s)))


def ecp5_pll_settings(fin_mhz: float, fout_mhz: float) -> PllSettings:
    """Divider settings making ``fout_mhz`` from ``fin_mhz``; ``ValueError`` naming the nearest
    achievable frequency when no valid setting is within :data:`TOLERANCE` of it."""
    if fout_mhz <= 0:
        raise UsageError(f"ECP5 PLL: output clock {fout_mhz:g} MHz must be positive")
    best = ecp5_pll_nearest(fin_mhz, fout_mhz)
    if abs(best.fout_mhz - fout_mhz) > TOLERANCE * fout_mhz:
        raise UsageError(f"the ECP5 PLL cannot make {fout_mhz:g} MHz from {fin_mhz:g} MHz (VCO 400-800 MHz, "
                         f"phase detector >= 3.125 MHz, output 3.125-400 MHz); the nearest it makes is "
                         f"{best.fout_mhz:.4g} MHz (CLKI_DIV {best.clki_div}, CLKFB_DIV {best.clkfb_div}, "
                         f"CLKOP_DIV {best.clkop_div})")
    return best


class ECP5PLL(Elaboratable):
    """An ``EHXPLLL`` from ``clk_in`` to ``clk_out`` with ``settings``; ``locked`` is its LOCK output.

    The output is fed back (``FEEDBK_PATH="CLKOP"``); the coarse phase of CLKOP is ``CLKOP_DIV - 1``,
    as Lattice's tools set it for a 0 degree output.
    """

    def __init__(self, settings: PllSettings):
        self.settings = settings
        self.clk_in = Signal()
        self.clk_out = Signal()
        self.locked = Signal()

    def elaborate(self, platform):
        m = Module()
        s = self.settings
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{s.fin_mhz:g}", a_FREQUENCY_PIN_CLKOP=f"{s.fout_mhz:.6g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=s.clki_div, p_CLKFB_DIV=s.clkfb_div, p_CLKOP_DIV=s.clkop_div,
            p_CLKOP_CPHASE=s.clkop_div - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=self.clk_in, i_CLKFB=self.clk_out, o_CLKOP=self.clk_out, o_LOCK=self.locked,
            i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1,
            i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0)
        return m


def board_clock(m: Module, platform, pll: PllSettings | None) -> float:
    """Set up a board top's ``sync`` domain in ``m``; returns its frequency in Hz.

    Without ``pll`` the platform's default clock drives ``sync`` (its oscillator). With one, the
    oscillator goes through :class:`ECP5PLL` and ``sync`` is held in reset until the PLL locks and
    for four of its cycles after.
    """
    if pll is None:
        return float(platform.default_clk_frequency)
    fin = platform.default_clk_frequency / 1e6
    if abs(fin - pll.fin_mhz) > 1e-6 * fin:
        raise UsageError(f"PLL settings for a {pll.fin_mhz:g} MHz input on a board whose oscillator is {fin:g} MHz")
    m.domains.sync = ClockDomain("sync")
    m.domains.pll_por = ClockDomain("pll_por", reset_less=True)
    osc = platform.request(platform.default_clk)
    m.submodules.pll = p = ECP5PLL(pll)
    m.d.comb += [p.clk_in.eq(osc.i), ClockSignal("sync").eq(p.clk_out), ClockSignal("pll_por").eq(p.clk_out)]
    hold = Signal(4, init=0b1111)
    with m.If(~p.locked):
        m.d.pll_por += hold.eq(0b1111)
    with m.Else():
        m.d.pll_por += hold.eq(hold >> 1)
    m.d.comb += ResetSignal("sync").eq(hold[0])
    # no clock constraint here: nextpnr-ecp5 derives the output's from the oscillator's constraint
    # and the EHXPLLL's dividers ("Derived frequency constraint of 80.0 MHz for net clk")
    return pll.fout_mhz * 1e6
