"""The FSS AXI board session (``hwcosim board run fss-axi``): load one layer's FSS weights over
``s_axis_w`` into the on-chip store, run activation matrices tile by tile (each tile's
activation beats over ``s_axis_x``, its result beats back from ``m_axis_y``), read the counters
and compare every result word with :func:`hwcosim.models.fss.gemm.gemm`. The same coroutine runs on a
board (pyserial) and against the RTL of :class:`hwcosim.hdl.fss.board.FSSHost` through the cocotb UART
model (:func:`run_board_sim`)."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow.board import HostLink, beats_to_words, board_params, words_to_beats
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.fss.gemm import FSSParams, gemm, pack_act_beats, unpack_output_beats

__all__ = ["session", "compare", "run_board_sim", "inputs", "OPTIONS", "random_layer", "recheck", "SIM_DIVISOR",
           "SIM_TIMEOUT"]

SIM_DIVISOR = 8
SIM_TIMEOUT = 2000
MAX_POLLS = 200
COUNTERS = ("CYCLES", "MAC_BEATS", "STALL_OUT", "STARVE_W", "RUN_CYCLES", "OUT_BEATS", "ERROR", "STATUS")


def _bits(p: FSSParams) -> tuple[int, int]:
    """``s_axis_x`` and ``m_axis_y`` ``tdata`` widths."""
    from hwcosim.hdl.bbs.axi_top import bytes_up

    return bytes_up(p.r_w * p.pe_cols * p.act_fmt.width), bytes_up(p.out_lanes * p.out_fmt.width)


def _shape(p: FSSParams, values) -> tuple[int, int, int, int]:
    """``rows, cols, ROW_GROUPS, K_REGIONS`` of a layer of region ``values`` (gr, gc, n)."""
    rows, cols = values.shape[0] * p.r_h, values.shape[1] * p.r_w
    if rows % p.rows_per_group:
        raise UsageError(f"a {rows}-row layer does not fill whole row groups of {p.rows_per_group} rows "
                         f"(r_h x PR); pad the layer (models.fss.gemm.pad_layer)")
    rg, kr = rows // p.rows_per_group, cols // p.r_w
    if rg > p.max_row_groups or kr > p.max_k_regions:
        raise UsageError(f"a {rows} x {cols} layer exceeds the board's {p.max_rows} x {p.max_cols} weight store; "
                         f"rebuild with larger --param max_rows/max_cols")
    return rows, cols, rg, kr


async def session(link: HostLink, p: FSSParams, values: np.ndarray, indices: np.ndarray, xs: np.ndarray,
                  log=None) -> dict:
    """Run each activation matrix of ``xs`` (raw, (runs, cols, T), T a multiple of ``pe_cols``)
    through the board's engine with the FSS weights ``values``/``indices`` (raw, (gr, gc, n)).

    Raises :class:`UsageError` when the board is built for other parameters and
    :class:`CheckFailed` when the board reports an error or a run does not finish."""
    from hwcosim.cosim.designs.fss.gemm import pack_axi_weight_words
    from hwcosim.hdl.fss.axi_top import CTRL, FSS_ID, REGS, STATUS, config_words
    from hwcosim.hdl.fss.board import CH_WEIGHTS, CH_X, CH_Y

    log = log or (lambda *_: None)
    values, indices = np.asarray(values, dtype=np.int64), np.asarray(indices, dtype=np.int64)
    xs = np.asarray(xs, dtype=np.int64)
    rows, cols, rg, kr = _shape(p, values)
    xbits, ybits = _bits(p)
    ny = -(-ybits // 32)
    await link.ping()
    ident = await link.read_reg(REGS["ID"])
    if ident != FSS_ID:
        raise UsageError(f"the board answers ID {ident:#010x}, not the FSS AXI top's {FSS_ID:#010x}: "
                         f"load the fss-axi bitstream")
    want = config_words(p)
    got = {name: await link.read_reg(REGS[name]) for name in ("CONFIG0", "CONFIG1", "CONFIG2")}
    if any(got[k] != want[k] for k in got):
        raise UsageError("the board is built for other FSS parameters (CONFIG0-2 " + ", ".join(
            f"{got[k]:#010x}" for k in got) + ", these weights need " + ", ".join(f"{want[k]:#010x}" for k in got)
            + "); rebuild the bitstream with the weights' parameters (hwcosim build fss-axi --param ...)")
    await link.write_reg(REGS["CTRL"], CTRL["SOFT_RESET"])
    await link.write_reg(REGS["CTRL"], CTRL["CLEAR_ERROR"])
    await link.write_reg(REGS["ROW_GROUPS"], rg)
    await link.write_reg(REGS["K_REGIONS"], kr)
    words = pack_axi_weight_words(p, values, indices)
    log(f"loading {len(words)} weight words ...")
    await link.write_stream(CH_WEIGHTS, words)
    st = await link.read_reg(REGS["STATUS"])
    if not st & STATUS["LOADED"]:
        raise CheckFailed(f"the weights did not load (STATUS {st:#x}, ERROR {await link.read_reg(REGS['ERROR']):#x})")
    ys, run_cycles, per_run = [], [], []
    for i, x in enumerate(xs):
        t = x.shape[1]
        tiles = t // p.pe_cols
        await link.write_reg(REGS["TILES"], tiles)
        await link.write_reg(REGS["CTRL"], CTRL["START"])
        beats = pack_act_beats(p, x)
        out = []
        for j in range(tiles):
            await link.write_stream(CH_X, beats_to_words(beats[j * kr:(j + 1) * kr], xbits))
            out += words_to_beats(await link.read_stream(CH_Y, rg * ny), ybits)
        for _ in range(MAX_POLLS):
            st = await link.read_reg(REGS["STATUS"])
            if st & STATUS["DONE"]:
                break
        else:
            raise CheckFailed(f"run {i}: the run did not finish (STATUS {st:#x} after {MAX_POLLS} polls)")
        c = {name: await link.read_reg(REGS[name]) for name in COUNTERS}
        per_run.append(c)
        run_cycles.append(c["RUN_CYCLES"])
        ys.append(unpack_output_beats(p, out, rows, t))
        log(f"run {i}: {tiles} tiles, {c['CYCLES']} engine cycles, {c['RUN_CYCLES']} cycles with the link")
    return {"y": np.array(ys, dtype=np.int64), "run_cycles": run_cycles, "counters": per_run[-1] if per_run else {},
            "per_run": per_run, "bytes_sent": link.bytes_sent, "bytes_received": link.bytes_received,
            "commands": link.commands}


def compare(p: FSSParams, values, indices, xs, res: dict) -> dict:
    """Every result word against :func:`hwcosim.models.fss.gemm.gemm`, and each run's counters (weight beats
    replayed per tile, result beats, no error, ``m_axis_y`` never refused: the FIFO holds a tile)."""
    values, indices = np.asarray(values, dtype=np.int64), np.asarray(indices, dtype=np.int64)
    xs = np.asarray(xs, dtype=np.int64)
    rows, cols, rg, kr = _shape(p, values)
    want = np.array([gemm(p, values, indices, x) for x in xs], dtype=np.int64)
    got = np.asarray(res["y"])
    problems = []
    mism = np.argwhere(got != want) if got.shape == want.shape else None
    if mism is None:
        problems.append(f"the board returned results of shape {got.shape}, the golden model {want.shape}")
        nmis = int(want.size)
    else:
        nmis = int(len(mism))
        if nmis:
            problems.append(f"{nmis} of {want.size} result words differ from the golden model; first (run, row, "
                            f"column, board, golden): " + ", ".join(
                                f"({r}, {i}, {j}, {got[r, i, j]}, {want[r, i, j]})" for r, i, j in mism[:4]))
    for i, (x, c) in enumerate(zip(xs, res.get("per_run", []), strict=False)):
        tiles = x.shape[1] // p.pe_cols
        if c["MAC_BEATS"] != tiles * rg * kr:
            problems.append(f"run {i}: MAC_BEATS {c['MAC_BEATS']} != {tiles} tiles x {rg * kr} weight beats")
        if c["OUT_BEATS"] != tiles * rg:
            problems.append(f"run {i}: OUT_BEATS {c['OUT_BEATS']} != {tiles} tiles x {rg} row groups")
        if c["ERROR"]:
            problems.append(f"run {i}: ERROR register {c['ERROR']:#x}")
        if c["STALL_OUT"]:
            problems.append(f"run {i}: m_axis_y refused for {c['STALL_OUT']} cycles (the result FIFO holds a tile)")
    return {"vectors": int(len(xs)), "shape": f"{rows}x{cols}, region {p.r_h}x{p.r_w}, N={p.n}, "
                                             f"PR={p.pe_rows} PC={p.pe_cols}, {len(xs)} runs",
            "words": int(want.size), "mismatches": nmis, "run_cycles": res["run_cycles"],
            "expected_run_cycles": None, "ideal_run_cycles": None, "counters": res["counters"],
            "problems": problems, "golden": want}


def random_layer(p: FSSParams, rows: int, cols: int, seed: int):
    """An FSS-pruned random ``rows x cols`` layer (:func:`hwcosim.pruning.formats.fss.encode`)."""
    from hwcosim.pruning.formats.fss import encode

    return encode(np.random.default_rng(seed).normal(0, 0.6, size=(rows, cols)), p.region, n=p.n, fmt=p.weight_fmt)


#: the workload options :func:`inputs` takes (``hwcosim board run``'s ``-n``, ``--steps``, ``--seed``)
OPTIONS = ("n", "steps", "seed")


def inputs(design, *, family: str = "ecp5", param=(), params_file=None, n: int = 4, steps: int = 3,
           seed: int = 1) -> tuple:
    """The parameter set, random weights of a layer of the board's row-group and region shape (seeded by
    ``seed``; up to 64 x 64 within the build's maximum) and ``n`` runs of ``steps`` column tiles of
    random activations.
    ``params_file`` and ``param`` apply to the design's configuration for ``family``
    (:func:`hwcosim.cosim.flow.board.board_params`)."""
    p = board_params(design, family=family, param=param, params_file=params_file)
    if n < 1 or steps < 1:
        raise UsageError("-n (runs) and --steps (column tiles per run) must be at least 1")
    rows = max(p.rows_per_group, min(p.max_rows, 64) // p.rows_per_group * p.rows_per_group)
    cols = max(p.r_w, min(p.max_cols, 64) // p.r_w * p.r_w)
    m = random_layer(p, rows, cols, seed)
    rng = np.random.default_rng(seed + 1)
    xs = rng.integers(p.act_fmt.min_raw, p.act_fmt.max_raw + 1, size=(n, cols, steps * p.pe_cols))
    return p, {"values": m.values, "indices": m.indices, "xs": xs}


def run_board_sim(p: FSSParams, values, indices, xs, *, rate_error: float = 0.0,
                  test_dir: str | os.PathLike | None = None, sim: str | None = None, raise_on_fail: bool = True):
    """Run :func:`session` against the RTL of :class:`hwcosim.hdl.fss.board.FSSHost` (cocotb, UART model on its
    pins)."""
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.flow.runs import seal_outputs
    from hwcosim.hdl.fss.board import FSSHost

    res = runner.run(
        FSSHost(p, SIM_DIVISOR, timeout=SIM_TIMEOUT), "fss_host", "hwcosim.cosim.designs.fss.tb_board",
        testcase="fss_board_session_matches_golden",
        inputs={"params": p.to_dict(), "divisor": SIM_DIVISOR, "timeout": SIM_TIMEOUT, "rate_error": rate_error},
        arrays={"values": np.asarray(values, dtype=np.int64), "indices": np.asarray(indices, dtype=np.int64),
                "xs": np.asarray(xs, dtype=np.int64)},
        test_dir=test_dir, sim=sim, raise_on_fail=False)
    seal_outputs(res.test_dir, "fss-axi")  # a run folder (hwcosim check), also when the session failed
    return runner.check(res, "fss_host") if raise_on_fail else res


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved ``hwcosim board run fss-axi --sim`` folder without simulating: the golden GEMM
    recomputed from the saved weights and activations against the words the board top returned
    (positions: run, row, column)."""
    from hwcosim.cosim.flow.runs import word_diff

    p = FSSParams.from_dict(params)
    values, indices = np.asarray(arrays["values"], dtype=np.int64), np.asarray(arrays["indices"], dtype=np.int64)
    want = np.array([gemm(p, values, indices, x) for x in np.asarray(arrays["xs"], dtype=np.int64)])
    got = np.asarray(outputs["rtl"])
    res = word_diff(got, want.reshape(got.shape) if want.size == got.size else want)
    res["saved_expected_agrees"] = bool(np.array_equal(np.asarray(outputs["golden"]).reshape(-1), want.reshape(-1)))
    return res
