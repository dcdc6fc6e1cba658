"""One parameter channel: --param FIELD=VALUE and --params FILE.toml on verilog, sim and sweep,
validated by the design's parameter class (unknown field, bad value, unbuildable -> exit 2, one line)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.registry import designs, resolve_params


def _err(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.parametrize("name", sorted(designs()))
def test_every_design_rejects_an_unknown_field(name):
    from hwcosim.models.errors import UsageError

    d = designs()[name]
    with pytest.raises(UsageError, match="no such parameter"):
        resolve_params(d, ["no_such_field=1"])


def test_file_then_command_line(tmp_path):
    d = designs()["bbs-spmxv"]
    f = tmp_path / "p.toml"
    f.write_text("pes = 4\nk = 3\n")
    p = resolve_params(d, None, str(f))
    assert (p.pes, p.k) == (4, 3)
    p = resolve_params(d, ["pes=2"], str(f))
    assert (p.pes, p.k) == (2, 3)   # --param wins over the file


@pytest.mark.parametrize("args,needle", [
    (["--param", "nope=1"], "nope"),
    (["--param", "pes=3"], "3 PEs"),
    (["--param", "pes=x"], "pes=x"),
    (["--param", "pes"], "FIELD=VALUE"),
    (["--params", "missing.toml"], "missing.toml"),
])
def test_verilog_bad_params(tmp_path, capsys, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    assert main(["verilog", "bbs-spmxv", "--synth", "none", "-o", "out", *args]) == 2
    err = _err(capsys)
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0], err
    assert not (tmp_path / "out").exists()


def test_params_file_table_and_syntax(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.toml").write_text("[bbs]\npes = 4\n")
    (tmp_path / "s.toml").write_text("pes = \n")
    for f in ("t.toml", "s.toml"):
        assert main(["verilog", "bbs-spmxv", "--synth", "none", "-o", "out", "--params", f]) == 2
        assert len(_err(capsys)) == 1


def test_verilog_params_file_applies(tmp_path):
    (tmp_path / "p.toml").write_text("pes = 4\n")
    assert main(["verilog", "bbs-spmxv", "--synth", "none", "-o", str(tmp_path / "o"),
                 "--params", str(tmp_path / "p.toml")]) == 0
    assert json.loads((tmp_path / "o" / "bbs_spmxv.params.json").read_text())["pes"] == 4


def test_sim_aliases_and_csb_fields(tmp_path, capsys):
    from hwcosim.cosim.api import bbs_params_from_csb
    from hwcosim.cosim.cli.commands import register
    from hwcosim.pruning.formats import csb

    m = csb.encode(np.random.default_rng(0).normal(size=(16, 32)), 4, 0.5)
    csb.save(m, tmp_path / "w")
    import argparse

    ap = argparse.ArgumentParser()
    register(ap.add_subparsers(dest="cmd"))
    a = ap.parse_args(["sim", "--csb", str(tmp_path / "w"), "--pes", "4"])
    b = ap.parse_args(["sim", "--csb", str(tmp_path / "w"), "--param", "pes=4"])
    pa, pb = (bbs_params_from_csb(x.csb, x.params, x.pes, x.vec_format, x.out_format, x.param)[0] for x in (a, b))
    assert pa == pb and pa.rows == 16
    assert main(["sim", "--csb", str(tmp_path / "w"), "--param", "rows=64"]) == 2
    assert "CSB weights fix rows=16" in _err(capsys)[0]


def test_sweep_takes_param_and_params(tmp_path):
    import argparse

    from hwcosim.cosim.cli.sweep import register, spec_from_args

    ap = argparse.ArgumentParser()
    register(ap.add_subparsers(dest="cmd"))
    (tmp_path / "p.toml").write_text("pes = 4\n")
    a = ap.parse_args(["sweep", "bbs-spmxv", "--params", str(tmp_path / "p.toml"), "--param", "banks=4"])
    spec = spec_from_args(a)
    assert spec.params["pes"] == 4 and spec.params["banks"] == 4


def _sweep_spec(tmp_path, argv):
    import argparse

    from hwcosim.cosim.cli.sweep import register, spec_from_args

    ap = argparse.ArgumentParser()
    register(ap.add_subparsers(dest="cmd"))
    return spec_from_args(ap.parse_args(["sweep", *argv]))


def test_sweep_command_line_beats_the_spec_file(tmp_path):
    """--set seed=11 used to be overwritten by the spec's [workload] seed (every point ran seed 7)."""
    from hwcosim.cosim.flow.sweep import expand

    f = tmp_path / "s.toml"
    f.write_text('design = "melo-engine"\n[workload]\nseed = 7\nloss = 0.05\n[grid]\npool_blocks = [64, 128]\n')
    spec = _sweep_spec(tmp_path, [str(f), "--set", "seed=11", "--set", "loss=0.2", "--set", "pool_blocks=256"])
    _, points = expand(spec)
    assert len(points) == 1 and points[0].params.pool_blocks == 256
    assert points[0].workload["seed"] == 11 and points[0].workload["loss"] == 0.2
    spec = _sweep_spec(tmp_path, [str(f), "--grid", "seed=1,2"])
    pts = expand(spec)[1]   # the file's pool_blocks grid x the command line's seed grid
    assert len(pts) == 4 and sorted({p.workload["seed"] for p in pts}) == [1, 2]


def test_sweep_param_that_cannot_apply_is_an_error(tmp_path):
    from hwcosim.cosim.flow.sweep import expand

    with pytest.raises(ValueError, match="workload setting"):
        _sweep_spec(tmp_path, ["melo-engine", "--param", "seed=3"])
    with pytest.raises(ValueError, match="no parameter 'nope'"):
        expand(_sweep_spec(tmp_path, ["melo-engine", "--set", "nope=3"]))
