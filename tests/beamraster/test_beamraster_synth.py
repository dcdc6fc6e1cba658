"""Yosys (xcup) synthesis of a small BeamRaster precoder: one DSP per real multiplier."""

import pytest
from hwcosim.cosim.designs.beamraster.precoder import dsp_report
from hwcosim.models.beamraster.datapath import PrecoderParams

pytestmark = pytest.mark.synth


def test_precoder_synthesises_with_the_modelled_dsp_count(tmp_path):
    p = PrecoderParams(M=8, K=2, lanes=4, groups=2, sc_per_group=2, symbols_per_frame=1)
    r = dsp_report(p, out_dir=tmp_path)
    assert r["DSP"] == p.real_multipliers == 24, r
    assert r["LUT"] > 0 and r["FF"] > 0
    assert (tmp_path / "beamraster_precoder.xcup.json").exists()


def test_designs_registry_lists_the_precoder():
    from hwcosim.cosim.registry import get_design

    d = get_design("beamraster-precoder")
    assert d.top == "beamraster_precoder" and d.default_params().M == 64
