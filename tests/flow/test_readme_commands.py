"""The commands the README and the docs show are real: every ``hwcosim ...`` line in their code
blocks (alternatives ``a|b`` expanded, ``[--quick]`` taken, other ``[...]`` dropped) is accepted by
the command-line parser, and every ``make`` target they name exists.

Running every shown command to completion takes many minutes (studies, RTL runs, place and route);
the parse check runs in the default suite so a renamed command or option fails at once.
"""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest

from cosim.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def _blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def _commands(prefix: str) -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for block in _blocks(doc.read_text(encoding="utf-8")):
            for line in block.splitlines():
                line = line.strip()
                if line.startswith("$ "):
                    line = line[2:]
                if line.startswith(prefix + " ") and "..." not in line:  # "..." marks a template
                    out.append((doc.relative_to(ROOT).as_posix(), line.split("  #")[0].split(" # ")[0].strip()))
    return out


def _expand(cmd: str) -> list[list[str]]:
    """``hwcosim a|b [--quick] [--x ADDR] y`` -> [[a, --quick, y], [b, --quick, y]]."""
    cmd = re.sub(r"\[(--quick)\]", r"\1", cmd)
    cmd = re.sub(r"\[[^\]]*\]", "", cmd)
    words = shlex.split(cmd)[1:]
    options = [w.split("|") if "|" in w and not w.startswith("-") else [w] for w in words]
    return [list(c) for c in itertools.product(*options)]


HWCOSIM = _commands("hwcosim")
MAKE = _commands("make")


def test_the_docs_show_commands():
    assert len(HWCOSIM) > 20 and len(MAKE) >= 2


@pytest.mark.parametrize("doc,cmd", HWCOSIM, ids=[f"{d}: {c[:60]}" for d, c in HWCOSIM])
def test_hwcosim_command_parses(doc, cmd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    for argv in _expand(cmd):
        try:
            parser.parse_args(argv)
        except SystemExit as e:
            raise AssertionError(f"{doc}: '{cmd}' -> hwcosim {' '.join(argv)} is refused (exit {e.code})") from None


@pytest.mark.parametrize("doc,cmd", MAKE, ids=[f"{d}: {c}" for d, c in MAKE])
def test_make_target_exists(doc, cmd):
    targets = set(re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.M))
    for argv in _expand(cmd):
        for t in [a for a in argv if not a.startswith("-") and "=" not in a]:
            assert t in targets, f"{doc}: make {t} is not a target of the Makefile"
