"""Cycle model of the MELO receiver engine RTL (:class:`hwcosim.hdl.melo.MeloEngineRTL`).

The RTL's docstring gives its cycle table: the cycles each event occupies the engine back to back.
:func:`packet_cycles` replays that table from the golden model's state
(:class:`hwcosim.models.melo.engine.MeloEngineModel` after the packet), :func:`model_cycles` adds the
fixed latency from accepting a packet on an idle engine to its response beat. The stimulus and
golden streams (``hwcosim.cosim.designs.melo.engine.golden_streams``) and the bridge's model device
(``hwcosim.cosim.designs.melo.bridge.MeloModelDevice``) both time the engine with these.
"""

from __future__ import annotations

from .engine import ACK, DUP, SACK, MeloEngineModel, MeloEngineParams

__all__ = ["packet_cycles", "model_cycles"]


def packet_cycles(p: MeloEngineParams, eng: MeloEngineModel, conn: int, psn: int, delivered, kind: int,
                  count_before: int) -> int:
    """Cycles one data packet occupies the RTL engine back to back (its row of the RTL's cycle table).

    ``eng`` is the golden model *after* the packet, ``count_before`` the connection's chain length
    before it. ``2`` for an in-order packet on a connection without blocks, a DUP found by the PSN
    compare (behind ``epsn``) or a NACK; ``5 + 2k`` for a SACK into chain position ``k`` already
    held, or a DUP found in its bitmap there; ``3 + 3n`` for a SACK that allocates ``n`` blocks; for
    an in-order packet with a buffered run, the RTL's walk of the run replayed from the released
    PSNs (per block visited: a scan, a bitmap read wait, one cycle per released PSN and one to find
    the end of the run inside a block; two more when the head block is freed, three when the run
    goes on in the next block). Free-flowing
    outputs assumed (no ``d`` or ``r`` stalls).
    """
    mask = (1 << p.psn_bits) - 1
    lb = p.block_shift
    if kind == ACK:
        if not count_before:
            return 2
        bb = p.block_bits
        e, left, cnt = (delivered[0] + 1) & mask, len(delivered) - 1, count_before
        c = 2                                           # META, DECIDE (releases the packet itself)
        while True:
            c += 1                                      # SCAN
            if e % bb == 0:
                c += 2                                  # free the head block, read its next pointer
                cnt -= 1
                if cnt == 0:
                    break
                c += 1                                  # read the new head's bitmap (NEXTW)
            c += 1                                      # bitmap read wait
            off = e % bb
            r = min(left, bb - off)
            c += r                                      # one released PSN per cycle
            left -= r
            e = (e + r) & mask
            if off + r < bb:
                c += 1                                  # the run ends inside this block
                break
        return c + 1                                    # FINISH
    epsn = eng.epsn[conn]                               # unchanged by a SACK, DUP or NACK
    k = ((psn >> lb) - (epsn >> lb)) & ((1 << (p.psn_bits - lb)) - 1)
    if kind == SACK:
        n_new = eng.count[conn] - count_before
        return 3 + 3 * n_new if n_new > 0 else 5 + 2 * k
    if kind == DUP and ((psn - epsn) & mask) < 1 << (p.psn_bits - 1):
        return 5 + 2 * k                                # ahead of epsn: found set in its bitmap
    return 2


def model_cycles(p: MeloEngineParams, eng: MeloEngineModel, conn: int, psn: int, delivered, kind: int,
                 count_before: int) -> int:
    """Cycles from accepting a packet on an idle engine to its response beat.

    :func:`packet_cycles` (the RTL's cycle table, META to the write-back) plus three: the accept
    cycle, the metadata read wait (MWAIT) and the output register. Free-flowing outputs assumed.
    """
    return packet_cycles(p, eng, conn, psn, delivered, kind, count_before) + 3
