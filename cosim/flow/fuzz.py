"""Fuzzing of every reader of user files: weights (also ONNX), pruned-weight formats, TOML and
YAML configs, vectors, cluster scenarios, sweep specs and sweep cache entries, ``jobcheck``
scripts, EasyScale checkpoints and topology CSVs (``hwcosim fuzz --list``).

A *target* takes the bytes of one user file, writes them where the reader expects them (with
valid companion files where a format has several, e.g. a CSB manifest beside its ``.npz``),
and calls the reader (and, where a command goes on to use the result before any output, that
use: a scenario's topology and placement, a sweep's grid points, a cached point's metrics). The
reader may accept the file or refuse it with its documented error (:class:`hwcosim.pruning.io.WeightIOError`,
:class:`hwcosim.pruning.formats.csb.FormatError`, :class:`hwcosim.models.systems.cluster.scenario.ScenarioError`, ...),
whose message must be one line: ``hwcosim`` prints it with exit status 2. Any other exception is
a bug (it would reach the user as a traceback), and so is a result the target's check finds
malformed. Two readers never refuse: ``jobcheck`` reports a script Python would refuse as a
``syntax`` finding, and a damaged sweep cache entry is a miss (the point runs again).

The same targets serve two fuzzers:

- property tests with hypothesis (``tests/flow/test_fuzz_readers.py``: fast, run by ``make test``);
- coverage-guided fuzzing with atheris (libFuzzer) for a bounded time:
  ``hwcosim fuzz --seconds 60`` splits the time over the targets, runs each in its own
  process (``fuzz/readers.py``) with a seed corpus of valid files written by :func:`seeds`, and
  keeps a crashing input in ``build/fuzz/crashes/``. Copy it to
  ``fuzz/regressions/<target>/`` and ``tests/flow/test_fuzz_regressions.py`` replays it forever.

Exit status of ``hwcosim fuzz``: 0 no crash, 1 a crash (its file and exception are
printed), 2 bad arguments or atheris missing (``pip install atheris``).
"""

from __future__ import annotations

import contextlib
import io
import json
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
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["Target", "TARGETS", "KNOWN_BUGS", "Crash", "known_bug", "run_target", "seeds", "mutations", "run",
           "check_targets"]

REPO = Path(__file__).resolve().parents[2]


class Crash(CheckFailed, AssertionError):
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
    from hwcosim.pruning.formats import csb, fss, nm, sparse

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


_CONFIG_YAML = b'''# the TOML seed's config, in YAML
format: Q2.6
rule:
  - tensors: "*.bias"
    skip: true
  - tensors: [fc.weight, "lstm.*"]
    pattern: bbs
    banks: 4
    sparsity: 0.75
    format: Q1.7
'''


def _onnx_bytes(kind: str = "mlp") -> bytes:
    """A small valid ONNX model: Gemm (transB) + MatMul, or one bf16 and one int8 initialiser."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    if kind == "mlp":
        w = {"fc1.weight": rng.standard_normal((8, 16)).astype(np.float32),
             "fc1.bias": rng.standard_normal(8).astype(np.float32),
             "fc2.weight": rng.standard_normal((8, 4)).astype(np.float32)}
        nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
                 helper.make_node("Relu", ["h"], ["r"]), helper.make_node("MatMul", ["r", "fc2.weight"], ["y"])]
        inits = [numpy_helper.from_array(a, k) for k, a in w.items()]
        ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])]
        outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])]
    else:
        inits = [helper.make_tensor("w.bf16", TensorProto.BFLOAT16, [4, 4], rng.standard_normal(16).tolist()),
                 numpy_helper.from_array(np.arange(-8, 8, dtype=np.int8).reshape(4, 4), "w.int8")]
        nodes = [helper.make_node("MatMul", ["x", "w.bf16"], ["y"])]
        ins = [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["n", 4])]
        outs = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, ["n", 4])]
    model = helper.make_model(helper.make_graph(nodes, "g", ins, outs, initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17)], producer_name="hwcosim-fuzz")
    model.ir_version = 8
    return model.SerializeToString()


def _checkpoint_bytes() -> bytes:
    """A real EasyScale checkpoint (2 ESTs, hidden 4, after 2 steps), trained inline."""
    from hwcosim.models.systems.elastic.easyscale import EasyScaleConfig, EasyScaleTrainer

    with EasyScaleTrainer(EasyScaleConfig(logical_workers=2, batch_per_worker=8, hidden=4), physical=None) as t:
        t.train(2)
        return t.checkpoint_bytes()


_SWEEP_CACHE = (b'{"status": "ok", "raw": {"cycles": 140, "ideal": 128, "utilisation": 0.914, "mismatches": 0, '
                b'"dut_mac_beats": 64}, "seconds": 2.5}\n')
_TOPO_CSV = b"ip,DSW,PSW,ASW\nh0,G1,P1,S1\nh1,G1,P1,S1\nh2,G1,P1,S2\nh3,G1,P2,S1\n"

_BUNDLES: dict[str, dict[str, bytes]] = {}
_MEMO: dict[str, bytes] = {}


def _memo(key: str, make: Callable[[], bytes]) -> bytes:
    if key not in _MEMO:
        _MEMO[key] = make()
    return _MEMO[key]


def bundle(kind: str) -> dict[str, bytes]:
    if kind not in _BUNDLES:
        _BUNDLES[kind] = _bundle(kind)
    return _BUNDLES[kind]


def _have_dataset(name: str) -> bool:
    """Whether the data directory holds dataset ``name`` (a seed that reads it is left out if not)."""
    from hwcosim.models.data import DatasetMissing, dataset

    try:
        return dataset(name).is_dir()
    except DatasetMissing:
        return False


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
    if target.startswith("dense-out-"):
        return seeds(target.removeprefix("dense-out-"))
    if target == "onnx":
        return [_memo("onnx-mlp", _onnx_bytes), _memo("onnx-bf16", lambda: _onnx_bytes("bf16"))]
    if target == "config-yaml":
        return [_CONFIG_YAML, b"rule:\n- {tensors: '*', pattern: nm, n: 2, m: 4}\n"]
    if target == "scenario":
        scen = REPO / "models" / "systems" / "cluster" / "scenarios"
        return [(scen / f).read_bytes() for f in ("small.toml", "lingjun.toml")
                if f == "small.toml" or _have_dataset("lingjun-2023")]  # lingjun.toml reads the real topology
    if target == "sweep-spec":
        return [f.read_bytes() for f in sorted((REPO / "cosim" / "flow" / "sweeps").glob("*.toml"))]
    if target == "sweep-cache":
        return [_SWEEP_CACHE]
    if target == "jobcheck":
        corpus = REPO / "models" / "systems" / "jobs" / "corpus"
        return [(corpus / f).read_bytes() for f in ("ok_autoencoder.py", "bad_path_data.py", "bad_api_shuffle.py")]
    if target == "easyscale-checkpoint":
        return [_memo("checkpoint", _checkpoint_bytes)]
    if target == "topology-csv":
        if not _have_dataset("lingjun-2023"):  # the real topology's first rows only when the data directory has it
            return [_TOPO_CSV]
        from hwcosim.models.data import dataset

        lingjun = dataset("lingjun-2023", "topo.csv").read_bytes()
        return [_TOPO_CSV, b"".join(lingjun.splitlines(keepends=True)[:40])]
    kind, _, part = target.partition("-")
    files = bundle(kind)
    if part == "manifest":
        return [files["w.json"]]
    if part == "npz":
        return [files["w.npz"]]
    if part == "hex":
        return [files["w.hex"]]
    raise ValueError(f"no seeds for target {target!r}")


#: Byte runs that reach the limits of text parsers rather than their grammar: brackets nested past
#: the recursion limit, an integer past Python's 4300-digit int/str limit, invalid UTF-8, a NUL.
DEEP_RUNS = (b"[" * 3000, b"{a=" * 1500, b"(" * 3000, b"- " * 3000, b"9" * 5000, b"\xff\xfe", b"\0")


def mutations(data: bytes, rng: np.random.Generator, n: int = 8) -> list[bytes]:
    """Cheap structure-blind variants of ``data``: truncations, bit flips, parser-limit runs (:data:`DEEP_RUNS`)."""
    out = [b"", data[: len(data) // 2], data[:-1], data + b"\0"]
    for run in DEEP_RUNS:
        i = int(rng.integers(len(data) + 1))
        out.append(data[:i] + run + data[i:])
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
    from hwcosim.pruning.io import load_tensors

    return load_tensors(p)


def _load_dense_out(p: Path):
    """``hwcosim prune W --dense-out``: the weights are read (pruning.io), then read again and written
    back with the first tensor replaced (pruning.roundtrip, its own reader); returns the output's
    tensors read back."""
    from hwcosim.pruning.io import load_tensors
    from hwcosim.pruning.roundtrip import write_dense

    tensors = load_tensors(p)
    repl = {k: np.zeros_like(v) for k, v in list(tensors.items())[:1]}
    dst = p.with_name("dense-out" + p.suffix)
    write_dense(p, dst, repl)
    return load_tensors(dst)


def _tensors_ok(res) -> str | None:
    if not isinstance(res, dict):   # (an empty dict is fine: the CLI says "nothing to prune")
        return f"returned {type(res).__name__}, not a dict of tensors"
    bad = {k: type(v).__name__ for k, v in res.items() if not isinstance(k, str) or not isinstance(v, np.ndarray)}
    return f"returned non-array tensors {bad}" if bad else None


def _load_config(p: Path):
    from hwcosim.pruning.io import load_config

    return load_config(p)


def _load_vectors(p: Path):
    from hwcosim.cosim.flow.vectors import load_vectors

    return load_vectors(str(p), 16)


def _config_ok(res) -> str | None:
    from hwcosim.models.fixedpoint import Q
    from hwcosim.pruning.base import Pattern
    from hwcosim.pruning.io import PruneConfig, Rule

    if not isinstance(res, PruneConfig) or not res.rules:
        return f"returned {type(res).__name__} without rules, not a PruneConfig"
    if res.fmt is not None and not isinstance(res.fmt, Q):
        return f"default format {res.fmt!r} is not a Q"
    for r in res.rules:
        if not (isinstance(r, Rule) and r.globs and all(isinstance(g, str) for g in r.globs)):
            return f"rule {r!r} has no string globs"
        if not (r.pattern is None or isinstance(r.pattern, Pattern)) or not (r.fmt is None or isinstance(r.fmt, Q)):
            return f"rule {r!r} has a pattern or format of the wrong type"
    return None


def _load_onnx(p: Path):
    from hwcosim.pruning.io import load_tensors
    from hwcosim.pruning.onnx_io import consumers

    return load_tensors(p), consumers(p)


def _onnx_ok(res) -> str | None:
    tensors, cons = res
    bad = _tensors_ok(tensors)
    if bad:
        return bad
    if set(cons) != set(tensors):
        return f"consumers() names {sorted(cons)[:4]}, the tensors are {sorted(tensors)[:4]}"
    return None


def _load_scenario(p: Path):
    """What ``hwcosim cluster run`` does before simulating: parse, build the topology, place, fail links."""
    from hwcosim.models.systems.cluster.scenario import load_scenario, prepare

    sc = load_scenario(p)
    topo, places, links = prepare(sc)
    return sc, topo, places, links


def _scenario_ok(res) -> str | None:
    from hwcosim.models.systems.cluster.scenario import MAX_GPUS, Scenario

    sc, topo, places, links = res
    if not isinstance(sc, Scenario) or not sc.jobs or not isinstance(sc.name, str) or "/" in sc.name:
        return f"returned a malformed scenario {sc!r:.200}"
    if topo.n_gpus > MAX_GPUS or len(places) != len(sc.jobs) or len(links) != len(sc.failures):
        return "the topology, placements or failed links do not match the scenario"
    if not 0 <= sc.seed < 2**63:
        return f"seed {sc.seed} does not fit the simulator's 64-bit hashes"
    return None


def _load_sweep(p: Path):
    """What ``hwcosim sweep SPEC.toml`` checks before it starts a worker: the spec and its points."""
    from hwcosim.cosim.flow.sweep import expand, load_spec

    spec = load_spec(p)
    return spec, expand(spec)[1]


def _sweep_ok(res) -> str | None:
    import math
    import re as _re

    from hwcosim.cosim.flow.sweep import _COUNTS, MAX_COUNT, MAX_POINTS
    from hwcosim.cosim.flow.synth import TARGETS as SYNTH

    spec, points = res
    if not isinstance(spec.name, str) or not _re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", spec.name):
        return f"the output folder name {spec.name!r} is not a plain name"
    if spec.sim not in (None, "verilator", "icarus") or spec.synth not in (None, *SYNTH):
        return f"sim {spec.sim!r} / synth {spec.synth!r} would fail later"
    if spec.clock_mhz is not None and not (isinstance(spec.clock_mhz, (int, float)) and 0 < spec.clock_mhz
                                           and math.isfinite(spec.clock_mhz)):
        return f"clock_mhz {spec.clock_mhz!r}"
    if not 1 <= len(points) <= MAX_POINTS:
        return f"{len(points)} points"
    for pt in points:
        if any(not 1 <= pt.workload[k] <= MAX_COUNT for k in _COUNTS if k in pt.workload):
            return f"workload {pt.workload} out of range"
    return None


_SWEEP_POINT: list = []


def _load_sweep_cache(p: Path):
    """A cached sweep point as ``hwcosim sweep`` consumes it: read, finish (metrics), Pareto, table, JSON."""
    import json

    from hwcosim.cosim.flow import sweep

    if not _SWEEP_POINT:
        spec = sweep.SweepSpec(design="bbs-spmxv", params={"rows": 16, "cols": 32, "banks": 4},
                               workload={"sparsity": 0.5}, grid={"pes": [2]}, name="fuzz")
        _SWEEP_POINT.extend(sweep.expand(spec))
    ad, points = _SWEEP_POINT
    pt = points[0]
    cached = sweep._read_cache(p, "sim")
    if cached is None or not sweep._usable(ad, pt, cached, 200.0):
        return None
    rec = {"index": 0, "point": pt.label, "params": {}, "workload": pt.workload, "status": "pending",
           "cached": {"sim": True, "synth": False}, "_sim": cached, "_synth": None}
    sweep._finish(ad, pt, rec, 200.0, None)
    report = {"name": "fuzz", "design": ad.design, "sim": "verilator", "clock_mhz": 200.0, "grid": {"pes": [2]},
              "synth": None, "points": [rec]}
    sweep.plot_all(ad, report, p.parent, draw=False)
    sweep.results_table(ad, report)
    json.dumps(report)
    return rec


def _sweep_cache_ok(rec) -> str | None:
    if rec is not None and rec.get("status") != "ok":   # a cache entry is used whole, or is a miss
        return f"a cached point ended {rec.get('status')!r}: {rec.get('error', '')[:100]}"
    return None


def _jobcheck(p: Path):
    from hwcosim.models.systems.jobs.jobcheck import static_check

    return static_check(p, [], cwd=p.parent, cuda_available=False)


def _jobcheck_ok(res) -> str | None:
    from hwcosim.models.systems.jobs.jobcheck import CATEGORIES, Finding

    findings, batch = res
    if not all(isinstance(f, Finding) and f.category in CATEGORIES for f in findings):
        return "findings of the wrong type"
    if batch is not None and not isinstance(batch, int):
        return f"full batch {batch!r} is not an integer"
    return None


def _load_checkpoint(p: Path):
    from hwcosim.models.systems.elastic.easyscale import read_checkpoint

    return read_checkpoint(p)


def _checkpoint_ok(ck) -> str | None:
    from hwcosim.models.systems.elastic.easyscale import EasyScaleConfig

    cfg = ck["cfg"]
    if not isinstance(cfg, EasyScaleConfig):
        return "cfg is not an EasyScaleConfig"
    for k in ("params", "velocity"):
        if ck[k].dtype != np.float64 or ck[k].ndim != 1 or ck[k].shape != ck["params"].shape:
            return f"{k} has dtype {ck[k].dtype}, shape {ck[k].shape}"
    if sorted(ck["contexts"]) != list(range(cfg.logical_workers)):
        return "EST contexts do not cover the logical workers"
    np.random.PCG64().state = ck["contexts"][0]["rng"]
    return None


def _load_topology(p: Path):
    from hwcosim.models.systems.cluster.topology import lingjun_2023

    return lingjun_2023(p)


def _topology_ok(t) -> str | None:
    if t.n_hosts < 1 or t.n_tors < 1 or not np.isfinite(t.capacity).all():
        return f"topology of {t.n_hosts} hosts, {t.n_tors} ToRs"
    return None


def _format_loader(kind: str) -> Callable[[Path], object]:
    def read(p: Path):
        import importlib

        return importlib.import_module(f"hwcosim.pruning.formats.{kind}").load(p)
    return read


def _targets() -> dict[str, Target]:
    from hwcosim.models.systems.cluster.scenario import ScenarioError
    from hwcosim.models.systems.cluster.topology import TopologyError
    from hwcosim.models.systems.elastic.easyscale import CheckpointError
    from hwcosim.pruning.formats.csb import FormatError
    from hwcosim.pruning.io import WeightIOError
    from hwcosim.pruning.onnx_io import OnnxIOError
    from hwcosim.pruning.roundtrip import RoundTripError

    t = [
        Target("npy", _single(".npy"), _load_tensors, (WeightIOError,), "weights .npy (pruning.io)", _tensors_ok),
        Target("npz", _single(".npz"), _load_tensors, (WeightIOError,), "weights .npz (pruning.io)", _tensors_ok),
        Target("safetensors", _single(".safetensors"), _load_tensors, (WeightIOError,),
               "weights .safetensors (pruning.io)", _tensors_ok),
        Target("torch", _single(".pt"), _load_tensors, (WeightIOError,), "PyTorch state dict .pt (pruning.io)",
               _tensors_ok),
        Target("config", _single(".toml"), _load_config, (WeightIOError,), "TOML pattern config (pruning.io)",
               _config_ok),
        Target("vectors", _single(".npy"), _load_vectors, (UsageError,), "hwcosim sim --vector .npy"),
        Target("onnx", _single(".onnx"), _load_onnx, (WeightIOError, OnnxIOError),
               "hwcosim prune model.onnx: initialisers + consumers (pruning.onnx_io)", _onnx_ok),
        Target("config-yaml", _single(".yaml"), _load_config, (WeightIOError,), "YAML pattern config (pruning.io)",
               _config_ok),
        Target("scenario", _single(".toml", "scenario"), _load_scenario, (ScenarioError,),
               "hwcosim cluster run scenario.toml, up to the simulator (models.systems.cluster.scenario)",
               _scenario_ok),
        Target("sweep-spec", _single(".toml", "spec"), _load_sweep, (UsageError,),
               "hwcosim sweep SPEC.toml, spec and grid points (cosim.flow.sweep)", _sweep_ok),
        Target("sweep-cache", _single(".json", "sim-0123456789abcdef0123"), _load_sweep_cache, (),
               "hwcosim sweep --cache DIR: a cached point (a damaged one is a miss)", _sweep_cache_ok),
        Target("jobcheck", _single(".py", "train"), _jobcheck, (),
               "hwcosim jobcheck train.py, static pass (models.systems.jobs.jobcheck)", _jobcheck_ok),
        Target("easyscale-checkpoint", _single(".npz", "job"), _load_checkpoint, (CheckpointError,),
               "EasyScaleTrainer.from_checkpoint .npz (models.systems.elastic.easyscale)", _checkpoint_ok),
        *(Target(f"dense-out-{kind}", _single(f".{kind}"), _load_dense_out, (WeightIOError, RoundTripError),
                 f"hwcosim prune W.{kind} --dense-out: read back and rewritten (pruning.roundtrip)", _tensors_ok)
          for kind in ("npy", "npz", "safetensors")),
        Target("topology-csv", _single(".csv", "topo"), _load_topology, (TopologyError,),
               "lingjun_2023(path): Crux-format topology CSV (models.systems.cluster.topology)", _topology_ok),
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


#: name -> :class:`Target` (built on first use: importing cosim.flow.fuzz stays cheap)
TARGETS: dict[str, Target] = _Lazy()


#: Reader bugs already recorded by strict-xfail tests in tests/flow/test_fuzz_regressions.py:
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
            if "\n" in str(e).strip():   # hwcosim prints it as the one line of its refusal
                raise Crash(f"{name}: {type(e).__name__} message spans lines: {str(e)[:200]!r}") from e
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


def check_targets(targets=None) -> list[str]:
    """The fuzz target names chosen (all of :data:`TARGETS` when none); an unknown one is bad input."""
    names = list(targets or TARGETS)
    bad = [n for n in names if n not in TARGETS]
    if bad:
        raise UsageError(f"unknown fuzz target(s) {', '.join(bad)}; known: {', '.join(TARGETS)}")
    return names


def run(targets=None, seconds: float = 60, out: Path | str | None = None) -> dict:
    """Fuzz the readers ``targets`` (default all) with atheris for ``seconds`` in the work folder ``out``
    (default ``$HWCOSIM_BUILD/fuzz``). Returns what happened: ``names``, ``elapsed``, ``inputs``,
    ``coverage``, ``corpus``, ``log``, ``counts`` (inputs per target), ``crashes`` (``(target, payload)``
    pairs, each payload saved under ``crashes/``), ``crash_lines``, ``stderr_tail``, ``returncode``."""
    names = check_targets(targets)
    try:
        import atheris  # noqa: F401
    except ImportError:
        raise UsageError("coverage-guided fuzzing needs atheris: pip install atheris") from None
    if not seconds >= 1:
        raise UsageError(f"--seconds must be at least 1, not {seconds}")
    root = Path(out or Path(os.environ.get("HWCOSIM_BUILD", "build")) / "fuzz").resolve()
    raw = root / "artifacts"
    raw.mkdir(parents=True, exist_ok=True)
    corpus = _write_corpus(names, root)
    before = set(raw.iterdir())
    counts_file = root / "inputs_per_target.json"
    counts_file.unlink(missing_ok=True)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(REPO / "fuzz" / "readers.py"), ",".join(names), str(corpus),
         f"-max_total_time={int(seconds)}", "-rss_limit_mb=4096", "-timeout=30", "-max_len=65536",
         f"-artifact_prefix={raw}/", "-print_final_stats=1"],
        capture_output=True, text=True, cwd=root, env={**os.environ, "HWCOSIM_FUZZ_COUNTS": str(counts_file)})
    (root / "fuzz.log").write_text(proc.stdout + proc.stderr)
    stats = dict(re.findall(r"^stat::(\w+):\s*(\S+)", proc.stderr, re.M))
    cov = re.findall(r" cov: (\d+) ", proc.stderr)
    try:
        counts = json.loads(counts_file.read_text())
    except (OSError, ValueError):
        counts = {}
    new = sorted(set(raw.iterdir()) - before)
    return {"names": names, "elapsed": time.monotonic() - t0, "inputs": stats.get("number_of_executed_units", "?"),
            "coverage": cov[-1] if cov else "?", "corpus": corpus, "log": root / "fuzz.log", "counts": counts,
            "crashes": [_split_crash(a, names, root / "crashes") for a in new], "returncode": proc.returncode,
            "crash_lines": [ln for ln in (proc.stdout + proc.stderr).splitlines()
                            if "hwcosim.cosim.flow.fuzz.Crash" in ln or ln.startswith("Crash")],
            "stderr_tail": proc.stderr.splitlines()[-15:]}
