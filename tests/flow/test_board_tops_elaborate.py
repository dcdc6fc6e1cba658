"""Every registered board top elaborates for its board as ``hwcosim build DESIGN --board ulx3s-85f``
makes it: the board configuration, the platform's own clock domain (the oscillator's, which has no
reset on the ULX3S) and the ECP5 DSP mapping (:func:`hwcosim.hdl.common.dsp.dsp_target`). A design block
that needs a reset the board's domain does not have, or a board top that no longer fits its
design's ports, fails here in seconds instead of after synthesis."""

import pytest
from hwcosim.cosim.flow.board_build import board_top_ref
from hwcosim.cosim.registry import designs, resolve

WITH_TOPS = sorted(n for n, d in designs().items() if d.board_tops)


def test_every_design_has_a_board_top_or_runs_inside_one():
    assert set(designs()) - set(WITH_TOPS) <= {"bbs-lstm", "fss-gemm"}
    assert len(WITH_TOPS) >= 7 and "bbs-csr" in WITH_TOPS
    # a core without a top of its own names the design whose top carries it, and that one has a top
    for name, d in designs().items():
        if d.on_board_in:
            assert not d.board_tops and designs()[d.on_board_in].board_tops, name
    assert {n for n, d in designs().items() if not d.board_tops and not d.on_board_in} == set()


@pytest.mark.parametrize("name,carrier", [("bbs-lstm", "bbs-lstm-axi"), ("fss-gemm", "fss-axi")])
def test_building_a_core_without_its_own_top_names_the_one_that_carries_it(capsys, name, carrier):
    from hwcosim.cosim.cli import main

    assert main(["build", name, "--board", "ulx3s-85f"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"inside {carrier}" in err[0], err


@pytest.mark.parametrize("name", WITH_TOPS)
def test_board_top_elaborates_on_the_ulx3s(name):
    pytest.importorskip("amaranth_boards")
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    from hwcosim.hdl.common.dsp import dsp_target

    d = designs()[name]
    top = resolve(board_top_ref(d)[1])(d.board_config("ecp5") or d.default_params())
    with dsp_target("ecp5"):
        plan = ULX3S_85F_Platform().prepare(top, name="top")
    rtlil = plan.files["top.il"]
    assert "MULT18X18D" in rtlil or name in ("melo-engine", "kvdirect-pipeline")
    assert top.divisor == 25_000_000 // 115200 or abs(top.divisor - 25e6 / 115200) < 1
