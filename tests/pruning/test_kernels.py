"""CSB SpMV / SpMM kernels against dense numpy (float and exact integer), and the bench."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hwcosim.models.bbs.spmxv import BBSParams, spmxv
from hwcosim.models.fixedpoint import Q, quantize
from hwcosim.pruning.bench import run_kernel_bench
from hwcosim.pruning.formats import csb
from hwcosim.pruning.kernels import CSBKernel, csb_columns, csb_spmm, csb_spmv


@pytest.mark.parametrize(
    "rows, cols, banks, s", [(16, 64, 4, 0.75), (33, 96, 8, 0.5), (8, 512, 16, 0.95), (5, 8, 4, 0.5)]
)
@pytest.mark.parametrize("batch", [1, 16, 64])
def test_against_dense(rows, cols, banks, s, batch):
    rng = np.random.default_rng(rows + batch)
    w = rng.standard_normal((rows, cols))
    m = csb.encode(w, banks, sparsity=s, fmt=Q(3, 13))
    dense = m.to_dense()
    values = m.values * m.fmt.lsb
    X = rng.standard_normal((cols, batch))
    ref = dense @ X
    assert np.allclose(csb_spmm(values, m.indices, X, m.bank_size), ref)
    assert np.allclose(csb_spmm(values, m.indices, X, m.bank_size, chunk_elems=1), ref)  # one row per chunk
    k = CSBKernel.from_csb(m)
    assert np.allclose(k @ X, ref)
    assert np.allclose(csb_spmv(values, m.indices, X[:, 0], m.bank_size), ref[:, 0])
    assert np.allclose(k @ X[:, 0], ref[:, 0])


def test_exact_integer_matches_golden_model():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((12, 64)) * 0.5
    m = csb.encode(w, 4, sparsity=0.75, fmt=Q(2, 6))
    p = BBSParams(
        rows=12, cols=64, banks=4, k=m.k, pes=1, weight_fmt=Q(2, 6), vec_fmt=Q(4, 12), out_fmt=Q(8, 8)
    )
    x = rng.uniform(-2, 2, 64)
    xr = quantize(x, p.vec_fmt)
    acc = csb_spmv(m.values, m.indices, xr, m.bank_size)
    assert acc.dtype == np.int64
    assert (acc == m.to_dense_raw() @ xr).all()
    # the golden model requantises the same exact accumulator
    from hwcosim.models.fixedpoint import requantize

    golden = spmxv(p, m.values, m.indices, xr)
    assert (
        np.asarray(golden) == requantize(acc, p.weight_fmt.frac_bits + p.vec_fmt.frac_bits, p.out_fmt)
    ).all()


def test_columns_hand_worked():
    idx = np.array([[[0, 1], [2, 3]]])  # rows=1, k=2, banks=2, bank_size=4
    assert csb_columns(idx, 4).tolist() == [[0, 5, 2, 7]]


def test_wrong_shapes():
    v = np.ones((2, 1, 2))
    with pytest.raises(ValueError, match="bank_size"):
        csb_spmv(v, np.full((2, 1, 2), 4), np.ones(8), 4)
    with pytest.raises(ValueError, match="shape"):
        csb_spmv(v, np.zeros((2, 1, 2), int), np.ones(7), 4)
    with pytest.raises(ValueError, match="share"):
        csb_spmm(v, np.zeros((2, 2, 2), int), np.ones((8, 2)), 4)


def test_quick_bench_writes_json(tmp_path):
    res = run_kernel_bench(tmp_path, quick=True)
    data = json.loads((tmp_path / "kernels.json").read_text())
    assert data["kernels"] == json.loads(json.dumps(res["kernels"]))
    assert {r["batch"] for r in data["kernels"]} == {1, 16, 64}
    assert all(r["t_csb_s"] > 0 and r["t_csr_s"] > 0 and r["t_dense_s"] > 0 for r in data["kernels"])
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
