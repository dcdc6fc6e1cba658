"""GraM-style graph algorithms as vertex programs: PageRank, BFS, connected components, SSSP.

GraM (Wu, Zhang, Chen, Hsu, Xue, Zhou, Zhang, "GraM: Scaling Graph Computation to the
Trillions", SoCC 2015) runs these as message-passing vertex programs; its headline run is a
PageRank iteration on a > 1 T-edge graph. Each class here is a :class:`~models.systems.graph.engine.
VertexProgram`; :func:`run` is the convenience entry and :func:`pagerank_scipy` the
sparse-matrix-vector baseline (the memory-bandwidth bound of one PageRank iteration).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

from .engine import Engine, RunResult, VertexProgram
from .graph import Graph

__all__ = ["PageRank", "BFS", "ConnectedComponents", "SSSP", "run", "pagerank_scipy", "ALGORITHMS"]


@dataclass(frozen=True)
class PageRank(VertexProgram):
    """PageRank by power iteration, dangling mass spread uniformly (as networkx does).

    ``x' = (1-d)/n + d (A^T D^-1 x + (sum of dangling x)/n)``; stops when ``||x' - x||_1 < n tol``.

    Parameters
    ----------
    damping : float
        In (0, 1); default 0.85.
    tol : float
        Per-vertex L1 tolerance (networkx convention), > 0.
    max_steps : int
    """

    damping: float = 0.85
    tol: float = 1e-10
    max_steps: int = 200
    combiner = "sum"
    edge_op = "copy"
    fused = "pr"

    def __post_init__(self):
        if not 0 < self.damping < 1:
            raise UsageError(f"damping must be in (0, 1), not {self.damping}")
        if self.tol <= 0 or self.max_steps < 1:
            raise UsageError(f"tol must be > 0 and max_steps >= 1, not {self.tol}, {self.max_steps}")

    def init(self, g):
        deg = g.out_degree().astype(float)
        inv = np.zeros(g.n)
        inv[deg > 0] = 1.0 / deg[deg > 0]
        return np.full(g.n, 1.0 / g.n), {"inv": inv, "dangling": deg == 0, "n": g.n}

    def emit(self, state, ctx):
        return state * ctx["inv"]

    def apply(self, state, acc, ctx):
        n = ctx["n"]
        new = (1 - self.damping) / n + self.damping * (acc + state[ctx["dangling"]].sum() / n)
        return new, bool(np.abs(new - state).sum() < n * self.tol)


@dataclass(frozen=True)
class BFS(VertexProgram):
    """Breadth-first search levels from vertex id ``source`` (``inf`` where unreachable)."""

    source: int = 0
    max_steps: int = 1 << 30
    combiner = "min"
    edge_op = "add_one"
    fused = "bfs"

    def __post_init__(self):
        if self.source < 0:
            raise UsageError(f"source must be >= 0, not {self.source}")

    def init(self, g):
        s = g.index(self.source, "source")  # a vertex id of the graph (the file's own)
        lev = np.full(g.n, np.inf)
        lev[s] = 0.0
        front = np.zeros(g.n, bool)
        front[s] = True
        return lev, {"front": front}

    def emit(self, state, ctx):
        return np.where(ctx["front"], state, np.inf)

    def apply(self, state, acc, ctx):
        new = np.isinf(state) & np.isfinite(acc)
        state = state.copy()
        state[new] = acc[new]
        ctx["front"] = new
        return state, not new.any()


@dataclass(frozen=True)
class ConnectedComponents(VertexProgram):
    """Label propagation: each vertex ends with the least vertex id of its component.

    The labels are vertex ids (``g.vertex_ids``: a graph file's own ids), exact in the float64
    state up to 2**53. Run it on an undirected (symmetrised) graph for connected components; on a
    directed graph it propagates along edge direction only.
    """

    max_steps: int = 1 << 30
    combiner = "min"
    edge_op = "copy"
    fused = "cc"

    def init(self, g):
        vid = g.vertex_ids
        if g.ids is not None and int(vid.max()) >= 1 << 53:
            raise UsageError(f"connected components label vertices by id; {g.name} has ids up to {int(vid.max())}, "
                             "beyond 2**53, which a float64 label cannot hold exactly; renumber the file's ids")
        return vid.astype(float), {"active": np.ones(g.n, bool)}

    def emit(self, state, ctx):
        return np.where(ctx["active"], state, np.inf)

    def apply(self, state, acc, ctx):
        new = np.minimum(state, acc)
        ctx["active"] = new < state
        return new, not ctx["active"].any()


@dataclass(frozen=True)
class SSSP(VertexProgram):
    """Single-source shortest paths (Bellman-Ford by frontier); weights must be >= 0."""

    source: int = 0
    max_steps: int = 1 << 30
    combiner = "min"
    edge_op = "add_weight"
    fused = "sssp"

    def __post_init__(self):
        if self.source < 0:
            raise UsageError(f"source must be >= 0, not {self.source}")

    def init(self, g):
        s = g.index(self.source, "source")  # a vertex id of the graph (the file's own)
        if g.m and g.weight.min() < 0:
            raise UsageError("SSSP needs non-negative edge weights")
        d = np.full(g.n, np.inf)
        d[s] = 0.0
        act = np.zeros(g.n, bool)
        act[s] = True
        return d, {"active": act}

    def emit(self, state, ctx):
        return np.where(ctx["active"], state, np.inf)

    def apply(self, state, acc, ctx):
        new = np.minimum(state, acc)
        ctx["active"] = new < state
        return new, not ctx["active"].any()


ALGORITHMS = {"pagerank": PageRank, "bfs": BFS, "cc": ConnectedComponents, "sssp": SSSP}


def run(g: Graph, algorithm: str, *, k: int = 1, method: str = "hybrid", executor=None, **params) -> RunResult:
    """Run a named algorithm (``pagerank``, ``bfs``, ``cc``, ``sssp``) on ``g``.

    ``cc`` symmetrises the graph first. Extra keyword arguments go to the program (``source``: a
    vertex id of ``g``). The result's ``state[i]`` is the value of vertex ``g.vertex_ids[i]``
    (:meth:`Graph.values_by_id` gives ``{vertex id: value}``).
    """
    if algorithm not in ALGORITHMS:
        raise UsageError(f"Unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if algorithm == "cc":
        g = g.symmetrised()
    return Engine(g, k=k, method=method, executor=executor).run(ALGORITHMS[algorithm](**params))


def pagerank_scipy(g: Graph, iterations: int, damping: float = 0.85) -> tuple[np.ndarray, float]:
    """``iterations`` fixed PageRank iterations as CSR SpMV (``A^T`` prebuilt); (ranks, seconds).

    The same arithmetic as :class:`PageRank`; the timed loop is only the iterations.
    """
    at = g.adjacency().T.tocsr()
    deg = g.out_degree().astype(float)
    inv = np.where(deg > 0, 1.0 / np.maximum(deg, 1), 0.0)
    dang = deg == 0
    x = np.full(g.n, 1.0 / g.n)
    t0 = time.perf_counter()
    for _ in range(iterations):
        x = (1 - damping) / g.n + damping * (at @ (x * inv) + x[dang].sum() / g.n)
    return x, time.perf_counter() - t0
