"""One scenario file drives ``hwcosim cluster run`` and the three RTL-in-the-loop bridges (issue 24.7).

Lossy links (``effect = "lossy"``) act in the cluster model as retransmission goodput loss; the
``[cosim.*]`` tables are validated by the cluster's parser; each bridge's model-only run derives
its scenario from the file (topology, job, failure) and flags override it. The RTL runs of the same
file are in tests/melo/test_bridge_melo.py, tests/kvdirect/test_bridge_kv.py and
tests/bbs/test_bridge_serve.py (marked ``sim``).
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.models.systems.cluster.scenario import ScenarioError, load_scenario, parse_scenario, prepare, run_scenario

SCEN = Path(__file__).resolve().parents[2] / "models" / "systems" / "cluster" / "scenarios"
COSIM = SCEN / "cosim_small.toml"

# four single-GPU hosts, one DP ring over them; GPU 2's NIC down port is the ring's only lossy hop
LINE = """
name = "line"
iterations = 6
[topology]
generator = "clos"
pods = 1
tors_per_pod = 2
hosts_per_tor = 2
gpus_per_host = 1
nic_ports = 1
nic_gbps = 100.0
aggs_per_pod = 1
cores_per_plane = 1
[[jobs]]
name = "a"
dp = 4
compute_s = 0.001
grad_bytes = 1e8
"""


def _lossy(at, restore=None, loss=0.2, index=2):
    s = f'[[failures]]\nat_s = {at}\nkind = "port-down"\nindex = [{index}]\neffect = "lossy"\nloss = {loss}\n'
    return s + (f"restore_s = {restore}\n" if restore is not None else "")


def _iters(text: str) -> np.ndarray:
    return np.array(run_scenario(parse_scenario(tomllib.loads(text)))["jobs"][0]["iteration_times_s"])


def test_lossy_link_slows_the_ring_by_its_retransmissions():
    clean = _iters(LINE)
    lossy = run_scenario(parse_scenario(tomllib.loads(LINE + _lossy(0.0, loss=0.2))))
    it = np.array(lossy["jobs"][0]["iteration_times_s"])
    alpha = 2 * 3 * 5e-6  # ring all-reduce of 4 ranks: 6 steps of alpha_s
    comm_clean = clean - 0.001 - alpha
    comm_lossy = it - 0.001 - alpha
    # the lossy hop is the ring's bottleneck: 1 / (1 - p) wire bytes per delivered byte
    np.testing.assert_allclose(comm_lossy, comm_clean / 0.8, rtol=1e-9)
    (rep,) = lossy["lossy"]
    assert rep["links"] == ["port-down#2"] and rep["loss"] == 0.2
    # every iteration's ring hop into GPU 2 delivered 2 (n-1)/n x 1e8 bytes through it; a quarter as many resent
    assert rep["goodput_bytes"] == pytest.approx(6 * 1.5e8, rel=1e-9)
    assert rep["retransmitted_bytes"] == pytest.approx(rep["goodput_bytes"] * 0.25, rel=1e-12)


def test_lossy_link_acts_only_while_lossy_and_off_path_links_do_nothing():
    clean = _iters(LINE)
    t = np.cumsum(clean)
    # lossy from the end of iteration 2 to the end of iteration 3 (restore_s): iteration 3 is slower, the others not
    it = _iters(LINE + _lossy(t[1], restore=t[1] + clean[2] * 1.25))
    assert it[2] > clean[2] * 1.2
    np.testing.assert_allclose(it[:2], clean[:2], rtol=1e-12)
    np.testing.assert_allclose(it[4:], clean[4:], rtol=1e-12)
    # a lossy link no stream crosses (single-GPU hosts: nothing uses NVLink) changes nothing
    off = LINE + _lossy(0.0).replace('"port-down"', '"nvlink-down"')
    np.testing.assert_allclose(_iters(off), clean, rtol=1e-12)


def test_lossy_and_down_on_one_link_restore_to_full_capacity():
    down = '[[failures]]\nat_s = 0.0\nkind = "port-down"\nindex = [2]\nrestore_s = 0.02\n'
    clean = _iters(LINE)
    it = _iters(LINE + down + _lossy(0.0, restore=0.03))
    assert it.sum() > clean.sum() + 0.02
    np.testing.assert_allclose(it[-2:], clean[-2:], rtol=1e-12)  # both periods over: the link is whole again


@pytest.mark.parametrize("extra, expect", [
    ('[cosim.melo]\nscale = 1e-3\nbogus = 1\n', "cosim.melo.bogus: unknown field; use one of"),
    ('[cosim.gpu]\nx = 1\n', "cosim.gpu: unknown field; use one of kv, melo, serve"),
    ('[cosim.melo]\njob = "nope"\n', "cosim.melo.job: names no [[jobs]] entry; use one of a"),
    ('[cosim.melo]\nfailure = 0\n', "cosim.melo.failure: must index a lossy [[failures]] entry"),
    ('[cosim.melo]\nscale = 0\n', "cosim.melo.scale: must be a finite number > 0"),
    ('[cosim.kv]\nforward = 1\n', "cosim.kv.forward: must be true or false"),
    ('[cosim.serve]\ndevice = "gpu"\n', "cosim.serve.device: must be one of bbs, fss, both"),
    ('[[failures]]\nat_s = 0.0\nkind = "port-down"\nindex = 2\nloss = 0.1\n', "failures[0].loss: only a lossy link"),
    ('[[failures]]\nat_s = 0.0\nkind = "port-down"\nindex = 2\neffect = "lossy"\n', "failures[0].loss: missing"),
    ('[[failures]]\nat_s = 0.0\nkind = "port-down"\nindex = 2\neffect = "flaky"\n',
     "failures[0].effect: must be one of down, lossy"),
])
def test_wrong_cosim_and_lossy_fields(extra, expect):
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(tomllib.loads(LINE + extra))
    assert str(ei.value).startswith(expect), str(ei.value)
    assert "\n" not in str(ei.value)


def test_failure_index_must_be_lossy():
    down = '[[failures]]\nat_s = 0.0\nkind = "port-down"\nindex = 2\n'
    text = LINE + down + _lossy(0.0) + "[cosim.melo]\nfailure = 0\n"
    with pytest.raises(ScenarioError, match=r"cosim\.melo\.failure: must index a lossy .*: 1, not 0"):
        parse_scenario(tomllib.loads(text))


# ---- one file, four commands -------------------------------------------------------------------
def test_cluster_run_accepts_the_cosim_file(tmp_path):
    assert main(["cluster", "run", str(COSIM), "-o", str(tmp_path), "-q"]) == 0
    res = json.loads((tmp_path / "scenario.json").read_text())
    assert [j["job"] for j in res["jobs"]] == ["dp4", "dp2tp2"]
    (rep,) = res["lossy"]
    assert rep["links"] == ["port-down#1"] and rep["retransmitted_bytes"] > 0
    # the lossy period slows dp4 (its ring crosses the link) against the same file without the failure
    sc = load_scenario(COSIM)
    clean = run_scenario(dataclasses.replace(sc, failures=()))
    assert res["jobs"][0]["iteration_times_s"][0] > clean["jobs"][0]["iteration_times_s"][0]


def test_melo_bridge_takes_topology_ring_and_lossy_link_from_the_file(tmp_path):
    assert main(["cosim", "melo", "--scenario", str(COSIM), "--model-only", "-o", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "bridge_melo.json").read_text())
    sc = load_scenario(COSIM)
    topo, places, _ = prepare(sc)
    ring = places[0][0, :, 0].tolist()  # dp4's DP ranks, ring order
    hops = [(a, b) for a, b in zip(ring, ring[1:] + ring[:1])]
    p = d["scenario"]
    assert [(f[0], f[1]) for f in p["flows"]] == hops * 2  # two channels
    assert all(f[2] == pytest.approx(2 * 3 / 4 * 4e7 / 2) for f in p["flows"]) and p["scale"] == 2e-3
    assert p["lossy_link"] == ["port-down", 1] and p["loss"] == 0.02 and p["seed"] == 1
    assert p["topology"][0] == "clos" and p["nic_gbps"] == topo.nic_gbps
    m = d["model"]
    chosen = [f for f in m["flows"] if f["level"] != "flow"]
    assert [(f["src"], f["dst"]) for f in chosen] == [(4, 1), (4, 1)]  # the hops into GPU 1 cross its down port
    assert all(f["packets"] == 59 for f in chosen)  # 3e7 B x 2e-3 in 1 kB packets
    assert m["lost"] > 0 and m["delivered"] == 2 * 59
    # flags override the file
    assert main(["cosim", "melo", "--scenario", str(COSIM), "--model-only", "-o", str(tmp_path / "o"),
                 "--loss", "0.1", "--scale", "1e-3", "--seed", "4"]) == 0
    p2 = json.loads((tmp_path / "o" / "bridge_melo.json").read_text())["scenario"]
    assert (p2["loss"], p2["scale"], p2["seed"]) == (0.1, 1e-3, 4)
    # another lossy link: GPU 4's NIC down port (the hops 0 -> 4), still at the file's loss
    assert main(["cosim", "melo", "--scenario", str(COSIM), "--model-only", "-o", str(tmp_path / "g"),
                 "--lossy-gpu", "4"]) == 0
    d3 = json.loads((tmp_path / "g" / "bridge_melo.json").read_text())
    assert d3["scenario"]["lossy_link"] is None and d3["scenario"]["loss"] == 0.02
    assert [(f["src"], f["dst"]) for f in d3["model"]["flows"] if f["level"] != "flow"] == [(0, 4), (0, 4)]


def test_kv_bridge_takes_workers_from_the_jobs_dp_ranks(tmp_path):
    assert main(["cosim", "kv", "--scenario", str(COSIM), "--model-only", "-o", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "bridge_kv.json").read_text())
    sc = load_scenario(COSIM)
    _, places, _ = prepare(sc)
    p = d["scenario"]
    assert p["n_workers"] == sc.jobs[0].spec.dp == 4
    assert p["worker_gpus"] == places[0][0, :, 0].tolist()
    assert p["ps_gpu"] not in p["worker_gpus"]
    assert (p["iterations"], p["keys_per_iter"], p["n_keys"], p["seed"]) == (2, 8, 24, 1)
    assert d["model"]["ops"] == 2 * 4 * 2 * 8
    assert main(["cosim", "kv", "--scenario", str(COSIM), "--model-only", "-o", str(tmp_path / "o"),
                 "--workers", "2", "--iterations", "1"]) == 0
    p2 = json.loads((tmp_path / "o" / "bridge_kv.json").read_text())["scenario"]
    assert p2["worker_gpus"] == p["worker_gpus"][:2] and p2["iterations"] == 1


def test_serve_bridge_takes_its_table_and_seed(tmp_path):
    assert main(["cosim", "serve", "--scenario", str(COSIM), "--model-only", "-o", str(tmp_path)]) == 0
    for dev in ("bbs", "fss"):
        p = json.loads((tmp_path / f"bridge_serve_{dev}.json").read_text())["scenario"]
        assert (p["device"], p["n_requests"], p["seed"]) == (dev, 24, 1)
    assert main(["cosim", "serve", "--scenario", str(COSIM), "--model-only", "-o", str(tmp_path / "o"),
                 "--device", "fss", "--requests", "8"]) == 0
    assert [f.name for f in (tmp_path / "o").iterdir()] == ["bridge_serve_fss.json"]


@pytest.mark.parametrize("cmd", [["cosim", "melo"], ["cosim", "kv"], ["cosim", "serve"], ["cluster", "run"]])
@pytest.mark.parametrize("edit, expect", [
    (("[cosim.kv]\n", "[cosim.kv]\ncolour = 1\n"), "cosim.kv.colour: unknown field"),
    (("loss = 0.02", "loss = 1.5"), "failures[0].loss: must be in (0, 0.9]"),
    (('job = "dp4"              # one', 'job = "dp9"              # one'), "cosim.kv.job: names no [[jobs]] entry"),
])
def test_bad_file_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, cmd, edit, expect):
    text = COSIM.read_text()
    assert edit[0] in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    out = tmp_path / "out"
    args = [*cmd, str(bad), "-q"] if cmd[0] == "cluster" else [*cmd, "--scenario", str(bad), "--model-only"]
    assert main([*args, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expect in err and "bad.toml" in err, err
    assert not out.exists()


@pytest.mark.parametrize("args, expect", [
    (["melo", "--scenario", str(SCEN / "small.toml")], "cosim.melo.scale: missing"),
    (["melo", "--scenario", str(SCEN / "small.toml"), "--scale", "1e-4"], "failures: no lossy link"),
    (["melo", "--scenario", str(COSIM), "--scale", "10"], "more than 200000"),
    (["kv", "--scenario", str(COSIM), "--workers", "9"], "job 'dp4' has 4 DP ranks"),
    (["melo", "--scenario", "nope.toml"], "no such file"),
])
def test_file_the_bridge_cannot_run_exits_2(tmp_path, capsys, args, expect):
    assert main(["cosim", *args, "--model-only", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expect in err, err
    assert not (tmp_path / "out").exists()
