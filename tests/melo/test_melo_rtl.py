"""MELO receiver RTL: construction, stream layouts against the golden packing, Verilog, registry,
and a small synthesis check."""

import pytest
from hwcosim.cosim.flow.runner import to_verilog
from hwcosim.cosim.registry import get_design, override_params
from hwcosim.hdl.melo import MeloEngineRTL
from hwcosim.hdl.melo.engine import delivery_layout, event_layout, metadata_layout, response_layout
from hwcosim.models.melo.engine import (
    NACK,
    MeloEngineParams,
    MeloResponse,
    pack_delivery,
    pack_event,
    pack_response_beat,
    unpack_response_beat,
)

SMALL = MeloEngineParams(n_conns=5, psn_bits=10, block_bits=8, pool_blocks=6, max_blocks_per_conn=2)


def test_init_ports_match_the_golden_word_widths():
    dut = MeloEngineRTL(SMALL)
    assert "module melo_engine" in to_verilog(dut, "melo_engine")
    assert event_layout(SMALL).size == SMALL.event_bits
    assert delivery_layout(SMALL).size == SMALL.delivery_bits
    assert response_layout(SMALL).size == SMALL.response_beat_bits
    assert metadata_layout(SMALL).size == SMALL.metadata_bits
    assert dut.free_count.shape().width == SMALL.used_bits


def test_layout_field_order_matches_the_packing():
    p = SMALL
    lay = event_layout(p)
    w = pack_event(p, 4, 1000, True)
    assert (w >> lay["psn"].offset) & 1023 == 1000 and (w >> lay["conn"].offset) & 7 == 4
    assert w >> lay["open"].offset == 1
    lay = delivery_layout(p)
    assert pack_delivery(p, 3, 17) >> lay["conn"].offset == 3
    lay = response_layout(p)
    resp = MeloResponse(NACK, 4, 1023, 5)
    w = pack_response_beat(p, resp, 6)
    assert w >> lay["used"].offset == 6 and (w >> lay["cum_psn"].offset) & 1023 == 1023
    assert unpack_response_beat(p, w) == (resp, 6)


def test_wrong_params():
    with pytest.raises(ValueError, match="MeloEngineParams"):
        MeloEngineRTL({"n_conns": 4})


def test_verilog_of_the_registered_default():
    d = get_design("melo-engine")
    p = override_params(d.default_params(), ["n_conns=64", "pool_blocks=32"])
    v = to_verilog(d.build(p), d.top)
    assert "module melo_engine" in v
    for port in ("i__payload", "d__payload", "r__payload", "free_count", "blocks_in_use", "nack_pool"):
        assert port in v


@pytest.mark.synth
def test_synthesis_maps_the_engine(tmp_path):
    from hwcosim.cosim.flow.synth import synthesize

    p = MeloEngineParams(n_conns=16, psn_bits=12, block_bits=16, pool_blocks=16, max_blocks_per_conn=2)
    rep = synthesize(to_verilog(MeloEngineRTL(p), "melo_engine"), "melo_engine", "xcup", out_dir=tmp_path)
    r = rep["resources"]
    assert r["LUT"] > 50 and r["FF"] > 13 * 32  # thirteen 32-bit counters at least
    assert r["DSP"] == 0
    assert (tmp_path / "melo_engine.xcup.json").exists()
