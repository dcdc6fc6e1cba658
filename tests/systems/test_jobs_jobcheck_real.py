"""jobcheck on real failures: the corpus index is valid, a handful of entries give their recorded verdicts,
the frequency weighting is the study's."""

import json

import pytest
from hwcosim.cosim.cli.jobs import main as cli_main
from hwcosim.models.systems.jobs.jobcheck import CheckConfig
from hwcosim.models.systems.jobs.jobcheck_real import (
    EARLY,
    GROUP_SHARES,
    ICSE_GROUPS,
    corpus_real_dir,
    load_index,
    run_entry,
    score,
)


def test_index_valid():
    entries = load_index()
    assert len(entries) >= 40
    failing = [e for e in entries if e["label"] == "failing"]
    healthy = [e for e in entries if e["label"] == "healthy"]
    assert len(failing) >= 25 and len(healthy) >= 15
    assert len({e["category"] for e in failing}) >= 15  # of the study's 20
    assert {g for g, cs in ICSE_GROUPS.items() for e in failing if e["category"] in cs} == set(ICSE_GROUPS)
    for e in entries:
        assert e["url"] and e["category"] and e["label"] and (corpus_real_dir() / e["file"]).is_file(), e["id"]
        head = (corpus_real_dir() / e["file"]).read_text().split('"""')[0]
        # the header names the source, the failure, the category and the label; it never names the verdict
        assert f"# source: {e['url']}" in head and f"# ICSE 2020 category: {e['category']}" in head, e["id"]
        assert "# reported:" in head and "# label:" in head and "jobcheck-expect" not in head, e["id"]
        if e["label"] == "failing":
            assert e["fails_at"], e["id"]
    assert round(sum(GROUP_SHARES.values()), 6) == 1.0


def test_index_refuses_bad_entries(tmp_path):
    good = load_index()[0]
    (tmp_path / good["file"]).write_text("print(1)\n")
    for change, match in (({"url": ""}, "GitHub"), ({"category": "Cosmic Rays"}, "not a category"),
                          ({"file": "nope.py"}, "no script"), ({"expect": "ok"}, "does not fit"),
                          ({"label": "maybe"}, "failing or healthy")):
        (tmp_path / "index.json").write_text(json.dumps({"entries": [{**good, **change}]}))
        with pytest.raises(ValueError, match=match):
            load_index(tmp_path / "index.json")
    bad = {k: v for k, v in good.items() if k != "url"}
    (tmp_path / "index.json").write_text(json.dumps({"entries": [bad]}))
    with pytest.raises(ValueError, match="missing"):
        load_index(tmp_path / "index.json")


#: verdicts recorded by the full run (build/bench/jobcheck_real.json): id -> (detected or false positive, found)
RECORDED_DRYRUN = {
    "module_renamed": (True, ["module"]),
    "cpu_oom_whole_dataset": (True, ["memory"]),
    "shape_checkpoint_classes": (True, ["shape"]),
    "key_config_json_fixed": (False, []),
}
#: recorded with the static pass only (the f-string entry: the job's Python 3.5 grammar refuses it, so no dry run)
RECORDED_STATIC = {"resume_first_run": (True, ["path"]), "null_shuffle_result": (True, ["api"]),
                   "syntax_fstring_py35": (True, ["syntax"])}


@pytest.mark.parametrize("eid", sorted(RECORDED_DRYRUN))
def test_recorded_verdicts_dry_run(eid):
    entry = {e["id"]: e for e in load_index()}[eid]
    row = run_entry(entry, CheckConfig(timeout_s=60))
    verdict = row["detected"] if entry["label"] == "failing" else row["false_positive"]
    assert (verdict, row["found"]) == RECORDED_DRYRUN[eid], row["findings"]


def test_recorded_verdicts_static():
    entries = {e["id"]: e for e in load_index()}
    for eid, want in RECORDED_STATIC.items():
        row = run_entry(entries[eid], CheckConfig(dry_run=False))
        verdict = row["detected"] if entries[eid]["label"] == "failing" else row["false_positive"]
        assert (verdict, row["found"]) == want, (eid, row["findings"])


def _row(eid, label, cat, expect, found, fails_at="start", static=False):
    errors = list(found)
    failing = label == "failing"
    return {"id": eid, "label": label, "category": cat, "expect": expect, "fails_at": fails_at, "errors": errors,
            "warnings": [], "found": errors, "detected": bool(errors) if failing else None,
            "right_category": (expect in errors) if failing else None,
            "detected_statically": static if failing else None,
            "false_positive": bool(errors) if not failing else None}


def test_score_weighting():
    rows = [_row("a", "failing", "Path Not Found", "path", ["path"], static=True),
            _row("b", "failing", "Library Not Found", "module", []),
            _row("c", "failing", "Loss NaN", "numeric", ["numeric"], fails_at="after ~2000 iterations"),
            _row("d", "failing", "Key Not Found", "runtime", ["runtime"]),
            _row("e", "healthy", "Path Not Found", "ok", ["path"]),
            _row("f", "healthy", "Key Not Found", "ok", [])]
    s = score(rows)
    assert (s["detected"], s["failing"], s["false_positives"], s["healthy"]) == (3, 4, 1, 2)
    assert s["missed"] == ["b"] and s["false_positive_ids"] == ["e"]
    env, dl, gen = GROUP_SHARES.values()
    w = s["weighted"]
    # environment: path 1, library 0 -> mean 0.5, band 0..1; DL: NaN 1; general: key 1
    assert w["central"] == pytest.approx(env * 0.5 + dl + gen)
    assert w["band"] == pytest.approx([dl + gen, env + dl + gen])
    # timing-faithful: the late NaN was caught by the dry run only, so it does not count
    assert "after ~2000 iterations" not in EARLY
    assert s["weighted_timing_faithful"]["central"] == pytest.approx(env * 0.5 + gen)
    rs = s["weighted_resampled"]
    assert rs["p5"] <= w["central"] <= rs["p95"] and w["band"][0] <= rs["p5"]
    pc = s["per_jobcheck_category"]
    assert pc["path"] == {"tp": 1, "fp": 1, "fn": 0, "precision": 0.5, "recall": 1.0}
    assert pc["module"]["recall"] == 0.0 and pc["module"]["precision"] is None


def test_cli_corpus_choice(capsys):
    assert cli_main(["jobcheck", "--corpus", "bogus"]) == 2
    assert "--corpus" in capsys.readouterr().err
