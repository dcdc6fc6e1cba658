"""Job-level models of a DL cluster: pre-flight job checks, CoGNN task grouping, CPU allocation.

- :mod:`hwcosim.models.systems.jobs.jobcheck`: static and sandboxed dry-run checks for the failure categories of
  Zhang et al., ICSE 2020 (Philly), with a corpus of broken and correct scripts.
- :mod:`hwcosim.models.systems.jobs.cognn`: per-operator memory cost functions of GNN training and CoGNN's
  (SC 2022) memory-aware grouping of co-located training tasks.
- :mod:`hwcosim.models.systems.jobs.cpualloc`: throughput-vs-cores models and CPU allocation across a
  heterogeneous GPU cluster (CODA, ICDCS 2020) against static rules.
"""
