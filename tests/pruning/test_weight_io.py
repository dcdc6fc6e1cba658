"""Weight I/O: npy/npz/safetensors/torch readers, selection by glob, pattern configs, refusals."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hwcosim.models.fixedpoint import Q
from hwcosim.pruning.io import WeightIOError, load_config, load_tensors, select


def test_npy_npz(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "w.npy", a)
    got = load_tensors(tmp_path / "w.npy")
    assert list(got) == ["w"] and (got["w"] == a).all() and got["w"].dtype == np.float32
    np.savez(tmp_path / "m.npz", **{"enc.weight": a, "enc.bias": a[0]})
    got = load_tensors(tmp_path / "m.npz")
    assert list(got) == ["enc.weight", "enc.bias"] and (got["enc.bias"] == a[0]).all()


def test_pickled_npy_refused(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(WeightIOError, match="pickled"):
        load_tensors(tmp_path / "o.npy")
    np.savez(tmp_path / "o.npz", x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(WeightIOError, match="pickled"):
        load_tensors(tmp_path / "o.npz")


def test_safetensors(tmp_path):
    from safetensors.numpy import save_file

    t = {
        "layer.0.weight": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float16),
        "layer.0.bias": np.zeros(4, np.float32),
    }
    save_file(t, str(tmp_path / "m.safetensors"))
    got = load_tensors(tmp_path / "m.safetensors")
    assert set(got) == set(t) and (got["layer.0.weight"] == t["layer.0.weight"]).all()
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(WeightIOError, match="safetensors"):
        load_tensors(tmp_path / "bad.safetensors")


def test_bad_paths(tmp_path):
    with pytest.raises(WeightIOError, match="no such"):
        load_tensors(tmp_path / "missing.npy")
    (tmp_path / "w.h5").write_bytes(b"x")
    with pytest.raises(WeightIOError, match="unknown weight file type"):
        load_tensors(tmp_path / "w.h5")
    (tmp_path / "t.npz").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(WeightIOError, match="not a readable .npz"):
        load_tensors(tmp_path / "t.npz")


def test_torch_state_dict(tmp_path):
    torch = pytest.importorskip("torch")
    sd = {
        "fc.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "fc.bias": torch.zeros(2, dtype=torch.bfloat16),
        "nested": {"w": torch.ones(2, 2)},
        "epoch": 3,
    }
    torch.save(sd, tmp_path / "m.pt")
    got = load_tensors(tmp_path / "m.pt")
    assert set(got) == {"fc.weight", "fc.bias", "nested.w"}
    assert got["fc.bias"].dtype == np.float32 and (got["fc.weight"] == np.arange(6).reshape(2, 3)).all()


class Evil:
    def __reduce__(self):
        return (print, ("owned",))


def test_torch_refuses_arbitrary_pickles(tmp_path, capsys):
    pytest.importorskip("torch")
    with open(tmp_path / "evil.pth", "wb") as f:
        pickle.dump({"w": Evil()}, f)
    with pytest.raises(WeightIOError, match="weights_only=True"):
        load_tensors(tmp_path / "evil.pth")
    assert "owned" not in capsys.readouterr().out


def test_torch_missing_names_the_install(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "torch":
            raise ImportError("no torch")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    (tmp_path / "m.pt").write_bytes(b"x")
    with pytest.raises(WeightIOError, match=r"pip install torch==2\.13\.0"):
        load_tensors(tmp_path / "m.pt")


def test_select():
    names = ["enc.0.weight", "enc.0.bias", "dec.weight"]
    assert select(names, None) == names
    assert select(names, "*.weight") == ["enc.0.weight", "dec.weight"]
    assert select(names, "dec.weight, enc.*.bias") == ["enc.0.bias", "dec.weight"]
    assert select(names, ["enc.0.weight"]) == ["enc.0.weight"]
    with pytest.raises(WeightIOError, match="matches none"):
        select(names, "*.gamma")
    with pytest.raises(WeightIOError, match="empty"):
        select(names, " , ")


def test_config_toml(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("""
format = "Q2.6"
[[rule]]
tensors = "*.bias"
skip = true
[[rule]]
tensors = ["lstm.*", "fc.weight"]
pattern = "bbs"
banks = 16
sparsity = 0.875
format = "Q1.7"
[[rule]]
tensors = "*"
pattern = "fss"
region = [2, 8]
n = 4
""")
    c = load_config(p)
    assert c.fmt == Q(2, 6)
    assert c.rule_for("fc.bias").pattern is None
    r = c.rule_for("lstm.weight_ih")
    assert r.pattern.describe() == {"pattern": "bbs", "banks": 16, "sparsity": 0.875} and r.fmt == Q(1, 7)
    assert c.rule_for("conv.weight").pattern.region == (2, 8)


@pytest.mark.parametrize(
    "text, msg",
    [
        ("[[rule]]\ntensors='*'\npattern='bbs'\nbanks=0\n", "rule 1: bank count"),
        ("[[rule]]\ntensors='*'\npattern='nope'\n", "unknown sparsity pattern"),
        ("[[rule]]\npattern='bbs'\n", "needs tensors"),
        ("[[rule]]\ntensors='*'\n", "needs pattern"),
        ("[[rule]]\ntensors='*'\nskip=true\nbanks=3\n", "skip rule"),
        ("[[rule]]\ntensors='*'\npattern='nm'\nformat='Qx'\n", "fixed-point"),
        ("colour = 'red'\n", "unknown top-level"),
        ("", "no rules"),
        ("[[rule]\n", "not valid TOML"),
    ],
)
def test_wrong_config(tmp_path, text, msg):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(WeightIOError, match=msg):
        load_config(p)


def test_yaml_config(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rule:\n  - tensors: '*'\n    pattern: nm\n    n: 2\n    m: 4\n")
    try:
        import yaml  # noqa: F401
    except ImportError:
        with pytest.raises(WeightIOError, match="pip install pyyaml"):
            load_config(p)
        return
    assert load_config(p).rule_for("x").pattern.m == 4


def test_npz_bomb_refused_from_the_zip_directory(tmp_path, monkeypatch):
    """A small .npz that unpacks to far more than memory is refused before anything is unpacked,
    and only the selected arrays are ever unpacked."""
    import numpy as np
    import pytest
    from hwcosim.pruning import io as wio

    np.savez_compressed(tmp_path / "bomb.npz", big=np.zeros((4096, 4096), np.float32), w=np.ones((4, 8), np.float32))
    assert (tmp_path / "bomb.npz").stat().st_size < 200_000
    monkeypatch.setenv("HWCOSIM_MEM_BUDGET", "1M")   # the fixed budget (hwcosim.models.budget), set to 1 MiB
    with pytest.raises(wio.WeightIOError, match="the largest, .big., 64.0 MiB.* would need 64.0 MiB"):
        wio.load_tensors(tmp_path / "bomb.npz")
    got = wio.load_tensors(tmp_path / "bomb.npz", keep={"w"}.__contains__)   # the small one alone is fine
    assert list(got) == ["w"]
    assert wio.npz_members(tmp_path / "bomb.npz")["big"] > 64 << 20
