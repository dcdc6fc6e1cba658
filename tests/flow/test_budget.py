"""The one memory budget (hwcosim.models.budget): every reader refuses a file whose declared sizes
exceed it before allocating (issue 45, requirement 3). Each bomb here is a small file that only
*declares* a huge size; the readers run under an address-space cap, so one that allocated what the
file declares would fail with MemoryError instead of the expected one-line refusal."""

from __future__ import annotations

import contextlib
import gzip
import io
import resource
import zipfile

import numpy as np
import pytest
import tinybert
from hwcosim.models.budget import DEFAULT_BYTES, ENV, budget_bytes, check_alloc, check_npz
from hwcosim.models.errors import UsageError


@contextlib.contextmanager
def address_cap(extra: int = 768 << 20):
    """Cap this process's address space at its current size plus ``extra`` (restored after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[0]) * resource.getpagesize()
    cap = now + extra if hard == resource.RLIM_INFINITY else min(hard, now + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _npy_header(shape, descr="<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _npz_zeros(path, members: dict[str, int]) -> None:
    """An .npz whose members are ``n`` float64 zeros each, deflated (8 MiB of zeros -> ~8 KiB)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, n in members.items():
            z.writestr(name + ".npy", _npy_header((n,)) + bytes(8 * n))


def _npz_declared(path, shape=(1 << 31,)) -> None:
    """An .npz whose 'values' member declares ``shape`` in its header but holds 64 bytes."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("values.npy", _npy_header(shape) + bytes(64))
        z.writestr("indices.npy", _npy_header((4,), "<u2") + bytes(8))


# -- the budget itself ------------------------------------------------------------------------------

def test_budget_default_and_override(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert budget_bytes() == DEFAULT_BYTES == 2 << 30
    for text, want in (("512M", 512 << 20), ("8G", 8 << 30), ("1.5GiB", 3 << 29), ("3000000", 3_000_000),
                       ("2gb", 2 * 1000**3)):
        monkeypatch.setenv(ENV, text)
        assert budget_bytes() == want, text
    for bad in ("lots", "-1G", "8Q", "1k", "1" * 40):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(UsageError, match=ENV):
            budget_bytes()


def test_check_alloc_names_what_and_how(monkeypatch):
    monkeypatch.setenv(ENV, "1M")
    check_alloc(1 << 20, "x.bin: fine")
    with pytest.raises(UsageError) as e:
        check_alloc(3 << 20, "x.bin: the table", "use a smaller table")
    msg = str(e.value)
    assert msg.startswith("x.bin: the table would need 3.0 MiB, over the 1.0 MiB memory budget")
    assert "use a smaller table" in msg and f"{ENV}=" in msg and "\n" not in msg


# -- compressed arrays: sim --csb, check, prune, --vector -------------------------------------------

def test_npz_member_declaring_more_than_it_holds_is_refused(tmp_path):
    from hwcosim.pruning.formats.csb import FormatError

    _npz_declared(tmp_path / "w.npz")
    with address_cap(), pytest.raises(FormatError, match=r"'values' declares shape \(2147483648,\) float64 "
                                                         r"\(16.0 GiB\) but unpacks to 64 B"):
        check_npz(tmp_path / "w.npz", FormatError)


def test_csb_npz_bomb_refused_before_unpacking(tmp_path, monkeypatch):
    """sim --csb: the CSB reader checks the .npz against the budget before np.load."""
    from hwcosim.pruning.formats import csb

    m = csb.encode(np.random.default_rng(0).standard_normal((4, 8)), banks=2, sparsity=0.5)
    csb.save(m, tmp_path, stem="w")
    _npz_zeros(tmp_path / "w.npz", {"values": 1 << 20, "indices": 4})   # 8 MiB unpacked, ~8 KiB on disk
    assert (tmp_path / "w.npz").stat().st_size < 100_000
    monkeypatch.setenv(ENV, "2M")
    with address_cap(), pytest.raises(csb.FormatError, match=r"w.npz: unpacking its 2 arrays .*'values'.* "
                                                             r"would need 8.0 MiB, over the 2.0 MiB"):
        csb.load(tmp_path / "w.json")


def test_run_folder_npz_bomb_refused(tmp_path, monkeypatch):
    """check: the run folder's arrays are checked against the budget before they are unpacked."""
    from hwcosim.cosim.flow.runs import read_npz

    _npz_zeros(tmp_path / "arrays.npz", {"stimulus": 1 << 20})
    monkeypatch.setenv(ENV, "1M")
    with address_cap(), pytest.raises(UsageError, match="arrays.npz: unpacking its 1 array .* would need 8.0 MiB"):
        read_npz(tmp_path / "arrays.npz")
    _npz_declared(tmp_path / "d.npz")
    with address_cap(), pytest.raises(UsageError, match="declares shape"):
        read_npz(tmp_path / "d.npz")


def test_npy_header_declaring_a_huge_array_is_refused(tmp_path):
    """prune / --vector / calibration .npy: a 144-byte file declaring 10**12 floats."""
    from hwcosim.cosim.flow.vectors import load_vectors
    from hwcosim.pruning.io import WeightIOError, load_tensors

    (tmp_path / "huge.npy").write_bytes(_npy_header((10**12,)) + bytes(16))
    with address_cap(), pytest.raises(WeightIOError, match=r"huge.npy: its header declares an array of shape "
                                                           r"\(1000000000000,\) float64, which would need 7.3 TiB"):
        load_tensors(tmp_path / "huge.npy")
    with address_cap(), pytest.raises(UsageError, match="would need 7.3 TiB"):
        load_vectors(str(tmp_path / "huge.npy"), 4)
    (tmp_path / "short.npy").write_bytes(_npy_header((1000,)) + bytes(16))   # in budget, but truncated
    with pytest.raises(WeightIOError, match="the file holds 16 B of data; it is truncated"):
        load_tensors(tmp_path / "short.npy")


# -- graphs: .mtx headers, gzip streams, R-MAT sizes -------------------------------------------------

@pytest.mark.parametrize("size_line, match", [
    ("500000000 500000000 1", "a graph of 500000000 vertices and 1 entries would need 29.8 GiB"),
    ("1000000000000 1000000000000 1", "would need 58.2 TiB"),
    ("10 10 2000000000", r"the header promises 2000000000 entries, more than the file's \d+ bytes can hold"),
])
def test_mtx_header_against_budget_and_file_size(tmp_path, size_line, match):
    from hwcosim.models.systems.graph.io import GraphFormatError, read_graph

    p = tmp_path / "g.mtx"
    p.write_text(f"%%MatrixMarket matrix coordinate pattern general\n{size_line}\n1 1\n")
    with address_cap(), pytest.raises(GraphFormatError, match=match):
        read_graph(p)


def test_scipy_npz_graph_declaring_huge_shape(tmp_path):
    """A COO .npz of one edge whose 'shape' says 10**10 vertices."""
    from hwcosim.models.systems.graph.io import GraphFormatError, read_graph

    np.savez(tmp_path / "g.npz", format=np.array("coo"), shape=np.array([10**10, 10**10]), data=np.ones(1),
             row=np.zeros(1, np.int64), col=np.zeros(1, np.int64))
    with address_cap(), pytest.raises(GraphFormatError, match="g.npz: a graph of 10000000000 vertices and 1 edges "
                                                              "would need 596.0 GiB"):
        read_graph(tmp_path / "g.npz")


def test_gzip_edge_list_bomb_refused_early(tmp_path):
    from hwcosim.models.systems.graph.io import GraphFormatError, read_graph

    p = tmp_path / "bomb.txt.gz"
    p.write_bytes(gzip.compress(b"0 1\n" * (1 << 20), 9))   # 4 MiB of edges in ~10 KiB
    assert p.stat().st_size < 40_000
    with address_cap(), pytest.raises(GraphFormatError, match="inflates more than 100x its compressed size"):
        read_graph(p, progress=False)
    ok = tmp_path / "ok.txt.gz"   # a real edge list (compresses a few times) still reads
    ok.write_bytes(gzip.compress("".join(f"{i} {(i * 7919) % 5000}\n" for i in range(5000)).encode()))
    assert read_graph(ok, progress=False).n == 5000


def test_gzip_stream_capped_at_the_budget(tmp_path, monkeypatch):
    from hwcosim.models.systems.graph.io import GraphFormatError, read_graph

    rng = np.random.default_rng(1)
    text = "".join(f"{a} {b}\n" for a, b in rng.integers(0, 10**9, (60_000, 2)))  # ~1.2 MB, compresses ~2x
    p = tmp_path / "big.txt.gz"
    p.write_bytes(gzip.compress(text.encode(), 1))
    monkeypatch.setenv(ENV, "1M")
    with pytest.raises(GraphFormatError, match="big.txt.gz: the decompressed text would need"):
        read_graph(p, progress=False)


def test_rmat_size_refused_before_generating():
    from hwcosim.models.systems.graph.bench import load_graph
    from hwcosim.models.systems.graph.graph import RMATParams, check_rmat_budget

    with address_cap(), pytest.raises(UsageError, match=r"scale 24 and edge factor 64 \(16777216 vertices, "
                                                        r"1073741824 edges\) would need 65.0 GiB.*lower --scale"):
        load_graph("rmat", 24, 64, 0)
    check_rmat_budget(RMATParams(scale=14, edge_factor=16))   # the default size fits


# -- jobcheck scripts, cluster scenarios, calibration text ------------------------------------------

def test_jobcheck_script_size_capped(tmp_path):
    from hwcosim.models.systems.jobs.jobcheck import MAX_SCRIPT_BYTES, ScriptError, static_check

    p = tmp_path / "train.py"
    with open(p, "wb") as f:   # sparse: no disk or memory used
        f.truncate(MAX_SCRIPT_BYTES + 1)
    with address_cap(), pytest.raises(ScriptError, match="train.py: 4.0 MiB, larger than the 4 MiB"):
        static_check(p)


def _small_scenario() -> dict:
    import tomllib

    from hwcosim.models.systems.cluster.scenario import __file__ as where

    with open(where.replace("scenario.py", "scenarios/small.toml"), "rb") as f:
        return tomllib.load(f)


def test_scenario_job_count_and_file_size_capped(tmp_path):
    from hwcosim.models.systems.cluster.scenario import (
        MAX_FILE_BYTES,
        MAX_JOBS,
        ScenarioError,
        load_scenario,
        parse_scenario,
    )

    doc = {**_small_scenario(), "jobs": [{"name": f"j{i}", "dp": 1} for i in range(MAX_JOBS + 1)]}
    with pytest.raises(ScenarioError, match=f"jobs: {MAX_JOBS + 1} \\[\\[jobs\\]\\] tables, more than {MAX_JOBS}"):
        parse_scenario(doc)
    p = tmp_path / "huge.toml"
    with open(p, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ScenarioError, match="huge.toml: 2.0 MiB, larger than the 2 MiB"):
        load_scenario(p)


def test_duplicate_job_names_found_in_linear_time():
    """The duplicate-name check was quadratic (names[:i] per job): 10,000 jobs now parse at once."""
    import time

    from hwcosim.models.systems.cluster.scenario import MAX_JOBS, ScenarioError, parse_scenario

    jobs = [{"name": f"j{i}", "dp": 1} for i in range(MAX_JOBS)]
    jobs[-1]["name"] = "j0"
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError, match=f"jobs\\[{MAX_JOBS - 1}\\].name: 'j0' is used by an earlier job"):
        parse_scenario({**_small_scenario(), "jobs": jobs, "failures": []})
    assert time.perf_counter() - t0 < 5.0


def _tiny_bert(rng, H=16, inter=32, L=2, vocab=24):
    return tinybert.tensors(rng, vocab, H, inter, L)


def test_calibration_batched_and_spilled_gives_the_same_pruning(monkeypatch):
    """Calibration statistics are summed over batches of sentences, with hidden states beyond the
    budget's share spilled to files: the result equals one whole batch held in memory."""
    from hwcosim.models.nn.bert import Bert
    from hwcosim.pruning import oneshot
    from hwcosim.pruning.base import get_pattern

    rng = np.random.default_rng(3)
    model = Bert(_tiny_bert(rng, L=1), {"num_attention_heads": 2})
    ids = [list(rng.integers(4, 24, rng.integers(3, 12))) for _ in range(32)]
    method = "obs"
    plan = {n: get_pattern("bbs", banks=4, sparsity=0.5) for n in model.weight_names()}
    whole, rec_whole = oneshot.prune_bert(model, ids[:24], plan, method, ids[24:], blocksize=8)
    monkeypatch.setattr(oneshot, "CALIB_BATCH_TOKENS", 24)   # a few sentences per batch
    spilled = []
    real_set = oneshot._States.set

    def spy(self, k, h):
        real_set(self, k, h)
        spilled.append(not isinstance(self.items[k], np.ndarray))
    monkeypatch.setattr(oneshot._States, "set", spy)
    monkeypatch.setattr(oneshot, "budget_bytes", lambda: 64 << 10)   # an 8 KiB share: most batches wait in files
    batched, rec_batched = oneshot.prune_bert(model, ids[:24], plan, method, ids[24:], blocksize=8)
    assert len(oneshot._token_batches(ids[:24])) > 5 and any(spilled)
    for n in plan:
        np.testing.assert_allclose(batched.p[n], whole.p[n], rtol=1e-9, atol=1e-12)
        assert rec_batched[n]["tokens"] == rec_whole[n]["tokens"] == sum(map(len, ids[:24]))
        assert rec_batched[n]["rel_output_error"] == pytest.approx(rec_whole[n]["rel_output_error"], rel=1e-9)


def test_token_batches_bound_the_padded_size():
    from hwcosim.pruning.oneshot import _token_batches

    ids = [[1] * n for n in (3, 9, 2, 30, 5, 5, 5, 1)]
    bs = _token_batches(ids, 10)
    assert sorted(sum(bs, [])) == list(range(len(ids)))
    for b in bs:
        assert len(b) == 1 or len(b) * max(len(ids[k]) for k in b) <= 10


def test_output_error_from_gram_matches_rows():
    from hwcosim.pruning.oneshot import _gram_error, output_error

    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((50, 8)), rng.standard_normal((6, 8))
    Wp = W * (rng.random(W.shape) > 0.5)
    assert _gram_error(W, Wp, X.T @ X) == pytest.approx(output_error(W, Wp, X), rel=1e-10)


def test_prune_budget_is_the_fixed_one_not_free_memory(tmp_path, monkeypatch):
    """prune's .npz limit is the same fixed budget (it was half the free memory)."""
    from hwcosim.pruning import io as wio

    assert not hasattr(wio, "_memory_budget")
    _npz_zeros(tmp_path / "m.npz", {"w": 1 << 18})   # 2 MiB
    monkeypatch.setenv(ENV, "1M")
    with pytest.raises(wio.WeightIOError, match=f"m.npz: unpacking .* would need 2.0 MiB.*--tensors.*{ENV}"):
        wio.load_tensors(tmp_path / "m.npz")
    monkeypatch.setenv(ENV, "4M")
    assert wio.load_tensors(tmp_path / "m.npz")["w"].shape == (1 << 18,)


def test_limits_in_the_docs_are_the_constants():
    """docs/getting-started.md 'Limits' states the default and the caps the code uses."""
    from pathlib import Path

    from hwcosim.models.systems.cluster.scenario import MAX_FILE_BYTES, MAX_JOBS
    from hwcosim.models.systems.graph.io import MAX_GZIP_RATIO
    from hwcosim.models.systems.jobs.jobcheck import MAX_SCRIPT_BYTES

    text = (Path(__file__).parents[2] / "docs" / "getting-started.md").read_text()
    limits = " ".join(text[text.index("## Limits"):].split())
    for stated in (f"**{DEFAULT_BYTES >> 30} GiB**", f"`{ENV}`", f"more than {MAX_GZIP_RATIO}x",
                   f"at most {MAX_SCRIPT_BYTES >> 20} MiB", f"at most {MAX_JOBS:,} jobs",
                   f"at most {MAX_FILE_BYTES >> 20} MiB"):
        assert stated in limits, stated


# -- weight files read by prune / compile: safetensors, PyTorch, ONNX -----------------------------

def test_safetensors_checked_before_reading(tmp_path, monkeypatch):
    """F16 tensors are widened to float32: 3 MiB in the file is 6 MiB read, over a 4 MiB budget."""
    from hwcosim.pruning.io import WeightIOError, load_tensors
    from safetensors.numpy import save_file

    save_file({"w": np.zeros((3 << 19,), np.float16)}, str(tmp_path / "w.safetensors"))
    assert load_tensors(tmp_path / "w.safetensors")["w"].dtype == np.float16  # under the default budget
    monkeypatch.setenv(ENV, "4M")
    with pytest.raises(WeightIOError, match=r"w.safetensors: its tensors would need 6.0 MiB, over the 4.0 MiB"):
        load_tensors(tmp_path / "w.safetensors")


def test_pytorch_zip_storage_checked_before_torch(tmp_path, monkeypatch):
    """A PyTorch archive whose deflated storage unpacks to 8 MiB: refused from the zip directory,
    before torch is imported (so also where torch is not installed)."""
    from hwcosim.pruning.io import WeightIOError, load_tensors

    with zipfile.ZipFile(tmp_path / "w.pt", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("archive/data/0", bytes(8 << 20))
    assert (tmp_path / "w.pt").stat().st_size < 100_000
    monkeypatch.setenv(ENV, "4M")
    with address_cap(), pytest.raises(WeightIOError, match=r"w.pt: its tensor storage would need 8.0 MiB"):
        load_tensors(tmp_path / "w.pt")


def _onnx_with(tmp_path, n: int, external: str | None = None):
    import onnx
    from onnx import helper, numpy_helper

    init = numpy_helper.from_array(np.zeros((n,), np.float32), "w")
    if external is not None:
        init.ClearField("raw_data")
        init.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", external), ("length", str(4 * n))):
            init.external_data.add(key=k, value=v)
    node = helper.make_node("Identity", ["w"], ["y"])
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [n])],
                              [init])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return path


def test_onnx_checked_before_parsing(tmp_path, monkeypatch):
    """Parsing holds the file and the arrays read from it: a 3 MiB model needs 6 MiB, over 4 MiB."""
    from hwcosim.pruning.io import WeightIOError, load_tensors

    path = _onnx_with(tmp_path, 3 << 18)
    assert load_tensors(path)["w"].shape == (3 << 18,)
    monkeypatch.setenv(ENV, "4M")
    with pytest.raises(WeightIOError, match=r"m.onnx: parsing the model and reading its weights would need 6.0 MiB"):
        load_tensors(path)


def test_onnx_external_data_checked_and_kept_beside_the_model(tmp_path, monkeypatch):
    """External data counts against the budget by its declared length, before it is read; a location
    outside the model's folder is refused without opening it."""
    from hwcosim.pruning.io import WeightIOError, load_tensors

    n = 3 << 18
    (tmp_path / "w.bin").write_bytes(bytes(4 * n))
    path = _onnx_with(tmp_path, n, external="w.bin")
    assert load_tensors(path)["w"].shape == (n,)
    monkeypatch.setenv(ENV, "4M")
    with pytest.raises(WeightIOError, match=r"m.onnx: the model with its external data would need"):
        load_tensors(path)
    monkeypatch.delenv(ENV)
    path = _onnx_with(tmp_path, 4, external="../secret.bin")
    with pytest.raises(WeightIOError, match=r"tensor 'w' keeps its data at '../secret.bin', outside the model"):
        load_tensors(path)
