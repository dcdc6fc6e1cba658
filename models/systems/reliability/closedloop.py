"""ByteRobust as a closed loop on telemetry, against requeue-everything, over a month-long trace.

Wan et al., "Robust LLM Training Infrastructure at ByteDance", SOSP 2025 (arXiv 2509.16293).

Every fault of the trace is played on a 16-GPU **slice** of the job on the chunk-level transport
(:mod:`~models.systems.reliability.study` setup; the faulty GPU keeps its index modulo 16). The monitors
read only the slice's :class:`~models.systems.cluster.telemetry.Telemetry`; their detection time and the
localisation's verdict come from that telemetry and from the simulated actions' costs:

- **monitors** (:func:`monitor`): the host agent sees a process exit; the per-second inspection
  reads Xid events, NIC/switch link events (acted on when a link stays down ``link_hold_iters``
  healthy iterations or flaps ``link_flaps`` times: a flap that heals is background) and switch
  drop counters (a link dropping in each of the last ``drop_persist`` iterations far above the
  other links' background, :func:`~models.systems.reliability.noise.drop_suspects`); the training-signal monitor
  reads NaN losses; the hang monitor fires after ``hang_s`` without RDMA progress on any flow
  (ByteRobust: 10 min); the MFU monitor fires when iterations run ``mfu_drop`` slower than the
  healthy median for ``mfu_window_s``;
- **localisation** (:func:`localise`), each with its own cost: a hardware event names its machine
  (or link) at no extra cost; a process exit without one runs the stop-time checks and, finding
  nothing, re-attempts in place; a hang runs stack-trace analysis (the rank that never posted, or
  that received and never forwarded, from the logs); a NaN runs the dual-phase replay over the
  machines (each group re-runs a slice of the job on the transport with the machines' state,
  :class:`~models.systems.reliability.replay.MachineReplay`, and fails when that run's telemetry shows
  a NaN or a stall); an MFU decline looks for a late rank in the completion logs, then for link
  evidence, else gives up;
- **actions**: evict the named machine (warm standby + hot update, or a requeue if the pool is
  empty), isolate a link (ECMP routes around it), re-attempt in place, restore from the per-step
  in-memory checkpoint. An eviction of a machine that does not hold the fault is a **wrong
  eviction**: the fault is still there and is handled again, this time by requeueing everything.

Requeue-everything: no monitor but the NCCL/PyTorch timeout (a collective without progress for
``timeout_s`` on the slice's completion logs), then the whole job is requeued and restarts from the
last hourly checkpoint; slow faults and NaN run until they clear or a person notices (``nan_s``).

Rates and mix: ByteRobust's incident mix (Table: CUDA error 36.1%, CPU overload 11.0%, CPU OOM
10.1%, job hang 9.9%, disk full 5.0%, InfiniBand 2.9%, HDFS 2.0%, MFU decline 0.8%, NaN 0.3% of
778,135 jobs; :data:`~models.systems.reliability.faults.MIX_SOURCES`) at Llama 3's interruption rate (419
in 54 days on 16,384 GPUs; Dubey et al. 2024), because the ByteRobust figures we have give shares,
not a rate. Hot update 46-65 s and requeue 454-768 s (paper), in-memory checkpoints blocking
0.01-0.04 s per step (paper); the other costs are ours (:class:`LoopParams`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from hwcosim.models.errors import UsageError

from .faults import Fault, FaultKind, FaultMix, sample_faults

__all__ = ["LoopParams", "monitor", "localise", "play_fault", "run_loop", "run_study", "ettr_curve"]


@dataclass(frozen=True)
class LoopParams:
    """Costs and thresholds (P: paper, O: ours)."""

    n_gpus: int = 9600  # P
    gpus_per_host: int = 8
    days: float = 30.0
    iter_s: float = 10.0  # O: production iteration (the slice's are shorter; delays are in seconds)
    mix: FaultMix = field(default_factory=FaultMix)
    inspect_period_s: float = 1.0  # P: inspection every second
    report_s: float = 2.0  # O: agent -> controller report
    hang_s: float = 600.0  # P: zero RDMA traffic for 10 min
    mfu_drop: float = 0.1  # O
    mfu_window_s: float = 60.0  # O
    link_hold_iters: float = 3.0  # O: a link down this many healthy iterations is acted on
    link_flaps: int = 3  # O: ... or one going down this many times within mfu_window_s
    drop_persist: int = 3  # O: a link drops in this many iterations in a row
    drop_m: float = 10.0  # O: a link's drops this many times the background (noise.drop_suspects)
    stop_check_s: float = 60.0  # O
    stack_trace_s: float = 60.0  # O
    replay_s: float = 300.0  # O: one replay phase
    hot_update_s: tuple = (46.0, 65.0)  # P
    requeue_s: tuple = (454.0, 768.0)  # P
    ckpt_block_s: tuple = (0.01, 0.04)  # P
    timeout_s: float = 600.0  # P: ~10 min PyTorch/NCCL timeout
    base_ckpt_every_s: float = 3600.0  # O
    base_ckpt_block_s: float = 60.0  # O
    nan_s: float = 3600.0  # O: a person notices a NaN loss
    standbys: int = 4  # O (ByteRobust sizes the pool at a binomial p99; byterobust.standby_count)
    repair_s: float = 86400.0  # O

    @property
    def horizon_s(self) -> float:
        return self.days * 86400.0


# ---- monitors and localisation: telemetry only ------------------------------------------------
def monitor(tel, t_end: float, p: LoopParams, base_iter_s: float) -> dict:
    """Earliest detection by each ByteRobust monitor on ``tel`` up to ``t_end``:
    ``{monitor: (time, evidence)}``."""
    from .noise import drop_suspects, link_suspects

    out = {}

    def tick(t):
        return float(np.ceil(t / p.inspect_period_s - 1e-9) * p.inspect_period_s + p.report_s)

    for t, sensor, ident, _state in tel.hw(t_end):
        if sensor == "link":
            continue
        key = {"proc": "process exit", "xid": "inspection: xid"}[sensor]
        if key not in out:
            out[key] = (tick(t), (sensor, ident))
    # link events: a link down for link_hold_iters healthy iterations, or flapping link_flaps times
    # within mfu_window_s (a flap that heals at once is background)
    links = link_suspects(tel, t_end, p.link_hold_iters * base_iter_s, p.link_flaps, p.mfu_window_s)
    if links:
        out["inspection: link"] = (tick(links[0][0]), ("link", links[0][1]))
    # drop counters: at every iteration end, a link that dropped in each of the last drop_persist
    # iterations, far above the background the counters show
    n_l = int(tel.link_gpu.size) if tel.link_gpu is not None else 1 << 16
    ends = np.array([0.0, *(x for _i, x, _n in tel.losses_until(t_end))])
    t_drop = tel._drops[0]  # noqa: SLF001 - when the switch counters moved
    if t_drop.size:
        for j in range(p.drop_persist, ends.size):
            if ends[j] < t_drop.min():
                continue
            sus = drop_suspects(tel, ends[j - p.drop_persist:j + 1], n_l, p.drop_m)
            if sus.size:
                out["inspection: drops"] = (tick(ends[j]), ("drops", int(sus[0])))
                break
    for _it, t, nan in tel.losses_until(t_end):
        if nan:
            out["nan loss"] = (t + p.report_s, ("loss", None))
            break
    st = tel.state_log(-np.inf, t_end)
    if st.size:
        # last time any flow's D advanced (RDMA traffic) -> hang after hang_s of silence
        order = np.lexsort((st.t, st.inst * (1 << 32) + st.conn))
        d = st.D[order]
        key = (st.inst * (1 << 32) + st.conn)[order]
        moved = np.r_[False, (key[1:] == key[:-1]) & (d[1:] > d[:-1])]
        t_last = float(st.t[order][moved].max()) if moved.any() else float(st.t.min())
        done = [t for _i, t, _n in tel.losses_until(t_end)]
        t_last = max([t_last, *done])
        if t_end - t_last >= p.hang_s:
            out["zero RDMA traffic"] = (t_last + p.hang_s, ("hang", None))
    ends = np.array([t for _i, t, _n in tel.losses_until(t_end)])
    if ends.size > 3:
        it = np.diff(ends)
        slow = it > (1 + p.mfu_drop) * base_iter_s
        run_start = None
        for i in range(it.size):
            if slow[i]:
                run_start = ends[i] if run_start is None else run_start
                if ends[i + 1] - run_start >= p.mfu_window_s:
                    out["mfu decline"] = (float(ends[i + 1]), ("mfu", None))
                    break
            else:
                run_start = None
    return out


def localise(tel, signal: str, evidence, t: float, p: LoopParams, replay=None, hosts: int = 8) -> dict:
    """ByteRobust's localisation for the first monitor that fired: ``{"action", "target",
    "cost_s", "how"}``; ``action`` is ``evict`` (target: machine), ``isolate`` (target: link),
    ``reattempt`` or ``none``. ``replay(machines) -> bool`` re-runs the job's slice on a group of
    machines and says whether that replay failed (nothing else about the machines is known here)."""
    from .byterobust import dual_phase_replay
    from .mycroft import root_cause

    gph = tel.gpus_per_host
    if signal in ("inspection: xid",):
        return {"action": "evict", "target": evidence[1] // gph, "cost_s": 0.0, "how": "xid"}
    if signal == "inspection: link":
        lk = evidence[1]
        owner = _link_owner(tel, lk)
        if owner is not None:
            return {"action": "evict", "target": owner // gph, "cost_s": 0.0, "how": "nic link down"}
        return {"action": "isolate", "target": lk, "cost_s": 0.0, "how": "switch link down"}
    if signal == "inspection: drops":
        return {"action": "isolate", "target": evidence[1], "cost_s": 0.0, "how": "drop counters"}
    if signal == "process exit":
        # stop-time checks on every machine: a hardware error names the machine, else re-attempt
        xid = tel.hw(t + p.stop_check_s, "xid")
        if xid:
            return {"action": "evict", "target": xid[0][2] // gph, "cost_s": p.stop_check_s, "how": "stop-time checks"}
        return {"action": "reattempt", "target": None, "cost_s": p.stop_check_s, "how": "stop-time checks clean"}
    if signal == "zero RDMA traffic":
        rc = root_cause(tel, t, "failure")
        if rc["ranks"] and rc["component"] in ("gpu", "host"):
            return {"action": "evict", "target": int(rc["ranks"][0]) // gph, "cost_s": p.stack_trace_s,
                    "how": f"stack traces: {rc['rule']}"}
        if rc.get("flow") is not None:
            return {"action": "evict", "target": int(rc["ranks"][0]) // gph, "cost_s": p.stack_trace_s,
                    "how": "stack traces: stuck flow"}
        return {"action": "none", "target": None, "cost_s": p.stack_trace_s, "how": "stack traces inconclusive"}
    if signal == "nan loss":
        m = int(np.floor(np.sqrt(hosts)))
        while hosts % m:
            m -= 1
        n = hosts // m
        if replay is None:
            return {"action": "reattempt", "target": None, "cost_s": 0.0, "how": "no replay possible"}
        sus, _ = dual_phase_replay(m, n, replay)
        if sus.size == 1:
            return {"action": "evict", "target": int(sus[0]), "cost_s": 2 * p.replay_s, "how": "dual-phase replay"}
        return {"action": "reattempt", "target": None, "cost_s": 2 * p.replay_s, "how": "replay inconclusive"}
    if signal == "mfu decline":
        recs = [r for r in tel.records(t) if r.seq == 0 and np.isfinite(r.enter).all()]
        if len(recs) > 2:
            lags = np.array([r.enter - np.median(r.enter) for r in recs[-3:]]).mean(axis=0)
            comp = np.median([np.median(r.enter) for r in recs[:2]]) / max(recs[0].it + 1, 1)
            if lags.max() > 0.05 * max(comp, 1e-9):
                g = int(recs[-1].ranks[np.argmax(lags)])
                return {"action": "evict", "target": g // gph, "cost_s": 0.0, "how": "late rank"}
        from .noise import drop_suspects

        n_l = int(tel.link_gpu.size) if tel.link_gpu is not None else 1 << 16
        ends = np.array([0.0, *(x for _i, x, _n in tel.losses_until(t))])
        sus = drop_suspects(tel, ends[-p.drop_persist - 1:], n_l, p.drop_m) if ends.size > p.drop_persist else []
        if len(sus):
            return {"action": "isolate", "target": int(sus[0]), "cost_s": 0.0, "how": "drop counters"}
        return {"action": "none", "target": None, "cost_s": 0.0, "how": "no culprit found"}
    return {"action": "none", "target": None, "cost_s": 0.0, "how": f"unknown signal {signal}"}


def _link_owner(tel, link: int):
    """GPU whose NIC port (or NVLink) ``link`` is, from the cluster inventory; None for a fabric
    link."""
    if tel.link_gpu is None or link >= tel.link_gpu.size:
        return None
    g = int(tel.link_gpu[link])
    return g if g >= 0 else None


# ---- one fault on the slice --------------------------------------------------------------------
def _slice_fault(f: Fault, st, rng) -> Fault:
    g = int(f.target) % st.spec.n_gpus if f.target >= 0 else int(rng.integers(st.spec.n_gpus))
    target = g
    if f.kind == FaultKind.CPU_OVERLOAD:
        target = (int(f.target) * st.topo.gpus_per_host) % st.spec.n_gpus // st.topo.gpus_per_host
    elif f.kind == FaultKind.LINK_LOSSY:
        target = int(rng.choice(st.fabric))
    elif f.kind == FaultKind.SWITCH_FAIL:
        target = int(rng.integers(st.topo.n_pods * st.topo.aggs_per_pod))
    onset = 3 * st.it_s + float(rng.uniform(0, st.it_s))
    return Fault(0, f.kind, onset, target, f.duration, f.severity, f.explicit)


def play_fault(f: Fault, st, p: LoopParams, seed: int, noise=None) -> dict:
    """Run fault ``f`` on the slice; what ByteRobust's loop and the timeout baseline observe
    (``noise``: background events in the run, :mod:`~models.systems.reliability.noise`)."""
    from .mechanics import run_job
    from .replay import MachineReplay

    rng = np.random.default_rng(seed)
    sf = _slice_fault(f, st, rng)
    slow_kinds = (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD, FaultKind.NIC_FLAP, FaultKind.LINK_LOSSY,
                  FaultKind.SWITCH_FAIL)
    # stop faults need the 10-minute hang / timeout windows; slow ones run to the MFU window
    span = p.hang_s + 60.0 if sf.kind not in slow_kinds else p.mfu_window_s + 30 * st.it_s
    horizon = sf.t + span
    sim = run_job(st.topo, replace(st.spec, iterations=int(horizon / st.it_s) + 5), st.place, [sf], horizon,
                  seed=seed, route_seed=0, noise=noise)
    tel = sim.tel
    mons = monitor(tel, horizon, p, st.it_s)
    it = sim.iteration_times
    after = it[int(np.ceil(sf.t / st.it_s)) + 1:] if it.size else it
    slow = float(np.median(after) / st.it_s) if after.size else np.inf
    gph = st.topo.gpus_per_host
    last_end = sim.iter_end[-1] if sim.iter_end else 0.0
    out = {"kind": f.kind, "slice_fault": sf, "slowdown": slow, "stalled": bool(horizon - last_end > 20 * st.it_s)}
    if mons:
        sig, (t_det, ev) = min(mons.items(), key=lambda kv: (kv[1][0], not kv[0].startswith("inspection")))
        # a replay is an action on the machines (sim.fx: their physical state); the localiser sees
        # only whether each replayed group failed
        loc = localise(tel, sig, ev, t_det, p, replay=MachineReplay(sim.fx, gph, t_det), hosts=st.topo.n_hosts)
        truth_host = (sf.target if sf.kind == FaultKind.CPU_OVERLOAD else sf.target // gph)
        right = None
        if loc["action"] == "evict":
            right = sf.kind not in (FaultKind.LINK_LOSSY, FaultKind.SWITCH_FAIL) and loc["target"] == truth_host
        out.update(signal=sig, detect_s=t_det - sf.t, localise=loc, right=right)
    # the baseline: the NCCL timeout on the completion logs (a collective open for timeout_s)
    recs = tel.records(horizon)
    opened = [np.nanmax(r.enter) for r in recs if not np.isfinite(r.exit).all()]
    if opened and horizon - min(opened) >= p.timeout_s:
        out["timeout_s"] = min(opened) + p.timeout_s - sf.t
    return out


# ---- the month ---------------------------------------------------------------------------------
def run_loop(p: LoopParams, system: str, faults: list[Fault], played: dict, seed: int) -> dict:
    """ETTR accounting of ``system`` (``byterobust`` | ``requeue``) over the trace, with the
    detection and localisation outcomes ``played[fid]`` measured on the slice."""
    if system not in ("byterobust", "requeue"):
        raise UsageError(f"system must be 'byterobust' or 'requeue', not {system!r}")
    rng = np.random.default_rng(seed + (0 if system == "byterobust" else 7919))
    br = system == "byterobust"
    horizon = p.horizon_s
    ckpt_every = p.iter_s if br else p.base_ckpt_every_s
    ckpt_block = float(np.mean(p.ckpt_block_s)) if br else p.base_ckpt_block_s
    ckpt_frac = ckpt_block / (ckpt_every + ckpt_block)
    pool = [0.0] * (p.standbys if br else 0)
    up_at, seg0 = 0.0, 0.0
    loss = {"detect": 0.0, "localise": 0.0, "restart": 0.0, "lost_work": 0.0, "slow": 0.0}
    down = 0.0
    rows = []
    wrong = 0

    def restart(t: float) -> float:
        if br:
            ready = [i for i, ta in enumerate(pool) if ta <= t]
            if ready:
                pool[ready[0]] = t + p.repair_s
                return float(rng.uniform(*p.hot_update_s))
        return float(rng.uniform(*p.requeue_s))

    def lost_since_ckpt(t: float) -> float:
        seg = max(t - seg0, 0.0)
        return seg - np.floor(seg / ckpt_every) * ckpt_every

    for f in faults:
        if f.t >= horizon:
            break
        if f.t < up_at:
            rows.append({"fid": f.fid, "kind": f.kind, "status": "absorbed"})
            continue
        pl = played[f.fid]
        slow = pl["slowdown"] if np.isfinite(pl["slowdown"]) else 1.0
        stop = f.kind in (FaultKind.GPU_FAIL, FaultKind.NIC_DOWN, FaultKind.HANG) or pl["stalled"]
        dur = min(f.duration, horizon - f.t)
        row = {"fid": f.fid, "kind": f.kind}
        if not br:
            if stop:
                d_det = pl.get("timeout_s", p.timeout_s)
                d_rs = restart(f.t + d_det)
                lost = lost_since_ckpt(f.t)
                loss["detect"] += d_det
                loss["restart"] += d_rs
                loss["lost_work"] += lost
                down += d_det + d_rs
                up_at, seg0 = f.t + d_det + d_rs, f.t + d_det + d_rs
                row.update(status="detected", detect_s=d_det, action="requeue all")
            elif f.kind == FaultKind.NAN:
                d_det = p.nan_s
                lost = lost_since_ckpt(f.t) + d_det
                d_rs = restart(f.t + d_det)
                loss["detect"] += 0.0
                loss["lost_work"] += lost
                loss["restart"] += d_rs
                down += d_rs
                up_at, seg0 = f.t + d_det + d_rs, f.t + d_det + d_rs
                row.update(status="detected", detect_s=d_det, action="person rolls back")
            else:
                loss["slow"] += dur * (1 - 1 / slow)
                row.update(status="missed", detect_s=None, action="none")
            rows.append(row)
            continue
        # ---- ByteRobust
        if "signal" not in pl:
            if stop:  # nothing fired on the slice within its window: fall back to the timeout
                d_det = pl.get("timeout_s", p.timeout_s)
                d_rs = float(rng.uniform(*p.requeue_s))
                loss["detect"] += d_det
                loss["restart"] += d_rs
                loss["lost_work"] += lost_since_ckpt(f.t)
                down += d_det + d_rs
                up_at, seg0 = f.t + d_det + d_rs, f.t + d_det + d_rs
                row.update(status="detected", detect_s=d_det, action="timeout, requeue all")
            else:
                loss["slow"] += dur * (1 - 1 / slow)
                row.update(status="missed", detect_s=None, action="none")
            rows.append(row)
            continue
        d_det = pl["detect_s"]
        loc = pl["localise"]
        d_loc = loc["cost_s"]
        row.update(status="detected", detect_s=d_det, signal=pl["signal"], action=loc["action"], how=loc["how"])
        if loc["action"] == "evict" and not pl["right"]:
            wrong += 1
            row["wrong_eviction"] = True
        t_stop = f.t + d_det
        if not stop and f.kind != FaultKind.NAN:
            if d_det >= dur:
                loss["slow"] += dur * (1 - 1 / slow)
                row["status"] = "missed"
                rows.append(row)
                continue
            loss["slow"] += d_det * (1 - 1 / slow)
            if loc["action"] == "isolate":
                rows.append(row)
                continue  # routed around, no restart
            if loc["action"] == "none":
                loss["slow"] += (dur - d_det) * (1 - 1 / slow)
                rows.append(row)
                continue
            d_rs = restart(t_stop + d_loc)  # planned: save, evict, hot update; no work lost
            loss["localise"] += d_loc * (1 - 1 / slow)
            loss["restart"] += d_rs
            down += d_rs
            if row.get("wrong_eviction"):
                loss["slow"] += (dur - d_det) * (1 - 1 / slow)  # the slow machine is still there
            up_at, seg0 = t_stop + d_loc + d_rs, t_stop + d_loc + d_rs
            rows.append(row)
            continue
        lost = lost_since_ckpt(f.t) + (d_det if f.kind == FaultKind.NAN else 0.0)
        d_rs = restart(t_stop + d_loc)
        extra = 0.0
        if row.get("wrong_eviction") or loc["action"] == "none":
            # the fault is still there: the job fails again at once; requeue everything (scheduler checks)
            extra = d_det + float(rng.uniform(*p.requeue_s))
        loss["detect"] += d_det if stop else 0.0
        loss["localise"] += d_loc
        loss["restart"] += d_rs + extra
        loss["lost_work"] += lost
        down += (d_det if stop else 0.0) + d_loc + d_rs + extra
        up_at = seg0 = t_stop + d_loc + d_rs + extra
        rows.append(row)
    loss["checkpoint"] = (horizon - down) * ckpt_frac
    productive = horizon - sum(loss.values())
    det = [r["detect_s"] for r in rows if r.get("detect_s") is not None]
    # faults faster than the recoveries: the losses overlap past the horizon; the job made no progress
    return {"system": system, "ettr": max(productive, 0.0) / horizon, "loss_s": loss, "faults": len(rows),
            "wrong_evictions": wrong, "rows": rows,
            "detect_s": {"median": float(np.median(det)) if det else None,
                         "p90": float(np.percentile(det, 90)) if det else None},
            "status": {s: sum(1 for r in rows if r["status"] == s) for s in ("detected", "absorbed", "missed")},
            "evictions": sum(1 for r in rows if r.get("action") == "evict")}


def ettr_curve(pool: list[dict], p: LoopParams, rates, named: dict, seeds, max_faults: float = 3000.0,
               st=None, play_per_kind: int = 0, sweeps: dict | None = None) -> dict:
    """ETTR of ByteRobust's closed loop and of requeue-everything over the fault rate, from faults
    played on the slice (their detection delays, localisation verdicts and slow-downs are what the
    monitors measured on the transport's telemetry, never inputs).

    ``pool``: outcomes of :func:`play_fault` (each with its ``kind``). At every rate in ``rates``
    and every named real rate of ``named`` (per GPU-day), a fault stream of ``p``'s mix is drawn
    (shortened to at most ``max_faults`` expected faults, at least a quarter of a day) and each
    fault takes the outcome of a played fault of its kind drawn from the pool; :func:`run_loop`
    then accounts both systems. A kind with no played fault is played ``play_per_kind`` times on
    ``st``'s slice first; with 0 its faults are left out of the streams (``left_out``: their share
    of the faults). ``sweeps``: ``{LoopParams field: values}`` the loop's own constants are swept
    over at the first named rate (the band). Returns ``{"x", "byterobust", "requeue", "points",
    "band", "pool", "detect_s_by_kind", "left_out", "rate_at_97"}`` (``rate_at_97``: the highest
    rate at which each system still reaches the paper's 97%, log-linear between the curve's
    points and the named rates)."""
    from .faults import KINDS

    by: dict = {}
    for pl in pool:
        by.setdefault(pl["kind"], []).append(pl)
    if play_per_kind and st is not None:
        for j, k in enumerate(KINDS):
            if p.mix.weights.get(k, 0.0) > 0 and k not in by:
                one = replace(p.mix, weights={k: 1.0})
                for f in sample_faults(one, p.n_gpus, p.horizon_s, int(seeds[0]) * 131 + j, p.gpus_per_host,
                                       n=play_per_kind):
                    by.setdefault(k, []).append(play_fault(f, st, p, int(seeds[0]) * 100003 + 5000 + 10 * j + f.fid))
    left = {"faults": 0, "left_out": 0}

    def ettr(q: LoopParams, rate: float) -> dict:
        q = replace(q, mix=replace(q.mix, rate_per_gpu_day=float(rate)))
        per_day = max(rate * q.n_gpus, 1e-12)
        q = replace(q, days=float(min(q.days, max(0.25, max_faults / per_day))))
        out = {"byterobust": [], "requeue": []}
        for sd in seeds:
            rng = np.random.default_rng((int(sd), 4243))
            faults = sample_faults(q.mix, q.n_gpus, q.horizon_s, int(sd), q.gpus_per_host)
            kept = [f for f in faults if f.kind in by]
            left["faults"] += len(faults)
            left["left_out"] += len(faults) - len(kept)
            played = {f.fid: by[f.kind][int(rng.integers(len(by[f.kind])))] for f in kept}
            for sys_ in out:
                out[sys_].append(run_loop(q, sys_, kept, played, int(sd))["ettr"])
        return {k: float(np.mean(v)) for k, v in out.items()}

    ys = [ettr(p, r) for r in rates]
    pts = {k: ettr(p, v) for k, v in named.items()}
    band_at = next(iter(named.values())) if named else p.mix.rate_per_gpu_day
    sw = {}
    for name, xs in (sweeps or {}).items():
        sw[name] = {"x": list(xs), **{s_: [] for s_ in ("byterobust", "requeue")}}
        for x in xs:
            e = ettr(replace(p, **{name: x}), band_at)
            for s_ in ("byterobust", "requeue"):
                sw[name][s_].append(e[s_])
    allv = {s_: [y for v in sw.values() for y in v[s_]] for s_ in ("byterobust", "requeue")}
    band = {s_: [float(min(v)), float(max(v))] if v else None for s_, v in allv.items()}
    det = {k: [pl["detect_s"] for pl in v if pl.get("detect_s") is not None] for k, v in by.items()}
    # highest rate still at the paper's 97%: log-linear between the points of the curve and the named rates
    xs = np.array([*map(float, rates), *map(float, named.values())])
    order = np.argsort(xs)
    lx = np.log(xs[order])
    cross = {}
    for s_ in ("byterobust", "requeue"):
        y = np.array([e[s_] for e in ys] + [e[s_] for e in pts.values()])[order]
        ok = np.flatnonzero(y >= 0.97)
        if ok.size == 0 or ok[-1] == y.size - 1:
            cross[s_] = None if ok.size == 0 else float(xs[order][-1])
        else:
            i = int(ok[-1])
            f = (y[i] - 0.97) / (y[i] - y[i + 1])
            cross[s_] = float(np.exp(lx[i] + f * (lx[i + 1] - lx[i])))
    return {"x": [float(r) for r in rates], "byterobust": [y["byterobust"] for y in ys],
            "requeue": [y["requeue"] for y in ys], "points": pts, "rates": dict(named), "sweeps": sw, "band": band,
            "band_rate": float(band_at), "pool": {k: len(v) for k, v in by.items()},
            "detect_s_by_kind": {k: float(np.median(v)) if v else None for k, v in det.items()},
            "left_out": left["left_out"] / max(left["faults"], 1), "seeds": [int(x) for x in seeds],
            "rate_at_97": cross,
            "base_params": {"n_gpus": p.n_gpus, "days": p.days, "base_ckpt_every_s": p.base_ckpt_every_s,
                            "timeout_s": p.timeout_s, "standbys": p.standbys}}


def run_study(quick: bool = False, seed: int = 0) -> dict:
    """A month (quick: a week) of a 9,600-GPU job, ByteRobust's closed loop vs requeue-everything,
    and the ETTR curve over the fault rate from the faults played on the slice (:func:`ettr_curve`;
    the real Acme rates and Llama 3's marked)."""
    from .rates import real_rates
    from .study import setup

    p = LoopParams(days=7.0 if quick else 30.0)
    st = setup(seed, iterations=60)
    seeds = [seed] if quick else [seed + i for i in range(3)]
    runs = []
    pool = []
    for s in seeds:
        faults = sample_faults(p.mix, p.n_gpus, p.horizon_s, s, p.gpus_per_host)
        played = {f.fid: play_fault(f, st, p, s * 100003 + f.fid) for f in faults}
        pool += list(played.values())
        runs.append({sys_: run_loop(p, sys_, faults, played, s) for sys_ in ("byterobust", "requeue")})
    per_kind: dict = {}
    for r in runs:
        for sys_ in ("byterobust", "requeue"):
            for row in r[sys_]["rows"]:
                d = per_kind.setdefault(row["kind"], {}).setdefault(sys_, {"n": 0, "detected": 0, "detect_s": [],
                                                                           "wrong_evictions": 0})
                if row["status"] == "absorbed":
                    continue
                d["n"] += 1
                if row.get("detect_s") is not None and row["status"] == "detected":
                    d["detected"] += 1
                    d["detect_s"].append(row["detect_s"])
                d["wrong_evictions"] += int(bool(row.get("wrong_eviction")))
    for k in per_kind.values():
        for d in k.values():
            ds = d.pop("detect_s")
            d["detect_median_s"] = float(np.median(ds)) if ds else None
    summary = {sys_: {"ettr_mean": float(np.mean([r[sys_]["ettr"] for r in runs])),
                      "ettr_min": float(np.min([r[sys_]["ettr"] for r in runs])),
                      "wrong_evictions": int(sum(r[sys_]["wrong_evictions"] for r in runs)),
                      "evictions": int(sum(r[sys_]["evictions"] for r in runs)),
                      "faults": int(sum(r[sys_]["faults"] for r in runs)),
                      "loss_h": {k: float(np.mean([r[sys_]["loss_s"][k] for r in runs])) / 3600
                                 for k in runs[0][sys_]["loss_s"]}}
               for sys_ in ("byterobust", "requeue")}
    det = {sys_: sorted(row["detect_s"] for r in runs for row in r[sys_]["rows"]
                        if row.get("detect_s") is not None and row["status"] == "detected")
           for sys_ in ("byterobust", "requeue")}
    slim = [{s: {k: v for k, v in r[s].items() if k != "rows"} for s in r} for r in runs]
    return {"params": {"n_gpus": p.n_gpus, "days": p.days, "rate_per_gpu_day": p.mix.rate_per_gpu_day,
                       "slice_gpus": st.spec.n_gpus, "slice_iter_s": st.it_s},
            "seeds": seeds, "summary": summary, "per_kind": per_kind, "detect_s": det, "runs": slim,
            "rows": [r["byterobust"]["rows"] for r in runs],
            "curve": ettr_curve(pool, p, np.geomspace(1e-4, 2.0, 4 if quick else 9), real_rates(), seeds, st=st,
                                play_per_kind=0 if quick else 2,
                                sweeps={"base_ckpt_every_s": [900.0, 3600.0, 7200.0] if quick
                                        else [900.0, 1800.0, 3600.0, 7200.0],
                                        "standbys": [0, 4, 16] if quick else [0, 1, 4, 16],
                                        "nan_s": [600.0, 3600.0] if quick else [600.0, 3600.0, 14400.0]}),
            "paper": {"ettr": 0.97, "gpu_lost_detect_s": 10.0, "nic_crash_detect_s": 30.0, "hang_detect_s": 600.0,
                      "hot_update_s": [46, 65], "requeue_s": [454, 768]}}
