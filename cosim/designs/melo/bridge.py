"""Bridge (a): MELO loss recovery for chosen flows inside a flow-level cluster network.

Scenario
--------
A small Clos (:func:`hwcosim.models.systems.cluster.topology.clos`: one pod, two ToRs, two single-GPU hosts per
ToR, 100 Gb/s NICs, 1 us per switch hop) carries a handful of flows. One link, the NIC
*down* port of the receiving host (``lossy_gpu``), drops data packets with probability ``loss``.
Every flow that crosses that link is *chosen* (or the ones named in ``chosen``): its transfer is
simulated packet by packet, with the receiver's loss recovery done by the MELO engine; all other
flows stay at flow level in a :class:`hwcosim.models.systems.cluster.network.FlowNetwork` (max-min fair).

Coupling of the two levels: a chosen flow also holds a stream in the flow network, so it takes
(and leaves to the others) its max-min share of every link; its sender paces one MTU packet per
``mtu / rate`` seconds at its current max-min rate (the rate is read at each send; a rate change
affects the next gap). A packet reaches the receiver after its serialisation time plus the
path's propagation latency (:meth:`Topology.base_latency`); the response (ACK/SACK/NACK/DUP)
returns after the same latency. Flow-level flows do not see the loss (they do not cross the
lossy link in the default scenario).

Sender (selective repeat, as :mod:`hwcosim.models.melo.sim`): a window of ``window`` packets beyond the
cumulative ACK; a SACK of PSN ``x`` queues the holes below ``x`` once, a NACK queues that PSN, a
timeout of ``rto_us`` without progress queues every unacknowledged PSN. Whether a transmission
is lost is a hash of (seed, flow, PSN, attempt), so both runs of the bridge lose the same
transmissions even when their timing differs.

Receiver: one MELO engine (:class:`hwcosim.models.melo.engine.MeloEngineParams`) holds the receive state
of every chosen flow (flow ``i`` is connection ``i``), as the receiving NIC would for its queue
pairs. It takes one packet at a time; a packet that arrives while it is busy waits.

From a cluster scenario file
----------------------------
:func:`params_from_scenario` (``hwcosim cosim melo --scenario FILE.toml``) derives the scenario from
the same TOML file ``hwcosim cluster run`` reads, through the cluster's parser: the topology is the
file's ``[topology]`` (the cluster's generators, ``topology``), the flows are the DP all-reduce
transfers of one iteration of a job (``[cosim.melo] job``; its ``steps`` on its cluster placement:
every ring hop of every DP group and channel, bytes multiplied by ``[cosim.melo] scale`` to a
packet-simulable size, all starting at 0), the lossy link and its loss probability are a
``[[failures]]`` entry with ``effect = "lossy"`` (its ``at_s``/``restore_s`` are not used: the
bridge simulates one iteration's transfers while the link is lossy) and the seed is the file's.
Paths take ECMP choices hashed from (flow, src, dst) with the seed. Only flows whose path crosses
the lossy link see loss; by default those are the chosen ones.

Devices and time base
---------------------
The engine clock is ``f_clk_mhz`` (default 250 MHz). The **RTL device** is
``hwcosim.hdl.melo.MeloEngineRTL`` under cocotb (:mod:`hwcosim.cosim.designs.melo.tb_bridge`): each packet
becomes an input event word at the cycle of its arrival; the cycle of its response beat is the response
time. The **model device** is the golden model :class:`hwcosim.models.melo.engine.MeloEngineModel` timed
by :func:`hwcosim.models.melo.cycles.model_cycles`, the cycle table of the RTL's docstring. Every event,
released-PSN word and response word of the RTL run is replayed through the golden model afterwards and compared word
for word (:func:`check_transcript`).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from hwcosim.cosim.flow.bridge import BridgeMismatch, ClockMap, Completion, ModelDevice, co_simulate, compare, run_sync
from hwcosim.models.errors import UsageError
from hwcosim.models.melo.cycles import model_cycles
from hwcosim.models.melo.engine import DUP, NACK, SACK, MeloEngineModel, MeloEngineParams

__all__ = ["MeloScenarioParams", "MeloScenario", "MeloModelDevice", "run_model",
           "run_rtl", "check_transcript", "run_bridge", "ENGINE", "params_from_scenario", "MAX_PACKETS"]

MAX_PACKETS = 200_000
"""Packets of all chosen flows together that a bridge run may simulate (a larger ``scale`` is refused)."""

ENGINE = MeloEngineParams(n_conns=16, psn_bits=12, block_bits=16, pool_blocks=24, max_blocks_per_conn=3)
"""Engine of the bridge (the configuration of the MELO RTL tests: its Verilator build is shared)."""

_M64 = (1 << 64) - 1

DEFAULT_FLOWS = (
    # (src GPU, dst GPU, bytes, start us)
    (0, 2, 256 * 1024, 0.0),
    (1, 2, 192 * 1024, 2.0),
    (3, 2, 128 * 1024, 4.0),
    (0, 3, 512 * 1024, 1.0),
    (1, 0, 256 * 1024, 3.0),
    (3, 1, 256 * 1024, 5.0),
)


@dataclass(frozen=True)
class MeloScenarioParams:
    """Parameters of the MELO bridge scenario (see the module docstring).

    Raises
    ------
    ValueError
        On a value the scenario cannot run, naming it.
    """

    flows: tuple = DEFAULT_FLOWS
    lossy_gpu: int = 2
    loss: float = 0.02
    chosen: tuple | None = None
    mtu_bytes: int = 1024
    window: int = 32
    rto_us: float = 40.0
    nic_gbps: float = 100.0
    hop_latency_us: float = 1.0
    f_clk_mhz: float = 250.0
    seed: int = 1
    scale: float = 1.0
    engine: MeloEngineParams = field(default_factory=lambda: ENGINE)
    topology: tuple | None = None
    """``(generator, ((param, value), ...))`` of a cluster scenario's ``[topology]``; None: the
    built-in one-pod Clos of four single-GPU hosts."""
    lossy_link: tuple | None = None
    """``(link block name, index)``, e.g. ``("port-down", 2)``; None: the NIC down port of ``lossy_gpu``."""

    def __post_init__(self):
        if not 0.0 <= self.loss < 0.5:
            raise UsageError(f"loss must be in [0, 0.5), not {self.loss!r}")
        if not self.flows:
            raise UsageError("the scenario needs at least one flow")
        topo = self.build_topology()
        ng = topo.n_gpus
        for f in self.flows:
            if len(f) != 4 or f[0] == f[1] or min(f[0], f[1]) < 0 or max(f[0], f[1]) >= ng or f[2] <= 0 or f[3] < 0:
                raise UsageError(f"flow {f!r}: needs (src, dst, bytes, start_us) with GPUs 0..{ng - 1}, src != dst, "
                                 "bytes > 0, start >= 0")
        if self.lossy_link is None and not 0 <= self.lossy_gpu < ng:
            raise UsageError(f"lossy_gpu must be a GPU 0..{ng - 1}, not {self.lossy_gpu}")
        object.__setattr__(self, "_topo", topo)
        object.__setattr__(self, "_lossy", self._lossy_link_id(topo))
        object.__setattr__(self, "_paths", self._flow_paths(topo))
        if self.window < 1 or self.window > self.engine.window_psns - self.engine.block_bits:
            raise UsageError(f"window must be in 1..{self.engine.window_psns - self.engine.block_bits} (the engine's "
                             f"reorder window at any alignment), not {self.window}")
        if not (self.f_clk_mhz > 0 and self.rto_us > 0 and self.mtu_bytes > 0 and self.scale > 0):
            raise UsageError("f_clk_mhz, rto_us, mtu_bytes and scale must be > 0")
        ch = self.chosen_flows()
        if not ch:
            raise UsageError(f"no chosen flow: none crosses the lossy link {self._topo.describe(self._lossy)}")
        if len(ch) > self.engine.n_conns:
            raise UsageError(f"{len(ch)} chosen flows exceed the engine's {self.engine.n_conns} connections")
        bad = [i for i in ch if not 0 <= i < len(self.flows)]
        if bad:
            raise UsageError(f"chosen flow index {bad[0]} out of range 0..{len(self.flows) - 1}")

    def build_topology(self):
        """The cluster topology the flows run on (see ``topology``)."""
        from hwcosim.models.systems.cluster.topology import clos

        if self.topology is None:
            return clos(1, 2, 2, gpus_per_host=1, nic_ports=1, aggs_per_pod=1, cores_per_plane=1,
                        nic_gbps=self.nic_gbps, hop_latency_s=self.hop_latency_us * 1e-6, name="bridge-clos-1x2x2")
        from hwcosim.models.systems.cluster.scenario import TopologyConf

        gen, params = self.topology
        return TopologyConf(gen, tuple((str(k), v) for k, v in params)).build()

    def _lossy_link_id(self, topo) -> int:
        from hwcosim.models.systems.cluster.topology import LinkKind

        if self.lossy_link is None:
            kind, idx = "port-down", self.lossy_gpu * topo.nic_ports
        else:
            kind, idx = self.lossy_link
        if kind not in LinkKind.NAMES:
            raise UsageError(f"lossy link kind must be one of {', '.join(LinkKind.NAMES)}, not {kind!r}")
        blk = topo.link_block(LinkKind.NAMES.index(kind))
        if not 0 <= int(idx) < blk.stop - blk.start:
            raise UsageError(f"lossy link {kind}#{idx} out of range: this topology has {blk.stop - blk.start} "
                             f"{kind} links")
        return blk.start + int(idx)

    def _flow_paths(self, topo) -> list:
        from hwcosim.models.systems.cluster.topology import N_CHOICES, hash_choices

        out = []
        for i, f in enumerate(self.flows):
            if self.topology is None:  # the built-in Clos has one path per pair
                ch = np.zeros((1, N_CHOICES), dtype=np.int64)
            else:  # ECMP: choices hashed from (flow, src, dst) with the seed
                ch = hash_choices(np.array([[i, int(f[0]), int(f[1])]]), self.seed)
            out.append(topo.paths([int(f[0])], [int(f[1])], ch)[0])
        return out

    def crosses_lossy(self, i: int) -> bool:
        """Whether flow ``i``'s path crosses the lossy link."""
        return bool((self._paths[i] == self._lossy).any())

    def chosen_flows(self) -> list[int]:
        if self.chosen is not None:
            return sorted(set(int(i) for i in self.chosen))
        return [i for i in range(len(self.flows)) if self.crosses_lossy(i)]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["flows"] = [list(f) for f in self.flows]
        d["chosen"] = None if self.chosen is None else list(self.chosen)
        if self.topology is not None:
            d["topology"] = [self.topology[0], [list(kv) for kv in self.topology[1]]]
        if self.lossy_link is not None:
            d["lossy_link"] = list(self.lossy_link)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> MeloScenarioParams:
        d = dict(d)
        d["flows"] = tuple(tuple(f) for f in d["flows"])
        d["chosen"] = None if d.get("chosen") is None else tuple(d["chosen"])
        d["engine"] = MeloEngineParams(**d["engine"])
        if d.get("topology") is not None:
            gen, params = d["topology"]
            d["topology"] = (gen, tuple(tuple(kv) for kv in params))
        if d.get("lossy_link") is not None:
            d["lossy_link"] = tuple(d["lossy_link"])
        return cls(**d)


def params_from_scenario(sc, *, scale: float | None = None, loss: float | None = None,
                         lossy_gpu: int | None = None, flows=None, chosen=None, f_clk_mhz: float | None = None,
                         seed: int | None = None) -> MeloScenarioParams:
    """The bridge scenario of a cluster scenario ``sc`` (:class:`hwcosim.models.systems.cluster.scenario.Scenario`;
    see the module docstring). Keyword arguments (the command line's flags) override the file.

    Raises
    ------
    models.systems.cluster.scenario.ScenarioError
        One line naming the field of the file (or the flag) and the fix.
    """
    from hwcosim.models.systems.cluster.job import Comm
    from hwcosim.models.systems.cluster.scenario import ScenarioError, prepare

    conf = sc.cosim_conf("melo")
    ji, jc = sc.job(conf.get("job"))
    spec = jc.spec
    topo, places, _ = prepare(sc)
    from hwcosim.models.precedence import layered

    # command line over [cosim.melo] over defaults (the loss: over the lossy [[failures]] entry, below)
    given = layered(("defaults", {"f_clk_mhz": 250.0, "seed": sc.seed}),
                    ("[cosim.melo]", {"scale": conf.get("scale"), "f_clk_mhz": conf.get("clock_mhz")}),
                    ("command line", {"scale": scale, "f_clk_mhz": f_clk_mhz, "seed": seed}))
    scale, f_clk_mhz, seed = given.get("scale"), given["f_clk_mhz"], given["seed"]
    if scale is None:
        raise ScenarioError("cosim.melo.scale: missing; add 'scale = <number>' to [cosim.melo] (flow bytes = ring "
                            "hop bytes x scale, e.g. 1e-4) or pass --scale")
    if flows is None:
        dp = [st for st in spec.steps(places[ji]) if isinstance(st, Comm) and st.label == "dp"]
        if not dp:
            raise ScenarioError(f"jobs[{ji}] ({spec.name!r}) has no DP all-reduce (dp = {spec.dp}, grad_bytes = "
                                f"{spec.grad_bytes:g}); name a job with dp >= 2 and grad_bytes > 0 in [cosim.melo] job")
        flows = []
        for coll in dp[0].collectives:
            for st in coll.streams:
                flows.extend((int(a), int(b), float(st.nbytes), 0.0) for a, b in zip(st.src, st.dst))
    # the lossy link: a [[failures]] entry with effect = "lossy" (or --lossy-gpu's NIC down port)
    lossy = [i for i, f in enumerate(sc.failures) if f.loss is not None]
    fi = conf.get("failure", lossy[0] if lossy else None)
    link = None
    if lossy_gpu is None:
        if fi is None:
            raise ScenarioError("failures: no lossy link; add a [[failures]] entry with effect = \"lossy\" and "
                                "loss = <probability>, or pass --lossy-gpu")
        f = sc.failures[fi]
        if len(f.index) != 1:
            raise ScenarioError(f"failures[{fi}].index: the MELO bridge models one lossy link; give it one index, "
                                f"not {list(f.index)}")
        link = (f.kind, f.index[0])
        if loss is None:
            loss = f.loss
    elif not 0 <= lossy_gpu < topo.n_gpus:
        raise ScenarioError(f"--lossy-gpu must be a GPU 0..{topo.n_gpus - 1} of [topology], not {lossy_gpu}")
    elif loss is None and fi is not None:  # another link, the file's loss probability
        loss = sc.failures[fi].loss
    kw = {k: conf[k] for k in ("mtu_bytes", "window", "rto_us") if k in conf}
    try:
        p = MeloScenarioParams(flows=tuple(flows), lossy_gpu=lossy_gpu or 0, loss=0.02 if loss is None else loss,
                               chosen=chosen, scale=scale, f_clk_mhz=f_clk_mhz, seed=seed,
                               nic_gbps=topo.nic_gbps, hop_latency_us=topo.hop_latency_s * 1e6,
                               topology=(sc.topology.generator, sc.topology.params), lossy_link=link, **kw)
    except ValueError as e:
        raise ScenarioError(f"[cosim.melo] of job {spec.name!r}: {e}") from None
    npk = sum(math.ceil(p.flows[i][2] * p.scale / p.mtu_bytes) for i in p.chosen_flows())
    if npk > MAX_PACKETS:
        raise ScenarioError(f"cosim.melo.scale: {scale:g} gives {npk} packets on the engine, more than "
                            f"{MAX_PACKETS}; lower scale (or --scale)")
    return p


def _lost(seed: int, flow: int, psn: int, attempt: int, p: float) -> bool:
    """Deterministic loss decision of one transmission (splitmix64 of its identity)."""
    if p <= 0:
        return False
    z = (seed * 0x9E3779B97F4A7C15 + flow * 0xBF58476D1CE4E5B9 + psn * 0x94D049BB133111EB + attempt * 0x2545F491) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    z ^= z >> 31
    return (z >> 11) / float(1 << 53) < p


class _Flow:
    __slots__ = ("i", "conn", "src", "dst", "size", "start", "npkts", "sid", "owd", "una", "nxt", "sacked",
                 "rq", "inq", "hi", "attempts", "rnext", "last_prog", "timer_on", "sending", "next_send",
                 "done_t", "retx", "timeouts", "sent", "nacks", "sacks", "dups", "chosen", "path", "lossy")

    def __init__(self, i, src, dst, size, start):
        self.i, self.src, self.dst, self.size, self.start = i, src, dst, size, start
        self.done_t = None
        self.retx = self.timeouts = self.sent = self.nacks = self.sacks = self.dups = 0


class MeloScenario:
    """The cluster network of the MELO bridge; runs under :func:`hwcosim.cosim.flow.bridge.co_simulate`."""

    def __init__(self, p: MeloScenarioParams):
        from hwcosim.models.systems.cluster.network import FlowNetwork

        self.p = p
        self.topo = p._topo
        self.net = FlowNetwork(self.topo.capacity)
        self.mask = (1 << p.engine.psn_bits) - 1
        self.now = 0.0
        self._heap: list = []
        self._seq = 0
        chosen = p.chosen_flows()
        self.flows: list[_Flow] = []
        self.by_sid: dict[int, _Flow] = {}
        for i, (s, d, b, st) in enumerate(p.flows):
            f = _Flow(i, int(s), int(d), float(b) * p.scale, float(st) * 1e-6)
            f.chosen = i in chosen
            f.lossy = p.crosses_lossy(i)
            f.path = p._paths[i]
            f.owd = float(self.topo.base_latency([f.src], [f.dst])[0])
            if f.chosen:
                f.conn = chosen.index(i)
                f.npkts = max(1, math.ceil(f.size / p.mtu_bytes))
                f.una = f.nxt = f.hi = f.rnext = 0
                f.sacked, f.rq, f.inq, f.attempts = set(), [], set(), {}
                f.last_prog, f.timer_on, f.sending, f.next_send = 0.0, False, False, 0.0
            self.flows.append(f)
            self._push(f.start, "start", f)
        self.pending: dict[int, tuple[_Flow, int]] = {}  # request id -> (flow, unbounded PSN)
        self._rid = 0
        self.rto = p.rto_us * 1e-6
        self.arrivals = 0
        self.lost = 0
        self.delivered_words = 0

    # ---- plumbing -----------------------------------------------------------------------------
    def _push(self, t, kind, *args):
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, args))

    def done(self) -> bool:
        return all(f.done_t is not None for f in self.flows)

    def next_time(self) -> float:
        t = self._heap[0][0] if self._heap else math.inf
        return min(t, self.now + self.net.time_to_next())

    def _advance_net(self, t: float) -> None:
        if t > self.now:
            for sid in self.net.advance(t - self.now):
                f = self.by_sid.pop(sid)
                if not f.chosen:
                    f.done_t = t
            self.now = t

    def step(self, t: float, dev) -> None:
        self._advance_net(t)
        while self._heap and self._heap[0][0] <= t:
            _, _, kind, args = heapq.heappop(self._heap)
            getattr(self, "_ev_" + kind)(t, dev, *args)

    def on_complete(self, c: Completion, dev) -> None:
        self._advance_net(c.t)
        f, psn = self.pending.pop(c.rid)
        delivered, kind, cum = c.result
        for x in delivered:
            if x != f.rnext & self.mask:
                raise BridgeMismatch(f"flow {f.i}: engine released PSN {x}, expected {f.rnext & self.mask}")
            f.rnext += 1
            self.delivered_words += 1
        if f.rnext > f.npkts:
            raise BridgeMismatch(f"flow {f.i}: engine released beyond the {f.npkts} packets sent")
        if cum != f.rnext & self.mask:
            raise BridgeMismatch(f"flow {f.i}: cumulative PSN {cum} != released count {f.rnext} (masked)")
        if f.rnext == f.npkts and f.done_t is None:
            f.done_t = c.t
            self.net.remove(f.sid)
            self.by_sid.pop(f.sid, None)
        if kind == NACK:
            f.nacks += 1
        elif kind == SACK:
            f.sacks += 1
        elif kind == DUP:
            f.dups += 1
        self._push(c.t + f.owd, "resp", f, kind, f.rnext, psn)

    # ---- events -------------------------------------------------------------------------------
    def _ev_start(self, t, dev, f):
        f.sid = self.net.add(f.path, 1e18 if f.chosen else f.size)
        self.by_sid[f.sid] = f
        if f.chosen:
            f.last_prog = t
            self._wake(f, t)

    def _can_send(self, f) -> bool:
        return bool(f.rq) or (f.nxt < f.npkts and f.nxt < f.una + self.p.window)

    def _wake(self, f, t):
        if f.done_t is None and not f.sending and self._can_send(f):
            f.sending = True
            self._push(max(t, f.next_send), "send", f)

    def _ev_send(self, t, dev, f):
        f.sending = False
        if f.done_t is not None:
            return
        psn = -1
        while f.rq:
            x = heapq.heappop(f.rq)
            f.inq.discard(x)
            if x >= f.una and x not in f.sacked:
                psn = x
                f.retx += 1
                break
        if psn < 0:
            if f.nxt < f.npkts and f.nxt < f.una + self.p.window:
                psn = f.nxt
                f.nxt += 1
            else:
                return
        f.sent += 1
        rate = self.net.rate(f.sid)
        ser = self.p.mtu_bytes / rate if rate > 0 else math.inf
        f.next_send = t + ser
        if not f.timer_on:
            f.timer_on = True
            f.last_prog = t
            self._push(t + self.rto, "timer", f)
        att = f.attempts.get(psn, 0)
        f.attempts[psn] = att + 1
        if f.lossy and _lost(self.p.seed, f.i, psn, att, self.p.loss):
            self.lost += 1
        else:
            self._push(t + ser + f.owd, "arrive", f, psn)
        self._wake(f, f.next_send)

    def _ev_arrive(self, t, dev, f, psn):
        self._rid += 1
        self.pending[self._rid] = (f, psn)
        self.arrivals += 1
        dev.submit(t, self._rid, (f.conn, psn & self.mask))

    def _ev_resp(self, t, dev, f, kind, cum, psn):
        if f.done_t is not None:
            return
        if cum > f.una:
            f.una = cum
            f.last_prog = t
            if cum > f.nxt:
                f.nxt = cum
            if len(f.sacked) > 2 * self.p.window:
                f.sacked = {x for x in f.sacked if x >= cum}
        if kind in (SACK, NACK):
            if kind == SACK:
                f.sacked.add(psn)
            lo = max(f.hi, f.una)
            if psn > lo:
                for x in range(lo, psn):
                    if x not in f.sacked and x not in f.inq:
                        f.inq.add(x)
                        heapq.heappush(f.rq, x)
                f.hi = psn
            if kind == NACK and psn >= f.una and psn not in f.inq:
                f.inq.add(psn)
                heapq.heappush(f.rq, psn)
        self._wake(f, t)

    def _ev_timer(self, t, dev, f):
        if f.done_t is not None:
            return
        if f.una >= f.nxt and not f.rq:
            f.timer_on = False
            return
        due = f.last_prog + self.rto
        if t < due:
            self._push(due, "timer", f)
            return
        f.timeouts += 1
        f.last_prog = t
        for x in range(f.una, f.nxt):
            if x not in f.sacked and x not in f.inq:
                f.inq.add(x)
                heapq.heappush(f.rq, x)
        f.hi = max(f.hi, f.nxt)
        self._push(t + self.rto, "timer", f)
        self._wake(f, t)

    # ---- result -------------------------------------------------------------------------------
    def result(self) -> dict:
        flows = []
        for f in self.flows:
            r = {"flow": f.i, "src": f.src, "dst": f.dst, "bytes": f.size,
                 "level": "packet/MELO" if f.chosen else "flow",
                 "fct_us": (f.done_t - f.start) * 1e6 if f.done_t is not None else None}
            if f.chosen:
                r.update({"conn": f.conn, "packets": f.npkts, "sent": f.sent, "retx": f.retx, "timeouts": f.timeouts,
                          "sacks": f.sacks, "nacks": f.nacks, "dups": f.dups})
            flows.append(r)
        ch = [r for r in flows if r["level"] != "flow"]
        bg = [r for r in flows if r["level"] == "flow"]
        return {"flows": flows, "chosen_fct_us": [r["fct_us"] for r in ch],
                "background_fct_us": [r["fct_us"] for r in bg],
                "chosen_retx": sum(r["retx"] for r in ch), "chosen_timeouts": sum(r["timeouts"] for r in ch),
                "chosen_nacks": sum(r["nacks"] for r in ch), "arrivals": self.arrivals, "lost": self.lost,
                "delivered": self.delivered_words, "makespan_us": max(r["fct_us"] + f.start * 1e6
                                                                      for r, f in zip(flows, self.flows)),
                "sim_time_us": self.now * 1e6}


# ---- model device -------------------------------------------------------------------------------
class MeloModelDevice(ModelDevice):
    """Golden MELO engine timed by :func:`hwcosim.models.melo.cycles.model_cycles`."""

    name = "model"

    def __init__(self, clock: ClockMap, params: MeloEngineParams):
        super().__init__(clock)
        self.p = params
        self.eng = MeloEngineModel(params)
        self.latencies: list[int] = []

    def serve(self, request, start_cycle):
        conn, psn = request
        before = self.eng.count[conn]
        r = self.eng.process(conn, psn)
        cyc = model_cycles(self.p, self.eng, conn, psn, r.delivered, r.response.kind, before)
        self.latencies.append(cyc)
        return cyc, (list(r.delivered), r.response.kind, r.response.cum_psn)


def _summary(scn: MeloScenario, dev_latencies, wall_s: float, cycles_busy: int) -> dict:
    res = scn.result()
    lat = np.asarray(dev_latencies, dtype=float)
    res.update({"wall_s": wall_s, "engine_busy_cycles": int(cycles_busy),
                "engine_latency_cycles_mean": float(lat.mean()) if lat.size else 0.0,
                "engine_latency_cycles_max": int(lat.max()) if lat.size else 0})
    return res


def run_model(p: MeloScenarioParams) -> dict:
    """The scenario with the golden model + cycle table as the receiver engine."""
    clock = ClockMap(p.f_clk_mhz * 1e6)
    scn = MeloScenario(p)
    dev = MeloModelDevice(clock, p.engine)
    t0 = time.perf_counter()
    run_sync(co_simulate(scn, dev))
    return _summary(scn, dev.latencies, time.perf_counter() - t0, dev.busy_cycles)


def check_transcript(p: MeloEngineParams, events: list[int], deliv: list[int], resp: list[int]) -> dict:
    """Replay the RTL's input events through the golden model; compare every output word."""
    from hwcosim.cosim.designs.melo.engine import golden_streams
    from hwcosim.models.melo.engine import pack_event

    evs = []
    for w in events:
        psn = w & ((1 << p.psn_bits) - 1)
        conn = (w >> p.psn_bits) & ((1 << p.conn_bits) - 1)
        op = bool(w >> (p.psn_bits + p.conn_bits))
        evs.append((conn, psn, op))
    assert [pack_event(p, *e) for e in evs] == list(events)
    g = golden_streams(p, evs)
    for name, got, want in (("response", resp, g["resp"]), ("released-PSN", deliv, g["deliv"])):
        if got != want:
            i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise BridgeMismatch(f"MELO RTL {name} word {i} of {len(want)} differs from the golden model "
                                 f"({len(got)} words from the RTL)")
    return {"events": len(events), "response_words": len(resp), "released_words": len(deliv),
            "mismatches": 0}


def transcript_diff(p: MeloEngineParams, events, deliv, resp) -> tuple[dict, dict]:
    """The golden streams for the RTL's input event words, and the word-for-word differences of the
    RTL's response and released-PSN words from them (:func:`hwcosim.cosim.flow.runs.word_diff`, positions
    ``["response"|"released", i]``)."""
    from hwcosim.cosim.designs.melo.engine import golden_streams
    from hwcosim.cosim.flow.runs import merge_diffs, word_diff

    evs = []
    for w in (int(w) for w in events):
        psn = w & ((1 << p.psn_bits) - 1)
        conn = (w >> p.psn_bits) & ((1 << p.conn_bits) - 1)
        op = bool(w >> (p.psn_bits + p.conn_bits))
        evs.append((conn, psn, op))
    g = golden_streams(p, evs)
    diff = merge_diffs([word_diff(list(resp), g["resp"], labels=("response",)),
                        word_diff(list(deliv), g["deliv"], labels=("released",))])
    return g, diff


def save_evidence(run_dir, p: MeloEngineParams, tr: dict) -> dict:
    """Keep the bridge's RTL transcript as a run folder (``hwcosim check``): the input event words and
    the golden streams in ``arrays.npz``, the RTL's words in ``outputs.npz``, the manifest last."""
    from hwcosim.cosim.flow.runs import add_arrays, as_words, save_npz, seal

    g, diff = transcript_diff(p, tr["events"], tr["deliv"], tr["resp"])
    add_arrays(run_dir, events=as_words(tr["events"]), expected_resp=as_words(g["resp"]),
               expected_deliv=as_words(g["deliv"]))
    save_npz(Path(run_dir) / "outputs.npz", rtl_resp=as_words(tr["resp"]), rtl_deliv=as_words(tr["deliv"]))
    seal(run_dir, "melo-engine", diff)
    return diff


def recheck(params: dict, arrays: dict, outputs: dict) -> dict:
    """Re-verify a saved bridge run (``hwcosim cosim melo``) without simulating: the golden engine
    replayed on the saved input events against the RTL's saved response and released-PSN words."""
    from hwcosim.cosim.flow.runs import as_words

    p = MeloEngineParams(**params)
    g, res = transcript_diff(p, arrays["events"], outputs["rtl_deliv"], outputs["rtl_resp"])
    res["saved_expected_agrees"] = bool(list(arrays["expected_resp"]) == list(as_words(g["resp"]))
                                        and list(arrays["expected_deliv"]) == list(as_words(g["deliv"])))
    return res


def run_rtl(p: MeloScenarioParams, *, sim: str | None = None, test_dir=None) -> dict:
    """The scenario with ``hwcosim.hdl.melo.MeloEngineRTL`` under cocotb as the receiver engine; the run folder
    keeps the transcript (:func:`save_evidence`), also when the RTL disagrees with the golden model."""
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.flow.runs import seal_or_save
    from hwcosim.hdl.melo import MeloEngineRTL as RTL

    t0 = time.perf_counter()
    res = runner.run(RTL(p.engine), "melo_engine", "hwcosim.cosim.designs.melo.tb_bridge",
                     inputs={"scenario": p.to_dict(), "params": asdict(p.engine)}, test_dir=test_dir, sim=sim,
                     raise_on_fail=False)
    wall_total = time.perf_counter() - t0
    tr = res.metrics.get("transcript")
    seal_or_save(res.test_dir, "melo-engine", tr, lambda d, t: save_evidence(d, p.engine, t))
    runner.check(res, "melo_engine")
    out = dict(res.metrics["result"])
    out["checks"] = {"word_for_word": check_transcript(p.engine, tr["events"], tr["deliv"], tr["resp"]),
                     "rebuilt": res.rebuilt, "simulator": res.sim}
    out["wall_total_s"] = wall_total
    return out


def _rows(m: dict, r: dict | None):
    rows = []
    rr = r or {}
    for i, fm in enumerate(m["flows"]):
        fr = rr.get("flows", [{}] * len(m["flows"]))[i]
        tag = f"flow {i} ({fm['src']}->{fm['dst']}, {fm['level']})"
        rows.append((f"{tag} FCT us", fm["fct_us"], fr.get("fct_us")))
        if fm["level"] != "flow":
            rows.append((f"{tag} retx / timeouts", f"{fm['retx']} / {fm['timeouts']}",
                         f"{fr['retx']} / {fr['timeouts']}" if fr else None))
    for k, label in (("arrivals", "packets at the engine"), ("lost", "transmissions lost"),
                     ("chosen_nacks", "NACKs (pool/window)"), ("engine_busy_cycles", "engine busy cycles"),
                     ("engine_latency_cycles_mean", "engine latency mean (cycles)"),
                     ("engine_latency_cycles_max", "engine latency max (cycles)"), ("makespan_us", "makespan us")):
        rows.append((label, m[k], rr.get(k)))
    return rows


NOTES = [
    "Time base: engine clock f_clk; a packet arriving at t enters the engine at cycle ceil(t*f_clk), "
    "a response beat at cycle c leaves at c/f_clk; both devices quantise identically.",
    "Model device: golden MeloEngineModel for the data, the RTL docstring's cycle table for the latency; "
    "a difference in FCT could come only from a per-packet engine latency (a few ns) shifting a packet "
    "behind or ahead of a rate change or a timer (none on the scenarios of tests/melo/test_bridge_melo.py, "
    "where both runs agree cycle for cycle).",
    "Loss is a hash of (seed, flow, PSN, attempt): both runs drop the same transmissions.",
]


def run_bridge(p: MeloScenarioParams, *, model_only: bool = False, sim: str | None = None, test_dir=None):
    """Run the scenario with the model and (unless ``model_only``) with the RTL; return the comparison."""
    return compare("melo", p.to_dict(), lambda: run_model(p),
                   None if model_only else (lambda: run_rtl(p, sim=sim, test_dir=test_dir)), _rows, NOTES)

