"""``hwcosim prune --dense-out``: the pruned model back in the input's own format."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hwcosim.models.fixedpoint import Q, dequantize, quantize
from hwcosim.pruning.base import get_pattern
from hwcosim.pruning.roundtrip import RoundTripError, read_safetensors, safetensors_header, write_dense


def run(argv):
    """Through the one dispatcher (``hwcosim ...``): errors become exit status 2 (1 for a failed check)."""
    from hwcosim.cosim.cli import main

    return main(argv)


def fail(argv, capsys):
    code = run(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


def model(rng=None) -> dict[str, np.ndarray]:
    rng = rng or np.random.default_rng(0)
    return {
        "fc1.weight": rng.standard_normal((16, 32)).astype(np.float32),
        "fc1.bias": rng.standard_normal(16).astype(np.float32),
        "conv.weight": rng.standard_normal((8, 4, 2, 2)).astype(np.float16),  # 4-D, pruned as 8x16
        "fc2.weight": rng.standard_normal((10, 16)).astype(np.float64),
        "steps": np.array([7, 8, 9], dtype=np.int64),
    }


def bbs_ok(dense: np.ndarray, banks: int, k: int) -> None:
    """Bank-balanced invariant: every bank of every row holds exactly k nonzeros."""
    m = dense.reshape(dense.shape[0], -1) != 0
    rows, cols = m.shape
    assert (m.reshape(rows, banks, cols // banks).sum(-1) == k).all()


def nm_ok(dense: np.ndarray, n: int, mm: int) -> None:
    m = dense.reshape(dense.shape[0], -1) != 0
    assert (m.reshape(m.shape[0], -1, mm).sum(-1) <= n).all()


# --- safetensors ---------------------------------------------------------------------------------
def test_safetensors_round_trip(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    w = model()
    st.save_file(w, str(tmp_path / "m.safetensors"), metadata={"origin": "test"})
    out = tmp_path / "out"
    rc = run(["prune", str(tmp_path / "m.safetensors"), "--pattern", "bbs", "--banks", "4", "--sparsity", "0.75",
              "--tensors", "fc1.weight,conv.weight", "-o", str(out), "--dense-out"])
    assert rc == 0
    path = out / "m.pruned.safetensors"
    got = st.load_file(str(path))
    assert list(got) == list(st.load_file(str(tmp_path / "m.safetensors")))  # same names, same order
    for k, a in w.items():
        assert got[k].shape == a.shape and got[k].dtype == a.dtype, k
    # untouched tensors: bit for bit
    for k in ("fc1.bias", "fc2.weight", "steps"):
        assert got[k].tobytes() == w[k].tobytes()
    # pruned: bank-balanced, kept values are the originals (masked)
    bbs_ok(got["fc1.weight"], 4, 2)
    bbs_ok(got["conv.weight"], 4, 1)
    keep = got["fc1.weight"] != 0
    assert np.array_equal(got["fc1.weight"][keep], w["fc1.weight"][keep])
    mask = get_pattern("bbs", banks=4, sparsity=0.75).mask(w["fc1.weight"].astype(np.float64))
    assert np.array_equal(keep, mask)
    # metadata kept
    header, _ = safetensors_header(path)
    assert header["__metadata__"] == {"origin": "test"}
    # manifest says what was pruned and how
    man = json.loads((out / "manifest.json").read_text())
    d = man["dense"]
    assert d["file"] == str(path) and d["values"] == "masked" and d["format"] == "safetensors"
    by = {t["tensor"]: t for t in d["tensors"]}
    assert by["fc1.weight"]["pruned"] and by["fc1.weight"]["pattern"]["banks"] == 4
    assert by["fc1.weight"]["sparsity"] == 0.75 and by["fc1.weight"]["check"] == "ok"
    assert not by["fc1.bias"]["pruned"] and by["fc1.bias"]["reason"] == "not selected"
    assert by["conv.weight"]["dtype"] == "F16" and by["conv.weight"]["shape"] == [8, 4, 2, 2]
    import hashlib

    assert d["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_quantized_values(tmp_path):
    w = {"a": np.random.default_rng(1).uniform(-1, 1, (8, 16)).astype(np.float32)}
    np.savez(tmp_path / "w.npz", **w)
    out = tmp_path / "o"
    assert run(["prune", str(tmp_path / "w.npz"), "--pattern", "nm", "--n", "2", "--m", "4", "--format", "Q1.7",
                "-o", str(out), "--dense-out", str(tmp_path / "dense.npz"), "--dense-values", "quantized"]) == 0
    with np.load(tmp_path / "dense.npz") as z:
        d = z["a"]
    assert d.dtype == np.float32 and d.shape == (8, 16)
    nm_ok(d, 2, 4)
    keep = d != 0
    q = Q.parse("Q1.7")
    np.testing.assert_array_equal(d[keep], dequantize(quantize(w["a"][keep].astype(np.float64), q), q))
    assert json.loads((out / "manifest.json").read_text())["dense"]["values"] == "quantized"


def test_bf16_safetensors_round_trip(tmp_path):
    """BF16 (which numpy cannot hold) is read as float32 and written back as BF16, bits kept."""
    rng = np.random.default_rng(2)
    bits = (rng.standard_normal((4, 8)).astype(np.float32).view(np.uint32) >> 16).astype("<u2")
    other = np.arange(6, dtype="<f4")
    header = {"w": {"dtype": "BF16", "shape": [4, 8], "data_offsets": [0, 64]},
              "b": {"dtype": "F32", "shape": [6], "data_offsets": [64, 88]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (tmp_path / "m.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bits.tobytes() + other.tobytes())
    assert read_safetensors(tmp_path / "m.safetensors")["w"].dtype == np.float32
    out = tmp_path / "o"
    assert run(["prune", str(tmp_path / "m.safetensors"), "--pattern", "bbs", "--banks", "2", "--sparsity", "0.5",
                "--tensors", "w", "-o", str(out), "--dense-out"]) == 0
    h, start = safetensors_header(out / "m.pruned.safetensors")
    assert h["w"]["dtype"] == "BF16" and h["w"]["shape"] == [4, 8]
    raw = (out / "m.pruned.safetensors").read_bytes()
    b0, b1 = h["w"]["data_offsets"]
    newbits = np.frombuffer(raw[start + b0:start + b1], dtype="<u2").reshape(4, 8)
    keep = newbits != 0
    assert np.array_equal(newbits[keep], bits[keep])  # kept BF16 values exact
    assert (keep.reshape(4, 2, 4).sum(-1) == 2).all()
    c0, c1 = h["b"]["data_offsets"]
    assert raw[start + c0:start + c1] == other.tobytes()


# --- npz / npy -----------------------------------------------------------------------------------
def test_npz_round_trip(tmp_path):
    w = model()
    np.savez(tmp_path / "m.npz", **w)
    out = tmp_path / "o"
    assert run(["prune", str(tmp_path / "m.npz"), "--pattern", "nm", "--n", "2", "--m", "4",
                "-o", str(out), "--dense-out"]) == 0
    with np.load(out / "m.pruned.npz", allow_pickle=False) as z:
        assert z.files == list(w)
        got = {k: z[k] for k in z.files}
    for k in ("fc1.weight", "conv.weight", "fc2.weight"):
        assert got[k].dtype == w[k].dtype and got[k].shape == w[k].shape
        nm_ok(got[k], 2, 4)
        assert (got[k] != 0).sum() == w[k].size // 2
    for k in ("fc1.bias", "steps"):
        assert got[k].tobytes() == w[k].tobytes()
    man = json.loads((out / "manifest.json").read_text())
    reasons = {t["tensor"]: t.get("reason") for t in man["dense"]["tensors"]}
    assert reasons["fc1.bias"] == "1-D" and reasons["fc1.weight"] is None


def test_npy_round_trip(tmp_path):
    w = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    np.save(tmp_path / "layer.npy", w)
    assert run(["prune", str(tmp_path / "layer.npy"), "--banks", "4", "--sparsity", "0.5", "-o", str(tmp_path / "o"),
                "--dense-out"]) == 0
    d = np.load(tmp_path / "o" / "layer.pruned.npy")
    assert d.dtype == np.float32 and d.shape == w.shape
    bbs_ok(d, 4, 2)


# --- PyTorch -------------------------------------------------------------------------------------
def test_torch_state_dict_round_trip(tmp_path):
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    sd = net.state_dict()
    sd["2.weight"] = sd["2.weight"].to(torch.bfloat16)
    torch.save(sd, tmp_path / "net.pt")
    out = tmp_path / "o"
    assert run(["prune", str(tmp_path / "net.pt"), "--pattern", "bbs", "--banks", "4", "--sparsity", "0.5",
                "--tensors", "*.weight", "-o", str(out), "--dense-out"]) == 0
    got = torch.load(out / "net.pruned.pt", weights_only=True)
    assert list(got) == list(sd)
    for k, t in sd.items():
        assert got[k].shape == t.shape and got[k].dtype == t.dtype, k
    for k in ("0.bias", "2.bias"):
        assert torch.equal(got[k], sd[k])
    for k in ("0.weight", "2.weight"):
        d = got[k].float().numpy()
        bbs_ok(d, 4, d.shape[1] // 8)
        keep = torch.from_numpy(d != 0)
        assert torch.equal(got[k][keep], sd[k][keep])  # kept values exact, also in bfloat16
    # the pruned state dict loads into the network
    sd["2.weight"] = sd["2.weight"].float()
    got["2.weight"] = got["2.weight"].float()
    net.load_state_dict(got)


def test_nested_torch_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    ckpt = {"epoch": 3, "model": {"enc": {"w": torch.randn(8, 8)}, "head": [torch.randn(4, 8), torch.randn(4)]}}
    torch.save(ckpt, tmp_path / "ck.pth")
    assert run(["prune", str(tmp_path / "ck.pth"), "--pattern", "unstructured", "--sparsity", "0.5",
                "-o", str(tmp_path / "o"), "--dense-out", str(tmp_path / "o" / "ck2.pt")]) == 0
    got = torch.load(tmp_path / "o" / "ck2.pt", weights_only=True)
    assert got["epoch"] == 3 and isinstance(got["model"]["head"], list)
    assert (got["model"]["enc"]["w"] == 0).sum() + (got["model"]["head"][0] == 0).sum() == 48
    assert torch.equal(got["model"]["head"][1], ckpt["model"]["head"][1])


# --- errors --------------------------------------------------------------------------------------
def test_dense_out_wrong_suffix_is_refused_before_writing(tmp_path, capsys):
    np.save(tmp_path / "w.npy", np.ones((4, 8), np.float32))
    msg = fail(["prune", str(tmp_path / "w.npy"), "--banks", "2", "--sparsity", "0.5", "-o", str(tmp_path / "o"),
                "--dense-out", str(tmp_path / "w.safetensors")], capsys)
    assert "must end in .npy" in msg
    assert not (tmp_path / "o").exists()


def test_dense_out_cannot_overwrite_input(tmp_path, capsys):
    np.save(tmp_path / "w.npy", np.ones((4, 8), np.float32))
    msg = fail(["prune", str(tmp_path / "w.npy"), "--banks", "2", "--sparsity", "0.5", "-o", str(tmp_path / "o"),
                "--dense-out", str(tmp_path / "w.npy")], capsys)
    assert "would overwrite the input" in msg


def test_quantized_needs_floats(tmp_path, capsys):
    np.save(tmp_path / "w.npy", np.arange(32, dtype=np.int32).reshape(4, 8))
    msg = fail(["prune", str(tmp_path / "w.npy"), "--banks", "2", "--sparsity", "0.5", "-o", str(tmp_path / "o"),
                "--dense-out", "--dense-values", "quantized"], capsys)
    assert "needs floating-point tensors" in msg


def test_write_dense_rejects_bad_replacements(tmp_path):
    np.savez(tmp_path / "m.npz", a=np.zeros((2, 4), np.float32))
    with pytest.raises(RoundTripError, match="pruned shape"):
        write_dense(tmp_path / "m.npz", tmp_path / "x.npz", {"a": np.zeros((4, 2))})
    with pytest.raises(RoundTripError, match="no tensor named 'b'"):
        write_dense(tmp_path / "m.npz", tmp_path / "x.npz", {"b": np.zeros((2, 4))})
    assert not (tmp_path / "x.npz").exists()


def test_damaged_safetensors(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 10**9) + b"{}")
    with pytest.raises(RoundTripError, match="exceeds the file size"):
        read_safetensors(tmp_path / "bad.safetensors")


def test_dry_run_writes_no_dense_file(tmp_path):
    np.save(tmp_path / "w.npy", np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))
    assert run(["prune", str(tmp_path / "w.npy"), "--banks", "2", "--sparsity", "0.5", "-o", str(tmp_path / "o"),
                "--dense-out", "--dry-run"]) == 0
    assert not (tmp_path / "o").exists()
