"""KV-Direct Mops at the measured clock (models/kvdirect/mops.py, hwcosim kvdirect mops): the
Mops = ops/cycle x Fmax plumbing from a small build JSON, and the command's short run."""

import json

import pytest
from hwcosim.models.errors import UsageError
from hwcosim.models.kvdirect.mops import load_fmax, mops_at, pipeline_ops_per_cycle
from hwcosim.models.kvdirect.rtl_model import PipelineParams

PARAMS = PipelineParams(memory_bytes=1 << 17, entries=64, rs_slots=1024)


def _build_json(path, fmax=50.0):
    res = {"design": "kvdirect-pipeline", "part": "LFE5U-85F", "speed": 6, "worst_fmax_mhz": fmax,
           "fmax_mhz": {"clk": {"min": fmax, "median": fmax, "per_seed": [fmax]}}, "params": PARAMS.to_dict()}
    path.write_text(json.dumps({"results": [{"design": "other", "worst_fmax_mhz": 300.0}, res]}))
    return path


def test_fmax_plumbing(tmp_path):
    b = load_fmax(_build_json(tmp_path / "b.json", 50.0))
    assert b["fmax_mhz"] == 50.0 and PipelineParams.from_dict(b["params"]) == PARAMS
    assert mops_at(0.5, 50.0) == 25.0 and mops_at(1.0, 103.17) == pytest.approx(103.17)
    with pytest.raises(UsageError):
        load_fmax(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_text(json.dumps({"results": []}))
    with pytest.raises(UsageError):
        load_fmax(tmp_path / "empty.json")
    with pytest.raises(UsageError):
        mops_at(1.0, 0.0)


def test_pipeline_latency_lowers_ops_per_cycle():
    # Little's law: 64 entries over a 200-cycle round trip cannot keep one op per cycle
    fast = pipeline_ops_per_cycle(PARAMS, 1.0, 5, 64, 400, 1024, 0)
    slow = pipeline_ops_per_cycle(PARAMS, 1.0, 200, 64, 400, 1024, 0)
    assert slow["ops_per_cycle"] < fast["ops_per_cycle"] <= 1.0
    assert slow["ops_per_cycle"] < 64 / 200 * 1.6   # forwarding on hot keys lets some ops skip the read


def test_cli_mops(tmp_path, capsys):
    from hwcosim.cosim.cli import main

    js = _build_json(tmp_path / "b.json", 50.0)
    out = tmp_path / "out"
    assert main(["kvdirect", "mops", "--build", str(js), "--ops", "1000", "-o", str(out)]) == 0
    res = json.loads((out / "kvdirect_mops.json").read_text())
    assert (out / "kvdirect_mops.png").stat().st_size > 0
    assert res["fmax_mhz"] == 50.0 and [r["mix"] for r in res["rows"]] == ["GET", "PUT", "50/50 GET/PUT"]
    for r in res["rows"]:
        assert r["caps_mops"]["pipeline"] == pytest.approx(r["ops_per_cycle"] * 50.0)
        assert r["mops"] == pytest.approx(min(r["caps_mops"].values())) and r["bound"] in r["caps_mops"]
        assert r["mops_band_memory_latency"][0] <= r["mops_band_memory_latency"][1]
    assert [r["paper_mops"] for r in res["rows"]] == [180.0, 114.0, None]
    text = capsys.readouterr().out
    assert "most sensitive to the memory round trip" in text and "paper" in text
    assert main(["kvdirect", "mops", "--build", str(tmp_path / "none.json"), "-o", str(out)]) == 2
