"""Layer order, import circles and the one error path, checked on the source (ast), not by importing.

Every import counts, at module level or inside a function (a function-level import is still a
dependency of the file, only a later one), and so does a string naming a project module
(``"hwcosim.x.y:function"``, resolved with importlib at run time).

- ``models`` imports none of ``hdl``, ``pruning``, ``cosim``; ``hdl`` never imports ``cosim``;
  ``pruning`` imports neither ``hdl`` nor ``cosim``.
- ``cosim.flow`` never imports ``cosim.cli`` nor a design package (``cosim.designs.*``): it reaches
  design code through the registry (:mod:`hwcosim.cosim.registry`), whose ``"module:function"``
  strings name it.
- No file-level import circle: in the graph module -> project modules it imports (anywhere in the
  file), no cycle.
- Only the dispatcher (``cosim/cli/__init__.py``, ``cosim/cli/__main__.py``) ends the process or
  prints ``error: ...``: no other module calls ``sys.exit``, raises ``SystemExit`` or prints an
  ``error:`` line; code raises ``hwcosim.models.errors.UsageError`` / ``CheckFailed`` instead.
"""

from __future__ import annotations

import ast
import functools
import re
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
#: what ``cosim.flow`` must never import: the command line above it, and the design packages (it reaches
#: them through the registry)
FLOW_FORBIDDEN = ("cosim.cli", "cosim.designs")
#: Known items other open work of issue 40 removes; the lead empties this set when that work lands.
#: A circle is given as the set of its modules, an import against the layers as (module, target prefix).
PENDING: set = set()


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


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
    tree = _tree(path)
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()

    def visit(n):
        if isinstance(n, ast.Import):
            found.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            if n.level:  # relative: the folder path, spelled as its installed name
                mod = "hwcosim." + ".".join(base[: len(base) - n.level + 1] + ([n.module] if n.module else []))
            else:
                mod = n.module or ""
            # ``from a.b import C`` names ``a.b.C`` (a module) or ``a.b`` (C defined in it): _resolve decides
            found.update(f"{mod}.{a.name}" for a in n.names)
        elif top_level_only and isinstance(n, ast.If | ast.Try):  # guarded module-level imports
            for c in ast.iter_child_nodes(n):
                visit(c)

    for n in nodes:
        visit(n)
    # project imports are spelled hwcosim.<package>...; compare by <package>...
    return {f.removeprefix("hwcosim.") for f in found if f.startswith("hwcosim.") and f.split(".")[1] in PACKAGES}


#: a string that names a project module: ``hwcosim.<package>.x.y`` or ``hwcosim.<package>.x.y:attribute``
_MODULE_STRING = re.compile(rf"hwcosim\.(?:{'|'.join(PACKAGES)})(?:\.\w+)*(?::[\w.]+)?")


def _references(path: Path) -> set[str]:
    """Project modules named by string constants (imported with importlib at run time), as ``a.b.c``."""
    out = set()
    for n in ast.walk(_tree(path)):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and _MODULE_STRING.fullmatch(n.value):
            out.add(n.value.split(":")[0].removeprefix("hwcosim."))
    return out


def _legacy_imports(path: Path) -> list[str]:
    """Imports of the folders under their bare names (``import models``): they must go through ``hwcosim``."""
    out = []
    for n in ast.walk(_tree(path)):
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
        for imp in _imports(name, path, top_level_only=False) | _references(path):
            if imp.split(".")[0] in FORBIDDEN[pkg]:
                bad.append(f"{path.relative_to(ROOT)} imports {imp}")
    assert not bad, "imports against the layer order:\n" + "\n".join(sorted(bad))


def _pending(name: str, imp: str) -> bool:
    return any(isinstance(p, tuple) and p[0] == name and (imp == p[1] or imp.startswith(p[1] + "."))
               for p in PENDING)


def test_flow_reaches_designs_through_the_registry():
    """``cosim.flow`` imports neither the command line nor a design package (nor names them in strings)."""
    bad = []
    for name, path in MODULES.items():
        if not name.startswith("cosim.flow."):
            continue
        for imp in sorted(_imports(name, path, top_level_only=False) | _references(path)):
            if any(imp == f or imp.startswith(f + ".") for f in FLOW_FORBIDDEN) and not _pending(name, imp):
                bad.append(f"{path.relative_to(ROOT)} imports {imp}")
    assert not bad, ("cosim.flow must not import cosim.cli or cosim.designs.* (designs are reached through "
                     "hwcosim.cosim.registry):\n" + "\n".join(bad))


def _resolve(imp: str) -> str | None:
    """The project module an import names (``a.b.C`` -> ``a.b``), or None."""
    parts = imp.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


def _graph() -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its file."""
    graph = {n: {m for i in _imports(n, p, top_level_only=False) if (m := _resolve(i)) and m != n}
             for n, p in MODULES.items()}
    # a package's __init__ is imported before its submodules: an edge sub -> its own package is no cycle
    return {n: {m for m in ms if not n.startswith(m + ".")} for n, ms in graph.items()}


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``graph`` that hold a cycle (Tarjan): the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[set[str]] = []

    def strong(v):  # recursive: the import graph is shallow
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(comps, key=min)


def _cycle(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest cycle inside the component ``comp``, from its first module back to it: ``[a, b, ..., a]``."""
    start = min(comp)
    prev: dict[str, str | None] = {start: None}
    frontier, end = [start], None
    while end is None:  # breadth-first; ends, since every module of comp reaches start
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    end = v
                    break
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
            if end is not None:
                break
        frontier = nxt
    path = [end]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])
    return path[::-1] + [start]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle per import circle (strongly connected component) of ``graph``."""
    return [_cycle(graph, c) for c in _components(graph)]


def test_no_import_circles():
    """No file-level import circle: imports inside functions count (a circle through them is still one)."""
    graph = _graph()
    bad = []
    for comp in _components(graph):
        if frozenset(comp) in PENDING:
            continue
        cycle = _cycle(graph, comp)
        more = f" (the circle holds {len(comp)} modules: {', '.join(sorted(comp))})" if len(comp) > len(cycle) - 1 \
            else ""
        bad.append(" -> ".join(cycle) + more)
    assert not bad, "file-level import circles (module -> module it imports):\n" + "\n".join(bad)


def _exits(path: Path) -> list[str]:
    tree = _tree(path)
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
    p.write_text("import sys\nfrom hwcosim.cosim.cli import main\nimport models.bbs\n"
                 "def f():\n    print(f'error: {1}')\n    sys.exit(2)\ndef g():\n    raise SystemExit(1)\n")
    assert len(_exits(p)) == 3
    assert "cosim.cli.main" in _imports("models.m", p, top_level_only=True)
    assert _legacy_imports(p) == ["line 3: models.bbs"]
    # imports inside functions, relative imports and module strings
    q = tmp_path / "graph" / "tux2.py"
    q.parent.mkdir()
    q.write_text("def run():\n    from .tux2_procs import run_processes\n    from ..cluster import sim\n"
                 "RUNNER = 'hwcosim.cosim.cli.graph:bench'\nNOTE = 'see hwcosim.cosim.cli.graph'\n")
    assert {"models.systems.graph.tux2_procs.run_processes", "models.systems.cluster.sim"} <= \
        _imports("models.systems.graph.tux2", q, top_level_only=False)
    assert not _imports("models.systems.graph.tux2", q, top_level_only=True)
    assert _references(q) == {"cosim.cli.graph"}
    # circles: one per strongly connected component, shortest, from its first module; self-imports too
    g = {"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"d"}, "e": {"a"}, "f": set()}
    assert _circles(g) == [["a", "b", "a"], ["d", "d"]]
    assert _components(g) == [{"a", "b", "c"}, {"d"}]
    assert _circles({"x": {"y"}, "y": {"z"}, "z": {"x"}}) == [["x", "y", "z", "x"]]
    assert not _circles({"x": {"y"}, "y": set()})


def test_no_bare_package_imports():
    """Every project import goes through the one namespace (a user's own ``models/`` must not shadow ours)."""
    tests = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "fuzz").glob("*.py"))
    bad = [f"{p.relative_to(ROOT)} {e}" for p in [*MODULES.values(), *tests] for e in _legacy_imports(p)]
    assert not bad, "import through hwcosim.<package>:\n" + "\n".join(bad)
