"""ByteRobust: detection, demarcation and recovery of a large training job, and its ETTR.

Wan et al., "Robust LLM Training Infrastructure at ByteDance", SOSP 2025 (arXiv 2509.16293).

In :func:`simulate_ettr` the detection and demarcation delays are *inputs* (the paper's figures
and ours). :mod:`hwcosim.models.systems.reliability.closedloop` runs ByteRobust as a closed loop instead: its
monitors and localisation read the telemetry of the chunk-level transport, and the delays and
wrong evictions come out of them (``hwcosim reliability byterobust-loop``).

Pieces implemented as the paper describes them:

- :func:`dual_phase_replay`: group testing over the machines: ``x in [0, m n)`` are
  partitioned by ``x // m`` (phase 1, ``n`` groups of ``m``) and by ``x mod n`` (phase 2, ``n``
  groups); every group re-runs a slice of the job on the transport
  (:class:`~models.systems.reliability.replay.MachineReplay`) and fails when its telemetry shows
  a failure (a faulty machine reproduces it there), and the
  suspects are the intersection of a failing phase-1 group and a failing phase-2 group. With
  ``m <= n`` every (phase-1, phase-2) pair meets in at most one rank, so one faulty rank is named
  exactly; several faulty ranks give a superset (never a miss).
- :func:`standby_count`: warm standbys = the 99th percentile of a binomial model of machines
  failing within the replenish (repair) window.
- :func:`backup_hosts`: per-step in-memory checkpoints are copied to a host outside every
  parallel group (TP, DP, PP) of the host's ranks, as one global host shift (so every host stores
  exactly one backup and a group restart never loses both copies).
- :func:`simulate_ettr`: the 3-month run of a 9,600-GPU job under ByteRobust and under a
  requeue-on-failure baseline.

What is simulated at flow level and what is modelled: the 3-month run is an **event-level** model
(one event per fault: onset, detection, demarcation, restart, lost work), because a flow-level
simulation of 9,600 GPUs for 90 days is out of reach. The only flow-level input is
:func:`calibrate_network_slowdowns`, which runs :class:`~models.systems.reliability.sim.FaultySimulator`
on a small Clos with one network fault at a time (NIC flap, lossy link, switch failure) and
measures the iteration slow-down that the event model then applies (a ring is paced by its
slowest hop, so the factor carries over to larger rings at the same per-hop load). Detection and
restart times are the paper's where it gives them (GPU lost found in 10 s, NIC crash in 30 s,
hang = 10 min of zero RDMA traffic, hot update 46-65 s, requeue 454-768 s, checkpoint blocking
0.01-0.04 s per step, ~10 min PyTorch timeout for the baseline); the rest are ours and are the
fields of :class:`ETTRParams`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import replace as _with

import numpy as np
from hwcosim.models.errors import UsageError

from .faults import Fault, FaultKind, FaultMix, sample_faults

__all__ = ["dual_phase_replay", "standby_count", "backup_hosts", "ETTRParams", "simulate_ettr",
           "calibrate_network_slowdowns", "ettr_curves", "run_study"]


# ---- demarcation -----------------------------------------------------------------------------
def dual_phase_replay(m: int, n: int, replay) -> tuple[np.ndarray, dict]:
    """Dual-phase replay over ``m * n`` machines; returns (suspect machines, details).

    Parameters
    ----------
    m, n : int
        Phase-1 group size (groups ``x // m``) and phase-2 group count (groups ``x mod n``).
    replay : callable
        ``replay(machines) -> bool``: re-run the job's slice on that group of machines and report
        whether the replay failed (an action on the machines, e.g.
        :class:`~models.systems.reliability.replay.MachineReplay`; the function never learns which
        machines are faulty, only what each replay showed).

    Returns
    -------
    suspects : ndarray of int
        Machines in (a failing phase-1 group) and (a failing phase-2 group).
    details : dict
        ``phase1_failed``, ``phase2_failed`` (group ids), ``replays`` (2: the two phases run
        their groups in parallel), ``groups_replayed``.
    """
    for name, v in (("m", m), ("n", n)):
        if not (isinstance(v, (int, np.integer)) and v >= 1):
            raise UsageError(f"{name} must be an integer >= 1, not {v!r}")
    if not callable(replay):
        raise UsageError("replay must be a callable replay(machines) -> bool (a replay on the machines), "
                         f"not {type(replay).__name__}")
    x = np.arange(m * n)
    g1, g2 = x // m, x % n
    fail1 = np.array([g for g in range(n) if replay(x[g1 == g])], dtype=np.int64)
    fail2 = np.array([g for g in range(n) if replay(x[g2 == g])], dtype=np.int64)
    sus = x[np.isin(g1, fail1) & np.isin(g2, fail2)]
    return sus, {"phase1_failed": fail1.tolist(), "phase2_failed": fail2.tolist(), "replays": 2,
                 "groups_replayed": 2 * n}


# ---- recovery resources ------------------------------------------------------------------------
def standby_count(n_machines: int, p_fail: float, q: float = 0.99) -> int:
    """Smallest ``k`` with ``P[Binomial(n_machines, p_fail) <= k] >= q`` (ByteRobust's sizing)."""
    from scipy.stats import binom

    if not (isinstance(n_machines, (int, np.integer)) and n_machines >= 1):
        raise UsageError(f"n_machines must be an integer >= 1, not {n_machines!r}")
    if not 0 <= p_fail <= 1:
        raise UsageError(f"p_fail must lie in [0, 1], not {p_fail!r}")
    if not 0 < q < 1:
        raise UsageError(f"q must lie in (0, 1), not {q!r}")
    k = int(binom.ppf(q, n_machines, p_fail))
    while binom.cdf(k, n_machines, p_fail) < q:  # guard ppf rounding
        k += 1
    while k > 0 and binom.cdf(k - 1, n_machines, p_fail) >= q:
        k -= 1
    return k


def backup_hosts(pp: int, dp: int, tp: int, gpus_per_host: int = 8) -> np.ndarray:
    """Backup host of every host for in-memory checkpoints (outside all its ranks' groups).

    Ranks are in Megatron order (GPU ``(s * dp + d) * tp + t``, host ``gpu // gpus_per_host``).
    Returns ``backup[h]`` for every host ``h``: ``(h + off) mod H`` for the smallest shift ``off``
    that leaves every host's TP, DP and PP groups; -1 everywhere if no shift does (e.g. PP = 1
    with a host holding a whole TP group: every other host is in its DP group).
    """
    n = pp * dp * tp
    if n % gpus_per_host:
        raise UsageError(f"{n} GPUs is not a whole number of {gpus_per_host}-GPU hosts")
    H = n // gpus_per_host
    host = (np.arange(n) // gpus_per_host).reshape(pp, dp, tp)
    forb = np.zeros((H, H), dtype=bool)
    for s in range(pp):  # DP groups: (s, :, t)
        for t in range(tp):
            hs = np.unique(host[s, :, t])
            forb[np.ix_(hs, hs)] = True
    for d in range(dp):  # PP groups: (:, d, t)
        for t in range(tp):
            hs = np.unique(host[:, d, t])
            forb[np.ix_(hs, hs)] = True
    for s in range(pp):  # TP groups
        for d in range(dp):
            hs = np.unique(host[s, d, :])
            forb[np.ix_(hs, hs)] = True
    h = np.arange(H)
    for off in list(range(H // 2, H)) + list(range(1, H // 2)):
        b = (h + off) % H
        if not forb[h, b].any():
            return b
    return np.full(H, -1)


# ---- event-level ETTR model ---------------------------------------------------------------------
@dataclass(frozen=True)
class ETTRParams:
    """The 3-month ETTR scenario (paper values marked P, ours marked O).

    Parameters
    ----------
    n_gpus, gpus_per_host : int
        9,600 GPUs (P), 8 per host.
    days : float
        90 (P: "3 months").
    iter_s : float
        Iteration time (O: 10 s).
    mix : FaultMix
        Fault rate and mix (ByteRobust's mix, P; Llama 3's rate, O).
    detect_gpu_s, detect_nic_s : float
        Inspection finds a lost GPU in 10 s, a NIC crash in 30 s (P).
    detect_hang_s : float
        Zero RDMA traffic for 10 min = hang (P).
    detect_implicit_s : float
        Process exit without a hardware signal, seen by the agent (O: 30 s).
    detect_slow_s : float
        MFU-decline / straggler detection window (O: 300 s).
    stop_check_s, replay_s, stack_trace_s : float
        Stop-time checks (O: 60 s), one replay phase (O: 300 s), stack-trace clustering (O: 60 s).
    hot_update_s, requeue_s : tuple
        Restart ranges 46-65 s and 454-768 s (P).
    ckpt_block_s : tuple
        Per-step in-memory checkpoint blocking 0.01-0.04 s (P).
    base_timeout_s : float
        Baseline: NCCL/PyTorch timeout ~10 min (P).
    base_ckpt_every_s, base_ckpt_block_s : float
        Baseline persistent checkpoint period (O: 1 h) and blocking time (O: 60 s).
    base_nan_s : float
        Baseline: a person notices a NaN loss (O: 1 h).
    repair_s : float
        A failed machine returns to the standby pool after this (O: 1 day).
    net_slowdown : dict
        Iteration slow-down factor per network fault kind (default: the flow-level calibration
        of :func:`calibrate_network_slowdowns` at seed 0, rounded; :func:`run_study` recalibrates).
    """

    n_gpus: int = 9600
    gpus_per_host: int = 8
    days: float = 90.0
    iter_s: float = 10.0
    mix: FaultMix = field(default_factory=FaultMix)
    detect_gpu_s: float = 10.0
    detect_nic_s: float = 30.0
    detect_hang_s: float = 600.0
    detect_implicit_s: float = 30.0
    detect_slow_s: float = 300.0
    stop_check_s: float = 60.0
    replay_s: float = 300.0
    stack_trace_s: float = 60.0
    hot_update_s: tuple = (46.0, 65.0)
    requeue_s: tuple = (454.0, 768.0)
    ckpt_block_s: tuple = (0.01, 0.04)
    base_timeout_s: float = 600.0
    base_ckpt_every_s: float = 3600.0
    base_ckpt_block_s: float = 60.0
    base_nan_s: float = 3600.0
    repair_s: float = 86400.0
    net_slowdown: dict = field(default_factory=lambda: {FaultKind.NIC_FLAP: 1.0, FaultKind.LINK_LOSSY: 1.6,
                                                        FaultKind.SWITCH_FAIL: 1.0})

    def __post_init__(self):
        if not (isinstance(self.n_gpus, int) and self.n_gpus >= self.gpus_per_host >= 1
                and self.n_gpus % self.gpus_per_host == 0):
            raise UsageError(f"n_gpus must be a positive multiple of gpus_per_host, not {self.n_gpus!r}")
        for n in ("days", "iter_s", "base_ckpt_every_s", "repair_s"):
            if not getattr(self, n) > 0:
                raise UsageError(f"{n} must be > 0, not {getattr(self, n)!r}")
        for n in ("detect_gpu_s", "detect_nic_s", "detect_hang_s", "detect_implicit_s", "detect_slow_s",
                  "stop_check_s", "replay_s", "stack_trace_s", "base_timeout_s", "base_ckpt_block_s", "base_nan_s"):
            if not getattr(self, n) >= 0:
                raise UsageError(f"{n} must be >= 0, not {getattr(self, n)!r}")
        for n in ("hot_update_s", "requeue_s", "ckpt_block_s"):
            lo, hi = getattr(self, n)
            if not 0 <= lo <= hi:
                raise UsageError(f"{n} must be a range 0 <= lo <= hi, not {getattr(self, n)!r}")
        if any(not v >= 1 for v in self.net_slowdown.values()):
            raise UsageError("net_slowdown factors must be >= 1")

    @property
    def hosts(self) -> int:
        return self.n_gpus // self.gpus_per_host

    @property
    def horizon_s(self) -> float:
        return self.days * 86400.0


def _slow_factor(p: ETTRParams, f: Fault) -> float:
    if f.kind in (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD):
        return f.severity
    return float(p.net_slowdown.get(f.kind, 1.0))


def simulate_ettr(p: ETTRParams, system: str, seed: int, faults: list[Fault] | None = None) -> dict:
    """Event-level run of the job under ``system`` (``"byterobust"`` or ``"requeue"``).

    Every fault is handled in onset order against a cursor ``up_at`` (when the job is running
    again). A fault that lands while the job is already down is absorbed by that restart (its
    machine is caught by the stop-time checks). Work between the resumed checkpoint and the
    failure is lost (redone). Slow faults cost ``overlap * (1 - 1/s)`` of productive time (none
    while the job is down); slow faults that overlap each other add up, and when the losses exceed
    the wall time the ETTR is 0 (``saturated``).

    Returns
    -------
    dict
        ``ettr``, ``productive_s``, ``wall_s``, losses by cause, per-fault ``outcomes`` (status
        detected / absorbed / missed, detection delay), ``recoveries`` (resume point vs last
        completed checkpoint, machine map checks), ``timeline`` (wall time, cumulative
        productive time) and the standby pool size.
    """
    if system not in ("byterobust", "requeue"):
        raise UsageError(f"system must be 'byterobust' or 'requeue', not {system!r}")
    rng = np.random.default_rng(seed + (0 if system == "byterobust" else 7919))
    if faults is None:
        faults = sample_faults(p.mix, p.n_gpus, p.horizon_s, seed, p.gpus_per_host)
    H = p.hosts
    br = system == "byterobust"
    # P[a machine fails within one repair window]: every fault kind counted (conservative; ours)
    evict_rate = p.mix.rate_per_gpu_day * p.gpus_per_host * p.repair_s / 86400.0
    pool_size = standby_count(H, min(evict_rate, 1.0)) if br else 0
    pool_free_at: list[float] = [0.0] * pool_size  # time each standby is ready
    machines = np.arange(H)  # logical host -> physical machine id
    next_machine = H + pool_size
    ckpt_every = p.iter_s if br else p.base_ckpt_every_s
    ckpt_block = float(np.mean(p.ckpt_block_s)) if br else p.base_ckpt_block_s
    # productive fraction lost to blocking checkpoints
    ckpt_frac = ckpt_block / (ckpt_every + ckpt_block)
    horizon = p.horizon_s
    up_at = 0.0
    last_resume_wall = 0.0  # wall time at which the current run segment started
    loss = {"detect": 0.0, "demarcate": 0.0, "restart": 0.0, "lost_work": 0.0, "slow": 0.0, "checkpoint": 0.0}
    outcomes, recoveries = [], []

    def last_ckpt(t: float) -> float:
        """Wall time of the last completed checkpoint at or before ``t`` in the current segment."""
        seg = t - last_resume_wall
        return last_resume_wall + np.floor(seg / ckpt_every) * ckpt_every if seg >= 0 else last_resume_wall

    down_iv: list[tuple[float, float]] = []  # (start, end) of every outage
    slow_open: list[tuple[float, float, float]] = []  # undetected slow faults: (start, end, lost fraction)
    point_loss: list[tuple[float, float]] = []  # (time, seconds of work lost or slowed away)
    for f in faults:
        if f.t >= horizon:
            break
        if f.t < up_at:
            outcomes.append({"fid": f.fid, "kind": f.kind, "status": "absorbed", "delay_s": up_at - f.t})
            continue
        slow = _slow_factor(p, f)
        evict_slow = False
        if f.kind == FaultKind.NAN:
            d_det = p.iter_s if br else p.base_nan_s
            d_dem = (p.stop_check_s + 2 * p.replay_s) if br else 0.0
        elif f.stops:
            if br:
                d_det = {FaultKind.GPU_FAIL: p.detect_gpu_s if f.explicit else p.detect_implicit_s,
                         FaultKind.NIC_DOWN: p.detect_nic_s, FaultKind.HANG: p.detect_hang_s}[f.kind]
                d_dem = {FaultKind.HANG: p.stack_trace_s}.get(f.kind, 0.0 if f.explicit else p.stop_check_s)
            else:
                d_det, d_dem = p.base_timeout_s, 0.0
        else:  # slow faults: ByteRobust watches MFU / NIC counters, the baseline sees nothing
            dur = min(f.duration, horizon - f.t)
            net = f.kind in (FaultKind.NIC_FLAP, FaultKind.LINK_LOSSY, FaultKind.SWITCH_FAIL)
            d_det = (p.detect_nic_s if net else p.detect_slow_s) if br else np.inf
            if d_det >= dur:
                loss["slow"] += dur * (1 - 1 / slow)
                point_loss.append((f.t + dur, dur * (1 - 1 / slow)))
                slow_open.append((f.t, f.t + dur, 1 - 1 / slow))
                outcomes.append({"fid": f.fid, "kind": f.kind, "status": "missed", "delay_s": None,
                                 "reason": "no detector" if not br else "cleared before detection"})
                continue
            loss["slow"] += d_det * (1 - 1 / slow)
            point_loss.append((f.t + d_det, d_det * (1 - 1 / slow)))
            outcomes.append({"fid": f.fid, "kind": f.kind, "status": "detected", "delay_s": d_det})
            if f.kind in (FaultKind.LINK_LOSSY, FaultKind.SWITCH_FAIL):
                continue  # fabric: the link/switch is isolated and routed around, no restart (ours)
            d_dem, evict_slow = 0.0, True  # evict the slow machine: save, swap in a standby, hot restart
        t_stop = min(f.t + d_det, horizon)
        # resume point: the last checkpoint completed before the onset (for NaN: before the
        # contamination); a planned eviction of a slow machine saves at the stop
        ck = t_stop if evict_slow else last_ckpt(f.t)
        lost = (t_stop - ck) if f.kind == FaultKind.NAN else (f.t - ck if not evict_slow else 0.0)
        host = int(f.target if f.kind == FaultKind.CPU_OVERLOAD else f.target // p.gpus_per_host)
        replace = f.kind != FaultKind.NAN and (f.kind != FaultKind.GPU_FAIL or f.explicit or not br)
        if f.kind == FaultKind.NAN and br:
            sus, _ = dual_phase_replay(*_replay_shape(H), _machines(p, faults, f, t_stop))
            replace = bool(sus.size == 1 and sus[0] == host)  # the replay named the bad machine
        before = machines.copy()
        lo, hi = p.hot_update_s if br else p.requeue_s
        if br and replace:
            ready = [i for i, ta in enumerate(pool_free_at) if ta <= t_stop]
            if ready:
                pool_free_at[ready[0]] = t_stop + p.repair_s  # failed machine repaired back into the pool
            else:
                lo, hi = p.requeue_s  # pool exhausted: wait for the scheduler like the baseline
        d_rs = float(rng.uniform(lo, hi))
        if replace:
            machines[host] = next_machine
            next_machine += 1
        down_from = t_stop if (f.kind == FaultKind.NAN or evict_slow) else f.t
        up_at = t_stop + d_dem + d_rs
        down_iv.append((down_from, min(up_at, horizon)))
        for a, b, frac in slow_open:  # a slow fault still running: the job is down, not slowed, meanwhile
            ov = min(b, up_at, horizon) - max(a, down_from)
            if ov > 0:
                loss["slow"] -= ov * frac
                point_loss.append((min(b, up_at, horizon), -ov * frac))
        slow_open = [x for x in slow_open if x[1] > up_at]
        if lost > 0:
            point_loss.append((down_from, lost))
        loss["detect"] += t_stop - down_from
        loss["demarcate"] += max(min(d_dem, horizon - t_stop), 0.0)
        loss["restart"] += max(min(up_at, horizon) - t_stop - d_dem, 0.0)
        loss["lost_work"] += lost
        recoveries.append({"fid": f.fid, "kind": f.kind, "t_fail": f.t, "t_up": up_at, "resume_ckpt_t": ck,
                           "last_ckpt_t": last_ckpt(f.t), "planned": evict_slow,
                           "replaced_host": host if replace else None, "hosts_before": int(before.size),
                           "hosts_after": int(machines.size), "distinct_after": int(np.unique(machines).size),
                           "old_machine_kept": bool(replace and before[host] in machines)})
        if f.kind == FaultKind.NAN or f.stops:
            outcomes.append({"fid": f.fid, "kind": f.kind, "status": "detected", "delay_s": d_det})
        last_resume_wall = up_at
    wall = horizon
    down_total = sum(b - a for a, b in down_iv)
    loss["checkpoint"] = (wall - down_total) * ckpt_frac
    productive = wall - sum(loss.values())
    grid = np.linspace(0, wall, 1001)
    cum = grid * (1 - ckpt_frac)
    for a, b in down_iv:
        cum -= np.clip(grid - a, 0, b - a) * (1 - ckpt_frac)
    for t, L in point_loss:
        cum -= L * (grid >= t)
    st = {s: sum(1 for o in outcomes if o["status"] == s) for s in ("detected", "absorbed", "missed")}
    delays = [o["delay_s"] for o in outcomes if o["status"] == "detected"]
    # undetected slow faults that overlap are counted additively; past the time up, nothing is left
    return {"system": system, "ettr": max(productive, 0.0) / wall, "saturated": bool(productive < 0),
            "productive_s": productive, "wall_s": wall,
            "loss_s": loss, "faults": sum(1 for f in faults if f.t < horizon), "status": st, "outcomes": outcomes,
            "recoveries": recoveries, "standbys": pool_size, "ckpt_every_s": ckpt_every,
            "timeline": {"days": (grid / 86400).tolist(), "productive_days": (cum / 86400).tolist(),
                         "outages": [(a / 86400, b / 86400) for a, b in down_iv]},
            "detect_delay_median_s": float(np.median(delays)) if delays else None}


def _machines(p: ETTRParams, faults: list[Fault], f: Fault, at: float):
    """The cluster's machines at ``at`` (the NaN defect of ``f``'s GPU in force), as a replay
    handle: the demarcation learns only what replays on them show."""
    from hwcosim.models.systems.cluster.transport import Effects

    from .replay import MachineReplay

    world = Effects(p.n_gpus, p.hosts, 0)
    world.nan_at[int(f.target) % p.n_gpus] = f.t
    return MachineReplay(world, p.gpus_per_host, at)


def _replay_shape(hosts: int) -> tuple[int, int]:
    """(m, n) with m <= n and m * n = hosts as near square as divisors allow (one machine per x)."""
    m = int(np.floor(np.sqrt(hosts)))
    while hosts % m:
        m -= 1
    return m, hosts // m


# ---- flow-level calibration and the study -------------------------------------------------------
def calibrate_network_slowdowns(seed: int = 0, iterations: int = 6) -> dict:
    """Iteration slow-down of one network fault, measured on the flow-level simulator.

    A 16-rank DP job (one GPU per host, 2 x 200 Gb/s bonded ports, 2 NCCL channels, ECMP) on a
    2-pod x 2-ToR x 4-host Clos with compute about 60% of the iteration; each run injects one
    fault for the whole run: NIC port flapping (period 20 ms) on rank 0, the most loaded ToR
    uplink keeping 10% of its capacity (loss), aggregation switch 0 failing. Returns
    ``{kind: iteration time with fault / without}``.
    """
    from hwcosim.models.systems.cluster.job import JobSpec, placement
    from hwcosim.models.systems.cluster.topology import LinkKind, clos

    from .sim import FaultySimulator

    topo = clos(2, 2, 4, gpus_per_host=1, nic_ports=2, aggs_per_pod=2, cores_per_plane=2)
    spec = JobSpec("cal", dp=16, compute_s=0.06, grad_bytes=5.3e8, iterations=iterations, channels=2)
    place = placement(spec, np.arange(16))

    def run(fault=None):
        s = FaultySimulator(topo, seed=seed)
        s.add_job(spec, place)
        if fault is not None:
            s.inject(fault)
        s.run(until=100.0)
        return s

    base = run()
    t0 = float(np.mean(base.jobs[0].iteration_times))
    tu = topo.link_block(LinkKind.TOR_UP)
    hot = tu.start + int(np.argmax(base.net.bytes_on_link[tu]))
    span = 2 * iterations * t0
    faults = {FaultKind.NIC_FLAP: Fault(0, FaultKind.NIC_FLAP, 0.0, 0, duration=span, severity=0.02),
              FaultKind.LINK_LOSSY: Fault(0, FaultKind.LINK_LOSSY, 0.0, hot, severity=0.1),
              FaultKind.SWITCH_FAIL: Fault(0, FaultKind.SWITCH_FAIL, 0.0, 0)}
    out = {}
    for k, f in faults.items():
        s = run(f)
        it = s.jobs[0].iteration_times
        out[k] = float(np.mean(it)) / t0 if it.size else float("inf")
    out["baseline_iter_s"] = t0
    return out


def ettr_curves(base: ETTRParams, seeds, rates: dict, max_faults: float = 5000.0) -> dict:
    """ETTR of ByteRobust and of requeue-on-failure over the fault rate and over the constants the
    paper does not give (the baseline's checkpoint interval and timeout, the slow-fault detection
    window, the replay phase) and the restart times it gives as ranges (scaled 0.5-2x); every other
    constant at ``base``. ``rates``: named real rates (per GPU-day) computed as points too.
    Returns ``{"axes": {name: {"x", "byterobust", "requeue"}}, "points": {name: {system: ettr}},
    "band": {system: [lo, hi]}}`` (band: the range over the constants' sweeps at the base rate).
    A run whose stream would hold more than ``max_faults`` faults is shortened to that many (at
    least one day)."""
    from dataclasses import replace

    from .faults import FaultMix

    def ettr(p):
        # at high rates a shorter stream (at most max_faults expected) measures the same ETTR
        days = min(p.days, max(1.0, max_faults / max(p.mix.rate_per_gpu_day * p.n_gpus, 1e-12)))
        p = _with(p, days=days)
        out = {"byterobust": [], "requeue": []}
        for s in seeds:
            faults = sample_faults(p.mix, p.n_gpus, p.horizon_s, s, p.gpus_per_host)
            for sys_ in out:
                out[sys_].append(simulate_ettr(p, sys_, s, faults)["ettr"])
        return {k: float(np.mean(v)) for k, v in out.items()}

    def at_rate(p, r):
        return replace(p, mix=FaultMix(rate_per_gpu_day=r, weights=dict(p.mix.weights)))

    axes = {"rate_per_gpu_day": [float(x) for x in np.geomspace(1e-4, 2.0, 9)],
            "base_ckpt_every_s": [900.0, 1800.0, 3600.0, 7200.0],
            "base_timeout_s": [300.0, 600.0, 1200.0, 1800.0],
            "detect_slow_s": [60.0, 300.0, 900.0],
            "replay_s": [60.0, 300.0, 900.0],
            "restart_scale": [0.5, 1.0, 2.0]}
    out = {}
    for name, xs in axes.items():
        ys = []
        for x in xs:
            if name == "rate_per_gpu_day":
                p = at_rate(base, x)
            elif name == "restart_scale":
                p = replace(base, hot_update_s=tuple(v * x for v in base.hot_update_s),
                            requeue_s=tuple(v * x for v in base.requeue_s))
            else:
                p = replace(base, **{name: x})
            ys.append(ettr(p))
        out[name] = {"x": xs, **{sys_: [y[sys_] for y in ys] for sys_ in ("byterobust", "requeue")}}
    pts = {k: ettr(at_rate(base, v)) for k, v in rates.items()}
    band = {sys_: [float(min(y for k, v in out.items() if k != "rate_per_gpu_day" for y in v[sys_])),
                   float(max(y for k, v in out.items() if k != "rate_per_gpu_day" for y in v[sys_]))]
            for sys_ in ("byterobust", "requeue")}
    return {"axes": out, "points": pts, "base": ettr(base), "band": band,
            "base_params": {"n_gpus": base.n_gpus, "days": base.days, "rate_per_gpu_day": base.mix.rate_per_gpu_day}}


def run_study(quick: bool = False, seed: int = 0) -> dict:
    """ByteRobust vs requeue-on-failure: ETTR over 90 days of a 9,600-GPU job (event-level), and
    its curves over the fault rate and the constants (:func:`ettr_curves`) with the real rates of
    the Acme clusters (:mod:`~models.systems.reliability.rates`) marked when the data directory
    holds them."""
    cal = calibrate_network_slowdowns(seed)
    slow = {k: v for k, v in cal.items() if k != "baseline_iter_s" and np.isfinite(v)}
    p = ETTRParams(net_slowdown=slow)
    seeds = [seed] if quick else [seed + i for i in range(5)]
    runs = []
    for s in seeds:
        faults = sample_faults(p.mix, p.n_gpus, p.horizon_s, s, p.gpus_per_host)
        runs.append({sys: simulate_ettr(p, sys, s, faults) for sys in ("byterobust", "requeue")})
    from .rates import real_rates

    shape = _replay_shape(p.hosts)
    demo_bad = [7]
    from hwcosim.models.systems.cluster.transport import Effects

    from .replay import MachineReplay

    world = Effects(p.n_gpus, p.hosts, 0)
    world.nan_at[demo_bad[0] * p.gpus_per_host] = 0.0
    sus, det = dual_phase_replay(*shape, MachineReplay(world, p.gpus_per_host, 1.0))
    bk = backup_hosts(8, p.n_gpus // 64, 8)
    summary = {sys: {"ettr_mean": float(np.mean([r[sys]["ettr"] for r in runs])),
                     "ettr_min": float(np.min([r[sys]["ettr"] for r in runs])),
                     "faults_mean": float(np.mean([r[sys]["faults"] for r in runs])),
                     "loss_h_mean": {k: float(np.mean([r[sys]["loss_s"][k] for r in runs])) / 3600
                                     for k in runs[0][sys]["loss_s"]},
                     "status": runs[0][sys]["status"]} for sys in ("byterobust", "requeue")}
    slim = [{sys: {k: v for k, v in r[sys].items() if k not in ("outcomes", "recoveries")} for sys in r}
            for r in runs]
    return {"params": {"n_gpus": p.n_gpus, "days": p.days, "iter_s": p.iter_s,
                       "rate_per_gpu_day": p.mix.rate_per_gpu_day, "standbys": runs[0]["byterobust"]["standbys"]},
            "calibration": cal, "seeds": seeds, "summary": summary, "runs": slim,
            "dual_phase_replay": {"m_n": shape, "faulty": demo_bad, "suspects": sus.tolist(), **det},
            "backup_hosts": {"shape_pp_dp_tp": [8, p.n_gpus // 64, 8], "ok": bool((bk >= 0).all()),
                             "offset": int(bk[0]) if bk[0] >= 0 else None},
            "curves": ettr_curves(_with(p, days=7.0 if quick else 30.0), [seed] if quick else seeds[:2],
                                  real_rates()),
            "paper": {"ettr": 0.97}}
