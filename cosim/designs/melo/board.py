"""The MELO board session (``hwcosim board run melo-engine``): lossy, reordered, duplicated packet
arrivals over many connections go to the engine over the UART link; every released PSN, every
response (ACK / SACK / NACK, cumulative PSN, pool occupancy) and the counters come back and are
compared with the golden model (:func:`hwcosim.cosim.designs.melo.engine.golden_streams`). The same
coroutine runs on a board (pyserial) and against the RTL of the board top's core through the
cocotb UART model (:func:`run_board_sim`)."""

from __future__ import annotations

import os
from dataclasses import asdict

import numpy as np
from hwcosim.cosim.flow.board import HostLink, StreamLink, board_params
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.melo.engine import MeloEngineParams

__all__ = ["session", "compare", "golden_of", "traffic", "run_board_sim", "inputs", "OPTIONS", "SIM_DIVISOR",
           "SIM_TIMEOUT"]

SIM_DIVISOR = 8
SIM_TIMEOUT = 2000
#: counters compared with the golden model's statistics (register name: model key)
STATS = {"PACKETS": "packets", "ACKS": "acks", "SACKS": "sacks", "DUPS": "dups", "NACK_POOL": "nack_pool",
         "NACK_WINDOW": "nack_window", "ALLOCS": "allocs", "FREES": "frees", "PEAK_BLOCKS": "peak_blocks"}


def _bits(p: MeloEngineParams) -> tuple[int, int, int]:
    return p.event_bits, p.delivery_bits, p.response_beat_bits


async def session(link: HostLink, p: MeloEngineParams, events: np.ndarray, log=None) -> dict:
    """Send ``events`` (packed event words, :func:`hwcosim.models.melo.engine.pack_event`) to the board's
    engine; returns the delivered-PSN and response words and the registers."""
    from hwcosim.hdl.melo.board import MELO_ID, STATUS, register_map

    log = log or (lambda *_: None)
    regs = register_map()
    ev, dv, rs = _bits(p)
    s = StreamLink(link, regs, [ev], [dv, rs])
    await link.ping()
    ident = await s.read("ID")
    if ident != MELO_ID:
        raise UsageError(f"the board answers ID {ident:#010x}, not the MELO board top's {MELO_ID:#010x}: "
                         f"load the melo-engine bitstream")
    await s.write("CTRL", 1)                      # SOFT_RESET: an empty engine, empty FIFOs
    for _ in range(1000):                        # the engine clears its tables after reset
        if await s.read("IDLE"):
            break
    else:
        raise CheckFailed("the engine did not become idle after SOFT_RESET")
    if await s.read("FREE_COUNT") != p.pool_blocks:
        raise UsageError(f"the board's pool has {await s.read('FREE_COUNT')} free blocks after reset, these "
                         f"parameters {p.pool_blocks}: rebuild the bitstream with them (hwcosim build --param ...)")
    out = await s.run([[int(e) for e in events]], idle="IDLE", batch=True, log=log)
    status = {name.upper(): await s.read(name.upper()) for name in STATUS}
    return {"deliv": out[0], "resp": out[1], "counters": status, "bytes_sent": link.bytes_sent,
            "bytes_received": link.bytes_received, "commands": link.commands}


def golden_of(p: MeloEngineParams, events) -> dict:
    """The golden model's streams and statistics for packed event words."""
    from hwcosim.cosim.designs.melo.bridge import transcript_diff

    return transcript_diff(p, events, [], [])[0]


def compare(p: MeloEngineParams, events: np.ndarray, res: dict) -> dict:
    """Every delivered-PSN and response word against the golden model replayed on the event words,
    and the counters against its statistics; ``problems`` is empty when all agree."""
    golden = golden_of(p, events)
    problems = []
    mism = 0
    for key, what in (("deliv", "delivered-PSN"), ("resp", "response")):
        got, want = list(res[key]), list(golden[key])
        bad = [i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b]
        mism += len(bad) + abs(len(got) - len(want))
        if len(got) != len(want):
            problems.append(f"{len(got)} {what} words from the board, the golden model has {len(want)}")
        if bad:
            problems.append(f"{len(bad)} {what} words differ from the golden model; first (index, board, golden): "
                            + ", ".join(f"({i}, {got[i]:#x}, {want[i]:#x})" for i in bad[:4]))
    c = res["counters"]
    for reg, key in STATS.items():
        if c[reg] != golden["stats"].get(key, 0):
            problems.append(f"counter {reg} {c[reg]} != the golden model's {golden['stats'].get(key, 0)}")
    if c["DELIVERED"] != len(golden["deliv"]):
        problems.append(f"DELIVERED {c['DELIVERED']} != the golden model's {len(golden['deliv'])} released PSNs")
    if c["REJECTED"] != golden["rejected"]:
        problems.append(f"REJECTED {c['REJECTED']} != {golden['rejected']}")
    if c["FREE_COUNT"] != golden["free_count"]:
        problems.append(f"FREE_COUNT {c['FREE_COUNT']} != the golden model's {golden['free_count']}")
    words = len(golden["deliv"]) + len(golden["resp"])
    return {"vectors": int(len(events)), "shape": f"{p.n_conns} connections, {p.pool_blocks} pool blocks of "
                                                  f"{p.block_bits} bits, {len(events)} events",
            "words": words, "mismatches": int(mism), "run_cycles": [c["CYCLES"]], "expected_run_cycles": None,
            "ideal_run_cycles": None, "counters": c, "problems": problems}


def traffic(p: MeloEngineParams, packets_per_conn: int, seed: int) -> np.ndarray:
    """Packed event words of lossy traffic (5 % loss, 3 % duplicates, reordering; the senders react to
    the golden engine's responses) until every connection delivered ``packets_per_conn`` PSNs."""
    from hwcosim.cosim.designs.melo.engine import lossy_traffic
    from hwcosim.models.melo.engine import pack_event

    return np.array([pack_event(p, c, psn, op) for c, psn, op in lossy_traffic(p, packets_per_conn, seed=seed)],
                    dtype=np.int64)


#: the workload options :func:`inputs` takes (``hwcosim board run``'s ``--steps``, ``--seed``)
OPTIONS = ("steps", "seed")


def inputs(design, *, family: str = "ecp5", param=(), params_file=None, steps: int = 3, seed: int = 1) -> tuple:
    """The parameter set and lossy traffic of ``steps`` packets per connection over its connections
    (seeded by ``seed``).
    ``params_file`` and ``param`` apply to the design's configuration for ``family``
    (:func:`hwcosim.cosim.flow.board.board_params`)."""
    p = board_params(design, family=family, param=param, params_file=params_file)
    return p, {"events": traffic(p, steps, seed)}


def run_board_sim(p: MeloEngineParams, events, *, rate_error: float = 0.0,
                  test_dir: str | os.PathLike | None = None, sim: str | None = None, raise_on_fail: bool = True):
    """Run :func:`session` against the RTL of the board top's core (cocotb, UART model on its pins)."""
    from hwcosim.cosim.designs.melo.bridge import save_evidence
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.flow.runs import seal_or_save
    from hwcosim.hdl.melo.board import melo_host

    res = runner.run(
        melo_host(p, SIM_DIVISOR, timeout=SIM_TIMEOUT), "melo_host", "hwcosim.cosim.designs.melo.tb_board",
        testcase="melo_board_session_matches_golden",
        inputs={"params": asdict(p), "divisor": SIM_DIVISOR, "timeout": SIM_TIMEOUT, "rate_error": rate_error},
        arrays={"events": np.asarray(events, dtype=np.int64)},
        test_dir=test_dir, sim=sim, raise_on_fail=False)
    # a run folder (hwcosim check re-verifies it with the golden engine), also when the session failed
    seal_or_save(res.test_dir, "melo-engine", res.metrics.get("transcript"), lambda d, t: save_evidence(d, p, t))
    return runner.check(res, "melo_host") if raise_on_fail else res
