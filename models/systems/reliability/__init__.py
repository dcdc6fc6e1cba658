"""Reliability layer: fault injection, telemetry and the C4D, Mycroft and ByteRobust systems.

- :mod:`~models.systems.reliability.faults`: seeded fault streams (ByteRobust's incident mix by default).
- :mod:`~models.systems.reliability.sim`: :class:`FaultySimulator`, the flow-level cluster simulator with
  per-rank compute, injected faults and telemetry; :mod:`~models.systems.reliability.telemetry`.
- :mod:`~models.systems.reliability.c4d`: C4D classification (comm/non-comm x hang/slow), localisation
  from the rank x rank latency matrix, precision/recall and error-induced overhead.
- :mod:`~models.systems.reliability.mycroft`: Mycroft triggers and dependency-driven root cause from
  per-flow G/T/D counters; time to detect and to root cause.
- :mod:`~models.systems.reliability.byterobust`: detection, demarcation (dual-phase replay), recovery
  (hot update, warm standbys, in-memory checkpoints) and the 3-month ETTR study.
- :mod:`~cosim.cli.reliability`: ``hwcosim reliability c4d|mycroft|byterobust`` and benchmarks.
"""

from .faults import BYTEROBUST_MIX, KINDS, Fault, FaultKind, FaultMix, sample_faults
from .sim import FaultySimulator
from .telemetry import COSTS, CollectiveRecord, Telemetry, flow_counters, inspect_nodes

__all__ = ["BYTEROBUST_MIX", "KINDS", "Fault", "FaultKind", "FaultMix", "sample_faults", "FaultySimulator",
           "COSTS", "CollectiveRecord", "Telemetry", "flow_counters", "inspect_nodes"]
