"""The BBS LSTM AXI board session (``hwcosim board run bbs-lstm-axi``): load the CSB weights and
biases over ``s_axis_w``, run sequences step by step (each input over ``s_axis_x``, each hidden
state back from ``m_axis_h``), read the counters, compare every hidden word with
:func:`hwcosim.models.bbs.lstm.lstm_golden`. The same coroutine runs on a board (pyserial) and against the
RTL of :class:`hwcosim.hdl.bbs.board_lstm.LSTMHost` through the cocotb UART model."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow.board import HostLink, beats_to_words, board_params, words_to_beats
from hwcosim.models.bbs.lstm import LSTMParams, LSTMWeights, lstm_golden, pack_bias_beats, pack_x_beats, unpack_h_beats
from hwcosim.models.bbs.spmxv import pack_weight_beats
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["session", "compare", "run_board_sim", "inputs", "OPTIONS", "SIM_DIVISOR", "SIM_TIMEOUT"]

SIM_DIVISOR = 8
SIM_TIMEOUT = 2000
MAX_POLLS = 200


async def session(link: HostLink, p: LSTMParams, wts: LSTMWeights, xs: np.ndarray, log=None) -> dict:
    """Run sequences ``xs`` (raw, (N, T, I)) through the board's LSTM layer with weights ``wts``."""
    from hwcosim.hdl.bbs.axi_top import CTRL, REGISTER_MAP, REGS, STATUS
    from hwcosim.hdl.bbs.board_lstm import CH_H, CH_WEIGHTS, CH_X, h_words, x_words

    log = log or (lambda *_: None)
    xs = np.asarray(xs, dtype=np.int64)
    N, T = xs.shape[:2]
    await link.ping()
    cfg = await link.read_reg(REGS["CONFIG"])
    if cfg != REGISTER_MAP.CONFIG.pack(P=p.pes, B=p.banks, K=p.k):
        got = REGISTER_MAP.CONFIG.unpack(cfg)
        raise UsageError(f"the board is built for P={got['P']} B={got['B']} k={got['K']}, the weights need "
                         f"P={p.pes} B={p.banks} k={p.k}; rebuild the bitstream with those parameters")
    bbs = p.bbs
    words = beats_to_words(pack_weight_beats(bbs, wts.values, wts.indices), bbs.pes * bbs.banks * bbs.lane_width)
    words += beats_to_words(pack_bias_beats(p, wts.bias), p.pes * p.gate_fmt.width)
    load_words = await link.read_reg(REGS["LOAD_WORDS"])
    if load_words != len(words):
        raise UsageError(f"the board loads {load_words} weight and bias words, these weights make {len(words)}: "
                         f"the bitstream was built for another layer shape")
    await link.write_reg(REGS["CTRL"], CTRL["SOFT_RESET"])
    await link.write_reg(REGS["CTRL"], CTRL["CLEAR_ERROR"])
    log(f"loading {len(words)} weight and bias words ...")
    await link.write_stream(CH_WEIGHTS, words)
    st = await link.read_reg(REGS["STATUS"])
    if not st & STATUS["LOADED"]:
        raise CheckFailed(f"the weights did not load (STATUS {st:#x}, ERROR {await link.read_reg(REGS['ERROR']):#x})")
    await link.write_reg(REGS["SEQ_LEN"], T)
    await link.write_reg(REGS["NUM_SEQ"], N)
    await link.write_reg(REGS["CTRL"], CTRL["START"])
    nx, nh = x_words(p), h_words(p)
    xbits, hbits = 32 * nx, p.units * p.vec_fmt.width
    hbeats = []
    for i, beat in enumerate(pack_x_beats(p, xs)):
        await link.write_stream(CH_X, beats_to_words([beat], xbits))
        hbeats += words_to_beats(await link.read_stream(CH_H, p.hidden // p.units * nh), 32 * nh)
        log(f"step {i}: {len(hbeats)} hidden beats")
    for _ in range(MAX_POLLS):
        st = await link.read_reg(REGS["STATUS"])
        if st & STATUS["DONE"]:
            break
    else:
        raise CheckFailed(f"the run did not finish (STATUS {st:#x})")
    counters = {name: await link.read_reg(REGS[name])
                for name in ("CYCLES", "MAC_BEATS", "STEPS", "STALL_OUT", "RUN_CYCLES", "ERROR", "STATUS")}
    h = unpack_h_beats(p, [b & ((1 << hbits) - 1) for b in hbeats]).reshape(N, T, p.hidden)
    return {"h": h, "run_cycles": [counters["RUN_CYCLES"]], "counters": counters, "bytes_sent": link.bytes_sent,
            "bytes_received": link.bytes_received, "commands": link.commands}


def compare(p: LSTMParams, wts: LSTMWeights, xs, res: dict) -> dict:
    xs = np.asarray(xs, dtype=np.int64)
    want, _ = lstm_golden(p, wts, xs)
    want = np.asarray(want).reshape(res["h"].shape)
    mism = np.argwhere(res["h"] != want)
    N, T = xs.shape[:2]
    c = res["counters"]
    problems = []
    if mism.size:
        problems.append(f"{len(mism)} of {want.size} hidden words differ from the golden model; first (seq, step, "
                        f"unit, board, golden): " + ", ".join(
                            f"({s}, {t}, {u}, {res['h'][s, t, u]}, {want[s, t, u]})" for s, t, u in mism[:4]))
    if c["STEPS"] != N * T:
        problems.append(f"STEPS {c['STEPS']} != {N} x {T}")
    if c["MAC_BEATS"] != N * T * p.bbs.weight_beats:
        problems.append(f"MAC_BEATS {c['MAC_BEATS']} != {N * T} steps x {p.bbs.weight_beats} weight beats")
    if c["ERROR"]:
        problems.append(f"ERROR register {c['ERROR']:#x}")
    return {"vectors": N * T, "shape": f"{N} sequences x {T} steps, I={p.input_size}, H={p.hidden}, B={p.banks}, "
                                       f"k={p.k}, P={p.pes}",
            "words": int(want.size), "mismatches": int(len(mism)), "run_cycles": res["run_cycles"],
            "expected_run_cycles": None, "ideal_run_cycles": None, "counters": c, "problems": problems,
            "golden": want}


def random_layer(p: LSTMParams, seed: int) -> LSTMWeights:
    from hwcosim.models.bbs.lstm import prepare_weights

    rng = np.random.default_rng(seed)
    return prepare_weights(p, rng.normal(0, 0.5, size=(4 * p.hidden, p.input_size + p.hidden)),
                           rng.normal(0, 0.2, size=4 * p.hidden))


#: the workload options :func:`inputs` takes (``hwcosim board run``'s ``-n``, ``--steps``, ``--seed``)
OPTIONS = ("n", "steps", "seed")


def inputs(design, *, family: str = "ecp5", param=(), params_file=None, n: int = 4, steps: int = 3,
           seed: int = 1) -> tuple:
    """The parameter set, random layer weights (seeded by ``seed``) and ``n`` random sequences of
    ``steps`` steps.
    ``params_file`` and ``param`` apply to the design's configuration for ``family``
    (:func:`hwcosim.cosim.flow.board.board_params`)."""
    from hwcosim.models.fixedpoint import quantize

    p = board_params(design, family=family, param=param, params_file=params_file)
    rng = np.random.default_rng(seed + 1)
    xs = quantize(rng.uniform(-1, 1, size=(n, steps, p.input_size)), p.vec_fmt)
    return p, {"wts": random_layer(p, seed), "xs": xs}


def run_board_sim(p: LSTMParams, wts: LSTMWeights, xs, *, rate_error: float = 0.0,
                  test_dir: str | os.PathLike | None = None, sim: str | None = None, raise_on_fail: bool = True):
    from hwcosim.cosim.flow import runner
    from hwcosim.hdl.bbs.board_lstm import LSTMHost

    xs = np.asarray(xs, dtype=np.int64)
    from hwcosim.cosim.flow.runs import seal_outputs

    res = runner.run(
        LSTMHost(p, SIM_DIVISOR, timeout=SIM_TIMEOUT), "bbs_lstm_host", "hwcosim.cosim.designs.bbs.tb_board",
        testcase="lstm_board_session_matches_golden",
        inputs={"params": p.to_dict(), "divisor": SIM_DIVISOR, "timeout": SIM_TIMEOUT, "rate_error": rate_error},
        arrays={"values": wts.values, "indices": wts.indices, "bias": wts.bias, "w_float": wts.w_float,
                "b_float": wts.b_float, "xs": xs},
        test_dir=test_dir, sim=sim, raise_on_fail=False)
    seal_outputs(res.test_dir, "bbs-lstm-axi")  # a run folder (hwcosim check), also when the session failed
    return runner.check(res, "bbs_lstm_host") if raise_on_fail else res


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved ``hwcosim board run bbs-lstm-axi --sim`` run without simulating: the golden
    LSTM recomputed from the saved weights and sequences against the hidden words the board top
    returned (positions: sequence, step, unit)."""
    from hwcosim.cosim.flow.runs import word_diff

    p = LSTMParams.from_dict(params)
    wts = LSTMWeights(arrays["values"], arrays["indices"], arrays["bias"], arrays["w_float"], arrays["b_float"])
    want, _ = lstm_golden(p, wts, np.asarray(arrays["xs"], dtype=np.int64))
    got = np.asarray(outputs["rtl"])
    want = np.asarray(want)
    want = want.reshape(got.shape) if want.size == got.size else want
    res = word_diff(got, want)
    res["saved_expected_agrees"] = bool(np.array_equal(np.asarray(outputs["golden"]).reshape(-1), want.reshape(-1)))
    return res
