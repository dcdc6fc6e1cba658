"""Faults at the interfaces of the BBS LSTM board top (design ``bbs-lstm-axi``), issue #15:
weights fetched over AXI4 memory-mapped reads (LOAD_MM) with random and long stalls, SLVERR and
DECERR responses, SOFT_RESET and the hardware reset in the middle of weight transfers (stream
and memory-mapped) and of a run. Every scenario ends with a reload and a run compared word for
word with the golden model; the testbench (:mod:`hwcosim.cosim.designs.bbs.tb_axi_faults`) checks the recovered
state and the AXI read protocol on every cycle.

Also: AXI4-Lite accesses outside the register map and writes to read-only registers (SLVERR,
ERROR.bad_address, nothing changed, the design keeps working) and a memory that stops
answering in the middle of LOAD_MM (the read timeout: reported, late beats discarded, both
documented recoveries rerun bit-exact).

Three Verilator builds: the default top (32-bit ``m_axi``, bursts of 16, 2 outstanding, the
default 2**16-cycle read watchdog; the same Verilog as ``tests/bbs/test_bbs_axi.py``, so the build is
shared), a 64-bit variant with short bursts and one outstanding burst, used by the LOAD_MM
scenario only, and a variant with a 300-cycle watchdog for the timeout scenario."""

import gc
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_bbs_lstm_sim import _case  # noqa: E402


def _two_sets():
    """The ``tests/bbs/test_bbs_axi.py`` case (weight set A) and a second weight set B of the same
    shapes."""
    p, wts, xs = _case(4, 4, 2, 8, 4, n=2, T=3, seed=8)
    _, wts_b, _ = _case(4, 4, 2, 8, 4, n=2, T=3, seed=9)
    assert not np.array_equal(wts.values, wts_b.values)
    return p, wts, wts_b, xs


def test_register_map_and_params():
    from hwcosim.hdl.bbs.axi_top import CTRL, ERROR, REGS, STATUS, LSTMAxiTop

    assert len(set(REGS.values())) == len(REGS) and all(v % 4 == 0 and v < 0x100 for v in REGS.values())
    old = ["CTRL", "SEQ_LEN", "NUM_SEQ", "STATUS", "ERROR", "CYCLES", "MAC_BEATS", "STEPS", "STALL_OUT",
           "RUN_CYCLES", "CONFIG"]
    assert [REGS[k] for k in old] == list(range(0, 0x2C, 4)), "the stream-only map is unchanged"
    assert all(v > 0x28 for k, v in REGS.items() if k not in old)
    for bits in (CTRL, STATUS, ERROR):
        assert sorted(bits.values()) == [1 << i for i in range(len(bits))]
    p, *_ = _two_sets()
    top = LSTMAxiTop(p)
    assert top.load_words == 16 * top.weight_words + 8 * top.bias_words == 96  # 16 beats of 5 words + 8 of 2
    assert LSTMAxiTop(p, mm_data_width=64).load_beats == 48
    assert LSTMAxiTop(p, mm_data_width=128).load_beats == 24
    with pytest.raises(ValueError, match="Data width"):
        LSTMAxiTop(p, mm_data_width=48)
    with pytest.raises(ValueError, match="Burst length"):
        LSTMAxiTop(p, mm_max_burst=512)
    with pytest.raises(ValueError, match="address width"):
        LSTMAxiTop(p, mm_addr_width=16)


def test_unknown_scenario():
    from hwcosim.cosim.designs.bbs.axi_faults import run_lstm_axi_faults

    p, wts, wts_b, xs = _two_sets()
    with pytest.raises(ValueError, match="unknown scenario"):
        run_lstm_axi_faults(p, wts, wts_b, xs, "power_cut")


def _run(tmp_path, scenario, **kw):
    from hwcosim.cosim.designs.bbs.axi_faults import run_lstm_axi_faults

    p, wts, wts_b, xs = _two_sets()
    return run_lstm_axi_faults(p, wts, wts_b, xs, scenario, test_dir=tmp_path, **kw).metrics


@pytest.mark.sim
@pytest.mark.parametrize("mm", [dict(), dict(mm_data_width=64, mm_max_burst=4, mm_max_outstanding=1)],
                         ids=["m_axi32", "m_axi64"])
def test_mm_load_with_random_stalls(tmp_path, mm):
    mt = _run(tmp_path, "mm_load_with_random_stalls", **mm)
    for r in ("run_b", "run_a", "run_a2", "run_b2"):
        assert mt[r]["ERROR"] == 0 and mt[r]["STEPS"] > 0
    assert mt["r_beats"] == 2 * mt["words"] * 32 // mm.get("mm_data_width", 32)
    assert mt["max_burst_seen"] == mm.get("mm_max_burst", 16)
    # free-flowing memory: about one word per cycle (plus the read latency of each burst when
    # only one burst may be outstanding); the stalled load is slower
    bound = mt["words"] + (60 if not mm else 4 * mt["words"] // 8)
    assert mt["words"] <= mt["load_cycles_fast"] <= bound < mt["load_cycles"], mt


@pytest.mark.sim
def test_mm_read_errors(tmp_path):
    mt = _run(tmp_path, "mm_read_errors")
    assert [c["MM_ERR_RESP"] for c in mt["cases"].values()] == [2, 3]
    assert all(c["MM_ERR_ADDR_LO"] | c["MM_ERR_ADDR_HI"] << 32 == c["addr"] for c in mt["cases"].values())
    assert mt["err_unaligned"] == 32 and mt["err_load_busy"] == 16


@pytest.mark.sim
def test_long_stalls(tmp_path):
    mt = _run(tmp_path, "long_stalls")
    assert mt["load_cycles"] >= 5000 and mt["run"]["STALL_OUT"] >= 4000


@pytest.mark.sim
def test_soft_reset_mid_transfer(tmp_path):
    mt = _run(tmp_path, "soft_reset_mid_transfer")
    assert mt["mm"]["in_flight_at_reset"] > 0 and mt["run"]["kept"]["STEPS"] == 0


@pytest.mark.sim
def test_hw_reset_mid_transfer(tmp_path):
    mt = _run(tmp_path, "hw_reset_mid_transfer")
    assert mt["mm_in_flight"] > 0 and mt["run_run"]["STEPS"] == 6


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_timeout_param_and_slverr_map():
    from hwcosim.hdl.bbs.axi_top import ERROR, REGS, STATUS, WRITABLE, LSTMAxiTop
    from hwcosim.hdl.common.axi_reader import DEFAULT_TIMEOUT

    p, *_ = _two_sets()
    for kw, want in (({}, DEFAULT_TIMEOUT), ({"mm_timeout_cycles": None}, None), ({"mm_timeout_cycles": 300}, 300)):
        top = LSTMAxiTop(p, **kw)
        top._MustUse__silence = True                # not elaborated here
        assert top.mm_timeout_cycles == want
    with pytest.raises(ValueError, match="Timeout"):
        LSTMAxiTop(p, mm_timeout_cycles=1)
    gc.collect()                                    # the refused object warns here, filtered
    assert ERROR["MM_TIMEOUT"] == 128 and ERROR["BAD_ADDRESS"] == 256 and STATUS["MM_STALE"] == 64
    assert set(WRITABLE) < set(REGS)


@pytest.mark.sim
def test_axil_slverr(tmp_path):
    mt = _run(tmp_path, "axil_slverr")
    assert mt["unmapped"] == 46 and mt["err_after_reads"] == 256 and mt["err_after_run"] == 256
    assert mt["run2"]["STEPS"] == 12  # counted since the load: two runs of 6 steps


@pytest.mark.sim
def test_mm_read_timeout(tmp_path):
    mt = _run(tmp_path, "mm_read_timeout", mm_timeout_cycles=300)
    for case in ("r_stuck", "ar_stuck", "soft_stuck"):
        c = mt[case]
        assert c["MM_ERR_RESP"] == 4 and c["received"] >= 30 and c["run"]["STEPS"] == 6, (case, c)
        # reported about the timeout after the memory stopped (plus the AXI4-Lite polling period)
        assert 250 <= c["waited"] <= 500, (case, c)
    assert mt["r_stuck"]["stale_beats"] > 0 and mt["ar_stuck"]["arvalid_held"] == 1
