"""Cluster scenarios as TOML files: ``hwcosim cluster run scenario.toml``.

A scenario names a topology, a set of jobs with their placement, a routing scheme, link failures
and a seed. It is read with :mod:`tomllib` into frozen dataclasses; every bad field raises one
:class:`ScenarioError` whose single line names the field (``jobs[1].dp``) and says how to fix it.
Example files: ``models/systems/cluster/scenarios/small.toml`` and ``lingjun.toml``.

.. code-block:: toml

    name = "small"
    seed = 0
    iterations = 20            # default for jobs that do not set their own

    [topology]
    generator = "clos"         # clos | rail-clos | fat-tree | lingjun-2023
    pods = 2                   # (rail-)clos: pods, tors_per_pod, hosts_per_tor; fat-tree: k
                               # (rail-clos: a "tor" is a rail group of gpus_per_host rail switches)
    tors_per_pod = 2
    hosts_per_tor = 4
    nic_gbps = 200.0           # any Topology parameter (gpus_per_host, tor_oversub, ...)

    [routing]
    scheme = "ecmp"            # ecmp | c4p | crux
    levels = 8                 # crux: hardware priority levels
    correction = false         # crux: pairwise correction runs (slower)

    [[jobs]]
    name = "gpt"
    dp = 4
    tp = 8
    pp = 1
    compute_s = 0.05
    grad_bytes = 1e9           # also act_bytes, tp_bytes, a2a_bytes (MoE all-to-all), alpha_s
    overlap = 0.3              # fraction of compute the DP all-reduce may run beside
    channels = 2
    algo = "ring"              # ring | tree
    placement = "packed"       # packed | spread | random
    start_s = 0.0

    [[failures]]
    at_s = 0.3
    kind = "tor-up"            # a link block (nvlink-up ... agg-down)
    index = [0, 1]             # link indices inside that block
    restore_s = 0.6            # optional
    effect = "down"            # down (capacity 0, routers told) | lossy (needs loss)
    # loss = 0.02              # lossy: each packet crossing the link is dropped with this
                               # probability and resent; see Simulator.lossy_links

    [cosim.melo]               # optional: only the RTL-in-the-loop bridges read [cosim.*]
    job = "gpt"                # whose DP ring transfers of one iteration become the flows
    scale = 1e-4               # flow bytes = ring hop bytes x scale (packet-simulable sizes)
    # failure = 1              # index of a lossy [[failures]] entry (default: the first lossy one)
    [cosim.kv]
    job = "gpt"                # workers = the job's DP ranks (GPU of TP rank 0, stage 0)
    [cosim.serve]
    device = "bbs"             # bbs | fss | both

The ``[cosim.melo]``, ``[cosim.serve]`` and ``[cosim.kv]`` tables hold what only ``hwcosim cosim
melo|serve|kv --scenario FILE`` needs (:data:`COSIM_KEYS` lists their keys); ``hwcosim cluster
run`` validates them and otherwise ignores them.

Placement policies (whole GPUs, first fit over hosts in policy order, skipping GPUs taken by
earlier jobs): ``packed`` takes hosts in id order (ToR by ToR), ``spread`` round-robins hosts over
the ToRs, ``random`` takes hosts in a seeded random order.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.safeparse import toml_loads

from .job import JobSpec
from .topology import LinkKind, Topology, clos, fat_tree, lingjun_2023, rail_clos

__all__ = ["ScenarioError", "TopologyConf", "JobConf", "RoutingConf", "FailureConf", "Scenario", "load_scenario",
           "parse_scenario", "prepare", "run_scenario", "PLACEMENTS", "SCHEMES", "GENERATORS", "MAX_GPUS",
           "MAX_LINKS", "MAX_JOBS", "EFFECTS", "COSIM_KEYS", "MAX_LOSS"]

PLACEMENTS = ("packed", "spread", "random")
SCHEMES = ("ecmp", "c4p", "crux")
GENERATORS = ("clos", "rail-clos", "fat-tree", "lingjun-2023")
EFFECTS = ("down", "lossy")
MAX_LOSS = 0.9  # a link that drops more than 90 % of its packets is a down link: use effect = "down"
#: Keys of the optional ``[cosim.<bridge>]`` tables: name -> (type, low bound or choices).
#: ``"job"`` names a [[jobs]] entry, ``"failure"`` indexes [[failures]] (checked against them).
COSIM_KEYS = {
    "melo": {"job": ("job", None), "scale": ("float+", None), "failure": ("failure", None),
             "mtu_bytes": ("int", 64), "window": ("int", 1), "rto_us": ("float+", None),
             "clock_mhz": ("float+", None)},
    "kv": {"job": ("job", None), "iterations": ("int", 1), "keys_per_iter": ("int", 1), "keys": ("int", 1),
           "theta": ("float", 0.0), "mem_latency": ("int", 1), "forward": ("bool", None),
           "compute_us": ("float", 0.0), "clock_mhz": ("float+", None)},
    "serve": {"device": ("choice", ("bbs", "fss", "both")), "requests": ("int", 1), "load": ("float+", None),
              "slo_us": ("float+", None), "p_stall": ("float", 0.0), "cache": ("bool", None),
              "clock_mhz": ("float+", None)},
}
_TOPO_INT = ("gpus_per_host", "nic_ports", "aggs_per_pod", "tor_lanes", "cores_per_plane", "core_lanes")
_TOPO_FLOAT = ("nvlink_gbps", "nic_gbps", "tor_oversub", "core_oversub", "hop_latency_s")
_GEN_INT = {"clos": ("pods", "tors_per_pod", "hosts_per_tor"),
            "rail-clos": ("pods", "tors_per_pod", "hosts_per_tor"),  # a "ToR" is a rail group here
            "fat-tree": ("k",), "lingjun-2023": ()}
#: Size limits of a scenario: the flow-level simulator is meant for clusters up to ~10^5 GPUs; a
#: topology past these (a typo such as ``gpus_per_host = 80000``) is refused before it is built.
MAX_GPUS = 1 << 20
MAX_LINKS = 1 << 23
MAX_CHANNELS = 64        # rings per collective (NCCL uses up to 32)
MAX_LEVELS = 64          # Crux hardware priority levels (switches offer 8)
MAX_SEED = 2**63 - 1
MAX_JOBS = 10_000        # [[jobs]] (and [[failures]]) tables per scenario: the simulator's cost grows with them
MAX_FILE_BYTES = 2 << 20  # a scenario file: 10,000 jobs of a few lines each fit; TOML parsing is ~0.5 MB/s
MAX_ITERATIONS = 100_000  # per job: a simulated training run of more steps than this is a typo (minutes each)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}")
_LINGJUN_SIZE = (847, 119, 3)  # hosts, ToRs, pods of lingjun-2023/topo.csv (the data directory)


class ScenarioError(UsageError):
    """A bad scenario: one line, naming the field and the fix."""


# ---- typed field readers --------------------------------------------------------------------------
def _err(where: str, msg: str):
    raise ScenarioError(f"{where}: {msg}")


def _known(tbl: dict, allowed, where: str) -> None:
    for k in tbl:
        if k not in allowed:
            _err(f"{where}.{k}" if where else k,
                 f"unknown field; use one of {', '.join(sorted(allowed))}")


def _int(tbl, key, where, default=None, lo=1, hi=None):
    v = tbl.get(key, default)
    if v is None:
        _err(f"{where}{key}", f"missing; add '{key} = <integer >= {lo}>'")
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        _err(f"{where}{key}", f"must be an integer >= {lo}, not {v!r}")
    if hi is not None and v > hi:
        _err(f"{where}{key}", f"must be an integer <= {hi} (limit of the simulator), not {v!r}")
    return v


def _float(tbl, key, where, default=None, lo=0.0, strict=False):
    v = tbl.get(key, default)
    if v is None:
        _err(f"{where}{key}", f"missing; add '{key} = <number {'>' if strict else '>='} {lo:g}>'")
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ok = ok and (v > lo if strict else v >= lo)
    if not ok:
        _err(f"{where}{key}", f"must be a finite number {'>' if strict else '>='} {lo:g}, not {v!r}")
    return float(v)


def _choice(tbl, key, where, choices, default=None):
    v = tbl.get(key, default)
    if v is None:
        _err(f"{where}{key}", f"missing; add '{key} = \"{choices[0]}\"' (one of {', '.join(choices)})")
    if v not in choices:
        _err(f"{where}{key}", f"must be one of {', '.join(choices)}, not {v!r}")
    return v


def _table(doc, key, where=""):
    v = doc.get(key, {})
    if not isinstance(v, dict):
        _err(f"{where}{key}", f"must be a table ([{key}]), not {type(v).__name__}")
    return v


# ---- the scenario ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopologyConf:
    """``[topology]``: a generator and its parameters (``params``: sorted (name, value) pairs)."""

    generator: str
    params: tuple[tuple[str, float], ...] = ()

    def build(self) -> Topology:
        kw = dict(self.params)
        if self.generator == "clos":
            return clos(kw.pop("pods"), kw.pop("tors_per_pod"), kw.pop("hosts_per_tor"), **kw)
        if self.generator == "rail-clos":
            return rail_clos(kw.pop("pods"), kw.pop("tors_per_pod"), kw.pop("hosts_per_tor"), **kw)
        if self.generator == "fat-tree":
            return fat_tree(kw.pop("k"), **kw)
        return lingjun_2023(**kw)


@dataclass(frozen=True)
class JobConf:
    """One ``[[jobs]]`` entry: a :class:`~models.systems.cluster.job.JobSpec` plus placement and start."""

    spec: JobSpec
    placement: str = "packed"
    start_s: float = 0.0


@dataclass(frozen=True)
class RoutingConf:
    """``[routing]``: ``scheme`` and, for Crux, ``levels`` and ``correction`` (pairwise runs)."""

    scheme: str = "ecmp"
    levels: int = 8
    correction: bool = False


@dataclass(frozen=True)
class FailureConf:
    """One ``[[failures]]`` entry: links ``index`` of block ``kind`` go down (``loss`` None) or turn
    lossy (drop each packet with probability ``loss``) at ``at_s``, until ``restore_s``."""

    at_s: float
    kind: str
    index: tuple[int, ...]
    restore_s: float | None = None
    loss: float | None = None

    @property
    def effect(self) -> str:
        return "down" if self.loss is None else "lossy"


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    topology: TopologyConf
    jobs: tuple[JobConf, ...]
    routing: RoutingConf
    failures: tuple[FailureConf, ...] = ()
    cosim: tuple = ()  # ((bridge, ((key, value), ...)), ...) from [cosim.<bridge>]

    def cosim_conf(self, bridge: str) -> dict:
        """The ``[cosim.<bridge>]`` table (validated; {} when the file has none)."""
        return dict(dict(self.cosim).get(bridge, ()))

    def job(self, name: str | None = None) -> tuple[int, JobConf]:
        """(index, job) of the job named ``name`` (None: the first job)."""
        for i, jc in enumerate(self.jobs):
            if name is None or jc.spec.name == name:
                return i, jc
        raise ScenarioError(f"no job named {name!r}; use one of {', '.join(j.spec.name for j in self.jobs)}")


_JOB_KEYS = {f.name for f in fields(JobSpec)} | {"placement", "start_s"}


def _parse_topology(doc) -> TopologyConf:
    t = _table(doc, "topology")
    if not t:
        _err("topology", "missing; add a [topology] table with generator = \"clos\" | \"rail-clos\" | \"fat-tree\" | "
                         "\"lingjun-2023\"")
    gen = _choice(t, "generator", "topology.", GENERATORS)
    gen_keys = _GEN_INT[gen]
    allowed = {"generator", *gen_keys, *(() if gen == "fat-tree" else _TOPO_INT + _TOPO_FLOAT)}
    if gen == "fat-tree":
        allowed |= {"gpus_per_host", "nic_gbps", "nvlink_gbps", "hop_latency_s"}
    _known(t, allowed, "topology")
    params = {}
    for k in sorted(allowed - {"generator"}):
        if k in gen_keys:
            params[k] = _int(t, k, "topology.", lo=2 if k == "k" else 1)
        elif k in t:
            params[k] = _int(t, k, "topology.") if k in _TOPO_INT else _float(
                t, k, "topology.", lo=1.0 if k.endswith("oversub") else 0.0, strict=not k.endswith(("oversub", "_s")))
    if gen == "fat-tree" and params["k"] % 2:
        _err("topology.k", f"must be even, not {params['k']}")
    gpus, links = _topology_size(gen, params)
    if gpus > MAX_GPUS or links > MAX_LINKS:
        _err("topology", f"{gpus} GPUs and {links} links exceed the simulator's limits ({MAX_GPUS} GPUs, "
                         f"{MAX_LINKS} links); shrink the pods, ToRs, hosts or per-host counts")
    return TopologyConf(gen, tuple(sorted(params.items())))


def _topology_size(gen: str, params: dict) -> tuple[int, int]:
    """(GPUs, directed links) of the topology ``gen`` would build, by arithmetic (see Topology)."""
    if gen in ("clos", "rail-clos"):
        pods, tors = params["pods"], params["pods"] * params["tors_per_pod"]
        hosts = tors * params["hosts_per_tor"]
        d = {"gpus_per_host": 8, "nic_ports": 2, "aggs_per_pod": 8, "cores_per_plane": 8}
    elif gen == "fat-tree":
        h = params["k"] // 2
        pods, tors, hosts = params["k"], params["k"] * h, params["k"] * h * h
        d = {"gpus_per_host": 1, "nic_ports": 1, "aggs_per_pod": h, "cores_per_plane": h}
    else:
        hosts, tors, pods = _LINGJUN_SIZE
        d = {"gpus_per_host": 8, "nic_ports": 2, "aggs_per_pod": 8, "cores_per_plane": 8}
    get = {**d, "tor_lanes": 1, "core_lanes": 1, **params}.__getitem__
    g = hosts * get("gpus_per_host")
    if gen == "rail-clos":  # one rail switch per GPU of a host in every rail group
        tors *= get("gpus_per_host")
    a = get("aggs_per_pod")
    links = 2 * (g + g * get("nic_ports") + tors * a * get("tor_lanes")
                 + pods * a * get("cores_per_plane") * get("core_lanes"))
    return g, links


def _parse_job(j, i: int, default_iters: int) -> JobConf:
    where = f"jobs[{i}]."
    if not isinstance(j, dict):
        _err(f"jobs[{i}]", "must be a table ([[jobs]])")
    _known(j, _JOB_KEYS, f"jobs[{i}]")
    name = j.get("name", f"job{i}")
    if not isinstance(name, str) or not name:
        _err(f"{where}name", f"must be a non-empty string, not {name!r}")
    kw = {"name": name, "iterations": _int(j, "iterations", where, default_iters, hi=MAX_ITERATIONS)}
    for k in ("dp", "tp", "pp", "channels"):
        kw[k] = _int(j, k, where, None if k == "dp" else 1, hi=MAX_CHANNELS if k == "channels" else MAX_GPUS)
    for f in fields(JobSpec):
        if f.name in kw or f.name not in j:
            continue
        if f.name == "algo":
            kw["algo"] = _choice(j, "algo", where, ("ring", "tree"))
        elif f.name == "overlap":
            kw["overlap"] = _float(j, "overlap", where)
            if kw["overlap"] > 1:
                _err(f"{where}overlap", f"must be in [0, 1] (fraction of DP all-reduce hidden), not {kw['overlap']}")
        else:
            kw[f.name] = _float(j, f.name, where)
    try:
        spec = JobSpec(**kw)
    except ValueError as e:  # pragma: no cover - the checks above catch these first
        _err(f"jobs[{i}]", str(e))
    return JobConf(spec, _choice(j, "placement", where, PLACEMENTS, "packed"), _float(j, "start_s", where, 0.0))


def _parse_failure(f, i: int) -> FailureConf:
    where = f"failures[{i}]."
    if not isinstance(f, dict):
        _err(f"failures[{i}]", "must be a table ([[failures]])")
    _known(f, {"at_s", "kind", "index", "restore_s", "effect", "loss"}, f"failures[{i}]")
    at = _float(f, "at_s", where)
    effect = _choice(f, "effect", where, EFFECTS, "down")
    loss = None
    if effect == "lossy":
        loss = _float(f, "loss", where, strict=True)
        if loss > MAX_LOSS:
            _err(f"{where}loss", f"must be in (0, {MAX_LOSS:g}] (a packet drop probability), not {loss:g}")
    elif "loss" in f:
        _err(f"{where}loss", "only a lossy link has a loss; add effect = \"lossy\" or remove loss")
    kind = _choice(f, "kind", where, LinkKind.NAMES)
    idx = f.get("index")
    if isinstance(idx, int) and not isinstance(idx, bool):
        idx = [idx]
    if not (isinstance(idx, list) and idx and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                  for x in idx)):
        _err(f"{where}index", f"must be a link index >= 0 or a non-empty list of them, not {idx!r}")
    rs = None
    if "restore_s" in f:
        rs = _float(f, "restore_s", where)
        if rs <= at:
            _err(f"{where}restore_s", f"must be after at_s = {at:g}, not {rs:g}")
    return FailureConf(at, kind, tuple(idx), rs, loss)


def _parse_cosim(doc, jobs: tuple[JobConf, ...], failures: tuple[FailureConf, ...]) -> tuple:
    c = _table(doc, "cosim")
    _known(c, COSIM_KEYS, "cosim")
    out = []
    for bridge in sorted(c):
        t = _table(c, bridge, "cosim.")
        where = f"cosim.{bridge}."
        _known(t, COSIM_KEYS[bridge], f"cosim.{bridge}")
        vals = {}
        for k in sorted(t):
            kind, arg = COSIM_KEYS[bridge][k]
            v = t[k]
            if kind == "job":
                names = [j.spec.name for j in jobs]
                if v not in names:
                    _err(f"{where}{k}", f"names no [[jobs]] entry; use one of {', '.join(names)}, not {v!r}")
            elif kind == "failure":
                v = _int(t, k, where, lo=0)
                if v >= len(failures) or failures[v].loss is None:
                    lossy = [str(n) for n, fc in enumerate(failures) if fc.loss is not None]
                    _err(f"{where}{k}", f"must index a lossy [[failures]] entry (effect = \"lossy\"): "
                                        f"{', '.join(lossy) or 'the file has none'}, not {v}")
            elif kind == "int":
                v = _int(t, k, where, lo=arg, hi=MAX_ITERATIONS)
            elif kind in ("float", "float+"):
                v = _float(t, k, where, lo=arg or 0.0, strict=kind == "float+")
            elif kind == "bool":
                if not isinstance(v, bool):
                    _err(f"{where}{k}", f"must be true or false, not {v!r}")
            else:
                v = _choice(t, k, where, arg)
            vals[k] = v
        out.append((bridge, tuple(sorted(vals.items()))))
    return tuple(out)


def parse_scenario(doc: dict, name: str = "scenario") -> Scenario:
    """Validate a parsed TOML document (see the module docstring); raises :class:`ScenarioError`."""
    _known(doc, {"name", "seed", "iterations", "topology", "routing", "jobs", "failures", "cosim"}, "")
    nm = doc.get("name", re.sub(r"[^A-Za-z0-9_.+-]+", "_", name).strip("._") or "scenario")
    if not isinstance(nm, str) or not _NAME.fullmatch(nm):
        _err("name", f"must be 1-100 letters, digits or '_.+-', starting with a letter or digit (it names the "
                     f"output folder build/cluster/<name>), not {nm!r}")
    seed = _int(doc, "seed", "", 0, lo=0, hi=MAX_SEED)
    iters = _int(doc, "iterations", "", 10, hi=MAX_ITERATIONS)
    topo = _parse_topology(doc)
    r = _table(doc, "routing")
    _known(r, {"scheme", "levels", "correction"}, "routing")
    corr = r.get("correction", False)
    if not isinstance(corr, bool):
        _err("routing.correction", f"must be true or false, not {corr!r}")
    routing = RoutingConf(_choice(r, "scheme", "routing.", SCHEMES, "ecmp"),
                          _int(r, "levels", "routing.", 8, hi=MAX_LEVELS), corr)
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        _err("jobs", "missing; add at least one [[jobs]] table with dp = <integer>")
    if len(jobs) > MAX_JOBS:
        _err("jobs", f"{len(jobs)} [[jobs]] tables, more than {MAX_JOBS}; a scenario models a few jobs sharing "
                     "a network: split it into several scenarios")
    jc = tuple(_parse_job(j, i, iters) for i, j in enumerate(jobs))
    seen: set[str] = set()
    for i, j in enumerate(jc):
        if j.spec.name in seen:
            _err(f"jobs[{i}].name", f"{j.spec.name!r} is used by an earlier job; give every job its own name")
        seen.add(j.spec.name)
    fl = doc.get("failures", [])
    if not isinstance(fl, list):
        _err("failures", "must be an array of tables ([[failures]])")
    if len(fl) > MAX_JOBS:
        _err("failures", f"{len(fl)} [[failures]] tables, more than {MAX_JOBS}; split the scenario")
    fc = tuple(_parse_failure(f, i) for i, f in enumerate(fl))
    return Scenario(nm, seed, topo, jc, routing, fc, _parse_cosim(doc, jc, fc))


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem is one :class:`ScenarioError` line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file; pass a scenario .toml "
                            "(see models/systems/cluster/scenarios/)") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a directory; pass a scenario .toml file") from None
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read it ({e.strerror or e}); check the path and its permissions") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: {len(raw) / 2**20:.1f} MiB, larger than the {MAX_FILE_BYTES >> 20} MiB a "
                            f"scenario file may be (at most {MAX_JOBS} jobs); split it into several scenarios")
    doc = toml_loads(raw, str(path), ScenarioError, "scenario")
    try:
        return parse_scenario(doc, path.stem)
    except ScenarioError as e:
        raise ScenarioError(f"{path}: {e}") from None


# ---- building and running -------------------------------------------------------------------------
def _host_order(topo: Topology, policy: str, rng: np.random.Generator) -> np.ndarray:
    if policy == "packed":
        return np.arange(topo.n_hosts)
    if policy == "random":
        return rng.permutation(topo.n_hosts)
    # spread: k-th host of every ToR, then the (k+1)-th, ...
    rank = np.zeros(topo.n_hosts, dtype=np.int64)
    order = np.argsort(topo.host_tor, kind="stable")
    first = np.searchsorted(topo.host_tor[order], topo.host_tor[order])
    rank[order] = np.arange(topo.n_hosts) - first
    return np.lexsort((topo.host_tor, rank))


def place_jobs(sc: Scenario, topo: Topology) -> list[np.ndarray]:
    """GPU placements (shape (pp, dp, tp)) of the scenario's jobs, in order; raises ScenarioError."""
    from .job import placement

    rng = np.random.default_rng(sc.seed)
    free = np.ones(topo.n_gpus, dtype=bool)
    gph = topo.gpus_per_host
    out = []
    for i, jc in enumerate(sc.jobs):
        need = jc.spec.n_gpus
        if need > free.sum():
            _err(f"jobs[{i}]", f"needs {need} GPUs but only {int(free.sum())} of {topo.n_gpus} are free; "
                               "shrink dp/tp/pp or enlarge [topology]")
        gpus = (_host_order(topo, jc.placement, rng)[:, None] * gph + np.arange(gph)).ravel()
        g = gpus[free[gpus]][:need]
        free[g] = False
        out.append(placement(jc.spec, g))
    return out


def _failure_links(sc: Scenario, topo: Topology) -> list[np.ndarray]:
    out = []
    for i, f in enumerate(sc.failures):
        blk = topo.link_block(LinkKind.NAMES.index(f.kind))
        n = blk.stop - blk.start
        bad = [x for x in f.index if x >= n]
        if bad:
            _err(f"failures[{i}].index", f"{bad[0]} is out of range: this topology has {n} {f.kind} links "
                                         f"(0..{n - 1})")
        out.append(blk.start + np.array(f.index, dtype=np.int64))
    return out


def make_router(sc: Scenario, topo: Topology, jobs):
    from .c4p import C4PRouter
    from .crux import crux_plan
    from .routing import ECMPRouter

    if sc.routing.scheme == "ecmp":
        return ECMPRouter(topo, sc.seed), {}
    if sc.routing.scheme == "c4p":
        return C4PRouter(topo, sc.seed), {}
    horizon = 40 * max(j[0].compute_s for j in jobs) + 1e-3  # pairwise correction runs use horizon / 4
    router, info = crux_plan(topo, list(jobs), sc.routing.levels, sc.seed, horizon, correct=sc.routing.correction)
    return router, info


def prepare(sc: Scenario) -> tuple[Topology, list[np.ndarray], list[np.ndarray]]:
    """(topology, job placements, failed link ids): everything :func:`build` checks before it
    starts a simulator; raises ScenarioError for a scenario the topology cannot hold."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            topo = sc.topology.build()
    except ValueError as e:
        _err("topology", f"{e}")
    cap = topo.capacity
    if not (np.isfinite(cap).all() and (cap > 0).all()):
        _err("topology", "link capacities overflow the float range; use realistic nic_gbps, nvlink_gbps and "
                         "oversubscription values")
    return topo, place_jobs(sc, topo), _failure_links(sc, topo)


def build(sc: Scenario):
    """(topology, simulator) ready to run; raises ScenarioError for a scenario the topology cannot hold."""
    from .engine import Simulator

    topo, places, links = prepare(sc)
    router, info = make_router(sc, topo, [(jc.spec, p) for jc, p in zip(sc.jobs, places)])
    sim = Simulator(topo, router, seed=sc.seed)
    for jc, p in zip(sc.jobs, places):
        sim.add_job(jc.spec, p, start=jc.start_s)
    for f, ln in zip(sc.failures, links):
        if f.loss is None:
            sim.fail_links(f.at_s, ln, f.restore_s)
        else:
            sim.lossy_links(f.at_s, ln, f.loss, f.restore_s)
    sim.plan_info = info
    return topo, sim


def run_scenario(sc: Scenario, progress=None) -> dict:
    """Run a scenario to the end of every job; ``progress(done_iterations, total)`` is called as it goes.

    Returns the JSON-ready result: per-job iteration times, GPU utilisation, spreads, link load.
    """
    topo, sim = build(sc)
    total = sum(jc.spec.iterations for jc in sc.jobs)
    dt = max(1e-3, min(max(jc.spec.compute_s for jc in sc.jobs), 1.0))
    until = max(jc.start_s for jc in sc.jobs)
    while any(r.finished is None for r in sim.jobs.values()):
        before = sum(len(r.iter_end) for r in sim.jobs.values())
        until += dt
        sim.run(until=until)
        done = sum(len(r.iter_end) for r in sim.jobs.values())
        if progress:
            progress(done, total)
        if done == before:
            dt *= 2
            if dt > 1e6:
                raise ScenarioError(f"simulation makes no progress: no iteration ended in {dt / 2:g} simulated "
                                    "seconds; a job's every path may be down (restore the failed links with "
                                    "restore_s), or its compute_s, bytes or start_s are far too large for the "
                                    "link speeds")
    jobs = []
    for r in sim.jobs.values():
        it = r.iteration_times
        span = r.finished - r.start
        jobs.append({**r.summary(), "start_s": r.start, "iteration_times_s": it.tolist(),
                     "p50_iter_s": float(np.median(it)), "max_iter_s": float(it.max()), "min_iter_s": float(it.min()),
                     "spread": float(it.max() / it.min()) if it.min() > 0 else None,
                     "gpu_utilisation": r.compute_s / span if span > 0 else 1.0})
    makespan = max(r.finished for r in sim.jobs.values())
    link_util = sim.net.bytes_on_link / np.maximum(topo.capacity * makespan, 1e-300)
    by_kind = {LinkKind.NAMES[k]: float(link_util[topo.kind == k].max()) for k in range(8)
               if (topo.kind == k).any()}
    return {"scenario": sc.name, "seed": sc.seed, "routing": sc.routing.scheme, "topology": topo.summary(),
            "makespan_s": makespan, "gpu_utilisation": sim.gpu_utilisation(makespan), "jobs": jobs,
            "max_link_utilisation_by_kind": by_kind, "failures": len(sc.failures), "lossy": sim.lossy_report(),
            "events": sim.events,
            "wall_s": sim.wall_s, "plan": getattr(sim, "plan_info", {})}
