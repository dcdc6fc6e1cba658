"""BeamRaster real-time verdict (models/beamraster/realtime.py, hwcosim beamraster realtime): the
requirement on hand-computed numbers, throughput at a given Fmax from the RTL's structure, and the
command on a small build JSON."""

import json

import pytest
from hwcosim.models.beamraster.datapath import PrecoderParams
from hwcosim.models.beamraster.realtime import (
    LTE20,
    Cell,
    achieved,
    load_attempts,
    needs,
    part_bound,
    realtime_report,
    requirement,
    stratix_v,
)
from hwcosim.models.errors import UsageError


def test_requirement_by_hand():
    # 1200 subcarriers x 14,000 symbols/s = 16.8 M subcarrier-symbols/s; K M + K^2 = 512 + 64 = 576 CMAC each
    r = requirement(Cell(antennas=64, users=8, subcarriers=1200, symbols_per_s=14_000.0))
    assert r["subcarrier_symbols_per_s"] == 16_800_000
    assert r["cmac_per_subcarrier_symbol"] == 576
    assert r["cmac_per_s"] == 16_800_000 * 576
    assert r["real_mults_per_s"] == 4 * 16_800_000 * 576
    assert r["output_samples_per_s"] == 64 * 16_800_000 and r["input_samples_per_s"] == 8 * 16_800_000
    # a toy cell: 2 users, 4 antennas, 10 subcarriers x 100 symbols/s -> 1000 symbols/s x (8 + 4) CMAC
    t = requirement(Cell(antennas=4, users=2, subcarriers=10, symbols_per_s=100.0))
    assert t["cmac_per_s"] == 12_000


def test_achieved_from_the_rtl_structure():
    # 16 lanes: K M / L = 32 cycles per subcarrier-symbol, one complex MAC per lane per cycle
    a = achieved(PrecoderParams(M=64, K=8, lanes=16), 100.0)
    assert a["cycles_per_subcarrier_symbol"] == 32 and a["cmac_per_lane_per_cycle"] == 1.0
    assert a["subcarrier_symbols_per_s"] == pytest.approx(100e6 / 32)
    assert a["realtime_fraction"] == pytest.approx(100e6 / 32 / 16.8e6)
    assert a["beam_cmac_per_s"] == pytest.approx(16 * 100e6)
    assert a["real_multipliers"] == 96
    with pytest.raises(UsageError):
        achieved(PrecoderParams(M=64, K=8, lanes=16), 0.0)


def test_needs_and_parts():
    n = needs(LTE20, 106.58)
    full = n["clock_at_lanes"][-1]
    assert full["lanes"] == 64 and full["clock_mhz"] == pytest.approx(16.8e6 * 8 / 1e6)   # 134.4 MHz
    assert full["real_multipliers"] == 4 * (8 + 64)
    assert n["copies"] == 2 and n["lanes"] == 64 and n["real_multipliers"] == 2 * 288     # 80.7 lanes needed
    assert n["ideal_real_multipliers"] == 364                                             # ceil(38.7e9 / 106.58e6)
    b = part_bound(LTE20, 156, 106.58)
    assert b["realtime_fraction_max"] == pytest.approx(156 * 106.58e6 / (4 * 16.8e6 * 576))
    sv = stratix_v(LTE20)
    assert sv["dsp_blocks"] == 144 and sv["mults_per_dsp_block"] == 2


def _build_json(path, fmax, lanes, K=8, per_seed=None):
    p = PrecoderParams(M=64, K=K, lanes=lanes, groups=100, sc_per_group=12, symbols_per_frame=14)
    res = {"design": "beamraster-precoder", "part": "LFE5U-85F", "speed": 6, "worst_fmax_mhz": fmax,
           "fmax_mhz": {"clk": {"min": fmax, "median": fmax, "per_seed": per_seed or [fmax]}},
           "timing_met": True, "params": p.to_dict(), "area": {"DSP": p.real_multipliers, "DSP_available": 156}}
    path.write_text(json.dumps({"results": [res], "failures": []}))
    return path


def test_report_from_build_json(tmp_path):
    js = _build_json(tmp_path / "b.json", 112.0, 16, per_seed=[112.0, 120.0])
    r = realtime_report([js])
    (row,) = r["builds"]
    assert row["realtime_fraction"] == pytest.approx(112e6 / 32 / 16.8e6)
    assert row["realtime_fraction_band"][1] == pytest.approx(120e6 / 32 / 16.8e6)
    assert r["best"]["fmax_mhz"] == 112.0 and r["needs_at_measured_fmax"]["clock_mhz"] == 112.0
    assert [u["K"] for u in r["users_band"]] == [4, 8, 16]
    with pytest.raises(UsageError):
        realtime_report([tmp_path / "missing.json"])


def test_attempts_record_a_failed_build(tmp_path):
    d = tmp_path / "a"
    d.mkdir()
    (d / "stdout.json").write_text(json.dumps({"command": ["build", "beamraster-precoder", "--ooc", "--param",
                                                           "lanes=32", "--param", "K=8"], "exit": 1}))
    (d / "stderr.txt").write_text("placing ...\nFAILED: the design does not fit: MULT18X18D 160 used, 156 available\n")
    (a,) = load_attempts([d])
    assert a["params"] == {"lanes": "32", "K": "8"} and a["exit"] == 1 and "160 used" in a["error"]


def test_cli_realtime(tmp_path, capsys):
    from hwcosim.cosim.cli import main

    js = _build_json(tmp_path / "b.json", 106.0, 8)
    out = tmp_path / "out"
    assert main(["beamraster", "realtime", "--build", str(js), "-o", str(out)]) == 0
    res = json.loads((out / "beamraster_realtime_verdict.json").read_text())
    assert res["builds"][0]["lanes"] == 8 and (out / "beamraster_realtime_verdict.png").stat().st_size > 0
    text = capsys.readouterr().out
    assert "Stratix V" in text and "most sensitive to the users K" in text
    assert main(["beamraster", "realtime", "--build", str(tmp_path / "none.json"), "-o", str(out)]) == 2


def test_shipped_builds_give_the_verdict(tmp_path):
    """By default the command reads the shipped builds (docs/boards/results.json and docs/boards/beamraster/):
    for 8 users the largest configuration that fits and routes on the LFE5U-85F is the 16-lane one, the
    32-lane one needs more multipliers than the part has, and no built configuration reaches real time."""
    from hwcosim.cosim.cli import main

    assert main(["beamraster", "realtime", "-o", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "beamraster_realtime_verdict.json").read_text())
    k8 = [b for b in res["builds"] if b["K"] == 8]
    assert max(b["lanes"] for b in k8) == 16
    assert all(b["realtime_fraction"] < 1 for b in res["builds"])
    fails = {(int(a["params"]["lanes"]), int(a["params"]["K"])): a["error"] for a in res["attempts"]}
    assert "MULT18X18D" in fails[(32, 8)]
