"""The kernel and pruning bench (pruning.bench): CSB kernel vs scipy CSR vs dense, pruning per pattern.

The CSB kernels themselves are tested in tests/models/test_csb_kernels.py."""

from __future__ import annotations

import json

import pytest
from hwcosim.pruning.bench import run_kernel_bench


def test_quick_bench_writes_json(tmp_path):
    res = run_kernel_bench(tmp_path, quick=True)
    data = json.loads((tmp_path / "kernels.json").read_text())
    assert data["kernels"] == json.loads(json.dumps(res["kernels"]))
    assert {r["batch"] for r in data["kernels"]} == {1, 16, 64}
    assert all(r["t_csb_s"] > 0 and r["t_csb_numpy_s"] > 0 and r["t_csr_s"] > 0 and r["t_dense_s"] > 0
               for r in data["kernels"])
    assert data["meta"]["csb_kernel"].startswith("hwcosim.models.csb_kernels.CSBPacked")
    assert {r["pattern"] for r in data["prune"]} >= {
        "unstructured",
        "block",
        "vector",
        "balanced",
        "bbs",
        "nm",
        "fss",
    }


@pytest.mark.slow
def test_full_bench(tmp_path):
    res = run_kernel_bench(tmp_path, quick=False)
    assert len(res["kernels"]) == 27
