"""No traceback from any input (issue 45, requirements 4 and 7): deeply nested TOML/JSON, model
config fields of the wrong type or range, huge integers, declared-huge graphs and a text file passed
as a .npy each give exit status 2 and one line on stderr naming the file and the field."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tinybert
from hwcosim.cosim.cli import main

DEEP_TOML = "pes = " + "[" * 3000 + "]" * 3000 + "\n"
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def refused(capsys, argv: list[str], *needles: str) -> str:
    """Run the CLI in-process: exit 2, one stderr line holding every needle, no traceback."""
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err[-2000:]
    assert "Traceback" not in err
    assert len(lines) == 1, err[-2000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.mark.parametrize("argv", [
    ["verilog", "bbs-spmxv"],
    ["sim", "bbs-spmxv"],
    ["build", "bbs-spmxv", "--ooc"],
    ["board", "run", "bbs-spmxv", "--sim"],
    ["sweep", "bbs-spmxv"],
], ids=lambda a: " ".join(a[:2]))
def test_deep_params_toml(tmp_path, capsys, argv):
    p = tmp_path / "deep.toml"
    p.write_text(DEEP_TOML)
    refused(capsys, [*argv, "--params", str(p), "-o", str(tmp_path / "out")], "deep.toml", "nested too deeply")


# -- a BERT checkpoint folder for prune --calibration ----------------------------------------------------

@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A tiny BERT-family checkpoint folder (HF names, vocab.txt; no config.json) and sentences."""
    d = tinybert.write(tmp_path_factory.mktemp("bert"), H=8, inter=16, positions=32, scaled=False, config={},
                       vocab=[*tinybert.SPECIAL, "the", "cat", "sat", "on", "mat", "."])
    (d / "cal.txt").write_text("the cat sat on the mat .\nthe mat sat .\n" * 4)
    return d


def _bert_variant(bert_dir, tmp_path, config_text: str | None = None, tokenizer_text: str | None = None):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "model.safetensors").symlink_to(bert_dir / "model.safetensors")
    if tokenizer_text is None:
        (d / "vocab.txt").symlink_to(bert_dir / "vocab.txt")
    else:
        (d / "tokenizer.json").write_text(tokenizer_text)
    (d / "config.json").write_text(config_text if config_text is not None else '{"num_attention_heads": 2}')
    return ["prune", str(d), "--calibration", str(bert_dir / "cal.txt"), "--method", "wanda", "--pattern", "bbs",
            "--banks", "2", "--sparsity", "0.5", "--dry-run", "-o", str(tmp_path / "out")]


@pytest.mark.parametrize("value, needle", [
    ("0", "num_attention_heads = 0 is out of range"),
    ("-1", "num_attention_heads = -1 is out of range"),
    ('"abc"', "num_attention_heads = 'abc' is not an integer"),
    ("2.5", "num_attention_heads = 2.5 is not an integer"),
    ("3", "num_attention_heads = 3 does not divide the hidden size 8"),
    ("9" * 5000, "field 'num_attention_heads' holds an integer of more than 4300 digits"),
])
def test_bert_config_fields_validated_by_name(bert_dir, tmp_path, capsys, value, needle):
    argv = _bert_variant(bert_dir, tmp_path, '{"hidden_act": "gelu", "num_attention_heads": ' + value + "}")
    refused(capsys, argv, "config.json", needle)


@pytest.mark.parametrize("config, needle", [
    ('{"num_attention_heads": 2, "layer_norm_eps": "x"}', "layer_norm_eps = 'x' is not a number"),
    ('{"num_attention_heads": 2, "hidden_act": "relu"}', "hidden_act = 'relu'"),
    ('{"num_attention_heads": 2, "do_lower_case": "yes"}', "do_lower_case = 'yes' is not true or false"),
    (DEEP_JSON, "nested too deeply"),
])
def test_bert_config_other_fields_and_nesting(bert_dir, tmp_path, capsys, config, needle):
    refused(capsys, _bert_variant(bert_dir, tmp_path, config), "config.json", needle)


@pytest.mark.parametrize("tok, needle", [
    ('{"model": {"vocab": ' + DEEP_JSON + "}}", "nested too deeply"),
    ('{"model": {"vocab": {"the": "abc"}}}', "model.vocab['the'] = 'abc' is not a token id"),
])
def test_bert_tokenizer_json(bert_dir, tmp_path, capsys, tok, needle):
    refused(capsys, _bert_variant(bert_dir, tmp_path, tokenizer_text=tok), "tokenizer.json", needle)


# -- check: a run folder with hostile run.json / inputs.json ----------------------------------------------

def _run_folder(d, inputs_text: str, manifest_text: str | None = None):
    import hashlib

    d.mkdir()
    (d / "inputs.json").write_text(inputs_text)
    np.savez(d / "arrays.npz", x=np.zeros(2))
    np.savez(d / "outputs.npz", rtl=np.zeros(2))
    files = {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in ("inputs.json", "arrays.npz",
                                                                            "outputs.npz")}
    man = {"format": "hwcosim-run", "version": 1, "design": "bbs-spmxv", "files": files}
    (d / "run.json").write_text(manifest_text if manifest_text is not None else json.dumps(man))
    return d


def test_check_deep_run_json(tmp_path, capsys):
    d = _run_folder(tmp_path / "run", "{}", DEEP_JSON)
    refused(capsys, ["check", str(d)], "run.json", "nested too deeply")


def test_check_deep_inputs_json(tmp_path, capsys):
    d = _run_folder(tmp_path / "run", DEEP_JSON)
    refused(capsys, ["check", str(d)], "inputs.json", "nested too deeply")


# -- graphs and vectors ----------------------------------------------------------------------------------

def test_graph_run_mtx_declaring_1e12_vertices(tmp_path, capsys):
    p = tmp_path / "g.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n1000000000000 1000000000000 1\n1 1\n")
    refused(capsys, ["graph", "run", "pagerank", "--graph", str(p), "-o", str(tmp_path / "out")],
            "g.mtx:2", "1000000000000 vertices", "memory budget")


def test_plain_text_vector_is_not_called_pickled(tmp_path, capsys):
    from hwcosim.pruning.formats import csb

    csb.save(csb.encode(np.random.default_rng(0).standard_normal((8, 16)), banks=2, sparsity=0.5), tmp_path / "w")
    (tmp_path / "vec.npy").write_text(" ".join(["1"] * 16) + "\n")
    line = refused(capsys, ["sim", "--csb", str(tmp_path / "w"), "--vector", str(tmp_path / "vec.npy"),
                            "-o", str(tmp_path / "out")], "vec.npy", "not a .npy file")
    assert "pickle" not in line
    (tmp_path / "obj.npy").write_bytes(b"\x80\x04\x95" + bytes(20))   # a real pickle is still called one
    refused(capsys, ["sim", "--csb", str(tmp_path / "w"), "--vector", str(tmp_path / "obj.npy"),
                     "-o", str(tmp_path / "out2")], "obj.npy", "pickled")


@pytest.mark.parametrize("argv, needle", [
    (["build", "melo-engine", "--ooc", "--seeds", ",".join(str(i) for i in range(1, 5001))], "5000 seeds given"),
    (["build", "melo-engine", "--ooc", "--seeds", "1," + "9" * 5000], "(5,000 characters)"),
    (["build", "melo-engine", "--ooc", "--clock", "9" * 5000], "(5,000 characters)"),
])
def test_a_huge_value_is_not_echoed_whole(capsys, argv, needle):
    err = refused(capsys, argv, needle)
    assert len(err) < 300, len(err)


@pytest.mark.parametrize("name", ["manifest.json", "run.json"])
def test_compiled_and_run_folders_with_deep_json(tmp_path, capsys, name):
    """A compiled folder (hwcosim run) or a compiled-run folder (hwcosim check) whose JSON is nested too
    deeply: one line naming the file, exit 2 (it was a RecursionError, exit 70, before)."""
    d = tmp_path / "out"
    d.mkdir()
    (d / name).write_text(DEEP_JSON)
    np.save(tmp_path / "x.npy", np.zeros((2, 4)))
    if name == "manifest.json":
        refused(capsys, ["run", str(d), "--inputs", str(tmp_path / "x.npy")], "manifest.json", "nested too deeply")
    else:
        refused(capsys, ["check", str(d)], "run.json", "nested too deeply")
