"""Real failure rates: the job outcomes of five GPU clusters (Acme trace summary).

Hu et al., "Characterization of Large Language Model Development in the Datacenter", NSDI 2024
(the Acme trace, InternLM/AcmeTrace ``cluster_summary.csv``), read from the data directory
(``dataset("acme-2024", "cluster_summary.csv")``; never copied into the repository).

A failure rate per GPU-hour is not in the table; it is derived from three of its columns: the
share of GPU time spent in jobs that ended in failure (``fail_rate_gpu_time``) divided by the
GPU-hours of the mean job (``avg_gpu_num * avg_run_time_gpu / 3600``), i.e. failed jobs per
GPU-hour of work if a failed job is as large as the mean job. It counts every failed job (user
code errors included, not only infrastructure faults), so it is an upper end for the rate a
fault-tolerance system faces; the reliability figures are curves over the rate with these points
marked, beside Llama 3's 419 interruptions in 54 days on 16,384 GPUs (Dubey et al. 2024).
"""

from __future__ import annotations

import csv

import numpy as np

__all__ = ["acme_rates", "real_rates", "LLAMA3_PER_GPU_DAY"]

#: Llama 3's unexpected interruptions: 419 in 54 days on 16,384 GPUs (Dubey et al. 2024).
LLAMA3_PER_GPU_DAY = 419 / (54 * 16384)


def acme_rates() -> dict:
    """``{cluster: {"per_gpu_hour", "per_gpu_day", "fail_rate_gpu_time", "avg_gpu_num",
    "avg_run_time_s"}}`` for the clusters whose row has the three columns (PAI has none)."""
    from hwcosim.models.data import dataset

    out = {}
    with open(dataset("acme-2024", "cluster_summary.csv"), newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                share = float(row["fail_rate_gpu_time"])
                gpus = float(row["avg_gpu_num"])
                run_s = float(row["avg_run_time_gpu"])
            except (KeyError, ValueError):
                continue
            if not (np.isfinite(share) and gpus > 0 and run_s > 0):
                continue
            per_h = share / (gpus * run_s / 3600.0)
            out[row["id"]] = {"per_gpu_hour": per_h, "per_gpu_day": 24.0 * per_h, "fail_rate_gpu_time": share,
                              "avg_gpu_num": gpus, "avg_run_time_s": run_s}
    return out


def real_rates() -> dict:
    """Llama 3's rate and, when the data directory holds the Acme trace, its clusters' (faults
    per GPU-day, named ``"Llama 3"``, ``"Acme <cluster>"``)."""
    from hwcosim.models.data import DatasetMissing

    out = {"Llama 3": LLAMA3_PER_GPU_DAY}
    try:
        out.update({f"Acme {k}": v["per_gpu_day"] for k, v in acme_rates().items()})
    except DatasetMissing:
        pass
    return out
