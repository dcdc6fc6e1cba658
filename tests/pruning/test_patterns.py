"""Sparsity patterns: invariants (hypothesis), brute-force references, equalities between
patterns (FSS = BBS, FSS = N:M, balanced = BBS) and refusals of bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hwcosim.pruning.base import PatternError, get_pattern, pattern_names, topk_mask
from hwcosim.pruning.patterns._select import topk_groups
from hwcosim.pruning.patterns.balanced import Balanced
from hwcosim.pruning.patterns.bank_balanced import BankBalanced
from hwcosim.pruning.patterns.block import Block
from hwcosim.pruning.patterns.fss import FSS, from_regions, to_regions
from hwcosim.pruning.patterns.nm import NM
from hwcosim.pruning.patterns.unstructured import Unstructured
from hwcosim.pruning.patterns.vector import Vector
from hypothesis import given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=60, deadline=None)


def weights(rows, cols, seed, ties):
    """Random weights; with ``ties`` drawn from a few values so that equal magnitudes abound."""
    rng = np.random.default_rng(seed)
    if ties:
        return rng.integers(-3, 4, size=(rows, cols)).astype(np.float64)
    return rng.standard_normal((rows, cols))


def brute_topk(values, k):
    """Indices of the k largest |v|, ties to the lower index, by a Python sort."""
    order = sorted(range(len(values)), key=lambda i: (-abs(values[i]), i))
    return set(order[:k])


def brute_group_mask(groups2d, k):
    out = np.zeros(groups2d.shape, dtype=bool)
    for g in range(groups2d.shape[0]):
        for i in brute_topk(list(groups2d[g]), k):
            out[g, i] = True
    return out


def test_init_registry():
    assert {"unstructured", "block", "vector", "balanced", "nm", "fss", "bbs"} <= set(pattern_names())
    p = get_pattern("fss", region=[2, 4], n=3)
    assert p.region == (2, 4) and p.describe() == {
        "pattern": "fss",
        "region": (2, 4),
        "n": 3,
        "sparsity": None,
    }


# ---------------------------------------------------------------- selection helper


@SETTINGS
@given(g=st.integers(1, 40), n=st.integers(1, 40), seed=st.integers(0, 2**16), ties=st.booleans())
def test_topk_groups_matches_stable_sort(g, n, seed, ties):
    w = weights(g, n, seed, ties)
    for k in {1, max(1, n // 2), n}:
        m = topk_groups(w, k)
        assert (m == topk_mask(w, k)).all()
        assert (m == brute_group_mask(w, k)).all()


def test_topk_groups_all_ties_goes_to_lower_index():
    w = np.ones((3, 8))
    w[1, 5] = -2.0
    m = topk_groups(w, 3)
    assert m[0].tolist() == [True, True, True, False, False, False, False, False]
    assert np.flatnonzero(m[1]).tolist() == [0, 1, 5]


# ---------------------------------------------------------------- invariants per pattern


@SETTINGS
@given(
    rows=st.integers(1, 12),
    cols=st.integers(1, 12),
    s=st.floats(0, 0.95),
    seed=st.integers(0, 999),
    ties=st.booleans(),
)
def test_unstructured_exact_count_and_brute_force(rows, cols, s, seed, ties):
    w = weights(rows, cols, seed, ties)
    size = rows * cols
    if s > (size - 1) / size + 1e-9:
        with pytest.raises(PatternError):
            Unstructured(s).mask(w)
        return
    p = Unstructured(sparsity=s)
    m = p.mask(w)
    p.check(m)
    k = max(1, round(size * (1 - s)))
    assert m.sum() == k
    assert set(np.flatnonzero(m)) == brute_topk(list(w.ravel()), k)


def test_unstructured_any_rank():
    w = np.arange(24, dtype=float).reshape(2, 3, 4)
    m = Unstructured(0.75).mask(w)
    assert m.shape == w.shape and np.flatnonzero(m).tolist() == list(range(18, 24))


@SETTINGS
@given(
    gr=st.integers(1, 5),
    gc=st.integers(1, 5),
    br=st.integers(1, 4),
    bc=st.integers(1, 4),
    s=st.sampled_from([0.0, 0.25, 0.5, 0.75]),
    seed=st.integers(0, 999),
    norm=st.sampled_from(["l1", "l2"]),
)
def test_block_invariant_and_reference(gr, gc, br, bc, s, seed, norm):
    if (br, bc) == (1, 1) or gr * gc < 2 or s > (gr * gc - 1) / (gr * gc):
        return
    w = weights(gr * br, gc * bc, seed, False)
    p = Block(block=(br, bc), sparsity=s, norm=norm)
    m = p.mask(w)
    p.check(m)
    # reference: score each block with an explicit loop, then the brute top-k
    scores = [
        np.abs(w[i * br : (i + 1) * br, j * bc : (j + 1) * bc]).sum()
        if norm == "l1"
        else np.sqrt((w[i * br : (i + 1) * br, j * bc : (j + 1) * bc] ** 2).sum())
        for i in range(gr)
        for j in range(gc)
    ]
    keep = brute_topk(scores, max(1, round(gr * gc * (1 - s))))
    for b in range(gr * gc):
        i, j = divmod(b, gc)
        assert m[i * br : (i + 1) * br, j * bc : (j + 1) * bc].all() == (b in keep)
        assert m[i * br : (i + 1) * br, j * bc : (j + 1) * bc].any() == (b in keep)


@SETTINGS
@given(
    rows=st.integers(1, 8),
    nv=st.integers(1, 6),
    v=st.integers(2, 5),
    orient=st.sampled_from(["row", "col"]),
    seed=st.integers(0, 999),
)
def test_vector_invariant(rows, nv, v, orient, seed):
    shape = (rows, nv * v) if orient == "row" else (nv * v, rows)
    if rows * nv < 2:
        return
    w = weights(*shape, seed, False)
    p = Vector(length=v, orient=orient, sparsity=0.5)
    m = p.mask(w)
    p.check(m)
    tiles = m.reshape(rows, nv, v) if orient == "row" else m.T.reshape(rows, nv, v)
    assert (tiles.all(-1) == tiles.any(-1)).all()
    # equals block sparsity with the corresponding tile
    assert (m == Block(block=p.tile, sparsity=0.5).mask(w)).all()


@SETTINGS
@given(
    rows=st.integers(1, 8),
    nb=st.integers(1, 6),
    block=st.integers(2, 12),
    s=st.floats(0, 0.9),
    seed=st.integers(0, 999),
    ties=st.booleans(),
)
def test_balanced_equals_bbs_with_bank_size_block(rows, nb, block, s, seed, ties):
    if s > (block - 1) / block + 1e-9:
        with pytest.raises(PatternError):
            Balanced(block=block, sparsity=s)
        return
    w = weights(rows, nb * block, seed, ties)
    p = Balanced(block=block, sparsity=s)
    m = p.mask(w)
    p.check(m)
    bbs = BankBalanced(banks=nb, sparsity=s)
    assert (m == bbs.mask(w)).all()
    bbs.check(m)
    counts = m.reshape(rows, nb, block).sum(-1)
    assert (counts == p.k()).all()


@SETTINGS
@given(
    rows=st.integers(1, 8),
    groups=st.integers(1, 8),
    nm=st.sampled_from([(1, 2), (2, 4), (1, 4), (4, 8), (3, 8)]),
    seed=st.integers(0, 999),
    ties=st.booleans(),
)
def test_nm_invariant_and_reference(rows, groups, nm, seed, ties):
    n, m_ = nm
    w = weights(rows, groups * m_, seed, ties)
    p = NM(n=n, m=m_)
    m = p.mask(w)
    p.check(m)
    assert (m.reshape(rows, groups, m_).sum(-1) == n).all()
    assert (m.reshape(-1, m_) == brute_group_mask(w.reshape(-1, m_), n)).all()


@SETTINGS
@given(
    gr=st.integers(1, 4),
    gc=st.integers(1, 4),
    rh=st.integers(1, 4),
    rw=st.integers(1, 6),
    data=st.data(),
    seed=st.integers(0, 999),
    ties=st.booleans(),
)
def test_fss_invariant_and_reference(gr, gc, rh, rw, data, seed, ties):
    if rh * rw < 2:
        with pytest.raises(PatternError):
            FSS(region=(rh, rw), n=1)
        return
    n = data.draw(st.integers(1, rh * rw))
    w = weights(gr * rh, gc * rw, seed, ties)
    p = FSS(region=(rh, rw), n=n)
    m = p.mask(w)
    p.check(m)
    for i in range(gr):
        for j in range(gc):
            reg_w = w[i * rh : (i + 1) * rh, j * rw : (j + 1) * rw].ravel()
            reg_m = m[i * rh : (i + 1) * rh, j * rw : (j + 1) * rw].ravel()
            assert set(np.flatnonzero(reg_m)) == brute_topk(list(reg_w), n)


def test_regions_roundtrip_and_order():
    a = np.arange(4 * 6).reshape(4, 6)
    t = to_regions(a, (2, 3))
    assert t.shape == (2, 2, 6)
    assert t[0, 1].tolist() == [3, 4, 5, 9, 10, 11]  # region (0, 1), row-major inside
    assert (from_regions(t, (2, 3)) == a).all()


# ---------------------------------------------------------------- equalities FSS = BBS, FSS = N:M


@SETTINGS
@given(
    rows=st.integers(1, 10),
    banks=st.integers(1, 6),
    bank=st.integers(2, 16),
    s=st.floats(0, 0.93),
    seed=st.integers(0, 999),
    ties=st.booleans(),
)
def test_fss_row_region_equals_bbs(rows, banks, bank, s, seed, ties):
    if s > (bank - 1) / bank + 1e-9:
        return
    w = weights(rows, banks * bank, seed, ties)
    fss = FSS(region=(1, bank), sparsity=s)
    bbs = BankBalanced(banks=banks, sparsity=s)
    m = fss.mask(w)
    assert (m == bbs.mask(w)).all()
    bbs.check(m)


@SETTINGS
@given(
    rows=st.integers(1, 10),
    groups=st.integers(1, 8),
    m_=st.integers(2, 9),
    data=st.data(),
    seed=st.integers(0, 999),
    ties=st.booleans(),
)
def test_fss_row_region_equals_nm(rows, groups, m_, data, seed, ties):
    n = data.draw(st.integers(1, m_))
    w = weights(rows, groups * m_, seed, ties)
    mf = FSS(region=(1, m_), n=n).mask(w)
    mn = NM(n=n, m=m_).mask(w)
    assert (mf == mn).all()
    NM(n=n, m=m_).check(mf)


# ---------------------------------------------------------------- check() refuses broken masks


def test_check_refuses_broken_masks():
    w = weights(8, 16, 1, False)
    cases = [
        (NM(2, 4), "expected exactly 2"),
        (FSS(region=(2, 4), n=3), "region"),
        (Balanced(block=8, sparsity=0.5), "not balanced"),
        (Block(block=(2, 4), sparsity=0.5), "partly kept"),
        (Vector(length=4, sparsity=0.5), "partly kept"),
        (Unstructured(0.5), "expected"),
    ]
    for p, msg in cases:
        m = p.mask(w)
        p.check(m)
        bad = m.copy()
        i = np.flatnonzero(bad.ravel())[0]
        bad.flat[i] = False
        with pytest.raises(PatternError, match=msg):
            p.check(bad)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "make, msg",
    [
        (lambda: NM(n=5, m=4), "cannot exceed"),
        (lambda: NM(n=0, m=4), ">= 1"),
        (lambda: NM(n=1, m=1), ">= 2"),
        (lambda: FSS(region=(1, 8)), "exactly one of"),
        (lambda: FSS(region=(1, 8), n=2, sparsity=0.5), "exactly one of"),
        (lambda: FSS(region=(1, 1), n=1), "1x1"),
        (lambda: FSS(region="2by3", n=1), "RxC"),
        (lambda: FSS(region=(2, 4), n=9), "exceeds"),
        (lambda: FSS(region=(1, 4), sparsity=0.9), "impossible"),
        (lambda: Balanced(block=4, sparsity=0.9), "impossible"),
        (lambda: Balanced(block=1), ">= 2"),
        (lambda: Unstructured(sparsity=1.0), r"\[0, 1\)"),
        (lambda: Unstructured(sparsity=float("nan")), r"\[0, 1\)"),
        (lambda: Block(block=(1, 1)), "unstructured"),
        (lambda: Block(norm="linf"), "norm"),
        (lambda: Vector(orient="diag"), "orient"),
        (lambda: get_pattern("diagonal"), "unknown sparsity pattern"),
        (lambda: get_pattern("nm", banks=4), "unexpected keyword"),
    ],
)
def test_wrong_params(make, msg):
    with pytest.raises(PatternError, match=msg):
        make()


@pytest.mark.parametrize(
    "p",
    [
        Unstructured(0.5),
        Block((2, 2), 0.5),
        Vector(2, "row", 0.5),
        Balanced(4, 0.5),
        NM(2, 4),
        FSS((2, 2), n=2),
    ],
)
def test_wrong_weights(p):
    w = np.ones((4, 8))
    w[1, 2] = np.nan
    with pytest.raises(PatternError, match="NaN"):
        p.mask(w)
    with pytest.raises(PatternError, match="numeric"):
        p.mask(np.array([["a", "b"], ["c", "d"]]))
    if not isinstance(p, Unstructured):
        with pytest.raises(PatternError, match="2-D"):
            p.mask(np.ones(8))
        with pytest.raises(PatternError, match="pad"):
            p.mask(np.ones((4, 7)))
