"""``hwcosim compile --board``: the engines sized to the part, weights on chip or reloaded per layer,
``hwcosim build OUT/`` and ``hwcosim board run OUT/`` (:mod:`hwcosim.cosim.compile_board`).

- the estimates: the BRAM rule gives every measured board top's DP16KD count; the memory formulas
  equal the elaborated netlists'; the LUT4/DSP fits carry their error on their own points;
- sizing: the largest configuration whose summed estimate fits the part, each layer clamped to its
  shape; weights that do not fit the block RAM are reloaded per layer and their load words counted
  in the cycles on the board; a model that cannot fit is refused: exit 2, one line naming the layer,
  the resource, the need and what the part has, nothing written;
- build: the plan and the arguments the build flow receives (no nextpnr here; the OOC build of a
  tiny model is ``slow``);
- board run: the UART session against the board top's RTL equals ``predict`` in every word
  (``sim`` and ``slow``: the board top's Verilator build); a differing word exits 1 naming its layer,
  input, row and word.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from hwcosim.cosim import compile_board as cb
from hwcosim.cosim.cli import main
from hwcosim.cosim.compile import engine_stem
from hwcosim.models.bbs.lstm import LSTMParams
from hwcosim.models.bbs.spmxv import BBSParams
from hwcosim.models.fixedpoint import Q
from hwcosim.models.fss.gemm import FSSParams
from hwcosim.pruning.frontends import Layer, Network
from onnx import helper
from test_compile import X_MLP, X_SEQ, _model, lstm_model, mlp

import hwcosim

BOARD = "ulx3s-85f"


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _dense_net(shapes, seed=0) -> Network:
    rng = np.random.default_rng(seed)
    layers = []
    for i, (o, n) in enumerate(shapes):
        layers.append(Layer("dense", f"fc{i}", w=rng.normal(0, 0.1, (o, n)), b=rng.normal(0, 0.05, o)))
        if i < len(shapes) - 1:
            layers.append(Layer("relu", f"relu{i}"))
    return Network(layers, "test")


@pytest.fixture(scope="module")
def mlp_board():
    return hwcosim.compile(mlp(), sparsity=0.5, calibration=X_MLP, board=BOARD)


# -- the estimates ---------------------------------------------------------------------------------

def test_bram_rule_gives_every_measured_board_top():
    rows = cb.check_bram_rule()
    assert {r["design"] for r in rows} == {"bbs-spmxv", "bbs-lstm-axi", "fss-axi"}
    assert all(r["estimate_bram"] == r["measured_bram"] for r in rows), rows


@pytest.mark.parametrize("engine,params", [
    ("bbs-spmxv", BBSParams(rows=12, cols=20, banks=4, k=3, pes=2, vec_fmt=Q(4, 12))),
    ("bbs-lstm", LSTMParams(input_size=4, hidden=8, banks=4, k=3, pes=4, vec_fmt=Q(4, 12), gate_fmt=Q(6, 10))),
    ("fss-gemm", FSSParams(region=(2, 4), n=3, pe_rows=1, pe_cols=2, max_rows=6, max_cols=24))])
def test_memory_formulas_equal_the_elaborated_board_top(engine, params):
    assert sorted(cb.board_memories(engine, params)) == sorted(cb.elaborated_memories(engine, params))


def test_fits_say_their_error_and_points():
    models = cb.fit_models(BOARD)
    for m in models.values():
        d = m["lut"].to_dict()
        assert d["points"] and 0 <= d["max_rel_err_on_points"] < 0.05 and "fit" in d
        assert m["dsp"].b == 1.0   # one MULT18X18D per multiplier lane, measured on every point
        for lanes_, dsp in m["dsp"].points:
            assert abs(m["dsp"](lanes_) - dsp) <= 1


# -- sizing ----------------------------------------------------------------------------------------

def test_sized_to_the_part_and_reported_per_layer(mlp_board):
    b = mlp_board.report()["board"]
    av = b["available"]
    assert b["board"] == BOARD and av == {"LUT4": 83640, "DSP": 156, "BRAM": 208} == {
        k: cb.part_resources(BOARD)[k] for k in av}
    t = b["estimate_total"]
    assert t["DSP"] <= b["dsp_limit"] <= av["DSP"] and t["LUT4"] <= cb.LUT_FILL * av["LUT4"] and t["BRAM"] <= av["BRAM"]
    assert len(b["layers"]) == len(mlp_board.stages)
    for d, st in zip(b["layers"], mlp_board.stages):
        assert {"banks": st.params.banks, "pes": st.params.pes} == d["options"]
        assert d["weights"] == "on-chip" and d["reload_cycles"] == 0
        assert d["cycles_expected_on_board"] == d["cycles_expected"]
        assert d["estimate"]["DSP"] == st.params.banks * st.params.pes
    # fc2 has 4 rows: no more PEs than rows; the largest level that fits (a larger one would not)
    assert b["layers"][1]["options"]["pes"] <= 4
    i = cb.BBS_LEVELS.index(tuple(b["level"]))
    if i + 1 < len(cb.BBS_LEVELS):
        net = mlp_board.network
        rows = [cb.layer_params(lay, "bbs", 0.5, cb.layer_options(lay, "bbs", cb.BBS_LEVELS[i + 1]))
                for lay in net.engine_layers]
        bigger = [cb._estimate(cb.fit_models(BOARD, [cb.PNR_ROOT]), e, p) for e, p in rows]
        assert (sum(e["DSP"] for e in bigger) > b["dsp_limit"]
                or sum(e["LUT4"] for e in bigger) > cb.LUT_FILL * av["LUT4"]
                or sum(e["BRAM"] + e["BRAM_weights"] for e in bigger) > av["BRAM"])
    # the compiled model is the same accelerator as its golden model says, sized or not
    assert np.isfinite(mlp_board.predict(X_MLP[:3])).all()


def test_dsp_limit_is_the_most_a_recorded_result_routed(monkeypatch):
    """The plan's DSP ceiling is the largest MULT18X18D count of a routed in-context (bitstream) result
    on the part, not the part's count: docs example (a)'s network at 50 % (8 banks x 8 PEs on both layers, 135 of
    156 DSPs) placed but did not route (``compiled.json``'s ``failures``); sized again it stays
    within what has routed, and a new routed result raises the ceiling."""
    part = cb.part_resources(BOARD)
    want = max(r["area"]["DSP"] for _, r in cb._records()
               if r.get("part") == "LFE5U-85F" and r.get("mode") == "board" and r.get("worst_fmax_mhz")
               and isinstance(r["area"].get("DSP"), int))
    assert part["DSP_routed"] == want < part["DSP"] and part["DSP_routed_from"]
    failed = json.loads((cb.BOARDS_DIR / "compiled.json").read_text())["failures"][0]
    assert "did not route" not in failed["error"] or "135 MULT18X18D" in failed["error"]
    net = hwcosim.compile(lstm_model(T=8, I=8, H=24, C=10), sparsity=0.5, calibration=np.zeros((8, 1, 8))).network
    plan = cb.plan_board(net, "bbs", 0.5, BOARD)
    assert plan["dsp_limit"] == want and plan["estimate_total"]["DSP"] <= want
    assert tuple(plan["level"]) < tuple(failed["plan_estimate"]["level"])   # smaller than the unrouted one
    # with a larger routed result on record, the same network may grow again
    real = cb._records
    monkeypatch.setattr(cb, "_records", lambda roots=None: real(roots) + [(
        cb.BOARDS_DIR / "results.json", {"design": "x", "part": "LFE5U-85F", "mode": "board",
                                         "worst_fmax_mhz": 50.0, "area": {"DSP": 156}})])
    assert cb.plan_board(net, "bbs", 0.5, BOARD)["level"] == failed["plan_estimate"]["level"]


def test_weights_that_do_not_fit_are_reloaded_per_layer():
    plan = cb.plan_board(_dense_net([(256, 256)] * 5), "bbs", 0.0, BOARD)
    placed = [d["weights"] for d in plan["layers"]]
    assert placed.count("reloaded per layer") >= 1 and placed.count("on-chip") >= 1
    t = plan["estimate_total"]
    assert t["BRAM"] <= 208 and t["BRAM_reload_buffer"] == max(
        d["estimate"]["BRAM_weights"] for d in plan["layers"] if d["weights"] != "on-chip")
    assert t["BRAM"] + min(d["estimate"]["BRAM_weights"] for d in plan["layers"] if d["weights"] != "on-chip") > 208


def test_reload_cycles_are_the_loaders_words(monkeypatch):
    net = _dense_net([(64, 128), (64, 64), (64, 64), (8, 64)])
    x = np.random.default_rng(1).normal(size=(6, 128))
    # the part without its DSP ceiling (test_dsp_limit_...): this network at the largest level that fits
    real = dict(cb.part_resources(BOARD), DSP_routed=0)
    monkeypatch.setattr(cb, "part_resources", lambda board: real)
    plan = cb.plan_board(net, "bbs", 0.0, BOARD)
    w = [d["estimate"]["BRAM_weights"] for d in plan["layers"]]
    assert w[0] > w[1] == w[2] > 0 and w[3] == 0   # three weight stores in block RAM, the last in LUT RAM
    assert all(d["weights"] == "on-chip" for d in plan["layers"])
    # room for one of the equal stores beside the shared reload buffer (as large as the largest reloaded)
    small = dict(real, BRAM=sum(d["estimate"]["BRAM_buffers"] for d in plan["layers"]) + w[0] + w[1])
    monkeypatch.setattr(cb, "part_resources", lambda board: small)
    m = hwcosim.compile(net, calibration=x, board=BOARD)
    b = m.report()["board"]
    assert [d["weights"] for d in b["layers"]] == ["reloaded per layer"] * 2 + ["on-chip"] * 2
    assert b["estimate_total"]["BRAM"] == small["BRAM"] and b["estimate_total"]["BRAM_reload_buffer"] == w[0]
    for d, st, row in zip(b["layers"], m.stages, m.report()["layers"]):
        assert d["load_words"] == cb.load_words(st) > 0
        assert d["reload_cycles"] == (d["load_words"] if d["weights"] != "on-chip" else 0)
        assert row["cycles_expected_on_board"] == row["cycles_expected"] + d["reload_cycles"]
    assert b["cycles_expected_on_board"] == sum(d["cycles_expected_on_board"] for d in b["layers"])
    # the SpMxV board session loads exactly these words (hdl/bbs/board.py: WEIGHT_WORDS)
    from hwcosim.hdl.bbs.board import beat_bits, words_per_beat

    assert all(cb.load_words(st) == st.params.weight_beats * words_per_beat(beat_bits(st.params)["w"])
               for st in m.stages)


def test_a_model_that_cannot_fit_is_refused_with_one_line(tmp_path, capsys):
    # vector buffers beyond the block RAM at the smallest configuration
    w = np.random.default_rng(0).normal(0, 0.1, (60000, 2)).astype(np.float32)
    model = _model([helper.make_node("MatMul", ["x", "W"], ["y"], name="wide")], {"W": w}, ["N", 60000], ["N", 2])
    onnx.save(model, tmp_path / "wide.onnx")
    np.save(tmp_path / "x.npy", np.random.default_rng(1).normal(size=(1, 60000)))
    out = tmp_path / "out"
    rc, so, err = _cli(capsys, "compile", tmp_path / "wide.onnx", "--calibration", tmp_path / "x.npy", "--board", BOARD,
                       "-o", out)
    assert rc == 2 and not out.exists()
    line = err.strip()
    assert "\n" not in line and "layer 0 ('wide', bbs-spmxv)" in line and "BRAM needs" in line
    assert "the plan allows 208" in line and "smallest configuration" in line
    # one layer's weight store beyond the block RAM even when reloaded
    with pytest.raises(hwcosim.UsageError, match=r"layer 0 \('fc0', bbs-spmxv\) cannot fit ulx3s-85f even with its "
                                                 r"weights reloaded per layer: BRAM needs \d+ .* the part has 208"):
        hwcosim.compile(_dense_net([(1024, 1024)]), calibration=np.zeros((1, 1024)), board=BOARD)
    with pytest.raises(hwcosim.UsageError, match="sizing needs an ECP5 board"):
        hwcosim.compile(mlp(), calibration=X_MLP, board="icebreaker")


def test_compile_cli_board_table_and_saved_plan(tmp_path, capsys, mlp_board):
    onnx.save(mlp(), tmp_path / "mlp.onnx")
    np.save(tmp_path / "x.npy", X_MLP)
    rc, out, _ = _cli(capsys, "compile", tmp_path / "mlp.onnx", "--sparsity", "0.5", "--calibration",
                      tmp_path / "x.npy", "--board", BOARD, "-o", tmp_path / "out")
    assert rc == 0 and f"sized to {BOARD}" in out and "on-chip" in out
    m = hwcosim.load_compiled(tmp_path / "out")
    assert m.report()["board"] == mlp_board.report()["board"]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["options"]["board"] == BOARD


# -- build -----------------------------------------------------------------------------------------

def test_build_plan_and_the_arguments_the_flow_gets(tmp_path, capsys, monkeypatch, mlp_board):
    from hwcosim.cosim.compile_run import BUILDS, measured_fmax
    from hwcosim.cosim.flow import builds

    assert cb.PNR_ROOT == BUILDS
    plans = mlp_board.build(BOARD, ooc=True, dry_run=True, combined=False)   # one build per configuration
    assert [p["layers"] for p in plans] == [[0], [1]]
    for p, st in zip(plans, mlp_board.stages):
        assert p["design"] == st.engine and p["params"] == st.params and p["mode"] == "out-of-context"
        assert p["out"] == str(BUILDS / engine_stem(st.engine, st.params))   # where hwcosim run looks
    assert [p["design"] for p in mlp_board.build(BOARD, ooc=False, dry_run=True, combined=False)] == ["bbs-spmxv",
                                                                                                     "bbs-spmxv"]
    lstm = hwcosim.compile(lstm_model(), calibration=X_SEQ, board=BOARD)
    assert [p["design"] for p in lstm.build(BOARD, ooc=False, dry_run=True, combined=False)] == ["bbs-lstm-axi",
                                                                                                 "bbs-spmxv"]
    # the default: the model's ONE combined board top (hdl/compiled/board.py)
    cfg, _ = cb.combined_config(mlp_board.stages)
    one = mlp_board.build(BOARD, ooc=True, out=tmp_path / "pnr", dry_run=True)
    assert [(p["design"], p["params"], p["layers"]) for p in one] == [(cb.COMBINED.name, cfg, [0, 1])]

    calls = []
    monkeypatch.setattr(builds, "build_ooc_designs", lambda plans, board, clock, seeds, out, **kw: calls.append(
        ("ooc", [(d.name, p) for d, p in plans], board.name, clock, seeds, Path(out))))
    monkeypatch.setattr(builds, "build_board_tops", lambda plans, board, out, **kw: calls.append(
        ("board", [(d.name, p) for d, p in plans], board.name, Path(out))))
    mlp_board.save(tmp_path / "out")
    rc, out, _ = _cli(capsys, "build", tmp_path / "out", "--board", BOARD, "--ooc", "-o", tmp_path / "pnr")
    assert rc == 0
    assert calls == [("ooc", [(cb.COMBINED.name, cfg)], BOARD, 100.0, [1], Path(one[0]["out"]))]
    calls.clear()
    rc, out, _ = _cli(capsys, "build", tmp_path / "out", "--board", BOARD, "-o", tmp_path / "bit")
    assert rc == 0 and [c[:3] for c in calls] == [("board", [(cb.COMBINED.name, cfg)], BOARD)]
    calls.clear()
    mlp_board.build(BOARD, ooc=True, out=tmp_path / "pnr", combined=False)   # per configuration, as before
    assert calls == [("ooc", [(st.engine, st.params)], BOARD, 100.0, [1],
                      tmp_path / "pnr" / engine_stem(st.engine, st.params)) for st in mlp_board.stages]
    rc, _, err = _cli(capsys, "build", tmp_path / "out", "--param", "k=2")
    assert rc == 2 and "--param" in err
    assert measured_fmax(mlp_board.stages[0].engine, mlp_board.stages[0].params, [tmp_path / "pnr"]) is None


@pytest.mark.slow
def test_ooc_build_of_a_tiny_model_is_what_run_reads(tmp_path):
    from hwcosim.cosim.compile_run import measured_fmax

    net = _dense_net([(4, 8)])
    m = hwcosim.compile(net, sparsity=0.5, calibration=np.random.default_rng(0).normal(size=(8, 8)), board=BOARD)
    m.build(BOARD, ooc=True, out=tmp_path)
    st = m.stages[0]
    hit = measured_fmax(st.engine, st.params, [tmp_path])
    assert hit is not None and hit[0] > 0 and hit[1].is_relative_to(tmp_path / engine_stem(st.engine, st.params))


# -- board run -------------------------------------------------------------------------------------

@pytest.fixture
def tiny(tmp_path):
    """A one-layer dense model compiled for the board, its folder and inputs."""
    rng = np.random.default_rng(0)
    net = Network([Layer("dense", "fc", w=rng.normal(0, 0.3, (4, 8)), b=rng.normal(0, 0.1, 4))], "tiny")
    m = hwcosim.compile(net, sparsity=0.5, calibration=rng.normal(size=(8, 8)), board=BOARD)
    m.save(tmp_path / "out")
    np.save(tmp_path / "x.npy", rng.normal(size=(2, 8)))
    return m, tmp_path


@pytest.mark.sim
@pytest.mark.slow   # about 21 s of CPU with a cold Verilator cache (the board top's build), over the 15 s budget
def test_board_run_sim_equals_predict_in_every_word(tiny, capsys):
    m, d = tiny
    rc, out, _ = _cli(capsys, "board", "run", d / "out", "--sim", "--inputs", d / "x.npy", "-o", d / "run")
    assert rc == 0 and "board = predict in 100% of 8 words over 1 engine layers" in out
    with np.load(d / "run" / "00-fc" / "outputs.npz") as z:
        got = z["rtl"]
    _, words, _ = m._run(np.load(d / "x.npy"), trace=True)
    assert np.array_equal(got, words[0][1])


def test_board_run_names_the_first_differing_word(tiny, capsys, monkeypatch):
    m, d = tiny

    def fake(stages, xins, test_dir, **kw):   # the combined top's words with one planted error
        from types import SimpleNamespace

        from hwcosim.models.bbs.spmxv import spmxv

        st = stages[0]
        y = spmxv(st.params, st.values, st.indices, xins[0])
        y[1, 2] += 1
        Path(test_dir).mkdir(parents=True, exist_ok=True)
        np.savez(Path(test_dir) / "outputs.npz", rtl_0=y)
        return SimpleNamespace(passed=True, metrics={"layers": [{"run_cycles": [0]}]}, log="-", test_dir=test_dir)

    monkeypatch.setattr(cb, "run_combined_sim", fake)
    rc, _, err = _cli(capsys, "board", "run", d / "out", "--sim", "--inputs", d / "x.npy", "-o", d / "run")
    assert rc == 1
    assert re.search(r"layer 0 \('fc', bbs-spmxv\): 1 of 8 words differ from predict; first at input 1, row 2", err)
    for argv, needle in ((["--sim"], "--inputs"), (["--inputs", d / "x.npy"], "either --port"),
                         (["--sim", "--inputs", d / "x.npy", "-n", "3"], "-n does not apply")):
        rc, _, err = _cli(capsys, "board", "run", d / "out", *argv)
        assert rc == 2 and needle in err
    rc, _, err = _cli(capsys, "board", "run", "bbs-spmxv", "--sim", "--inputs", d / "x.npy")
    assert rc == 2 and "compiled model" in err


def test_board_build_json_names_the_bitstream_beside_it(tmp_path, monkeypatch):
    """build.json is written in a staging folder that is then renamed: it names the bitstream by its
    file name (beside it), not by the staging path that no longer exists."""
    from hwcosim.cosim.flow import board_build, builds
    from hwcosim.cosim.flow.build import get_board

    def fake_build(d, p, board, out_dir, **kw):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "top.bit").write_bytes(b"bits")
        return {"design": d.name, "bitstream": str(out_dir / "top.bit"), "timing_met": True,
                "worst_fmax_mhz": 50.0, "area": {}, "fmax_mhz": {}}

    monkeypatch.setattr(board_build, "build_board", fake_build)
    monkeypatch.setattr(builds, "show", lambda *a, **kw: None)
    monkeypatch.setattr(builds, "emit", lambda *a, **kw: None)
    monkeypatch.setattr("hwcosim.cosim.flow.build.summary_row", lambda r: [])
    monkeypatch.setattr("hwcosim.cosim.flow.build.summary_columns", lambda fam: [])
    monkeypatch.setattr("hwcosim.cosim.flow.build.crit_text", lambda r: "-")
    out = tmp_path / "out"
    builds.build_board_tops([(cb.COMBINED, None)], get_board(BOARD), out)
    doc = json.loads((out / cb.COMBINED.name / "build.json").read_text())
    assert doc["bitstream"] == "top.bit" and (out / cb.COMBINED.name / doc["bitstream"]).read_bytes() == b"bits"
