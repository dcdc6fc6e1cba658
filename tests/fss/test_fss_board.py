"""The FSS AXI board top end to end: the host session of ``hwcosim board run fss-axi`` (the coroutine
that talks to a board through pyserial) drives the RTL through a bit-level UART model: host bytes
-> UART -> bridge -> AXI4-Lite registers and weight store, activations -> engine -> result FIFO ->
bridge -> UART -> host bytes; every result word is compared with the golden GEMM. Plus the host
side's checks that need no simulator."""

import numpy as np
import pytest
from hwcosim.cosim.designs.fss.board import compare, random_layer
from hwcosim.models.errors import UsageError
from hwcosim.models.fss.gemm import FSSParams, gemm

# 2 x 2 PEs, 2 x 8 regions with N = 4: 96-bit weight beats (3 link words), 64-bit activation
# beats (2 words), 128-bit result beats (4 words); a 16 x 32 layer in a 32 x 64 store
P = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=2, max_rows=32, max_cols=64)


def _case(seed=3, runs=2, tiles=2):
    m = random_layer(P, 16, 32, seed)
    rng = np.random.default_rng(seed + 1)
    xs = rng.integers(P.act_fmt.min_raw, P.act_fmt.max_raw + 1, size=(runs, 32, tiles * P.pe_cols))
    xs[0, :4, 0] = [P.act_fmt.min_raw, P.act_fmt.max_raw, 0, -1]
    return m, xs


@pytest.mark.sim
def test_fss_board_session_through_uart_matches_golden(tmp_path, run_folder_checks):
    from hwcosim.cosim.designs.fss.board import run_board_sim

    m, xs = _case()
    res = run_board_sim(P, m.values, m.indices, xs, rate_error=0.02, test_dir=tmp_path)
    mt = res.metrics
    assert res.passed, res.log
    assert mt["mismatches"] == 0 and mt["words"] == xs.shape[0] * 16 * xs.shape[2] and mt["problems"] == []
    assert mt["uart_frame_errors"] == 0
    for c in mt["per_run"]:          # 2 tiles x 4 row groups (of r_h x PR = 4 rows) x 4 region columns
        assert c["MAC_BEATS"] == 2 * 4 * 4 and c["OUT_BEATS"] == 2 * 4 and c["STALL_OUT"] == 0
        assert 0 < c["CYCLES"] <= c["RUN_CYCLES"]
    out = np.load(tmp_path / "outputs.npz")
    assert np.array_equal(out["rtl"], out["golden"])
    run_folder_checks(tmp_path, "fss-axi", "rtl", index=5)


def test_compare_catches_a_wrong_word_and_counter():
    m, xs = _case()
    y = np.array([gemm(P, m.values, m.indices, x) for x in xs])
    c = {"MAC_BEATS": 32, "OUT_BEATS": 8, "ERROR": 0, "STALL_OUT": 0}
    good = {"y": y.copy(), "run_cycles": [100, 100], "counters": c, "per_run": [c, c]}
    assert compare(P, m.values, m.indices, xs, good)["problems"] == []
    bad = dict(good, y=y.copy())
    bad["y"][1, 3, 2] += 1
    s = compare(P, m.values, m.indices, xs, bad)
    assert s["mismatches"] == 1 and "(1, 3, 2," in s["problems"][0]
    short = dict(good, per_run=[c, dict(c, OUT_BEATS=7)])
    assert "run 1: OUT_BEATS 7" in compare(P, m.values, m.indices, xs, short)["problems"][0]


def test_session_refuses_a_layer_larger_than_the_store():
    from hwcosim.cosim.designs.fss.board import _shape

    big = random_layer(P, 48, 32, 1)
    with pytest.raises(UsageError, match="exceeds the board's 32 x 64 weight store"):
        _shape(P, big.values)


def test_board_cli_refuses_csb_and_bad_counts(capsys):
    from hwcosim.cosim.cli import main

    assert main(["board", "run", "fss-axi", "--sim", "--csb", "w.npz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--csb does not apply to fss-axi" in err[0]
    assert main(["board", "run", "fss-axi", "--sim", "-n", "0"]) == 2
    assert "-n 0: out of range" in capsys.readouterr().err
