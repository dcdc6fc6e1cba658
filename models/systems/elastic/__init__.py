"""Elastic cluster systems: EasyScale, ElasticBatch and GoldMiner.

- :mod:`~models.systems.elastic.easyscale`: EasyScale (Li et al., SC 2023, arXiv 2208.14228): logical
  data-parallel workers (EasyScaleThreads) time-sharing 1..N processes with bitwise-identical
  results, context checkpoint/restore on scale-in/out, and a heterogeneous-cluster scheduler sim.
- :mod:`~models.systems.elastic.elasticbatch`: ElasticBatch (IEEE TPDS 2024): bucketised dynamic-shape
  serving on MIG instances (A100 40GB / H100 80GB placement rules) with a learnt latency predictor.
- :mod:`~models.systems.elastic.goldminer`: GoldMiner (SIGMOD 2023): stateless preprocessing on elastic
  data workers.

Submodules are imported lazily so that ``import models.systems.elastic`` stays cheap.
"""

__all__ = ["easyscale", "elasticbatch", "goldminer", "cli"]
