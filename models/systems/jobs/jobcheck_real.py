"""``jobcheck`` scored on real failures: scripts reconstructed from public failure reports.

The corpus (``corpus_real/``, see its README) holds training scripts written here, each reproducing the
mechanism of a failure reported in a GitHub issue of a public ML repository, and the fixed scripts of
those threads; ``corpus_real/index.json`` names, for every entry, the script, its arguments, the
source URL, its category in Zhang et al.'s taxonomy (ICSE 2020), the ``jobcheck`` category a correct
check would report (``expect``) and when the reported failure happens in the real job (``fails_at``),
all written before ``jobcheck`` was run on them.

:func:`evaluate` runs :func:`~hwcosim.models.systems.jobs.jobcheck.check` (static pass and sandboxed
dry run) on every entry; :func:`score` turns the rows into detection and false-positive rates, precision
and recall per ``jobcheck`` category, recall per ICSE category and the headline, the fraction of failures
caught weighted by the study's frequencies.

What the study states (Zhang, Xiao, Zhang, Liu, Lin, Yang, "An Empirical Study on Program Failures of
Deep Learning Jobs", ICSE 2020, abstract): 4,960 failures of Microsoft's Philly in 20 categories; 48.0%
occur in the interaction with the platform (execution environment); 13.5% are deep-learning specific;
the remaining 38.5% are general code errors and data errors (their split, and the split inside each
group, is in the paper's tables, which we could not retrieve). So the weights are the three group
shares; inside a group every category of the corpus counts equally (central value) and the band puts
the group's whole share on its worst-caught, then on its best-caught category.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from hwcosim.models.systems.jobs.jobcheck import CATEGORIES, CheckConfig, check

__all__ = ["ICSE_GROUPS", "GROUP_SHARES", "PAPER", "EARLY", "corpus_real_dir", "load_index", "entry_config",
           "run_entry", "evaluate", "score"]

#: the 20 failure categories of Zhang et al. (ICSE 2020) by group
ICSE_GROUPS = {
    "execution environment": ("Path Not Found", "Library Not Found", "Permission Denied"),
    "deep learning specific": ("GPU Out of Memory", "CPU Out of Memory", "Framework API Misuse", "Tensor Mismatch",
                               "Loss NaN"),
    "general code error": ("Illegal Argument", "Type Mismatch", "Key Not Found", "Null Reference",
                           "Attribute Not Found", "Syntax Error", "Illegal Index", "Undefined Variable",
                           "Not Implemented", "Division by Zero"),
    "data": ("Corrupt Data", "Unexpected Encoding"),
}
#: group shares of the 4,960 failures stated in the study's abstract; general code and data errors together
#: are the remainder (the abstract does not split them)
GROUP_SHARES = {"execution environment": 0.480, "deep learning specific": 0.135, "general code error + data": 0.385}
_WEIGHT_GROUP = {c: ("general code error + data" if g in ("general code error", "data") else g)
                 for g, cs in ICSE_GROUPS.items() for c in cs}
PAPER = {"study": "Zhang, Xiao, Zhang, Liu, Lin, Yang, An Empirical Study on Program Failures of Deep Learning Jobs, "
                  "ICSE 2020 (doi 10.1145/3377811.3380362), abstract",
         "failures": 4960, "categories": 20, "execution_environment_share": 0.480, "dl_specific_share": 0.135}
#: ``fails_at`` values within the dry run's default budget (two steps at a tiny batch); a failure reported
#: later is, on a real job, out of the dry run's reach (our toy scripts reach it only because their steps
#: take microseconds)
EARLY = ("start", "first step", "step 2")
_FIELDS = ("id", "file", "args", "label", "category", "expect", "fails_at", "url", "reported")


def corpus_real_dir() -> Path:
    """Folder of the real-failure corpus."""
    return Path(__file__).with_name("corpus_real")


def load_index(path: str | Path | None = None) -> list[dict]:
    """The entries of ``index.json``, checked: every field present, the script exists, the category is one
    of the study's 20, ``expect`` is a ``jobcheck`` category (or ``ok`` for a healthy entry), ids unique."""
    path = Path(path) if path is not None else corpus_real_dir() / "index.json"
    entries = json.loads(path.read_text())["entries"]
    cats = {c for cs in ICSE_GROUPS.values() for c in cs}
    seen = set()
    for e in entries:
        missing = [f for f in _FIELDS if f not in e]
        if missing:
            raise ValueError(f"corpus entry {e.get('id')!r}: missing {missing}")
        if e["id"] in seen:
            raise ValueError(f"corpus entry {e['id']!r} twice")
        seen.add(e["id"])
        if not (path.parent / e["file"]).is_file():
            raise ValueError(f"corpus entry {e['id']!r}: no script {e['file']}")
        if e["category"] not in cats:
            raise ValueError(f"corpus entry {e['id']!r}: {e['category']!r} is not a category of the study")
        if e["label"] not in ("failing", "healthy"):
            raise ValueError(f"corpus entry {e['id']!r}: label must be failing or healthy")
        if (e["label"] == "healthy") != (e["expect"] == "ok") or (e["expect"] != "ok" and e["expect"] not in
                                                                    CATEGORIES):
            raise ValueError(f"corpus entry {e['id']!r}: expect {e['expect']!r} does not fit label {e['label']}")
        if not str(e["url"]).startswith("https://github.com/"):
            raise ValueError(f"corpus entry {e['id']!r}: the source must be a GitHub issue or pull request URL")
    return entries


def entry_config(entry: dict, cfg: CheckConfig = CheckConfig()) -> CheckConfig:
    """``cfg`` with what the report says of the job's machine: the device memory (GPU-memory entries give
    the report's card, scaled as their script's footprint is: ``device_memory_gib * memory_scale``) and the
    job's Python version (``target_python``)."""
    if "device_memory_gib" in entry:
        cfg = replace(cfg, device_memory_bytes=entry["device_memory_gib"] * entry.get("memory_scale", 1.0) * 2**30)
    if entry.get("target_python"):
        cfg = replace(cfg, target_python=entry["target_python"])
    return cfg


def run_entry(entry: dict, cfg: CheckConfig = CheckConfig(), root: Path | None = None) -> dict:
    """Check one entry (in its folder, as the job would be started there); returns its row."""
    root = root or corpus_real_dir()
    t0 = time.monotonic()
    rep = check(root / entry["file"], entry["args"], entry_config(entry, cfg), cwd=root)
    errors = sorted({f.category for f in rep.findings if f.severity == "error"})
    warnings = sorted({f.category for f in rep.findings if f.severity == "warning"})
    found = sorted(set(errors) | set(warnings))
    failing = entry["label"] == "failing"
    detected = (bool(errors) or entry["expect"] in warnings) if failing else None
    static = {f.category for f in rep.findings if f.source == "static" and f.severity == "error"}
    return {"id": entry["id"], "file": entry["file"], "label": entry["label"], "category": entry["category"],
            "expect": entry["expect"], "fails_at": entry.get("fails_at"), "url": entry["url"],
            "errors": errors, "warnings": warnings, "found": found, "detected": detected,
            "right_category": (entry["expect"] in found) if failing else None,
            "detected_statically": bool(static) if failing else None,
            "false_positive": bool(errors) if not failing else None,
            "findings": [asdict(f) for f in rep.findings], "seconds": time.monotonic() - t0}


def evaluate(cfg: CheckConfig = CheckConfig(), ids: list[str] | None = None, progress=None) -> dict:
    """Run :func:`run_entry` on the corpus (or on the entries ``ids``); returns ``{"rows", "score"}``.
    ``progress(k, n, row)`` is called after each entry."""
    entries = load_index()
    if ids is not None:
        known = {e["id"] for e in entries}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ValueError(f"no corpus entries {unknown}")
        entries = [e for e in entries if e["id"] in ids]
    rows = []
    for k, e in enumerate(entries):
        rows.append(run_entry(e, cfg))
        if progress:
            progress(k + 1, len(entries), rows[-1])
    return {"rows": rows, "score": score(rows)}


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _weighted(recall_by_cat: dict[str, float]) -> dict:
    """Fraction caught weighted by the study's group shares: central (categories equal inside a group) and
    band (the group's share on its worst / best category); groups without a corpus entry count 0."""
    central = lo = hi = 0.0
    groups = {}
    for g, share in GROUP_SHARES.items():
        rs = [r for c, r in recall_by_cat.items() if _WEIGHT_GROUP[c] == g]
        if not rs:
            groups[g] = {"share": share, "categories": 0, "recall_mean": None, "contribution": 0.0}
            continue
        mean = sum(rs) / len(rs)
        central += share * mean
        lo += share * min(rs)
        hi += share * max(rs)
        groups[g] = {"share": share, "categories": len(rs), "recall_mean": mean, "recall_min": min(rs),
                     "recall_max": max(rs), "contribution": share * mean}
    return {"central": central, "band": [lo, hi], "groups": groups}


def _resampled(bad: list[dict], n: int = 2000, seed: int = 0) -> dict:
    """5th-95th percentile of the weighted fraction when each category's failing scripts are resampled
    with replacement (the corpus holds 1-3 scripts per category): the sampling uncertainty."""
    import numpy as np

    by_cat: dict[str, list[float]] = {}
    for r in bad:
        by_cat.setdefault(r["category"], []).append(float(r["detected"]))
    if not by_cat:
        return {"p5": None, "p95": None, "resamples": 0}
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n):
        rec = {c: float(rng.choice(v, size=len(v)).mean()) for c, v in by_cat.items()}
        vals.append(_weighted(rec)["central"])
    return {"p5": float(np.percentile(vals, 5)), "p95": float(np.percentile(vals, 95)), "resamples": n}


def score(rows: list[dict]) -> dict:
    """Detection, false positives, precision/recall per ``jobcheck`` category, recall per ICSE category and
    the frequency-weighted fraction caught (as measured, with its resampling interval, and with failures
    reported after the dry run's budget counted only when the static pass caught them). The headline is
    ``score(rows)["weighted"]["central"]``."""
    bad = [r for r in rows if r["label"] == "failing"]
    good = [r for r in rows if r["label"] == "healthy"]
    per_check = {}
    for c in sorted({r["expect"] for r in bad} | {c for r in rows for c in r["found"]}):
        tp = sum(r["expect"] == c and c in r["found"] for r in rows)
        fp = sum(r["expect"] != c and c in r["found"] for r in rows)
        fn = sum(r["expect"] == c and c not in r["found"] for r in rows)
        per_check[c] = {"tp": tp, "fp": fp, "fn": fn, "precision": _rate(tp, tp + fp), "recall": _rate(tp, tp + fn)}
    per_icse, recall, recall_timed = {}, {}, {}
    for c in sorted({r["category"] for r in rows}):
        b = [r for r in bad if r["category"] == c]
        g = [r for r in good if r["category"] == c]
        timed = [r["detected"] and (r["fails_at"] in EARLY or r["detected_statically"]) for r in b]
        per_icse[c] = {"group": next(k for k, cs in ICSE_GROUPS.items() if c in cs), "failing": len(b),
                       "detected": sum(r["detected"] for r in b),
                       "recall": _rate(sum(r["detected"] for r in b), len(b)),
                       "recall_timing_faithful": _rate(sum(timed), len(b)), "healthy": len(g),
                       "false_positives": sum(r["false_positive"] for r in g)}
        if b:
            recall[c] = per_icse[c]["recall"]
            recall_timed[c] = per_icse[c]["recall_timing_faithful"]
    return {"failing": len(bad), "detected": sum(r["detected"] for r in bad),
            "weighted_resampled": _resampled(bad),
            "detection_rate": _rate(sum(r["detected"] for r in bad), len(bad)),
            "right_category": sum(r["right_category"] for r in bad), "healthy": len(good),
            "false_positives": sum(r["false_positive"] for r in good),
            "false_positive_rate": _rate(sum(r["false_positive"] for r in good), len(good)),
            "healthy_with_warnings": sum(bool(r["warnings"]) and not r["false_positive"] for r in good),
            "missed": [r["id"] for r in bad if not r["detected"]],
            "caught_by_warning_only": [r["id"] for r in bad if r["detected"] and not r["errors"]],
            "false_positive_ids": [r["id"] for r in good if r["false_positive"]],
            "per_jobcheck_category": per_check, "per_icse_category": per_icse,
            "categories_covered": len(recall), "categories_in_study": sum(len(cs) for cs in ICSE_GROUPS.values()),
            "weighted": _weighted(recall), "weighted_timing_faithful": _weighted(recall_timed), "paper": PAPER}
