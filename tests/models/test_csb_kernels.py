"""CSB kernels (models.csb_kernels) against dense references: compiled (serial and parallel) and the
numpy path, float and exact integer (the tests of the former numpy module pruning/kernels.py live
here too)."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.models.bbs.spmxv import BBSParams, spmxv
from hwcosim.models.csb_kernels import (
    BACKENDS,
    HAVE_NUMBA,
    TINY_WORK,
    CSBPacked,
    _numpy_spmm,
    csb_columns,
    index_dtype,
    spmm,
    spmm_int,
    spmv,
)
from hwcosim.models.fixedpoint import Q, quantize, requantize
from hwcosim.pruning.formats import csb

#: the paths every check runs on (numba only where it is installed; auto picks numpy for tiny products)
PATHS = ("auto", "numpy") + (("numba",) if HAVE_NUMBA else ())


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


# ---- from CSB matrices (pruning.formats.csb), both paths, W @ X column-major -------------------
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
    k = CSBPacked.from_csb(m, dtype=np.float64)
    assert k.shape == (rows, cols)
    for path in PATHS:
        assert np.allclose(k.matmul(X, backend=path), ref), path
        assert np.allclose(k.matmul(X[:, 0], backend=path), ref[:, 0]), path
        assert np.allclose(spmm(values, m.indices, X.T, m.bank_size, dtype=np.float64, backend=path), ref.T), path
        assert np.allclose(spmv(values, m.indices, X[:, 0], m.bank_size, dtype=np.float64, backend=path),
                           ref[:, 0]), path
    assert np.allclose(k @ X, ref)
    cols_np = csb_columns(m.indices, m.bank_size)
    assert np.allclose(_numpy_spmm(k.v, cols_np, X, chunk_elems=1), ref)  # one row per chunk


@pytest.mark.parametrize("path", PATHS)
def test_exact_integer_matches_golden_model(path):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((12, 64)) * 0.5
    m = csb.encode(w, 4, sparsity=0.75, fmt=Q(2, 6))
    p = BBSParams(
        rows=12, cols=64, banks=4, k=m.k, pes=1, weight_fmt=Q(2, 6), vec_fmt=Q(4, 12), out_fmt=Q(8, 8)
    )
    x = rng.uniform(-2, 2, 64)
    xr = quantize(x, p.vec_fmt)
    acc = CSBPacked(m.values, m.indices, m.bank_size, backend=path).spmv(xr)
    assert acc.dtype == np.int64
    assert (acc == m.to_dense_raw() @ xr).all()
    # the golden model requantises the same exact accumulator
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
        CSBPacked(v, np.full((2, 1, 2), 4), 4)
    with pytest.raises(ValueError, match="shape"):
        CSBPacked(v, np.zeros((2, 1, 2), int), 4).spmv(np.ones(7))
    with pytest.raises(ValueError, match="shape"):
        CSBPacked(v, np.zeros((2, 1, 2), int), 4).matmul(np.ones((7, 2)))
    with pytest.raises(ValueError, match="share"):
        CSBPacked(v, np.zeros((2, 2, 2), int), 4)
    with pytest.raises(ValueError, match="backend"):
        CSBPacked(v, np.zeros((2, 1, 2), int), 4, backend="cuda")
    with pytest.raises(ValueError, match="float32 or float64"):
        CSBPacked(v, np.zeros((2, 1, 2), int), 4, dtype=np.float16)


def test_backend_choice():
    """auto: numpy below TINY_WORK multiply-adds (or without numba), compiled above; both give the same."""
    rng = np.random.default_rng(3)
    v, idx, dense = _csb(64, 8, 16, 4, rng)              # 2048 nonzeros
    m = CSBPacked(v, idx, 16)
    assert m.nnz >= TINY_WORK and set(BACKENDS) == {"auto", "numba", "numpy"}
    assert m._use_numpy(1, None) is not HAVE_NUMBA
    assert m._use_numpy(1, "numpy") and m._use_numpy(1, "numba") is not HAVE_NUMBA
    small = CSBPacked(v[:2], idx[:2], 16)                # 64 nonzeros: tiny
    assert small._use_numpy(1, None) and small._use_numpy(TINY_WORK // small.nnz - 1, None)
    x = rng.normal(size=128).astype(np.float32)
    X = rng.normal(size=(3, 128)).astype(np.float32)
    for path in PATHS:
        np.testing.assert_allclose(m.spmv(x, backend=path), dense @ x, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(m.spmm(X, backend=path), X @ dense.T, rtol=1e-5, atol=1e-5)
    assert m.spmv(x).dtype == np.float32 and CSBPacked(v, idx, 16, dtype=np.float64).spmv(x).dtype == np.float64
