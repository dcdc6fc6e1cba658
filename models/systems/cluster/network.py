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
the next stream completes at the current rates.

**Incremental updates (the default).** Rates change only when a stream starts, ends, is rerouted
or re-prioritised, or a capacity changes, and then only inside the connected component (of the
bipartite stream-link graph) of the links touched: max-min allocations of disjoint components
are independent, so every other stream keeps its rate. The network keeps its state in flat
arrays (stream slots; an append-only path-hop list with a contiguous range per stream; a
component label per link and per stream, merged in one small graph per solve when new streams
bridge components), so a change costs O(hops of the touched component), not O(all hops): the
component is found from the labels, its hops gathered from the per-stream ranges, and
progressive filling runs on that component only with numpy ``bincount`` over its hops and its
links (not the whole topology's). A stream that ends does not split labels at once (a superset
of a component is still solved exactly); labels are recomputed exactly
(:func:`scipy.sparse.csgraph.connected_components`) once enough streams have ended. Two cheap
guards keep the incremental mode from costing more than a full solve when nothing can be
saved: when the streams started since the last solve hold half the live hops or more (a
collective starting on an idle network, the common case of one large job) everything is solved
and labels are rebuilt lazily; and when recent components held nearly every live stream (one
job spread over the fabric) the next solves are full, with an exponential back-off before
components are tried again. ``incremental=False`` solves every live stream at every change with
the same kernel (``hwcosim bench cluster_speed`` measures both in one process). The only
difference from a full solve is the ``1e-9`` relative tolerance with which progressive filling
freezes near-equal bottlenecks together: in a full solve two components whose bottleneck shares
lie within ``1e-9`` of each other freeze in one round; the tests compare against the reference
:func:`maxmin_rates` after random start/end/capacity sequences.

Bytes carried per link (:attr:`FlowNetwork.bytes_on_link`) are integrated lazily: a link's load is
constant between rate changes, so its bytes are brought up to date only when its load changes or
when they are read.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hwcosim.models.errors import UsageError
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



def _waterfill(inv: np.ndarray, loc: np.ndarray, cap: np.ndarray, prio: np.ndarray) -> np.ndarray:
    """Progressive filling on hop lists (the kernel of :class:`FlowNetwork`).

    Parameters
    ----------
    inv, loc : ndarray of int, shape (hops,)
        Local link index and local stream index of every path hop (a stream crossing a link ``m``
        times has ``m`` hops there).
    cap : ndarray, shape (links,)
        Capacities of the local links.
    prio : ndarray of int, shape (streams,)

    Returns
    -------
    ndarray, shape (streams,)
        Max-min rates with strict priority, the same rounds and tolerance as :func:`maxmin_rates`.
    """
    k, nl = prio.size, cap.size
    rate = np.zeros(k)
    rem = np.maximum(np.asarray(cap, dtype=float), 0.0)
    levels = np.unique(prio)
    for level in levels:
        active = prio == level if levels.size > 1 else np.ones(k, dtype=bool)
        while True:
            w = active[loc]
            if not w.any():
                break
            load = np.bincount(inv, weights=w, minlength=nl)
            used = load > 0
            share = np.full(nl, np.inf)
            share[used] = np.maximum(rem[used], 0.0) / load[used]
            m = share.min()
            if not np.isfinite(m):
                raise ValueError("a stream crosses no link")
            bott = share <= m * (1 + _REL_EPS) + 1e-300
            frozen = np.zeros(k, dtype=bool)
            frozen[loc[bott[inv] & w]] = True
            rate[frozen] = m
            rem -= np.bincount(inv, weights=frozen[loc] * m, minlength=nl)
            active &= ~frozen
    return rate


class _SlotView:
    """Read-only ``{stream id: value}`` view of a per-slot array (compatibility for readers)."""

    def __init__(self, net: FlowNetwork, attr: str):
        self._net, self._attr = net, attr

    def __getitem__(self, sid: int) -> float:
        return float(getattr(self._net, self._attr)[self._net._slot[sid]])

    def __contains__(self, sid) -> bool:
        return sid in self._net._slot

    def __len__(self) -> int:
        return len(self._net._slot)


class FlowNetwork:
    """Active streams on a set of links, advanced in continuous time.

    Parameters
    ----------
    capacity : ndarray, shape (links,)
        Bytes per second of every link (copied; change with :meth:`set_capacity`).
    incremental : bool
        Recompute rates only in the component touched by a change (module docstring); default.

    Attributes
    ----------
    recomputes : int
        Rate computations (one per batch of changes with live streams).
    streams_recomputed : int
        Sum over computations of the streams whose rates were solved.
    """

    def __init__(self, capacity: np.ndarray, incremental: bool = True):
        cap = np.asarray(capacity, dtype=float)
        if cap.ndim != 1 or np.any(cap < 0):
            raise UsageError("capacity must be a 1-D array of non-negative bytes/s")
        self.capacity = cap.copy()
        nl = cap.size
        # streams: sid -> slot; per-slot vectors
        self._slot: dict[int, int] = {}
        self._paths: dict[int, np.ndarray] = {}
        self._free: list[int] = []
        self._hw = 0  # slots ever used (high-water mark)
        self._sid = np.full(64, -1, dtype=np.int64)
        self._v_rem = np.zeros(64)
        self._v_size = np.zeros(64)
        self._v_rate = np.zeros(64)
        self._v_prio = np.zeros(64, dtype=np.int64)
        self._es = np.zeros(64, dtype=np.int64)  # hop range [es, ee) of every slot
        self._ee = np.zeros(64, dtype=np.int64)
        self._lab_s = np.full(64, -1, dtype=np.int64)
        # hops (append-only, compacted when mostly dead)
        self._e_link = np.zeros(1024, dtype=np.int64)
        self._n_e = 0
        self._dead_e = 0
        # component labels: per link, union-find over label ids
        self._lab_l = np.full(nl, -1, dtype=np.int64)
        self._lab_s[:] = -1
        self._n_lab = 0
        self._ended = 0  # streams ended since the last exact labelling
        self._relabel_at = 64
        self._lab_ok = True  # labels cover every live stream except those in _pending
        self._pending: list[tuple[int, np.ndarray]] = []  # (slot, links) to join before labels are used
        self._live_hops = 0
        self._added_hops = 0  # hops of streams started or rerouted since the last solve
        self._skip = 0  # solves to run in full before trying components again
        self._backoff = 1
        # change tracking and caches
        self._touched: list[np.ndarray] = []
        self._dirty = False
        self._live: np.ndarray | None = None
        # per-link load and lazily integrated bytes
        self._load = np.zeros(nl)
        self._bytes = np.zeros(nl)
        self._since = np.zeros(nl)
        self._clock = 0.0
        self._next_id = 0
        self.recomputes = 0
        self.streams_recomputed = 0
        self._incremental = bool(incremental)

    # ---- mode --------------------------------------------------------------------------------
    @property
    def incremental(self) -> bool:
        return self._incremental

    @incremental.setter
    def incremental(self, on: bool) -> None:
        on = bool(on)
        if on and not self._incremental:
            self._lab_ok, self._pending = False, []
        self._incremental = on

    # ---- slots and hops ----------------------------------------------------------------------
    def _grow_slots(self) -> None:
        n = self._sid.size * 2
        for name in ("_sid", "_v_rem", "_v_size", "_v_rate", "_v_prio", "_es", "_ee", "_lab_s"):
            old = getattr(self, name)
            new = np.full(n, -1, dtype=old.dtype) if name in ("_sid", "_lab_s") else np.zeros(n, dtype=old.dtype)
            new[:old.size] = old
            setattr(self, name, new)

    def _append_hops(self, slot: int, links: np.ndarray) -> None:
        n = links.size
        if self._n_e + n > self._e_link.size:
            if self._dead_e > self._n_e // 2:
                self._compact()
            if self._n_e + n > self._e_link.size:
                new = np.zeros(max(2 * self._e_link.size, self._n_e + n), dtype=np.int64)
                new[:self._n_e] = self._e_link[:self._n_e]
                self._e_link = new
        self._e_link[self._n_e:self._n_e + n] = links
        self._es[slot], self._ee[slot] = self._n_e, self._n_e + n
        self._n_e += n

    def _compact(self) -> None:
        live = self._live_slots()
        idx, lens = self._hop_index(live)
        self._e_link[:idx.size] = self._e_link[idx]
        ends = np.cumsum(lens)
        self._es[live], self._ee[live] = ends - lens, ends
        self._n_e, self._dead_e = int(idx.size), 0

    def _hop_index(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hop positions of ``slots`` (concatenated ranges) and the hop count of each."""
        es, lens = self._es[slots], self._ee[slots] - self._es[slots]
        tot = int(lens.sum())
        starts = np.cumsum(lens) - lens
        return np.arange(tot, dtype=np.int64) + np.repeat(es - starts, lens), lens

    def _live_slots(self) -> np.ndarray:
        if self._live is None:
            self._live = np.flatnonzero(self._sid[:self._hw] >= 0)
        return self._live

    # ---- component labels --------------------------------------------------------------------
    def _join_pending(self) -> None:
        """Label the streams started (or rerouted) since the last solve, merging the components
        they bridge: a small graph over (old labels hit, new streams, unlabelled links hit); each
        of its components takes its smallest old label, or a fresh one."""
        pend = [(slot, links) for slot, links in self._pending if self._sid[slot] >= 0]
        self._pending = []
        if not pend:
            return
        nl, nlab, p = self.capacity.size, self._n_lab, len(pend)
        links = np.concatenate([x[1] for x in pend])
        who = np.repeat(np.arange(p), [x[1].size for x in pend])
        lab = self._lab_l[links]
        new = lab < 0
        mo = np.zeros(nlab, dtype=bool)
        mo[lab[~new]] = True
        old_ids = np.flatnonzero(mo)
        k1 = old_ids.size
        po = np.zeros(nlab, dtype=np.int64)
        po[old_ids] = np.arange(k1)
        ml = np.zeros(nl, dtype=bool)
        ml[links[new]] = True
        new_ids = np.flatnonzero(ml)
        k2 = new_ids.size
        pl = np.zeros(nl, dtype=np.int64)
        pl[new_ids] = np.arange(k2)
        dst = np.where(new, k1 + p + pl[links], po[np.maximum(lab, 0)])
        n = k1 + p + k2
        g = sp.csr_matrix((np.ones(links.size, dtype=np.int8), (k1 + who, dst)), shape=(n, n))
        nc, comp = connected_components(g, directed=False)
        cid = np.full(nc, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(cid, comp[:k1], old_ids)
        fresh = cid == np.iinfo(np.int64).max
        cid[fresh] = nlab + np.arange(int(fresh.sum()))
        self._n_lab = nlab + int(fresh.sum())
        target = cid[comp[:k1]]
        if np.any(target != old_ids):  # old components merged: relabel their links and streams
            remap = np.arange(self._n_lab)
            remap[old_ids] = target
            m = self._lab_l >= 0
            self._lab_l[m] = remap[self._lab_l[m]]
            live = self._live_slots()
            ls = self._lab_s[live]
            ok = (ls >= 0) & (ls < nlab)
            self._lab_s[live[ok]] = remap[ls[ok]]
        self._lab_l[new_ids] = cid[comp[k1 + p:]]
        self._lab_s[np.array([x[0] for x in pend])] = cid[comp[k1:k1 + p]]

    def _relabel(self) -> int:
        """Exact component labels of the live streams; returns the number of components."""
        live = self._live_slots()
        self._lab_l[:] = -1
        self._ended = 0
        self._lab_ok, self._pending = True, []
        if not live.size:
            self._n_lab = 0
            return 0
        idx, lens = self._hop_index(live)
        links = self._e_link[idx]
        nl = self.capacity.size
        cols = np.repeat(np.arange(live.size), lens)
        g = sp.csr_matrix((np.ones(links.size, dtype=np.int8), (links, nl + cols)), shape=(nl + live.size,) * 2)
        n, lab = connected_components(g, directed=False)
        used = np.zeros(nl, dtype=bool)
        used[links] = True
        self._lab_l[used] = lab[:nl][used]
        self._lab_s[live] = lab[nl:]
        self._n_lab = n
        return n

    # ---- stream set --------------------------------------------------------------------------
    def add(self, paths: np.ndarray, nbytes: float, priority: int = 0) -> int:
        """Start a stream: ``paths`` (k, w) link ids padded with -1, each path moves ``nbytes``."""
        paths = np.atleast_2d(np.asarray(paths, dtype=np.int64))
        links = paths[paths >= 0]
        if links.size == 0:
            raise UsageError("a stream needs at least one link")
        if links.max() >= self.capacity.size:
            raise UsageError(f"link id {links.max()} out of range ({self.capacity.size} links)")
        if not nbytes > 0:
            raise UsageError(f"stream size must be > 0 bytes, not {nbytes!r}")
        sid = self._next_id
        self._next_id += 1
        if self._free:
            slot = self._free.pop()
        else:
            if self._hw == self._sid.size:
                self._grow_slots()
            slot = self._hw
            self._hw += 1
        self._slot[sid] = slot
        self._paths[sid] = links
        self._sid[slot] = sid
        self._v_rem[slot] = self._v_size[slot] = float(nbytes)
        self._v_rate[slot] = 0.0
        self._v_prio[slot] = int(priority)
        self._es[slot] = self._ee[slot] = 0
        self._append_hops(slot, links)
        self._live_hops += links.size
        self._added_hops += links.size
        if self._incremental and self._lab_ok:
            self._pending.append((slot, links))
        self._touched.append(links)
        self._dirty = True
        self._live = None
        return sid

    def _drop(self, sid: int) -> float:
        slot = self._slot.pop(sid)
        links = self._paths.pop(sid)
        self._touched.append(links)
        self._dead_e += int(self._ee[slot] - self._es[slot])
        self._live_hops -= int(self._ee[slot] - self._es[slot])
        self._sid[slot] = -1
        self._v_rate[slot] = 0.0
        self._free.append(slot)
        self._ended += 1
        self._dirty = True
        self._live = None
        return float(self._v_rem[slot])

    def remove(self, sid: int) -> float:
        """Stop a stream; returns its remaining bytes."""
        return self._drop(sid)

    def set_priority(self, sid: int, priority: int) -> None:
        self._v_prio[self._slot[sid]] = int(priority)
        self._touched.append(self._paths[sid])
        self._dirty = True

    def set_capacity(self, links, value) -> None:
        """Change capacities (a failed link: 0)."""
        links = np.atleast_1d(np.asarray(links, dtype=np.int64))
        self.capacity[links] = value
        self._touched.append(links.ravel())
        self._dirty = True

    def reroute(self, sid: int, paths: np.ndarray) -> None:
        """Move a stream to new paths, keeping its remaining bytes."""
        paths = np.atleast_2d(np.asarray(paths, dtype=np.int64))
        slot = self._slot[sid]
        links = paths[paths >= 0]
        self._touched.append(self._paths[sid])
        self._dead_e += int(self._ee[slot] - self._es[slot])
        self._live_hops += links.size - int(self._ee[slot] - self._es[slot])
        self._paths[sid] = links
        self._append_hops(slot, links)
        self._added_hops += links.size
        if self._incremental and self._lab_ok:  # the old links are touched: the old component is solved too
            self._pending.append((slot, links))
        self._touched.append(links)
        self._dirty = True

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, sid: int) -> bool:
        return sid in self._slot

    def paths_of(self, sid: int) -> np.ndarray:
        return self._paths[sid]

    # compatibility with readers of the former dict state (models.systems.reliability.sim.stream_progress)
    def _sync(self) -> None:
        """No-op: the vector state is the only state."""

    @property
    def _size(self) -> _SlotView:
        return _SlotView(self, "_v_size")

    @property
    def _remaining(self) -> _SlotView:
        return _SlotView(self, "_v_rem")

    # ---- rates and time ----------------------------------------------------------------------
    def _component(self, live: np.ndarray, touched: np.ndarray) -> np.ndarray:
        """Live slots in the components of the ``touched`` links (a superset when labels are stale)."""
        lt = self._lab_l[touched]
        lt = lt[lt >= 0]
        if not lt.size:
            return live[:0]
        hit = np.zeros(self._n_lab, dtype=bool)
        hit[lt] = True
        sel = live[hit[self._lab_s[live]]]
        if sel.size > live.size // 2 and self._ended >= self._relabel_at:
            n = self._relabel()
            # back off when labelling exactly did not split anything (one big component)
            self._relabel_at = max(64, live.size) if n > 1 else 2 * self._relabel_at
            return self._component(live, touched)
        return sel

    def _refresh(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        touched = np.concatenate(self._touched) if self._touched else np.zeros(0, dtype=np.int64)
        self._touched = []
        live = self._live_slots()
        if self._dead_e > 4096 and self._dead_e > self._n_e // 2:
            self._compact()
        added, self._added_hops = self._added_hops, 0
        full = not self._incremental or 2 * added >= self._live_hops
        if not full and self._skip > 0:  # recent components held (nearly) every stream: back off
            self._skip -= 1
            full = True
        if full:  # the new streams hold half the hops or more: their component is most of it
            sel = live
            self._lab_ok, self._pending = False, []  # labels are rebuilt when next needed
        else:
            if not self._lab_ok:
                self._relabel()
            else:
                self._join_pending()
            sel = self._component(live, touched)
            if sel.size >= 0.9 * live.size:
                self._skip, self._backoff = self._backoff, min(2 * self._backoff, 256)
            else:
                self._backoff = 1
        if live.size:
            self.recomputes += 1
        self.streams_recomputed += int(sel.size)
        if sel.size:
            idx, lens = self._hop_index(sel)
            hop_links = self._e_link[idx]
            mark = np.zeros(self.capacity.size, dtype=bool)
            mark[hop_links] = True
            ul = np.flatnonzero(mark)  # the component's links, locally numbered
            pos = np.empty(self.capacity.size, dtype=np.int64)
            pos[ul] = np.arange(ul.size)
            inv = pos[hop_links]
            loc = np.repeat(np.arange(sel.size), lens)
            rate = _waterfill(inv, loc, self.capacity[ul], self._v_prio[sel])
            self._v_rate[sel] = rate
            new_load = np.bincount(inv, weights=rate[loc], minlength=ul.size)
        else:
            ul, new_load = np.zeros(0, dtype=np.int64), np.zeros(0)
        if sel.size < live.size:  # only the touched links and the solved component's links change load
            mark = np.zeros(self.capacity.size, dtype=bool)
            mark[touched] = True
            mark[ul] = True
            changed = np.flatnonzero(mark)
            self._flush(changed)
            self._load[changed] = 0.0
        else:
            self._flush(slice(None))
            self._load[:] = 0.0
        self._load[ul] = new_load

    def _flush(self, links: np.ndarray) -> None:
        """Bring the bytes of ``links`` up to the current clock at their current load."""
        self._bytes[links] += self._load[links] * (self._clock - self._since[links])
        self._since[links] = self._clock

    @property
    def bytes_on_link(self) -> np.ndarray:
        """Bytes carried by every link so far (a new array)."""
        return self._bytes + self._load * (self._clock - self._since)

    def rates(self) -> dict[int, float]:
        """Current rate (bytes/s) of every stream."""
        self._refresh()
        r = self._v_rate
        return {sid: float(r[slot]) for sid, slot in self._slot.items()}

    def rate(self, sid: int) -> float:
        self._refresh()
        return float(self._v_rate[self._slot[sid]])

    def link_load(self) -> np.ndarray:
        """Current bytes/s on every link."""
        self._refresh()
        return self._load.copy()

    def time_to_next(self) -> float:
        """Seconds until the next stream completes at current rates (inf if none can)."""
        self._refresh()
        live = self._live_slots()
        if not live.size:
            return np.inf
        rate = self._v_rate[live]
        pos = rate > 0
        if not pos.any():
            return np.inf
        return float((self._v_rem[live][pos] / rate[pos]).min())

    def advance(self, dt: float) -> list[int]:
        """Move time forward by ``dt`` seconds; returns the ids of streams that completed (removed)."""
        self._refresh()
        live = self._live_slots()
        if not live.size or dt < 0:
            return []
        rem = self._v_rem[live] - self._v_rate[live] * dt
        self._v_rem[live] = rem
        self._clock += dt
        fin = rem <= np.maximum(1e-9 * self._v_size[live], 1e-6)
        if not fin.any():
            return []
        done = np.sort(self._sid[live[fin]]).tolist()
        for sid in done:
            self._drop(sid)
        return done
