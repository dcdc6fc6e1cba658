"""``hwcosim melo`` CLI and the study driver (tiny configuration; the real quick study is slow)."""

from __future__ import annotations

import argparse
import json

import pytest
from hwcosim.cosim.cli import melo as cli
from hwcosim.models.melo import study

TINY = {
    "losses": [0.0, 0.02],
    "tput_conns": [1],
    "tput_duration_us": 150.0,
    "fct_conns": 4,
    "fct_workloads": ["websearch"],
    "fct_flows": 12,
    "fct_load": 0.5,
    "fct_max_flow_bytes": 100e3,
    "conns": [1, 20],
    "conns_loss": 0.01,
    "conns_duration_us": 150.0,
    "conns_fct_flows": 10,
    "pool_conns": 8,
    "pool_loss": 0.05,
    "pool_blocks": [1, 64],
    "pool_duration_us": 200.0,
    "burst": 3.0,
}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(study, "study_config", lambda quick=True: dict(TINY))


def test_register_adds_subcommands():
    ap = argparse.ArgumentParser(prog="hwcosim")
    sub = ap.add_subparsers(dest="cmd")
    cli.register(sub)
    a = ap.parse_args(["melo", "study", "--quick", "-o", "x", "--jobs", "1"])
    assert a.quick and a.output == "x" and a.func is cli._cmd_study
    with pytest.raises(SystemExit) as e:
        ap.parse_args(["melo", "study", "--help"])
    assert e.value.code == 0


def test_study_writes_json_and_plots(tiny, tmp_path, capsys):
    assert cli.main(["study", "--quick", "-o", str(tmp_path), "--jobs", "1"]) == 0
    data = json.loads((tmp_path / "melo_study.json").read_text())
    names = {"melo_throughput_vs_loss.png", "melo_fct_vs_loss.png", "melo_vs_conns.png", "melo_pool.png"}
    for n in names:
        assert (tmp_path / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = data["runs"]
    assert len(runs["tput_vs_loss"]) == 2 * 3 and len(runs["pool"]) == 2
    h = data["headline"]
    g = [r for r in runs["tput_vs_loss"] if r["loss"] == 0.02 and r["scheme"] == "gbn"][0]
    m = [r for r in runs["tput_vs_loss"] if r["loss"] == 0.02 and r["scheme"] == "melo"][0]
    assert h["tput_ratio_melo_over_gbn"]["n=1"]["0.02"] == pytest.approx(m["goodput_gbps"] / g["goodput_gbps"])
    assert h["tput_ratio_melo_over_gbn"]["n=1"]["0.0"] == pytest.approx(1.0)
    pool = {r["pool_blocks"]: r for r in runs["pool"]}
    assert pool[1]["melo_nack_pool"] > 0 and pool[64]["melo_nack_pool"] == 0
    assert all(r["complete"] for r in runs["fct_vs_loss"])
    out = capsys.readouterr().out
    assert "MELO / go-back-N" in out and "bytes per connection" in out


def test_study_same_result_with_two_jobs(tiny):
    a = study.run_study(quick=True, seed=4, jobs=1)
    b = study.run_study(quick=True, seed=4, jobs=2)
    assert json.dumps(_strip(a), sort_keys=True) == json.dumps(_strip(b), sort_keys=True)  # NaN-safe


def _strip(res):
    return {k: [{x: y for x, y in r.items() if x != "wall_s"} for r in v] for k, v in res["runs"].items()}


def test_run_command(tmp_path, capsys):
    assert (
        cli.main(
            [
                "run",
                "--scheme",
                "gbn",
                "--conns",
                "2",
                "--loss",
                "0.01",
                "--duration-us",
                "100",
                "-o",
                str(tmp_path),
            ]
        )
        == 0
    )
    d = json.loads((tmp_path / "melo_run_gbn.json").read_text())
    assert d["summary"]["scheme"] == "gbn" and d["params"]["n_conns"] == 2
    assert "goodput_gbps" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, word",
    [
        (["study", "--jobs", "0"], "--jobs"),
        (["run", "--scheme", "tcp"], "scheme"),
        (["run", "--loss", "0.7"], "loss"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, word, capsys, tmp_path):
    code = cli.main([*argv, "-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and word in err[0]


def test_output_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    code = cli.main(["run", "-o", str(f)])
    assert code == 2 and "not a directory" in capsys.readouterr().err


@pytest.mark.slow
def test_quick_study_real(tmp_path):
    """The real --quick study (about 35 s on 2 cores); runs in make bench."""
    res = study.run_study(quick=True, seed=0, jobs=2)
    study.write_study(res, tmp_path)
    h = res["headline"]
    assert h["tput_ratio_melo_over_gbn"]["n=1"]["0.05"] > 2.0
    assert h["p99_fct_ratio_gbn_over_melo"]["websearch"]["0.05"] > 1.5
