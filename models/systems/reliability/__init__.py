"""Reliability layer: fault injection, telemetry and the C4D, Mycroft and ByteRobust systems.

- :mod:`~models.systems.reliability.faults`: seeded fault streams (ByteRobust's incident mix by default).
- :mod:`~models.systems.reliability.mechanics`: faults as mechanics of the chunk-level transport
  (:mod:`hwcosim.models.systems.cluster.transport`), whose
  :class:`hwcosim.models.systems.cluster.telemetry.Telemetry` is the only
  input of the detectors; :mod:`~models.systems.reliability.study`: the trial harness (ground truth used
  only to score; confusion matrices).
- :mod:`~models.systems.reliability.sim`: :class:`FaultySimulator`, the flow-level cluster simulator with
  per-rank compute and injected faults (network slow-down calibration).
- :mod:`~models.systems.reliability.c4d`: C4D classification (comm/non-comm x hang/slow), localisation
  from the rank x rank latency matrix, precision/recall and error-induced overhead.
- :mod:`~models.systems.reliability.mycroft`: Mycroft triggers and dependency-driven root cause from the
  proxies' G/T/D state logs; time to detect and to root cause.
- :mod:`~models.systems.reliability.byterobust`: detection, demarcation (dual-phase replay), recovery
  (hot update, warm standbys, in-memory checkpoints) and the 3-month ETTR study.
- :mod:`~models.systems.reliability.noise`: background drops, link flaps that heal and
  slow-but-healthy ranks as transport mechanics, the detectors' relative link rules, and every
  detector with and without noise; :mod:`~models.systems.reliability.replay`: replays on the
  machines (the transport re-runs a slice; no fault list); :mod:`~models.systems.reliability.rates`:
  real failure rates (Acme trace, Llama 3).
- :mod:`~models.systems.reliability.bench`: the studies as benchmarks (JSON + PNG + tables), which
  ``hwcosim reliability c4d|mycroft|byterobust|byterobust-loop|noise`` and ``hwcosim bench`` run.
"""

from .faults import BYTEROBUST_MIX, KINDS, Fault, FaultKind, FaultMix, sample_faults
from .sim import FaultySimulator
from .telemetry import COSTS, CollectiveRecord, Telemetry

__all__ = ["BYTEROBUST_MIX", "KINDS", "Fault", "FaultKind", "FaultMix", "sample_faults", "FaultySimulator",
           "COSTS", "CollectiveRecord", "Telemetry"]
