"""The CSR baseline's board session (``hwcosim board run bbs-csr``): a matrix pruned unstructured
(global magnitude) is encoded into the engine's per-PE CSR entry lists, and those entries go to the
engine over the UART link once per product, with one input vector each; every result word comes back
and is compared with :func:`hwcosim.models.bbs.csr.spmxv_entries`, and the weight-beat and multiplier-busy
counters with their counts from the entry lists. The same coroutine runs on a board (pyserial) and
against the RTL of the board top's core through the cocotb UART model (:func:`run_board_sim`)."""

from __future__ import annotations

import os

import numpy as np
from hwcosim.cosim.flow.board import HostLink, StreamLink, board_params
from hwcosim.models.bbs.csr import (
    CSRParams,
    encode,
    pack_vector_beats,
    pack_weight_beats,
    spmxv_entries,
    unpack_output_beats,
)
from hwcosim.models.errors import UsageError

__all__ = ["session", "compare", "golden_of", "workload", "recheck", "run_board_sim", "inputs", "OPTIONS",
           "SIM_DIVISOR", "SIM_TIMEOUT", "DENSITY"]

SIM_DIVISOR = 8
SIM_TIMEOUT = 2000
#: the generated matrices' density: 87.5 % of the weights pruned, unstructured (the BBS paper's sparsity)
DENSITY = 0.125


def _bits(p: CSRParams) -> tuple[int, int, int]:
    """Payload widths of the streams ``w``, ``x`` and ``y`` (:mod:`hwcosim.models.bbs.csr`)."""
    return p.mults * p.lane_width + 1, p.lanes * p.vec_fmt.width, p.mults * p.out_fmt.width


def _inputs(p: CSRParams, w, xs) -> tuple[np.ndarray, np.ndarray]:
    """The raw matrix and the raw vectors (n, cols), refused with a UsageError when they do not fit ``p``."""
    w, xs = np.asarray(w), np.atleast_2d(np.asarray(xs))
    if w.shape != (p.rows, p.cols):
        raise UsageError(f"the matrix is {w.shape[0]} x {w.shape[1]}, the engine's parameters {p.rows} x {p.cols}: "
                         f"give a matrix of that shape or change --param rows/cols")
    if xs.ndim != 2 or xs.shape[1] != p.cols or xs.shape[0] < 1:
        raise UsageError(f"the vectors have shape {xs.shape}, the engine takes (n >= 1, {p.cols}): give one vector "
                         f"of {p.cols} elements per product")
    for what, a, fmt in (("matrix", w, p.weight_fmt), ("vectors", xs, p.vec_fmt)):
        if not np.issubdtype(a.dtype, np.integer) or a.min() < fmt.min_raw or a.max() > fmt.max_raw:
            raise UsageError(f"the {what} must be raw integers of {fmt} ({fmt.min_raw}..{fmt.max_raw}); "
                             f"quantise them first (models.fixedpoint.quantize)")
    return w.astype(np.int64), xs.astype(np.int64)


async def session(link: HostLink, p: CSRParams, w, xs, log=None) -> dict:
    """Run one product per vector of ``xs`` (n, cols) with the raw matrix ``w`` (rows, cols) on the
    board: the matrix's CSR entries before each product, the vector beside them; returns the raw
    results (n, rows) (flat when the board returned no whole number of products) and the registers."""
    from hwcosim.hdl.bbs.board_csr import CSR_ID, STATUS, register_map

    log = log or (lambda *_: None)
    w, xs = _inputs(p, w, xs)
    wbits, xbits, ybits = _bits(p)
    s = StreamLink(link, register_map(), [wbits, xbits], [ybits])
    await link.ping()
    ident = await s.read("ID")
    if ident != CSR_ID:
        raise UsageError(f"the board answers ID {ident:#010x}, not the CSR baseline board top's {CSR_ID:#010x}: "
                         f"load the bbs-csr bitstream")
    await s.write("CTRL", 1)                                        # SOFT_RESET
    e = encode(p, w)
    wwords = pack_weight_beats(p, e) * len(xs)                      # the entries stream in again for every product
    xwords = [b for x in xs for b in pack_vector_beats(p, x)]
    out = await s.run([wwords, xwords], idle=None, batch=True, log=log)
    counters = {name.upper(): await s.read(name.upper()) for name in STATUS}
    y = unpack_output_beats(p, out[0])
    if y.size % p.rows == 0:
        y = y.reshape(-1, p.rows)
    return {"y": y, "y_beats": len(out[0]), "counters": counters, "bytes_sent": link.bytes_sent,
            "bytes_received": link.bytes_received, "commands": link.commands}


def golden_of(p: CSRParams, w, xs) -> dict:
    """The golden results (n, rows) computed entry by entry as the engine does, and the counters'
    golden values: ``W_BEATS`` (entry beats sent) and ``BUSY_LANES`` (entries with ``valid``)."""
    w, xs = _inputs(p, w, xs)
    e = encode(p, w)
    n = xs.shape[0]
    return {"y": spmxv_entries(p, e, xs), "counters": {"W_BEATS": n * e.depth, "BUSY_LANES": n * int(e.valid.sum())},
            "depth": e.depth, "nnz": e.nnz}


def compare(p: CSRParams, w, xs, res: dict) -> dict:
    """Every result word against :func:`hwcosim.models.bbs.csr.spmxv_entries`, and the counters that have a
    golden value; ``problems`` is empty when all agree."""
    g = golden_of(p, w, xs)
    want = g["y"]
    n = want.shape[0]
    got = np.asarray(res["y"])
    problems = []
    if got.shape != want.shape:
        problems.append(f"the board returned {got.size} result words ({res.get('y_beats', '?')} beats), the golden "
                        f"model {want.size} ({n} products of {p.rows} rows)")
        mism = int(want.size)
    else:
        bad = np.argwhere(got != want)
        mism = int(len(bad))
        if mism:
            problems.append(f"{mism} of {want.size} result words differ from the golden model; first (vector, row, "
                            f"board, golden): " + ", ".join(f"({i}, {r}, {got[i, r]}, {want[i, r]})"
                                                            for i, r in bad[:4]))
    c = res["counters"]
    for reg, value in g["counters"].items():
        if c[reg] != value:
            problems.append(f"counter {reg} {c[reg]} != the golden {value}")
    return {"vectors": int(n), "shape": f"{p.rows} x {p.cols}, {g['nnz']} nonzeros, M={p.mults} PEs (longest list "
                                        f"{g['depth']} entries), lanes={p.lanes}, {n} vectors",
            "words": int(want.size), "mismatches": mism, "run_cycles": [c["CYCLES"]], "expected_run_cycles": None,
            "ideal_run_cycles": None, "counters": c, "problems": problems, "golden": want}


def workload(p: CSRParams, n_vectors: int, seed: int, density: float = DENSITY) -> tuple[np.ndarray, np.ndarray]:
    """A seeded raw matrix (rows, cols) pruned unstructured to ``density`` (Gaussian weights, the
    largest magnitudes kept across the whole matrix, so rows and PEs carry different loads; the
    largest weight at the format's limit) and ``n_vectors`` raw vectors over the vector format's
    whole range, the first starting with its extremes."""
    from hwcosim.models.fixedpoint import quantize
    from hwcosim.pruning.patterns.unstructured import Unstructured

    if n_vectors < 1:
        raise UsageError(f"{n_vectors} vectors: the board session needs at least one (--steps N, N >= 1)")
    rng = np.random.default_rng(seed)
    wf = rng.normal(0.0, 1.0, size=(p.rows, p.cols))
    keep = Unstructured(sparsity=1.0 - density).mask(wf)
    wf = np.where(keep, wf, 0.0) * (p.weight_fmt.max_value / np.abs(wf).max())
    w = quantize(wf, p.weight_fmt)
    w = np.where(keep & (w == 0), np.sign(wf).astype(np.int64), w)      # a kept weight stays a nonzero
    vf = p.vec_fmt
    xs = rng.integers(vf.min_raw, vf.max_raw + 1, size=(n_vectors, p.cols), dtype=np.int64)
    edge = [vf.min_raw, vf.max_raw, 0, -1]
    xs[0, :min(4, p.cols)] = edge[:min(4, p.cols)]
    return w, xs


#: the workload options :func:`inputs` takes (``hwcosim board run``'s ``--steps``, ``--seed``)
OPTIONS = ("steps", "seed")


def inputs(design, *, family: str = "ecp5", param=(), params_file=None, steps: int = 3, seed: int = 1) -> tuple:
    """The parameter set and a random matrix of its shape pruned unstructured to 87.5 % with ``steps``
    random vectors (seeded by ``seed``).
    ``params_file`` and ``param`` apply to the design's configuration for ``family``
    (:func:`hwcosim.cosim.flow.board.board_params`)."""
    p = board_params(design, family=family, param=param, params_file=params_file)
    w, xs = workload(p, steps, seed)
    return p, {"w": w, "xs": xs}


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved ``hwcosim board run bbs-csr --sim`` run without simulating: the golden results
    recomputed from the saved matrix and vectors against the result words the board top returned
    (positions: vector, row)."""
    from hwcosim.cosim.flow.runs import word_diff

    if "rtl" not in outputs or "w" not in arrays:
        raise UsageError("the folder holds no board session's matrix and RTL words (only hwcosim board run "
                         "bbs-csr --sim folders re-check)")
    p = CSRParams.from_dict(params)
    want = golden_of(p, np.asarray(arrays["w"], dtype=np.int64), np.asarray(arrays["xs"], dtype=np.int64))["y"]
    res = word_diff(np.asarray(outputs["rtl"]), want)
    res["saved_expected_agrees"] = bool(np.array_equal(np.asarray(arrays["expected"]), want))
    return res


def run_board_sim(p: CSRParams, w, xs, *, rate_error: float = 0.0, test_dir: str | os.PathLike | None = None,
                  sim: str | None = None, raise_on_fail: bool = True):
    """Run :func:`session` against the RTL of the board top's core (cocotb, UART model on its pins)."""
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.flow.runs import seal_outputs
    from hwcosim.hdl.bbs.board_csr import csr_host

    w, xs = _inputs(p, w, xs)
    res = runner.run(
        csr_host(p, SIM_DIVISOR, timeout=SIM_TIMEOUT), "bbs_csr_host", "hwcosim.cosim.designs.bbs.tb_board_csr",
        testcase="csr_board_session_matches_golden",
        inputs={"params": p.to_dict(), "divisor": SIM_DIVISOR, "timeout": SIM_TIMEOUT, "rate_error": rate_error},
        arrays={"w": w, "xs": xs, "expected": golden_of(p, w, xs)["y"]},
        test_dir=test_dir, sim=sim, raise_on_fail=False)
    seal_outputs(res.test_dir, "bbs-csr")  # a run folder (hwcosim check), also when the session failed
    return runner.check(res, "bbs_csr_host") if raise_on_fail else res
