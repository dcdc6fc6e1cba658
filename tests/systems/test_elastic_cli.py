"""``hwcosim elasticbatch|easyscale|goldminer`` CLI: outputs and bad input."""

from __future__ import annotations

import json

import pytest
from hwcosim.cosim.cli.elastic import main


def test_elasticbatch_quick(tmp_path, capsys):
    assert main(["elasticbatch", "--quick", "-o", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "elasticbatch.json").read_text())
    assert (tmp_path / "elasticbatch.png").stat().st_size > 1000
    assert res["layouts"] == 19
    assert all(r["elasticbatch"]["gpus"] < r["nomig"]["gpus"] for r in res["runs"])
    assert "paper: 50%" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["elasticbatch", "--gpu", "V100"], "--gpu"),
    (["easyscale", "--steps", "1"], "--steps"),
    (["goldminer", "--seed", "-1"], "--seed"),
])
def test_bad_input(argv, msg, capsys, tmp_path):
    code = main(argv + ["-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and msg in err[0]


def test_out_is_a_file(tmp_path, capsys):
    f = tmp_path / "x"
    f.write_text("")
    code = main(["elasticbatch", "--quick", "-o", str(f)])
    assert code == 2


@pytest.mark.slow
def test_easyscale_and_goldminer_quick(tmp_path):
    assert main(["easyscale", "--quick", "-o", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "easyscale.json").read_text())
    assert all(res["equality"].values())
    assert main(["goldminer", "--quick", "-o", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "goldminer.json").read_text())
    assert res["speedup"]["identical"]
