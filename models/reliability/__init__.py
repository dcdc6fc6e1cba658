"""Reliability layer: fault injection, telemetry and the C4D, Mycroft and ByteRobust systems.

- :mod:`~models.reliability.faults`: seeded fault streams (ByteRobust's incident mix by default).
- :mod:`~models.reliability.sim`: :class:`FaultySimulator`, the flow-level cluster simulator with
  per-rank compute, injected faults and telemetry; :mod:`~models.reliability.telemetry`.
- :mod:`~models.reliability.c4d`: C4D classification (comm/non-comm x hang/slow), localisation
  from the rank x rank latency matrix, precision/recall and error-induced overhead.
- :mod:`~models.reliability.mycroft`: Mycroft triggers and dependency-driven root cause from
  per-flow G/T/D counters; time to detect and to root cause.
- :mod:`~models.reliability.byterobust`: detection, demarcation (dual-phase replay), recovery
  (hot update, warm standbys, in-memory checkpoints) and the 3-month ETTR study.
- :mod:`~models.reliability.cli`: ``hwcosim reliability c4d|mycroft|byterobust`` and benchmarks.
"""

from .faults import BYTEROBUST_MIX, KINDS, Fault, FaultKind, FaultMix, sample_faults
from .sim import FaultySimulator
from .telemetry import COSTS, CollectiveRecord, Telemetry, flow_counters, inspect_nodes

__all__ = ["BYTEROBUST_MIX", "KINDS", "Fault", "FaultKind", "FaultMix", "sample_faults", "FaultySimulator",
           "COSTS", "CollectiveRecord", "Telemetry", "flow_counters", "inspect_nodes"]
