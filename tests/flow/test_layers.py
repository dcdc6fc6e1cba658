"""Layer order, import cycles and the one error path, checked on the source (ast), not by importing.

- ``models`` imports none of ``hdl``, ``pruning``, ``cosim``; ``hdl`` never imports ``cosim``;
  ``pruning`` imports neither ``hdl`` nor ``cosim`` (imports inside functions count too).
- No cycle among module-level imports.
- Only the dispatcher (``cosim/cli/__init__.py``, ``cosim/cli/__main__.py``) ends the process or
  prints ``error: ...``: no other module calls ``sys.exit``, raises ``SystemExit`` or prints an
  ``error:`` line; code raises ``hwcosim.models.errors.UsageError`` / ``CheckFailed`` instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "hdl", "pruning", "cosim")
#: package -> packages it must never import
FORBIDDEN = {"models": {"hdl", "pruning", "cosim"}, "hdl": {"cosim", "pruning"}, "pruning": {"hdl", "cosim"}}
DISPATCHER = {"cosim/cli/__init__.py", "cosim/cli/__main__.py"}
#: programs that are not hwcosim commands: the compiler launcher Verilator's makefile runs per compile,
#: whose exit status must be the compiler's
LAUNCHERS = {"cosim/flow/objcache.py"}
#: example user scripts that jobcheck reads (data, not project code)
DATA_DIRS = ("models/systems/jobs/corpus/",)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            rel = p.relative_to(ROOT).as_posix()
            if any(rel.startswith(d) for d in DATA_DIRS):
                continue
            name = rel[:-3].replace("/", ".")
            out[name.removesuffix(".__init__")] = p
    return out


def _imports(name: str, path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()

    def visit(n):
        if isinstance(n, ast.Import):
            found.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                mod = ".".join(base[: len(base) - n.level + 1] + ([n.module] if n.module else []))
            else:
                mod = n.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in n.names)
        elif top_level_only and isinstance(n, ast.If | ast.Try):  # guarded module-level imports
            for c in ast.iter_child_nodes(n):
                visit(c)

    for n in nodes:
        visit(n)
    # project imports are spelled hwcosim.<package>...; compare by <package>...
    return {f.removeprefix("hwcosim.") for f in found if f.startswith("hwcosim.") and f.split(".")[1] in PACKAGES}


def _legacy_imports(path: Path) -> list[str]:
    """Imports of the folders under their bare names (``import models``): they must go through ``hwcosim``."""
    out = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
            [n.module or ""] if isinstance(n, ast.ImportFrom) and not n.level else []
        out += [f"line {n.lineno}: {m}" for m in names if m.split(".")[0] in PACKAGES]
    return out


MODULES = _modules()


@pytest.mark.parametrize("pkg", sorted(FORBIDDEN))
def test_layer_order(pkg):
    bad = []
    for name, path in MODULES.items():
        if name.split(".")[0] != pkg:
            continue
        for imp in _imports(name, path, top_level_only=False):
            if imp.split(".")[0] in FORBIDDEN[pkg]:
                bad.append(f"{path.relative_to(ROOT)} imports {imp}")
    assert not bad, "imports against the layer order:\n" + "\n".join(sorted(bad))


def _resolve(imp: str) -> str | None:
    """The project module an import names (``a.b.C`` -> ``a.b``), or None."""
    parts = imp.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


def test_no_import_cycles():
    graph = {n: {m for i in _imports(n, p, top_level_only=True) if (m := _resolve(i)) and m != n}
             for n, p in MODULES.items()}
    # a package's __init__ is imported before its submodules: an edge sub -> its own package is no cycle
    for n in graph:
        graph[n] = {m for m in graph[n] if not n.startswith(m + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def dfs(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cycles.append(" -> ".join(stack[stack.index(m):] + [m]))
            elif m not in state:
                dfs(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            dfs(n)
    assert not cycles, "module-level import cycles:\n" + "\n".join(cycles)


def _exits(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "exit" and isinstance(f.value, ast.Name) \
                    and f.value.id == "sys":
                out.append(f"line {n.lineno}: sys.exit(...)")
            if isinstance(f, ast.Name) and f.id == "print" and n.args:
                a = n.args[0]
                text = a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else \
                    "".join(v.value for v in a.values if isinstance(v, ast.Constant) and isinstance(v.value, str)) \
                    if isinstance(a, ast.JoinedStr) else ""
                if text.lstrip().lower().startswith("error:"):
                    out.append(f"line {n.lineno}: prints its own 'error:' line")
        if isinstance(n, ast.Raise) and n.exc is not None:
            e = n.exc.func if isinstance(n.exc, ast.Call) else n.exc
            if isinstance(e, ast.Name) and e.id == "SystemExit":
                out.append(f"line {n.lineno}: raise SystemExit")
    return out


def test_one_error_path():
    bad = []
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        if rel in DISPATCHER:
            continue
        bad += [f"{rel} {e}" for e in _exits(path)
                if not (rel in LAUNCHERS and e.endswith("sys.exit(...)"))]
    assert not bad, "only the dispatcher may exit or print 'error:' lines:\n" + "\n".join(bad)


def test_the_checks_can_fail(tmp_path):
    """The walkers see what they look for (a check that cannot fail proves nothing)."""
    p = tmp_path / "m.py"
    p.write_text("import sys\nfrom hwcosim.cosim.cli import main\nimport models.bbs\ndef f():\n    print(f'error: {1}')\n    sys.exit(2)\n"
                 "def g():\n    raise SystemExit(1)\n")
    assert len(_exits(p)) == 3
    assert "cosim.cli.main" in _imports("models.m", p, top_level_only=True)
    assert _legacy_imports(p) == ["line 3: models.bbs"]


def test_no_bare_package_imports():
    """Every project import goes through the one namespace (a user's own ``models/`` must not shadow ours)."""
    tests = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "fuzz").glob("*.py"))
    bad = [f"{p.relative_to(ROOT)} {e}" for p in [*MODULES.values(), *tests] for e in _legacy_imports(p)]
    assert not bad, "import through hwcosim.<package>:\n" + "\n".join(bad)
