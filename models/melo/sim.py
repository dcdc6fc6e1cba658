"""Packet-level discrete-event simulator for hardware loss recovery (MELO, APNet 2017).

Compares three receiver/sender loss-recovery schemes of a hardware (RDMA-style) transport, as in
Lu et al., "Memory Efficient Loss Recovery for Hardware-based Transport in Datacenter", APNet
2017:

- ``gbn``: go-back-N as in RoCE. The receiver keeps only the expected PSN; an out-of-order packet
  is discarded and triggers *one* NACK per expected PSN; the sender rewinds to the NACKed PSN.
- ``sr``: selective repeat with a full per-connection reorder bitmap of one window (IRN, Mittal
  et al., SIGCOMM 2018: BDP-sized bitmaps). Out-of-order packets are kept (data off chip) and
  SACKed; the sender retransmits the holes below a SACKed PSN once, then relies on the timeout.
- ``melo``: the same sender; the receiver is :class:`hwcosim.models.melo.engine.MeloEngineModel` (bitmaps from
  a shared pool of blocks; a packet that does not fit is dropped and NACKed individually).

Fabric model (ours; the paper's topology is not reproduced)
-----------------------------------------------------------
``n_conns`` connections share one bottleneck of ``link_gbps``: a sender NIC serving its
connections round-robin, one MTU packet per *slot* (the serialization time, the time unit of the
simulator), across a fabric with a fixed one-way delay of ``rtt_us / 2`` and no queueing beyond
the NIC. Data packets are lost i.i.d. or in bursts (Gilbert-Elliott, :class:`LossModel`), may be
reordered (a fraction gets an extra random delay) and responses (ACK/SACK/NACK) may be lost
i.i.d.. Each connection may have ``window_pkts`` packets outstanding (default two BDPs; IRN caps
in-flight packets at one BDP, see ``window_pkts`` for why we do not); there is no congestion
control, as in the paper's loss-recovery comparison. A connection's timeout (``rto_us``, default
100 us: IRN's RTO_low) fires when it has outstanding packets and its cumulative ACK has not
advanced for an RTO.

Work is either *backlogged* (every connection always has data: goodput over a fixed duration) or
*flows* (Poisson arrivals of flows with sizes from a datacenter CDF, each on a uniformly random
connection; flows on one connection are sent in order, like messages on a QP). FCT runs from a
flow's arrival to the delivery of its last packet at the receiver.

Correctness check
-----------------
Independently of the receiver under test, the simulator checks every PSN the receiver releases:
it must be the next PSN of that connection (exactly once, in order), or :class:`DeliveryError`
is raised; at the end of a *flows* run every byte of every flow must have been delivered.

Performance: a heap of event times with per-slot buckets, lean Python per packet, loss/reorder
decisions drawn in numpy chunks; :func:`simulate` reports its own speed (``wall_s``), and the
figures recorded are in ``CHANGELOG.md``.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from dataclasses import asdict, dataclass, field

import numpy as np
from hwcosim.models.errors import CheckFailed, UsageError

from .engine import ACK, DUP, NACK, SACK, MeloEngineModel, MeloEngineParams
from .workloads import WORKLOADS, poisson_flows

__all__ = ["LossModel", "SimParams", "LossSimResult", "DeliveryError", "simulate", "SCHEMES"]

SCHEMES = ("gbn", "sr", "melo")
_BIG = 1 << 62


class DeliveryError(CheckFailed, AssertionError):
    """A receiver released a PSN out of order, twice, or not at all."""


@dataclass(frozen=True)
class LossModel:
    """Packet loss on the data path.

    Parameters
    ----------
    rate : float
        Long-run loss ratio, 0 <= rate < 0.5.
    mean_burst : float
        Mean length (packets) of a loss burst. 1 gives i.i.d. Bernoulli loss; > 1 gives a
        Gilbert-Elliott chain (Gilbert 1960; Elliott 1963) with a Good state that loses nothing
        and a Bad state that loses everything, P(Bad -> Good) = 1 / mean_burst and
        P(Good -> Bad) chosen so that the stationary Bad probability equals ``rate``.
    """

    rate: float = 0.0
    mean_burst: float = 1.0

    def __post_init__(self):
        if not 0.0 <= self.rate < 0.5:
            raise UsageError(f"loss rate must be in [0, 0.5), not {self.rate}")
        if not self.mean_burst >= 1.0:
            raise UsageError(f"mean_burst must be >= 1 packet (1 = i.i.d.), not {self.mean_burst}")

    @property
    def p_bg(self) -> float:
        return 1.0 / self.mean_burst

    @property
    def p_gb(self) -> float:
        return self.rate * self.p_bg / (1.0 - self.rate)


class _LossStream:
    """Draws loss decisions in numpy chunks; ``next()`` is one Python list index."""

    def __init__(self, model: LossModel, rng: np.random.Generator, chunk: int = 1 << 15):
        self.m, self.rng, self.chunk = model, rng, chunk
        self.buf: list = []
        self.i = 0
        self._carry = np.zeros(0, dtype=bool)
        self._bad = bool(rng.random() < model.rate) if model.mean_burst > 1 else False

    def refill(self) -> None:
        m, n = self.m, self.chunk
        if m.rate == 0.0:
            arr = np.zeros(n, dtype=bool)
        elif m.mean_burst == 1.0:
            arr = self.rng.random(n) < m.rate
        else:
            parts, have = [self._carry], len(self._carry)
            while have < n:
                k = max(16, int(n * m.p_gb) + 16)
                good = self.rng.geometric(m.p_gb, k)
                bad = self.rng.geometric(m.p_bg, k)
                lens = np.empty(2 * k, dtype=np.int64)
                if self._bad:  # continue a burst first
                    lens[0::2], lens[1::2] = bad, good
                    vals = np.tile(np.array([True, False]), k)
                else:
                    lens[0::2], lens[1::2] = good, bad
                    vals = np.tile(np.array([False, True]), k)
                seg = np.repeat(vals, lens)
                parts.append(seg)
                have += len(seg)
            allv = np.concatenate(parts)
            arr, self._carry = allv[:n], allv[n:]
        self.buf = arr.tolist()
        self.i = 0


@dataclass(frozen=True)
class SimParams:
    """One simulation run.

    Parameters
    ----------
    scheme : str
        ``"gbn"``, ``"sr"`` or ``"melo"``.
    n_conns : int
        Connections, 1 .. 100,000.
    link_gbps : float
        Bottleneck rate.
    mtu_bytes : int
        Payload bytes per packet (headers are not modelled).
    rtt_us : float
        Base round-trip time (propagation and processing, no queueing).
    loss : LossModel
        Data-packet loss.
    ack_loss : float
        I.i.d. loss ratio of responses, 0 <= ack_loss < 0.5.
    reorder_prob : float
        Fraction of data packets delayed by an extra uniform 1 .. ``reorder_us`` microseconds.
    reorder_us : float
    window_pkts : int or None
        Outstanding packets per connection; None = two BDPs. A hole stays open about two RTTs
        (one to detect it through a SACK, one for the retransmission to be ACKed), so with a
        one-BDP window (IRN's cap) a lone connection stalls: 66 % goodput at 1 % i.i.d. loss in
        this model, against 98 % with two BDPs. The full bitmap of ``sr`` is one window.
    rto_us : float
        Retransmission timeout.
    rack : bool
        SR/MELO senders: detect a lost *retransmission* when a response arrives for a packet
        sent after it (transmission order echoed in the response, as TCP RACK, RFC 8985, does
        with timestamps) instead of waiting for the timeout. Go-back-N is RoCE as specified:
        one NACK per expected PSN, a lost retransmission costs a timeout.
    block_bits, pool_blocks, max_blocks_per_conn, psn_bits : int or None
        MELO engine parameters; ``pool_blocks=None`` = 8 * BDP bits rounded up to blocks,
        ``max_blocks_per_conn=None`` = enough blocks to cover the window at any alignment.
    workload : str
        ``"backlogged"``, ``"websearch"`` or ``"datamining"``.
    duration_us : float
        Backlogged runs: simulated time. Flow runs: give up (result incomplete) after this.
    n_flows : int
        Flow runs: number of flows.
    load : float
        Flow runs: offered load as a fraction of the link.
    max_flow_bytes : float or None
        Flow runs: cap on a flow's size (a simulator limit; reported).
    seed : int
    """

    scheme: str = "melo"
    n_conns: int = 16
    link_gbps: float = 100.0
    mtu_bytes: int = 1024
    rtt_us: float = 8.0
    loss: LossModel = field(default_factory=LossModel)
    ack_loss: float = 0.0
    reorder_prob: float = 0.0
    reorder_us: float = 2.0
    window_pkts: int | None = None
    rto_us: float = 100.0
    rack: bool = True
    block_bits: int = 32
    pool_blocks: int | None = None
    max_blocks_per_conn: int | None = None
    psn_bits: int = 24
    workload: str = "backlogged"
    duration_us: float = 2000.0
    n_flows: int = 200
    load: float = 0.5
    max_flow_bytes: float | None = None
    seed: int = 0

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise UsageError(f"scheme must be one of {SCHEMES}, not {self.scheme!r}")
        if not isinstance(self.n_conns, int) or not 1 <= self.n_conns <= 100_000:
            raise UsageError(f"n_conns must be an int in 1..100000, not {self.n_conns!r}")
        for name in ("link_gbps", "rtt_us", "rto_us", "duration_us", "reorder_us"):
            if not getattr(self, name) > 0:
                raise UsageError(f"{name} must be > 0, not {getattr(self, name)}")
        if not isinstance(self.mtu_bytes, int) or not 64 <= self.mtu_bytes <= 65536:
            raise UsageError(f"mtu_bytes must be an int in 64..65536, not {self.mtu_bytes!r}")
        if not isinstance(self.loss, LossModel):
            raise UsageError(f"loss must be a LossModel, not {type(self.loss).__name__}")
        if not 0.0 <= self.ack_loss < 0.5:
            raise UsageError(f"ack_loss must be in [0, 0.5), not {self.ack_loss}")
        if not 0.0 <= self.reorder_prob <= 1.0:
            raise UsageError(f"reorder_prob must be in [0, 1], not {self.reorder_prob}")
        if self.window_pkts is not None and not (isinstance(self.window_pkts, int) and self.window_pkts >= 1):
            raise UsageError(f"window_pkts must be a positive int or None, not {self.window_pkts!r}")
        if self.workload != "backlogged" and self.workload not in WORKLOADS:
            raise UsageError(f"workload must be 'backlogged' or one of {sorted(WORKLOADS)}, not {self.workload!r}")
        if not isinstance(self.n_flows, int) or self.n_flows < 1:
            raise UsageError(f"n_flows must be a positive int, not {self.n_flows!r}")
        if not 0.0 < self.load <= 1.0:
            raise UsageError(f"load must be in (0, 1], not {self.load}")
        if self.window > self.engine_params().window_psns - self.block_bits + 1:
            raise UsageError(
                f"max_blocks_per_conn={self.max_blocks_per_conn} blocks of {self.block_bits} bits cannot "
                f"cover a window of {self.window} packets at every alignment; raise it or leave it None"
            )

    # ---- derived ----------------------------------------------------------------------------
    @property
    def slot_ns(self) -> float:
        """Serialization time of one packet: the simulator's time unit."""
        return self.mtu_bytes * 8.0 / self.link_gbps

    @property
    def one_way_slots(self) -> int:
        return max(1, round(self.rtt_us * 1e3 / 2.0 / self.slot_ns))

    @property
    def bdp_pkts(self) -> int:
        return max(1, math.ceil(self.rtt_us * 1e3 / self.slot_ns))

    @property
    def window(self) -> int:
        return self.window_pkts if self.window_pkts is not None else 2 * self.bdp_pkts

    def engine_params(self) -> MeloEngineParams:
        bb = self.block_bits
        mb = self.max_blocks_per_conn
        if mb is None:
            mb = (self.window - 1 + bb - 1) // bb + 1
        pool = self.pool_blocks if self.pool_blocks is not None else math.ceil(8 * self.bdp_pkts / bb)
        return MeloEngineParams(
            n_conns=self.n_conns,
            psn_bits=self.psn_bits,
            block_bits=bb,
            pool_blocks=pool,
            max_blocks_per_conn=mb,
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["loss"] = asdict(self.loss)
        return d


@dataclass
class LossSimResult:
    """Outcome of one run (all times in microseconds, memory in bytes per connection)."""

    params: dict
    sim_time_us: float
    goodput_gbps: float
    utilization: float
    delivered_pkts: int
    sent_pkts: int
    retx_pkts: int
    timeouts: int
    complete: bool
    fct_us: list
    fct_p50_us: float
    fct_p99_us: float
    fct_p999_us: float
    mem_avg_B: float
    mem_peak_B: float
    mem_provisioned_B: float
    mem_peak_conn_B: float
    melo_nack_pool: int
    melo_peak_blocks: int
    wall_s: float

    def summary(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("fct_us", "params")}
        d["scheme"] = self.params["scheme"]
        return d


# ---- receivers (each returns (delivered PSNs, kind, cum PSN) or None for no response) --------
class _GBNReceiver:
    def __init__(self, n):
        self.e = [0] * n
        self.nacked = [False] * n

    def rx(self, c, psn):
        e = self.e[c]
        if psn == e:
            self.e[c] = e + 1
            self.nacked[c] = False
            return [e], ACK, e + 1
        if psn < e:
            return [], DUP, e
        if self.nacked[c]:
            return None
        self.nacked[c] = True
        return [], NACK, e


class _SRReceiver:
    def __init__(self, n, window):
        self.e = [0] * n
        self.buf = [set() for _ in range(n)]
        self.w = window

    def rx(self, c, psn):
        e = self.e[c]
        if psn == e:
            out = [e]
            e += 1
            b = self.buf[c]
            while e in b:
                b.remove(e)
                out.append(e)
                e += 1
            self.e[c] = e
            return out, ACK, e
        b = self.buf[c]
        if psn < e or psn in b:
            return [], DUP, e
        if psn - e >= self.w:
            return [], NACK, e
        b.add(psn)
        return [], SACK, e


class _MeloReceiver:
    """Adapter: unbounded PSNs in the simulator, ``psn_bits`` PSNs in the engine."""

    def __init__(self, params: MeloEngineParams):
        self.eng = MeloEngineModel(params)
        self.mask = (1 << params.psn_bits) - 1
        self.base = [0] * params.n_conns  # unbounded PSN of the engine's epsn

    def rx(self, c, psn):
        delivered, kind = self.eng._process(c, psn & self.mask)
        n = len(delivered)
        if n:
            self.base[c] += n
        # delivered PSNs are returned masked; the simulator checks them masked
        return delivered, kind, self.base[c]


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if len(a) else float("nan")


def simulate(p: SimParams, *, check: bool = True) -> LossSimResult:
    """Run one simulation.

    Parameters
    ----------
    p : SimParams
    check : bool
        Verify in-order exactly-once delivery (always on in the study; off only to measure cost).

    Returns
    -------
    LossSimResult

    Raises
    ------
    DeliveryError
        If a receiver releases a PSN out of order or twice, or a completed flow run left bytes
        undelivered.
    """
    t0 = time.perf_counter()
    ss = np.random.SeedSequence(p.seed)
    r_loss, r_reo, r_ack, r_flow = (np.random.default_rng(s) for s in ss.spawn(4))
    N, W = p.n_conns, p.window
    slot_ns = p.slot_ns
    d1 = p.one_way_slots
    rto = max(1, round(p.rto_us * 1e3 / slot_ns))
    reo_max = max(1, round(p.reorder_us * 1e3 / slot_ns))
    scheme = p.scheme
    gbn = scheme == "gbn"

    # ---- work ----
    flows = p.workload != "backlogged"
    if flows:
        arr_ns, sizes = poisson_flows(WORKLOADS[p.workload], p.n_flows, p.load, p.link_gbps, r_flow, p.max_flow_bytes)
        f_arr = np.floor(arr_ns / slot_ns).astype(np.int64).tolist()
        f_pkts = ((sizes + p.mtu_bytes - 1) // p.mtu_bytes).astype(np.int64).tolist()
        f_conn = r_flow.integers(0, N, p.n_flows).tolist()
        end = [0] * N
        t_end = max(f_arr[-1] + 1, round(p.duration_us * 1e3 / slot_ns))
    else:
        f_arr, f_pkts, f_conn = [], [], []
        end = [_BIG] * N
        t_end = round(p.duration_us * 1e3 / slot_ns)
    fq = [deque() for _ in range(N)]  # per connection: (end_psn, flow index) awaiting delivery
    fct_slots = [-1] * len(f_arr)
    n_flows = len(f_arr)

    # ---- receiver ----
    eparams = p.engine_params()
    if gbn:
        rcv = _GBNReceiver(N)
    elif scheme == "sr":
        rcv = _SRReceiver(N, W)
    else:
        rcv = _MeloReceiver(eparams)
    rx = rcv.rx
    masked = scheme == "melo"
    pmask = (1 << p.psn_bits) - 1
    rnext = [0] * N  # checker: next PSN each connection must release

    # ---- sender state ----
    una = [0] * N
    nxt = [0] * N
    hi = [0] * N  # SR/MELO: holes below hi were already queued once
    retxq = [[] for _ in range(N)]
    inq = [set() for _ in range(N)]
    sacked = [set() for _ in range(N)]
    rack = p.rack and not gbn
    rtxlog = [deque() for _ in range(N)] if rack else []
    last_prog = [0] * N
    timer_on = [False] * N
    in_ready = [False] * N
    ready = deque()

    loss = _LossStream(p.loss, r_loss)
    reo_on = p.reorder_prob > 0
    reo_buf: list = []
    reo_i = 0
    ack_on = p.ack_loss > 0
    ack_buf: list = []
    ack_i = 0

    buckets: dict[int, list] = {}
    times: list[int] = []

    def sched(t, ev):
        b = buckets.get(t)
        if b is None:
            buckets[t] = [ev]
            heapq.heappush(times, t)
        else:
            b.append(ev)

    def can_send(c):
        if retxq[c]:
            return True
        n = nxt[c]
        return n < end[c] and n < una[c] + W

    def wake(c):
        if not in_ready[c] and can_send(c):
            in_ready[c] = True
            ready.append(c)

    sent = retx = timeouts = delivered_pkts = 0
    mem_samples = 0
    blocks_sum = 0
    sample_every = 64
    fi = 0
    done_flows = 0
    t = 0
    if not flows:
        for c in range(N):
            in_ready[c] = True
            ready.append(c)

    while t < t_end:
        # flow arrivals
        while fi < n_flows and f_arr[fi] <= t:
            c = f_conn[fi]
            end[c] += f_pkts[fi]
            fq[c].append((end[c], fi))
            wake(c)
            fi += 1
        evs = buckets.pop(t, None)
        if evs is not None:
            for ev in evs:
                typ = ev[0]
                if typ == 0:  # data packet reaches the receiver
                    c, psn, seq = ev[1], ev[2], ev[3]
                    res = rx(c, psn)
                    if res is None:
                        continue
                    out, kind, cum = res
                    if out:
                        rn = rnext[c]
                        if check:
                            if masked:
                                for x in out:
                                    if x != rn & pmask:
                                        raise DeliveryError(f"conn {c}: released PSN {x}, expected {rn & pmask}")
                                    rn += 1
                            else:
                                for x in out:
                                    if x != rn:
                                        raise DeliveryError(f"conn {c}: released PSN {x}, expected {rn}")
                                    rn += 1
                        else:
                            rn += len(out)
                        if rn > end[c]:
                            raise DeliveryError(f"conn {c}: released PSN {rn - 1} beyond the data sent ({end[c]})")
                        delivered_pkts += rn - rnext[c]
                        rnext[c] = rn
                        q = fq[c]
                        while q and q[0][0] <= rn:
                            fct_slots[q.popleft()[1]] = t
                            done_flows += 1
                    if ack_on:
                        if ack_i >= len(ack_buf):
                            ack_buf = (r_ack.random(1 << 15) < p.ack_loss).tolist()
                            ack_i = 0
                        lost = ack_buf[ack_i]
                        ack_i += 1
                        if lost:
                            continue
                    sched(t + d1, (1, c, kind, cum, psn, seq))
                elif typ == 1:  # response reaches the sender
                    c, kind, cum, psn, seq = ev[1], ev[2], ev[3], ev[4], ev[5]
                    if cum > una[c]:
                        una[c] = cum
                        last_prog[c] = t
                        if cum > nxt[c]:
                            nxt[c] = cum
                        if not gbn and len(sacked[c]) > 2 * W:
                            u = cum
                            sacked[c] = {x for x in sacked[c] if x >= u}
                    if gbn:
                        if kind == NACK and cum >= una[c]:
                            nxt[c] = cum  # rewind
                    elif kind == SACK or kind == NACK:
                        u = una[c]
                        if kind == SACK:
                            sacked[c].add(psn)
                        lo = hi[c] if hi[c] > u else u
                        if psn > lo:
                            s, iq, rq = sacked[c], inq[c], retxq[c]
                            for x in range(lo, psn):
                                if x not in s and x not in iq:
                                    iq.add(x)
                                    heapq.heappush(rq, x)
                            hi[c] = psn
                        if kind == NACK and psn >= u and psn not in inq[c]:
                            inq[c].add(psn)
                            heapq.heappush(retxq[c], psn)
                    if rack and rtxlog[c]:
                        # a response to a packet sent after a retransmission: on a FIFO path
                        # the retransmission (or its response) was lost; send it again
                        lg, u, s, iq = rtxlog[c], una[c], sacked[c], inq[c]
                        while lg and lg[0][0] < seq:
                            x = lg.popleft()[1]
                            if x >= u and x not in s and x not in iq:
                                iq.add(x)
                                heapq.heappush(retxq[c], x)
                    wake(c)
                else:  # timer check
                    c = ev[1]
                    if una[c] >= nxt[c] and not retxq[c]:
                        timer_on[c] = False
                        continue
                    due = last_prog[c] + rto
                    if t < due:
                        sched(due, ev)
                        continue
                    timeouts += 1
                    last_prog[c] = t
                    if gbn:
                        nxt[c] = una[c]
                    else:
                        u, s, iq, rq = una[c], sacked[c], inq[c], retxq[c]
                        for x in range(u, nxt[c]):
                            if x not in s and x not in iq:
                                iq.add(x)
                                heapq.heappush(rq, x)
                        if hi[c] < nxt[c]:
                            hi[c] = nxt[c]
                    sched(t + rto, ev)
                    wake(c)

        # the link sends one packet per slot
        busy = False
        while ready:
            c = ready.popleft()
            psn = -1
            rq = retxq[c]
            while rq:
                x = heapq.heappop(rq)
                inq[c].discard(x)
                if x >= una[c] and x not in sacked[c]:
                    psn = x
                    retx += 1
                    if rack:
                        rtxlog[c].append((sent + 1, x))
                    break
            if psn < 0:
                n = nxt[c]
                if n < end[c] and n < una[c] + W:
                    psn = n
                    nxt[c] = n + 1
                    if gbn:  # hi = highest PSN ever sent + 1
                        if n < hi[c]:
                            retx += 1
                        else:
                            hi[c] = n + 1
                else:
                    in_ready[c] = False
                    continue
            busy = True
            sent += 1
            if not timer_on[c]:
                timer_on[c] = True  # the timer was off: nothing was outstanding until now
                last_prog[c] = t
                sched(t + rto, (2, c))
            if can_send(c):
                ready.append(c)
            else:
                in_ready[c] = False
            if loss.i >= len(loss.buf):
                loss.refill()
            lost = loss.buf[loss.i]
            loss.i += 1
            if not lost:
                delay = d1
                if reo_on:
                    if reo_i >= len(reo_buf):
                        m = r_reo.random(1 << 15) < p.reorder_prob
                        reo_buf = np.where(m, r_reo.integers(1, reo_max + 1, 1 << 15), 0).tolist()
                        reo_i = 0
                    delay += reo_buf[reo_i]
                    reo_i += 1
                sched(t + delay, (0, c, psn, sent))
            break

        if masked and t % sample_every == 0:
            mem_samples += 1
            blocks_sum += rcv.eng.p.pool_blocks - rcv.eng.free_count

        if flows and done_flows == n_flows:
            break
        if busy or ready:
            t += 1
        else:
            while times and times[0] <= t:
                heapq.heappop(times)
            nt = times[0] if times else _BIG
            if fi < n_flows and f_arr[fi] < nt:
                nt = f_arr[fi]
            if nt >= _BIG:
                break
            # sample memory over the skipped idle slots too (occupancy is constant there)
            if masked:
                k = (nt - 1) // sample_every - t // sample_every
                if k > 0:
                    mem_samples += k
                    blocks_sum += k * (rcv.eng.p.pool_blocks - rcv.eng.free_count)
            t = nt

    sim_slots = max(t, 1)
    complete = (not flows) or done_flows == n_flows
    if flows and complete and check:
        for c in range(N):
            if rnext[c] != end[c]:
                raise DeliveryError(f"conn {c}: delivered {rnext[c]} of {end[c]} packets at the end of the run")
        if masked and not rcv.eng.quiescent():
            raise DeliveryError("MELO engine not quiescent after every flow completed (blocks leaked)")

    # ---- metrics ----
    if flows:
        fct = np.array(
            [(fct_slots[i] - f_arr[i]) * slot_ns / 1e3 for i in range(n_flows) if fct_slots[i] >= 0],
            dtype=np.float64,
        )
        good_bytes = float(np.sum(np.asarray(sizes, dtype=np.float64)[np.asarray(fct_slots) >= 0]))
        span = max(1, max((s for s in fct_slots if s >= 0), default=1) - (f_arr[0] if f_arr else 0))
        goodput = good_bytes * 8 / (span * slot_ns)
    else:
        fct = np.zeros(0)
        goodput = delivered_pkts * p.mtu_bytes * 8 / (sim_slots * slot_ns)
    ep = eparams
    if gbn:
        per = (p.psn_bits + 1) / 8  # expected PSN + NACK-sent flag
        mem_avg = mem_peak = mem_prov = mem_conn = per
        nack_pool = peak_blocks = 0
    elif scheme == "sr":
        per = (p.psn_bits + W) / 8  # expected PSN + one window of bitmap
        mem_avg = mem_peak = mem_prov = mem_conn = per
        nack_pool = peak_blocks = 0
    else:
        eng = rcv.eng
        meta = ep.metadata_bits / 8
        blk = ep.block_entry_bits / 8
        avg_blocks = blocks_sum / max(1, mem_samples)
        peak_blocks = eng.stats["peak_blocks"]
        mem_avg = meta + (avg_blocks * blk + ep.allocator_bits / 8) / N
        mem_peak = meta + (peak_blocks * blk + ep.allocator_bits / 8) / N
        mem_prov = ep.on_chip_bits / 8 / N
        mem_conn = meta + ep.max_blocks_per_conn * blk
        nack_pool = eng.stats["nack_pool"]
    return LossSimResult(
        params=p.to_dict(),
        sim_time_us=sim_slots * slot_ns / 1e3,
        goodput_gbps=goodput,
        utilization=goodput / p.link_gbps,
        delivered_pkts=delivered_pkts,
        sent_pkts=sent,
        retx_pkts=retx,
        timeouts=timeouts,
        complete=complete,
        fct_us=fct.tolist(),
        fct_p50_us=_pct(fct, 50),
        fct_p99_us=_pct(fct, 99),
        fct_p999_us=_pct(fct, 99.9),
        mem_avg_B=mem_avg,
        mem_peak_B=mem_peak,
        mem_provisioned_B=mem_prov,
        mem_peak_conn_B=mem_conn,
        melo_nack_pool=nack_pool,
        melo_peak_blocks=peak_blocks,
        wall_s=time.perf_counter() - t0,
    )
