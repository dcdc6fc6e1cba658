"""The design registry: one :class:`Design` record per design, declared next to the design.

A design family ``X`` lives in four mirrored folders: ``hdl/X/`` (Amaranth RTL and formal
properties), ``models/X/`` (golden model and cycle model), ``cosim/designs/X/`` (testbenches,
runner glue, benches, sweep adapter, bridges, and the registry entries in ``design.py``) and
``tests/X/``. Every list of designs in the project - the command line's choices, the formal
providers, the sweep adapters, the per-design benches, the docs pages and the tests'
parametrisations - is derived from :func:`designs`; none is kept by hand.

Discovery: every sub-package of :mod:`hwcosim.cosim.designs` whose modules named ``design`` or
``design_*`` define ``DESIGNS`` (a list of :class:`Design`). Designs kept outside the tree
(a user's own, or the toy design of the contributor guide's test) are added by naming their
modules in the environment variable ``HWCOSIM_DESIGN_MODULES`` (comma-separated importable
module names, each with a ``DESIGNS`` list). ``docs/adding-a-design.md`` walks through it.

References to code are ``"module:attribute"`` strings, resolved only when used, so listing the
designs imports no RTL, simulator or benchmark code.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwcosim.models.errors import UsageError

__all__ = ["Design", "DocsEntry", "designs", "get_design", "override_params", "params_from_file",
           "resolve_params", "read_params_file", "parse_param_items", "apply_changes", "resolve", "module_path",
           "ENV_MODULES"]

#: environment variable naming extra modules that define ``DESIGNS``
ENV_MODULES = "HWCOSIM_DESIGN_MODULES"


@dataclass(frozen=True)
class DocsEntry:
    """Where a design appears in the documentation: a page (``slug``) shared by a family's designs."""

    slug: str
    title: str
    paper: str
    handwritten: bool = False  # docs/designs/<slug>.md is written by hand (else generated)
    notes: str = ""


@dataclass(frozen=True)
class Design:
    """One registered design.

    Parameters
    ----------
    name : str
        Registry name used on the command line (``bbs-spmxv``).
    top : str
        Verilog top-level module name.
    default_params : callable
        Returns the default parameter object (a frozen dataclass from ``models``); its class
        validates every field, so it is the one place that says what is buildable.
    build : callable
        ``build(params)`` -> the Amaranth component (the RTL builder).
    description : str
        One line for tables and docs.
    family : str
        The folder name ``X`` (``hdl/X``, ``models/X``, ``cosim/designs/X``, ``tests/X``); filled
        in from the package the record is declared in when left empty.
    golden : str
        ``"module:function"`` of the golden model (the bit-exact specification).
    testbench : str
        The cocotb test module.
    formal : str
        ``"module:function"`` returning the design's formal check specs (``full: bool`` argument).
    formal_prove : bool
        The formal properties include k-induction proofs (else bounded model checking only).
    formal_extra : tuple of (name, "module:function")
        Building blocks proven alongside this design (e.g. the AXI4 read master of an AXI top).
    benches : tuple of (name, "module:function")
        Benchmarks of this design, each ``fn(out_dir, quick) -> dict``.
    sweep : str
        ``"module:attribute"`` of its :class:`hwcosim.cosim.flow.sweep.Adapter`, if it can be swept.
    docs : DocsEntry
        Its documentation page.
    board_tops : tuple of (name, "module:function", "host module")
        Board tops (a host bridge around the design, :mod:`hwcosim.cosim.flow.board_build`): the function
        takes ``(params, baud)`` and returns the top; the host module provides ``session`` (the
        coroutine that drives it over :class:`hwcosim.cosim.flow.board.HostLink`), ``compare`` and
        ``run_board_sim`` (``hwcosim board run``).
    on_board_in : str
        For a design without a board top of its own: the registered design whose board top
        carries it (a core inside its AXI top), named when a bitstream or a board run is asked
        for.
    register_map : str
        ``"module:attribute"`` of the AXI4-Lite register map (a tuple of
        :class:`hwcosim.hdl.common.axil_regs.Reg`) of a top with a control interface; the docs render it.
    recheck : str
        ``"module:function"`` that re-verifies a saved run folder (``hwcosim check``).
    board_params : callable, optional
        Parameters that fit the default FPGA part: the defaults of ``hwcosim build`` and ``hwcosim
        board run``, under ``--params``/``--param``; ``None``: the design's defaults fit.
    family_params : tuple of (family, callable)
        Configurations for other FPGA families (``("ice40", lambda: ...)`` for the iCE40UP5K),
        used by ``hwcosim build --board`` on a part of that family; a family not listed falls
        back to ``board_params`` (or the defaults) and may not fit.
    board_top_params : callable, optional
        Parameters of the ECP5 board top (the bitstream and ``hwcosim board run``) when they
        differ from ``board_params``, which stays the out-of-context reference: a core that fits
        the part alone but whose board top does not route (the BeamRaster precoder at 16 lanes).
    contract : str
        ``"module:attribute"`` of the design's simulation contract (a
        :class:`hwcosim.cosim.contract.SimContract`):
        random stimulus, golden outputs, the RTL run and the word comparison behind
        ``hwcosim sim DESIGN`` and ``hwcosim.design(name).simulate()``.
    """

    name: str
    top: str
    default_params: Callable[[], Any]
    build: Callable[[Any], Any]
    description: str = ""
    family: str = ""
    golden: str = ""
    testbench: str = ""
    formal: str = ""
    formal_prove: bool = True
    formal_extra: tuple = ()
    benches: tuple = ()
    sweep: str = ""
    docs: DocsEntry | None = None
    board_tops: tuple = ()
    on_board_in: str = ""
    register_map: str = ""
    recheck: str = ""
    board_params: Callable[[], Any] | None = None
    family_params: tuple = ()
    board_top_params: Callable[[], Any] | None = None
    contract: str = ""

    def board_config(self, family: str = "ecp5", top: bool = False) -> Any:
        """The parameters registered for a board of ``family`` (None: the defaults); ``top``: for
        its board top (a bitstream, a board session) rather than the core out of context."""
        for fam, fn in self.family_params:
            if fam == family:
                return fn()
        if top and self.board_top_params and family == "ecp5":
            return self.board_top_params()
        return self.board_params() if self.board_params else None

    @property
    def params_class(self) -> type:
        return type(self.default_params())


def resolve(ref: str) -> Any:
    """The object named by ``"module:attribute"``."""
    modname, _, attr = ref.partition(":")
    obj = importlib.import_module(modname)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def module_path(ref: str) -> Path | None:
    """The source file of the module named in ``"module:attribute"`` (no import), or None."""
    if not ref:
        return None
    spec = importlib.util.find_spec(ref.partition(":")[0])
    return Path(spec.origin) if spec and spec.origin else None


def _modules() -> list[str]:
    import hwcosim.cosim.designs as pkg

    names = []
    for fam in pkgutil.iter_modules(pkg.__path__):
        if not fam.ispkg:
            continue
        sub = importlib.import_module(f"hwcosim.cosim.designs.{fam.name}")
        for m in sorted(pkgutil.iter_modules(sub.__path__), key=lambda m: m.name):
            if m.name == "design" or m.name.startswith("design_"):
                names.append(f"hwcosim.cosim.designs.{fam.name}.{m.name}")
    extra = [m.strip() for m in os.environ.get(ENV_MODULES, "").split(",") if m.strip()]
    return names + extra


def designs() -> dict[str, Design]:
    """Every registered design, by name (sorted)."""
    found: dict[str, Design] = {}
    for modname in _modules():
        try:
            mod = importlib.import_module(modname)
        except ImportError as e:
            raise UsageError(f"design module {modname!r} cannot be imported ({e}); "
                             f"check {ENV_MODULES} or the package") from None
        in_tree = modname.startswith("hwcosim.cosim.designs.")
        fam_default = modname.split(".")[3] if in_tree else modname.rpartition(".")[0]
        for d in getattr(mod, "DESIGNS", ()):
            if not isinstance(d, Design):
                raise TypeError(f"{modname}.DESIGNS holds {d!r}, not a Design")
            if d.name in found:
                raise RuntimeError(f"two designs are named {d.name!r}")
            if not d.family:
                d = dataclasses.replace(d, family=fam_default)
            found[d.name] = d
    return dict(sorted(found.items()))


def get_design(name: str) -> Design:
    ds = designs()
    if name not in ds:
        raise UsageError(f"unknown design {name!r}; choose one of: {', '.join(ds)}")
    return ds[name]


def _convert(old: Any, text: Any, field: str) -> Any:
    """``text`` (a command-line string or a TOML value) as the type of the field's default ``old``."""
    from hwcosim.models.fixedpoint import Q

    if not isinstance(text, str):  # a TOML value: check its type, then let the params class validate
        if isinstance(old, bool) and isinstance(text, bool):
            return text
        if isinstance(old, int) and not isinstance(old, bool) and isinstance(text, int) and not isinstance(text, bool):
            return text
        if isinstance(old, float) and isinstance(text, int | float) and not isinstance(text, bool):
            return float(text)
        if isinstance(old, tuple) and isinstance(text, list):
            return tuple(text)
        text = str(text) if isinstance(text, int | float) and not isinstance(text, bool) else text
        if not isinstance(text, str):
            raise UsageError(f"parameter {field}={text!r}: expected a {type(old).__name__} like {old!r}")
    if isinstance(old, Q):
        try:
            return Q.parse(text)
        except ValueError as e:
            raise UsageError(f"parameter {field}: {e}") from None
    try:
        if isinstance(old, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(old, int):
            return int(text, 0)
        if isinstance(old, float):
            return float(text)
        if isinstance(old, tuple):
            return tuple(int(v, 0) for v in text.replace("x", ",").split(","))
        if isinstance(old, str):
            return text
    except ValueError:
        raise UsageError(f"parameter {field}={text}: expected a {type(old).__name__} like {old!r}") from None
    raise UsageError(f"parameter {field}: fields of type {type(old).__name__} cannot be set from the command line")


def apply_changes(params: Any, changes: dict[str, Any], where: str, exact: dict[str, Any] | None = None) -> Any:
    """``params`` with ``changes`` (strings or TOML values, converted to each field's type) and ``exact``
    (values of the right type already) applied in one step, validated once by the parameter class."""
    fields = {f.name for f in dataclasses.fields(params)}
    conv = {}
    for key, value in changes.items():
        key = key.strip().replace("-", "_")
        if key not in fields:
            raise UsageError(f"{where} {key}: no such parameter of {type(params).__name__}; "
                             f"choose from {', '.join(sorted(fields))}")
        conv[key] = _convert(getattr(params, key), value.strip() if isinstance(value, str) else value, key)
    conv.update(exact or {})
    try:
        return dataclasses.replace(params, **conv)
    except (ValueError, TypeError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"{where}: {msg}") from None


def parse_param_items(items: list[str] | None, flag: str = "--param") -> dict[str, str]:
    """``["pes=4", ...]`` -> ``{"pes": "4"}`` (later items win)."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"{flag} {item!r}: write FIELD=VALUE, e.g. {flag} pes=4")
        key, text = item.split("=", 1)
        out[key.strip().replace("-", "_")] = text
    return out


def override_params(params: Any, overrides: list[str] | None) -> Any:
    """``params`` with ``FIELD=VALUE`` overrides applied (validated by the parameter class)."""
    changes = parse_param_items(overrides)
    return apply_changes(params, changes, "--param") if changes else params


def params_from_file(params: Any, path: str | os.PathLike | None) -> Any:
    """``params`` with the fields of a TOML file applied (``--params FILE.toml``)."""
    if not path:
        return params
    return apply_changes(params, read_params_file(path), f"--params {Path(path).name}:")


def read_params_file(path: str | os.PathLike) -> dict[str, Any]:
    """The ``FIELD = VALUE`` lines of a TOML parameter file, as a dict (one-line errors)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"--params {str(p)!r}: no such file; give a .toml of FIELD = VALUE lines") from None
    except OSError as e:
        raise UsageError(f"--params {str(p)!r}: cannot read it ({e.strerror or e})") from None
    if len(raw) > 1 << 20:
        raise UsageError(f"--params {str(p)!r}: larger than 1 MiB; a parameter file holds a few FIELD = VALUE lines")
    from hwcosim.models.safeparse import toml_loads

    data = toml_loads(raw, f"--params {str(p)!r}", UsageError, "parameter file")  # deep nesting: one line too
    nested = [k for k, v in data.items() if isinstance(v, dict)]
    if nested:
        raise UsageError(f"--params {str(p)!r}: table [{nested[0]}] not allowed; write FIELD = VALUE lines")
    return data


def resolve_params(design: Design, param: list[str] | None = None, params_file: str | None = None,
                   base: Any = None) -> Any:
    """The one parameter channel: defaults (or ``base``) <- ``--params FILE`` <- ``--param F=V``."""
    from hwcosim.models.precedence import layered

    p = design.default_params() if base is None else base
    changes = layered((f"--params {params_file}", read_params_file(params_file) if params_file else None),
                      ("--param", parse_param_items(param)))
    return apply_changes(p, changes, "parameter") if changes else p
