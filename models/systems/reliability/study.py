"""Shared harness of the detector studies: one job, one injected fault per trial, on the
chunk-level transport (:mod:`hwcosim.models.systems.cluster.transport`).

The harness knows the ground truth (the fault it injected) and uses it **only to score**; the
detectors get ``sim.tel`` and nothing else. :func:`confusion` builds the fault kind x diagnosis
matrices and :func:`confusion_png` draws them.

Setup (ours): 2 pods x 2 ToRs x 2 hosts of 2 GPUs, 2 x 200 Gb/s ports per GPU NIC, 2:1
oversubscribed ToR and aggregation uplinks, ECMP; a DP = 16 ring job with 2 NCCL channels,
0.5 s of compute and an all-reduce of about the same length per iteration.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from hwcosim.models.systems.cluster.job import JobSpec, placement
from hwcosim.models.systems.cluster.topology import LinkKind, clos

from .faults import Fault, FaultKind
from .mechanics import run_job

__all__ = ["Setup", "setup", "draw_fault", "confusion", "confusion_png", "symptom"]


@dataclass
class Setup:
    topo: object
    spec: JobSpec
    place: np.ndarray
    it_s: float
    comm_s: float
    fabric: np.ndarray  # ToR/agg up-links the job's connections use (lossy-link targets)
    iter_times: np.ndarray


def setup(seed: int = 0, iterations: int = 60) -> Setup:
    """The study job and its healthy run (cached per ``(seed, iterations)``: every study and the
    noise study share it; callers do not modify it)."""
    return _setup(int(seed), int(iterations))


@functools.lru_cache(maxsize=8)
def _setup(seed: int, iterations: int) -> Setup:
    topo = clos(2, 2, 2, gpus_per_host=2, nic_ports=2, aggs_per_pod=2, cores_per_plane=2, tor_oversub=2.0,
                core_oversub=2.0)
    spec = JobSpec("study", dp=16, compute_s=0.5, grad_bytes=6e9, iterations=iterations, channels=2)
    place = placement(spec, np.arange(16))
    base = run_job(topo, spec, place, [], np.inf, seed=seed, record=False)
    it = base.iteration_times
    used = np.unique(np.concatenate([p[p >= 0] for c in base.colls for p in c.paths]))
    fabric = used[(topo.kind[used] == LinkKind.TOR_UP) | (topo.kind[used] == LinkKind.AGG_UP)]
    return Setup(topo, spec, place, float(np.median(it)), float(np.median(it)) - spec.compute_s, fabric, it)


def draw_fault(rng, kind: str, st: Setup, warmup: int) -> tuple[Fault, bool]:
    """One fault of ``kind`` at a random phase of iteration ``warmup + 1``; returns (fault,
    onset falls in the compute phase)."""
    topo = st.topo
    g = int(rng.integers(st.spec.n_gpus))
    phase = float(rng.uniform(0, st.it_s))
    onset = warmup * st.it_s + phase + 0.01 * st.it_s
    sev, target, dur = 1.0, g, np.inf
    if kind in (FaultKind.GPU_SLOW, FaultKind.CPU_OVERLOAD):
        sev = float(rng.uniform(1.5, 4.0))
        if kind == FaultKind.CPU_OVERLOAD:
            target = g // topo.gpus_per_host
    elif kind == FaultKind.LINK_LOSSY:
        sev, target = float(rng.uniform(0.1, 0.5)), int(rng.choice(st.fabric))
    elif kind == FaultKind.NIC_FLAP:
        sev, dur = 0.05, 60.0
    elif kind == FaultKind.SWITCH_FAIL:
        target = int(rng.integers(topo.n_pods * topo.aggs_per_pod))
    explicit = kind in (FaultKind.GPU_FAIL, FaultKind.NIC_DOWN, FaultKind.NIC_FLAP, FaultKind.LINK_LOSSY,
                        FaultKind.SWITCH_FAIL)
    return Fault(0, kind, onset, target, dur, sev, explicit), phase < st.spec.compute_s * 0.99


def run_trial(st: Setup, fault: Fault | None, horizon: float, seed: int = 0, noise=None, noise_seed=None):
    """One trial on the study job (``noise``: background events, :mod:`~models.systems.reliability.noise`)."""
    return run_job(st.topo, st.spec, st.place, [] if fault is None else [fault], horizon, seed=seed, noise=noise,
                   noise_seed=noise_seed)


def symptom(sim, st: Setup, horizon: float) -> bool:
    """Ground truth for scoring: the job stalled or an iteration took 5% longer than healthy."""
    it = sim.iteration_times
    expected = int(horizon // st.it_s) - 1
    return bool(len(it) < min(expected, st.spec.iterations) or (it.size and it.max() > 1.05 * st.it_s))


def confusion(pairs, rows, cols) -> dict:
    """Counts of (truth, diagnosis) pairs as ``{"rows", "cols", "counts"}`` (None -> "none")."""
    m = np.zeros((len(rows), len(cols)), dtype=np.int64)
    for a, b in pairs:
        m[rows.index(a if a is not None else "none"), cols.index(b if b is not None else "none")] += 1
    return {"rows": list(rows), "cols": list(cols), "counts": m.tolist()}


def confusion_png(path, cm: dict, title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    m = np.array(cm["counts"], dtype=float)
    frac = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(1.1 * len(cm["cols"]) + 2.5, 0.45 * len(cm["rows"]) + 1.8))
    ax.imshow(frac, cmap="Blues", vmin=0, vmax=1)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if m[i, j]:
                ax.text(j, i, int(m[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if frac[i, j] > 0.6 else "black")
    ax.set_xticks(range(len(cm["cols"])), cm["cols"], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(cm["rows"])), cm["rows"], fontsize=8)
    ax.set_xlabel("diagnosis")
    ax.set_ylabel("injected fault kind")
    ax.set_title(title, fontsize=9)
    return save_png(fig, path)
