"""Verilog emission and a small Yosys resource estimate of the FSS GEMM engine."""

import pytest
from hwcosim.cosim.flow.runner import to_verilog
from hwcosim.cosim.registry import get_design
from hwcosim.hdl.fss import FSSGemm
from hwcosim.models.fss.gemm import FSSParams


def test_design_is_registered_and_emits_verilog():
    d = get_design("fss-gemm")
    p = d.default_params()
    v = to_verilog(d.build(p), d.top)
    assert "module fss_gemm" in v and "w__payload" in v and "cfg_k_regions" in v


def test_wrong_params_type_is_refused():
    with pytest.raises(TypeError, match="FSSParams"):
        FSSGemm(object())


@pytest.mark.synth
def test_small_engine_synthesises_with_one_dsp_per_multiplier(tmp_path):
    from hwcosim.cosim.flow.synth import synthesize

    p = FSSParams(region=(2, 4), n=2, pe_rows=2, pe_cols=1, max_rows=16, max_cols=16)
    rep = synthesize(to_verilog(FSSGemm(p), "fss_gemm"), "fss_gemm", "xcup", out_dir=tmp_path)
    res = rep["resources"]
    assert res["DSP"] == p.multipliers, res  # 8x16-bit products map to DSP48E2s
    assert res["LUT"] > 0 and res["FF"] > 0
