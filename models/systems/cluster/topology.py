"""GPU-cluster topologies: a three-tier Clos (ToR / aggregation / core) with multi-GPU hosts.

The model is the one used by production AI clusters (Alibaba HPN/Lingjun, ByteDance, the C4 testbed):

- a host has ``gpus_per_host`` GPUs joined by NVLink (one NVSwitch per host, modelled as one up and
  one down link per GPU of ``nvlink_gbps``);
- every GPU has its own RDMA NIC with ``nic_ports`` bonded ports (C4: 2 x 200 Gb/s); every port is a
  separate link to the host's ToR, so a flow hashed to one port cannot use the other's bandwidth;
- a ToR connects to each of the ``aggs_per_pod`` aggregation switches of its pod with ``tor_lanes``
  parallel links; aggregation switch ``a`` of every pod connects to the ``cores_per_plane`` core
  switches of plane ``a`` with ``core_lanes`` parallel links (the standard multi-plane Clos, so the
  down path from a core switch returns on plane ``a``).

Links are directed and numbered in blocks (see :class:`Topology`); a path is a row of at most six
link ids padded with -1: ``[src port-up | nvlink-up, ToR-up, agg-up, agg-down, ToR-down,
dst port-down | nvlink-down]``. A path is fixed by eight choice integers ``(src port, dst port, agg,
ToR-up lane, ToR-down lane, core, agg-up lane, agg-down lane)``, taken modulo their ranges, which
is what ECMP hashing (:func:`hash_choices`) or a planner (C4P, Crux) provides.

**Rail-optimised** (``rail=True``, :func:`rail_clos`): the hosts of a ToR group (a "rail group",
``host_tor``) do not share one ToR; instead GPU/NIC ``i`` of every host in the group connects to
rail switch ``i`` of the group (NVIDIA DGX SuperPOD, Alibaba HPN, Meta's RoCE clusters), and the
rail switches of a pod connect to its aggregation (spine) switches like ToRs do. The first tier
then has ``gpus_per_host`` leaf switches per group (:attr:`Topology.n_leaves`,
:attr:`Topology.gpu_leaf`), each with one port-pair per host; same-rail traffic of a group takes
one switch hop, cross-rail traffic between hosts goes leaf -> spine -> leaf (we do not model PXN,
NCCL's NVLink-first forwarding). The ToR-up/-down link blocks are indexed by leaf switch
(``leaf = group * gpus_per_host + rail``); everything else is unchanged.

Generators: :func:`clos` (regular, any oversubscription), :func:`rail_clos` (rail-optimised
multi-tier Clos), :func:`fat_tree` (k-ary, Al-Fares et al., SIGCOMM 2008) and :func:`lingjun_2023`
(the real host -> ToR -> pod map of 847 hosts of an
Alibaba Lingjun cluster released with Crux, SIGCOMM 2024; the switch-level counts that the data
set does not give are parameters).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["Topology", "LinkKind", "clos", "rail_clos", "fat_tree", "lingjun_2023", "read_topology_csv",
           "TopologyError",
           "hash_choices", "N_CHOICES", "PATH_WIDTH"]

N_CHOICES = 8
PATH_WIDTH = 6
GBPS = 1e9 / 8  # bytes per second in one Gb/s


class LinkKind:
    """Names of the link blocks, in id order."""

    NVL_UP, NVL_DN, PORT_UP, PORT_DN, TOR_UP, TOR_DN, AGG_UP, AGG_DN = range(8)
    NAMES = ("nvlink-up", "nvlink-down", "port-up", "port-down", "tor-up", "tor-down", "agg-up", "agg-down")


def _check_pos(name: str, v, fix: str) -> None:
    if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1):
        raise UsageError(f"{name} must be an integer >= 1, not {v!r}; {fix}")


@dataclass(frozen=True, eq=False)
class Topology:
    """A three-tier Clos of multi-GPU hosts (see the module docstring).

    Parameters
    ----------
    host_tor : ndarray of int, shape (hosts,)
        ToR of every host.
    tor_pod : ndarray of int, shape (tors,)
        Pod (aggregation block, Arnold's "minipod") of every ToR.
    gpus_per_host, nic_ports, aggs_per_pod, tor_lanes, cores_per_plane, core_lanes : int
        Structure (see the module docstring).
    nvlink_gbps, nic_gbps : float
        NVLink bandwidth per GPU per direction; bandwidth of one NIC port.
    tor_oversub, core_oversub : float
        Oversubscription of the ToR and aggregation layers (1 = non-blocking): the ToR-up lane
        capacity is chosen so a full ToR's uplinks carry ``1 / tor_oversub`` of its downlinks, and
        likewise for the aggregation-to-core lanes of the largest pod.
    hop_latency_s : float
        Latency per switch hop (used by the alpha term of collectives).
    rail : bool
        Rail-optimised first tier: ``host_tor`` names each host's rail group, and GPU ``i`` of a
        host connects to rail switch ``i`` of its group (module docstring).
    name : str
        Label for reports.

    Attributes
    ----------
    capacity : ndarray of float, shape (links,)
        Bytes per second of every directed link.
    kind : ndarray of int8, shape (links,)
        :class:`LinkKind` of every link.
    """

    host_tor: np.ndarray
    tor_pod: np.ndarray
    gpus_per_host: int = 8
    nic_ports: int = 2
    aggs_per_pod: int = 8
    tor_lanes: int = 1
    cores_per_plane: int = 8
    core_lanes: int = 1
    nvlink_gbps: float = 2400.0
    nic_gbps: float = 200.0
    tor_oversub: float = 1.0
    core_oversub: float = 1.0
    hop_latency_s: float = 1e-6
    rail: bool = False
    name: str = "clos"
    capacity: np.ndarray = field(init=False, repr=False)
    kind: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        host_tor = np.ascontiguousarray(self.host_tor, dtype=np.int64)
        tor_pod = np.ascontiguousarray(self.tor_pod, dtype=np.int64)
        if host_tor.ndim != 1 or host_tor.size == 0:
            raise UsageError(f"host_tor must be a non-empty 1-D array, not shape {host_tor.shape}")
        if tor_pod.ndim != 1 or tor_pod.size == 0:
            raise UsageError(f"tor_pod must be a non-empty 1-D array, not shape {tor_pod.shape}")
        if host_tor.min() < 0 or host_tor.max() >= tor_pod.size:
            raise UsageError(f"host_tor values must lie in [0, {tor_pod.size}), got {host_tor.min()}..{host_tor.max()}")
        if tor_pod.min() < 0:
            raise UsageError("tor_pod values must be >= 0")
        for n in ("gpus_per_host", "nic_ports", "aggs_per_pod", "tor_lanes", "cores_per_plane", "core_lanes"):
            _check_pos(n, getattr(self, n), "pass a positive count")
        for n in ("nvlink_gbps", "nic_gbps"):
            if not getattr(self, n) > 0:
                raise UsageError(f"{n} must be > 0, not {getattr(self, n)!r}")
        for n in ("tor_oversub", "core_oversub"):
            if not getattr(self, n) >= 1.0:
                raise UsageError(f"{n} must be >= 1 (1 = non-blocking), not {getattr(self, n)!r}")
        if not self.hop_latency_s >= 0:
            raise UsageError(f"hop_latency_s must be >= 0, not {self.hop_latency_s!r}")
        if not isinstance(self.rail, (bool, np.bool_)):
            raise UsageError(f"rail must be true or false, not {self.rail!r}")
        object.__setattr__(self, "host_tor", host_tor)
        object.__setattr__(self, "tor_pod", tor_pod)
        object.__setattr__(self, "_leaf_pod", np.repeat(tor_pod, self.gpus_per_host) if self.rail else tor_pod)
        g, p, t, a = self.n_gpus, self.nic_ports, self.n_leaves, self.aggs_per_pod
        sizes = [g, g, g * p, g * p, t * a * self.tor_lanes, t * a * self.tor_lanes,
                 self.n_pods * a * self.cores_per_plane * self.core_lanes,
                 self.n_pods * a * self.cores_per_plane * self.core_lanes]
        off = np.concatenate([[0], np.cumsum(sizes)])
        object.__setattr__(self, "_off", off)
        kind = np.repeat(np.arange(8, dtype=np.int8), sizes)
        # capacities
        hosts_per_tor = np.bincount(host_tor, minlength=self.n_tors)
        gpus_per_leaf_host = 1 if self.rail else self.gpus_per_host
        max_down_tor = hosts_per_tor.max() * gpus_per_leaf_host * p * self.nic_gbps
        tor_lane = max_down_tor / (a * self.tor_lanes * self.tor_oversub)
        tors_per_pod = np.bincount(self.leaf_pod, minlength=self.n_pods)
        max_down_agg = tors_per_pod.max() * self.tor_lanes * tor_lane
        core_lane = max_down_agg / (self.cores_per_plane * self.core_lanes * self.core_oversub)
        cap_gbps = np.concatenate([
            np.full(2 * g, self.nvlink_gbps), np.full(2 * g * p, self.nic_gbps),
            np.full(2 * t * a * self.tor_lanes, tor_lane), np.full(sizes[6] * 2, core_lane)])
        object.__setattr__(self, "capacity", cap_gbps * GBPS)
        object.__setattr__(self, "kind", kind)

    # ---- sizes -------------------------------------------------------------------------------
    @property
    def n_hosts(self) -> int:
        return int(self.host_tor.size)

    @property
    def n_tors(self) -> int:
        return int(self.tor_pod.size)

    @property
    def n_pods(self) -> int:
        return int(self.tor_pod.max()) + 1

    @property
    def n_gpus(self) -> int:
        return self.n_hosts * self.gpus_per_host

    @property
    def n_links(self) -> int:
        return int(self._off[-1])

    @property
    def gpu_host(self) -> np.ndarray:
        return np.arange(self.n_gpus) // self.gpus_per_host

    @property
    def gpu_tor(self) -> np.ndarray:
        """ToR group of every GPU (the rail group when ``rail``; see :attr:`gpu_leaf`)."""
        return self.host_tor[self.gpu_host]

    @property
    def n_leaves(self) -> int:
        """First-tier switches: ToRs, or ``gpus_per_host`` rail switches per group when ``rail``."""
        return self.n_tors * (self.gpus_per_host if self.rail else 1)

    @property
    def gpu_leaf(self) -> np.ndarray:
        """First-tier switch of every GPU's NIC (its ToR, or its rail switch when ``rail``)."""
        return self.leaf_of(np.arange(self.n_gpus))

    @property
    def leaf_pod(self) -> np.ndarray:
        """Pod of every first-tier switch."""
        return self._leaf_pod

    def leaf_of(self, gpus) -> np.ndarray:
        """First-tier switch of GPUs ``gpus``."""
        gpus = np.asarray(gpus, dtype=np.int64)
        tor = self.host_tor[gpus // self.gpus_per_host]
        return tor * self.gpus_per_host + gpus % self.gpus_per_host if self.rail else tor

    @property
    def gpu_pod(self) -> np.ndarray:
        return self.tor_pod[self.gpu_tor]

    @property
    def host_pod(self) -> np.ndarray:
        return self.tor_pod[self.host_tor]

    def choice_ranges(self) -> np.ndarray:
        """Range of each of the eight path choices (see the module docstring)."""
        return np.array([self.nic_ports, self.nic_ports, self.aggs_per_pod, self.tor_lanes, self.tor_lanes,
                         self.cores_per_plane, self.core_lanes, self.core_lanes], dtype=np.int64)

    def link_block(self, kind: int) -> slice:
        """Slice of the link ids of one :class:`LinkKind` block."""
        return slice(int(self._off[kind]), int(self._off[kind + 1]))

    def describe(self, link: int) -> str:
        """Human-readable name of a link id."""
        k = int(self.kind[link])
        return f"{LinkKind.NAMES[k]}#{link - int(self._off[k])}"

    # ---- paths -------------------------------------------------------------------------------
    def paths(self, src, dst, choices) -> np.ndarray:
        """Link ids of the paths from GPUs ``src`` to GPUs ``dst``.

        Parameters
        ----------
        src, dst : array_like of int, shape (n,)
            GPU ids; ``src != dst`` element-wise.
        choices : array_like of int, shape (n, 8)
            Path choices (any non-negative integers; reduced modulo :meth:`choice_ranges`).

        Returns
        -------
        ndarray of int64, shape (n, 6)
            Link ids, -1 where the path has no hop in that column.
        """
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        ch = np.asarray(choices, dtype=np.int64).reshape(src.size, N_CHOICES) % self.choice_ranges()
        if np.any(src == dst):
            raise UsageError("a flow needs src != dst")
        gph, p, a_n, l1, c_n, l2 = (self.gpus_per_host, self.nic_ports, self.aggs_per_pod, self.tor_lanes,
                                    self.cores_per_plane, self.core_lanes)
        hs, hd = src // gph, dst // gph
        ts, td = self.leaf_of(src), self.leaf_of(dst)
        lp = self.leaf_pod
        ps_, pd_ = lp[ts], lp[td]
        same_host = hs == hd
        x_tor = (ts != td) & ~same_host  # two rails of one host meet over NVLink
        x_pod = (ps_ != pd_) & ~same_host
        o = self._off
        a = ch[:, 2]
        out = np.full((src.size, PATH_WIDTH), -1, dtype=np.int64)
        out[:, 0] = np.where(same_host, o[0] + src, o[2] + src * p + ch[:, 0])
        out[:, 5] = np.where(same_host, o[1] + dst, o[3] + dst * p + ch[:, 1])
        out[:, 1] = np.where(x_tor, o[4] + (ts * a_n + a) * l1 + ch[:, 3], -1)
        out[:, 4] = np.where(x_tor, o[5] + (td * a_n + a) * l1 + ch[:, 4], -1)
        out[:, 2] = np.where(x_pod, o[6] + ((ps_ * a_n + a) * c_n + ch[:, 5]) * l2 + ch[:, 6], -1)
        out[:, 3] = np.where(x_pod, o[7] + ((pd_ * a_n + a) * c_n + ch[:, 5]) * l2 + ch[:, 7], -1)
        return out

    def base_latency(self, src, dst) -> np.ndarray:
        """Propagation + switching latency of a path (hops x ``hop_latency_s``), shape (n,)."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        hs, hd = src // self.gpus_per_host, dst // self.gpus_per_host
        ts, td = self.leaf_of(src), self.leaf_of(dst)
        lp = self.leaf_pod
        hops = np.where(hs == hd, 1, np.where(ts == td, 1, np.where(lp[ts] == lp[td], 3, 5)))
        return hops * self.hop_latency_s

    def summary(self) -> dict:
        return {"name": self.name, "hosts": self.n_hosts, "gpus": self.n_gpus, "tors": self.n_tors,
                "rail": bool(self.rail), "leaves": self.n_leaves,
                "pods": self.n_pods, "links": self.n_links, "gpus_per_host": self.gpus_per_host,
                "nic_ports": self.nic_ports, "nic_gbps": self.nic_gbps, "aggs_per_pod": self.aggs_per_pod,
                "cores_per_plane": self.cores_per_plane, "tor_oversub": self.tor_oversub,
                "core_oversub": self.core_oversub}


def hash_choices(keys: np.ndarray, seed: int) -> np.ndarray:
    """ECMP-style hash: eight pseudo-random choice integers per key row (splitmix64), shape (n, 8).

    ``keys`` is an (n, k) integer array (e.g. job, src, dst, channel: the flow's 5-tuple stand-in);
    the same keys and seed always give the same choices.
    """
    keys = np.atleast_2d(np.asarray(keys, dtype=np.uint64))
    with np.errstate(over="ignore"):
        h = np.full(keys.shape[0], np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019))
        for j in range(keys.shape[1]):
            h = _mix(h ^ (keys[:, j] + np.uint64(j + 1) * np.uint64(0xBF58476D1CE4E5B9)))
        out = np.empty((keys.shape[0], N_CHOICES), dtype=np.int64)
        for j in range(N_CHOICES):
            h = _mix(h + np.uint64(0x9E3779B97F4A7C15))
            out[:, j] = (h >> np.uint64(33)).astype(np.int64)
    return out


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def clos(pods: int, tors_per_pod: int, hosts_per_tor: int, **kw) -> Topology:
    """A regular three-tier Clos: ``pods x tors_per_pod x hosts_per_tor`` hosts (see :class:`Topology`)."""
    for n, v in (("pods", pods), ("tors_per_pod", tors_per_pod), ("hosts_per_tor", hosts_per_tor)):
        _check_pos(n, v, "pass a positive count")
    host_tor = np.repeat(np.arange(pods * tors_per_pod), hosts_per_tor)
    tor_pod = np.repeat(np.arange(pods), tors_per_pod)
    kw.setdefault("name", f"clos-{pods}x{tors_per_pod}x{hosts_per_tor}")
    return Topology(host_tor, tor_pod, **kw)


def rail_clos(pods: int, groups_per_pod: int, hosts_per_group: int, **kw) -> Topology:
    """A rail-optimised multi-tier Clos: ``pods x groups_per_pod`` rail groups of
    ``hosts_per_group`` hosts; GPU/NIC ``i`` of every host of a group connects to the group's rail
    switch ``i``, rail switches to the pod's ``aggs_per_pod`` spines, spines to the core planes
    (see the module docstring; other parameters as :class:`Topology`)."""
    kw.setdefault("name", f"rail-clos-{pods}x{groups_per_pod}x{hosts_per_group}")
    return clos(pods, groups_per_pod, hosts_per_group, rail=True, **kw)


def fat_tree(k: int, gpus_per_host: int = 1, nic_gbps: float = 100.0, **kw) -> Topology:
    """A k-ary fat tree (Al-Fares et al., SIGCOMM 2008): k pods, k/2 ToRs and k/2 aggs per pod,
    (k/2)^2 cores, k/2 single-port hosts per ToR; non-blocking."""
    if not (isinstance(k, int) and k >= 2 and k % 2 == 0):
        raise UsageError(f"fat-tree k must be an even integer >= 2, not {k!r}")
    h = k // 2
    return clos(k, h, h, gpus_per_host=gpus_per_host, nic_ports=1, aggs_per_pod=h, tor_lanes=1,
                cores_per_plane=h, core_lanes=1, nic_gbps=nic_gbps, name=f"fat-tree-k{k}", **kw)


def _data_path() -> Path:
    from hwcosim.models.data import dataset

    return dataset("lingjun-2023", "topo.csv")  # the data directory ($HWCOSIM_DATA); DatasetMissing if absent


class TopologyError(UsageError):
    """A topology file that cannot be read; the one-line message names the problem and the fix."""


_COLUMNS = ("ip", "DSW", "PSW", "ASW")


def read_topology_csv(path: str | Path) -> list[dict[str, str]]:
    """The host rows of a Crux-format topology CSV (columns ``ip,DSW,PSW,ASW``, one row per host).

    Raises
    ------
    TopologyError
        A missing or unreadable file, text that is not UTF-8 or not CSV, a missing column, a row
        with another number of fields than the header, an empty field, a host listed twice, no host.
    """
    import io

    from hwcosim.models.safeparse import decode_utf8, one_line

    path = Path(path)
    fix = "give a CSV with the header ip,DSW,PSW,ASW and one row per host"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TopologyError(f"{path}: no such topology file") from None
    except OSError as e:
        raise TopologyError(f"{path}: cannot read it ({e.strerror or e}); check the path") from None
    text = decode_utf8(raw, str(path), TopologyError, "topology CSV")
    try:
        lines = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    except csv.Error as e:
        raise TopologyError(f"{path}: not a readable CSV ({one_line(e)}); {fix}") from None
    if not lines:
        raise TopologyError(f"{path}: empty; {fix}")
    header = [h.strip() for h in lines[0]]
    if not set(_COLUMNS) <= set(header) or len(set(header)) != len(header):
        raise TopologyError(f"{path}: expected columns ip,DSW,PSW,ASW, found {one_line(','.join(header), 80)}; "
                            f"{fix}")
    rows, seen = [], set()
    for i, fields in enumerate(lines[1:], 2):
        if len(fields) != len(header):
            raise TopologyError(f"{path}: row {i} has {len(fields)} fields, the header {len(header)}; {fix}")
        r = dict(zip(header, (f.strip() for f in fields)))
        empty = [c for c in _COLUMNS if not r[c]]
        if empty:
            raise TopologyError(f"{path}: row {i} has an empty {empty[0]}; {fix}")
        if r["ip"] in seen:
            raise TopologyError(f"{path}: row {i} lists host {one_line(r['ip'], 80)!r} again; list each host once")
        seen.add(r["ip"])
        rows.append(r)
    if not rows:
        raise TopologyError(f"{path}: no host rows; {fix}")
    return rows


def lingjun_2023(path: str | Path | None = None, **kw) -> Topology:
    """The real Lingjun 2023 topology (847 hosts, 119 ToRs, 3 pods) from the Crux data set.

    Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
    SIGCOMM 2024; data "Alibaba GPU Cluster Dataset 2023", Apache-2.0. A ToR is a (PSW, ASW)
    pair (ASW names repeat across PSWs); a pod is a PSW. Hosts are ordered by (pod, ToR, row).
    The data set gives no switch port counts; the defaults (8 GPUs/host, 2 x 200 Gb/s NIC per
    GPU, 8 aggs per pod, 8 cores per plane, non-blocking) follow Alibaba HPN and are parameters.

    Without ``path`` it reads ``lingjun-2023/topo.csv`` from the data directory
    (:func:`hwcosim.models.data.dataset`, ``$HWCOSIM_DATA``; ``DatasetMissing``, exit 2, when it is
    not there). ``path`` reads another cluster in the same CSV format (:func:`read_topology_csv`,
    which raises :class:`TopologyError` for a damaged file).
    """
    path = Path(path) if path is not None else _data_path()
    rows = read_topology_csv(path)
    pods = sorted({r["PSW"] for r in rows}, key=lambda s: (len(s), s))
    tors = sorted({(r["PSW"], r["ASW"]) for r in rows}, key=lambda x: (pods.index(x[0]), len(x[1]), x[1]))
    tor_id = {t: i for i, t in enumerate(tors)}
    host_tor = np.sort(np.array([tor_id[(r["PSW"], r["ASW"])] for r in rows], dtype=np.int64))
    tor_pod = np.array([pods.index(t[0]) for t in tors], dtype=np.int64)
    kw.setdefault("name", "lingjun-2023")
    return Topology(host_tor, tor_pod, **kw)
