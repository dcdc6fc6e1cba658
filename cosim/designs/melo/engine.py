"""MELO receiver engine: stimulus, golden outputs, RTL simulation and the benchmark table.

- :func:`lossy_traffic`: packet arrivals at the receiver from senders with windows over a network
  that drops, duplicates and reorders packets, across many connections. The senders react to
  the engine's responses (cumulative ACK, NACK -> resend that PSN, timeout -> resend the window),
  so the arrivals are generated in a closed loop with the golden model; the RTL sees the same
  arrivals and must produce the same outputs.
- :func:`golden_streams`: the golden model's output streams for a list of events, as the RTL's
  words (:mod:`hwcosim.models.melo.engine` packing).
- :func:`run_melo_engine`: simulate ``hwcosim.hdl.melo.MeloEngineRTL`` on the events; the testbench
  compares every released-PSN word and every response word (which carries the pool occupancy)
  and checks the status ports at quiescence.
- :func:`bench_melo_engine`: packets per cycle (measured), memory bits per connection, Verilog
  size and a Yosys resource estimate over a table of configurations.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import time
from dataclasses import asdict
from pathlib import Path

from hwcosim.cosim.flow import runner
from hwcosim.models.errors import UsageError
from hwcosim.models.melo.cycles import packet_cycles
from hwcosim.models.melo.engine import (
    NACK,
    MeloEngineModel,
    MeloEngineParams,
    pack_delivery,
    pack_event,
    pack_response_beat,
)
from hwcosim.models.tables import show

__all__ = ["lossy_traffic", "in_order_traffic", "golden_streams", "run_melo_engine", "bench_melo_engine"]

Event = tuple[int, int, bool]  # (conn, psn, open)


def lossy_traffic(p: MeloEngineParams, packets_per_conn: int, *, loss: float = 0.05, dup: float = 0.03,
                  max_delay: int = 20, window: int | None = None, rto: int = 60, seed: int = 1,
                  random_starts: bool = True, max_events: int = 1_000_000) -> list[Event]:
    """Arrivals (``open`` events first) until every connection delivered ``packets_per_conn`` PSNs.

    Each tick every unfinished sender may send its next new PSN if it is within ``window`` of the
    cumulative ACK; a packet is lost with probability ``loss``, sent twice with probability
    ``dup`` and delayed by a uniform 1..``max_delay`` ticks (which reorders it). A NACK makes the
    sender resend that PSN; ``rto`` ticks without progress make it resend its whole window.
    Responses are not lost. Deterministic for a given ``seed``.
    """
    if packets_per_conn < 1:
        raise UsageError(f"packets_per_conn must be >= 1, not {packets_per_conn}")
    rng = random.Random(seed)
    M = 1 << p.psn_bits
    W = window or max(2, p.window_psns // 2)
    eng = MeloEngineModel(p)
    starts = [rng.randrange(M) if random_starts else 0 for _ in range(p.n_conns)]
    events: list[Event] = []
    for c, s in enumerate(starts):
        eng.open_connection(c, s)
        events.append((c, s, True))
    una = [0] * p.n_conns        # relative to start
    nxt = [0] * p.n_conns
    last_progress = [0] * p.n_conns
    net: list[tuple[int, float, int, int]] = []
    t = 0

    def send(c, x):
        if rng.random() < loss:
            return
        for _ in range(2 if rng.random() < dup else 1):
            heapq.heappush(net, (t + rng.randint(1, max_delay), rng.random(), c, x))

    while any(u < packets_per_conn for u in una):
        t += 1
        for c in range(p.n_conns):
            if una[c] >= packets_per_conn:
                continue
            if nxt[c] < min(packets_per_conn, una[c] + W) and rng.random() < 0.7:
                send(c, nxt[c])
                nxt[c] += 1
            if t - last_progress[c] > rto:
                last_progress[c] = t
                for x in range(una[c], nxt[c]):
                    send(c, x)
        while net and net[0][0] <= t:
            _, _, c, x = heapq.heappop(net)
            psn = (starts[c] + x) % M
            events.append((c, psn, False))
            r = eng.process(c, psn)
            new_una = (r.response.cum_psn - starts[c]) % M
            if new_una != una[c]:
                una[c] = new_una
                last_progress[c] = t
            if r.response.kind == NACK:
                send(c, x)
            if len(events) > max_events:
                raise RuntimeError(f"traffic did not finish within {max_events} events")
    return events


def in_order_traffic(p: MeloEngineParams, packets_per_conn: int) -> list[Event]:
    """Loss-free traffic: round robin over the connections, every PSN in order, once."""
    return [(c, i, False) for i in range(packets_per_conn) for c in range(p.n_conns)]


def golden_streams(p: MeloEngineParams, events: list[Event]) -> dict:
    """The golden model's outputs for ``events`` as RTL stream words, plus its final state.

    Events outside the contract (``conn >= n_conns``, or ``open`` on a connection holding blocks)
    are counted in ``rejected`` and produce nothing, as in the RTL."""
    eng = MeloEngineModel(p)
    deliv, resp = [], []
    rejected = 0
    costs = []  # cycles each event occupies the engine back to back (the RTL's cycle table)
    for c, psn, op in events:
        if c >= p.n_conns or (op and eng.count[c]):
            rejected += 1  # outside the contract: the RTL drops it and counts it (the model would raise)
            costs.append((False, 2))
            continue
        if op:
            eng.open_connection(c, psn)
            costs.append((False, 2))
            continue
        before = eng.count[c]
        r = eng.process(c, psn)
        deliv.extend(pack_delivery(p, c, x) for x in r.delivered)
        resp.append(pack_response_beat(p, r.response, r.blocks_in_use))
        costs.append((True, packet_cycles(p, eng, c, psn, r.delivered, r.response.kind, before)))
    eng.check_invariants()
    data = [i for i, (is_data, _) in enumerate(costs) if is_data]
    # first data event taken to last response beat with free-flowing streams: every event in
    # between back to back, plus the metadata read wait of the first and the output register
    model_cycles = sum(cy for _, cy in costs[data[0]:data[-1] + 1]) + 3 if data else 0
    return {"events": [pack_event(p, c, psn, op) for c, psn, op in events], "deliv": deliv, "resp": resp,
            "stats": dict(eng.stats), "free_count": eng.free_count, "quiescent": eng.quiescent(),
            "data_events": len(resp), "rejected": rejected, "model_cycles": model_cycles}


def run_melo_engine(p: MeloEngineParams, events: list[Event], *, p_idle: float = 0.0, p_stall_d: float = 0.0,
                    p_stall_r: float = 0.0, seed: int = 1, golden: dict | None = None,
                    test_dir: str | os.PathLike | None = None, sim: str | None = None,
                    waves: bool | None = None) -> runner.SimResult:
    """Simulate ``hwcosim.hdl.melo.MeloEngineRTL(p)`` on ``events`` and compare with the golden model.

    ``golden`` (default :func:`golden_streams`) holds the expected words; every released-PSN word,
    every response word (kind, conn, cumulative PSN, PSN, pool occupancy) and the final counters
    and status ports are checked inside the testbench. Raises :class:`hwcosim.cosim.flow.runner.SimFailure`
    on a mismatch. Metrics: ``cycles`` (first data event taken to last response), ``pkts_per_cycle``
    and the DUT's counters.
    """
    from hwcosim.hdl.melo import MeloEngineRTL as RTL

    g = golden if golden is not None else golden_streams(p, events)
    return runner.run(
        RTL(p), "melo_engine", "hwcosim.cosim.designs.melo.tb_engine",
        inputs={"params": asdict(p), "p_idle": p_idle, "p_stall_d": p_stall_d, "p_stall_r": p_stall_r,
                "seed": seed, **g},
        test_dir=test_dir, sim=sim, waves=waves)


# ---- benchmark ------------------------------------------------------------------------------------
BENCH_CONFIGS = [
    # name, params, packets per connection
    ("16c-bb16-pool16", MeloEngineParams(n_conns=16, psn_bits=24, block_bits=16, pool_blocks=16,
                                         max_blocks_per_conn=4), 60),
    ("16c-bb64-pool8", MeloEngineParams(n_conns=16, psn_bits=24, block_bits=64, pool_blocks=8,
                                        max_blocks_per_conn=2), 60),
    ("64c-bb32-pool32", MeloEngineParams(n_conns=64, psn_bits=24, block_bits=32, pool_blocks=32,
                                         max_blocks_per_conn=4), 30),
    ("256c-bb64-pool64", MeloEngineParams(n_conns=256, psn_bits=24, block_bits=64, pool_blocks=64,
                                          max_blocks_per_conn=4), 12),
]


def _full_bitmap_bits(p: MeloEngineParams) -> int:
    """Per-connection state of selective repeat with a private bitmap of the same window
    (IRN-style): epsn + a window_psns-bit bitmap + an out-of-order count."""
    return p.psn_bits + p.window_psns + p.ooo_bits


def bench_melo_engine(out_dir: Path, quick: bool = False) -> dict:
    """Table over configurations: measured packets/cycle (lossy and loss-free traffic, free-flowing
    streams), memory bits per connection against private full bitmaps, Verilog lines and a Yosys
    UltraScale+ estimate. Writes ``melo_engine.json`` to ``out_dir``."""
    from hwcosim.cosim.flow.synth import SynthError, synthesize
    from hwcosim.hdl.melo import MeloEngineRTL as RTL
    from hwcosim.models.atomic import write_text
    from rich.table import Table

    out_dir = Path(out_dir)
    configs = BENCH_CONFIGS[:2] if quick else BENCH_CONFIGS
    rows = []
    for name, p, n_pkts in configs:
        t0 = time.monotonic()
        rec: dict = {"config": name, **asdict(p)}
        lossy = lossy_traffic(p, n_pkts // 2 if quick else n_pkts, loss=0.05, dup=0.03, seed=7)
        g = golden_streams(p, lossy)
        res = run_melo_engine(p, lossy, golden=g, seed=3)
        mt = res.metrics
        rec.update({"lossy_packets": g["data_events"], "lossy_cycles": mt["cycles"],
                    "lossy_pkts_per_cycle": mt["pkts_per_cycle"], "nack_pool": g["stats"]["nack_pool"],
                    "peak_blocks": g["stats"]["peak_blocks"]})
        ino = in_order_traffic(p, 4)
        mt2 = run_melo_engine(p, ino, seed=4).metrics
        rec.update({"in_order_pkts_per_cycle": mt2["pkts_per_cycle"]})
        rec.update({"on_chip_bits": p.on_chip_bits, "bits_per_conn": p.on_chip_bits / p.n_conns,
                    "metadata_bits_per_conn": p.metadata_bits,
                    "full_bitmap_bits_per_conn": _full_bitmap_bits(p),
                    "memory_vs_full_bitmap": p.on_chip_bits / (p.n_conns * _full_bitmap_bits(p))})
        verilog = runner.to_verilog(RTL(p), "melo_engine")
        rec["verilog_lines"] = len(verilog.splitlines())
        write_text(out_dir / f"melo_engine_{name}.v", verilog)
        try:
            rep = synthesize(verilog, "melo_engine", "xcup", out_dir=out_dir / f"synth_{name}")
            rec["resources_xcup"] = rep["resources"]
        except SynthError as exc:  # report, do not hide
            rec["resources_xcup"] = {"error": str(exc)[:300]}
        rec["seconds"] = round(time.monotonic() - t0, 1)
        rows.append(rec)
    out = {"design": "melo_engine", "simulator": res.sim,
           "traffic": "lossy: loss 5%, dup 3%, delay 1..20 ticks, NACK/timeout retransmission; in-order: round robin",
           "note": "resources are Yosys estimates (synth_xilinx -family xcup), not vendor place-and-route",
           "results": rows}
    write_text(out_dir / "melo_engine.json", json.dumps(out, indent=2) + "\n")
    t = Table(title="MELO receiver engine (RTL): throughput, memory, resources")
    for col in ("config", "lossy pkt/cyc", "in-order pkt/cyc", "bits/conn", "bitmap bits/conn",
                "LUT", "FF", "BRAM", "LUTRAM"):
        t.add_column(col, justify="right")
    for r in rows:
        rs = r["resources_xcup"]
        t.add_row(r["config"], f"{r['lossy_pkts_per_cycle']:.3f}", f"{r['in_order_pkts_per_cycle']:.3f}",
                  f"{r['bits_per_conn']:.1f}", str(r["full_bitmap_bits_per_conn"]),
                  *(str(rs.get(k, "-")) for k in ("LUT", "FF", "BRAM", "LUTRAM")))
    show(t)
    return out
