"""The BeamRaster board top end to end: the host session of ``hwcosim board run beamraster-precoder``
drives the generic stream host (UART -> bridge -> coefficient and symbol FIFOs -> precoder -> sample
FIFO -> bridge -> UART) with a channel-driven scenario; every antenna sample is compared with the
golden datapath. The sample FIFO is made small here, so the precoder stalls on it and the host's
level-driven draining is exercised. Plus the host side's checks."""

import numpy as np
import pytest
from hwcosim.cosim.designs.beamraster.board import compare
from hwcosim.models.beamraster.datapath import PrecoderParams, precode_fixed, scenario

P = PrecoderParams(M=8, K=4, lanes=4, groups=2, sc_per_group=2, symbols_per_frame=2)


def _sets(n_frames=2, seed=3):
    sc = scenario(P, n_frames=n_frames, seed=seed)
    return {k: sc[k] for k in ("s_re", "s_im", "beams", "P_re", "P_im")}


@pytest.mark.sim
def test_beamraster_board_session_through_uart_matches_golden(tmp_path, run_folder_checks, monkeypatch):
    import hwcosim.hdl.beamraster.board as hb
    from hwcosim.cosim.designs.beamraster.board import run_board_sim

    monkeypatch.setattr(hb, "OUTPUTS", (("x", 4),))           # a small FIFO: the precoder stalls on it
    sets = _sets()
    res = run_board_sim(P, **sets, rate_error=-0.02, test_dir=tmp_path)
    mt = res.metrics
    assert res.passed, res.log
    n = sets["s_re"].shape[0]
    assert mt["mismatches"] == 0 and mt["problems"] == [] and mt["words"] == n * P.M
    assert mt["counters"]["STALL_OUT"] > 0 and mt["counters"]["OUT_BEATS"] == n * P.ant_groups
    run_folder_checks(tmp_path, "beamraster-precoder", "rtl_re", index=5)


def test_compare_catches_a_wrong_sample():
    sets = _sets(1)
    (x_re, x_im), _ = precode_fixed(P, sets["s_re"], sets["s_im"], sets["beams"], sets["P_re"], sets["P_im"])
    n = x_re.shape[0]
    c = {"SYM_BEATS": n, "OUT_BEATS": n * P.ant_groups, "CYCLES": 10}
    good = {"x_re": x_re.copy(), "x_im": x_im.copy(), "counters": c}
    assert compare(P, **sets, res=good)["problems"] == []
    bad = dict(good, x_im=x_im.copy())
    bad["x_im"][1, 2] += 1
    s = compare(P, **sets, res=bad)
    assert s["mismatches"] == 1 and "(1, 2," in s["problems"][0]
    short = dict(good, x_re=x_re[:-1], x_im=x_im[:-1])
    assert "symbols of antenna samples" in compare(P, **sets, res=short)["problems"][0]
    assert np.any(compare(P, **sets, res=dict(good, counters=dict(c, OUT_BEATS=0)))["problems"])
