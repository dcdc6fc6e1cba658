import numpy as np
import pytest
from hwcosim.pruning.base import PatternError, get_pattern
from hwcosim.pruning.patterns.bank_balanced import BankBalanced
from hypothesis import given, settings
from hypothesis import strategies as st


def test_hand_worked_example_and_tie_break():
    w = np.array([[0.1, -0.9, 0.5, 0.5, 3.0, -2.0, 0.0, 1.0]])
    m = BankBalanced(banks=2, sparsity=0.5).mask(w)
    # bank 0: |-0.9| then a tie 0.5/0.5 -> the lower index (2) wins; bank 1: 3.0, -2.0
    assert m.astype(int).tolist() == [[0, 1, 1, 0, 1, 1, 0, 0]]


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 12), banks=st.integers(1, 6), size=st.integers(2, 16),
       frac=st.floats(0, 1), seed=st.integers(0, 2**31 - 1), ties=st.booleans())
def test_every_bank_keeps_exactly_k_largest(rows, banks, size, frac, seed, ties):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(rows, banks * size))
    if ties:
        w = np.round(w)  # many equal magnitudes
    sparsity = frac * (size - 1) / size
    pat = BankBalanced(banks=banks, sparsity=sparsity)
    m = pat.mask(w)
    pat.check(m)
    k = pat.k(banks * size)
    wb, mb = np.abs(w).reshape(rows, banks, size), m.reshape(rows, banks, size)
    assert (mb.sum(-1) == k).all()
    # every kept magnitude >= every pruned magnitude in the same bank
    kept_min = np.where(mb, wb, np.inf).min(-1)
    pruned_max = np.where(mb, -np.inf, wb).max(-1)
    assert (kept_min >= pruned_max).all()
    assert np.array_equal(m, pat.mask(w))  # deterministic


@pytest.mark.parametrize("kwargs,shape,match", [
    (dict(banks=3, sparsity=0.5), (4, 16), "do not split into 3 equal banks"),
    (dict(banks=4, sparsity=0.9), (4, 16), "impossible"),
    (dict(banks=4, sparsity=-0.1), (4, 16), "impossible"),
    (dict(banks=16, sparsity=0.5), (4, 16), "too small|nothing to prune"),
])
def test_wrong_inputs(kwargs, shape, match):
    with pytest.raises(PatternError, match=match):
        BankBalanced(**kwargs).mask(np.ones(shape))


def test_nan_and_inf_are_refused():
    w = np.ones((2, 8))
    w[1, 3] = np.nan
    with pytest.raises(PatternError, match="NaN/Inf"):
        BankBalanced(banks=2, sparsity=0.5).mask(w)
    w[1, 3] = np.inf
    with pytest.raises(PatternError, match="NaN/Inf"):
        BankBalanced(banks=2, sparsity=0.5).mask(w)


def test_registered_and_full_density():
    p = get_pattern("bbs", banks=2, sparsity=0.0)
    assert p.mask(np.arange(8.0).reshape(1, 8)).all()
    with pytest.raises(PatternError, match="unknown sparsity pattern"):
        get_pattern("nope")
