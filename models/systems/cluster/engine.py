"""Discrete-event cluster simulator: jobs, steps, collectives and streams on a flow-level network.

The engine keeps a heap of timed events (compute ends, collective latency terms, job arrivals,
link failures) and a :class:`~models.systems.cluster.network.FlowNetwork` of active streams. At each step
it advances to the earlier of the next event and the next stream completion, so its cost grows
with the number of collective starts and ends, not with bytes or packets. Several jobs share one
topology; a :class:`~models.systems.cluster.routing.Router` maps every stream to paths and a priority.

Same inputs and seed give the same result: events with equal times run in insertion order.

Link faults act on the network's mechanics: a *down* link (:meth:`Simulator.fail_links`) has
capacity 0 and the router is told (ECMP re-hashes around it); a *lossy* link
(:meth:`Simulator.lossy_links`) drops each packet with probability ``p`` and the transport resends
it (selective repeat, as RoCE NICs do), so a fraction ``p`` of the link's wire time carries copies
that never arrive: its goodput capacity in the flow network becomes ``(1 - p)`` of its capacity and
every stream crossing it gets its max-min share of that. Routing does not see loss (ECMP keeps
hashing onto the link). The retransmitted bytes are counted per lossy link (:attr:`Simulator.lossy`).
Simplifications (stated): the resent copies also occupy the links upstream of the lossy one, which
is not charged; the recovery delay of the last lost packets (an RTT or an RTO, microseconds) is not
added to a stream's completion.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field

import numpy as np
from hwcosim.models.errors import UsageError

from .job import Comm, Compute, JobSpec
from .network import FlowNetwork
from .routing import ECMPRouter, Router
from .topology import Topology

__all__ = ["Simulator", "JobRecord", "StreamInfo"]


@dataclass
class StreamInfo:
    """An active stream: who owns it and where it runs."""

    job_id: int
    route_key: tuple
    src: np.ndarray
    dst: np.ndarray
    paths: np.ndarray
    coll: tuple  # (job_id, iteration, step, collective index)


@dataclass
class JobRecord:
    """What happened to one job."""

    job_id: int
    spec: JobSpec
    place: np.ndarray
    start: float
    iter_end: list[float] = field(default_factory=list)
    compute_s: float = 0.0
    compute_until: float = 0.0
    comm_s: dict[str, float] = field(default_factory=dict)
    finished: float | None = None

    @property
    def iteration_times(self) -> np.ndarray:
        t = np.array([self.start, *self.iter_end])
        return np.diff(t)

    def summary(self) -> dict:
        it = self.iteration_times
        return {"job": self.spec.name, "gpus": self.spec.n_gpus, "iterations": int(it.size),
                "mean_iter_s": float(it.mean()) if it.size else None,
                "compute_s": self.compute_s, "comm_s": dict(self.comm_s), "finished": self.finished}


class Simulator:
    """Run jobs on a topology.

    Parameters
    ----------
    topo : Topology
    router : Router, optional
        Default: :class:`~models.systems.cluster.routing.ECMPRouter` with ``seed``.
    seed : int
        Seed for the default router.
    """

    def __init__(self, topo: Topology, router: Router | None = None, seed: int = 0):
        self.topo = topo
        self.router = router if router is not None else ECMPRouter(topo, seed)
        self.net = FlowNetwork(topo.capacity)
        self.now = 0.0
        self._heap: list = []
        self._seq = itertools.count()
        self.jobs: dict[int, JobRecord] = {}
        self._steps: dict[int, list] = {}
        self._streams: dict[int, StreamInfo] = {}
        self._pending_streams: dict[tuple, int] = {}
        self._pending_colls: dict[tuple, int] = {}
        self._step_started: dict[int, float] = {}
        self._live_colls: dict[tuple, list] = {}
        self.events = 0
        self.wall_s = 0.0
        self._down = np.zeros(topo.n_links, dtype=bool)
        self._keep = np.ones(topo.n_links)  # product of (1 - loss) of the lossy periods in force
        self.lossy: list[dict] = []  # one record per lossy_links call (see lossy_report)

    # ---- setup -------------------------------------------------------------------------------
    def add_job(self, spec: JobSpec, place, start: float = 0.0) -> int:
        """Add a job with placement ``place`` (shape (pp, dp, tp) of GPU ids) starting at ``start``."""
        place = np.asarray(place, dtype=np.int64)
        if place.min() < 0 or place.max() >= self.topo.n_gpus:
            raise UsageError(f"job {spec.name!r}: GPU ids must lie in [0, {self.topo.n_gpus})")
        used = set()
        for r in self.jobs.values():
            if r.finished is None:
                used.update(r.place.ravel().tolist())
        if used & set(place.ravel().tolist()):
            raise UsageError(f"job {spec.name!r}: placement overlaps a running job's GPUs")
        jid = len(self.jobs)
        self.jobs[jid] = JobRecord(jid, spec, place, start)
        self._steps[jid] = spec.steps(place)
        self._push(start, self._start_job, jid)
        return jid

    def fail_links(self, at: float, links, restore_at: float | None = None) -> None:
        """Links go down at ``at`` (capacity 0, routers told), and come back at ``restore_at``."""
        links = np.asarray(links, dtype=np.int64)
        self._push(at, self._set_links, links, False)
        if restore_at is not None:
            self._push(restore_at, self._set_links, links, True)

    def lossy_links(self, at: float, links, loss: float, restore_at: float | None = None) -> None:
        """Links drop each packet with probability ``loss`` from ``at`` until ``restore_at``: the
        resends take ``loss`` of their wire time, so they carry ``1 - loss`` of their capacity as
        goodput (module docstring); the router is not told."""
        if not 0.0 < loss < 1.0:
            raise UsageError(f"loss must be in (0, 1), not {loss!r}")
        links = np.asarray(links, dtype=np.int64)
        rec = {"links": links, "loss": float(loss), "on_s": float(at), "off_s": restore_at, "active": False,
               "goodput_bytes": 0.0, "_b0": 0.0}
        self.lossy.append(rec)
        self._push(at, self._set_lossy, rec, True)
        if restore_at is not None:
            self._push(restore_at, self._set_lossy, rec, False)

    def _apply_capacity(self, links: np.ndarray) -> None:
        cap = np.where(self._down[links], 0.0, self.topo.capacity[links] * self._keep[links])
        self.net.set_capacity(links, cap)

    def _set_lossy(self, rec: dict, on: bool) -> None:
        links = rec["links"]
        b = float(self.net.bytes_on_link[links].sum())
        if on:
            rec["active"], rec["_b0"] = True, b
        else:
            rec["active"] = False
            rec["goodput_bytes"] += b - rec["_b0"]
        self._keep[links] = 1.0
        for r in self.lossy:  # recomputed from the periods in force (no drift after a restore)
            if r["active"]:
                np.multiply.at(self._keep, r["links"][np.isin(r["links"], links)], 1.0 - r["loss"])
        self._apply_capacity(links)

    def lossy_report(self) -> list[dict]:
        """Per lossy period: links, loss, goodput bytes that crossed them while lossy (so far) and the
        bytes resent (each delivered packet took ``1 / (1 - loss)`` transmissions in expectation)."""
        out = []
        for r in self.lossy:
            g = r["goodput_bytes"]
            if r["active"]:
                g += float(self.net.bytes_on_link[r["links"]].sum()) - r["_b0"]
            out.append({"links": [self.topo.describe(int(x)) for x in r["links"]], "loss": r["loss"],
                        "on_s": r["on_s"], "off_s": r["off_s"], "goodput_bytes": g,
                        "retransmitted_bytes": g * r["loss"] / (1.0 - r["loss"])})
        return out

    def active_streams(self) -> dict[int, StreamInfo]:
        return self._streams

    # ---- event plumbing ----------------------------------------------------------------------
    def _push(self, t: float, fn, *args) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), fn, args))

    def run(self, until: float = np.inf) -> Simulator:
        """Run until every job has finished or time ``until``."""
        w0 = time.perf_counter()
        while True:
            t_ev = self._heap[0][0] if self._heap else np.inf
            t_net = self.now + self.net.time_to_next()
            t = min(t_ev, t_net, until)
            if not np.isfinite(t):
                break
            done = self.net.advance(max(t - self.now, 0.0))
            self.now = t
            for sid in done:
                self._stream_done(sid)
            while self._heap and self._heap[0][0] <= self.now:
                _, _, fn, args = heapq.heappop(self._heap)
                fn(*args)
                self.events += 1
            if self.now >= until:
                break
        self.wall_s += time.perf_counter() - w0
        return self

    def _set_links(self, links: np.ndarray, up: bool) -> None:
        self._down[links] = not up
        self._apply_capacity(links)
        self.router.alive[links] = up
        for sid, paths in self.router.on_link_change(self).items():
            if sid in self.net:
                self.net.reroute(sid, paths)
                self._streams[sid].paths = paths

    # ---- job progress ------------------------------------------------------------------------
    def _start_job(self, jid: int) -> None:
        self.router.on_job_start(self, jid)
        self._start_step(jid, 0, 0)

    def _start_step(self, jid: int, it: int, k: int) -> None:
        rec = self.jobs[jid]
        steps = self._steps[jid]
        if k == len(steps):
            rec.iter_end.append(self.now)
            if it + 1 >= rec.spec.iterations:
                rec.finished = self.now
                return
            it, k = it + 1, 0
        step = steps[k]
        self._step_started[jid] = self.now
        if isinstance(step, Compute):
            rec.compute_s += step.seconds
            rec.compute_until = self.now + step.seconds
            self._push(self.now + step.seconds, self._start_step, jid, it, k + 1)
            return
        assert isinstance(step, Comm)
        live = self._live(jid, k)
        if step.compute_s > 0:  # overlapped compute: one more completion to wait for
            rec.compute_s += step.compute_s
            rec.compute_until = self.now + step.compute_s
            self._push(self.now + step.compute_s, self._coll_done, jid, it, k)
        elif not live:
            self._start_step(jid, it, k + 1)
            return
        self._pending_colls[(jid, it, k)] = len(live) + (step.compute_s > 0)
        prio = self.router.priority(jid)
        for ci, coll in enumerate(live):
            key = (jid, it, k, ci)
            self._pending_streams[key] = len(coll.streams)
            for s in coll.streams:
                rk = (k, ci, s.key)
                paths = self.router.route(jid, rk, s.src, s.dst)
                sid = self.net.add(paths, s.nbytes, prio)
                self._streams[sid] = StreamInfo(jid, rk, s.src, s.dst, paths, key)

    def _live(self, jid: int, k: int) -> list:
        """The non-empty collectives of step ``k`` of job ``jid`` (cached: a step's collectives are
        fixed, and rebuilding the list at every stream completion cost O(collectives) each)."""
        key = (jid, k)
        live = self._live_colls.get(key)
        if live is None:
            live = self._live_colls[key] = [c for c in self._steps[jid][k].collectives if not c.empty]
        return live

    def _stream_done(self, sid: int) -> None:
        info = self._streams.pop(sid)
        key = info.coll
        self._pending_streams[key] -= 1
        if self._pending_streams[key] == 0:
            del self._pending_streams[key]
            jid, it, k, ci = key
            coll = self._live(jid, k)[ci]
            self._push(self.now + coll.latency_s, self._coll_done, jid, it, k)

    def _coll_done(self, jid: int, it: int, k: int) -> None:
        key = (jid, it, k)
        self._pending_colls[key] -= 1
        if self._pending_colls[key] == 0:
            del self._pending_colls[key]
            rec = self.jobs[jid]
            step = self._steps[jid][k]
            exposed = self.now - self._step_started[jid] - step.compute_s
            rec.comm_s[step.label] = rec.comm_s.get(step.label, 0.0) + max(exposed, 0.0)
            self._start_step(jid, it, k + 1)

    # ---- results -----------------------------------------------------------------------------
    def gpu_utilisation(self, horizon: float | None = None) -> float:
        """Fraction of allocated GPU-time spent computing up to ``horizon`` (default: now)."""
        h = self.now if horizon is None else horizon
        busy = total = 0.0
        for r in self.jobs.values():
            end = r.finished if r.finished is not None else h
            span = max(min(end, h) - r.start, 0.0)
            total += span * r.spec.n_gpus
            busy += max(r.compute_s - max(r.compute_until - h, 0.0), 0.0) * r.spec.n_gpus
        return busy / total if total > 0 else 0.0
