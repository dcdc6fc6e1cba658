"""The documentation site: generated pages, and an offline ``mkdocs build --strict``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hwcosim.cosim.flow import docs

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_covers_every_subcommand():
    from hwcosim.cosim.cli import build_parser

    text = docs.cli_reference(build_parser())
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert f"`hwcosim {name}`" in text, name
    assert "--dense-out" in text and "--dense-values" in text  # prune's round trip flags
    assert "usage: hwcosim verilog" in text


def test_cli_reference_of_a_nested_parser():
    p = argparse.ArgumentParser(prog="tool", description="top")
    s = p.add_subparsers()
    a = s.add_parser("alpha", help="first")
    a.add_argument("--flag", help="a flag that matters")
    a.add_subparsers().add_parser("deep", description="nested command")
    text = docs.cli_reference(p)
    assert "## `hwcosim alpha`" in text and "### `hwcosim alpha deep`" in text
    assert "a flag that matters" in text and "nested command" in text


def test_area_page_says_what_is_missing():
    area = docs.Area("ghost", "Ghost engine", "Nobody, 2099", ("models/ghost_does_not_exist.py",),
                     ("hdl/ghost/*.py",), ("ghost-engine",), tests=("tests/test_ghost*.py",))
    page = docs.area_page(area)
    assert page.startswith("# Ghost engine") and "Nobody, 2099" in page
    assert page.count("not in the repository yet") == 3 and "not registered yet" in page
    assert "Not there yet: golden model, RTL (Amaranth), `hwcosim verilog` design, tests." in page


def test_area_page_quotes_existing_modules():
    bbs = next(a for a in docs.areas() if a.slug == "bbs-spmxv")
    page = docs.area_page(bbs)
    assert "`models/bbs/spmxv.py`" in page and "`hdl/bbs/spmxv.py`" in page and "`bbs-spmxv`" in page
    assert "Golden model of the BBS sparse matrix-vector" in page  # the module docstring, quoted


def test_every_area_page_is_in_the_nav():
    """The "Designs" section of the nav is derived from the registry (docs.on_config); the rest is mkdocs.yml."""
    import yaml
    from hwcosim.cosim.cli import build_parser

    cfg = docs.on_config({"nav": yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]})
    nav = json.dumps(cfg["nav"])
    for path in docs.generated_pages(build_parser()):
        assert path in nav, path
    for a in docs.areas():
        assert f"designs/{a.slug}.md" in nav
        if a.handwritten:
            assert (ROOT / "docs" / "designs" / f"{a.slug}.md").is_file()


def test_with_notes_puts_the_handwritten_part_first(tmp_path):
    (tmp_path / "designs").mkdir()
    (tmp_path / "designs" / "x.md").write_text("# X engine\n\nHand-written notes.\n")
    page = docs.with_notes("designs/x.md", "# X engine\n\nPaper: p.\n\n## Status\n", docs_dir=tmp_path)
    assert page == "# X engine\n\nHand-written notes.\n\nPaper: p.\n\n## Status\n"
    assert docs.with_notes("designs/y.md", "# Y\n\nbody\n", docs_dir=tmp_path) == "# Y\n\nbody\n"


def test_generated_design_pages_include_their_notes():
    """Every design page (a file per page in docs/designs/) is notes + the generated status."""
    pages = docs.generated_pages()
    for a in docs.areas():
        notes = ROOT / "docs" / "designs" / f"{a.slug}.md"
        if a.handwritten or not notes.is_file():
            continue
        page = pages[f"designs/{a.slug}.md"]
        assert page.startswith(notes.read_text().rstrip()), a.slug
        assert "## What is in the repository" in page and page.count("\n# ") == 0, a.slug
    assert "scan harness" in pages["boards.md"] and "## Measured: ECP5 out of context" in pages["boards.md"]


def _mkdocs():
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install mkdocs mkdocs-material "
                                         "'mkdocstrings[python]'; the lead's 'docs' extra)")
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is not installed")
    return [sys.executable, "-m", "mkdocs"]


def _env():
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    return env


def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    r = subprocess.run([*_mkdocs(), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
                       capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "WARNING" not in r.stderr, r.stderr[-4000:]
    for page in ("index.html", "getting-started/index.html", "designs/bbs-spmxv/index.html",
                 "designs/index.html", "reference/cli/index.html", "reference/api/index.html",
                 "pruning/index.html", "fusesoc/index.html", "simulation/index.html", "systems/index.html",
                 "verification/index.html", "contributing/index.html", "boards/index.html"):
        assert (site / page).is_file(), page
    melo = (site / "designs/melo/index.html").read_text()
    assert "Two event slots" in melo and "What is in the repository" in melo  # notes + generated status
    boards = (site / "boards/index.html").read_text()
    assert "scan harness" in boards and "Measured: ECP5 out of context" in boards
    api = (site / "reference/api/index.html").read_text()
    assert "BBSParams" in api and "write_dense" in api  # mkdocstrings rendered the docstrings
    cli = (site / "reference/cli/index.html").read_text()
    assert "hwcosim prune" in cli and "hwcosim verilog" in cli
    assert "make demo" in (site / "getting-started/index.html").read_text()
    assert "WAVES=1" in (site / "simulation/index.html").read_text()


def test_strict_build_fails_on_a_broken_link(tmp_path):
    """The strict build is a real check: a link to a missing page fails it."""
    mk = _mkdocs()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# x\n\nSee [the missing page](missing.md).\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nstrict: true\n")
    r = subprocess.run([*mk, "build", "--strict", "-d", str(tmp_path / "site")], capture_output=True,
                       text=True, cwd=tmp_path, env=_env(), timeout=300)
    assert r.returncode != 0 and "missing.md" in r.stderr


def test_the_api_source_tree_is_made_before_mkdocstrings_starts():
    """In a fresh clone ``build/api-src`` does not exist until the hook makes it, and mkdocstrings drops a
    source path that does not exist when its handler starts: the hook's on_config must run before every
    plugin's (the first ``mkdocs build`` of a fresh clone failed: 'hwcosim.cosim.api could not be found')."""
    from hwcosim.cosim.cli import docs_hook

    assert getattr(docs_hook.on_config, "mkdocs_priority", 0) > 50  # mkdocs' default is 0; mkdocstrings' top 50
