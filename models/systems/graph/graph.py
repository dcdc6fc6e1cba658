"""Graphs as edge arrays: the shipped real graphs and the Graph500 R-MAT/Kronecker generator.

A :class:`Graph` is a directed edge list (``src``, ``dst``, ``weight``) over internal vertex
indices ``0 .. n-1``; an undirected graph stores both directions of every edge. This is the input of
the partitioners (:mod:`~models.systems.graph.partition`) and of the engine (:mod:`~models.systems.graph.engine`).

Vertex ids: a graph read from a file keeps the file's own ids. ``Graph.ids`` maps internal index ->
vertex id (a sorted int64 array; ``None`` when the ids are ``0 .. n-1``, as for R-MAT and the shipped
graphs) and :meth:`Graph.index` is its inverse. Everything a user sees speaks vertex ids: the BFS/SSSP
``source`` is a vertex id, an engine state ``x`` holds the value of vertex ``g.vertex_ids[i]`` at ``x[i]``,
and the reports are written per vertex id.

References
----------
Chakrabarti, Zhan, Faloutsos, "R-MAT: A Recursive Model for Graph Mining", SDM 2004.
Graph500 benchmark specification (Kronecker generator, a=0.57, b=c=0.19, d=0.05, edge factor 16).
Zachary (karate club), Knuth (Les Miserables co-appearances), Padgett (Florentine families),
Davis (southern women) -- the small real graphs shipped in ``models/systems/graph/data``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from hwcosim.models.errors import UsageError

__all__ = ["Graph", "RMATParams", "rmat", "rmat_chunk", "load_real", "REAL_GRAPHS", "LARGE_REAL_GRAPHS", "graph_bytes",
           "check_rmat_budget", "BYTES_PER_EDGE", "BYTES_PER_VERTEX"]

_DATA = Path(__file__).with_name("data")
REAL_GRAPHS = ("karate", "lesmis", "florentine", "davis")
#: real graphs large enough to time, shipped as gzip SNAP edge lists (read with ``graph.io.read_graph``)
LARGE_REAL_GRAPHS = {"debian-deps": _DATA / "debian-deps.txt.gz"}


@dataclass(frozen=True, eq=False)
class Graph:
    """A directed graph as edge arrays.

    Parameters
    ----------
    n : int
        Vertex count; internal indices are ``0 .. n-1``.
    src, dst : ndarray of int64, shape (E,)
        Edge endpoints (internal indices).
    weight : ndarray of float64, shape (E,), optional
        Edge weights (default all ones).
    name : str
        A label for reports.
    ids : ndarray of int64, shape (n,), optional
        The vertex id of each internal index (distinct, non-negative); ``None`` (and an array equal
        to ``0 .. n-1``, which is stored as ``None``) is the identity.
    """

    n: int
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray | None = None
    name: str = "graph"
    ids: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        if int(self.n) < 1:
            raise UsageError(f"Vertex count must be >= 1, not {self.n}")
        src = np.ascontiguousarray(self.src, dtype=np.int64)
        dst = np.ascontiguousarray(self.dst, dtype=np.int64)
        if src.shape != dst.shape or src.ndim != 1:
            raise UsageError(f"src and dst must be 1-D of equal length, not {src.shape} and {dst.shape}")
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= self.n):
            raise UsageError(f"Edge endpoints must lie in [0, {self.n}), found "
                             f"[{min(src.min(), dst.min())}, {max(src.max(), dst.max())}]")
        w = np.ones(src.size) if self.weight is None else np.ascontiguousarray(self.weight, dtype=np.float64)
        if w.shape != src.shape:
            raise UsageError(f"weight must have shape {src.shape}, not {w.shape}")
        object.__setattr__(self, "n", int(self.n))
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "weight", w)
        if self.ids is not None:
            ids = np.ascontiguousarray(self.ids, dtype=np.int64)
            if ids.shape != (self.n,):
                raise UsageError(f"ids must have shape ({self.n},), one per vertex, not {ids.shape}")
            if ids.min() < 0:
                raise UsageError(f"vertex ids must be >= 0, found {ids.min()}")
            inc = bool(np.all(ids[1:] > ids[:-1]))
            if not inc and np.unique(ids).size != ids.size:
                raise UsageError("vertex ids must be distinct")
            if inc and ids[0] == 0 and ids[-1] == self.n - 1:
                ids = None  # 0 .. n-1: the identity
            else:
                self._cache["ids_sorted"] = inc
            object.__setattr__(self, "ids", ids)

    @property
    def vertex_ids(self) -> np.ndarray:
        """The vertex id of each internal index, shape (n,), int64 (``0 .. n-1`` for the identity)."""
        if self.ids is not None:
            return self.ids
        if "arange" not in self._cache:
            self._cache["arange"] = np.arange(self.n, dtype=np.int64)
        return self._cache["arange"]

    def _describe_ids(self) -> str:
        if self.ids is None:
            return f"{self.name} ({self.n} vertices, ids 0 .. {self.n - 1})"
        return f"{self.name} ({self.n} vertices, ids {int(self.ids.min())} .. {int(self.ids.max())}, not contiguous)"

    def index(self, vid, what: str = "vertex"):
        """Internal index of vertex id ``vid`` (an int or an array of them): the inverse of ``ids``.

        Raises
        ------
        UsageError
            An id that is not a vertex of this graph, named with ``what`` (e.g. ``"source"``).
        """
        scalar = np.ndim(vid) == 0
        if scalar and (isinstance(vid, (bool, np.bool_)) or not isinstance(vid, (int, np.integer))):
            raise UsageError(f"{what} {vid!r} is not a vertex id (an integer) of {self._describe_ids()}")
        v = np.asarray(vid)
        if v.dtype.kind not in "iu":
            raise UsageError(f"{what} ids must be integers, not {v.dtype}")
        v = v.astype(np.int64, copy=False)
        if self.ids is None:
            idx = v
            ok = (v >= 0) & (v < self.n)
        else:
            if self._cache.get("ids_sorted", True):
                order = None
                keys = self.ids
            else:
                if "ids_order" not in self._cache:
                    self._cache["ids_order"] = np.argsort(self.ids, kind="stable")
                order = self._cache["ids_order"]
                keys = self.ids[order]
            pos = np.minimum(np.searchsorted(keys, v), self.n - 1)
            ok = keys[pos] == v
            idx = pos if order is None else order[pos]
        if not np.all(ok):
            bad = v[~ok].ravel()[0] if v.ndim else v
            raise UsageError(f"{what} {int(bad)} is not a vertex of {self._describe_ids()}")
        return int(idx) if scalar else np.asarray(idx, dtype=np.int64)

    def values_by_id(self, x) -> dict:
        """``{vertex id: x[i]}`` of a per-vertex array ``x`` (an engine state), in internal order."""
        x = np.asarray(x)
        if x.shape != (self.n,):
            raise UsageError(f"want one value per vertex ({self.n}), not shape {x.shape}")
        return dict(zip(self.vertex_ids.tolist(), x.tolist()))

    @property
    def m(self) -> int:
        """Edge count (directed)."""
        return int(self.src.size)

    def out_degree(self) -> np.ndarray:
        """Out-degree per vertex, shape (n,), int64."""
        if "outdeg" not in self._cache:
            self._cache["outdeg"] = np.bincount(self.src, minlength=self.n)
        return self._cache["outdeg"]

    def in_degree(self) -> np.ndarray:
        """In-degree per vertex, shape (n,), int64."""
        if "indeg" not in self._cache:
            self._cache["indeg"] = np.bincount(self.dst, minlength=self.n)
        return self._cache["indeg"]

    def adjacency(self, weighted: bool = False) -> sp.csr_matrix:
        """Sparse adjacency ``A[src, dst]`` (duplicates summed), CSR, shape (n, n)."""
        data = self.weight if weighted else np.ones(self.m)
        return sp.csr_matrix((data, (self.src, self.dst)), shape=(self.n, self.n))

    def symmetrised(self) -> Graph:
        """The graph with every edge in both directions (self loops kept once)."""
        keep = self.src != self.dst
        src = np.concatenate([self.src, self.dst[keep]])
        dst = np.concatenate([self.dst, self.src[keep]])
        w = np.concatenate([self.weight, self.weight[keep]])
        return Graph(self.n, src, dst, w, name=self.name + "-sym", ids=self.ids)

    def to_networkx(self, directed: bool = True):
        """A networkx (Multi)DiGraph/Graph copy, for cross-checks (needs networkx); nodes are vertex ids."""
        import networkx as nx

        g = nx.DiGraph() if directed else nx.Graph()
        vid = self.vertex_ids
        g.add_nodes_from(vid.tolist())
        for u, v, w in zip(vid[self.src].tolist(), vid[self.dst].tolist(), self.weight.tolist()):
            if g.has_edge(u, v):  # parallel edges: keep the lightest, as SSSP sees it
                w = min(w, g[u][v]["weight"])
            g.add_edge(u, v, weight=w)
        return g


def load_real(name: str) -> Graph:
    """Load a shipped real graph (undirected, stored both directions).

    Parameters
    ----------
    name : {"karate", "lesmis", "florentine", "davis"}

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if name not in REAL_GRAPHS:
        raise UsageError(f"Unknown graph {name!r}; choose one of {', '.join(REAL_GRAPHS)}")
    text = (_DATA / f"{name}.txt").read_text().splitlines()
    names = next(line for line in text if line.startswith("# vertex names:"))[len("# vertex names: "):].split("|")
    rows = np.array([line.split() for line in text if line and not line.startswith("#")], dtype=float)
    u, v, w = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2]
    g = Graph(len(names), np.concatenate([u, v]), np.concatenate([v, u]), np.concatenate([w, w]), name=name)
    g._cache["names"] = names
    return g


@dataclass(frozen=True)
class RMATParams:
    """R-MAT / Graph500 Kronecker generator parameters.

    Parameters
    ----------
    scale : int
        ``n = 2**scale`` vertices.
    edge_factor : int
        ``m = edge_factor * n`` directed edges (Graph500: 16).
    a, b, c : float
        Quadrant probabilities; ``d = 1 - a - b - c`` (Graph500: 0.57, 0.19, 0.19).
    seed : int
        Seed of the generator; the same seed gives the same graph.
    """

    scale: int = 16
    edge_factor: int = 16
    a: float = 0.57
    b: float = 0.19
    c: float = 0.19
    seed: int = 0

    def __post_init__(self):
        if not 1 <= self.scale <= 31:
            raise UsageError(f"scale must be in [1, 31], not {self.scale}")
        if self.edge_factor < 1:
            raise UsageError(f"edge_factor must be >= 1, not {self.edge_factor}")
        if min(self.a, self.b, self.c) < 0 or self.a + self.b + self.c > 1 + 1e-12:
            raise UsageError(f"a, b, c must be >= 0 with a+b+c <= 1, not {self.a}, {self.b}, {self.c}")


#: Bytes the engine holds per edge (ids, CSR both ways, partition copies) and per vertex (ids, ranks,
#: degrees, scratch): the estimate checked against the memory budget before a graph is built or read.
BYTES_PER_EDGE = 64
BYTES_PER_VERTEX = 64


def graph_bytes(n: int, m: int) -> int:
    """The memory estimate of a graph of ``n`` vertices and ``m`` edges (checked against the budget)."""
    return int(n) * BYTES_PER_VERTEX + int(m) * BYTES_PER_EDGE


def check_rmat_budget(params: RMATParams) -> None:
    """Refuse (UsageError, exit 2) an R-MAT graph whose estimated memory is over the budget of
    :mod:`hwcosim.models.budget`, before generating it (the command line's ``graph run --scale``)."""
    from hwcosim.models.budget import check_alloc

    n = 1 << params.scale
    check_alloc(graph_bytes(n, params.edge_factor * n),
                f"an R-MAT graph of scale {params.scale} and edge factor {params.edge_factor} "
                f"({n} vertices, {params.edge_factor * n} edges)", "lower --scale or --edge-factor")


def rmat_chunk(rng: np.random.Generator, k: int, params: RMATParams) -> tuple[np.ndarray, np.ndarray]:
    """``k`` R-MAT edges (unpermuted source and destination ids) drawn from ``rng``: each edge descends
    ``scale`` levels, one uniform double per level choosing the quadrant (a -> (0,0), b -> (0,1),
    c -> (1,0), d -> (1,1)). :func:`rmat` and the out-of-core generator draw their chunks here, so
    their edge streams are the same."""
    ab, abc = params.a + params.b, params.a + params.b + params.c
    pa = params.a / ab if ab > 0 else 0.0
    s = np.zeros(k, np.int64)
    d = np.zeros(k, np.int64)
    for level in range(params.scale):
        r = rng.random(k)
        row = r >= ab
        col = np.where(row, r >= abc, r >= ab * pa)
        s |= row.astype(np.int64) << level
        d |= col.astype(np.int64) << level
    return s, d


def rmat(params: RMATParams, *, weights: bool = True, permute: bool = True, chunk: int = 1 << 22) -> Graph:
    """Generate an R-MAT graph (Graph500 Kronecker generator), vectorised in chunks.

    Each edge descends ``scale`` levels of the adjacency matrix, choosing a quadrant with
    probabilities a, b, c, d (Chakrabarti et al. 2004; Graph500). Vertex labels are then randomly
    permuted (as Graph500 does) so that degree is not correlated with the id. Weights, if asked,
    are uniform in (0, 1] as in Graph500 SSSP.

    Returns
    -------
    Graph
        ``2**scale`` vertices, ``edge_factor * 2**scale`` directed edges (self loops and
        duplicates kept, as Graph500 generates them).
    """
    rng = np.random.default_rng(params.seed)
    n = 1 << params.scale
    m = params.edge_factor * n
    src = np.empty(m, np.int64)
    dst = np.empty(m, np.int64)
    for lo in range(0, m, chunk):
        k = min(chunk, m - lo)
        src[lo:lo + k], dst[lo:lo + k] = rmat_chunk(rng, k, params)
    if permute:
        perm = rng.permutation(n)
        src, dst = perm[src], perm[dst]
    w = rng.uniform(0.0, 1.0, m) if weights else None
    if w is not None:
        w = 1.0 - w  # (0, 1]
    return Graph(n, src, dst, w, name=f"rmat-s{params.scale}-e{params.edge_factor}")
