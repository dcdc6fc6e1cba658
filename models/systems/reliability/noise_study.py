"""The noise study: every detector (C4D, Mycroft, ByteRobust's closed loop) with the background
noise of :mod:`.noise` off, at its default rates and above, scored on precision, recall and false
alarms per day (the noise itself is never a fault)."""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError

from .noise import NoiseParams

__all__ = ["run_noise_study", "COST_SWEEP"]

#: C4D's slow-rank cost test (healthy iterations a slow run must cost) the study sweeps; 0 is the rule
#: without it (persistence and spread alone).
COST_SWEEP = (0.0, 1.0, 2.0, 4.0)


def run_noise_study(quick: bool = False, seed: int = 0, scales=(0.0, 1.0, 4.0), n_trials: int | None = None,
                    healthy_runs: int | None = None, horizon_s: float = 50.0, loop_trials: int | None = None,
                    slow_trials: int | None = None) -> dict:
    """C4D, Mycroft and ByteRobust's monitors at noise ``scales`` x the default rates (0: none).

    For each scale: C4D's and Mycroft's injected-fault studies with the noise in every trial
    (precision: verdicts that name the fault / verdicts; recall: faults named / faults),
    ``loop_trials`` faults (kinds in turn) through ByteRobust's closed loop (precision: right
    evictions or isolations / actions; recall: right actions / faults), and
    ``healthy_runs`` fault-free runs of ``horizon_s`` on which any verdict is a false alarm
    (counted once per run, so the rate per day is a lower bound). The noise events of every run
    are listed by kind. C4D's slow-rank cost test is swept over :data:`COST_SWEEP` on the same
    healthy runs (false alarms per day) and on ``slow_trials`` GPU-slow / CPU-overload faults in
    the same noise (recall, delay from onset to the verdict naming the culprit).
    """
    from . import c4d, closedloop, mycroft
    from .faults import KINDS, Fault, FaultKind
    from .study import draw_fault, run_trial, setup

    _TRANSIENT = (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD, FaultKind.NIC_FLAP, FaultKind.LINK_LOSSY,
                  FaultKind.SWITCH_FAIL)
    _SEVERITY = {FaultKind.GPU_SLOW: 2.5, FaultKind.CPU_OVERLOAD: 2.5, FaultKind.LINK_LOSSY: 0.3,
                 FaultKind.NIC_FLAP: 2.0}
    if not (horizon_s > 0):
        raise UsageError(f"horizon_s must be > 0, not {horizon_s!r}")
    n_trials = n_trials or (10 if quick else 30)
    healthy_runs = healthy_runs or (4 if quick else 16)
    loop_trials = (5 if quick else 27) if loop_trials is None else int(loop_trials)
    slow_trials = (4 if quick else 16) if slow_trials is None else int(slow_trials)
    rng = np.random.default_rng((seed, 9))
    st = setup(seed, iterations=60)
    sampled = mycroft.sample_ranks(st.place, mycroft.MycroftParams().max_sampled, seed)
    out = []
    for sc in scales:
        nz = NoiseParams(scale=float(sc)) if sc else None
        srng = np.random.default_rng((seed, 11))
        rc = c4d.run_study(seed=seed, noise=nz, n_trials=n_trials)
        rm = mycroft.run_study(seed=seed, noise=nz, n_trials=n_trials)
        alarms = {"c4d": [], "mycroft": [], "byterobust": []}
        events = {"drops": 0, "flap": 0, "slow": 0}
        cost_fa = dict.fromkeys(COST_SWEEP, 0)
        for i in range(healthy_runs):
            sim = run_trial(st, None, horizon_s, seed, noise=nz, noise_seed=seed * 7919 + 17 * i + 1)
            for e in sim.noise_events:
                events[e["kind"]] += 1
            d = c4d.diagnose(sim.tel, c4d.C4DParams(), horizon_s)
            if d is not None:
                alarms["c4d"].append(d.cls)
            for k in COST_SWEEP:
                cost_fa[k] += c4d.diagnose(sim.tel, c4d.C4DParams(slow_cost=k), horizon_s) is not None
            t = mycroft.trigger(sim.tel, mycroft.MycroftParams(), sampled, horizon_s)
            if t is not None:
                alarms["mycroft"].append(t[1])
            m = closedloop.monitor(sim.tel, horizon_s, closedloop.LoopParams(), st.it_s)
            if m:
                alarms["byterobust"].append(min(m.items(), key=lambda kv: kv[1][0])[0])
        # ByteRobust's loop on injected faults (hang and timeout windows shortened to keep runs short)
        lp = closedloop.LoopParams(hang_s=20 * st.it_s, mfu_window_s=10 * st.it_s)
        acted = right = 0
        for i in range(loop_trials):
            k = KINDS[i % len(KINDS)]
            f = Fault(i, k, 0.0, int(rng.integers(st.spec.n_gpus)), 3600.0 if k in _TRANSIENT else np.inf,
                      _SEVERITY.get(k, 1.0), k not in (FaultKind.HANG, FaultKind.NAN))
            pl = closedloop.play_fault(f, st, lp, seed * 1009 + i, noise=nz)
            loc = pl.get("localise", {"action": "none"})
            if loc["action"] in ("evict", "isolate"):
                acted += 1
                sf = pl["slice_fault"]
                right += bool(pl.get("right")) or (loc["action"] == "isolate" and sf.kind == FaultKind.LINK_LOSSY
                                                    and loc["target"] == sf.target)
        loop_pr = (right / acted if acted else float("nan"), right / loop_trials if loop_trials else float("nan"))
        # C4D's slow-rank rule on slow faults (GPU slow / CPU overload at the mix's 1.5-4x) in the same
        # noise, over the cost test: recall and the delay from the onset to the verdict naming the culprit
        slow_runs = []
        for j in range(slow_trials):
            kind = (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD)[j % 2]
            f, _ = draw_fault(srng, kind, st, 2)
            sim = run_trial(st, f, f.t + 30 * st.it_s, seed, noise=nz, noise_seed=seed * 7919 + 31 * j + 3)
            gph = st.topo.gpus_per_host
            hit = {}
            for k in COST_SWEEP:
                ev = c4d.slow_rank_events(sim.tel, c4d.C4DParams(slow_cost=k), f.t + 30 * st.it_s)
                ok = [e for e in ev if e["t"] >= f.t and (e["rank"] == f.target if kind == FaultKind.GPU_SLOW
                                                          else e["rank"] // gph == f.target)]
                hit[k] = ok[0]["t"] - f.t if ok else None
            slow_runs.append(hit)
        days = healthy_runs * horizon_s / 86400.0
        cost = {str(k): {"false_alarms_per_day": cost_fa[k] / days,
                         "slow_recall": sum(h[k] is not None for h in slow_runs) / max(len(slow_runs), 1),
                         "slow_delay_s": _q([h[k] for h in slow_runs if h[k] is not None])} for k in COST_SWEEP}
        row = {"scale": float(sc), "healthy_s": healthy_runs * horizon_s, "noise_events": events,
               "c4d": {"precision": rc["precision"], "recall": rc["recall"],
                       "recall_symptomatic": rc["recall_symptomatic"], "slow_cost_sweep": cost},
               "mycroft": {"precision": rm["precision"], "recall": rm["rank_accuracy"],
                           "detect_median_s": rm["detect_median_s"]},
               "byterobust": {"precision": loop_pr[0], "recall": loop_pr[1], "trials": loop_trials}}
        for k, v in alarms.items():
            row[k].update(false_alarm_runs=len(v), false_alarms_per_day=len(v) / days,
                          alarms={a: v.count(a) for a in sorted(set(v))})
        out.append(row)
    return {"params": NoiseParams().__dict__, "n_trials": n_trials, "healthy_runs": healthy_runs,
            "horizon_s": horizon_s, "iter_s": st.it_s, "rows": out}


def _q(v) -> dict:
    """n / p50 / p90 / max of a sample of delays (None when empty)."""
    if not v:
        return {"n": 0, "p50": None, "p90": None, "max": None}
    a = np.asarray(v, dtype=float)
    return {"n": int(a.size), "p50": float(np.median(a)), "p90": float(np.percentile(a, 90)), "max": float(a.max())}
