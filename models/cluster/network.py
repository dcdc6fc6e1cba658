"""Flow-level network: max-min fair sharing with coupled streams and strict priority levels.

The unit of transfer is a *stream*: one or more flows (paths) that move the same number of bytes
at one common rate. A single flow is a stream of one path; a pipelined ring all-reduce is one
stream of ``n`` paths, because a ring advances at the pace of its slowest hop (every rank forwards
what it received), so its flows share one rate. A link crossed by ``m`` paths of a stream carries
``m`` times the stream's rate.

Rates are the max-min fair allocation (Bertsekas & Gallager, *Data Networks*, 6.5.2: progressive
filling) computed level by level: streams of priority 0 take their max-min share first, priority 1
shares what is left, and so on (strict priority, as on switch queues with K hardware classes).

Time advances by :meth:`FlowNetwork.advance`; :meth:`FlowNetwork.time_to_next` gives the time until
the next stream completes at the current rates. Rates are recomputed only when the stream set or
capacities change; with ``incremental=True`` (opt-in) only inside the connected components (of
the stream-link graph) that contain a link touched since the last computation: a
stream added, finished, removed, rerouted or re-prioritised touches its links, a capacity change
touches its links. Max-min allocations of disjoint components are independent, so the other
streams keep their rates; the only difference from a full recomputation is the ``1e-9`` relative
tolerance with which progressive filling freezes near-equal bottlenecks together (the tests
compare both modes; on the benchmarks they agree exactly). It is off by default because it did
not pay: labelling components costs O(path hops), like rebuilding the incidence matrix, while
progressive filling converges in a few rounds, and on a fragmented Clos (random placement) every
job shares core links, so one component holds nearly every stream (``hwcosim bench
cluster_speed`` measures both modes).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

__all__ = ["FlowNetwork", "maxmin_rates"]

_REL_EPS = 1e-9


def maxmin_rates(incidence: sp.csr_matrix, capacity: np.ndarray, priority: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates of streams over links, strict priority between levels.

    Parameters
    ----------
    incidence : csr_matrix, shape (links, streams)
        Number of the stream's paths crossing each link (a stream at rate r loads the link by
        ``incidence * r``).
    capacity : ndarray, shape (links,)
        Link capacities (>= 0).
    priority : ndarray of int, shape (streams,), optional
        Smaller is served first; default all 0.

    Returns
    -------
    ndarray, shape (streams,)
        Rates; a stream that crosses a zero-capacity link gets 0.
    """
    n_links, n = incidence.shape
    rate = np.zeros(n)
    if n == 0:
        return rate
    rem = np.asarray(capacity, dtype=float).copy()
    at = incidence.T.tocsr()
    prio = np.zeros(n, dtype=np.int64) if priority is None else np.asarray(priority, dtype=np.int64)
    for level in np.unique(prio):
        active = prio == level
        while active.any():
            load = incidence @ active.astype(float)
            used = load > 0
            share = np.full(n_links, np.inf)
            share[used] = np.maximum(rem[used], 0.0) / load[used]
            m = share.min()
            if not np.isfinite(m):  # active streams without links: not allowed upstream
                raise ValueError("a stream crosses no link")
            bott = share <= m * (1 + _REL_EPS) + 1e-300
            frozen = (at @ bott.astype(float) > 0) & active
            rate[frozen] = m
            rem -= incidence @ np.where(frozen, m, 0.0)
            active &= ~frozen
    return rate


class FlowNetwork:
    """Active streams on a set of links, advanced in continuous time.

    Parameters
    ----------
    capacity : ndarray, shape (links,)
        Bytes per second of every link (copied; change with :meth:`set_capacity`).
    incremental : bool
        Recompute rates only in the components touched by a change (module docstring).
    """

    def __init__(self, capacity: np.ndarray, incremental: bool = False):
        cap = np.asarray(capacity, dtype=float)
        if cap.ndim != 1 or np.any(cap < 0):
            raise ValueError("capacity must be a 1-D array of non-negative bytes/s")
        self.capacity = cap.copy()
        self._paths: dict[int, np.ndarray] = {}
        self._remaining: dict[int, float] = {}
        self._size: dict[int, float] = {}
        self._prio: dict[int, int] = {}
        self._ids = np.zeros(0, dtype=np.int64)
        self._rate = np.zeros(0)
        self._rem = np.zeros(0)
        self._dirty = False
        self._next_id = 0
        self.bytes_on_link = np.zeros(cap.size)
        self.recomputes = 0
        self.incremental = bool(incremental)
        self.streams_recomputed = 0  # sum over recomputations of the streams whose rates were solved
        self._touched: list[np.ndarray] = []
        self._prev: tuple[np.ndarray, np.ndarray] | None = None  # (ids, rates) of the last solution

    # ---- stream set --------------------------------------------------------------------------
    def add(self, paths: np.ndarray, nbytes: float, priority: int = 0) -> int:
        """Start a stream: ``paths`` (k, w) link ids padded with -1, each path moves ``nbytes``."""
        paths = np.atleast_2d(np.asarray(paths, dtype=np.int64))
        links = paths[paths >= 0]
        if links.size == 0:
            raise ValueError("a stream needs at least one link")
        if links.max() >= self.capacity.size:
            raise ValueError(f"link id {links.max()} out of range ({self.capacity.size} links)")
        if not nbytes > 0:
            raise ValueError(f"stream size must be > 0 bytes, not {nbytes!r}")
        self._sync()
        sid = self._next_id
        self._next_id += 1
        self._paths[sid] = links
        self._touched.append(links)
        self._remaining[sid] = float(nbytes)
        self._size[sid] = float(nbytes)
        self._prio[sid] = int(priority)
        self._dirty = True
        return sid

    def remove(self, sid: int) -> float:
        """Stop a stream; returns its remaining bytes."""
        self._sync()
        rem = self._remaining.pop(sid)
        self._touched.append(self._paths[sid])
        del self._paths[sid], self._size[sid], self._prio[sid]
        self._dirty = True
        return rem

    def set_priority(self, sid: int, priority: int) -> None:
        self._sync()
        self._prio[sid] = int(priority)
        self._touched.append(self._paths[sid])
        self._dirty = True

    def set_capacity(self, links, value) -> None:
        """Change capacities (a failed link: 0)."""
        self._sync()
        links = np.atleast_1d(np.asarray(links, dtype=np.int64))
        self.capacity[links] = value
        self._touched.append(links.ravel())
        self._dirty = True

    def reroute(self, sid: int, paths: np.ndarray) -> None:
        """Move a stream to new paths, keeping its remaining bytes."""
        self._sync()
        paths = np.atleast_2d(np.asarray(paths, dtype=np.int64))
        self._touched.append(self._paths[sid])
        self._paths[sid] = paths[paths >= 0]
        self._touched.append(self._paths[sid])
        self._dirty = True

    def __len__(self) -> int:
        return len(self._paths)

    def __contains__(self, sid: int) -> bool:
        return sid in self._paths

    def paths_of(self, sid: int) -> np.ndarray:
        return self._paths[sid]

    # ---- rates and time ----------------------------------------------------------------------
    def _sync(self) -> None:
        """Write the vector state back into the dicts (before the stream set changes)."""
        if self._ids.size:
            for sid, r in zip(self._ids.tolist(), self._rem.tolist()):
                if sid in self._remaining:
                    self._remaining[sid] = r
            self._ids = np.zeros(0, dtype=np.int64)

    def _refresh(self) -> None:
        if not self._dirty and self._ids.size == len(self._paths):
            return
        self._sync()
        ids = np.fromiter(self._paths.keys(), dtype=np.int64, count=len(self._paths))
        if ids.size:
            lens = np.fromiter((self._paths[s].size for s in ids.tolist()), dtype=np.int64, count=ids.size)
            rows = np.concatenate([self._paths[s] for s in ids.tolist()])
            cols = np.repeat(np.arange(ids.size), lens)
            inc = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(self.capacity.size, ids.size))
            prio = np.fromiter((self._prio[s] for s in ids.tolist()), dtype=np.int64, count=ids.size)
            self._rate = self._solve(ids, inc, prio, rows, cols)
            self._inc = inc
            self.recomputes += 1
        else:
            self._rate = np.zeros(0)
            self._inc = None
        self._prev = (ids, self._rate)
        self._touched = []
        self._ids = ids
        self._rem = np.fromiter((self._remaining[s] for s in ids.tolist()), dtype=float, count=ids.size)
        self._dirty = False

    def _solve(self, ids, inc, prio, rows, cols) -> np.ndarray:
        """Max-min rates: all streams, or only the components touched since the last solution."""
        if not self.incremental or self._prev is None or not self._touched:
            self.streams_recomputed += ids.size
            return maxmin_rates(inc, self.capacity, prio)
        n_l, n_s = inc.shape
        # components of the bipartite graph (nodes: links, then streams; an edge per path hop)
        g = sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, n_l + cols)), shape=(n_l + n_s, n_l + n_s))
        _, lab = connected_components(g, directed=False)
        hit = np.zeros(lab.max() + 1, dtype=bool)
        hit[lab[np.concatenate(self._touched)]] = True
        sel = hit[lab[n_l:]]
        rate = np.zeros(n_s)
        pid, prate = self._prev
        if pid.size:
            pos = np.minimum(np.searchsorted(pid, ids), pid.size - 1)
            known = pid[pos] == ids
            rate[known] = prate[pos[known]]
            sel |= ~known  # (new streams touch their links, so this is only a safeguard)
        k = int(sel.sum())
        if k > 0.5 * n_s:  # most streams are coupled anyway: the full solve is cheaper than the subset
            self.streams_recomputed += n_s
            return maxmin_rates(inc, self.capacity, prio)
        if k:
            newcol = np.cumsum(sel) - 1
            m = sel[cols]
            sub = sp.csr_matrix((np.ones(int(m.sum())), (rows[m], newcol[cols[m]])), shape=(n_l, k))
            rate[sel] = maxmin_rates(sub, self.capacity, prio[sel])
        self.streams_recomputed += k
        return rate

    def rates(self) -> dict[int, float]:
        """Current rate (bytes/s) of every stream."""
        self._refresh()
        return dict(zip(self._ids.tolist(), self._rate.tolist()))

    def rate(self, sid: int) -> float:
        return self.rates()[sid]

    def link_load(self) -> np.ndarray:
        """Current bytes/s on every link."""
        self._refresh()
        if self._inc is None:
            return np.zeros(self.capacity.size)
        return self._inc @ self._rate

    def time_to_next(self) -> float:
        """Seconds until the next stream completes at current rates (inf if none can)."""
        self._refresh()
        if not self._ids.size:
            return np.inf
        with np.errstate(divide="ignore"):
            t = np.where(self._rate > 0, self._rem / np.where(self._rate > 0, self._rate, 1.0), np.inf)
        return float(t.min())

    def advance(self, dt: float) -> list[int]:
        """Move time forward by ``dt`` seconds; returns the ids of streams that completed (removed)."""
        self._refresh()
        if not self._ids.size or dt < 0:
            return []
        moved = self._rate * dt
        self._rem = self._rem - moved
        if self._inc is not None and dt > 0:
            self.bytes_on_link += self._inc @ moved
        done_mask = self._rem <= np.maximum(1e-9 * np.fromiter((self._size[s] for s in self._ids.tolist()),
                                                               dtype=float, count=self._ids.size), 1e-6)
        done = self._ids[done_mask].tolist()
        if done:
            self._sync()
            for sid in done:
                self._touched.append(self._paths[sid])
                del self._paths[sid], self._remaining[sid], self._size[sid], self._prio[sid]
            self._dirty = True
        return done
