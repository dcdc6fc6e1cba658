"""The CSR baseline's board top end to end: the host session of ``hwcosim board run bbs-csr`` drives
the generic stream host (UART -> bridge -> entry and vector FIFOs -> CSR engine -> result FIFO ->
bridge -> UART) with a matrix pruned unstructured and several vectors; every result word is
compared with the golden model, and the weight-beat and busy-lane counters with the entry lists'.
The result FIFO is made small here, so the engine stalls on it and the host's level-driven draining
is exercised. Plus the host side's checks: a wrong word or counter is reported, a board with
another ID is refused, the register map, and the command line."""

import asyncio

import numpy as np
import pytest
from hwcosim.cosim.designs.bbs.board_csr import compare, golden_of, workload
from hwcosim.models.bbs.csr import CSRParams
from hwcosim.models.errors import UsageError

P = CSRParams(rows=32, cols=16, mults=4, lanes=4)


@pytest.mark.sim
def test_csr_board_session_through_uart_matches_golden(tmp_path, run_folder_checks, monkeypatch):
    import hwcosim.hdl.bbs.board_csr as hb
    from hwcosim.cosim.designs.bbs.board_csr import run_board_sim

    monkeypatch.setattr(hb, "OUTPUTS", (("y", 4),))           # a small FIFO: the engine stalls on it
    w, xs = workload(P, 3, seed=2)
    g = golden_of(P, w, xs)
    assert (np.count_nonzero(w, axis=1) == 0).any()             # an empty row still gives its result
    res = run_board_sim(P, w, xs, rate_error=0.02, test_dir=tmp_path)
    mt = res.metrics
    assert res.passed, res.log
    assert mt["mismatches"] == 0 and mt["problems"] == [] and mt["uart_frame_errors"] == 0
    assert mt["words"] == 3 * P.rows
    c = mt["counters"]
    assert c["W_BEATS"] == 3 * g["depth"] and c["BUSY_LANES"] == g["counters"]["BUSY_LANES"]
    assert c["STALL_OUT"] > 0                                    # the FIFO did fill
    out = np.load(tmp_path / "outputs.npz")
    assert np.array_equal(out["rtl"], out["golden"])
    run_folder_checks(tmp_path, "bbs-csr", "rtl", index=3)


def test_compare_catches_a_wrong_word_and_counter():
    w, xs = workload(P, 2, seed=1)
    g = golden_of(P, w, xs)
    c = dict(g["counters"], CYCLES=100, STALL_OUT=0)
    good = {"y": g["y"].copy(), "y_beats": 2 * P.row_groups, "counters": c}
    assert compare(P, w, xs, good)["problems"] == []
    bad = dict(good, y=g["y"].copy())
    bad["y"][1, 5] += 1
    s = compare(P, w, xs, bad)
    assert s["mismatches"] == 1 and "(1, 5," in s["problems"][0]
    short = dict(good, y=g["y"].reshape(-1)[:-P.mults], y_beats=2 * P.row_groups - 1)
    assert "the board returned 60 result words (15 beats)" in compare(P, w, xs, short)["problems"][0]
    wrong = dict(good, counters=dict(c, W_BEATS=c["W_BEATS"] - 1))
    assert "counter W_BEATS" in compare(P, w, xs, wrong)["problems"][0]


def test_workload_is_seeded_sparse_and_fits_the_formats():
    w, xs = workload(P, 3, seed=4)
    w2, xs2 = workload(P, 3, seed=4)
    assert np.array_equal(w, w2) and np.array_equal(xs, xs2)
    assert np.count_nonzero(w) == P.rows * P.cols // 8 and np.abs(w).max() == P.weight_fmt.max_raw
    assert xs.shape == (3, P.cols) and xs.min() == P.vec_fmt.min_raw and xs.max() == P.vec_fmt.max_raw
    with pytest.raises(UsageError, match="at least one"):
        workload(P, 0, seed=1)
    with pytest.raises(UsageError, match="the engine's parameters 32 x 16"):
        golden_of(P, w[:, :8], xs)


def test_register_map_ident_and_widths():
    from hwcosim.hdl.bbs.board_csr import CSR_ID, INPUTS, OUTPUTS, STATUS, csr_host, register_map

    assert CSR_ID.to_bytes(4, "big") == b"BCSR"
    regs = {r.name: r.addr for r in register_map()}
    assert regs["CTRL"] == 0 and regs["ID"] == 4 and regs["IN_FREE0"] == 8 and regs["IN_FREE1"] == 12
    assert regs["LEVEL0"] == 16 and regs["CYCLES"] == 20 and regs["STALL_OUT"] == 32
    assert max(regs.values()) < 256 and len(set(regs.values())) == len(regs)
    assert INPUTS == ("w", "x") and [n for n, _ in OUTPUTS] == ["y"] and "w_beats" in STATUS
    with pytest.raises(TypeError, match="CSRParams"):
        csr_host(object(), 8)


def test_session_refuses_a_board_with_another_id():
    """The session reads ID first; a fake link answers like the BeamRaster board top."""
    from hwcosim.cosim.designs.bbs.board_csr import session
    from hwcosim.hdl.beamraster.board import BEAMRASTER_ID

    class FakeLink:
        bytes_sent = bytes_received = commands = 0

        async def ping(self):
            return 0

        async def read_reg(self, addr):
            assert addr == 4
            return BEAMRASTER_ID

    w, xs = workload(P, 1, seed=1)
    with pytest.raises(UsageError, match=r"answers ID 0x42525354, not the CSR baseline board top's 0x42435352"):
        asyncio.run(session(FakeLink(), P, w, xs))


@pytest.mark.sim
def test_board_run_sim_from_the_command_line(tmp_path, capsys, monkeypatch):
    import hwcosim.hdl.bbs.board_csr as hb
    from hwcosim.cosim.cli import main

    monkeypatch.setattr(hb, "OUTPUTS", (("y", 4),))           # P and this FIFO: the session test's build
    out = tmp_path / "run"
    assert main(["board", "run", "bbs-csr", "--sim", "--param", "rows=32", "--param", "cols=16", "--param", "mults=4",
                 "--param", "lanes=4", "--steps", "2", "--seed", "3", "-o", str(out)]) == 0
    assert "all 64 result words match the golden model" in capsys.readouterr().out
    assert main(["check", str(out)]) == 0
