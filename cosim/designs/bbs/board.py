"""The BBS SpMxV board session: load CSB weights, stream vectors, read results and counters over the
host link, and compare every result word with the golden model.

:func:`session` is written once against :class:`hwcosim.cosim.flow.board.HostLink`; ``hwcosim board run
bbs-spmxv --port /dev/ttyUSB0`` runs it on a board through pyserial, and :func:`run_board_sim`
(``--sim`` and ``tests/bbs/test_bbs_board.py``) runs the same coroutine against the RTL of
:class:`hwcosim.hdl.bbs.board.SpMxVHost` in cocotb, through a bit-level UART model
(:mod:`hwcosim.cosim.tb.uart`).
"""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow.board import HostLink, beats_to_words, words_to_beats
from hwcosim.models.bbs.spmxv import (
    BBSParams,
    CycleModel,
    pack_vector_beats,
    pack_weight_beats,
    spmxv,
    unpack_output_beats,
)
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["session", "compare", "run_board_sim", "inputs", "OPTIONS", "RUN_OVERHEAD", "SIM_DIVISOR", "SIM_TIMEOUT"]

#: cycles a board run takes beyond :meth:`CycleModel.expected` (1 vector): the START write's
#: register stage and the weight/vector memories' read latency
RUN_OVERHEAD = 1
#: UART divisor and bridge watchdog of the simulated top (fast, so the test stays short)
SIM_DIVISOR = 8
SIM_TIMEOUT = 2000
#: polls of STATUS before a run is declared stuck
MAX_POLLS = 1000


async def session(link: HostLink, p: BBSParams, values: np.ndarray, indices: np.ndarray, xs: np.ndarray,
                  log=None) -> dict:
    """Run ``xs`` (raw, shape (n, cols)) through the board's engine with CSB ``values``/``indices``.

    Returns the raw results ``y`` (n, rows) as read back, the board's counters and per-run cycles.
    Raises :class:`UsageError` when the board is built for other parameters and
    :class:`CheckFailed` when the board reports an error.
    """
    from hwcosim.hdl.bbs.board import CH_RESULTS, CH_VECTOR, CH_WEIGHTS, CTRL, REGS, STATUS, beat_bits

    log = log or (lambda *_: None)
    bits = beat_bits(p)
    await link.ping()
    cfg, shape = await link.read_reg(REGS["CONFIG"]), await link.read_reg(REGS["SHAPE"])
    want_cfg, want_shape = p.pes | p.banks << 8 | p.k << 16, p.rows | p.cols << 16
    if (cfg, shape) != (want_cfg, want_shape):
        raise UsageError(f"the board is built for P={cfg & 255} B={cfg >> 8 & 255} k={cfg >> 16} rows={shape & 0xFFFF} "
                         f"cols={shape >> 16}, the weights need P={p.pes} B={p.banks} k={p.k} rows={p.rows} "
                         f"cols={p.cols}; rebuild the bitstream with those parameters (hwcosim build --param ...)")
    wwords = beats_to_words(pack_weight_beats(p, values, indices), bits["w"])
    sizes = {name: await link.read_reg(REGS[name]) for name in ("WEIGHT_WORDS", "VECTOR_WORDS", "RESULT_WORDS")}
    if sizes["WEIGHT_WORDS"] != len(wwords):
        raise CheckFailed(f"the board expects {sizes['WEIGHT_WORDS']} weight words, the host packs {len(wwords)}")
    await link.write_reg(REGS["CTRL"], CTRL["RELOAD"] | CTRL["CLEAR_ERROR"])
    log(f"loading {len(wwords)} weight words ...")
    await link.write_stream(CH_WEIGHTS, wwords)
    ys, run_cycles = [], []
    for i, x in enumerate(np.atleast_2d(xs)):
        xw = beats_to_words(pack_vector_beats(p, x), bits["x"])
        await link.write_stream(CH_VECTOR, xw)
        st = await link.read_reg(REGS["STATUS"])
        if st & (STATUS["WEIGHTS"] | STATUS["VECTOR"]) != STATUS["WEIGHTS"] | STATUS["VECTOR"] or st & STATUS["ERROR"]:
            err = await link.read_reg(REGS["ERROR"])
            raise CheckFailed(f"vector {i}: the board is not ready to run (STATUS {st:#x}, ERROR {err:#x})")
        await link.write_reg(REGS["CTRL"], CTRL["START"])
        for _ in range(MAX_POLLS):
            st = await link.read_reg(REGS["STATUS"])
            if st & STATUS["DONE"]:
                break
        else:
            raise CheckFailed(f"vector {i}: the run did not finish (STATUS {st:#x} after {MAX_POLLS} polls)")
        run_cycles.append(await link.read_reg(REGS["RUN_CYCLES"]))
        rwords = await link.read_stream(CH_RESULTS, sizes["RESULT_WORDS"])
        ys.append(unpack_output_beats(p, words_to_beats(rwords, bits["y"])))
        log(f"vector {i}: {run_cycles[-1]} cycles")
    counters = {name: await link.read_reg(REGS[name])
                for name in ("CYCLES", "MAC_BEATS", "STALL_OUT", "STARVE_W", "ERROR", "STATUS")}
    return {"y": np.array(ys, dtype=np.int64).reshape(len(ys), p.rows), "run_cycles": run_cycles,
            "counters": counters, "bytes_sent": link.bytes_sent, "bytes_received": link.bytes_received,
            "commands": link.commands}


#: the workload options :func:`inputs` takes (``hwcosim board run``'s ``--csb``, ``--vector``, ``-n``, ``--seed``)
OPTIONS = ("csb", "vector", "n", "seed")


def inputs(design, *, family: str = "ecp5", param=(), params_file=None, csb=None, vector=None, n: int = 4,
           seed: int = 1) -> tuple:
    """The parameter set and the session's inputs: CSB weights from the file or folder ``csb`` (else
    random weights of the board's shape, seeded by ``seed``), vectors from the ``.npy`` file ``vector``
    (else ``n`` random ones), quantised to the vector format. The parameters are the design's
    configuration for ``family``, then ``params_file``, then the ``FIELD=VALUE`` items of ``param``."""
    from hwcosim.cosim.registry import apply_changes, parse_param_items, read_params_file, resolve_params
    from hwcosim.models.fixedpoint import quantize
    from hwcosim.pruning.formats import csb as csbfmt

    base = design.board_config(family, top=True) or design.default_params()
    if csb:
        m = csbfmt.load(csb)
        from hwcosim.models.precedence import layered

        changes = layered((f"--params {params_file}", read_params_file(params_file) if params_file else None),
                          ("--param", parse_param_items(list(param))))
        fixed = {"rows": m.rows, "cols": m.cols, "banks": m.banks, "k": m.k, "weight_fmt": m.fmt}
        clash = [f for f in fixed if f in changes]
        if clash:
            raise UsageError(f"--param {clash[0]}: the CSB weights fix {clash[0]}={fixed[clash[0]]}; drop that setting")
        p = apply_changes(base, changes, "parameter", exact=fixed)
    else:
        p = resolve_params(design, list(param), params_file, base=base)
        rng = np.random.default_rng(seed)
        m = csbfmt.encode(rng.normal(0, 0.6, size=(p.rows, p.cols)), p.banks, 1.0 - p.k / p.bank_size,
                          fmt=p.weight_fmt)
    if vector:
        from hwcosim.cosim.flow.vectors import load_vectors

        xf = load_vectors(vector, p.cols)
    else:
        xf = np.random.default_rng(seed + 1).uniform(-1, 1, size=(n, p.cols))
    return p, {"values": m.values, "indices": m.indices, "xs": quantize(xf, p.vec_fmt)}


def compare(p: BBSParams, values, indices, xs, res: dict) -> dict:
    """Every result word against :func:`hwcosim.models.bbs.spmxv.spmxv`, and the counters against the cycle
    model; returns a summary with ``mismatches`` and ``problems`` (empty when all is well)."""
    xs = np.atleast_2d(xs)
    want = spmxv(p, values, indices, xs)
    got = res["y"]
    mism = np.argwhere(got != want)
    n = len(xs)
    model = CycleModel(p)
    c = res["counters"]
    problems = []
    if mism.size:
        problems.append(f"{len(mism)} of {want.size} result words differ from the golden model; first (vector, row, "
                        f"board, golden): " + ", ".join(f"({v}, {r}, {got[v, r]}, {want[v, r]})" for v, r in mism[:4]))
    if c["MAC_BEATS"] != n * p.weight_beats:
        problems.append(f"MAC_BEATS {c['MAC_BEATS']} != {n} x {p.weight_beats} weight beats")
    if c["ERROR"]:
        problems.append(f"ERROR register {c['ERROR']:#x}")
    expected = model.expected(1) + RUN_OVERHEAD
    slow = [rc for rc in res["run_cycles"] if rc != expected]
    if slow:
        problems.append(f"run cycles {slow[:4]} != the cycle model's {model.expected(1)} + {RUN_OVERHEAD}")
    return {"vectors": n, "shape": f"{p.rows}x{p.cols}, B={p.banks}, k={p.k}, P={p.pes}",
            "words": int(want.size), "mismatches": int(len(mism)), "run_cycles": res["run_cycles"],
            "expected_run_cycles": expected, "ideal_run_cycles": model.ideal(1),
            "utilisation": model.utilisation(res["run_cycles"][0]) if res["run_cycles"] else 0.0,
            "counters": c, "problems": problems, "golden": want}


def run_board_sim(p: BBSParams, values, indices, xs, *, rate_error: float = 0.0,
                  test_dir: str | os.PathLike | None = None, sim: str | None = None, raise_on_fail: bool = True):
    """Run :func:`session` against the RTL of the board top's core (cocotb, UART model on its pins)."""
    from hwcosim.cosim.flow import runner
    from hwcosim.hdl.bbs.board import SpMxVHost

    xs = np.atleast_2d(np.asarray(xs, dtype=np.int64))
    from hwcosim.cosim.flow.runs import seal_outputs

    res = runner.run(
        SpMxVHost(p, SIM_DIVISOR, timeout=SIM_TIMEOUT), "bbs_spmxv_host", "hwcosim.cosim.designs.bbs.tb_board",
        testcase="spmxv_board_session_matches_golden",
        inputs={"params": p.to_dict(), "divisor": SIM_DIVISOR, "timeout": SIM_TIMEOUT, "rate_error": rate_error},
        arrays={"values": np.asarray(values, dtype=np.int64), "indices": np.asarray(indices, dtype=np.int64),
                "xs": xs},
        test_dir=test_dir, sim=sim, raise_on_fail=False)
    seal_outputs(res.test_dir, "bbs-spmxv")  # a run folder (hwcosim check), also when the session failed
    return runner.check(res, "bbs_spmxv_host") if raise_on_fail else res
