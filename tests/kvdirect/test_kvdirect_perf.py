"""KV-Direct performance model, workload generator and CLI."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from hwcosim.cosim.cli.kvdirect import register
from hwcosim.models.kvdirect.perf import (
    HWParams,
    _nic_shares,
    atomic_rates,
    dispatch_ratio,
    hit_ratio,
    multi_nic,
    nic_throughput,
    ooo_stats,
    pcie_link_ops,
    prev_distance,
)
from hwcosim.models.kvdirect.workload import Workload, generate, zipf_harmonic, zipf_ranks, zipf_top_mass

HW = HWParams()


def test_pcie_closed_forms():
    assert pcie_link_ops(1, 0, HW) == pytest.approx(64 / 1.05e-6)          # tag-limited reads ~61 M
    assert pcie_link_ops(0, 1, HW) == pytest.approx(7.87e9 / 90)           # 64 B writes: ~87 Mops
    assert 7.87e9 * 64 / 90 == pytest.approx(5.6e9, rel=0.01)             # SPECS: 5.6 GB/s
    # 2 writes + 1 read per op: upstream 2*90 + 26 B per op binds
    assert pcie_link_ops(1, 2, HW) == pytest.approx(7.87e9 / (2 * 90 + 26))


def test_dispatch_uniform_closed_form():
    l, h, rate = dispatch_ratio(10**9, 0.0, 1.0, 0.0, HW)
    # DRAM never saturates (l = 1); every access checks DRAM, 15/16 miss to PCIe
    assert l == 1.0 and h == pytest.approx(1 / 16)
    assert rate == pytest.approx(2 * 64 / 1.05e-6 / (1 - 1 / 16))


def test_dispatch_zipf_balances():
    l, h, rate = dispatch_ratio(10**9, 0.99, 1.0, 1.0, HW)
    assert 0 < l < 1
    tput_pcie = 2 * pcie_link_ops(1.0, 1.0, HW) * 2
    assert l / HW.dram_accesses == pytest.approx((1 - l * h) / tput_pcie, rel=1e-6)
    assert rate == pytest.approx(HW.dram_accesses / l, rel=1e-6)
    assert h == pytest.approx(hit_ratio(l, 10**9, 0.99, HW))


def test_zipf_harmonic_and_sampler():
    n = 3_000_000
    exact = np.sum(np.arange(1, n + 1, dtype=np.float64) ** -0.99)
    assert zipf_harmonic(n, 0.99) == pytest.approx(exact, rel=1e-9)
    assert zipf_top_mass(1.0, n, 0.99) == pytest.approx(1.0)
    assert zipf_top_mass(0.25, 100, 0.0) == 0.25
    r = zipf_ranks(10**9, 0.99, 400_000, np.random.default_rng(0))
    p0 = 1 / zipf_harmonic(10**9, 0.99)
    assert abs((r == 0).mean() - p0) < 5 * np.sqrt(p0 / 400_000)
    tail = 1 - zipf_harmonic(1 << 20, 0.99) / zipf_harmonic(10**9, 0.99)
    assert abs((r >= 1 << 20).mean() - tail) < 0.005
    assert r.min() >= 0 and r.max() < 10**9


def test_generate_seeded_and_valid():
    w = Workload(n_keys=1000, get_ratio=0.5, theta=0.99, kv_sizes=((4, 8, 1.0), (8, 100, 1.0)))
    a, b, c = generate(w, 5000, 3), generate(w, 5000, 3), generate(w, 5000, 4)
    assert all((a[k] == b[k]).all() for k in a) and not (a["key_id"] == c["key_id"]).all()
    assert a["key_id"].min() >= 0 and a["key_id"].max() < 1000
    assert 0.45 < a["is_get"].mean() < 0.55
    assert set(np.unique(a["value_bytes"]).tolist()) == {8, 100}
    ks, vs = w.size_of(a["key_id"])                       # same key -> same size, always
    assert (ks == a["key_bytes"]).all() and (vs == a["value_bytes"]).all()
    with pytest.raises(ValueError, match="theta"):
        Workload(theta=3.0)
    with pytest.raises(ValueError, match="lengthen"):
        Workload(n_keys=10**6, kv_sizes=((2, 2, 1.0),))


def test_prev_distance_vs_bruteforce():
    ids = np.random.default_rng(2).integers(0, 20, size=500)
    last, ref = {}, []
    for i, x in enumerate(ids.tolist()):
        ref.append(i - last[x] if x in last else -1)
        last[x] = i
    assert prev_distance(ids).tolist() == ref


def test_ooo_stats_extremes():
    w = Workload(n_keys=1000)
    n = 2000
    same = {"key_id": np.zeros(n, np.int64), "key_bytes": np.full(n, 5), "value_bytes": np.full(n, 5),
            "is_get": np.ones(n, bool)}
    assert ooo_stats(same, w, HW)["merge_fraction"] == pytest.approx(1 - 1 / n)
    distinct = dict(same, key_id=np.arange(n, dtype=np.int64))
    st = ooo_stats(distinct, w, HW)
    assert st["merge_fraction"] == 0.0
    # 256 in flight over 1,024 hash slots: P(slot busy) ~ 1 - (1 - 1/1024)**256 ~ 22%
    assert 0.17 < st["false_dependency_fraction"] < 0.27


def test_atomic_speedup_closed_form():
    a = atomic_rates(HW)
    assert a["stalled"] == pytest.approx(1 / (1.05e-6 + 2 / 180e6))
    assert a["forwarding"] == 180e6
    assert a["speedup"] == pytest.approx(180e6 * (1.05e-6 + 2 / 180e6))


def test_nic_throughput_bounds_and_ordering():
    w = Workload(get_ratio=1.0, theta=0.99)
    st = generate(w, 50_000, 1)
    r = nic_throughput(w, HW, st)
    assert r.throughput == min(r.caps.values()) and r.caps[r.bound] == r.throughput
    assert r.throughput <= HW.clock_hz
    slow = nic_throughput(w, HWParams(clock_hz=50e6), st)
    assert slow.throughput == 50e6 and slow.bound == "clock"
    put = nic_throughput(Workload(get_ratio=0.0), HW, generate(Workload(get_ratio=0.0), 50_000, 1))
    assert put.caps["memory"] < r.caps["memory"]            # PUT costs two accesses
    assert put.latency_put_ns > r.latency_get_ns
    uni = Workload(get_ratio=1.0, theta=0.0)
    ru = nic_throughput(uni, HW, generate(uni, 50_000, 1))
    assert ru.merge_fraction < 0.01 < r.merge_fraction      # skew makes ops merge


def test_multi_nic_shares_and_caps():
    w = Workload(theta=0.99)
    sh = _nic_shares(w, 10, 0)
    assert sh.sum() == pytest.approx(1.0) and sh.max() > 0.1 and sh.max() > 1 / zipf_harmonic(10**9, 0.99)
    assert _nic_shares(Workload(theta=0.0), 4, 0).tolist() == [0.25] * 4
    m = multi_nic(w, HW, generate(w, 50_000, 1), 10, 0)
    assert m["throughput"] == min(m["caps"].values())
    assert m["caps"]["skew"] == pytest.approx(m["per_nic"]["throughput"] / m["max_share"])
    one = multi_nic(w, HW, generate(w, 50_000, 1), 1, 0)
    assert one["max_share"] == pytest.approx(1.0)


def _parser():
    ap = argparse.ArgumentParser(prog="hwcosim")
    register(ap.add_subparsers(dest="cmd", required=True))
    return ap


def test_cli_study(tmp_path, capsys):
    args = _parser().parse_args(["kvdirect", "study", "-o", str(tmp_path), "--ops", "5000", "--nics", "4"])
    assert args.func(args) == 0
    res = json.loads((tmp_path / "kvdirect_study.json").read_text())
    assert (tmp_path / "kvdirect_study.png").read_bytes()[:4] == b"\x89PNG"
    assert res["n_nics"] == 4 and res["rows"][0]["op"] == "GET"
    assert res["atomic"]["speedup"] > 100
    assert "paper" in capsys.readouterr().out


def test_cli_bad_input(tmp_path, capsys):
    from hwcosim.cosim.cli import main

    code = main(["kvdirect", "study", "-o", str(tmp_path), "--nics", "0"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "--nics 0: out of range" in err[0]
