"""RTL simulation of the BeamRaster precoder vs the golden model: every antenna sample compared."""

import json

import hwcosim.cosim.designs.beamraster.precoder as cb
import numpy as np
import pytest
from hwcosim.cosim.designs.beamraster.precoder import run_precoder, run_scenario
from hwcosim.cosim.flow.runner import SimFailure
from hwcosim.models.beamraster.datapath import CycleModel, PrecoderParams, fixed_point_sum_rate, scenario

pytestmark = pytest.mark.sim

CONFIGS = [
    # M, K, lanes  (small, so Verilator builds stay short)
    (8, 4, 8),     # L = M: one beat per symbol, K cycles per symbol
    (16, 3, 4),    # folded: 4 antenna groups, K not a power of two
    (16, 8, 16),
]


def _params(M, K, L, **kw):
    return PrecoderParams(M=M, K=K, lanes=L, groups=2, sc_per_group=2, symbols_per_frame=2, **kw)


def _report(tmp_path, name, p, metrics):
    out = tmp_path.parent.parent / "reports"
    out.mkdir(parents=True, exist_ok=True)
    rec = {"case": name, **p.to_dict(), **{k: v for k, v in metrics.items() if not k.startswith("out_")}}
    (out / f"beamraster_{name}.json").write_text(json.dumps(rec, indent=1))


@pytest.mark.parametrize("M,K,L", CONFIGS)
def test_precoder_no_stalls_hits_cycle_model(tmp_path, M, K, L, run_folder_checks):
    """Through ``hwcosim beamraster sim`` (its defaults are these configurations' groups and frames):
    the summary and the run folder land in -o together, and the run folder re-verifies."""
    from hwcosim.cosim.cli import main

    p = _params(M, K, L)
    out = tmp_path / "out"
    assert main(["beamraster", "sim", "--M", str(M), "--K", str(K), "--lanes", str(L), "--frames", "2",
                 "--seed", str(M + K), "-o", str(out)]) == 0
    run_dir = out / f"beamraster_sim_M{M}K{K}L{L}"
    assert sorted(f.name for f in out.iterdir()) == [run_dir.name, f"{run_dir.name}.json"]  # nothing staged left
    mt = json.loads((run_dir / "metrics.json").read_text())
    assert mt["mismatches"] == 0 and mt["mismatch_list"] == []
    model = CycleModel(p)
    assert model.beam_bound
    assert mt["cycles"] == model.expected(mt["n_symbols"]), mt
    assert mt["dut_issues"] == model.ideal(mt["n_symbols"])
    assert mt["dut_stall_out"] == 0 and mt["dut_starve_coef"] == 0
    _report(tmp_path, f"M{M}K{K}L{L}", p, mt)
    run_folder_checks(run_dir, "beamraster-precoder", "rtl_re", index=M + 1)


@pytest.mark.parametrize("p_idle,p_stall", [(0.3, 0.0), (0.0, 0.5), (0.4, 0.6)])
@pytest.mark.parametrize("M,K,L", CONFIGS[:2])
def test_precoder_with_idle_and_backpressure(tmp_path, M, K, L, p_idle, p_stall):
    p = _params(M, K, L)
    sc = scenario(p, n_frames=3, seed=7 * M + K)
    # coefficient sets stream in beside the symbols (not preloaded): sets swap at frame boundaries
    res = run_precoder(p, sc["s_re"], sc["s_im"], sc["beams"], sc["P_re"], sc["P_im"], p_idle_s=p_idle,
                       p_idle_c=p_idle, p_stall=p_stall, coef_first=False, seed=int(100 * p_idle + 10 * p_stall),
                       test_dir=tmp_path)
    mt = res.metrics
    assert mt["mismatches"] == 0
    assert mt["cycles"] >= CycleModel(p).ideal(mt["n_symbols"])
    assert mt["dut_coef_beats"] == 3 * p.coef_beats
    if p_stall:
        assert mt["dut_stall_out"] > 0


def test_precoder_saturates_like_the_model(tmp_path):
    """Full-scale symbols and coefficients with a narrow output format: most samples clip."""
    from hwcosim.models.fixedpoint import Q

    p = _params(8, 4, 8, out_fmt=Q(2, 6))
    rng = np.random.default_rng(11)
    n = 2 * p.frame_len
    s_re, s_im = (rng.integers(p.sym_fmt.min_raw, p.sym_fmt.max_raw + 1, (n, p.K)) for _ in range(2))
    P_re, P_im = (rng.integers(p.pd_fmt.min_raw, p.pd_fmt.max_raw + 1, (2, p.groups, p.K, p.K)) for _ in range(2))
    beams = np.stack([rng.permutation(p.M)[: p.K] for _ in range(2)])
    res = run_precoder(p, s_re, s_im, beams, P_re, P_im, p_stall=0.3, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0


def test_fixed_point_output_keeps_the_float_sum_rate(tmp_path):
    """The RTL's own output words, through the channel: sum rate >= 99.5 % of the float precoder's."""
    p = PrecoderParams(M=16, K=8, lanes=16, groups=2, sc_per_group=2, symbols_per_frame=4)
    res, sc = run_scenario(p, n_frames=2, seed=5, snr_db=30.0, return_output=True, test_dir=tmp_path)
    x_re, x_im = np.array(res.metrics["out_re"]), np.array(res.metrics["out_im"])
    r = fixed_point_sum_rate(p, sc, x_re, x_im)
    assert r["fraction"] >= 0.995, r
    assert r["sum_rate_float"] > 0


def test_a_wrong_golden_word_fails_the_simulation(tmp_path, monkeypatch):
    """The comparison is real: corrupt one expected sample and the run must fail."""
    real = cb.precode_fixed

    def off_by_one(*a, **k):
        (xr, xi), sp = real(*a, **k)
        xr = xr.copy()
        xr[3, 5] += 1
        return (xr, xi), sp

    monkeypatch.setattr(cb, "precode_fixed", off_by_one)
    p = _params(8, 4, 8)
    with pytest.raises(SimFailure, match=r"1 of \d+ antenna samples differ"):
        run_scenario(p, n_frames=1, seed=2, test_dir=tmp_path)


def test_precoder_ecp5_dsp_netlist_bit_exact_under_stalls(tmp_path):
    """The netlist ``hwcosim build`` makes for an ECP5 part (every product in a MULT18X18D output
    register, simulated with hdl.common.dsp's model) against the golden model, with idle input
    and a stalled output."""
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.hdl.beamraster import Precoder
    from hwcosim.hdl.common.dsp import dsp_target

    M, K, L = CONFIGS[1]
    p = _params(M, K, L)
    sc = scenario(p, n_frames=2, seed=5)
    with dsp_target("ecp5"):
        assert to_verilog(Precoder(p), "beamraster_precoder").count("MULT18X18D #(") == 4 * (K + L)
        res = run_precoder(p, sc["s_re"], sc["s_im"], sc["beams"], sc["P_re"], sc["P_im"], p_idle_s=0.3,
                           p_idle_c=0.3, p_stall=0.5, coef_first=False, seed=9, test_dir=tmp_path)
    assert res.metrics["mismatches"] == 0
