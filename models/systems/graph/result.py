"""The result of a graph-engine run, shared by every executor (:mod:`~models.systems.graph.engine`'s
generic superstep loop and :mod:`~models.systems.graph.compiled`'s fused run)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """The final state and the run's counters.

    ``seconds`` times the supersteps only; ``setup_seconds`` the executor start (pool fork,
    Dask cluster start, scattering the partitions, the compiled executor's plan);
    ``cpu_seconds`` is the CPU time of this process (all its threads, not worker processes)
    over the supersteps.
    """

    state: np.ndarray
    steps: int
    seconds: float
    edges_processed: int
    setup_seconds: float
    executor: str
    partitioning: dict
    cpu_seconds: float = float("nan")

    @property
    def edges_per_second(self) -> float:
        return self.edges_processed / max(self.seconds, 1e-12)
