"""Graph layer: a partitioned graph engine (GraM / PowerLyra / TuX2 style) and GNN rewrites.

- :mod:`~models.systems.graph.graph`: :class:`Graph` edge arrays, shipped real graphs, R-MAT generator.
- :mod:`~models.systems.graph.partition`: edge-cut, vertex-cut and hybrid-cut partitioners.
- :mod:`~models.systems.graph.engine`: vectorised vertex programs; serial, process-pool, Dask executors.
- :mod:`~models.systems.graph.compiled`: the compiled executor (numba partition kernels on nogil
  threads, per-destination-partition message buffers, direction-optimising BFS/CC).
- :mod:`~models.systems.graph.algorithms`: PageRank, BFS, connected components, SSSP (GraM, SoCC 2015).
- :mod:`~models.systems.graph.gnn`: GCN/GAT/GIN/GraphSAGE operator graphs and the algebraic rewriter.
- :mod:`~models.systems.graph.tux2`: TuX2 (NSDI 2017): bipartite typed graphs, MEGA programs, SSP/BSP
  execution on simulated (or thread) workers; :mod:`~models.systems.graph.tux2_algos`: MF, LR, LDA in
  MEGA form and as plain numpy.
"""

from . import tux2_dask, tux2_procs  # noqa: F401 - they register the TuX2 executors "dask" and "processes"
from .algorithms import ALGORITHMS, BFS, SSSP, ConnectedComponents, PageRank, pagerank_scipy, run
from .compiled import CompiledExecutor
from .engine import DaskExecutor, Engine, ProcessExecutor, RunResult, SerialExecutor, VertexProgram, make_executor
from .graph import REAL_GRAPHS, Graph, RMATParams, load_real, rmat
from .partition import METHODS, Partitioning, partition
from .tux2 import Bipartite, MEGAProgram, TuX2Engine, TuX2Result, WorkerModel

__all__ = ["Graph", "RMATParams", "rmat", "load_real", "REAL_GRAPHS", "partition", "Partitioning", "METHODS",
           "Engine", "VertexProgram", "CompiledExecutor", "RunResult", "SerialExecutor", "ProcessExecutor",
           "DaskExecutor",
           "make_executor", "PageRank", "BFS", "ConnectedComponents", "SSSP", "run", "pagerank_scipy",
           "ALGORITHMS", "Bipartite", "MEGAProgram", "TuX2Engine", "TuX2Result", "WorkerModel"]
