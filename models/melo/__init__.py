"""MELO: memory-efficient loss recovery for hardware transports (Lu et al., APNet 2017).

- :mod:`hwcosim.models.melo.engine`: the receiver engine's bit-exact golden model (shared bits pool,
  linked free list, drop-and-NACK when a packet does not fit); :mod:`hwcosim.models.melo.cycles`: the
  cycle model of its RTL (:class:`hwcosim.hdl.melo.MeloEngineRTL`).
- :mod:`hwcosim.models.melo.sim`: packet-level simulator comparing go-back-N, full-bitmap selective
  repeat and MELO; :mod:`hwcosim.models.melo.workloads`: datacenter flow-size CDFs.
- :mod:`hwcosim.models.melo.study`: the study (throughput, FCT, memory, pool size); :mod:`hwcosim.cosim.cli.melo`:
  the ``hwcosim melo`` subcommands.
"""

from .engine import ACK, DUP, NACK, SACK, MeloEngineModel, MeloEngineParams, MeloResponse, MeloResult
from .sim import DeliveryError, LossModel, LossSimResult, SimParams, simulate

__all__ = [
    "ACK",
    "SACK",
    "NACK",
    "DUP",
    "MeloEngineModel",
    "MeloEngineParams",
    "MeloResponse",
    "MeloResult",
    "DeliveryError",
    "LossModel",
    "SimParams",
    "LossSimResult",
    "simulate",
]
