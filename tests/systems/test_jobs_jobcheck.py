"""hwcosim jobcheck: static checks, sandboxed dry run, corpus detection rate and false positives."""

import textwrap

import pytest
from hwcosim.cosim.cli.jobs import main as cli_main
from hwcosim.models.systems.jobs.jobcheck import (
    CheckConfig,
    Finding,
    check,
    corpus_scripts,
    evaluate_corpus,
    static_check,
)

FAST = CheckConfig(timeout_s=60)


def _script(tmp_path, body, name="train.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def test_init():
    with pytest.raises(ValueError, match="batches"):
        CheckConfig(batches=(8, 4))
    with pytest.raises(ValueError, match="device memory"):
        CheckConfig(device_memory_bytes=0)
    with pytest.raises(ValueError, match="category"):
        Finding("nope", "error", "x")


def test_static_module_guarded_and_local(tmp_path):
    _script(tmp_path, "X = 1\n", "helper.py")
    p = _script(tmp_path, """
        import numpy, helper
        try:
            import hwcosim_not_a_module_a
        except ImportError:
            pass
        import hwcosim_not_a_module_b
    """)
    f, _ = static_check(p, cwd=tmp_path)
    mods = [x.message for x in f if x.category == "module"]
    assert len(mods) == 1 and "hwcosim_not_a_module_b" in mods[0]


def test_static_paths_relative_to_cwd(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.npy").write_bytes(b"")
    p = _script(tmp_path / "sub", """
        import numpy as np
        np.load("d.npy")
    """)
    f, _ = static_check(p, cwd=tmp_path)
    assert [x.category for x in f] == ["path"] and "relative to the script" in f[0].message
    assert static_check(p, cwd=tmp_path / "sub")[0] == []


def test_static_cli_overrides_default(tmp_path):
    (tmp_path / "data.npz").write_bytes(b"")
    p = _script(tmp_path, """
        import argparse
        ap = argparse.ArgumentParser()
        ap.add_argument("--data", default="missing/train.npz")
        ap.add_argument("--batch-size", type=int, default=64)
        ap.add_argument("--out-dir", default="/sys/hwcosim_x")
    """)
    f, bs = static_check(p, ["--data", str(tmp_path / "data.npz"), "--batch-size=512", "--out-dir", str(tmp_path)],
                         cwd=tmp_path)
    assert f == [] and bs == 512
    f, bs = static_check(p, [], cwd=tmp_path)
    assert {x.category for x in f} == {"path", "permission"} and bs == 64


def test_static_api_misuse(tmp_path):
    p = _script(tmp_path, """
        import numpy as np
        a = np.arange(6)
        b = sorted(a)
        a = a.reshape(2, 3)
        a.astype(float)
        r = a.tolist()
        r = r.sort()
    """)
    f, _ = static_check(p, cwd=tmp_path)
    assert sorted(x.line for x in f if x.category == "api") == [6, 8]


def test_dry_run_sandbox_blocks_network(tmp_path):
    p = _script(tmp_path, """
        import socket
        socket.create_connection(("example.com", 80), timeout=1)
    """)
    rep = check(p, cfg=FAST, cwd=tmp_path)
    assert not rep.ok and "network access is disabled" in rep.errors[0].message


def test_dry_run_uses_tiny_batch_and_clean_script_passes(tmp_path):
    p = _script(tmp_path, """
        import argparse, os
        import numpy as np
        ap = argparse.ArgumentParser()
        ap.add_argument("--batch-size", type=int, default=100000)
        a = ap.parse_args()
        assert a.batch_size == int(os.environ["HWCOSIM_BATCH"]) <= 32
        x = np.ones((a.batch_size, 1000))
        print("loss", float(x.sum()))
    """)
    rep = check(p, ["--batch-size", "100000"], cfg=FAST, cwd=tmp_path)
    assert rep.findings == [], rep.findings
    # per sample 8 kB: the linear fit extrapolates to ~0.8 GB at batch 100000
    assert 0.6e9 < rep.memory_estimate_bytes < 1.0e9
    rep = check(p, ["--batch-size", "100000"], cfg=CheckConfig(device_memory_bytes=0.5e9), cwd=tmp_path)
    assert rep.categories == {"memory"}


def test_dry_run_nan_in_printed_loss(tmp_path):
    p = _script(tmp_path, "print('step 0 loss nan')\n")
    assert check(p, cfg=FAST, cwd=tmp_path).categories == {"numeric"}


def test_dry_run_timeout(tmp_path):
    p = _script(tmp_path, "while True:\n    pass\n")
    rep = check(p, cfg=CheckConfig(timeout_s=2), cwd=tmp_path)
    assert rep.categories == {"timeout"} and rep.ok


@pytest.fixture(scope="module")
def corpus_numpy():
    names = {p.name for p, _, _ in corpus_scripts()}
    assert {"ok_mlp.py", "ok_digits_softmax.py", "bad_shape.py", "bad_oom.py", "bad_oom_seq.py",
            "bad_numeric_std.py"} <= names
    calls = []
    r = evaluate_corpus(FAST, exclude_requires=("torch",), progress=lambda k, n, row: calls.append((k, n, row)))
    r["progress_calls"] = calls
    return r


def _report(r, capsys, label):
    with capsys.disabled():
        print(f"\njobcheck corpus ({label}): detected {r['detected']}/{r['broken']} ({r['detection_rate']:.0%}), "
              f"false positives {r['false_positives']}/{r['correct_scripts']}; missed {r['missed']}")


def test_corpus_detection_numpy(corpus_numpy, capsys):
    r = corpus_numpy
    _report(r, capsys, "numpy scripts")
    cats = {row["expect"] for row in r["rows"]}
    assert {"path", "module", "permission", "memory", "shape", "numeric", "api", "ok"} <= cats
    assert r["missed"] == [] and r["false_positive_scripts"] == []
    # progress: one call per script, in order, with its verdict
    n = len(r["rows"])
    assert [(k, m, row["script"]) for k, m, row in r["progress_calls"]] == \
        [(k + 1, n, row["script"]) for k, row in enumerate(r["rows"])]
    assert all(row["seconds"] > 0 for row in r["rows"])
    assert sum(row["expect"] == "memory" for row in r["rows"]) >= 2
    assert sum(row["expect"] == "numeric" for row in r["rows"]) >= 2


@pytest.mark.slow
def test_corpus_detection_torch(capsys):
    pytest.importorskip("torch")
    r = evaluate_corpus(FAST)
    _report(r, capsys, "all scripts, torch included")
    assert any("torch" in row["script"] for row in r["rows"])
    assert r["missed"] == [] and r["false_positive_scripts"] == []


def test_cli_jobcheck(tmp_path, capsys):
    p = _script(tmp_path, "import numpy as np\nprint(np.zeros(2) @ np.zeros(3))\n")
    # static checks alone cannot see a shape error that only happens at run time, and say so
    assert cli_main(["jobcheck", "-o", str(tmp_path / "o"), str(p)]) == 0
    assert "NOT executed" in capsys.readouterr().out
    assert cli_main(["jobcheck", "--run", "-o", str(tmp_path / "o"), str(p)]) == 1
    assert (tmp_path / "o" / "jobcheck_train.json").exists()
    out = capsys.readouterr().out
    assert "shape" in out and "EXECUTED" in out
    ok = _script(tmp_path, "print('fine')\n", "fine.py")
    assert cli_main(["jobcheck", "-o", str(tmp_path / "o"), str(ok)]) == 0
    code = cli_main(["jobcheck", str(tmp_path / "missing.py")])
    assert code == 2
    assert capsys.readouterr().err.strip().startswith("error: no such script")


def test_static_default_never_executes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran.txt"
    p = _script(tmp_path, f"open({str(marker)!r}, 'w').write('x')\nimport os\nos.system('true')\n")
    assert cli_main(["jobcheck", "-o", str(tmp_path / "o"), str(p)]) == 0
    assert not marker.exists()


def test_run_leaves_no_process_or_file_behind(tmp_path, monkeypatch):
    """A script that forks a child which outlives it, and writes into its working directory:
    the whole process group is killed when jobcheck returns, and the working directory is a
    scratch folder (the user's sees nothing)."""
    import time

    monkeypatch.chdir(tmp_path)
    late = tmp_path / "late.txt"
    p = _script(tmp_path, "import os, time\n"
                          "open('created_in_cwd.txt', 'w').write('x')\n"
                          "if os.fork() == 0:\n"
                          "    time.sleep(2)\n"
                          f"    open({str(late)!r}, 'w').write('x')\n"
                          "    os._exit(0)\n"
                          "print('parent done')\n")
    assert cli_main(["jobcheck", "--run", "-o", str(tmp_path / "o"), str(p)]) in (0, 1)
    time.sleep(3)
    assert not late.exists(), "a child of the dry run outlived jobcheck"
    assert not (tmp_path / "created_in_cwd.txt").exists()


@pytest.mark.parametrize("bad", ["1e300", "inf", "nan", "0", "-1"])
def test_timeout_range(tmp_path, capsys, bad):
    p = _script(tmp_path, "print(1)\n")
    assert cli_main(["jobcheck", "--timeout", bad, str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--timeout" in err[0]


def test_inplace_rules_match_the_libraries():
    """Every function and method the API rule calls in-place really returns None, checked by calling
    it; and the copying look-alikes it must not flag really return a value."""
    import importlib
    import random

    import numpy as np
    from hwcosim.models.systems.jobs.jobcheck import INPLACE_FUNCTIONS, INPLACE_METHODS

    for full in INPLACE_FUNCTIONS:
        mod, _, fn = full.rpartition(".")
        f = getattr(importlib.import_module(mod), fn)
        arg = [3, 1, 2] if "shuffle" in fn else 0
        assert f(arg) is None, full
    samples = {"list": lambda: [3, 1, 2], "ndarray": lambda: np.array([3.0, 1.0, 2.0]), "dict": dict, "set": set,
               "Generator": lambda: np.random.default_rng(0)}
    args = {"sort": (), "append": (1,), "extend": ([1],), "reverse": (), "update": ({},), "fill": (0.0,),
            "insert": (0, 1), "clear": ()}
    for meth, types in INPLACE_METHODS.items():
        for t in types:
            obj = samples[t]()
            a = (np.arange(3),) if meth == "shuffle" else args[meth]
            assert getattr(obj, meth)(*a) is None, (t, meth)
    # the copying look-alikes return new objects (so assigning them is right)
    x = np.array([3, 1, 2])
    assert np.sort(x) is not None and np.append(x, 1) is not None and sorted([2, 1]) is not None
    assert np.random.default_rng(0).permutation(3) is not None and random.sample([1, 2], 2) is not None


def test_healthy_scripts_raise_nothing(tmp_path):
    """Idioms that look like in-place misuse but are not."""
    src = ("import random\nimport numpy as np\nx = np.arange(5)\nlengths = np.sort(x)\n"
           "y = np.append(x, 1)\nz = sorted([3, 1])\nrng = np.random.default_rng(0)\n"
           "w = rng.permutation(x)\nv = random.sample([1, 2, 3], 2)\nd = dict(a=1) | {'b': 2}\n"
           "s = np.flip(x)\nprint(lengths, y, z, w, v, d, s)\n")
    p = _script(tmp_path, src, "healthy.py")
    rep = check(p, [], CheckConfig(dry_run=False))
    assert [f for f in rep.findings if f.category == "api"] == []


#: arguments to call each discarded-result method with, on a 2-D float array/tensor
_DISCARD_ARGS = {"reshape": (-1,), "astype": ("float32",), "transpose": (), "flatten": (), "squeeze": (),
                 "unsqueeze": (0,), "clip": (0.0, 1.0), "round": (), "copy": (), "ravel": (), "swapaxes": (0, 1),
                 "view": (), "detach": (), "contiguous": ()}


def _check_discarded(obj, meth, snapshot, same):
    before = snapshot(obj)
    res = getattr(obj, meth)(*_DISCARD_ARGS[meth])
    assert res is not None and res is not obj, meth  # a new object ...
    assert same(snapshot(obj), before), meth  # ... and the original unchanged: discarding it does nothing


def test_discarded_result_rule_matches_numpy():
    """Every method the 'result discarded' rule names returns a new object and leaves the original as
    it was, checked by calling it on a real numpy array (torch: the next test)."""
    import numpy as np
    from hwcosim.models.systems.jobs.jobcheck import _DISCARDED

    assert set(_DISCARD_ARGS) >= _DISCARDED
    on_numpy = [m for m in sorted(_DISCARDED) if hasattr(np.ndarray, m)]
    assert len(on_numpy) >= 9, on_numpy
    for meth in on_numpy:
        a = np.array([[0.25, 1.5, -2.0]])
        _check_discarded(a, meth, lambda x: (x.shape, x.dtype, x.copy()),
                         lambda s, t: s[0] == t[0] and s[1] == t[1] and np.array_equal(s[2], t[2]))
    # every name is a method of numpy's arrays or of torch's tensors (the torch-only ones below)
    assert set(_DISCARDED) - set(on_numpy) <= {"unsqueeze", "detach", "contiguous"}


def test_discarded_result_rule_matches_torch():
    torch = pytest.importorskip("torch")
    from hwcosim.models.systems.jobs.jobcheck import _DISCARDED

    on_torch = [m for m in sorted(_DISCARDED) if hasattr(torch.Tensor, m) and m in _DISCARD_ARGS and m != "astype"]
    for meth in on_torch:
        t = torch.tensor([[0.25, 1.5, -2.0]])
        if meth == "view":
            res = t.view(-1)
            assert res is not t and t.shape == (1, 3)
            continue
        if meth in ("contiguous", "detach"):  # may return the tensor itself when already so; never changes it
            before = t.clone()
            getattr(t, meth)()
            assert torch.equal(t, before)
            continue
        _check_discarded(t, meth, lambda x: (tuple(x.shape), x.dtype, x.clone()),
                         lambda s, u: s[0] == u[0] and s[1] == u[1] and torch.equal(s[2], u[2]))
    # Module.float()/half()/double() work in place: the rule must not name them
    m = torch.nn.Linear(2, 2)
    assert m.double() is m and m.weight.dtype == torch.float64
    assert not {"float", "double", "half"} & _DISCARDED


HEALTHY = sorted((__import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "jobcheck_healthy")
                 .glob("*.py"))


@pytest.mark.parametrize("script", [*HEALTHY, *[p for p, e, _ in corpus_scripts() if e == "ok"]],
                         ids=lambda p: p.name)
def test_healthy_corpus_raises_nothing(script):
    """Correct scripts (tests/fixtures/jobcheck_healthy and the corpus's ok_*): no finding from the static
    checks, except that a module this interpreter lacks (torch) is reported as missing."""
    import importlib.util

    rep = check(script, [], CheckConfig(dry_run=False), cwd=script.parent)
    found = [f for f in rep.findings
             if not (f.category == "module" and any(importlib.util.find_spec(m) is None and repr(m) in f.message
                                                    for m in ("torch",)))]
    assert found == [], [(f.category, f.message, f.line) for f in found]


def test_static_target_python(tmp_path):
    """With the job's interpreter given, a construct its grammar lacks is a syntax error (the job would not
    start there); without it, or on a version that has it, nothing is reported."""
    from hwcosim.models.errors import UsageError

    p = _script(tmp_path, "lr = 0.1\nname = f'LR_{lr}'\nif (n := len(name)) > 3:\n    print(name, n)\n")
    assert static_check(p, cwd=tmp_path)[0] == []
    f, _ = static_check(p, cwd=tmp_path, target_python="3.5")
    assert [(x.category, x.line) for x in f] == [("syntax", 2)] and "Python 3.5" in f[0].message
    f, _ = static_check(p, cwd=tmp_path, target_python="3.7")
    assert [(x.category, x.line) for x in f] == [("syntax", 3)]
    assert static_check(p, cwd=tmp_path, target_python="3.8")[0] == []
    with pytest.raises(UsageError, match="target Python"):
        CheckConfig(target_python="2.7")
    rep = check(p, [], CheckConfig(dry_run=False, target_python="3.5"))
    assert rep.categories == {"syntax"}
