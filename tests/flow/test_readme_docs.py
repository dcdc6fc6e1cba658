"""The README and the docs pages: short, generated where they show data, no work log, no typed figures.

- the README's designs table is the rendering of the registry and ``docs/boards/results.json``
  (``hwcosim docs --readme`` rewrites it);
- the README is at most 200 lines, lists every ``hwcosim`` command, and its links resolve;
- no README or docs page reads like a work log ("this round", "before this", "was 97 MHz": that
  history belongs in ``CHANGELOG.md``);
- every Fmax (``NN.N MHz``) and LUT4 count written in the README and the docs pages is one of the
  figures in ``docs/boards/*.json`` (a figure that drifted from its JSON fails);
- ``CITATION.cff`` has the fields CFF 1.2 requires;
- the README's Python blocks compile, and run unless marked ``<!-- not-run: REASON -->``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hwcosim.cosim.flow import docs

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("**/*.md"))]  # CHANGELOG.md is the one place for history
BOARDS = [ROOT / "docs" / "boards" / f for f in ("results.json", "ice40.json", "bitstreams.json")]


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


# ---- the generated designs table ------------------------------------------------------------------
def test_readme_designs_table_is_the_rendering():
    text = README.read_text(encoding="utf-8")
    assert docs.readme_block(text) == docs.readme_designs_table(), (
        "README.md's designs table differs from the registry / docs/boards/results.json: "
        "run `hwcosim docs --readme`")


def test_designs_table_has_every_design_and_its_fmax():
    from hwcosim.cosim.registry import designs

    results = json.loads(BOARDS[0].read_text())
    table = docs.readme_designs_table()
    rows = [r for r in table.splitlines()[2:]]
    assert len(rows) == len(designs())
    for name, d in designs().items():
        row = next(r for r in rows if r.startswith(f"| [`{name}`]"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        entry = next((r for r in results["results"] if r["design"] == name), None)
        if entry:
            fmin = min(v["min"] for v in entry["fmax_mhz"].values())
            assert row.rstrip(" |").endswith(f"{fmin:.1f}"), row
        assert cells[3].startswith("yes") == bool(d.formal), row
        assert cells[4].startswith(("yes", "in ")) == bool(d.board_tops or d.on_board_in), row


def test_update_readme_rewrites_only_the_block(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\n\nbefore\n\n{docs.README_START}\n| stale |\n{docs.README_END}\n\nafter\n")
    assert docs.update_readme(readme, check=True) is False
    assert docs.update_readme(readme) is False
    text = readme.read_text()
    assert docs.readme_block(text) == docs.readme_designs_table()
    assert text.startswith("# t\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert docs.update_readme(readme, check=True) is True
    with pytest.raises(ValueError, match="designs:start"):
        docs.readme_block("no markers here")


def test_the_check_command_exits_1_on_a_stale_table(tmp_path, monkeypatch):
    stale = tmp_path / "README.md"
    stale.write_text(f"{docs.README_START}\n| stale |\n{docs.README_END}\n")
    (tmp_path / "docs" / "boards").mkdir(parents=True)
    (tmp_path / "docs" / "boards" / "results.json").write_text(BOARDS[0].read_text())
    monkeypatch.setattr(docs, "ROOT", tmp_path)  # update_readme's default path
    from hwcosim.cosim.cli import main

    assert main(["docs", "--check"]) == 1
    assert main(["docs", "--readme"]) == 0
    assert main(["docs", "--check"]) == 0


# ---- the README's shape ---------------------------------------------------------------------------
def test_readme_is_at_most_200_lines():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= 200, f"README.md has {n} lines; move detail into docs/"


def test_readme_names_license_and_citation():
    text = README.read_text(encoding="utf-8")
    assert "## License and citation" in text and "MIT" in text and "CITATION.cff" in text
    assert (ROOT / "CITATION.cff").is_file() and (ROOT / "LICENSE").is_file()


def test_readme_lists_every_command_with_its_reference_anchor():
    from hwcosim.cosim.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = README.read_text(encoding="utf-8")
    listed = set(re.findall(r"\[`([a-z-]+)`\]\(docs/reference/cli\.md#hwcosim-([a-z-]+)\)", text))
    assert all(a == b for a, b in listed), listed
    names = {a for a, _ in listed}
    assert names == set(sub.choices), (f"not in the README's command list: {sorted(set(sub.choices) - names)}; "
                                       f"not a command: {sorted(names - set(sub.choices))}")
    reference = docs.cli_reference(build_parser())
    for name in names:
        assert f"## `hwcosim {name}`" in reference, name


def _links(text: str) -> list[str]:
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]


def test_readme_links_resolve():
    from hwcosim.cosim.cli import build_parser

    generated = {f"docs/{p}" for p in docs.generated_pages(build_parser())}
    for target in _links(README.read_text(encoding="utf-8")):
        path = target.split("#")[0]
        if path == "docs/python-api.md":
            continue  # the Python API's page, written with the API (its own tests check it)
        assert (ROOT / path).exists() or path in generated, f"README.md links to {target}, which does not exist"


# ---- no work log, no typed figures ----------------------------------------------------------------
WORK_LOG = [r"\bthis round\b", r"\bthis session\b", r"\bbefore this\b", r"\blast (round|session)\b",
            r"\bprevious (round|session)\b", r"\brounds? ago\b", r"\bsession \d+\b",
            r"\bwas \d+(\.\d+)? ?MHz\b"]


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_no_work_log_phrases(page):
    hits = []
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for pat in WORK_LOG:
            if re.search(pat, line, re.I):
                hits.append(f"{_rel(page)}:{n}: {line.strip()[:100]}")
    assert not hits, "work-log phrases (history goes to CHANGELOG.md):\n" + "\n".join(hits)


def test_the_work_log_check_is_real(tmp_path):
    bad = ["The engine was 97.1 MHz before.", "This round added a register.", "Before this change it stalled."]
    assert all(any(re.search(p, s, re.I) for p in WORK_LOG) for s in bad)
    assert not any(re.search(p, "The 25 MHz oscillator, 80 MHz through the PLL.", re.I) for p in WORK_LOG)


def _json_figures() -> tuple[set[str], set[int]]:
    """Every Fmax in the boards JSON as written with one decimal, and every area count."""
    fmax: set[str] = set()
    counts: set[int] = set()
    for path in BOARDS:
        data = json.loads(path.read_text())
        for r in data.get("results", []):
            for v in r.get("fmax_mhz", {}).values():
                for x in [v["min"], v["median"], *v.get("per_seed", [])]:
                    fmax.add(f"{x:.1f}")
            counts.update(int(v) for v in r.get("area", {}).values() if isinstance(v, int | float))
        for f in data.get("failures", []):
            counts.update(int(v) for v in re.findall(r"\d+", f.get("error", "")))
    return fmax, counts


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_fmax_and_lut4_figures_are_the_jsons(page):
    fmax, counts = _json_figures()
    text = page.read_text(encoding="utf-8")
    wrong = [f"{m} MHz" for m in re.findall(r"(?<![\d.])(\d+\.\d) ?MHz", text) if m not in fmax]
    wrong += [f"{m} LUT4" for m in re.findall(r"(\d[\d,]*) LUT4", text) if int(m.replace(",", "")) not in counts]
    assert not wrong, (f"{_rel(page)} types figures that are not in docs/boards/*.json: {wrong}; render them "
                       "from the JSON (cosim/flow/docs.py) or move the record to CHANGELOG.md")


def test_the_figure_check_is_real():
    fmax, counts = _json_figures()
    assert "105.9" in fmax and 9591 in counts  # bbs-spmxv's reference
    assert "19.4" not in fmax  # the melo-engine iCE40 figure that had drifted from ice40.json


# ---- citation -------------------------------------------------------------------------------------
def test_citation_cff_has_the_cff_1_2_fields():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert isinstance(cff["message"], str) and cff["message"]
    assert isinstance(cff["title"], str) and cff["title"]
    assert isinstance(cff["authors"], list) and cff["authors"]
    for a in cff["authors"]:
        assert isinstance(a, dict) and (a.get("name") or a.get("family-names")), a
    assert cff.get("type", "software") in ("software", "dataset")
    assert cff["license"] == "MIT"
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert str(cff["version"]) == version
    allowed = {"cff-version", "message", "type", "title", "abstract", "authors", "version", "license", "keywords",
               "date-released", "doi", "repository-code", "url", "identifiers", "preferred-citation", "references",
               "contact", "commit", "license-url", "repository", "repository-artifact"}
    assert set(cff) <= allowed, set(cff) - allowed


# ---- Python blocks --------------------------------------------------------------------------------
def _python_blocks(text: str) -> list[tuple[str, str]]:
    """``(not-run reason or "", code)`` of every ```python block."""
    out = []
    for m in re.finditer(r"(?:<!--\s*not-run:\s*(.*?)\s*-->\s*\n)?```python\n(.*?)```", text, re.S):
        out.append((m.group(1) or "", m.group(2)))
    return out


BLOCKS = _python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_shows_the_python_api():
    assert BLOCKS, "README.md has no Python block"
    code = "\n".join(c for _, c in BLOCKS)
    for name in ("import hwcosim", 'hwcosim.design("melo-engine")', "d.verilog()", "d.simulate(seed=1)",
                 "r.ok", "r.words", '.build(board="ulx3s-85f")', 'hwcosim.prune(W, pattern="bbs", sparsity=0.875)'):
        assert name in code, name


def _block_params():
    for i, (reason, code) in enumerate(BLOCKS):
        marks = [pytest.mark.sim] if ".simulate(" in code else []
        if ".build(" in code:  # place and route: minutes to an hour
            marks.append(pytest.mark.slow)
        yield pytest.param(reason, code, marks=marks, id=f"block{i}")


@pytest.mark.parametrize("reason,code", list(_block_params()))
def test_readme_python_block(reason, code, tmp_path):
    compile(code, "README.md", "exec")  # always: the block is valid Python
    if reason:
        pytest.skip(f"marked not-run: {reason}")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
