"""Edge-cut, vertex-cut and hybrid-cut partitioners, with replication factor and balance.

Every partitioner assigns each *edge* to one of ``k`` partitions (a vertex program runs per
edge, so the edge assignment is what decides the work and the communication) and each *vertex*
to one master partition. A vertex is replicated (a mirror) in every partition that holds one of
its edges but is not its master.

- **edge-cut** (Pregel/GraM style): vertices are hashed to partitions; an edge goes with its
  destination (the partition that owns the in-edges gathers locally); sources living elsewhere
  are ghost copies.
- **vertex-cut** (PowerGraph random vertex-cut): each edge is hashed independently.
- **hybrid** (PowerLyra, Chen et al., EuroSys 2015; also used by TuX2, NSDI 2017): edges of a
  low-in-degree destination are placed by the destination (edge-cut: its gather is local); edges
  of a high-in-degree destination (in-degree > ``threshold``) are placed by the source
  (vertex-cut: the hub's edges spread evenly).

Replication factor = (masters + mirrors) / n; edge balance = max edges per partition / mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError
from numba import njit

from .graph import Graph

__all__ = ["Partition", "Partitioning", "partition", "METHODS"]

METHODS = ("edge-cut", "vertex-cut", "hybrid")
_MUL = np.uint64(0x9E3779B97F4A7C15)


def _hash(x: np.ndarray, k: int, salt: int) -> np.ndarray:
    """A seeded multiplicative hash of int64 ids onto ``0 .. k-1`` (deterministic)."""
    with np.errstate(over="ignore"):
        h = (x.astype(np.uint64) + np.uint64(salt)) * _MUL
        h ^= h >> np.uint64(29)
        h *= _MUL
    return (h >> np.uint64(33)) % np.uint64(k)


@njit(cache=True, nogil=True)
def _group_order(owner, dst, k, n):
    """Edge order grouped by ``owner``, then by ``dst``, ties in input order: two stable counting
    sorts (least significant key first), the permutation ``np.lexsort((dst, owner))`` returns."""
    m = owner.shape[0]
    cnt = np.zeros(n + 1, np.int64)
    for e in range(m):
        cnt[dst[e] + 1] += 1
    for i in range(n):
        cnt[i + 1] += cnt[i]
    by_dst = np.empty(m, np.int64)
    for e in range(m):
        by_dst[cnt[dst[e]]] = e
        cnt[dst[e]] += 1
    ck = np.zeros(k + 1, np.int64)
    for e in range(m):
        ck[owner[e] + 1] += 1
    for i in range(k):
        ck[i + 1] += ck[i]
    out = np.empty(m, np.int64)
    for j in range(m):
        e = by_dst[j]
        out[ck[owner[e]]] = e
        ck[owner[e]] += 1
    return out


@dataclass(frozen=True, eq=False)
class Partition:
    """The edges of one partition, sorted by destination for segmented reductions.

    Attributes
    ----------
    pid : int
    src, dst : ndarray of int64, shape (E_p,)
        Global vertex ids, sorted by ``dst`` (stable).
    weight : ndarray of float64, shape (E_p,)
    dst_unique : ndarray of int64, shape (D_p,)
        The distinct destinations, ascending.
    seg_start : ndarray of int64, shape (D_p,)
        Start of each destination's run in the edge arrays (for ``ufunc.reduceat``).
    vertices : ndarray of int64
        Every vertex touched by this partition (masters and mirrors).
    eids : ndarray of int64, optional
        The partition's edges as indices into the input graph's edge arrays (same order as
        ``src``/``dst``); kept only when :func:`partition` is called with ``edge_ids=True``.
    """

    pid: int
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    dst_unique: np.ndarray
    seg_start: np.ndarray
    vertices: np.ndarray
    eids: np.ndarray | None = None

    @property
    def m(self) -> int:
        return int(self.src.size)


@dataclass(frozen=True, eq=False)
class Partitioning:
    """``k`` partitions of a graph and their quality figures."""

    method: str
    k: int
    n: int
    parts: tuple
    master: np.ndarray
    replication_factor: float
    edge_balance: float
    vertex_balance: float

    def summary(self) -> dict:
        return {"method": self.method, "k": self.k, "replication_factor": self.replication_factor,
                "edge_balance": self.edge_balance, "vertex_balance": self.vertex_balance,
                "edges_per_partition": [p.m for p in self.parts]}


def partition(g: Graph, k: int, method: str = "hybrid", *, threshold: int | None = None,
              seed: int = 0, edge_ids: bool = False, masters: str = "hash") -> Partitioning:
    """Split ``g`` into ``k`` partitions.

    Parameters
    ----------
    g : Graph
    k : int
        Partition count (>= 1).
    method : {"edge-cut", "vertex-cut", "hybrid"}
    threshold : int, optional
        Hybrid cut: in-degree above which a destination counts as high-degree (PowerLyra's
        default is 100; here the default is ``max(100, 4 * mean degree)``).
    seed : int
        Hash salt.
    edge_ids : bool
        Keep each partition's edge indices (``Partition.eids``), e.g. to slice edge data.
    masters : {"hash", "range"}
        How vertices get their master partition: hashed (default), or ``k`` contiguous id
        ranges holding about equal shares of in-edges plus vertices (a 1-D column split, the
        layout of a shared-memory SpMV: each master then streams through its own vertices).

    Returns
    -------
    Partitioning
    """
    if k < 1:
        raise UsageError(f"Partition count must be >= 1, not {k}")
    if method not in METHODS:
        raise UsageError(f"Unknown partitioning method {method!r}; choose one of {', '.join(METHODS)}")
    if masters == "hash":
        master = _hash(np.arange(g.n), k, seed).astype(np.int64)
    elif masters == "range":
        cum = np.cumsum(g.in_degree() + 1)
        cuts = np.searchsorted(cum, cum[-1] * np.arange(1, k) / k, side="right")
        master = np.searchsorted(cuts, np.arange(g.n), side="right").astype(np.int64)
    else:
        raise UsageError(f"Unknown master placement {masters!r}; choose hash or range")
    if method == "edge-cut":
        owner = master[g.dst]
    elif method == "vertex-cut":
        owner = _hash(g.src * np.int64(g.n) + g.dst, k, seed + 1).astype(np.int64)
    else:
        indeg = g.in_degree()
        if threshold is None:
            threshold = max(100, int(4 * g.m / g.n))
        if threshold < 0:
            raise UsageError(f"threshold must be >= 0, not {threshold}")
        high = indeg[g.dst] > threshold
        owner = np.where(high, master[g.src], master[g.dst])
    # group edges by owner, then by dst inside each part (stable -> deterministic)
    order = _group_order(owner, g.dst, k, g.n)  # = np.lexsort((g.dst, owner)), in O(m + n)
    bounds = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=k), out=bounds[1:])
    del owner  # 8 B/edge fewer while the partitions are cut
    seen = np.zeros(g.n, bool)
    parts = []
    present = 0
    vcounts = []
    for p in range(k):
        sl = order[bounds[p]:bounds[p + 1]]
        src, dst, w = g.src[sl], g.dst[sl], g.weight[sl]
        if dst.size:
            first = np.r_[True, dst[1:] != dst[:-1]]
            seg = np.flatnonzero(first)
            du = dst[seg]
        else:
            seg = np.zeros(0, np.int64)
            du = np.zeros(0, np.int64)
        seen[:] = False
        seen[src] = True
        seen[dst] = True
        seen[master == p] = True
        verts = np.flatnonzero(seen)  # = union of src, dst and the partition's masters, ascending
        present += verts.size
        vcounts.append(verts.size)
        parts.append(Partition(p, src, dst, w, du, seg.astype(np.int64), verts, sl if edge_ids else None))
    ecount = np.array([p.m for p in parts], float)
    return Partitioning(method, k, g.n, tuple(parts), master,
                        replication_factor=present / g.n,
                        edge_balance=float(ecount.max() / max(ecount.mean(), 1e-300)),
                        vertex_balance=float(max(vcounts) / max(np.mean(vcounts), 1e-300)))
