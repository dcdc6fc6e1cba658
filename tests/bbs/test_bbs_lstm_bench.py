"""The model-only parts of the BBS LSTM bench (cosim.designs.bbs.lstm_bench): cycle and GOPS arithmetic,
the CSR baseline's row assignment, the quantisation-error summary, and the BBS mask against the
pruning toolkit's bank-balanced pattern. Fast; no simulator, no Yosys."""

import numpy as np
import pytest
from hwcosim.cosim.designs.bbs.lstm_bench import (
    CLOCK_MHZ,
    PAPER_GOPS,
    csr_vs_bbs,
    gops_1024,
    pe_bank_table,
    quantisation_error,
)
from hwcosim.models.bbs.lstm import STEP_GAP, LSTMParams, bbs_mask, to_logical, to_physical


def _eff_gops(H, I, cycles, clock_mhz=CLOCK_MHZ):
    """Dense-equivalent ops of one step (2 per weight of the fused 4H x (I+H) matrix) over its time."""
    return 2 * 4 * H * (I + H) / (cycles / (clock_mhz * 1e6)) / 1e9


def test_pe_bank_table_arithmetic():
    rows = pe_bank_table(256, 256, 0.875, pes=(4, 16), banks=(8, 16))
    assert [(r["P"], r["B"]) for r in rows] == [(4, 8), (4, 16), (16, 8), (16, 16)]
    for r in rows:
        S = (256 + 256) // r["B"]                       # bank size: I + H columns over B banks
        k = round(S * 0.125)
        ideal = 4 * 256 // r["P"] * k                   # rows / P output groups x k beats each
        assert (r["bank_size"], r["k"], r["step_ideal"]) == (S, k, ideal)
        assert r["step_cycles"] == ideal + STEP_GAP     # U = P/4 <= B here: no width-converter beats
        assert r["utilisation"] == pytest.approx(ideal / (ideal + STEP_GAP))
        assert r["gops_effective_gops"] == pytest.approx(_eff_gops(256, 256, r["step_cycles"]))
        assert r["gops_sparse_gops"] == pytest.approx(r["gops_effective_gops"] * k / S)
    r16 = rows[-1]
    assert (r16["k"], r16["step_ideal"], r16["step_cycles"]) == (4, 256, 275)   # the 93.1 % point
    assert r16["utilisation"] >= 0.9


def test_pe_bank_table_reports_unbuildable_points():
    # H = 64 with P = 16 -> U = 4 units per beat; B = 16 -> 4 divides 16: buildable. I = 8, B = 16 pads x to 16.
    rows = pe_bank_table(64, 8, 0.875, pes=(16,), banks=(16,))
    assert rows[0]["bank_size"] == (16 + 64) // 16 and rows[0]["k"] == 1
    # H = 36 does not divide by B = 8: the row says why instead of a figure
    bad = pe_bank_table(36, 8, 0.875, pes=(4,), banks=(8,))
    assert "skipped" in bad[0] and "divide by banks" in bad[0]["skipped"]


def test_gops_1024_arithmetic():
    g = gops_1024()
    H = I = 1024
    S = (I + H) // 16
    k = round(S * 0.125)
    cycles = 4 * H // 16 * k + STEP_GAP
    assert (g["k"], g["bank_size"], g["step_cycles"], g["multipliers"]) == (k, S, cycles, 256)
    assert g["effective_gops"] == pytest.approx(_eff_gops(H, I, cycles))
    assert g["dense_ops_per_step"] == 2 * 4 * H * (I + H)
    assert g["sparse_ops_per_step"] == 2 * 4 * H * k * 16
    assert g["utilisation"] == pytest.approx(4 * H // 16 * k / cycles)
    # paper: 750.9 GOPS dense-equivalent = stored-nonzero MACs per cycle at 200 MHz x (1 - sparsity)
    assert g["paper_sparse_mac_per_cycle"] == pytest.approx(PAPER_GOPS * 1e9 / 2 / 200e6 / 8)
    assert g["ratio_to_paper"] == pytest.approx(g["effective_gops"] / PAPER_GOPS)
    # halving the clock halves the figure; the formula is linear in 1 / cycles
    assert gops_1024(pes=8)["effective_gops"] == pytest.approx(_eff_gops(H, I, 4 * H // 8 * k + STEP_GAP))


def test_csr_vs_bbs_uses_the_engine_row_order():
    """The CSR figure must be computed on the matrix the CSR RTL gets: physical order (row 4u+q is
    gate q of unit u), rows dealt to PEs r % M. Logical order (gate-major) gives other loads."""
    from hwcosim.models.bbs.csr import CSRCycleModel, CSRParams, encode

    p = LSTMParams(input_size=8, hidden=16, banks=4, k=1, pes=4)
    M = p.pes * p.banks                                      # 16 single-multiplier PEs
    mask = np.zeros((p.rows, p.input_size + p.hidden), dtype=bool)
    mask[:p.hidden, :6] = True                               # gate i rows (logical 0..15) are heavy
    mask[p.hidden:, 0] = True
    r = csr_vs_bbs(p, mask, "synthetic")
    # physical order interleaves the gates, so the heavy i-rows (4u) spread over PEs 0, 4, 8, 12
    mp = to_physical(p, mask.astype(float)).astype(np.int64)
    cp = CSRParams(rows=p.rows, cols=p.cols, mults=M, lanes=p.banks)
    want = CSRCycleModel(cp, encode(cp, mp)).per_product()
    assert r["csr_compute_cycles"] == want == 4 * 6          # 4 heavy rows of 6 on each of 4 PEs
    # in logical order rows 0..15 would sit one per PE: 6 + 3 * 1 = 9 cycles; not what the RTL sees
    assert r["csr_compute_cycles"] != 9
    assert r["csr_step_cycles"] == want + STEP_GAP and r["bbs_step_cycles"] == p.bbs.weight_beats + STEP_GAP
    assert r["speedup_bbs_over_csr"] == pytest.approx(r["csr_step_cycles"] / r["bbs_step_cycles"])
    assert r["nnz_csr"] == int(mask.sum()) and r["weights"] == "synthetic"


def test_csr_vs_bbs_model_equals_csr_encoding_on_trained_digits_layer():
    """The bench's CSR figure on the trained digits layer equals the cycle model of the exact
    entry lists the CSR RTL runs (tests/bbs/test_bbs_csr.py checks those against the RTL)."""
    from hwcosim.cosim.designs.bbs.csr import digits_layers
    from hwcosim.cosim.designs.bbs.lstm import trained_pruned_lstm
    from hwcosim.models.bbs.csr import CSRCycleModel, encode

    p, _, cp, wq, _ = digits_layers()
    _, _, _, mask_u, _ = trained_pruned_lstm(banks=8, k=2, pes=8, finetune_epochs=0, pattern="unstructured")
    r = csr_vs_bbs(p, mask_u)
    e = encode(cp, wq)
    assert r["nnz_csr"] == e.nnz == r["nnz_bbs"]
    assert r["csr_compute_cycles"] == CSRCycleModel(cp, e).per_product() == int(e.loads.max())
    assert r["csr_pe_load_min"] == int(e.loads.min())
    assert r["bbs_compute_cycles"] == r["csr_ideal"] < r["csr_compute_cycles"]


def test_quantisation_error_summary():
    hf = np.zeros((2, 3, 4))
    hg = hf.copy()
    hg[1, 2, 3] = -0.5
    hg[0, 0, 0] = 0.25
    q = quantisation_error(hg, hf)
    assert q["max_abs"] == 0.5 and q["mean_abs"] == pytest.approx(0.75 / 24)
    assert q["max_abs_last_step"] == 0.5 and q["mean_abs_last_step"] == pytest.approx(0.5 / 8)
    assert (q["n_seq"], q["seq_len"], q["hidden"]) == (2, 3, 4)


@pytest.mark.parametrize("input_size,hidden,banks,pes,k", [(8, 64, 8, 8, 2), (5, 16, 4, 8, 1), (16, 32, 16, 16, 3),
                                                           (3, 12, 4, 4, 2)])
def test_bbs_mask_equals_pruning_bank_balanced_pattern(input_size, hidden, banks, pes, k):
    """hwcosim.models.bbs.lstm.bbs_mask (numpy, no pruning import) keeps exactly the weights that
    pruning's 'bbs' pattern keeps on the physical matrix, including ties (coarse weights) and
    the zero padding columns of x."""
    from hwcosim.pruning.base import get_pattern

    p = LSTMParams(input_size=input_size, hidden=hidden, banks=banks, k=k, pes=pes)
    rng = np.random.default_rng(input_size * 100 + hidden)
    sparsity = 1 - k / p.bank_size
    pat = get_pattern("bbs", banks=banks, sparsity=sparsity)
    for w in (rng.normal(size=(p.rows, input_size + hidden)),
              rng.integers(-2, 3, size=(p.rows, input_size + hidden)).astype(float)):  # many ties
        ours = bbs_mask(p, w, sparsity)
        theirs = pat.mask(to_physical(p, w))
        pat.check(theirs)
        assert ours.shape == w.shape and np.array_equal(ours, to_logical(p, theirs))
    # the real-valued case keeps no padding column, so there the physical masks are equal outright
    w = rng.normal(size=(p.rows, input_size + hidden))
    assert np.array_equal(to_physical(p, bbs_mask(p, w, sparsity).astype(float)).astype(bool),
                          pat.mask(to_physical(p, w)))
