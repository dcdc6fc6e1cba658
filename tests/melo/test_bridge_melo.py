"""Bridge (a): MELO loss recovery for chosen flows of a cluster network, RTL vs golden model."""

import pytest
from hwcosim.cosim.designs.melo.bridge import MeloScenarioParams, check_transcript, run_bridge, run_model
from hwcosim.cosim.designs.melo.engine import golden_streams
from hwcosim.cosim.flow.bridge import BridgeMismatch
from hwcosim.models.melo.engine import pack_event

SMALL = MeloScenarioParams(scale=0.25, loss=0.03, seed=3)


def test_model_only_recovers_every_loss_and_delivers_everything():
    r = run_model(SMALL)
    chosen = [f for f in r["flows"] if f["level"] != "flow"]
    assert len(chosen) == 3 and all(f["fct_us"] > 0 for f in r["flows"])
    assert r["lost"] > 0 and r["chosen_retx"] >= r["lost"]  # every lost transmission was sent again
    assert r["delivered"] == sum(f["packets"] for f in chosen)
    assert r["arrivals"] == sum(f["sent"] for f in chosen) - r["lost"]


def test_loss_slows_the_chosen_flows_only():
    clean = run_model(MeloScenarioParams(scale=0.25, loss=0.0))
    lossy = run_model(MeloScenarioParams(scale=0.25, loss=0.05, seed=3))
    assert clean["chosen_retx"] == 0 and clean["lost"] == 0
    assert max(lossy["chosen_fct_us"]) > max(clean["chosen_fct_us"])


@pytest.mark.parametrize("kw,match", [({"loss": 0.6}, "loss"), ({"lossy_gpu": 7}, "lossy_gpu"),
                                      ({"window": 10_000}, "window"), ({"chosen": (9,)}, "out of range"),
                                      ({"flows": ((0, 0, 10, 0),)}, "src != dst")])
def test_wrong_params_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        MeloScenarioParams(**kw)


def test_transcript_check_catches_a_wrong_word():
    p = SMALL.engine
    evs = [(0, 1, False), (0, 0, False), (1, 0, False)]
    g = golden_streams(p, evs)
    words = [pack_event(p, *e) for e in evs]
    assert check_transcript(p, words, g["deliv"], g["resp"])["mismatches"] == 0
    bad = list(g["resp"])
    bad[1] ^= 1 << 3
    with pytest.raises(BridgeMismatch, match="response word 1"):
        check_transcript(p, words, g["deliv"], bad)
    with pytest.raises(BridgeMismatch, match="released-PSN"):
        check_transcript(p, words, g["deliv"][:-1], g["resp"])


@pytest.mark.sim
def test_rtl_in_the_loop_matches_the_golden_model(tmp_path, run_folder_checks):
    cmp = run_bridge(SMALL, test_dir=tmp_path)
    m, r = cmp.model, cmp.rtl
    assert cmp.checks["word_for_word"]["mismatches"] == 0
    assert cmp.checks["word_for_word"]["events"] == r["arrivals"] > 0
    # the same transmissions are lost; the recovery is the same; timing differs by engine cycles only
    assert r["lost"] == m["lost"] and r["delivered"] == m["delivered"]
    for fm, fr in zip(m["flows"], r["flows"]):
        assert fr["fct_us"] == pytest.approx(fm["fct_us"], rel=0.02)
        if fm["level"] != "flow":
            assert fr["retx"] == fm["retx"]
    assert abs(r["engine_latency_cycles_mean"] - m["engine_latency_cycles_mean"]) < 1.0
    assert "agree exactly" in cmp.notes[-1]  # measured: cycle for cycle since the harness fix in bridge_rtl
    d = cmp.to_dict()
    assert d["slowdown"] > 1
    run_folder_checks(tmp_path, "melo-engine", "rtl_resp", index=7)  # the transcript re-verifies without simulating


def test_model_only_cli(tmp_path, capsys):
    import json

    from hwcosim.cosim.cli import main

    assert main(["cosim", "melo", "--model-only", "--scale", "0.25", "-o", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "bridge_melo.json").read_text())
    assert d["rtl"] is None and d["table"] and d["slowdown"] is None
    assert main(["cosim", "melo", "--clock-mhz", "300", "-o", str(tmp_path)]) == 2  # 3.33 ns: no whole-ns clock
    err = capsys.readouterr().err.strip()
    assert "whole number of ns" in err and "\n" not in err, err


def test_cli_user_flows(tmp_path, capsys):
    import json

    from hwcosim.cosim.cli import main

    args = ["cosim", "melo", "--model-only", "-o", str(tmp_path),
            "--flow", "1,2,65536,0", "--flow", "3,2,32768,1.5", "--flow", "0,3,131072,0.5"]
    assert main(args) == 0
    rows = [r[0] for r in json.loads((tmp_path / "bridge_melo.json").read_text())["table"]]
    fct = [r for r in rows if r.endswith("FCT us")]
    assert fct == ["flow 0 (1->2, packet/MELO) FCT us", "flow 1 (3->2, packet/MELO) FCT us",
                   "flow 2 (0->3, flow) FCT us"]
    capsys.readouterr()
    for bad, msg in ((["--flow", "1,2,oops,0"], "expected SRC,DST,BYTES,START_US"),
                     (["--flow", "1,7,1024,0"], "GPUs 0..3")):
        assert main(["cosim", "melo", "--model-only", "-o", str(tmp_path / "x"), *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and "\n" not in err, err


@pytest.mark.sim
def test_rtl_in_the_loop_from_the_cluster_scenario_file(tmp_path):
    # the file hwcosim cluster run reads: topology, dp4's ring hops, the lossy port-down#1 failure
    from pathlib import Path

    from hwcosim.cosim.designs.melo.bridge import params_from_scenario
    from hwcosim.models.systems.cluster.scenario import load_scenario

    f = Path(__file__).resolve().parents[2] / "models/systems/cluster/scenarios/cosim_small.toml"
    p = params_from_scenario(load_scenario(f))
    cmp = run_bridge(p, test_dir=tmp_path)
    m, r = cmp.model, cmp.rtl
    wc = cmp.checks["word_for_word"]
    assert wc["mismatches"] == 0 and wc["events"] == r["arrivals"] == m["arrivals"] > 0
    assert r["lost"] == m["lost"] > 0 and r["delivered"] == m["delivered"] == 2 * 59
    # the cycle table is the RTL's and the device harness starts a queued packet on the cycle the previous one
    # answered, as the model does: every metric agrees exactly, every FCT to the cycle
    assert [mv for _, mv, _ in cmp.rows] == [rv for _, _, rv in cmp.rows], cmp.rows
    assert "agree exactly" in cmp.notes[-1]
