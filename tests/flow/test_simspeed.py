"""Simulator speed benchmark: port discovery, and a quick run of one small design on both simulators."""

import shutil

import pytest
from hwcosim.cosim.flow import simspeed
from hwcosim.cosim.flow.bench import BENCHES
from hwcosim.cosim.registry import get_design
from hwcosim.models.melo.engine import MeloEngineParams

SMALL_MELO = MeloEngineParams(n_conns=16, psn_bits=24, block_bits=16, pool_blocks=16, max_blocks_per_conn=4)


def _ports(design, params=None):
    d = get_design(design)
    c = d.build(params if params is not None else d.default_params())
    c._MustUse__silence = True  # only its signature is read here; nothing is elaborated
    return {p["name"]: p for p in simspeed.input_ports(c)}


def test_input_ports_of_a_stream_design():
    ports = _ports("melo-engine", SMALL_MELO)
    assert set(ports) == {"i__payload", "i__valid", "d__ready", "r__ready"}  # outputs are not driven
    assert ports["i__valid"]["kind"] == ports["d__ready"]["kind"] == "handshake"
    assert ports["i__payload"]["kind"] == "stream" and ports["i__payload"]["width"] == SMALL_MELO.event_bits


def test_input_ports_config_and_axi():
    ports = _ports("kvdirect-pipeline")
    assert ports["max_reads"]["kind"] == ports["forward_en"]["kind"] == "config"
    assert ports["mem_rsp__payload"]["kind"] == "stream" and ports["mem_rsp__payload"]["width"] == 518
    ports = _ports("bbs-lstm-axi")
    assert ports["s_axis_w_tvalid"]["kind"] == ports["s_axil_rready"]["kind"] == "handshake"
    assert ports["s_axil_wdata"]["kind"] == ports["s_axil_awaddr"]["kind"] == "stream"


def test_registered_in_bench():
    assert "sim_speed" in BENCHES


def test_bad_arguments():
    with pytest.raises(ValueError, match="cycles"):
        simspeed.measure("melo-engine", "icarus", params=SMALL_MELO, cycles=0)


@pytest.mark.sim
def test_small_design_on_both_simulators(tmp_path):
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not installed")
    rows = {}
    for sim in ("verilator", "icarus"):
        r = simspeed.measure("melo-engine", sim, params=SMALL_MELO, cycles=300, free_cycles=2000, min_seconds=0.1,
                             test_dir=tmp_path / sim)
        rows[sim] = r
        assert r["sim"] == sim
        for mode in ("driven", "free"):
            m = r[mode]
            # the cycles the testbench counted are the cycles the simulator's clock advanced
            assert m["sim_cycles"] == m["cycles"] >= (300 if mode == "driven" else 2000)
            assert m["seconds"] > 0 and m["cycles_per_s"] == pytest.approx(m["cycles"] / m["seconds"])
        assert r["build_seconds"] is not None and r["build_seconds"] >= 0
    table = simspeed.speed_table([{"design": "melo-engine", **rows,
                                   "ratio": {m: rows["verilator"][m]["cycles_per_s"] / rows["icarus"][m]["cycles_per_s"]
                                             for m in ("driven", "free")}}])
    assert table.row_count == 1
