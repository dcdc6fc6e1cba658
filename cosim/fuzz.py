"""Fuzzing of every reader of user files: weights, pruned-weight formats, configs, vectors.

A *target* takes the bytes of one user file, writes them where the reader expects them (with
valid companion files where a format has several, e.g. a CSB manifest beside its ``.npz``),
and calls the reader. The reader may accept the file or refuse it with its documented error
(:class:`pruning.io.WeightIOError`, :class:`pruning.formats.csb.FormatError`, ``ValueError``
for vectors), which ``hwcosim`` prints as one line with exit status 2. Any other exception is
a bug: it would reach the user as a traceback.

The same targets serve two fuzzers:

- property tests with hypothesis (``tests/test_fuzz_readers.py``: fast, run by ``make test``);
- coverage-guided fuzzing with atheris (libFuzzer) for a bounded time:
  ``python -m cosim.fuzz --seconds 60`` splits the time over the targets, runs each in its own
  process (``fuzz/readers.py``) with a seed corpus of valid files written by :func:`seeds`, and
  keeps a crashing input in ``build/fuzz/crashes/``. Copy it to
  ``fuzz/regressions/<target>/`` and ``tests/test_fuzz_regressions.py`` replays it forever.

Exit status of ``python -m cosim.fuzz``: 0 no crash, 1 a crash (its file and exception are
printed), 2 bad arguments or atheris missing (``pip install atheris``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Target", "TARGETS", "KNOWN_BUGS", "Crash", "known_bug", "run_target", "seeds", "mutations", "main"]

REPO = Path(__file__).resolve().parent.parent


class Crash(AssertionError):
    """A reader raised an exception other than its documented error (``__cause__``), or
    accepted a file and returned something malformed (cause :class:`WrongResult`)."""


class WrongResult(Exception):
    """The reader returned a malformed result instead of refusing the file."""


@dataclass(frozen=True)
class Target:
    """One reader under test.

    ``write(workdir, data)`` places the fuzzed bytes (and any fixed companion files) and
    returns the path to give to ``read``; ``errors`` are the exceptions that mean "refused
    cleanly".
    """

    name: str
    write: Callable[[Path, bytes], Path]
    read: Callable[[Path], object]
    errors: tuple[type[BaseException], ...]
    doc: str = ""
    check: Callable[[object], str | None] | None = None   # a problem with an accepted result, or None


# --- valid files the fuzzers start from --------------------------------------------------------

def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _npz_bytes(compress: bool = False, **arrays) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrays)
    return buf.getvalue()


def _weights(seed: int = 0, shape=(8, 16)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _safetensors_bytes(**arrays) -> bytes:
    from safetensors.numpy import save

    return save(arrays)


def _torch_bytes(**arrays) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}, buf)
    return buf.getvalue()


_CONFIG = b'''format = "Q2.6"

[[rule]]
tensors = "*.bias"
skip = true

[[rule]]
tensors = ["fc.weight", "lstm.*"]
pattern = "bbs"
banks = 4
sparsity = 0.75
format = "Q1.7"
'''


def _bundle(kind: str) -> dict[str, bytes]:
    """Files of a valid pruned-weight bundle of ``kind`` (csb, fss, nm, sparse): name -> bytes."""
    from pruning.formats import csb, fss, nm, sparse

    w = _weights(1, (8, 16)).astype(np.float64)
    with tempfile.TemporaryDirectory() as d:
        if kind == "csb":
            csb.save(csb.encode(w, 4, sparsity=0.5), d, "w")
        elif kind == "fss":
            fss.save(fss.encode(w, (2, 4), sparsity=0.5), d, "w", images=("hex",))
        elif kind == "nm":
            nm.save(nm.encode(w, 2, 4), d, "w", images=("hex",))
        elif kind == "sparse":
            mask = np.abs(w) > 0.5
            sparse.save(sparse.to_csr(w, mask), d, "w")
        else:
            raise ValueError(kind)
        return {p.name: p.read_bytes() for p in sorted(Path(d).iterdir())}


_BUNDLES: dict[str, dict[str, bytes]] = {}


def bundle(kind: str) -> dict[str, bytes]:
    if kind not in _BUNDLES:
        _BUNDLES[kind] = _bundle(kind)
    return _BUNDLES[kind]


def seeds(target: str) -> list[bytes]:
    """Valid (and a few near-valid) inputs of ``target``: the fuzzers' starting corpus."""
    w = _weights()
    if target == "npy":
        return [_npy_bytes(w), _npy_bytes(w.astype(np.float16)), _npy_bytes(np.arange(12, dtype=np.int8).reshape(3, 4)),
                _npy_bytes(np.asfortranarray(w.astype(np.float64)))]
    if target == "npz":
        return [_npz_bytes(**{"fc.weight": w, "fc.bias": w[0]}), _npz_bytes(True, a=w)]
    if target == "safetensors":
        return [_safetensors_bytes(**{"fc.weight": w, "fc.bias": w[0].copy()}),
                _safetensors_bytes(a=w.astype(np.float16))]
    if target == "torch":
        return [_torch_bytes(**{"fc.weight": w, "fc.bias": w[0].copy()})]
    if target == "config":
        return [_CONFIG, b'[[rule]]\ntensors = "*"\npattern = "nm"\nn = 2\nm = 4\n']
    if target == "vectors":
        return [_npy_bytes(w[0]), _npy_bytes(w[:2])]
    kind, _, part = target.partition("-")
    files = bundle(kind)
    if part == "manifest":
        return [files["w.json"]]
    if part == "npz":
        return [files["w.npz"]]
    if part == "hex":
        return [files["w.hex"]]
    raise ValueError(f"no seeds for target {target!r}")


def mutations(data: bytes, rng: np.random.Generator, n: int = 8) -> list[bytes]:
    """Cheap structure-blind variants of ``data``: truncations, bit flips, byte runs."""
    out = [b"", data[: len(data) // 2], data[:-1], data + b"\0"]
    for _ in range(n):
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            if b:
                i = int(rng.integers(len(b)))
                b[i] ^= 1 << int(rng.integers(8))
        out.append(bytes(b))
    return out


# --- targets -------------------------------------------------------------------------------------

def _single(suffix: str, stem: str = "fuzz") -> Callable[[Path, bytes], Path]:
    def write(d: Path, data: bytes) -> Path:
        p = d / f"{stem}{suffix}"
        p.write_bytes(data)
        return p
    return write


def _bundle_writer(kind: str, part: str) -> Callable[[Path, bytes], Path]:
    """Write a valid ``kind`` bundle with its ``w.<part>`` file replaced by the fuzzed bytes."""
    def write(d: Path, data: bytes) -> Path:
        for name, content in bundle(kind).items():
            (d / name).write_bytes(data if name == f"w.{part}" else content)
        return d / "w.json"
    return write


def _load_tensors(p: Path):
    from pruning.io import load_tensors

    return load_tensors(p)


def _tensors_ok(res) -> str | None:
    if not isinstance(res, dict):   # (an empty dict is fine: the CLI says "nothing to prune")
        return f"returned {type(res).__name__}, not a dict of tensors"
    bad = {k: type(v).__name__ for k, v in res.items() if not isinstance(k, str) or not isinstance(v, np.ndarray)}
    return f"returned non-array tensors {bad}" if bad else None


def _load_config(p: Path):
    from pruning.io import load_config

    return load_config(p)


def _load_vectors(p: Path):
    from cosim.commands import _load_vectors

    return _load_vectors(str(p), 16)


def _format_loader(kind: str) -> Callable[[Path], object]:
    def read(p: Path):
        import importlib

        return importlib.import_module(f"pruning.formats.{kind}").load(p)
    return read


def _targets() -> dict[str, Target]:
    from pruning.formats.csb import FormatError
    from pruning.io import WeightIOError

    t = [
        Target("npy", _single(".npy"), _load_tensors, (WeightIOError,), "weights .npy (pruning.io)", _tensors_ok),
        Target("npz", _single(".npz"), _load_tensors, (WeightIOError,), "weights .npz (pruning.io)", _tensors_ok),
        Target("safetensors", _single(".safetensors"), _load_tensors, (WeightIOError,),
               "weights .safetensors (pruning.io)", _tensors_ok),
        Target("torch", _single(".pt"), _load_tensors, (WeightIOError,), "PyTorch state dict .pt (pruning.io)",
               _tensors_ok),
        Target("config", _single(".toml"), _load_config, (WeightIOError,), "TOML pattern config (pruning.io)"),
        Target("vectors", _single(".npy"), _load_vectors, (ValueError,), "hwcosim sim --vector .npy"),
    ]
    # (csb.load does not read the .hex image, so there is no csb-hex target)
    for kind, parts in (("csb", ("manifest", "npz")), ("fss", ("manifest", "npz", "hex")),
                        ("nm", ("manifest", "npz", "hex")), ("sparse", ("manifest", "npz"))):
        for part in parts:
            suffix = "json" if part == "manifest" else part
            t.append(Target(f"{kind}-{part}", _bundle_writer(kind, suffix), _format_loader(kind), (FormatError,),
                            f"{kind.upper()} bundle, fuzzed .{suffix} (pruning.formats.{kind})"))
    return {x.name: x for x in t}


class _Lazy(dict):
    def _fill(self):
        if not dict.__len__(self):
            self.update(_targets())

    def __getitem__(self, k):
        self._fill()
        return dict.__getitem__(self, k)

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        self._fill()
        return dict.__len__(self)

    def __contains__(self, k):
        self._fill()
        return dict.__contains__(self, k)

    def keys(self):
        self._fill()
        return dict.keys(self)

    def values(self):
        self._fill()
        return dict.values(self)

    def items(self):
        self._fill()
        return dict.items(self)


#: name -> :class:`Target` (built on first use: importing cosim.fuzz stays cheap)
TARGETS: dict[str, Target] = _Lazy()


#: Reader bugs already recorded by strict-xfail tests in tests/test_fuzz_regressions.py:
#: (target, exception type name). The atheris harness skips them to look for new ones; remove
#: an entry when the bug is fixed (its xfail test then fails as XPASS, a reminder).
KNOWN_BUGS: frozenset[tuple[str, str]] = frozenset()  # (target, exception) pairs still open; none now


def known_bug(target: str, exc: BaseException | None) -> bool:
    return exc is not None and (target, type(exc).__name__) in KNOWN_BUGS


def run_target(name: str, data: bytes, workdir: Path | None = None):
    """Feed ``data`` to target ``name``; return the reader's result or its clean error.

    Raises :class:`Crash` (chained to the original) for any other exception.
    """
    t = TARGETS[name]
    ctx = contextlib.nullcontext(workdir) if workdir is not None else tempfile.TemporaryDirectory()
    with ctx as d, warnings_quiet():
        d = Path(d)
        for old in d.iterdir():
            if old.is_file():
                old.unlink()
        path = t.write(d, data)
        try:
            res = t.read(path)
        except t.errors as e:
            if not str(e).strip():
                raise Crash(f"{name}: {type(e).__name__} with an empty message") from e
            return e
        except Exception as e:  # noqa: BLE001 - that is the point
            raise Crash(f"{name}: {type(e).__name__}: {e}") from e
        problem = t.check(res) if t.check is not None else None
        if problem:
            raise Crash(f"{name}: accepted the file but {problem}") from WrongResult(problem)
        return res


@contextlib.contextmanager
def warnings_quiet():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --- atheris driver ----------------------------------------------------------------------------------

def _write_corpus(names: list[str], root: Path) -> Path:
    """Seeds of every target, each prefixed with its selector byte (see ``fuzz/readers.py``)."""
    d = root / "corpus" / ("all" if names == list(TARGETS) else "-".join(names))
    d.mkdir(parents=True, exist_ok=True)
    for ti, n in enumerate(names):
        payloads = list(seeds(n))
        reg = REPO / "fuzz" / "regressions" / n
        if reg.is_dir():
            payloads += [f.read_bytes() for f in sorted(reg.iterdir()) if f.is_file()]
        for i, s in enumerate(payloads):
            (d / f"{n}-{i}").write_bytes(bytes([ti]) + s)
    return d


def _split_crash(artifact: Path, names: list[str], crashes: Path) -> tuple[str, Path]:
    data = artifact.read_bytes()
    name = names[data[0] % len(names)] if data else names[0]
    out = crashes / name / artifact.name.split("-")[-1]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data[1:])
    return name, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cosim.fuzz",
                                 description="Coverage-guided fuzzing (atheris) of the readers of user files.")
    ap.add_argument("--seconds", type=float, default=60, help="fuzzing time (default 60; start-up not counted)")
    ap.add_argument("--target", action="append", help="only this target (repeatable); default: all")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    ap.add_argument("-o", "--out", default=None, help="work folder (default build/fuzz)")
    args = ap.parse_args(argv)
    names = args.target or list(TARGETS)
    bad = [n for n in names if n not in TARGETS]
    if bad:
        print(f"error: unknown fuzz target(s) {', '.join(bad)}; known: {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    if args.list:
        for n in names:
            print(f"{n:18s} {TARGETS[n].doc}")
        return 0
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("error: coverage-guided fuzzing needs atheris: pip install atheris", file=sys.stderr)
        return 2
    if not args.seconds >= 1:
        print("error: --seconds must be at least 1", file=sys.stderr)
        return 2
    root = Path(args.out or Path(os.environ.get("HWCOSIM_BUILD", "build")) / "fuzz").resolve()
    raw = root / "artifacts"
    raw.mkdir(parents=True, exist_ok=True)
    corpus = _write_corpus(names, root)
    before = set(raw.iterdir())
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(REPO / "fuzz" / "readers.py"), ",".join(names), str(corpus),
         f"-max_total_time={int(args.seconds)}", "-rss_limit_mb=4096", "-timeout=30", "-max_len=65536",
         f"-artifact_prefix={raw}/", "-print_final_stats=1"],
        capture_output=True, text=True, cwd=root)
    (root / "fuzz.log").write_text(proc.stdout + proc.stderr)
    stats = dict(re.findall(r"^stat::(\w+):\s*(\S+)", proc.stderr, re.M))
    cov = re.findall(r" cov: (\d+) ", proc.stderr)
    print(f"fuzzed {len(names)} readers for {time.monotonic() - t0:.0f} s (incl. start-up): "
          f"{stats.get('number_of_executed_units', '?')} inputs, coverage {cov[-1] if cov else '?'} edges, "
          f"corpus {corpus}, log {root / 'fuzz.log'}")
    new = sorted(set(raw.iterdir()) - before)
    if proc.returncode == 0 and not new:
        return 0
    crash_lines = [ln for ln in (proc.stdout + proc.stderr).splitlines()
                   if "cosim.fuzz.Crash" in ln or ln.startswith("Crash")]
    for ln in crash_lines[-3:]:
        print(f"  {ln}", file=sys.stderr)
    for a in new:
        name, payload = _split_crash(a, names, root / "crashes")
        print(f"  crash in {name}: {payload} (copy it to fuzz/regressions/{name}/ for a regression test)",
              file=sys.stderr)
    if not new:
        print("  the fuzzer stopped without a crash file:\n  " + "\n  ".join(proc.stderr.splitlines()[-15:]),
              file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
