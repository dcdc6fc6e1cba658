"""The compile bench (``hwcosim bench --only compile``; full size in ``make bench``), its quick variant here.

- JSON + PNG: accuracy vs sparsity for both patterns (the digits MLP on BBS and FSS, the digits LSTM on
  BBS; the full bench also fine-tunes under the compiler's mask), cycles expected vs ideal, compile time;
- GOPS only at a measured Fmax: null with a note naming the configurations when none was measured;
  computed from a build.json of exactly the configuration when one is there, never from another.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hwcosim.cosim import compile_bench
from hwcosim.cosim.compile_bench import _timing, bench_compile, dense_ops
from hwcosim.cosim.flow.bench import BENCHES
from test_compile import X_MLP, mlp

import hwcosim


def test_quick_bench_writes_json_and_png(tmp_path):
    res = bench_compile(tmp_path, quick=True)
    assert "compile" in BENCHES
    doc = json.loads((tmp_path / "compile.json").read_text())
    assert (tmp_path / "compile.png").stat().st_size > 0 and doc["quick"] is True
    pts = doc["points"]
    assert {(p["model"].split(" (")[0], p["pattern"]) for p in pts} == {("digits LSTM", "bbs"), ("digits MLP", "bbs"),
                                                                        ("digits MLP", "fss")}
    for p in pts:
        acc = p["accuracy"]
        assert set(acc) == {"float", "quantised dense", "pruned (float)", "accelerator (golden)"}
        assert 0 <= acc["accelerator (golden)"] <= 1 and p["cycles_expected"] >= p["cycles_ideal"] > 0
        assert p["compile_cpu_s"] > 0
        if p["sparsity"] == 0:
            assert abs(acc["quantised dense"] - acc["float"]) <= 0.05 and acc["pruned (float)"] == acc["float"]
        # the engine configurations of a compiled network are never among the measured ones here
        assert p["gops"] is None and p["latency_us"] is None and "no measured Fmax" in p["fmax_note"]
    assert res["points"] == pts


def test_gops_only_at_a_measured_fmax_of_exactly_the_configuration(tmp_path, monkeypatch):
    from hwcosim.cosim.flow.build import _jsonable

    m = hwcosim.compile(mlp(), target="bbs", sparsity=0.5, calibration=X_MLP)
    monkeypatch.setattr(compile_bench, "FMAX_SOURCES", (tmp_path,))
    assert _timing(m)["gops"] is None
    results = [{"design": st.engine, "params": _jsonable(st.params.to_dict()), "mode": "out-of-context",
                "worst_fmax_mhz": f} for st, f in zip(m.stages, (80.0, 120.0))]
    other = json.loads(json.dumps(results[0]))
    other["params"]["k"] += 1
    other["worst_fmax_mhz"] = 999.0
    (tmp_path / "build.json").write_text(json.dumps({"results": [other, *results]}))
    t = _timing(m)
    cyc = [d["cycles_expected"] for d in m.report()["layers"]]
    lat = cyc[0] / 80e6 + cyc[1] / 120e6
    assert t["fmax_mhz"] == [80.0, 120.0] and t["latency_us"] == pytest.approx(lat * 1e6)
    assert dense_ops(m) == 2 * (32 * 16 + 4 * 32)
    assert t["gops"] == pytest.approx(dense_ops(m) / lat / 1e9)
    assert np.isfinite(t["gops"])
