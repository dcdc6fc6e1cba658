"""The SpMxV board top end to end: the host session of ``hwcosim board run`` (the same coroutine that
talks to a board through pyserial) drives the RTL through a bit-level UART model, host bytes ->
UART -> bridge -> registers, weight/vector memories -> engine -> result memory -> bridge -> UART ->
host bytes, and every result word is compared with the golden model. Plus the checks of the
host side that need no simulator: the comparison catches a wrong word, the command line refuses a
missing port with exit 2, and the board session refuses a board built for other parameters."""

import numpy as np
import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.designs.bbs.board import RUN_OVERHEAD, compare, run_board_sim
from hwcosim.models.bbs.spmxv import BBSParams, CycleModel
from hwcosim.models.fixedpoint import Q
from hwcosim.pruning.formats.csb import encode


def _case(seed=5, n_vec=2):
    rng = np.random.default_rng(seed)
    m = encode(rng.normal(0, 0.6, size=(8, 16)), 4, 0.5, fmt=Q(2, 6))
    p = BBSParams(rows=8, cols=16, banks=4, k=m.k, pes=2, weight_fmt=m.fmt)
    xs = rng.integers(p.vec_fmt.min_raw, p.vec_fmt.max_raw + 1, size=(n_vec, p.cols))
    xs[0, :4] = [p.vec_fmt.min_raw, p.vec_fmt.max_raw, 0, -1]
    return p, m, xs


@pytest.mark.sim
def test_board_session_through_uart_matches_golden(tmp_path, run_folder_checks):
    p, m, xs = _case()
    # the host's UART 2 % slow: the receiver's tolerance is part of the path
    res = run_board_sim(p, m.values, m.indices, xs, rate_error=0.02, test_dir=tmp_path)
    mt = res.metrics
    assert res.passed, res.log
    assert mt["mismatches"] == 0 and mt["words"] == xs.shape[0] * p.rows
    assert mt["problems"] == [] and mt["uart_frame_errors"] == 0
    # the engine ran from the on-chip memories at full rate: the cycle model's count, every run
    assert mt["run_cycles"] == [CycleModel(p).expected(1) + RUN_OVERHEAD] * xs.shape[0]
    assert mt["counters"]["MAC_BEATS"] == xs.shape[0] * p.weight_beats
    assert mt["counters"]["ERROR"] == 0
    out = np.load(tmp_path / "outputs.npz")
    assert np.array_equal(out["rtl"], out["golden"])
    run_folder_checks(tmp_path, "bbs-spmxv", "rtl", index=3)  # the run folder re-verifies without simulating


@pytest.mark.sim
def test_lstm_board_session_through_uart_matches_golden(tmp_path, run_folder_checks):
    """bbs-lstm-axi's board top: weights and biases over s_axis_w, each step's input over s_axis_x
    and its hidden state back, all through the UART; every hidden word against the golden model."""
    from hwcosim.cosim.designs.bbs.board_lstm import random_layer
    from hwcosim.cosim.designs.bbs.board_lstm import run_board_sim as run_lstm_board
    from hwcosim.models.bbs.lstm import LSTMParams
    from hwcosim.models.fixedpoint import quantize

    p = LSTMParams(input_size=4, hidden=16, banks=4, k=3, pes=4)
    wts = random_layer(p, 3)
    xs = quantize(np.random.default_rng(4).uniform(-1, 1, size=(2, 3, p.input_size)), p.vec_fmt)
    res = run_lstm_board(p, wts, xs, rate_error=-0.02, test_dir=tmp_path)
    mt = res.metrics
    assert res.passed, res.log
    assert mt["mismatches"] == 0 and mt["words"] == 2 * 3 * p.hidden and mt["problems"] == []
    assert mt["counters"]["STEPS"] == 6 and mt["counters"]["STALL_OUT"] == 0
    run_folder_checks(tmp_path, "bbs-lstm-axi", "rtl", index=17)


def test_compare_catches_a_wrong_word():
    p, m, xs = _case()
    from hwcosim.models.bbs.spmxv import spmxv

    y = spmxv(p, m.values, m.indices, xs)
    good = {"y": y.copy(), "run_cycles": [CycleModel(p).expected(1) + RUN_OVERHEAD] * 2,
            "counters": {"MAC_BEATS": 2 * p.weight_beats, "ERROR": 0}}
    assert compare(p, m.values, m.indices, xs, good)["problems"] == []
    bad = dict(good, y=y.copy())
    bad["y"][1, 3] += 1
    s = compare(p, m.values, m.indices, xs, bad)
    assert s["mismatches"] == 1 and "(1, 3," in s["problems"][0]
    slow = dict(good, run_cycles=[good["run_cycles"][0] + 5] * 2)
    assert "run cycles" in compare(p, m.values, m.indices, xs, slow)["problems"][0]


def test_board_run_missing_port_exits_2(capsys):
    assert main(["board", "run", "bbs-spmxv", "--port", "/dev/ttyUSB-does-not-exist"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such serial device" in err[0]


def test_board_run_needs_a_port_or_sim(capsys):
    assert main(["board", "run", "bbs-spmxv"]) == 2
    assert "--port" in capsys.readouterr().err


def test_build_refuses_a_design_without_board_top():
    """(every registered design has a top or runs inside one; a design registered without either)"""
    import dataclasses

    from hwcosim.cosim.flow.board_build import board_top_ref
    from hwcosim.cosim.registry import designs
    from hwcosim.models.errors import UsageError

    bare = dataclasses.replace(designs()["bbs-csr"], board_tops=())
    with pytest.raises(UsageError, match="bbs-csr has no board top .*use --ooc"):
        board_top_ref(bare)


def test_session_refuses_a_board_built_for_other_parameters():
    """The session reads CONFIG/SHAPE first; a fake link answers like a P=8 build."""
    import asyncio

    from hwcosim.cosim.designs.bbs.board import session
    from hwcosim.hdl.bbs.board import REGS
    from hwcosim.models.errors import UsageError

    p, m, xs = _case()

    class FakeLink:
        bytes_sent = bytes_received = commands = 0

        async def ping(self):
            return 0

        async def read_reg(self, addr):
            return {REGS["CONFIG"]: 8 | 4 << 8 | 2 << 16, REGS["SHAPE"]: 8 | 16 << 16}[addr]

    with pytest.raises(UsageError, match="built for P=8"):
        asyncio.run(session(FakeLink(), p, m.values, m.indices, xs))
