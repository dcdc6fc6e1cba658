"""Cluster layer: a flow-level GPU-cluster simulator and the C4P, Arnold and Crux studies.

- :mod:`~models.systems.cluster.topology`: three-tier Clos of multi-GPU hosts with bonded NIC ports;
  generators (regular Clos, rail-optimised Clos, fat tree) and the real Lingjun 2023 topology (Crux
  data set).
- :mod:`~models.systems.cluster.network`: streams with max-min fair sharing and strict priorities.
- :mod:`~models.systems.cluster.collectives`: ring/tree all-reduce, all-gather, reduce-scatter, P2P,
  all-to-all.
- :mod:`~models.systems.cluster.job`: DP/TP/PP(/EP) jobs with optional DP overlap;
  :mod:`~models.systems.cluster.engine`: the event engine.
- :mod:`~models.systems.cluster.scenario`: TOML scenarios (``hwcosim cluster run``), examples in
  ``scenarios/``.
- :mod:`~models.systems.cluster.routing`: ECMP; :mod:`~models.systems.cluster.c4p`, :mod:`~models.systems.cluster.crux`:
  the planners (the Crux study also runs Sincronia- and CASSINI-like baselines);
  :mod:`~models.systems.cluster.arnold`: placement (MIP) and baselines.
"""

from .collectives import (
                          Collective,
                          StreamSpec,
                          alltoall,
                          bus_bw_factor,
                          p2p,
                          ring_allgather,
                          ring_allreduce,
                          ring_reducescatter,
                          tree_allreduce,
)
from .engine import JobRecord, Simulator
from .job import Comm, Compute, JobSpec, placement
from .network import FlowNetwork, maxmin_rates
from .routing import ECMPRouter, Router
from .topology import Topology, clos, fat_tree, hash_choices, lingjun_2023, rail_clos

__all__ = ["Topology", "clos", "rail_clos", "fat_tree", "lingjun_2023", "hash_choices", "FlowNetwork", "maxmin_rates",
           "StreamSpec", "Collective", "ring_allreduce", "tree_allreduce", "ring_allgather", "ring_reducescatter",
           "p2p", "alltoall", "bus_bw_factor", "JobSpec", "Compute", "Comm", "placement", "Simulator", "JobRecord",
           "Router", "ECMPRouter"]
