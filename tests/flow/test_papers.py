"""Ours beside the paper for the 21 seed systems (issue 46, requirement 4): ``docs/papers/<system>.json``,
``docs/papers.md`` and ``hwcosim papers``.

Cheap: the studies are not re-run here (``hwcosim papers --refresh`` runs them); these tests read the
committed JSON, hash the files each one names and render the page and the table.
"""

from __future__ import annotations

import json

import pytest
from hwcosim.cosim import papers
from hwcosim.cosim.cli import main

KEYS = [s.key for s in papers.SYSTEMS]
FIELDS = ("system", "paper", "metric", "ours", "paper_figure", "unit", "workload", "clock", "sensitive_to",
          "command", "sources")


def test_the_21_seed_systems():
    from hwcosim.cosim.cli import build_parser

    assert len(KEYS) == 21 and len(set(KEYS)) == 21
    parser = build_parser()
    for s in papers.SYSTEMS:
        assert s.sources, s.key
        assert all((papers.ROOT / rel).is_file() for rel in s.sources), s.key
        for cmd in s.study.split("; "):  # the study commands the page names are real
            assert cmd.startswith("hwcosim "), cmd
            parser.parse_args(cmd.split()[1:])


@pytest.mark.parametrize("key", KEYS)
def test_each_system_has_a_fresh_json(key):
    rec = papers.load(key)
    fix = f"run: hwcosim papers --refresh {key}"
    assert rec is not None, f"{key}: no docs/papers/{key}.json; {fix}"
    missing = [f for f in FIELDS if f not in rec]
    assert not missing, f"{rec.get('system', key)}: fields {missing} missing; {fix}"
    assert isinstance(rec["ours"], float), f"{rec['system']}: ours is not a number; {fix}"
    assert rec["workload"].startswith(("real:", "synthetic:")), rec["workload"]
    assert rec["sensitive_to"], rec["system"]
    bad = papers.stale(rec, check_data=False)
    assert not bad, f"{rec['system']}: stale, these files changed since its JSON was written: {bad}; {fix}"


def test_the_data_files_read_are_unchanged(shared_data):
    stale = {}
    for key in KEYS:
        rec = papers.load(key)
        if rec is not None:
            bad = [r for r in papers.stale(rec) if r.startswith(papers.DATA_PREFIX)]
            if bad:
                stale[key] = bad
    assert not stale, "data files changed since: " + "; ".join(
        f"{k} {v} (run: hwcosim papers --refresh {k})" for k, v in stale.items())


def test_a_changed_source_makes_a_json_stale():
    rec = {"key": "bbs", "sources": papers.source_hashes(papers.system("bbs"))}
    assert papers.stale(rec, check_data=False) == []
    changed = dict(rec, sources={**rec["sources"], papers.SYSTEMS[0].sources[0]: "0" * 64})
    assert papers.stale(changed, check_data=False) == [papers.SYSTEMS[0].sources[0]]
    dropped = dict(rec, sources={k: v for k, v in rec["sources"].items() if k != papers.SYSTEMS[0].sources[0]})
    assert papers.SYSTEMS[0].sources[0] in papers.stale(dropped, check_data=False)


def test_the_page_is_the_rendering_with_21_rows():
    text = papers.render_markdown()
    assert papers.PAGE.read_text(encoding="utf-8") == text, \
        "docs/papers.md differs from the rendering of docs/papers/*.json; any refresh rewrites it (hwcosim papers " \
        "--refresh bbs takes a second)"
    table = [ln for ln in text.split("## Details")[0].splitlines() if ln.startswith("| ")]
    assert len(table) == 1 + 21, len(table)
    assert not any("no JSON" in ln for ln in table)


def test_marks_name_assumed_clocks_and_synthetic_workloads():
    assert papers.marks({"clock": "assumed: 200 MHz", "workload": "synthetic: x"}) == "cs"
    assert papers.marks({"clock": "n/a", "workload": "real: trace"}) == ""
    assert papers.marks({"clock": "measured Fmax", "workload": "real: topology; synthetic: jobs"}) == "s"


def test_the_command_prints_the_table_and_json(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["papers"]) == 0
    out = capsys.readouterr().out
    for s in papers.SYSTEMS:
        assert s.name.split()[0] in out, s.name  # a long name folds onto the next line
    assert main(["papers", "kv-direct", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in doc["result"]["papers"]] == ["kv-direct"]
    assert len(doc["tables"][0]["rows"]) == 1


def test_an_unknown_system_is_bad_input(capsys):
    assert main(["papers", "no-such-system"]) == 2
    assert "unknown system" in capsys.readouterr().err


def test_the_python_api_returns_the_rows():
    import hwcosim

    rows = hwcosim.papers()
    assert [r["key"] for r in rows] == KEYS


def test_a_failing_system_keeps_its_old_json_and_exits_1(tmp_path, monkeypatch, capsys):
    import dataclasses

    def good(out):
        return {"ours": 1.5, "workload": "synthetic: a test", "clock": "n/a", "sensitive_to": "none measured"}

    ok = dataclasses.replace(papers.SYSTEMS[0], key="ok", name="OK", headline=good)
    bad = dataclasses.replace(ok, key="bad", name="Bad", headline=lambda out: 1 / 0)
    monkeypatch.setattr(papers, "SYSTEMS", (ok, bad))
    monkeypatch.setattr(papers, "_BY_KEY", {"ok": ok, "bad": bad})
    monkeypatch.setattr(papers, "JSON_DIR", tmp_path)
    monkeypatch.setattr(papers, "PAGE", tmp_path / "papers.md")
    old = papers._record(bad, good(None), {}, 0.0) | {"ours": 7.0}
    (tmp_path / "bad.json").write_text(json.dumps(old))
    assert main(["papers", "--refresh"]) == 1
    out, err = capsys.readouterr()
    assert "bad: FAILED" in out and "ZeroDivisionError" in err
    assert json.loads((tmp_path / "bad.json").read_text()) == old
    assert json.loads((tmp_path / "ok.json").read_text())["ours"] == 1.5
    page = (tmp_path / "papers.md").read_text()
    assert "| OK |" in page and "| Bad |" in page
