"""Cluster-level systems above the hardware: discrete-event and analytical models.

``cluster`` (topology, flows, collectives, C4P, Arnold, Crux), ``reliability`` (faults, telemetry,
C4D, Mycroft, ByteRobust), ``elastic`` (EasyScale, ElasticBatch, GoldMiner), ``jobs`` (CoGNN,
CPU allocation, jobcheck) and ``graph`` (partitioned graph engine, TuX2, GNN rewrites).
Their command lines live in :mod:`hwcosim.cosim.cli`.
"""
