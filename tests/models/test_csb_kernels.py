"""Compiled CSB kernels (models.csb_kernels) against dense references, serial and parallel."""

from __future__ import annotations

import numpy as np
import pytest

from hwcosim.models.csb_kernels import CSBPacked, index_dtype, spmm, spmm_int, spmv


def _csb(rows, banks, bank_size, k, rng, integer=False):
    idx = np.stack([np.stack([rng.choice(bank_size, size=k, replace=False) for _ in range(banks)], axis=1)
                    for _ in range(rows)])                     # (rows, k, banks), distinct per bank
    v = rng.integers(-128, 128, size=idx.shape) if integer else rng.normal(size=idx.shape).astype(np.float32)
    dense = np.zeros((rows, banks * bank_size), dtype=np.float64)
    for r in range(rows):
        for j in range(k):
            for b in range(banks):
                dense[r, b * bank_size + idx[r, j, b]] = v[r, j, b]
    return v, idx, dense


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("bank_size", [16, 300])
def test_float_spmv_spmm_match_dense(threads, bank_size):
    rng = np.random.default_rng(bank_size + threads)
    v, idx, dense = _csb(37, 4, bank_size, 3, rng)
    x = rng.normal(size=dense.shape[1]).astype(np.float32)
    X = rng.normal(size=(5, dense.shape[1])).astype(np.float32)
    np.testing.assert_allclose(spmv(v, idx, x, bank_size, threads), dense @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(spmm(v, idx, X, bank_size, threads), X @ dense.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_integer_path_is_exact(threads):
    rng = np.random.default_rng(7)
    v, idx, dense = _csb(20, 8, 16, 2, rng, integer=True)
    X = rng.integers(-(1 << 15), 1 << 15, size=(4, 128))
    want = X @ dense.astype(np.int64).T
    got = CSBPacked(v, idx, 16).spmm(X, threads)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert np.array_equal(spmm_int(v, idx, X, 16), want)
    assert np.array_equal(CSBPacked(v, idx, 16).spmv(X[0], threads), want[0])


def test_packed_layout_is_smaller_than_csr():
    rng = np.random.default_rng(1)
    v, idx, _ = _csb(8, 4, 64, 4, rng)
    m = CSBPacked(v, idx, 64)
    assert m.idx.dtype == np.uint8 and m.nbytes == 5 * m.nnz   # 4 B value + 1 B in-bank index
    assert m.col.dtype == np.uint16 and m.compute_nbytes == 6 * m.nnz
    assert index_dtype(256) == np.uint8 and index_dtype(257) == np.uint16


def test_wrong_inputs():
    rng = np.random.default_rng(2)
    v, idx, _ = _csb(4, 2, 8, 2, rng)
    with pytest.raises(ValueError, match="share"):
        CSBPacked(v, idx[:, :1], 8)
    with pytest.raises(ValueError, match="in-bank indices"):
        CSBPacked(v, idx + 8, 8)
    with pytest.raises(ValueError, match="shape"):
        CSBPacked(v, idx, 8).spmv(np.zeros(15, np.float32))
    with pytest.raises(ValueError, match="integer"):
        CSBPacked(v.astype(np.int64), idx, 8).spmv(np.zeros(16))


def test_study_sizes_bench_section():
    """The csb_kernels bench's record of the golden/float products at the study sizes (exact integer)."""
    from hwcosim.pruning.csb_bench import study_sizes

    res = study_sizes(repeats=1)
    assert res["matrix"]["rows"] == 256 and res["matrix"]["cols"] == 72 and len(res["load_average"]) == 3
    assert [r["batch"] for r in res["rows"]] == [32, 360]
    for r in res["rows"]:
        assert all(r[k] > 0 for k in ("int_compiled_packed_s", "int_numpy_einsum_s", "float64_dense_blas_1t_s"))
