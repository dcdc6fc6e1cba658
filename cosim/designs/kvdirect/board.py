"""The KV-Direct board session (``hwcosim board run kvdirect-pipeline``): a stream of GET / PUT /
DELETE / ATOMIC operations goes to the pipeline over the UART link and every response comes back;
each is matched to its request by tag and compared with the golden store
(:func:`hwcosim.models.kvdirect.rtl_model.golden_run`), and the counters with the operation count. The same
coroutine runs on a board (pyserial) and against the RTL of the board top's core (pipeline + on-chip
memory) through the cocotb UART model (:func:`run_board_sim`)."""

from __future__ import annotations

import os
from collections import defaultdict, deque

import numpy as np
from hwcosim.cosim.flow.board import HostLink, StreamLink, board_params
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.kvdirect.rtl_model import PipelineParams, golden_run, pack_request, pack_response, unpack_request

__all__ = ["session", "compare", "run_board_sim", "inputs", "OPTIONS", "recheck", "SIM_DIVISOR", "SIM_TIMEOUT"]

SIM_DIVISOR = 8
SIM_TIMEOUT = 2000
REQ_BITS, RSP_BITS = 156, 76


async def session(link: HostLink, p: PipelineParams, requests, log=None) -> dict:
    """Send the packed ``requests`` (:func:`hwcosim.models.kvdirect.rtl_model.pack_request`) to the board's
    pipeline; returns the response words in arrival order and the registers."""
    from hwcosim.hdl.kvdirect.board import KVD_ID, STATUS, register_map

    log = log or (lambda *_: None)
    s = StreamLink(link, register_map(), [REQ_BITS], [RSP_BITS])
    await link.ping()
    ident = await s.read("ID")
    if ident != KVD_ID:
        raise UsageError(f"the board answers ID {ident:#010x}, not the KV-Direct board top's {KVD_ID:#010x}: "
                         f"load the kvdirect-pipeline bitstream")
    await s.write("CTRL", 1)                      # SOFT_RESET: an empty store (the memory is cleared)
    for _ in range(1000):
        if await s.read("READY"):
            break
    else:
        raise CheckFailed("the board's memory did not finish clearing after SOFT_RESET")
    out = await s.run([[int(r) for r in requests]], idle=None, batch=True, log=log)
    counters = {name.upper(): await s.read(name.upper()) for name in STATUS}
    return {"responses": out[0], "counters": counters, "bytes_sent": link.bytes_sent,
            "bytes_received": link.bytes_received, "commands": link.commands}


def in_request_order(requests, responses) -> tuple[list[int | None], list[str]]:
    """The response words rearranged into request order by tag (a tag is never reused while in
    flight); and the problems met (a response whose tag no request carries)."""
    waiting: dict[int, deque] = defaultdict(deque)
    for i, r in enumerate(requests):
        waiting[int(r) & 0xFF].append(i)
    ordered: list[int | None] = [None] * len(requests)
    problems = []
    for w in responses:
        q = waiting.get(int(w) & 0xFF)
        if not q:
            problems.append(f"a response with tag {int(w) & 0xFF} that no outstanding request carries")
            continue
        ordered[q.popleft()] = int(w)
    return ordered, problems


def compare(p: PipelineParams, requests, res: dict) -> dict:
    """Every response (in request order, by tag) against the golden store; the counters."""
    reqs = [unpack_request(int(r)) for r in requests]
    want = [pack_response(r) for r in golden_run(p, reqs)[0]]
    got, problems = in_request_order(requests, res["responses"])
    bad = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
    missing = sum(g is None for g in got)
    if missing:
        problems.append(f"{missing} of {len(want)} requests got no response")
    wrong = [i for i in bad if got[i] is not None]
    if wrong:
        problems.append(f"{len(wrong)} of {len(want)} responses differ from the golden store; first (request, board, "
                        f"golden): " + ", ".join(f"({i}, {got[i]:#x}, {want[i]:#x})" for i in wrong[:4]))
    c = res["counters"]
    if c["OPS_IN"] != len(want) or c["OPS_OUT"] != len(want):
        problems.append(f"OPS_IN {c['OPS_IN']} / OPS_OUT {c['OPS_OUT']} != {len(want)} operations")
    return {"vectors": len(want), "shape": f"{p.n_buckets} buckets, {p.entries} entries, {len(want)} operations",
            "words": len(want), "mismatches": len(bad), "run_cycles": [c["CYCLES"]], "expected_run_cycles": None,
            "ideal_run_cycles": None, "counters": c, "problems": problems,
            "golden": want, "ordered": [g if g is not None else -1 for g in got]}


#: the workload options :func:`inputs` takes (``hwcosim board run``'s ``-n``, ``--seed``)
OPTIONS = ("n", "seed")


def inputs(design, *, family: str = "ecp5", param=(), params_file=None, n: int = 4, seed: int = 1) -> tuple:
    """The parameter set and a Zipf (0.99) operation stream of ``n`` hundred operations over 64 keys
    (seeded by ``seed``).
    ``params_file`` and ``param`` apply to the design's configuration for ``family``
    (:func:`hwcosim.cosim.flow.board.board_params`)."""
    from hwcosim.models.kvdirect.rtl_model import make_stream

    p = board_params(design, family=family, param=param, params_file=params_file)
    reqs = make_stream(100 * n, 64, "zipf", seed)
    return p, {"requests": np.array([pack_request(r) for r in reqs], dtype=object)}


def run_board_sim(p: PipelineParams, requests, *, rate_error: float = 0.0,
                  test_dir: str | os.PathLike | None = None, sim: str | None = None, raise_on_fail: bool = True):
    """Run :func:`session` against the RTL of the board top's core (cocotb, UART model on its pins)."""
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.flow.runs import as_words, seal_outputs
    from hwcosim.hdl.kvdirect.board import kv_host

    words = [int(r) for r in requests]
    res = runner.run(
        kv_host(p, SIM_DIVISOR, timeout=SIM_TIMEOUT), "kvdirect_host", "hwcosim.cosim.designs.kvdirect.tb_board",
        testcase="kvdirect_board_session_matches_golden",
        inputs={"params": p.to_dict(), "divisor": SIM_DIVISOR, "timeout": SIM_TIMEOUT, "rate_error": rate_error},
        arrays={"requests": as_words(words)},
        test_dir=test_dir, sim=sim, raise_on_fail=False)
    seal_outputs(res.test_dir, "kvdirect-pipeline")  # a run folder (hwcosim check), also when the session failed
    return runner.check(res, "kvdirect_host") if raise_on_fail else res


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved ``hwcosim board run kvdirect-pipeline --sim`` folder without simulating: the
    golden store replayed on the saved requests against the responses the board returned (in request
    order by tag; positions: request)."""
    from hwcosim.cosim.flow.runs import word_diff

    p = PipelineParams.from_dict(params)
    reqs = [int(w) for w in arrays["requests"]]
    want = [pack_response(r) for r in golden_run(p, [unpack_request(w) for w in reqs])[0]]
    got = [int(w) for w in outputs["rtl"]]
    res = word_diff(got, want)
    res["saved_expected_agrees"] = [int(w) for w in outputs["golden"]] == want
    return res
