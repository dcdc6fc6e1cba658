"""Generated pages of the documentation site, and the mkdocs hook that adds them.

``mkdocs.yml`` names the command line's hook file under ``hooks:`` (``cosim/cli/docs_hook.py``, which
passes on to :func:`on_config` and :func:`on_files` here); at build time :func:`on_files` adds pages
that are generated from the repository as it is, so they cannot go stale:

``reference/cli.md``
    The ``--help`` of every ``hwcosim`` command and subcommand, rendered by :func:`cli_reference`
    from the argparse parsers themselves, which the hook passes in (this module, below the command
    line, does not import it).
``designs/index.md``
    The designs that ``hwcosim verilog`` can emit (the :mod:`hwcosim.cosim.designs` registry) with
    their default parameters, and a status table of every design area.
``designs/<area>.md``
    For each design area that another page does not describe by hand: which pieces exist
    (golden model, RTL, Verilog registry entry, cocotb testbench, tests) and what the module
    docstrings say, read from the source files without importing them; a missing piece is
    listed as "not in the repository yet".
``boards.md``
    The place-and-route reference, rendered from ``docs/boards/*.json``.

A file in ``docs/`` at the path of a generated page is that page's hand-written part (design
notes, how a flow works): the generated text follows it (:func:`with_notes`), so notes and
generated tables live on one page and the notes stay readable in the repository.

The README's designs table is rendered here too (:func:`readme_designs_table`) and kept between
the markers ``<!-- designs:start -->`` / ``<!-- designs:end -->``; ``hwcosim docs --readme``
rewrites that block, ``hwcosim docs --check`` fails when it differs.

``hwcosim docs OUT`` writes the generated pages to the folder ``OUT`` for inspection.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Area", "SYSTEM_AREAS", "areas", "design_areas", "cli_reference", "designs_index", "area_page",
           "generated_pages", "with_notes", "readme_designs_table", "readme_block", "update_readme",
           "README_START", "README_END", "on_config", "on_files"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Area:
    """A design area: the paper it follows and the globs (relative to the repo) of its parts."""

    slug: str
    title: str
    paper: str
    models: tuple[str, ...]
    hdl: tuple[str, ...] = ()
    designs: tuple[str, ...] = ()  # registry names, e.g. "bbs-spmxv"
    tb: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    handwritten: bool = False  # described by a hand-written page (designs/<slug>.md)
    notes: str = ""
    extra: dict = field(default_factory=dict)


#: Areas that are not designs (cluster-level systems); the design areas come from the registry.
SYSTEM_AREAS: tuple[Area, ...] = (
    Area("cluster", "Cluster models (C4, Arnold, Crux, ...)",
         "several datacenter-scale systems papers; see the module docstrings below",
         ("models/systems/cluster/*.py",), tests=("tests/systems/test_cluster*.py",),
         notes="Cluster models are discrete-event simulations in numpy; they have no RTL of their own."),
)


def _src(ref: str) -> tuple[str, ...]:
    from hwcosim.cosim.registry import module_path

    try:
        path = module_path(ref)
    except (ImportError, ValueError):
        return ()
    return (path.relative_to(ROOT).as_posix(),) if path and path.is_relative_to(ROOT) else ()


def design_areas(registry: dict | None = None) -> tuple[Area, ...]:
    """One :class:`Area` per documentation page (``Design.docs.slug``), derived from the registry."""
    if registry is None:
        registry, _ = _registry()
    by_slug: dict[str, list] = {}
    for d in registry.values():
        if d.docs is not None:
            by_slug.setdefault(d.docs.slug, []).append(d)
    areas = []
    for slug, ds in by_slug.items():
        e = ds[0].docs
        models, hdl, tb = [], [], []
        for d in ds:
            models += [m for m in _src(d.golden) if m not in models]
            if d.formal:
                rtl = d.formal.partition(":")[0].removesuffix("_formal")
                hdl += [m for m in _src(rtl) + _src(d.formal) if m not in hdl]
            tb += [m for m in _src(d.testbench) if m not in tb]
        fams = sorted({d.family for d in ds})
        areas.append(Area(slug, e.title, e.paper, tuple(models), tuple(hdl), tuple(d.name for d in ds), tuple(tb),
                          tuple(f"tests/{f}/*.py" for f in fams), handwritten=e.handwritten, notes=e.notes))
    return tuple(areas)


def areas() -> tuple[Area, ...]:
    """Every documented area: the registered designs' pages, then the systems'."""
    return design_areas() + SYSTEM_AREAS


# --- helpers ------------------------------------------------------------------------------------
def _glob(patterns) -> list[Path]:
    found: list[Path] = []
    for pat in patterns:
        for p in sorted(ROOT.glob(pat)):
            if p.is_file() and p not in found:
                found.append(p)
    return found


def _docstring(path: Path) -> str:
    try:
        return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except (SyntaxError, UnicodeDecodeError, OSError):
        return ""


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _registry() -> tuple[dict, str]:
    """The design registry ``{name: Design}``, and an error text when it cannot be imported."""
    try:
        from hwcosim.cosim.registry import designs

        return designs(), ""
    except Exception as e:  # noqa: BLE001 - a module under construction must not break the docs
        return {}, f"{type(e).__name__}: {e}"


def _params_table(params) -> list[str]:
    import dataclasses

    rows = ["| parameter | default |", "|---|---|"]
    try:
        for f in dataclasses.fields(params):
            rows.append(f"| `{f.name}` | `{getattr(params, f.name)!s}` |")
    except TypeError:
        rows.append(f"| (not a dataclass) | `{params!r}` |")
    return rows


# --- CLI reference ------------------------------------------------------------------------------
def _walk(parser: argparse.ArgumentParser, path: list[str]):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, path + [name])


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """Markdown: the ``--help`` text of every command and subcommand of ``parser``
    (:func:`hwcosim.cosim.cli.build_parser`: the ``hwcosim`` command line)."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal width: fix it
    try:
        out = ["# Command-line reference", "",
               "Generated from the argparse parsers of `hwcosim` (`hwcosim.cosim.cli.build_parser()`) when the site "
               "is built; `hwcosim COMMAND --help` prints the same text.", "",
               "Exit status: 0 success, 1 a failed check, 2 bad input (one `error: ...` line on stderr).", ""]
        for path, p in _walk(parser, ["hwcosim"]):
            p.prog = " ".join(path)
            level = "#" * min(2 + len(path) - 2, 4) if len(path) > 1 else "##"
            out += [f"{level} `{' '.join(path)}`", "", "```text", p.format_help().rstrip(), "```", ""]
        return "\n".join(out)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


# --- design pages -------------------------------------------------------------------------------
def _status(area: Area, registry: dict) -> dict[str, str]:
    def files(pats):
        fs = _glob(pats)
        return ", ".join(f"`{_rel(f)}`" for f in fs) if fs else "not in the repository yet"

    reg = [n for n in area.designs if n in registry]
    return {
        "golden model": files(area.models),
        "RTL (Amaranth)": files(area.hdl) if area.hdl else "none (not a hardware design)",
        "`hwcosim verilog` design": ", ".join(f"`{n}`" for n in reg) if reg else
        ("not registered yet" if area.designs else "none"),
        "cocotb testbench": files(area.tb) if area.tb else "none",
        "tests": files(area.tests),
    }


def designs_index() -> str:
    """Markdown: the registered designs and the status of every design area."""
    registry, err = _registry()
    out = ["# Designs", "",
           "Generated from the repository when the site is built: the designs `hwcosim verilog` can emit and "
           "the status of every design area. Every design follows the same path: a numpy golden model "
           "(`models/`, the specification), Amaranth RTL (`hdl/`) that matches it bit for bit in cocotb "
           "simulation (`cosim/tb/`), and Verilog plus a FuseSoC core from `hwcosim verilog`.", ""]
    if err:
        out += [f"!!! warning \"The design registry could not be imported\"\n    `{err}`", ""]
    out += ["## Registered designs", "", "| design | Verilog top | what it is |", "|---|---|---|"]
    for name, d in registry.items():
        out.append(f"| `{name}` | `{d.top}` | {d.description} |")
    if not registry:
        out.append("| (none) | | |")
    out += ["", "## Design areas", "", "| area | golden model | RTL | `hwcosim verilog` | tests |",
            "|---|---|---|---|---|"]
    for a in areas():
        s = _status(a, registry)

        def yes(v):
            return "no" if v.startswith(("not ", "none")) else "yes"

        out.append(f"| [{a.title}]({a.slug}.md) | {yes(s['golden model'])} | {yes(s['RTL (Amaranth)'])} | "
                   f"{yes(s['`hwcosim verilog` design'])} | {yes(s['tests'])} |")
    out += ["", "## Default parameters", ""]
    for name, d in registry.items():
        try:
            p = d.default_params()
        except Exception as e:  # noqa: BLE001
            out += [f"### `{name}`", "", f"default parameters unavailable: `{e}`", ""]
            continue
        out += [f"### `{name}`", "", *_params_table(p), "",
                f"Override any of them: `hwcosim verilog {name} --param field=value`.", ""]
    return "\n".join(out)


def area_page(area: Area) -> str:
    """Markdown page of a design area that has no hand-written page: what exists, what does not."""
    registry, err = _registry()
    s = _status(area, registry)
    out = [f"# {area.title}", "", f"Paper: {area.paper}.", "",
           "!!! note \"Generated from the repository\"",
           "    The sections below are generated when the site is built: what exists now, and the "
           "modules' own documentation. Measured figures are on the [FPGA builds](../boards.md) page, "
           "rendered from `docs/boards/*.json`.", ""]
    if area.notes:
        out += [area.notes, ""]
    out += ["## What is in the repository", "", "| part | files |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in s.items()]
    out.append("")
    missing = [k for k, v in s.items() if v.startswith(("not ",))]
    if missing:
        out += ["Not there yet: " + ", ".join(missing) + ".", ""]
    if err:
        out += [f"The design registry could not be imported: `{err}`.", ""]
    for name in area.designs:
        if name in registry:
            d = registry[name]
            out += [f"## Build it: `{name}`", "", "```sh",
                    f"hwcosim verilog {name} -o build/verilog --synth xcup  # Verilog, FuseSoC core, Yosys",
                    f"fusesoc --cores-root build/verilog run --target sim hwcosim:designs:{d.top}",
                    "```", ""]
            with contextlib.suppress(Exception):
                out += ["Default parameters:", "", *_params_table(d.default_params()), ""]
            if d.register_map:
                out += register_map_section(d)
    out += ["## Module documentation", ""]
    for f in _glob(area.models + area.hdl + area.tb):
        doc = _docstring(f)
        out += [f"### `{_rel(f)}`", ""]
        out += (["```text", doc.replace("```", "'''"), "```", ""] if doc else ["(no module docstring)", ""])
    return "\n".join(out)


def register_map_section(d) -> list[str]:
    """Markdown lines: a design's AXI4-Lite register map, generated from its ``REGISTER_MAP``."""
    from hwcosim.cosim.registry import resolve
    from hwcosim.hdl.common.axil_regs import register_map_markdown

    try:
        regs = resolve(d.register_map)
    except (ImportError, AttributeError) as e:
        return [f"Register map unavailable: `{e}`.", ""]
    # a typed map (hwcosim.hdl.common.registers.RegisterMap) renders its fields too
    table = regs.markdown() if hasattr(regs, "markdown") else register_map_markdown(regs)
    return [f"### AXI4-Lite register map of `{d.name}`", "",
            "Generated from the design's register map (`" + d.register_map + "`), the one the RTL's "
            "register file (`hwcosim.hdl.common.axil_regs.AxiLiteRegFile`), its decode, the host constants and "
            "the formal checks are built from. Unlisted addresses answer SLVERR; 32-bit registers, byte "
            "addresses.", "",
            table, ""]


def boards_page() -> str:
    """Markdown: the place-and-route reference (``docs/boards/results.json``, written by ``make boards``)."""
    import json

    path = ROOT / "docs" / "boards" / "results.json"
    out = ["# FPGA builds: Fmax and area", "", "## Measured: ECP5 out of context", "",
           "Generated from `docs/boards/results.json`, which `make boards` writes: every registered design "
           "synthesised by Yosys (`synth_ecp5`, LUTs mapped by `abc -lut 4`) and placed and routed by "
           "nextpnr-ecp5 out of context (the core alone, no I/O paths) on the named part. nextpnr's timing "
           "model is its own, not the vendor's sign-off. Rebuild one design with "
           "`hwcosim build DESIGN --ooc --seeds 1,2,3`.", ""]
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return "\n".join(out + ["No results recorded yet: run `make boards`.", ""])
    out += [f"Part: **{data['part']} speed {data['speed']}**, target {data['target_mhz']:g} MHz, seeds "
            f"{', '.join(map(str, data['seeds']))}.", "",
            "| design | LUT4 | FF | MULT18X18D | DP16KD | Fmax MHz (min / median) | critical path |",
            "|---|---|---|---|---|---|---|"]
    for r in data.get("results", []):
        a = r["area"]
        f = min(r["fmax_mhz"].values(), key=lambda v: v["min"]) if r["fmax_mhz"] else {"min": 0, "median": 0}
        cp = (r["runs"][0].get("critical_path_detail") or {})
        crit = (f"{cp.get('from', '?')} -> {cp.get('to', '?')}: {cp.get('carry_cells', 0)} carry + "
                f"{cp.get('lut_cells', 0)} LUT cells, {cp.get('delay_ns', {}).get('routing', 0):.1f} ns routing"
                if cp else "-")
        out.append(f"| `{r['design']}` | {a['LUT4']} / {a['LUT4_available']} | {a['FF']} | {a['DSP']} / "
                   f"{a['DSP_available']} | {a['BRAM']} / {a['BRAM_available']} | {f['min']:.1f} / {f['median']:.1f} "
                   f"| {crit} |")
    for fl in data.get("failures", []):
        out.append(f"| `{fl['design']}` | - | - | - | - | did not build | {fl['error'][:160]} |")
    out += ["", "![Fmax and utilisation per design](boards/results.png)", ""]
    out += _ice40_section(ROOT / "docs" / "boards" / "ice40.json")
    out += _bitstream_section(ROOT / "docs" / "boards" / "bitstreams.json")
    return "\n".join(out)


def _ice40_section(path) -> list[str]:
    """The iCE40UP5K out-of-context results (``docs/boards/ice40.json``), if recorded."""
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    out = ["## Measured: iCE40UP5K (iCEBreaker)", "",
           "Each design in the configuration it registers for the iCE40 (`family_params`), synthesised by "
           "`synth_ice40 -dsp -spram` (LUTs by `abc -lut 4`) and placed and routed by nextpnr-ice40 on the "
           f"{data['part']}-{data.get('package', 'SG48')}, target {data['target_mhz']:g} MHz. "
           "nextpnr-ice40 has no out-of-context mode and the part has "
           "39 I/O pins, so the core sits in a scan harness (every port bit behind a shift-register bit; "
           "their logic cells are counted in LC and listed as harness bits). Rebuild one with "
           "`hwcosim build DESIGN --ooc --board ice40up5k-sg48 --seeds 1,2,3`.", "",
           "| design | parameters | LC (LUT4+FF) | FF | SB_MAC16 | EBR | SPRAM | harness bits "
           "| Fmax MHz (min / median) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in data.get("results", []):
        a = r["area"]
        f = min(r["fmax_mhz"].values(), key=lambda v: v["min"]) if r["fmax_mhz"] else {"min": 0, "median": 0}
        out.append(f"| `{r['design']}` | {_params_text(r.get('params', {}))} | {a['LUT4']} / {a['LUT4_available']} | "
                   f"{a['FF']} | "
                   f"{a['DSP']} / {a['DSP_available']} | {a['BRAM']} / {a['BRAM_available']} | "
                   f"{a.get('SPRAM', 0)} / {a.get('SPRAM_available', 0)} | {r.get('harness_bits', 0)} | "
                   f"{f['min']:.1f} / {f['median']:.1f} ({len(r['seeds'])} seed{'s' if len(r['seeds']) > 1 else ''}) |")
    for fl in data.get("failures", []):
        out.append(f"| `{fl['design']}` | {_params_text(fl.get('params', {}))} | does not fit | | | | | | "
                   f"{fl['error'][:200]} |")
    return out + [""]


def _params_text(params: dict) -> str:
    """The integer and enabled boolean fields of a parameter dict (formats left out), for a table cell."""
    return ", ".join(f"{k}={v}" if not isinstance(v, bool) else k for k, v in params.items()
                     if not k.endswith("_fmt") and v is not False and isinstance(v, int | bool))


def _bitstream_section(path) -> list[str]:
    """Board bitstreams (``docs/boards/bitstreams.json``): board top, clock, PLL, Fmax in context."""
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    out = ["## Measured: board bitstreams", "",
           "The board top (UART host bridge + design) built into a bitstream with the pins placed as the "
           "board wires them (`hwcosim build DESIGN --board BOARD [--clock MHZ]`); on an ECP5 board "
           "`--clock` sets the EHXPLLL that makes the design clock from the oscillator.", "",
           "| design | board | clock MHz | PLL (CLKI / CLKFB / CLKOP div, VCO MHz) | LUT4 or LC | DSP | block RAM | "
           "Fmax MHz | timing |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in data.get("results", []):
        a, pll = r["area"], r.get("pll")
        pll_text = (f"{pll['clki_div']} / {pll['clkfb_div']} / {pll['clkop_div']}, {pll['vco_mhz']:g}" if pll
                    else "none (oscillator)")
        fm = ", ".join(f"{v['min']:.1f} ({k.replace('$glbnet$', '')})" for k, v in r["fmax_mhz"].items())
        out.append(f"| `{r['design']}` | {r['board']} | {r['target_mhz']:g} | {pll_text} | "
                   f"{a['LUT4']} / {a['LUT4_available']} | {a['DSP']} / {a['DSP_available']} | "
                   f"{a['BRAM']} / {a['BRAM_available']} | {fm} | {'met' if r['timing_met'] else 'FAIL'} |")
    return out + [""]


def with_notes(path: str, generated: str, docs_dir: Path | None = None) -> str:
    """A generated page preceded by its hand-written part, ``docs/<path>`` when that file exists.

    The notes keep their own title; the generated text follows without its ``# title`` line."""
    notes = (docs_dir or ROOT / "docs") / path
    if not notes.is_file():
        return generated
    body = generated.split("\n", 1)[1] if generated.startswith("# ") else generated
    return notes.read_text(encoding="utf-8").rstrip() + "\n\n" + body.lstrip("\n")


def generated_pages(parser: argparse.ArgumentParser | None = None) -> dict[str, str]:
    """``{path inside docs/: markdown}`` of every generated page (with its hand-written part, if any);
    the command-line reference when given the command line's ``parser``."""
    pages = {"designs/index.md": designs_index(), "boards.md": boards_page()}
    if parser is not None:
        pages["reference/cli.md"] = cli_reference(parser)
    for a in areas():
        if not a.handwritten:
            pages[f"designs/{a.slug}.md"] = area_page(a)
    return {path: with_notes(path, text) for path, text in pages.items()}


# --- README designs table -----------------------------------------------------------------------
README_START = "<!-- designs:start -->"
README_END = "<!-- designs:end -->"


def _short_paper(paper: str) -> str:
    """``Cao et al., "Title", FPGA 2019`` -> ``Cao et al., FPGA 2019``."""
    authors = paper.split(",")[0].strip()
    venue = paper.rsplit('",', 1)[1].strip() if '",' in paper else ""
    return f"{authors}, {venue}" if venue else authors


def _short_description(text: str) -> str:
    """The description up to its first ``:``, `` (`` or ``;`` (the table keeps one short clause)."""
    cut = len(text)
    for sep in (":", " (", ";"):
        i = text.find(sep)
        if i > 0:
            cut = min(cut, i)
    return text[:cut].strip()


def _min_fmax(results: dict, design: str) -> float | None:
    for r in results.get("results", []):
        if r["design"] == design and r.get("fmax_mhz"):
            return min(v["min"] for v in r["fmax_mhz"].values())
    return None


def readme_designs_table(registry: dict | None = None, results: dict | None = None) -> str:
    """Markdown: the README's designs table, from the registry and ``docs/boards/results.json``.

    One row per registered design: its documentation page, the paper, what it does, whether it
    has formal properties (k-induction or BMC only), whether it has a board top (or runs inside
    another design's), and its minimum Fmax over the reference seeds."""
    import json

    if registry is None:
        registry, err = _registry()
        if err:
            raise RuntimeError(f"the design registry cannot be imported: {err}")
    if results is None:
        results = json.loads((ROOT / "docs" / "boards" / "results.json").read_text(encoding="utf-8"))
    part = f"{results.get('part', '?')} speed {results.get('speed', '?')}"
    out = [f"| design | paper | what it does | formal | board top | min Fmax MHz ({part}) |",
           "|---|---|---|---|---|---|"]
    for name, d in registry.items():
        page = f"[`{name}`](docs/designs/{d.docs.slug}.md)" if d.docs else f"`{name}`"
        paper = _short_paper(d.docs.paper) if d.docs else "-"
        formal = ("yes (k-induction)" if d.formal_prove else "yes (BMC)") if d.formal else "no"
        board = "yes" if d.board_tops else (f"in `{d.on_board_in}`" if d.on_board_in else "no")
        f = _min_fmax(results, name)
        out.append(f"| {page} | {paper} | {_short_description(d.description)} | {formal} | {board} | "
                   f"{f'{f:.1f}' if f is not None else '-'} |")
    return "\n".join(out)


def readme_block(text: str) -> str:
    """The text between the README's designs markers (without them); ValueError if they are missing."""
    try:
        start = text.index(README_START) + len(README_START)
        end = text.index(README_END, start)
    except ValueError:
        raise ValueError(f"README.md has no {README_START} ... {README_END} block") from None
    return text[start:end].strip("\n")


def update_readme(path: Path | None = None, check: bool = False) -> bool:
    """Rewrite the README's designs block from :func:`readme_designs_table` (``check``: only compare).

    Returns True when the block already matched."""
    path = path or ROOT / "README.md"
    text = path.read_text(encoding="utf-8")
    old, new = readme_block(text), readme_designs_table()
    if old == new or check:
        return old == new
    start = text.index(README_START) + len(README_START)
    end = text.index(README_END, start)
    from hwcosim.models.atomic import write_text

    write_text(path, text[:start] + "\n" + new + "\n" + text[end:])
    return False


def api_source_tree(where: Path) -> Path:
    """A folder laid out as the installed package (``hwcosim/hdl`` -> ``hdl/``, ...) made of links into
    the checkout, for tools that read the source by module path (mkdocstrings' API pages)."""
    pkg = where / "hwcosim"
    pkg.mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", "hdl", "models", "pruning", "cosim"):
        link, target = pkg / name, (ROOT / "hwcosim" / name if name.endswith(".py") else ROOT / name)
        if not link.is_symlink():
            link.symlink_to(target)
    return where


# --- mkdocs hooks ---
def on_config(config, **kwargs):
    """mkdocs hook: the "Designs" section of the navigation, from the registry (no hand-kept list), and
    the API pages' source tree (the package as installed, so ``::: hwcosim.models...`` resolves)."""
    api_source_tree(ROOT / "build" / "api-src")
    pages = [{"Overview": "designs/index.md"}] + [{a.title: f"designs/{a.slug}.md"} for a in areas()]
    nav = config.get("nav") or []
    for item in nav:
        if isinstance(item, dict) and "Designs" in item:
            item["Designs"] = pages
            break
    else:
        nav.append({"Designs": pages})
    config["nav"] = nav
    return config


# --- mkdocs hook --------------------------------------------------------------------------------
def on_files(files, config, parser: argparse.ArgumentParser | None = None, **kwargs):
    """mkdocs hook: add the generated pages (the command-line reference from ``parser``); a file of the
    same path in ``docs/`` is the page's hand-written part, already included by :func:`generated_pages`,
    so the generated page replaces it."""
    from mkdocs.structure.files import File

    for path, text in generated_pages(parser).items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=text))
    return files
