"""The MELO board top end to end: the host session of ``hwcosim board run melo-engine`` drives the
generic stream host (UART -> bridge -> input FIFO -> engine -> output FIFOs -> bridge -> UART) with
lossy, reordered, duplicated traffic; every delivered-PSN and response word and the counters are
compared with the golden engine. The output FIFOs are made small here, so the engine stalls on
them and the host's level-driven draining is exercised. Plus the host side's checks."""

import numpy as np
import pytest
from hwcosim.cosim.designs.melo.board import compare, golden_of, traffic
from hwcosim.models.melo.engine import MeloEngineParams

P = MeloEngineParams(n_conns=8, psn_bits=12, block_bits=8, pool_blocks=8, max_blocks_per_conn=2)


@pytest.mark.sim
def test_melo_board_session_through_uart_matches_golden(tmp_path, run_folder_checks, monkeypatch):
    import hwcosim.hdl.melo.board as hb
    from hwcosim.cosim.designs.melo.board import run_board_sim

    monkeypatch.setattr(hb, "OUTPUTS", (("d", 4), ("r", 4)))      # small FIFOs: the engine stalls on them
    events = traffic(P, 6, seed=2)
    g = golden_of(P, events)
    assert len(g["deliv"]) == 6 * P.n_conns and g["stats"]["dups"] > 0 and g["stats"]["sacks"] > 0
    res = run_board_sim(P, events, rate_error=0.02, test_dir=tmp_path)
    mt = res.metrics
    assert res.passed, res.log
    assert mt["mismatches"] == 0 and mt["problems"] == [] and mt["uart_frame_errors"] == 0
    assert mt["words"] == len(g["deliv"]) + len(g["resp"])
    assert mt["counters"]["STALL_D"] + mt["counters"]["STALL_R"] > 0     # the FIFOs did fill
    run_folder_checks(tmp_path, "melo-engine", "rtl_resp", index=3)


def test_compare_catches_a_wrong_word_and_counter():
    events = traffic(P, 3, seed=1)
    g = golden_of(P, events)
    c = {"PACKETS": g["stats"]["packets"], "ACKS": g["stats"]["acks"], "SACKS": g["stats"].get("sacks", 0),
         "DUPS": g["stats"].get("dups", 0), "NACK_POOL": g["stats"].get("nack_pool", 0),
         "NACK_WINDOW": g["stats"].get("nack_window", 0), "ALLOCS": g["stats"].get("allocs", 0),
         "FREES": g["stats"].get("frees", 0), "PEAK_BLOCKS": g["stats"]["peak_blocks"], "DELIVERED": len(g["deliv"]),
         "REJECTED": 0, "FREE_COUNT": g["free_count"], "CYCLES": 100}
    good = {"deliv": list(g["deliv"]), "resp": list(g["resp"]), "counters": c}
    assert compare(P, events, good)["problems"] == []
    bad = dict(good, resp=list(g["resp"]))
    bad["resp"][2] ^= 1
    s = compare(P, events, bad)
    assert s["mismatches"] == 1 and "(2," in s["problems"][0]
    short = dict(good, deliv=good["deliv"][:-1])
    assert "words from the board, the golden model has" in compare(P, events, short)["problems"][0]
    wrong = dict(good, counters=dict(c, DUPS=c["DUPS"] + 1))
    assert "counter DUPS" in compare(P, events, wrong)["problems"][0]


def test_register_map_and_widths():
    from hwcosim.hdl.common.stream_host import stream_host_regs
    from hwcosim.hdl.melo.board import INPUTS, OUTPUTS, STATUS, melo_host

    regs = {r.name: r.addr for r in stream_host_regs(INPUTS, OUTPUTS, STATUS)}
    assert regs["CTRL"] == 0 and regs["ID"] == 4 and regs["IN_FREE0"] == 8 and regs["LEVEL1"] == 16
    assert max(regs.values()) < 256 and len(set(regs.values())) == len(regs)
    with pytest.raises(TypeError, match="MeloEngineParams"):
        melo_host(object(), 8)
    assert np.all(traffic(P, 2, seed=3) < 1 << P.event_bits)
