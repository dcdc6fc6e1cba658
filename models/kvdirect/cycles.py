"""Cycle model of the KV-Direct RTL pipeline: the reservation station's entries *and* slots.

:func:`hwcosim.models.kvdirect.rtl_model.predict_ops_per_cycle` gives steady-state bounds (clock, memory
port, Little's law on reads, same-bucket chains). On a short run with a small dependency table it
overestimates the RTL by 1.5-4.5x (the ``kvdirect_rs`` sweep, 400 operations): it ignores
``rs_slots`` (buckets that share a slot are serialised, each op of such a chain paying a full
memory round trip, plus the write-back of its predecessor first), it lets forwarded operations
free their reservation-station entries as if they were not waiting for their chain head, and
it has no fill and drain of the run. This module replays the pipeline's documented mechanism
(:mod:`hwcosim.hdl.kvdirect.pipeline`) cycle by cycle, as a transaction-level model, so a sweep can set
the RTL's measured cycles against a model that includes those effects:

- input: one operation per cycle while the front stages advance (:data:`FRONT_STAGES`: the
  five hash stages and the dispatch stage; they stall while the dispatch stage holds an
  operation and no entry is free);
- dispatch: the free list's head entry (entries are reused in the order they were freed); if
  the operation's slot (the low ``log2(rs_slots)`` bits of the bucket) has a live chain tail,
  the operation is appended to that chain, else it queues its bucket read (new-heads FIFO). A
  tail that retires in this very cycle takes no successor: the operation heads a new chain. (The
  RTL finds the tail by comparing the slot with every live entry; the model keeps a table of
  each slot's latest entry, which names the same tail: the two are equivalent);
- memory port: one request per cycle, write-backs first, then reads of chain successors, then
  reads of new heads; reads are refused while ``outstanding`` reads are in flight (the
  memory's ``ready`` drops, holding whatever request is offered); data return ``latency``
  cycles after the request, one response per cycle, in order;
- execute: a pipeline of ``EX_STAGES`` (4) stages that never stalls; an operation issues (a
  read response, or a forwarded successor first) only while the response and write-back FIFOs
  have room for every operation in the stages. When an operation retires, if its chain
  successor is on the same bucket and forwarding is on, the successor issues next cycle on the
  new bucket; otherwise the bucket is written back (if any operation of the run changed it: the
  golden store's write count) and the successor, if any, queues its own read;
- a response leaves one cycle after it retires.

The number it returns is the testbench's: cycles from the first accepted request to the last
response beat, inclusive. Idle/stall traffic and read jitter are not modelled (the sweep's
defaults have none). What the model still leaves out is written where the sweep reports it.
"""

from __future__ import annotations

from collections import deque

from hwcosim.models.errors import UsageError
from hwcosim.models.kvdirect.rtl_model import (
    EX_STAGES,
    FRONT_STAGES,
    PipelineParams,
    Request,
    RTLStore,
    bucket_of,
    execute,
)

__all__ = ["simulate_cycles", "EX_STAGES", "FRONT_STAGES"]


def simulate_cycles(params: PipelineParams, reqs: list[Request], latency: int, outstanding: int,
                    forward: bool = True, max_cycles: int | None = None) -> dict:
    """Cycles of the RTL pipeline on ``reqs`` (module docstring for the mechanism).

    Parameters
    ----------
    params : the pipeline (``entries``, ``rs_slots``, ``n_buckets``, FIFO depths)
    reqs : operations in the order they are offered, one per cycle
    latency : memory read latency in cycles (request accepted -> data offered)
    outstanding : reads in flight the memory accepts (the testbench passes it as ``max_reads``)
    forward : the pipeline's ``forward_en``

    Returns
    -------
    dict with ``cycles`` (first accept to last response beat, inclusive), ``ops_per_cycle``,
    ``mem_reads``, ``mem_writes`` (including write-backs still queued at the last beat), ``forwarded``,
    ``chained`` (ops that found their slot busy),
    ``stall_full`` (cycles an op waited for a free entry).

    Raises
    ------
    ValueError
        ``latency`` or ``outstanding`` below 1, or an empty ``reqs``.
    RuntimeError
        The model did not finish in ``max_cycles`` (default: generous for the workload).
    """
    if latency < 1 or outstanding < 1:
        raise UsageError(f"latency and outstanding must be >= 1, not {latency} and {outstanding}")
    n = len(reqs)
    if n == 0:
        raise UsageError("no operations to model; pass at least one request")
    store = RTLStore(params)
    writes = []
    for r in reqs:  # whether each op changes its bucket, in chain order (= arrival order per bucket)
        execute(store, r)
        writes.append(store.last.writes > 0)
    bkt = [bucket_of(r.key, params.n_buckets) for r in reqs]
    N, S = params.entries, params.rs_slots
    wf_depth, rf_depth = params.write_fifo_depth, params.resp_fifo_depth
    max_cycles = max_cycles or 200 * n + 50 * latency + 1000

    stages: list[int | None] = [None] * FRONT_STAGES  # op index in the front stages (the last: dispatch)
    nxt_in = 0
    live: list[int | None] = [None] * N             # entry -> op index
    free: deque[int] = deque(range(N))              # free entries, in the order they were freed
    nxt: list[int | None] = [None] * N              # entry -> successor entry
    tails: list[int | None] = [None] * S            # slot -> entry (stale until overwritten, as in RAM)
    dq: deque[int] = deque()                        # new chain heads to read (entries)
    xq: deque[int] = deque()                        # chain successors to read
    wf = 0                                          # write-backs queued
    rf: deque[int] = deque()                        # responses queued (op index)
    mem: deque[tuple[int, int]] = deque()           # (due cycle, entry) of reads, in order
    reads_out = 0
    held: str | None = None
    same: list[bool] = [False] * N                  # entry -> its successor is on the same bucket
    pipe: list[tuple[int, bool] | None] = [None] * EX_STAGES  # (entry, dirty) in execute stages x1..x4
    x4_next: tuple[int | None, bool] = (None, False)  # x4's successor entry and same-bucket flag
    first_in = last_out = None
    done = 0
    stats = {"mem_reads": 0, "mem_writes": 0, "forwarded": 0, "chained": 0, "stall_full": 0}

    for now in range(max_cycles):
        # -- combinational view of this cycle, from the registered state ------------------------
        ready = reads_out < outstanding                    # memory ready (reads_out == its count)
        cur = mem[0][1] if mem and mem[0][0] <= now else None
        d_op = stages[-1]
        disp = d_op is not None and bool(free)
        if d_op is not None and not free:
            stats["stall_full"] += 1
        e_new = free[0] if disp else None             # the free list's head
        busy, t = False, None
        if disp:
            slot = bkt[d_op] % S
            t = tails[slot]
            busy = t is not None and live[t] is not None and bkt[live[t]] % S == slot
        x4 = pipe[-1]
        if disp and busy and x4 is not None and t == x4[0]:
            busy = False                                 # the retiring op takes no new successor
        n_in = sum(x is not None for x in pipe)
        room = len(rf) + n_in < rf_depth and wf + n_in < wf_depth
        fwd_want = x4 is not None and x4_next[0] is not None and x4_next[1] and forward
        fwd = fwd_want and room
        need_wr = x4 is not None and not fwd and (x4[1] or writes[live[x4[0]]])
        rsp_take = room and not fwd_want
        rd_ok = reads_out < outstanding
        if held is not None:
            sel = held
        elif wf:
            sel = "w"
        elif rd_ok and xq:
            sel = "x"
        elif rd_ok and dq:
            sel = "d"
        else:
            sel = None
        accept_in = stages[-1] is None or disp           # i.ready (adv)
        # -- clock edge -------------------------------------------------------------------------
        if rf:                                           # the sink takes one response per cycle
            rf.popleft()
            done += 1
            last_out = now
            if done == n:
                break
        if sel is not None and ready:
            if sel == "w":
                wf -= 1
                stats["mem_writes"] += 1
            else:
                e = (xq if sel == "x" else dq).popleft()
                mem.append((now + latency, e))
                reads_out += 1
                stats["mem_reads"] += 1
            held = None
        else:
            held = sel
        if cur is not None and rsp_take:
            mem.popleft()
            reads_out -= 1
        if disp:
            free.popleft()
            live[e_new] = d_op
            nxt[e_new] = None
            slot = bkt[d_op] % S
            if busy:
                nxt[t] = e_new
                same[t] = bkt[d_op] == bkt[live[t]]
                stats["chained"] += 1
            else:
                dq.append(e_new)
            tails[slot] = e_new
        new_x1 = (cur, False) if cur is not None and rsp_take else None
        if x4 is not None:
            op = live[x4[0]]
            rf.append(op)
            if need_wr:
                wf += 1
            live[x4[0]] = None
            free.append(x4[0])
            if fwd:
                stats["forwarded"] += 1
                new_x1 = (x4_next[0], x4[1] or writes[op])
            elif x4_next[0] is not None:
                xq.append(x4_next[0])
        x3 = pipe[-2]
        x4_next = (nxt[x3[0]], same[x3[0]]) if x3 is not None else (None, False)
        pipe = [new_x1] + pipe[:-1]
        if accept_in:
            if nxt_in < n:
                first_in = now if first_in is None else first_in
                stages = [nxt_in, *stages[:-1]]
                nxt_in += 1
            else:
                stages = [None, *stages[:-1]]
    else:
        raise RuntimeError(f"the KV-Direct cycle model did not finish {n} operations in {max_cycles} cycles")
    stats["mem_writes"] += wf  # write-backs still queued after the last response beat
    cycles = last_out - first_in + 1
    return {"cycles": cycles, "ops_per_cycle": n / cycles, **stats}
