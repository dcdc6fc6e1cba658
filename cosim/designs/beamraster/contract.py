"""Simulation contract of the BeamRaster precoder (``hwcosim sim beamraster-precoder``).

Stimulus: :func:`hwcosim.models.beamraster.datapath.scenario` (a geometric channel per frame,
BeamRaster beams and pre-distortion per subcarrier group, 16-QAM symbols): the raw symbols and
coefficient sets the RTL takes. The RTL runs through
:func:`~hwcosim.cosim.designs.beamraster.precoder.run_precoder`; every antenna sample (real and
imaginary) is compared with :func:`hwcosim.models.beamraster.datapath.precode_fixed`.
"""

from __future__ import annotations

import numpy as np
from hwcosim.cosim.contract import SimContract

__all__ = ["PRECODER"]

_KEYS = ("s_re", "s_im", "beams", "P_re", "P_im")


class PrecoderContract(SimContract):
    """Symbols ``s_re``/``s_im`` (N, K), ``beams`` (F, K), ``P_re``/``P_im`` (F, groups, K, K) -> antenna
    samples ``x_re``/``x_im`` (N, M)."""

    design = "beamraster-precoder"

    def stimulus(self, params, seed: int = 0, frames: int = 1, snr_db: float = 30.0) -> dict:
        """``frames`` frames of a channel-driven scenario (N = frames x frame length symbols).

        A frame is ``groups x sc_per_group x symbols_per_frame`` subcarrier-symbols: 16,800 at the
        default parameters (an LTE-like 20 MHz carrier), minutes of RTL simulation; smaller
        ``groups``/``symbols_per_frame`` make a quick run."""
        from hwcosim.models.beamraster.datapath import scenario

        sc = scenario(params, n_frames=frames, snr_db=snr_db, seed=seed)
        return {k: np.asarray(sc[k]) for k in _KEYS}

    def golden(self, params, stimulus: dict) -> dict:
        from hwcosim.models.beamraster.datapath import precode_fixed

        (x_re, x_im), _ = precode_fixed(params, *(stimulus[k] for k in _KEYS))
        return {"x_re": x_re, "x_im": x_im}

    def rtl(self, params, stimulus: dict, *, sim=None, test_dir=None, waves=None, seed: int = 1):
        from hwcosim.cosim.designs.beamraster.precoder import run_precoder

        d = self.run_dir(test_dir, "beamraster_precoder")
        shape = (np.shape(stimulus["s_re"])[0], params.M)
        return self.collect(lambda: run_precoder(params, *(stimulus[k] for k in _KEYS), seed=seed, test_dir=d,
                                                 sim=sim, waves=waves),
                            d, lambda out, mt: {"x_re": self.shaped(out["rtl_re"], shape),
                                                "x_im": self.shaped(out["rtl_im"], shape)})

    def seal(self, run_dir) -> bool:
        return True  # run_precoder seals its folder itself (hwcosim check: the design's recheck)


PRECODER = PrecoderContract()
