"""Simulation contract of the MELO receiver engine (``hwcosim sim melo-engine``).

Stimulus: :func:`~hwcosim.cosim.designs.melo.engine.lossy_traffic` (senders with windows over a
network that drops, duplicates and reorders packets, reacting to the engine's ACK/NACK in a closed
loop with the golden model), as events ``conn``, ``psn``, ``open``. The RTL runs through
:func:`~hwcosim.cosim.designs.melo.engine.run_melo_engine`; every released-PSN word and every
response word is compared with :func:`~hwcosim.cosim.designs.melo.engine.golden_streams`.
"""

from __future__ import annotations

import numpy as np
from hwcosim.cosim.contract import SimContract

__all__ = ["ENGINE"]


class EngineContract(SimContract):
    """Events ``conn``/``psn``/``open`` (n,) -> released-PSN words ``deliv`` and response words ``resp``."""

    design = "melo-engine"

    def stimulus(self, params, seed: int = 0, packets: int = 12, loss: float = 0.08, dup: float = 0.05,
                 conns: int | None = None) -> dict:
        """Lossy traffic until each connection (the first ``conns``, default up to 16) delivered ``packets`` PSNs."""
        import dataclasses

        from hwcosim.cosim.designs.melo.engine import lossy_traffic

        n = min(params.n_conns, conns or 16)
        # the traffic generator drives every connection of its parameter set: give it the first n
        ev = lossy_traffic(dataclasses.replace(params, n_conns=n), packets, loss=loss, dup=dup, seed=seed + 1)
        return {"conn": np.asarray([c for c, _, _ in ev], dtype=np.int64),
                "psn": np.asarray([s for _, s, _ in ev], dtype=np.int64),
                "open": np.asarray([o for _, _, o in ev], dtype=bool)}

    @staticmethod
    def _events(stimulus: dict) -> list:
        return [(int(c), int(s), bool(o)) for c, s, o in zip(stimulus["conn"], stimulus["psn"], stimulus["open"],
                                                               strict=True)]

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.cosim.designs.melo.engine import golden_streams

        g = golden_streams(params, self._events(stimulus))
        return {"deliv": self.ints(np.asarray(g["deliv"], dtype=object).astype(str)),
                "resp": self.ints(np.asarray(g["resp"], dtype=object).astype(str))}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1):
        from hwcosim.cosim.designs.melo.engine import run_melo_engine

        d = self.run_dir(test_dir, "melo_engine")
        return self.collect(lambda: run_melo_engine(params, self._events(stimulus), seed=seed, test_dir=d, sim=sim,
                                                    waves=waves),
                            d, lambda out, mt: {"deliv": self.ints(out["rtl_deliv"]),
                                                "resp": self.ints(out["rtl_resp"])})


ENGINE = EngineContract()
