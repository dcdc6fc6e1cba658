"""Simulation contract of the KV-Direct pipeline (``hwcosim sim kvdirect-pipeline``).

Stimulus: :func:`hwcosim.models.kvdirect.rtl_model.make_stream` (GET / PUT / DELETE / atomic
operations on Zipf-distributed keys), packed as the RTL's 156-bit request words. The RTL runs
through :func:`~hwcosim.cosim.designs.kvdirect.pipeline.run_pipeline` against the testbench's
memory model; every response word (in request order) and every 64-byte bucket line of the final
memory image is compared with :func:`hwcosim.models.kvdirect.rtl_model.golden_run`.
"""

from __future__ import annotations

import numpy as np
from hwcosim.cosim.contract import SimContract

__all__ = ["PIPELINE"]


class PipelineContract(SimContract):
    """Request words ``requests`` (n,) -> response words ``resp`` (n,) and the bucket lines ``image``."""

    design = "kvdirect-pipeline"

    def stimulus(self, params, seed: int = 0, n_ops: int = 120, n_keys: int = 24, dist: str = "zipf") -> dict:
        """``n_ops`` operations on ``n_keys`` keys drawn from ``dist`` (uniform, zipf or burst)."""
        from hwcosim.models.kvdirect.rtl_model import make_stream, pack_request

        reqs = make_stream(n_ops, n_keys, dist, seed=seed, burst=4 if dist == "burst" else 0)
        return {"requests": np.asarray([pack_request(r) for r in reqs], dtype=object)}

    @staticmethod
    def _requests(stimulus: dict) -> list:
        from hwcosim.models.kvdirect.rtl_model import unpack_request

        return [unpack_request(int(w)) for w in np.asarray(stimulus["requests"]).reshape(-1)]

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.models.kvdirect.rtl_model import golden_run, pack_response

        resp, image, _ = golden_run(params, self._requests(stimulus))
        raw = image.tobytes()
        lines = [int.from_bytes(raw[64 * i:64 * i + 64], "little") for i in range(len(raw) // 64)]
        return {"resp": self.ints([str(pack_response(r)) for r in resp]),
                "image": np.asarray(lines, dtype=object)}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1,
            latency: int = 20, outstanding: int | None = None, forward: bool = True):
        from hwcosim.cosim.designs.kvdirect.pipeline import run_pipeline

        d = self.run_dir(test_dir, "kvdirect_pipeline")
        reqs = self._requests(stimulus)
        out_n = outstanding or min(8, params.entries)
        return self.collect(lambda: run_pipeline(params, reqs, latency=latency, outstanding=out_n, forward=forward,
                                                 seed=seed, test_dir=d, sim=sim, waves=waves),
                            d, lambda out, mt: {"resp": self.ints(out["rtl_resp"]),
                                                "image": self.ints(out["rtl_image"])})


PIPELINE = PipelineContract()
