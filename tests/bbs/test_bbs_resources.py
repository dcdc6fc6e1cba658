"""Yosys resource estimates of the BBS LSTM layer vs (P, B) (small configurations in CI), and the
``hwcosim verilog bbs-lstm`` command's files."""

import json

import pytest


@pytest.mark.synth
def test_resource_table_small_config(tmp_path):
    from hwcosim.cosim.designs.bbs.lstm_bench import resource_markdown, resource_table

    rows = resource_table(configs=((4, 4),), hidden=8, input_size=4, targets=("xcup",), out_dir=tmp_path)
    assert len(rows) == 1 and (tmp_path / "bbs_lstm_resources.json").exists()
    r = rows[0]
    # 16 SpMxV multipliers + 3 per hidden unit in the element-wise unit map to DSPs or LUT logic
    assert r["LUT"] > 100 and r["FF"] > 100 and r["DSP"] + r["LUT"] > 0
    assert "| 4 | 4 |" in resource_markdown(rows)


@pytest.mark.synth
def test_resource_table_arria10_fabric(tmp_path):
    """The Arria 10 column: synth_intel_alm -family cyclone10gx on a small layer; JSON + markdown."""
    from hwcosim.cosim.designs.bbs.lstm_bench import resource_table

    rows = resource_table(configs=((4, 4),), hidden=8, input_size=4, targets=("cyclone10gx",), out_dir=tmp_path)
    assert [(r["P"], r["B"], r["target"]) for r in rows] == [(4, 4, "cyclone10gx")]
    r = rows[0]
    assert "Arria 10" in r["device"] and r["LUT"] > 100 and r["FF"] > 100
    assert json.loads((tmp_path / "bbs_lstm_resources.json").read_text()) == rows
    md = (tmp_path / "bbs_lstm_resources.md").read_text()
    assert "cyclone10gx LUT" in md and f"| 4 | 4 | {r['k']} | 16 | {r['LUT']} | {r['FF']} |" in md


def test_resource_markdown_one_row_per_config_one_group_per_target():
    from hwcosim.cosim.designs.bbs.lstm_bench import resource_markdown

    res = {"LUT": 1, "FF": 2, "DSP": 3, "BRAM": 4}
    rows = [{"P": 4, "B": 4, "k": 2, "multipliers": 16, "target": t, **res} for t in ("xcup", "cyclone10gx")]
    rows.append({"P": 16, "B": 16, "k": 1, "multipliers": 256, "target": "xcup", **res})
    lines = resource_markdown(rows).splitlines()
    assert lines[0].count("xcup") == 4 and lines[0].count("cyclone10gx") == 4
    assert lines[2] == "| 4 | 4 | 2 | 16 | 1 | 2 | 3 | 4 | 1 | 2 | 3 | 4 |"
    assert lines[3] == "| 16 | 16 | 1 | 256 | 1 | 2 | 3 | 4 | - | - | - | - |"


def test_cli_verilog_bbs_lstm_writes_its_files(tmp_path):
    from hwcosim.cosim.cli import main
    from hwcosim.models.bbs.lstm import LSTMParams

    out = tmp_path / "v"
    assert main(["verilog", "bbs-lstm", "-o", str(out), "--synth", "none", "--param", "hidden=16",
                 "--param", "input_size=4", "--param", "banks=4", "--param", "k=1", "--param", "pes=4"]) == 0
    assert sorted(f.name for f in out.iterdir()) == ["bbs_lstm.core", "bbs_lstm.params.json", "bbs_lstm.sdc",
                                                     "bbs_lstm.v", "bbs_lstm.xdc", "bbs_lstm_tb.v"]
    v = (out / "bbs_lstm.v").read_text()
    assert "module bbs_lstm" in v and "h__valid" in v and "wload__payload" in v and "x__ready" in v
    p = LSTMParams.from_dict(json.loads((out / "bbs_lstm.params.json").read_text()))
    assert (p.hidden, p.input_size, p.banks, p.k, p.pes) == (16, 4, 4, 1, 4)
    core = (out / "bbs_lstm.core").read_text()
    assert '- "bbs_lstm.v"' in core and 'toplevel: "bbs_lstm"' in core and '"hidden": 16' in core
    assert "module bbs_lstm_tb" in (out / "bbs_lstm_tb.v").read_text()


def test_cli_verilog_bbs_lstm_bad_param_exits_2(tmp_path, capsys):
    from hwcosim.cosim.cli import main

    assert main(["verilog", "bbs-lstm", "-o", str(tmp_path), "--synth", "none", "--param", "pes=6"]) == 2
    assert "multiple of 4" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
