"""What monitoring agents record from a running job: the only input of the detectors.

:class:`Telemetry` is written by :class:`~models.systems.cluster.transport.TransportSim` while it runs and
holds records, never simulator state or fault labels:

- **completion logs** (C4D's collective timestamps, Mycroft's completion log): for every
  collective instance, when each rank entered and left it. A rank's agent writes them only while
  its process lives, and only up to the observation horizon (NaN: not written).
- **per-WR trace**: post (``T``) and completion (``D``) time of every chunk of every connection, and
  the GPU-ready time (``G``), as the instrumented proxy sees them; entries after the sender's
  process died or after the horizon are absent (inf).
- **state logs** (Mycroft, every ``state_log_s``): per flow (connection) and tick, the counters
  ``G``, ``T``, ``D`` (chunks ready, posted, done), ``total`` and ``stuck_s`` (time since ``D``
  last advanced), written by the sender's proxy while its process lives and the flow is open.
- **training signals**: the loss of every iteration (NaN or not), logged when the iteration ends.
- **hardware sensors**: Xid / DCGM GPU errors, link up/down events from switches and NICs, and
  per-link dropped-chunk counters (switch port error counters), with their times.

Queries take the observation time ``t`` and use only records stamped ``<= t``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Telemetry", "CollLog", "StateLog"]


@dataclass
class CollLog:
    """One collective instance.

    Attributes
    ----------
    it, seq : int
        Iteration and position of the collective in the iteration.
    label : str
    ranks : ndarray (n,)
    enter, exit : ndarray (n,)
        Logged entry / exit times (NaN: not logged).
    G, T, D : ndarray (K, conns) or None
        Per-chunk trace (inf: not observed).
    """

    it: int
    seq: int
    label: str
    ranks: np.ndarray
    enter: np.ndarray
    exit: np.ndarray
    G: np.ndarray | None = None
    T: np.ndarray | None = None
    D: np.ndarray | None = None
    idx: int = -1  # position in Telemetry.colls (the instance id of the state-log rows)


@dataclass
class StateLog:
    """State-log rows (one per flow per tick), as columns."""

    t: np.ndarray
    inst: np.ndarray  # index into Telemetry.colls
    conn: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    G: np.ndarray
    T: np.ndarray
    D: np.ndarray
    total: np.ndarray
    stuck_s: np.ndarray

    def select(self, m: np.ndarray) -> StateLog:
        return StateLog(*(getattr(self, f)[m] for f in self.__dataclass_fields__))

    @property
    def size(self) -> int:
        return int(self.t.size)


def _count(a: np.ndarray, ticks: np.ndarray) -> np.ndarray:
    """Entries of every column of ``a`` (K, n; non-decreasing down each column) <= each tick -> (nt, n)."""
    out = np.empty((ticks.size, a.shape[1]), dtype=np.int64)
    for i in range(a.shape[1]):
        out[:, i] = np.searchsorted(a[:, i], ticks, side="right")
    return out


@dataclass
class Telemetry:
    """Records of one job (see the module docstring)."""

    n_gpus: int
    gpus_per_host: int
    place: np.ndarray
    state_log_s: float
    conns: dict  # label -> (src, dst, channel, K, chunk bytes): the job's communicator layout
    paths: dict = field(default_factory=dict)  # label -> link ids of every connection's path at start
    window: int = 8  # NCCL_STEPS, a configuration constant the proxy's counters are read against
    link_gpu: np.ndarray | None = None  # inventory: GPU of every NIC port / NVLink link, -1 for fabric links
    colls: list = field(default_factory=list)
    losses: list = field(default_factory=list)  # (it, t, is_nan)
    hw_events: list = field(default_factory=list)  # (t, sensor, id, state)
    horizon: float = np.inf
    finished: float | None = None  # when the job exited normally (the launcher logs it)
    _state: list = field(default_factory=list, repr=False)
    _drops: tuple = field(default=(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0)), repr=False)

    # ---- writing (the transport model calls these) ---------------------------------------------
    def log_collective(self, it, seq, label, ranks, enter, exit_, die_at, trace, horizon) -> None:
        """Record one collective instance as the ranks' agents would (``die_at``: when each rank's
        process stops writing)."""
        ok_in = np.isfinite(enter) & (enter <= horizon) & (enter < die_at)
        ok_out = np.isfinite(exit_) & (exit_ <= horizon) & (exit_ < die_at)
        rec = CollLog(it, seq, label, ranks.copy(), np.where(ok_in, enter, np.nan), np.where(ok_out, exit_, np.nan),
                      idx=len(self.colls))
        if trace is not None:
            src = self.conns[label][0]
            writer = np.full(self.n_gpus, np.inf)
            writer[ranks] = die_at
            w = np.minimum(writer[src], horizon)
            G, T, D = (np.where(a <= w, a, np.inf) for a in trace)
            rec.G, rec.T, rec.D = G, T, D
            self._state_rows(len(self.colls), rec, writer, horizon)
        self.colls.append(rec)

    def _state_rows(self, inst: int, rec: CollLog, writer: np.ndarray, horizon: float) -> None:
        src, dst, _ch, K, _chunk = self.conns[rec.label]
        per = self.state_log_s
        ent = np.full(self.n_gpus, np.nan)
        ent[rec.ranks] = rec.enter
        ext = np.full(self.n_gpus, np.nan)
        ext[rec.ranks] = rec.exit
        e_src = ent[src]
        if not np.isfinite(e_src).any():
            return
        t0 = np.nanmin(e_src)
        fin = ext[src]
        t1 = np.nanmax(fin) if np.isfinite(fin).all() else horizon
        t1 = min(t1, horizon, float(np.max(np.minimum(writer[src], horizon))))
        if not np.isfinite(t1) or t1 < t0:
            return
        ticks = np.arange(np.ceil(t0 / per - 1e-9), np.floor(t1 / per + 1e-9) + 1) * per
        if ticks.size == 0:
            return
        cG, cT, cD = _count(rec.G, ticks), _count(rec.T, ticks), _count(rec.D, ticks)
        last = np.where(cD > 0, np.take_along_axis(rec.D, np.maximum(cD - 1, 0), axis=0), np.nan)
        tt = ticks[:, None]
        since = np.where(np.isnan(last), tt - e_src[None, :], tt - last)
        open_ = (tt >= e_src[None, :]) & ~(tt > fin[None, :] + per) & (tt < writer[src][None, :])
        r, i = np.nonzero(open_)
        self._state.append(StateLog(ticks[r], np.full(r.size, inst), i, src[i], dst[i], cG[r, i], cT[r, i], cD[r, i],
                                    np.full(r.size, K), since[r, i]))

    def log_loss(self, it: int, t: float, is_nan: bool) -> None:
        self.losses.append((it, t, is_nan))

    def set_drops(self, drops: list, horizon: float) -> None:
        if drops:
            t = np.concatenate([a for a, _, _ in drops])
            lk = np.concatenate([b for _, b, _ in drops])
            c = np.concatenate([x for _, _, x in drops])
            keep = t <= horizon
            self._drops = (t[keep], lk[keep], c[keep])

    # ---- reading (detectors call these) -------------------------------------------------------
    @property
    def ranks(self) -> np.ndarray:
        return self.place.ravel()

    def records(self, t: float) -> list[CollLog]:
        """Completion logs as known at ``t`` (entries stamped later are NaN; instances not yet
        entered by anyone are left out)."""
        out = []
        for r in self.colls:
            en = np.where(r.enter <= t, r.enter, np.nan)
            if not np.isfinite(en).any():
                continue
            ex = np.where(r.exit <= t, r.exit, np.nan)
            out.append(CollLog(r.it, r.seq, r.label, r.ranks, en, ex, r.G, r.T, r.D, r.idx))
        return out

    def state_log(self, t0: float = -np.inf, t1: float = np.inf) -> StateLog:
        """State-log rows with ``t0 <= tick <= t1``."""
        if not self._state:
            z = np.zeros(0)
            zi = np.zeros(0, dtype=np.int64)
            return StateLog(z, zi, zi, zi, zi, zi, zi, zi, zi, z)
        if len(self._state) > 1:
            f = StateLog.__dataclass_fields__
            self._state = [StateLog(*(np.concatenate([getattr(s, k) for s in self._state]) for k in f))]
        s = self._state[0]
        return s.select((s.t >= t0 - 1e-9) & (s.t <= t1 + 1e-9))

    def latest_state(self, t: float) -> StateLog:
        """The last state-log row of every flow of every instance written at or before ``t``."""
        s = self.state_log(-np.inf, t)
        if not s.size:
            return s
        key = s.inst * (1 << 32) + s.conn
        order = np.lexsort((s.t, key))
        k = key[order]
        lastpos = order[np.r_[k[1:] != k[:-1], True]]
        return s.select(np.sort(lastpos))

    def state_at(self, t: float) -> StateLog:
        """The state log written at the last tick ``<= t`` (flows of open instances whose sender
        still logs; a dead process has no rows)."""
        tick = np.floor(t / self.state_log_s + 1e-9) * self.state_log_s
        return self.state_log(tick, tick)

    def losses_until(self, t: float) -> list:
        return [x for x in self.losses if x[1] <= t]

    def hw(self, t: float, sensor: str | None = None) -> list:
        return [e for e in self.hw_events if e[0] <= t and (sensor is None or e[1] == sensor)]

    def drops(self, t0: float, t1: float, n_links: int) -> np.ndarray:
        """Dropped chunks per link counted by the switches in ``[t0, t1]``."""
        t, lk, c = self._drops
        m = (t >= t0) & (t <= t1)
        return np.bincount(lk[m], weights=c[m], minlength=n_links)

    def conn_latency(self, rec: CollLog, t: float, stuck_after_s: float = 1.0) -> np.ndarray:
        """Per-connection chunk service time seen by the proxy in instance ``rec`` up to ``t``:
        mean of ``D[k] - max(T[k], D[k-1])`` over completed chunks; inf when a chunk was posted
        more than ``stuck_after_s`` before ``t`` and is not done; NaN without data."""
        T = np.where(rec.T <= t, rec.T, np.inf)
        D = np.where(rec.D <= t, rec.D, np.inf)
        prev = np.vstack([np.full((1, D.shape[1]), -np.inf), D[:-1]])
        with np.errstate(invalid="ignore"):
            svc = D - np.maximum(T, prev)
        ok = np.isfinite(svc)
        n_ok = ok.sum(axis=0)
        med = np.where(n_ok > 0, np.where(ok, svc, 0.0).sum(axis=0) / np.maximum(n_ok, 1), np.nan)
        pending = np.isfinite(T) & ~np.isfinite(D) & (T < t - stuck_after_s)
        return np.where(pending.any(axis=0), np.inf, med)

    def latency_matrix(self, t: float, label: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """C4D's matrix as (src, dst, seconds per chunk) of the latest instance with a trace at ``t``
        (of ``label`` if given), the worst channel per rank pair."""
        recs = [r for r in self.records(t) if r.T is not None and (label is None or r.label == label)]
        if not recs:
            z = np.zeros(0, dtype=np.int64)
            return z, z, np.zeros(0)
        rec = recs[-1]
        lat = self.conn_latency(rec, t)
        src, dst = self.conns[rec.label][0], self.conns[rec.label][1]
        key = src * self.n_gpus + dst
        u, inv = np.unique(key, return_inverse=True)
        worst = np.full(u.size, -np.inf)
        np.maximum.at(worst, inv, np.where(np.isnan(lat), -np.inf, lat))
        worst = np.where(worst == -np.inf, np.nan, worst)
        return u // self.n_gpus, u % self.n_gpus, worst
