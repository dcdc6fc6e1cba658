"""The FSS bench code: layer table (golden-model path), U280-scale HBM roofline, and the HBM model
checked against an RTL run whose weight stream is throttled to the modelled bandwidth."""

import json

import pytest
from hwcosim.cosim.designs.fss.bench import (
    ENGINE_KINDS,
    MINILM_SHAPES,
    ROOFLINE_T,
    SPARSITIES,
    _layers,
    engine,
    hbm_validation,
    layer_rows,
    minilm_roofline,
    n_kept,
    roofline_engines,
    roofline_rows,
)


def test_engine_kinds_have_equal_multipliers():
    assert [n_kept("nm8", s) for s in SPARSITIES] == [4, 2, 1]
    assert [n_kept("fss", s) for s in SPARSITIES] == [8, 4, 2]
    for kind in ENGINE_KINDS:
        for s in SPARSITIES:
            p = engine(kind, n_kept(kind, s), 256, 384)
            assert p.multipliers == 16 and (p.dense == (kind == "dense"))
    assert engine("nm8", 2, 256, 384).region == (1, 8)
    with pytest.raises(ValueError, match="engine kind"):
        engine("bbs", 4, 256, 384)
    with pytest.raises(ValueError, match="whole number"):
        n_kept("nm8", 0.9)


def test_layer_rows_model_only():
    """The layer table without the simulator: every figure derived from the golden model."""
    layers = [lay for lay in _layers(quick=True) if lay.name != "minilm.l0.query"][:2]
    rows = layer_rows(layers, rtl=False)
    assert len(rows) == len(layers) * (1 + 3 * len(SPARSITIES))
    for lay in layers:
        mine = {(r["kind"], r["target_sparsity"]): r for r in rows if r["layer"] == lay.name}
        dense = mine["dense", 0.0]
        # dense: quantisation only (8-bit weights, 16-bit activations): about 1 %
        assert dense["speedup_vs_dense"] == 1.0 and dense["rel_err_vs_dense_float"] < 0.03
        assert dense["median_row_cosine_vs_dense_float"] > 0.999
        for kind in ("fss", "nm", "nm8"):
            errs = [mine[kind, s]["rel_err_vs_dense_float"] for s in SPARSITIES]
            assert 5 * dense["rel_err_vs_dense_float"] < errs[0] < errs[1] < errs[2] < 1.0, (lay.name, kind, errs)
            cos = [mine[kind, s]["median_row_cosine_vs_dense_float"] for s in SPARSITIES]
            assert 1.0 >= cos[0] > cos[1] > cos[2] > 0.5, (lay.name, kind, cos)
            for s in SPARSITIES:
                r = mine[kind, s]
                assert r["cycles"] == r["expected"] and r["cycles_source"] == "cycle model"
                assert r["speedup_vs_dense"] == dense["cycles"] / r["cycles"]
                # equal multipliers: 1 / density fewer cycles than dense, up to the fixed overhead;
                # the 1x16 N:M regions may lose more to padding the columns to a multiple of 16
                if kind != "nm":
                    assert r["speedup_vs_dense"] == pytest.approx(1 / (1 - s), rel=0.1)
                assert r["speedup_vs_dense"] > 0.85 / (1 - s)
                assert 0 < r["median_row_rel_err_vs_dense_float"] < 1.5
        for s in SPARSITIES:
            f = mine["fss", s]
            # 2x8 FSS and 1x8 N:M engines tile a layer alike (same rows per group, same width)
            assert f["nm8_cycles_over_fss"] == 1.0 and f["nm_cycles_over_fss"] > 0.95
            assert f["nm8_err_over_fss"] == pytest.approx(mine["nm8", s]["rel_err_vs_dense_float"]
                                                          / f["rel_err_vs_dense_float"])


def test_roofline_figures(tmp_path):
    rows = roofline_rows()
    assert len(rows) == len(roofline_engines()) * len(MINILM_SHAPES) * len(ROOFLINE_T) * 2
    by = {(r["engine"], r["layer"], r["T"], r["weights"]): r for r in rows}
    # one case by hand: FSS 4/16 on 512x2 PEs, ffn_in (1536 x 384), T = 1, weights streamed
    r = by["FSS 4/16 512x2", "ffn_in", 1, "stream"]
    rp, tp = 2048, 2  # rows pad to r_h * PE rows = 1024, T to the 2 PE columns
    w_bytes = rp * 384 // 16 * 4 * 12 / 8  # 4 of 16 kept, 8-bit value + 4-bit index
    total = w_bytes + 384 * tp * 2 + rp * tp * 3
    assert r["hbm_bytes"] == total and r["compute_cycles"] == (rp // 1024) * (384 // 8)
    assert r["memory_cycles"] == pytest.approx(total / 460e9 * 250e6)
    assert r["bound"] == "memory" and r["time_us"] == pytest.approx(total / 460e9 * 1e6)
    assert r["peak_fraction"] == pytest.approx(1536 * 384 // 4 / (total / 460e9) / (4096 * 250e6))
    for r in rows:
        assert 0 < r["peak_fraction"] <= 1 + 1e-12
    for (e, lay, t, mode), r in by.items():
        pc = r["pe"][1]
        if mode == "stream" and t >= pc:  # re-streamed weights: the bound does not depend on T
            assert r["bound"] == by[e, lay, 512, "stream"]["bound"], (e, lay, t)
        if t <= pc:  # one column tile: resident and streamed weights cross HBM once alike
            assert r["hbm_bytes"] == by[e, lay, t, "resident" if mode == "stream" else "stream"]["hbm_bytes"]
    # where the bound turns: 2 PE columns need 768 GB/s of weights, more than 460 GB/s
    assert by["FSS 4/16 256x4", "ffn_in", 512, "stream"]["bound"] == "compute"
    assert by["FSS 4/16 512x2", "ffn_in", 512, "stream"]["bound"] == "memory"
    assert by["FSS 4/16 512x2", "ffn_in", 1, "resident"]["bound"] == "memory"
    assert by["FSS 4/16 512x2", "ffn_in", 8, "resident"]["bound"] == "compute"  # prefill-like reuse
    assert by["FSS 4/16 64x16", "qkvo", 128, "stream"]["peak_fraction"] == pytest.approx(1.0)
    out = minilm_roofline(tmp_path)
    saved = json.loads((tmp_path / "fss_roofline.json").read_text())
    assert len(saved["results"]) == len(out["results"]) == len(rows)
    assert "FSSAxiTop" in saved["weight_modes"]["resident"]
    assert (tmp_path / "fss_roofline.png").stat().st_size > 10_000


@pytest.mark.sim
def test_hbm_model_meets_a_throttled_rtl_run(tmp_path):
    """Memory bound: the weight stream gets its share of 8 bytes per cycle (the beat is 12 bytes);
    the measured cycles follow the HBM model, not the compute model."""
    out = hbm_validation(tmp_path, quick=True, test_dir=tmp_path / "sim")
    (r,) = out["results"]
    assert r["bound"] == "memory" and r["mismatches"] == 0 and r["dut_starve_w"] > 0
    assert r["within_tolerance"], r
    assert r["tolerance"] < 0.08 and r["measured_cycles"] > 1.5 * r["compute_cycles"]
    assert json.loads((tmp_path / "fss_hbm_validation.json").read_text())["results"][0]["measured_cycles"] \
        == r["measured_cycles"]


@pytest.mark.filterwarnings("ignore:.*created but never used")  # synthesis is stubbed out
def test_resource_json_states_formats_and_no_fmax(tmp_path, monkeypatch):
    """The resource table's JSON says what it is not (no Fmax; other formats than the benches)."""
    import hwcosim.cosim.flow.runner
    import hwcosim.cosim.flow.synth
    from hwcosim.cosim.designs.fss.bench import bench_fss_synth

    res = {"LUT": 1, "FF": 2, "DSP": 3, "BRAM": 0, "LUTRAM": 0, "CARRY": 0}
    monkeypatch.setattr(hwcosim.cosim.flow.runner, "to_verilog", lambda design, name: "")
    monkeypatch.setattr(hwcosim.cosim.flow.synth, "synthesize", lambda v, top, family: {"resources": res})
    out = bench_fss_synth(tmp_path, quick=True)
    saved = json.loads((tmp_path / "fss_synth.json").read_text())
    assert saved["fmax"] is None and "250 MHz" in saved["fmax_note"]
    assert "Q2.6" in saved["formats_note"] and "Q1.7" in saved["formats_note"]
    assert [r["DSP"] for r in out["results"]] == [3, 3, 3]
