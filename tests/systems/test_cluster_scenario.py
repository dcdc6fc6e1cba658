"""``hwcosim cluster run scenario.toml``: good scenarios run, bad fields give one clear line (exit 2)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import cluster as cli
from hwcosim.models.systems.cluster.scenario import (
    ScenarioError,
    load_scenario,
    parse_scenario,
    place_jobs,
    run_scenario,
)

SCEN = Path(__file__).resolve().parents[2] / "models" / "systems" / "cluster" / "scenarios"

GOOD = """
name = "t"
seed = 3
iterations = 4
[topology]
generator = "clos"
pods = 1
tors_per_pod = 2
hosts_per_tor = 2
nic_ports = 1
aggs_per_pod = 2
cores_per_plane = 1
[routing]
scheme = "ecmp"
[[jobs]]
name = "a"
dp = 2
tp = 8
compute_s = 0.01
grad_bytes = 1e8
placement = "spread"
[[jobs]]
name = "b"
dp = 2
tp = 4
compute_s = 0.02
grad_bytes = 1e8
"""


def _doc(**patch):
    d = tomllib.loads(GOOD)
    for k, v in patch.items():
        node = d
        *path, last = k.split("__")
        for p in path:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if v is None:
            del node[last]
        else:
            node[last] = v
    return d


def test_examples_parse():
    for f in ("small.toml", "lingjun.toml", "rail.toml"):
        sc = load_scenario(SCEN / f)
        assert sc.jobs and sc.topology.generator in ("clos", "rail-clos", "lingjun-2023")


def test_good_scenario_runs(tmp_path):
    sc = parse_scenario(_doc())
    assert sc.seed == 3 and [j.spec.name for j in sc.jobs] == ["a", "b"] and sc.jobs[0].spec.iterations == 4
    res = run_scenario(sc)
    assert [j["iterations"] for j in res["jobs"]] == [4, 4]
    # job a alone in a 1-pod Clos with no contention on its ring: iteration >= compute + closed-form ring
    a = res["jobs"][0]
    assert a["min_iter_s"] >= 0.01
    assert 0 < res["gpu_utilisation"] <= 1
    again = run_scenario(sc)
    assert again["jobs"][0]["iteration_times_s"] == a["iteration_times_s"]  # same seed, same result


def test_spread_and_packed_placement():
    sc = parse_scenario(_doc())
    from hwcosim.models.systems.cluster.scenario import build

    topo = sc.topology.build()
    pa, pb = place_jobs(sc, topo)
    hosts_a = np.unique(pa.ravel() // topo.gpus_per_host)
    assert np.unique(topo.host_tor[hosts_a]).size == 2  # spread: one host in each ToR
    assert not set(pa.ravel()) & set(pb.ravel())
    build(sc)


def test_cli_run_writes_json_and_png(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text(GOOD)
    assert cli.main(["run", str(p), "-o", str(tmp_path / "out"), "-q"]) == 0
    res = json.loads((tmp_path / "out" / "scenario.json").read_text())
    assert res["scenario"] == "t" and len(res["jobs"]) == 2
    assert (tmp_path / "out" / "scenario.png").stat().st_size > 1000
    assert "makespan" in capsys.readouterr().out


@pytest.mark.parametrize("patch, expect", [
    ({"jobs__0__dp": 0}, "jobs[0].dp: must be an integer >= 1, not 0"),
    ({"jobs__1__dp": None}, "jobs[1].dp: missing"),
    ({"jobs__0__placement": "best"}, "jobs[0].placement: must be one of packed, spread, random"),
    ({"jobs__0__compute_s": -1.0}, "jobs[0].compute_s: must be a finite number >= 0"),
    ({"jobs__0__grad": 1.0}, "jobs[0].grad: unknown field; use one of"),
    ({"routing__scheme": "ospf"}, "routing.scheme: must be one of ecmp, c4p, crux"),
    ({"topology__generator": "torus"}, "topology.generator: must be one of clos, rail-clos, fat-tree, lingjun-2023"),
    ({"topology__pods": None}, "topology.pods: missing"),
    ({"topology__nic_gbps": 0}, "topology.nic_gbps: must be a finite number > 0"),
    ({"topology__tor_oversub": 0.5}, "topology.tor_oversub: must be a finite number >= 1"),
    ({"seed": -1}, "seed: must be an integer >= 0"),
    ({"jobs": []}, "jobs: missing; add at least one [[jobs]]"),
    ({"jobs__1__name": "a"}, "jobs[1].name: 'a' is used by an earlier job"),
    ({"failures": [{"at_s": 1.0, "kind": "tor-up", "index": [0], "restore_s": 0.5}]},
     "failures[0].restore_s: must be after at_s"),
    ({"failures": [{"at_s": 1.0, "kind": "wire", "index": 0}]}, "failures[0].kind: must be one of"),
])
def test_wrong_fields(tmp_path, capsys, patch, expect):
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(_doc(**patch))
    assert str(ei.value).startswith(expect), str(ei.value)
    assert "\n" not in str(ei.value)


def _write_toml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, expect", [
    (GOOD.replace("dp = 2\ntp = 8", "dp = 200\ntp = 8"), "jobs[0]: needs 1600 GPUs but only 32 of 32 are free"),
    (GOOD + "[[failures]]\nat_s = 0.1\nkind = \"tor-up\"\nindex = 99\n", "failures[0].index: 99 is out of range"),
    (GOOD.replace("dp = 2\ntp = 8", "dp = \"two\"\ntp = 8"), "jobs[0].dp: must be an integer >= 1, not 'two'"),
    (GOOD.replace("[routing]", "[routing\n"), "not valid TOML"),
    (GOOD.replace("iterations = 4", "iterations = 4\ncolor = 1"), "color: unknown field"),
])
def test_cli_bad_scenarios_one_line_exit_2(tmp_path, capsys, text, expect):
    p = _write_toml(tmp_path / "bad.toml", text)
    code = cli.main(["run", str(p), "-o", str(tmp_path / "out"), "-q"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expect in err and "bad.toml" in err, err
    assert not (tmp_path / "out" / "scenario.json").exists()


def test_cli_missing_file(tmp_path, capsys):
    code = cli.main(["run", str(tmp_path / "nope.toml"), "-q"])
    assert code == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_example_scenarios_run(tmp_path):
    for f in ("small.toml", "lingjun.toml", "rail.toml"):
        assert cli.main(["run", str(SCEN / f), "-o", str(tmp_path / f), "-q"]) == 0


def test_overlap_a2a_and_schemes_in_scenario():
    d = _doc(jobs__0__overlap=0.5, jobs__0__a2a_bytes=1e7)
    sc = parse_scenario(d)
    assert sc.jobs[0].spec.overlap == 0.5 and sc.jobs[0].spec.a2a_bytes == 1e7
    with pytest.raises(ScenarioError, match=r"^jobs\[0\]\.overlap: must be in \[0, 1\]"):
        parse_scenario(_doc(jobs__0__overlap=1.5))
    for scheme in ("c4p", "crux"):
        res = run_scenario(parse_scenario(_doc(routing__scheme=scheme)))
        assert [j["iterations"] for j in res["jobs"]] == [4, 4]
