"""The commands the README and the docs show are real (issue 27, requirement 5).

Every ``hwcosim ...`` line in their code blocks (alternatives ``a|b`` expanded, ``[--quick]``
taken, other ``[...]`` dropped, ``export VAR=...`` lines of the same block applied) is

- accepted by the command-line parser (all of them, at once: a renamed option fails here), and
- run as shown, as a subprocess of this checkout's ``hwcosim`` in a temporary directory that holds
  the inputs the lines name (``weights.npy``, ``x.npy``, ``bert/``, ``train.py``, ...; the repository's
  ``models/``, ``cosim/`` and ``tests/`` linked in, so repository paths resolve), with a timeout;
  a non-zero exit fails. The cheap ones run in ``make test``; studies, RTL simulation, synthesis,
  place and route and benches (more than ~20 s even with ``--quick``) are marked ``slow`` and run
  in ``make bench``'s ``pytest -m slow``. A line that needs hardware (``--port``) is skipped.

Every ``make`` target they name exists (make itself is not run here).
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
import resource
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tinybert
from hwcosim.cosim.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
HWCOSIM_BIN = Path(sys.executable).with_name("hwcosim")


def _blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def _commands(prefix: str) -> list[tuple[str, str, dict]]:
    """``(doc, command line, environment from the block's export lines)`` of every ``prefix`` line."""
    out = []
    for doc in DOCS:
        for block in _blocks(doc.read_text(encoding="utf-8")):
            env: dict[str, str] = {}
            block = re.sub(r"\\\n\s*", " ", block)  # a shell line continued with a backslash is one line
            for line in block.splitlines():
                line = line.strip()
                if line.startswith("$ "):
                    line = line[2:]
                if line.startswith("export "):
                    env.update(w.split("=", 1) for w in shlex.split(line)[1:] if "=" in w)
                if line.startswith(prefix + " ") and "..." not in line:  # "..." marks a template
                    cmd = line.split("  #")[0].split(" # ")[0].strip()
                    out.append((doc.relative_to(ROOT).as_posix(), cmd, dict(env)))
    return out


def _expand(cmd: str) -> list[list[str]]:
    """``hwcosim a|b [--quick] [--x ADDR] y`` -> [[a, --quick, y], [b, --quick, y]]."""
    cmd = re.sub(r"\[(--quick)\]", r"\1", cmd)
    cmd = re.sub(r"\[[^\]]*\]", "", cmd)
    words = shlex.split(cmd)[1:]
    options = [w.split("|") if "|" in w and not w.startswith("-") else [w] for w in words]
    return [list(c) for c in itertools.product(*options)]


HWCOSIM = _commands("hwcosim")
MAKE = _commands("make")


def test_the_docs_show_commands():
    assert len(HWCOSIM) > 20 and len(MAKE) >= 2


@pytest.mark.parametrize("doc,cmd,env", HWCOSIM, ids=[f"{d}: {c[:60]}" for d, c, _ in HWCOSIM])
def test_hwcosim_command_parses(doc, cmd, env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if env.get("HWCOSIM_DESIGN_MODULES"):  # the block registers a design first (docs/adding-a-design.md)
        for p in env.get("PYTHONPATH", "").split(":"):
            monkeypatch.syspath_prepend(str(ROOT / p))
        monkeypatch.setenv("HWCOSIM_DESIGN_MODULES", env["HWCOSIM_DESIGN_MODULES"])
    parser = build_parser()
    for argv in _expand(cmd):
        try:
            parser.parse_args(argv)
        except SystemExit as e:
            raise AssertionError(f"{doc}: '{cmd}' -> hwcosim {' '.join(argv)} is refused (exit {e.code})") from None


@pytest.mark.parametrize("doc,cmd,env", MAKE, ids=[f"{d}: {c}" for d, c, _ in MAKE])
def test_make_target_exists(doc, cmd, env):
    targets = set(re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.M))
    for argv in _expand(cmd):
        for t in [a for a in argv if not a.startswith("-") and "=" not in a]:
            assert t in targets, f"{doc}: make {t} is not a target of the Makefile"


# ---- running them ----------------------------------------------------------------------------------
#: lines that run in make test: cheap (a few CPU seconds) even as shown; every other line is slow
CHEAP = [
    r"^prune --pattern ", r"^prune --config ", r"^build --list-boards$", r"^jobcheck ", r"^sim --check-simulator$",
    r"^formal --design toy-fir --list$", r"^verilog toy-fir --synth none", r"^cluster run ",
    r"^graph run pagerank --graph edges\.txt\.gz$", r"^prune bert/ --calibration ",
]
#: lines that cannot run here, and why
NEEDS_HARDWARE = r"--port /dev/tty"
TIMEOUT_CHEAP_S = 300
TIMEOUT_SLOW_S = 3600

RUNS = [(doc, argv, env) for doc, cmd, env in HWCOSIM for argv in _expand(cmd)]
_seen: set[tuple[str, ...]] = set()
RUNS = [r for r in RUNS if not (tuple(r[1]) in _seen or _seen.add(tuple(r[1])))]  # one run per distinct line


def _cheap(argv: list[str]) -> bool:
    line = " ".join(argv)
    return any(re.search(p, line) for p in CHEAP)


def _params():
    for doc, argv, env in RUNS:
        marks = [] if _cheap(argv) else [pytest.mark.slow]
        yield pytest.param(doc, argv, env, marks=marks, id=f"{doc}: {' '.join(argv)[:70]}")


def _workspace(tmp: Path, argv: list[str]) -> None:
    """The inputs the documented lines name, made small, in ``tmp``."""
    rng = np.random.default_rng(0)
    for name in ("models", "cosim", "tests"):
        (tmp / name).symlink_to(ROOT / name)
    np.save(tmp / "weights.npy", rng.standard_normal((64, 128)).astype(np.float32))
    np.save(tmp / "x.npy", rng.uniform(-1, 1, 128).astype(np.float32))
    (tmp / "train.py").write_text("import numpy as np\nx = np.ones((8, 4))\n"
                                  "print('loss', float((x @ np.ones(4)).mean()))\n")
    edges = rng.integers(0, 200, size=(1000, 2))
    with gzip.open(tmp / "edges.txt.gz", "wt") as f:
        f.write("# a small directed graph\n" + "".join(f"{a}\t{b}\n" for a, b in edges))
    from safetensors.numpy import save_file

    save_file({"fc1.weight": rng.standard_normal((32, 64)).astype(np.float32),
               "fc1.bias": np.zeros(32, np.float32),
               "fc2.weight": rng.standard_normal((16, 32)).astype(np.float32)}, str(tmp / "model.safetensors"))
    (tmp / "prune.toml").write_text('[[rule]]\ntensors = "*.weight"\npattern = "bbs"\nbanks = 4\nsparsity = 0.5\n')
    if "model.pt" in argv:
        torch = pytest.importorskip("torch", reason="the line prunes a PyTorch state dict")
        torch.save({"fc1.weight": torch.randn(32, 64), "fc1.bias": torch.zeros(32)}, tmp / "model.pt")
    if "bert/" in argv:
        tinybert.write(tmp / "bert")  # hidden 32, one block
        tinybert.sentences(tmp / "sentences.txt", 40)


def _hwcosim(argv: list[str], cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(HWCOSIM_BIN), *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _env(doc_env: dict, tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    for k, v in doc_env.items():
        env[k] = ":".join(str(tmp / p) for p in v.split(":")) if k == "PYTHONPATH" else v
    env["COLUMNS"] = "100"
    return env


@pytest.mark.parametrize("doc,argv,env", list(_params()))
def test_documented_command_runs(doc, argv, env, tmp_path):
    if re.search(NEEDS_HARDWARE, " ".join(argv)):
        pytest.skip("needs the board on a serial port")
    timeout = TIMEOUT_CHEAP_S if _cheap(argv) else TIMEOUT_SLOW_S
    _workspace(tmp_path, argv)
    run_env = _env(env, tmp_path)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # what a line reads that an earlier line of the same page writes: out/ (prune), a run folder (sim)
    uses_out = any(a.rstrip("/") == "out" for a in argv[1:]) and argv[0] != "prune"
    if uses_out:
        r = _hwcosim(["prune", "--pattern", "bbs", "--banks", "16", "--sparsity", "0.875", "weights.npy", "-o", "out/"],
                     tmp_path, run_env, timeout)
        assert r.returncode == 0, r.stderr[-2000:]
    if argv[0] == "check" and "build/sim/runs/RUN" in argv:
        for pre in (["prune", "--pattern", "bbs", "--banks", "16", "--sparsity", "0.875", "weights.npy", "-o", "out/"],
                    ["sim", "--csb", "out/", "--pes", "8", "--vector", "x.npy"]):
            r = _hwcosim(pre, tmp_path, run_env, timeout)
            assert r.returncode == 0, r.stderr[-2000:]
        runs = sorted((tmp_path / "build" / "sim" / "runs").iterdir())
        argv = [a if a != "build/sim/runs/RUN" else str(runs[-1].relative_to(tmp_path)) for a in argv]
    r = _hwcosim(argv, tmp_path, run_env, timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"\n{doc}: hwcosim {' '.join(argv)}: exit {r.returncode}, {cpu:.1f} CPU s")
    assert r.returncode == 0, (f"{doc}: 'hwcosim {' '.join(argv)}' exited {r.returncode}:\n"
                               + "\n".join((r.stdout + r.stderr).splitlines()[-15:]))


def test_the_split_between_make_test_and_slow():
    cheap = [a for _, a, _ in RUNS if _cheap(a)]
    assert len(cheap) >= 8, cheap
    assert all(re.search(p, " ".join(a)) for p in CHEAP for a in [next((x for x in cheap if re.search(p, " ".join(x))),
                                                                       ["<no line matches " + p + ">"])]), \
        "a CHEAP pattern matches no documented line (a doc line changed): update CHEAP"
