"""The ECP5 PLL divider search (hdl/common/clocking.py) and the board build's --clock handling:
every setting it returns is inside Lattice's limits and makes the asked clock; a clock it cannot
make is refused naming the nearest one; a board top with a PLL instantiates EHXPLLL and derives its
UART divisor from the PLL clock."""

from __future__ import annotations

import itertools

import pytest
from hwcosim.cosim.cli import main
from hwcosim.hdl.common.clocking import ECP5_PLL_LIMITS as L
from hwcosim.hdl.common.clocking import ecp5_pll_nearest, ecp5_pll_settings


def _valid(s) -> bool:
    return (L["clki_div"][0] <= s.clki_div <= L["clki_div"][1] and L["clkfb_div"][0] <= s.clkfb_div <= L["clkfb_div"][1]
            and L["clkop_div"][0] <= s.clkop_div <= L["clkop_div"][1]
            and L["pfd"][0] <= s.pfd_mhz <= L["pfd"][1] and L["vco"][0] <= s.vco_mhz <= L["vco"][1]
            and L["fout"][0] <= s.fout_mhz <= L["fout"][1])


@pytest.mark.parametrize("fin,fout,divs", [
    (25.0, 80.0, None), (25.0, 100.0, (1, 4)), (25.0, 50.0, (1, 2)), (25.0, 66.666667, (3, 8)),
    (100.0, 125.0, (4, 5)), (12.0, 48.0, (1, 4)), (25.0, 400.0, (1, 16)), (25.0, 3.125, None),
])
def test_settings_make_the_clock_within_the_limits(fin, fout, divs):
    s = ecp5_pll_settings(fin, fout)
    assert _valid(s), s
    assert abs(s.fout_mhz - fout) <= 1e-4 * fout
    assert s.fout_mhz == pytest.approx(fin / s.clki_div * s.clkfb_div)
    assert s.vco_mhz == pytest.approx(s.fout_mhz * s.clkop_div)
    if divs:  # the highest phase-detector frequency is preferred
        assert (s.clki_div, s.clkfb_div) == divs


def test_80_mhz_from_the_ulx3s_oscillator():
    s = ecp5_pll_settings(25.0, 80.0)
    assert (s.clki_div, s.clkfb_div) == (5, 16) and s.pfd_mhz == 5.0 and 400 <= s.vco_mhz <= 800


@pytest.mark.parametrize("fout,nearest", [(401.0, 400.0), (81.3, 81.25), (2.0, 3.125)])
def test_refuses_a_clock_it_cannot_make_naming_the_nearest(fout, nearest):
    with pytest.raises(ValueError, match=rf"nearest it makes is {nearest:.4g} MHz"):
        ecp5_pll_settings(25.0, fout)
    assert ecp5_pll_nearest(25.0, fout).fout_mhz == pytest.approx(nearest)


def test_nearest_is_the_nearest_over_all_settings():
    """Brute force over the whole divider space: no valid setting comes closer than the one found."""
    fin = 25.0
    outs = sorted({fin * fb / i for i, fb in itertools.product(range(1, 9), range(1, 81))
                   if L["pfd"][0] <= fin / i and L["fout"][0] <= fin * fb / i <= L["fout"][1]
                   and any(L["vco"][0] <= fin * fb / i * o <= L["vco"][1] for o in range(1, 129))})
    for want in (13.7, 77.7, 142.1, 333.3):
        best = min(outs, key=lambda f: abs(f - want))
        assert ecp5_pll_nearest(fin, want).fout_mhz == pytest.approx(best)


def test_input_outside_the_range_is_refused():
    with pytest.raises(ValueError, match="input clock 5 MHz"):
        ecp5_pll_settings(5.0, 50.0)


@pytest.mark.parametrize("argv,needle", [
    (["--board", "ulx3s-85f", "--clock", "81.3"], "nearest it makes is 81.25 MHz"),
    (["--board", "ulx3s-85f", "--clock", "500"], "nearest it makes is 400 MHz"),
    (["--board", "icebreaker", "--clock", "24"], "PLL is ECP5-only"),
])
def test_board_build_refuses_a_clock_before_any_work(tmp_path, capsys, argv, needle):
    assert main(["build", "bbs-spmxv", *argv, "-o", str(tmp_path / "o")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "o").exists()


def test_board_top_with_pll_elaborates_ehxplll_and_uart_divisor(tmp_path):
    """The ULX3S board top at 80 MHz: one EHXPLLL with the dividers found, the sync domain on its
    output, and the UART divisor from 80 MHz (not from the 25 MHz oscillator)."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    from hwcosim.hdl.bbs.board import board_top
    from hwcosim.models.bbs.spmxv import BBSParams
    from hwcosim.models.hostlink import divisor_for

    s = ecp5_pll_settings(25.0, 80.0)
    top = board_top(BBSParams(rows=8, cols=16, banks=4, k=1, pes=2), 115200, s)
    plan = ULX3S_85F_Platform().build(top, name="t", do_build=False, build_dir=str(tmp_path))
    rtlil = plan.files["t.il"]
    rtlil = rtlil if isinstance(rtlil, str) else rtlil.decode()
    assert rtlil.count("cell \\EHXPLLL") == 1
    assert "parameter \\CLKFB_DIV 16" in rtlil and "parameter \\CLKI_DIV 5" in rtlil
    assert top.clock_hz == 80e6 and top.divisor == divisor_for(80e6, 115200) == 694
    plain = board_top(BBSParams(rows=8, cols=16, banks=4, k=1, pes=2), 115200)
    plan = ULX3S_85F_Platform().build(plain, name="t", do_build=False, build_dir=str(tmp_path / "p"))
    assert "EHXPLLL" not in str(plan.files["t.il"]) and plain.divisor == divisor_for(25e6, 115200)
