"""Row-wise CSR SpMxV baseline (ESE-style): golden model, RTL vs golden word by word, and the
measured comparison with the BBS engine on the same trained digits layer."""

import json

import numpy as np
import pytest
from hwcosim.models.bbs.csr import CSRCycleModel, CSRParams, decode, encode, pack_weight_beats, spmxv_csr, spmxv_entries
from hwcosim.models.fixedpoint import Q


def _case(rows, cols, mults, lanes, density, n, seed, empty_row=True):
    rng = np.random.default_rng(seed)
    p = CSRParams(rows=rows, cols=cols, mults=mults, lanes=lanes)
    w = rng.integers(p.weight_fmt.min_raw, p.weight_fmt.max_raw + 1, size=(rows, cols))
    w = w * (rng.random((rows, cols)) < density)
    if empty_row:
        w[1] = 0
    w[0, :3] = [p.weight_fmt.min_raw, p.weight_fmt.max_raw, -1]
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n, cols))
    xs[0, :3] = [p.vec_fmt.min_raw, p.vec_fmt.max_raw, -1]
    return p, w, xs


def test_init_and_wrong_params():
    p = CSRParams(rows=16, cols=32, mults=4, lanes=4)
    assert (p.col_bits, p.lane_width, p.row_groups, p.vector_beats) == (5, 15, 4, 8)
    assert CSRParams.from_dict(p.to_dict()) == p
    for kw, msg in (({"rows": 10}, "do not split over"), ({"lanes": 3}, "power of two"),
                    ({"lanes": 64}, "vector beats"), ({"mults": 0}, "positive"), ({"out_fmt": 3}, "Q")):
        with pytest.raises(ValueError, match=msg):
            CSRParams(**{**dict(rows=16, cols=32, mults=4, lanes=4), **kw})


def test_encode_round_trips_and_entry_walk_equals_dense_golden():
    p, w, xs = _case(16, 32, 4, 4, 0.3, 3, seed=1)
    e = encode(p, w)
    assert np.array_equal(decode(p, e), w)
    # an empty row costs one entry; loads are per-PE list lengths
    nnz_row = np.count_nonzero(w, axis=1)
    want = np.bincount(np.arange(16) % 4, weights=np.maximum(nnz_row, 1)).astype(int)
    assert np.array_equal(e.loads, want) and e.depth == want.max() and e.nnz == nnz_row.sum()
    assert np.array_equal(spmxv_entries(p, e, xs), spmxv_csr(p, w, xs))
    assert len(pack_weight_beats(p, e)) == e.depth
    assert pack_weight_beats(p, e)[-1] >> (4 * p.lane_width) == 1  # end-of-product bit


def test_csr_equals_bbs_golden_on_a_bank_balanced_matrix():
    """Same arithmetic: on one (BBS-pruned) matrix the two golden models give the same words."""
    from hwcosim.models.bbs.spmxv import BBSParams, spmxv
    from hwcosim.pruning.formats.csb import encode as csb_encode

    rng = np.random.default_rng(2)
    m = csb_encode(rng.normal(0, 0.6, size=(16, 32)), 4, 0.75, fmt=Q(2, 6))
    bp = BBSParams(rows=16, cols=32, banks=4, k=m.k, pes=4, weight_fmt=m.fmt)
    dense = np.zeros((16, 4, 8), dtype=np.int64)
    np.put_along_axis(dense, m.indices.transpose(0, 2, 1), m.values.transpose(0, 2, 1), axis=-1)
    cp = CSRParams(rows=16, cols=32, mults=16, lanes=4, weight_fmt=m.fmt)
    xs = rng.integers(bp.vec_fmt.min_raw, bp.vec_fmt.max_raw + 1, size=(2, 32))
    assert np.array_equal(spmxv_csr(cp, dense.reshape(16, 32), xs), spmxv(bp, m.values, m.indices, xs))


def test_wrong_inputs():
    p = CSRParams(rows=8, cols=16, mults=4, lanes=4)
    with pytest.raises(ValueError, match="shape"):
        encode(p, np.zeros((8, 8), dtype=np.int64))
    with pytest.raises(ValueError, match="raw integers"):
        encode(p, np.zeros((8, 16)))
    with pytest.raises(ValueError, match="exceed the weight format"):
        encode(p, np.full((8, 16), 1000))


# --- RTL ------------------------------------------------------------------------------------

SIM_CONFIGS = [(16, 32, 4, 4, 0.3)]  # one small build; the digits test covers M=64, L=8


def _report(tmp_path, name, rec):
    out = tmp_path.parent.parent / "reports"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"bbs_csr_{name}.json").write_text(json.dumps(rec, indent=1))
    print(f"\n{name}: {rec}")


@pytest.mark.sim
@pytest.mark.parametrize("rows,cols,mults,lanes,density", SIM_CONFIGS)
def test_csr_no_stalls_hits_cycle_model(tmp_path, rows, cols, mults, lanes, density):
    from hwcosim.cosim.designs.bbs.csr import run_csr

    p, w, xs = _case(rows, cols, mults, lanes, density, n=3, seed=rows)
    mt = run_csr(p, w, xs, test_dir=tmp_path).metrics
    e = encode(p, w)
    assert mt["mismatches"] == 0
    assert mt["cycles"] == CSRCycleModel(p, e).expected(3) == mt["dut_cycles"], mt
    assert mt["product_intervals"] == [CSRCycleModel(p, e).per_product()] * 2
    assert mt["dut_stall_out"] == 0


@pytest.mark.sim
@pytest.mark.parametrize("p_idle,p_stall", [(0.3, 0.0), (0.4, 0.7)])
def test_csr_with_idle_and_backpressure(tmp_path, p_idle, p_stall):
    from hwcosim.cosim.designs.bbs.csr import run_csr

    p, w, xs = _case(*SIM_CONFIGS[0], n=4, seed=9)
    mt = run_csr(p, w, xs, p_idle=p_idle, p_stall=p_stall, seed=int(10 * p_idle + 100 * p_stall),
                 test_dir=tmp_path).metrics
    assert mt["mismatches"] == 0
    assert mt["cycles"] >= CSRCycleModel(p, encode(p, w)).expected(4)
    if p_stall:
        assert mt["dut_stall_out"] > 0


@pytest.mark.sim
def test_a_wrong_golden_word_fails_the_simulation(tmp_path, monkeypatch):
    import hwcosim.cosim.designs.bbs.csr as cc
    from hwcosim.cosim.flow.runner import SimFailure

    p, w, xs = _case(*SIM_CONFIGS[0], n=1, seed=5)
    real = cc.spmxv_csr

    def off_by_one(*a, **k):
        y = real(*a, **k).copy()
        y[0, 6] += 1
        return y

    monkeypatch.setattr(cc, "spmxv_csr", off_by_one)
    with pytest.raises(SimFailure, match=r"1 of 16 result words differ.*\(0, 6,"):
        cc.run_csr(p, w, xs, test_dir=tmp_path)


@pytest.mark.sim
def test_csr_vs_bbs_on_trained_digits_layer(tmp_path):
    """Same trained layer, same 64 multipliers, same 4096 nonzeros: the BBS engine takes the
    ideal 64 cycles per product; the unstructured CSR engine waits for its most loaded PE."""
    from hwcosim.cosim.designs.bbs.csr import csr_vs_bbs_rtl

    r = csr_vs_bbs_rtl(n_vectors=3, out_dir=tmp_path)
    assert r["mismatches"] == 0 and r["nnz_bbs"] == r["nnz_csr"] == 4096
    assert r["bbs_cycles_per_product_rtl"] == r["ideal_cycles_per_product"] == 64
    assert r["csr_cycles_per_product_rtl"] == r["csr_cycles_per_product_model"] == r["csr"]["pe_load_max"]
    assert r["bbs_total_cycles_rtl"] == r["bbs_total_expected"]
    assert r["csr_total_cycles_rtl"] == r["csr_total_expected"]
    assert r["csr_over_bbs_cycles"] > 1.2 and r["csr_mult_utilisation_rtl"] < 0.85
    # the LSTM bench's weight-free CSR figure on the same trained layer is the RTL's, exactly
    from hwcosim.cosim.designs.bbs.csr import digits_layers
    from hwcosim.cosim.designs.bbs.lstm import trained_pruned_lstm
    from hwcosim.cosim.designs.bbs.lstm_bench import csr_vs_bbs

    p = digits_layers(n_vectors=1)[0]
    mask_u = trained_pruned_lstm(banks=8, k=2, pes=8, finetune_epochs=0, pattern="unstructured")[3]
    assert csr_vs_bbs(p, mask_u)["csr_compute_cycles"] == r["csr_cycles_per_product_rtl"]
    _report(tmp_path, "vs_bbs_digits", r)


@pytest.mark.parametrize("rows,cols,mults,lanes,density,seed", [(16, 32, 4, 4, 0.3, 1), (64, 24, 16, 8, 0.1, 2),
                                                                 (8, 64, 8, 8, 0.02, 3)])
def test_cycles_from_mask_equals_encoded_cycle_model(rows, cols, mults, lanes, density, seed):
    """The weight-free model (used by the LSTM bench) gives the loads and cycles of encode();
    the last case has many empty rows (one entry each) and is bounded by the vector load."""
    from hwcosim.models.bbs.csr import cycles_from_mask, pe_loads

    p, w, _ = _case(rows, cols, mults, lanes, density, 1, seed)
    e = encode(p, w)
    r = cycles_from_mask(p, w != 0)
    assert np.array_equal(pe_loads(w != 0, mults), e.loads) and np.array_equal(r["loads"], e.loads)
    assert r["per_product"] == CSRCycleModel(p, e).per_product() and r["depth"] == e.depth
    assert r["nnz"] == e.nnz and r["ideal"] == CSRCycleModel(p, e).ideal()
    assert r["utilisation"] == pytest.approx(CSRCycleModel(p, e).utilisation(r["per_product"]))
    with pytest.raises(ValueError, match="shape"):
        cycles_from_mask(p, (w != 0)[:, 1:])


@pytest.mark.parametrize("n", [1, 40])
def test_compiled_and_dense_products_agree(n, monkeypatch):
    """spmxv_csr switches to the compiled exact sparse product above a work size: same words."""
    import hwcosim.models.bbs.csr as csr
    from hwcosim.models.fixedpoint import requantize

    p, w, xs = _case(32, 64, 4, 4, 0.2, n, seed=5)
    want = requantize(xs @ w.T, p.acc_frac, p.out_fmt)
    assert (n * w.size >= csr._COMPILED_MIN_WORK) == (n == 40)   # by default: 40 vectors compiled, 1 dense
    assert np.array_equal(spmxv_csr(p, w, xs), want)
    for threshold in (1, 1 << 62):                      # forced compiled, forced dense
        monkeypatch.setattr(csr, "_COMPILED_MIN_WORK", threshold)
        assert np.array_equal(spmxv_csr(p, w, xs), want)
