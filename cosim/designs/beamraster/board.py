"""The BeamRaster board session (``hwcosim board run beamraster-precoder``): a channel-driven
scenario's coefficient sets and 16-QAM symbols go to the precoder over the UART link, every antenna
sample comes back and is compared with :func:`hwcosim.models.beamraster.datapath.precode_fixed`. The same
coroutine runs on a board (pyserial) and against the RTL of the board top's core through the cocotb
UART model (:func:`run_board_sim`)."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow.board import HostLink, StreamLink, board_params
from hwcosim.models.beamraster.datapath import (
    PrecoderParams,
    pack_coef_beats,
    pack_symbol_beats,
    precode_fixed,
    scenario,
    unpack_output_beats,
)
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["session", "compare", "run_board_sim", "inputs", "OPTIONS", "SIM_DIVISOR", "SIM_TIMEOUT"]

SIM_DIVISOR = 8
SIM_TIMEOUT = 2000


async def session(link: HostLink, p: PrecoderParams, s_re, s_im, beams, P_re, P_im, log=None) -> dict:
    """Precode raw symbols ``s_re``/``s_im`` (N, K) with the coefficient sets ``beams`` (F, K) and
    ``P_re``/``P_im`` (F, groups, K, K) on the board; returns the raw antenna samples."""
    from hwcosim.hdl.beamraster.board import BEAMRASTER_ID, STATUS, register_map

    log = log or (lambda *_: None)
    cbits, sbits = p.coef_width, 2 * p.K * p.sym_fmt.width
    xbits = 2 * p.lanes * p.out_fmt.width
    s = StreamLink(link, register_map(), [cbits, sbits], [xbits])
    await link.ping()
    ident = await s.read("ID")
    if ident != BEAMRASTER_ID:
        raise UsageError(f"the board answers ID {ident:#010x}, not the BeamRaster board top's {BEAMRASTER_ID:#010x}: "
                         f"load the beamraster-precoder bitstream")
    await s.write("CTRL", 1)                                        # SOFT_RESET
    cwords = pack_coef_beats(p, beams, P_re, P_im)
    swords = pack_symbol_beats(p, s_re, s_im)
    out = await s.run([cwords, swords], idle=None, batch=True, log=log)
    counters = {name.upper(): await s.read(name.upper()) for name in STATUS}
    if len(out[0]) % p.ant_groups:
        raise CheckFailed(f"{len(out[0])} output beats are not whole symbols of {p.ant_groups} beats")
    x_re, x_im = unpack_output_beats(p, out[0])
    return {"x_re": x_re, "x_im": x_im, "counters": counters, "bytes_sent": link.bytes_sent,
            "bytes_received": link.bytes_received, "commands": link.commands}


def compare(p: PrecoderParams, s_re, s_im, beams, P_re, P_im, res: dict) -> dict:
    """Every antenna sample against :func:`precode_fixed`, and the beat counters."""
    (want_re, want_im), _ = precode_fixed(p, np.asarray(s_re, dtype=np.int64), np.asarray(s_im, dtype=np.int64),
                                          beams, P_re, P_im)
    got_re, got_im = np.asarray(res["x_re"]), np.asarray(res["x_im"])
    problems = []
    n = want_re.shape[0]
    if got_re.shape != want_re.shape:
        problems.append(f"the board returned {got_re.shape[0]} symbols of antenna samples, the golden model {n}")
        mism = int(want_re.size)
    else:
        bad = np.argwhere((got_re != want_re) | (got_im != want_im))
        mism = int(len(bad))
        if mism:
            problems.append(f"{mism} of {want_re.size} antenna samples differ from the golden model; first (symbol, "
                            f"antenna, board, golden): " + ", ".join(
                                f"({i}, {a}, {got_re[i, a]}{got_im[i, a]:+d}j, {want_re[i, a]}{want_im[i, a]:+d}j)"
                                for i, a in bad[:4]))
    c = res["counters"]
    if c["SYM_BEATS"] != n or c["OUT_BEATS"] != n * p.ant_groups:
        problems.append(f"SYM_BEATS {c['SYM_BEATS']} / OUT_BEATS {c['OUT_BEATS']} != {n} / {n * p.ant_groups}")
    return {"vectors": int(n), "shape": f"M={p.M} K={p.K} lanes={p.lanes}, {n} subcarrier-symbols",
            "words": int(want_re.size), "mismatches": mism, "run_cycles": [c["CYCLES"]], "expected_run_cycles": None,
            "ideal_run_cycles": None, "counters": c, "problems": problems,
            "golden": (want_re, want_im)}


#: the workload options :func:`inputs` takes (``hwcosim board run``'s ``-n``, ``--seed``)
OPTIONS = ("n", "seed")


def inputs(design, *, family: str = "ecp5", param=(), params_file=None, n: int = 4, seed: int = 1) -> tuple:
    """The parameter set and a channel-driven scenario (:func:`hwcosim.models.beamraster.datapath.scenario`)
    of ``n`` frames (seeded by ``seed``).
    ``params_file`` and ``param`` apply to the design's configuration for ``family``
    (:func:`hwcosim.cosim.flow.board.board_params`)."""
    p = board_params(design, family=family, param=param, params_file=params_file)
    sc = scenario(p, n_frames=n, seed=seed)
    return p, {k: sc[k] for k in ("s_re", "s_im", "beams", "P_re", "P_im")}


def run_board_sim(p: PrecoderParams, s_re, s_im, beams, P_re, P_im, *, rate_error: float = 0.0,
                  test_dir: str | os.PathLike | None = None, sim: str | None = None, raise_on_fail: bool = True):
    """Run :func:`session` against the RTL of the board top's core (cocotb, UART model on its pins)."""
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.flow.runs import seal
    from hwcosim.hdl.beamraster.board import precoder_host

    s_re, s_im = np.asarray(s_re, dtype=np.int64), np.asarray(s_im, dtype=np.int64)
    (x_re, x_im), _ = precode_fixed(p, s_re, s_im, beams, P_re, P_im)
    res = runner.run(
        precoder_host(p, SIM_DIVISOR, timeout=SIM_TIMEOUT), "beamraster_host",
        "hwcosim.cosim.designs.beamraster.tb_board",
        testcase="beamraster_board_session_matches_golden",
        inputs={"params": p.to_dict(), "divisor": SIM_DIVISOR, "timeout": SIM_TIMEOUT, "rate_error": rate_error},
        arrays={"s_re": s_re, "s_im": s_im, "beams": np.asarray(beams, dtype=np.int64),
                "P_re": np.asarray(P_re, dtype=np.int64), "P_im": np.asarray(P_im, dtype=np.int64),
                "x_re": x_re, "x_im": x_im},
        test_dir=test_dir, sim=sim, raise_on_fail=False)
    seal(res.test_dir, "beamraster-precoder")  # a run folder (hwcosim check), also when the session failed
    return runner.check(res, "beamraster_host") if raise_on_fail else res
