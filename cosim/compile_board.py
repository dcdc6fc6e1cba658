"""A compiled model on a board: sizing to the part, weights on chip or reloaded, build and board run.

``hwcosim compile MODEL --board ulx3s-85f`` (``compile_model(..., board=...)``) sizes every engine
layer's parallelism (BBS: banks and PEs; FSS: the PE array) to the layer and to the part, and
decides which layers keep their weights on chip:

- **The part** (:func:`part_resources`): LUT4, MULT18X18D (DSP) and DP16KD (BRAM) available, as
  nextpnr reported them for that board in ``docs/boards/*.json``.
- **The plan**: every engine layer has its own board top (the UART host bridge, the engine and its
  memories: :data:`BOARD_TOPS`) side by side on the part; the estimates are summed over the layers.
- **DSP**: one MULT18X18D per multiplier lane (BBS: banks x PEs; FSS: PE rows x PE columns x n) plus
  the board top's fixed count, both fitted on the measured points (:func:`fit_models`).
- **LUT4**: ``a + b * lanes`` per board-top design, least squares on the out-of-context points of
  ``docs/boards/results.json`` and any ``build.json`` under the build roots (one point: a line
  through the origin), plus the in-context overhead measured on the board (``bitstreams.json``
  minus the out-of-context result of the same parameters); a plan may fill at most
  :data:`LUT_FILL` of the part's LUT4s and at most as many DSPs as a recorded bitstream has
  routed on the part (:func:`routed_dsp_max`; routability). The fit's error on its own points is
  reported (:func:`fit_models`); with one or two points it says little about other sizes.
- **BRAM**: every memory of the layer's board top (:func:`board_memories`: the geometry of each
  memory the RTL declares, equal to the elaborated Amaranth netlist's, :func:`elaborated_memories`)
  is mapped as Yosys's ECP5 memory mapper costs it (``brams_16kd.txt``: 128 per DP16KD;
  ``lutrams_trellis.txt``: 4 per 16 x 4 LUT RAM): the cheaper of LUT RAM and the fewest DP16KD
  tiles of any aspect ratio. On the six measured ECP5 results of the three board-top designs this
  gives the DP16KD count nextpnr reported exactly (:func:`check_bram_rule`).
- **Weights**: the layers' weight stores stay on chip while the block RAM left beside every
  buffer holds them; otherwise the largest are **reloaded per layer**: their weights cross the
  loader (one 32-bit word per cycle: the ``_Loader`` of ``hdl/bbs/board.py``, the weight
  deserialiser of ``hdl/bbs/axi_top.py``, the weight store loader of ``hdl/fss/axi_top.py``) into
  one shared buffer, as large as the largest reloaded store, before the layer runs, and those
  cycles (:func:`load_words`) are added to the layer's expected cycles.
- **Does not fit**: a layer whose board top without weights needs more LUT4/DSP/BRAM than the part
  has at the smallest configuration, or whose weight memory alone exceeds the block RAM left, is a
  :class:`hwcosim.UsageError` naming the layer, the resource, the need and what the part has;
  nothing is written.

The largest configuration (:data:`BBS_LEVELS`, :data:`FSS_LEVELS`, each layer clamped to its own
shape) whose summed estimate fits is chosen.

What runs today: the model's ONE combined board top (:mod:`hwcosim.hdl.compiled.board`): one engine
per distinct engine configuration (layers of equal configuration share it, their weights reloaded
through its own loader before each layer), each the unchanged core of its engine's board top, behind
one UART host bridge; an engine field in the upper AXI4-Lite address bits selects the engine's
registers and each engine has its own stream channels (:func:`combined_config`).
:func:`build_compiled` (``m.build``, ``hwcosim build OUT/``) builds that top, out of context
(``--ooc``) or into one bitstream; ``combined=False`` builds each configuration on its own as before
(OOC: the engine alone, where ``hwcosim run`` reads its Fmax). :func:`board_sessions`
(``m.run_on_board``, ``hwcosim board run OUT/``) runs every layer on it in one session, each layer's
own board session through an address-offsetting link
(:class:`hwcosim.cosim.flow.board.EngineLink`), on a board or against the top's RTL (one cocotb
simulation, :func:`run_combined_sim`). The plan above still sums one board top per layer (a bridge
and the memories each), while the combined top shares one bridge and gives layers of equal
configuration one engine; the plan's estimate of a combined top beside its nextpnr result is in
``docs/boards/compiled.json`` (docs/compile.md, "On a board").
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.fixedpoint import Q
from hwcosim.models.safeparse import read_json

__all__ = ["BOARD_TOPS", "BBS_LEVELS", "FSS_LEVELS", "LUT_FILL", "PNR_ROOT", "keep_count", "part_resources",
           "fit_models", "plan_board", "board_report", "check_bram_rule", "memory_map", "build_plan", "build_compiled",
           "board_session", "board_sessions", "board_memories", "elaborated_memories", "is_compiled_folder",
           "combined_config", "COMBINED", "run_combined_sim"]

ROOT = Path(__file__).resolve().parents[1]
BOARDS_DIR = ROOT / "docs" / "boards"
#: engine -> (design whose board top runs it, "module:HostClass" of the board top's core, host session module)
BOARD_TOPS = {"bbs-spmxv": ("bbs-spmxv", "hwcosim.hdl.bbs.board:SpMxVHost", "hwcosim.cosim.designs.bbs.board"),
              "bbs-lstm": ("bbs-lstm-axi", "hwcosim.hdl.bbs.board_lstm:LSTMHost",
                           "hwcosim.cosim.designs.bbs.board_lstm"),
              "fss-gemm": ("fss-axi", "hwcosim.hdl.fss.board:FSSHost", "hwcosim.cosim.designs.fss.board")}
#: BBS configurations (banks, PEs), smallest first; PEs a multiple of 4 (the LSTM layer's rule)
BBS_LEVELS = ((2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
#: FSS PE arrays (PE rows, PE columns), smallest first
FSS_LEVELS = ((1, 1), (1, 2), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8))
#: the share of the part's LUT4s a plan may use (nextpnr routes a fuller part slowly or not at all)
LUT_FILL = 0.8
#: Yosys's ECP5 memory mapping costs (techlibs lattice brams_16kd.txt, lutrams_trellis.txt)
DP16KD_COST, LUTRAM_COST = 128, 4
#: DP16KD aspect ratios (depth, width)
DP16KD_MODES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))
#: where ``hwcosim run`` looks for the measured Fmax of an engine configuration (``compile_run.BUILDS``)
PNR_ROOT = Path("build") / "pnr"
#: the engines' word widths as compile_model sets them (weights 8, vectors 16, results 16 bits)
_W, _V, _O = Q(2, 6), Q(4, 12), Q(8, 8)


def keep_count(bank_size: int, sparsity: float) -> int:
    """Weights kept per bank (region): the fewest that keep at least ``1 - sparsity`` of it (and at
    least one); compile_model prunes to it and the board plan sizes the weight stores by it."""
    return max(1, int(np.ceil(bank_size * (1 - sparsity) - 1e-9)))


# -- the part ---------------------------------------------------------------------------------------

def _records(roots=None) -> list[tuple[Path, dict]]:
    """Every place-and-route result of ``docs/boards/*.json`` and of ``build.json`` files under ``roots``."""
    files = sorted(BOARDS_DIR.glob("*.json")) + sorted(BOARDS_DIR.glob("*/*.json"))
    for r in roots or ():
        if Path(r).is_dir():
            files += sorted(Path(r).rglob("build.json"))
    out = []
    for f in files:
        try:
            doc = read_json(f, "build result")
        except UsageError:
            continue  # not a result this lookup can use
        for r in (doc.get("results", [doc]) if isinstance(doc, dict) else []):
            if isinstance(r, dict) and isinstance(r.get("area"), dict) and r.get("design"):
                out.append((f, r))
    return out


def part_resources(board: str) -> dict:
    """LUT4, DSP (MULT18X18D) and BRAM (DP16KD) available on ``board``, as nextpnr reported them in a
    ``docs/boards/*.json`` result for that board (UsageError for a board without one)."""
    from hwcosim.cosim.flow.build import get_board

    b = get_board(board)
    for f, r in _records():
        if r.get("board") == b.name and r.get("family") == "ecp5":
            a = r["area"]
            dsp_routed, dsp_src = routed_dsp_max(b.device)
            return {"board": b.name, "part": b.device, "LUT4": int(a["LUT4_available"]),
                    "DSP": int(a["DSP_available"]), "BRAM": int(a["BRAM_available"]),
                    "DSP_routed": dsp_routed, "DSP_routed_from": dsp_src,
                    "source": str(f.relative_to(ROOT))}
    known = sorted({r["board"] for _, r in _records() if r.get("family") == "ecp5" and r.get("mode") == "board"})
    raise UsageError(f"--board {board}: sizing needs an ECP5 board with nextpnr results in docs/boards/*.json; "
                     f"it knows {', '.join(known)}")


def routed_dsp_max(device: str) -> tuple[int, str]:
    """The most MULT18X18D blocks a recorded nextpnr result on ``device`` (``docs/boards/*.json``) has
    placed AND routed in context on a board (a bitstream's run: fixed pins, the UART bridge), and which
    result that is: the plan's DSP ceiling (:func:`plan_board`).

    Docs example (a)'s network at 50 % as one combined top (135 of 156 MULT18X18D, 28 % of the LUT4s)
    placed but router2 still had thousands of overused wires after half an hour
    (``docs/boards/compiled.json``'s ``failures``), although a 144-DSP design has routed out of context:
    in context, no top with more than the ceiling has been shown to route, so the plan does not go past
    it; a larger routed bitstream raises the ceiling by itself. (0, "") without such a result."""
    best, src = 0, ""
    for f, r in _records():
        a = r["area"]
        if (r.get("part") == device and r.get("mode") == "board" and r.get("worst_fmax_mhz")
                and isinstance(a.get("DSP"), int) and a["DSP"] > best):
            best, src = a["DSP"], f"{f.relative_to(ROOT)}: {r['design']}"
    return best, src


# -- estimates --------------------------------------------------------------------------------------

def lanes(engine: str, params) -> int:
    """Multiplier lanes of an engine configuration."""
    if engine == "fss-gemm":
        return params.pe_rows * params.pe_cols * params.n
    return params.banks * params.pes


def _lanes_of_record(design: str, pd: dict) -> int | None:
    try:
        if design == "fss-axi":
            return int(pd["pe_rows"] * pd["pe_cols"] * pd["n"])
        return int(pd["banks"] * pd["pes"])
    except (KeyError, TypeError):
        return None


@dataclass
class LinearFit:
    """``y = a + b * lanes`` on measured points ``(lanes, y)``; ``max_rel_err`` on those points."""

    a: float
    b: float
    points: list
    max_rel_err: float
    how: str

    def __call__(self, x: int) -> float:
        return self.a + self.b * x

    def to_dict(self) -> dict:
        return {"intercept": round(self.a, 2), "per_lane": round(self.b, 3), "points": self.points,
                "max_rel_err_on_points": round(self.max_rel_err, 4), "fit": self.how}


def _fit(points: list[tuple[int, float]], slope: float | None = None) -> LinearFit:
    xs = np.array([p[0] for p in points], float)
    ys = np.array([p[1] for p in points], float)
    if slope is not None:
        a, b, how = float(np.mean(ys - slope * xs)), slope, f"fixed {slope:g} per lane + mean intercept"
    elif len(set(xs)) >= 2:
        b, a = np.polyfit(xs, ys, 1)
        how = f"least squares on {len(points)} points"
    else:
        a, b, how = 0.0, float(np.mean(ys / xs)), f"through the origin ({len(points)} point(s) at one size)"
    pred = a + b * xs
    err = float(np.max(np.abs(pred - ys) / np.maximum(ys, 1))) if len(ys) else 0.0
    return LinearFit(float(a), float(b), [[int(x), int(y)] for x, y in zip(xs, ys)], err, how)


def fit_models(board: str, roots=None) -> dict:
    """Per engine: the LUT4 and DSP fits on the measured out-of-context points of its board-top design
    (ECP5) and the in-context overhead of the board top on ``board`` (LUT4: board result minus the
    out-of-context result of the same parameters; 0 when none is measured)."""
    from hwcosim.cosim.flow.build import get_board

    bname = get_board(board).name
    recs = _records(roots)
    models = {}
    for engine, (design, _, _) in BOARD_TOPS.items():
        ooc = [(r["params"], r["area"]) for _, r in recs
               if r.get("design") == design and r.get("family") == "ecp5"
               and str(r.get("mode", "")).startswith("out-of-context") and isinstance(r.get("params"), dict)]
        pts_l, pts_d, seen = [], [], set()
        for pd, a in ooc:
            x = _lanes_of_record(design, pd)
            key = (json.dumps(pd, sort_keys=True), a.get("LUT4"))
            if x and key not in seen:
                seen.add(key)
                pts_l.append((x, a["LUT4"]))
                pts_d.append((x, a["DSP"]))
        if not pts_l:
            raise CheckFailed(f"no measured out-of-context result of {design} in docs/boards/results.json")
        over, over_src = 0, "none measured"
        for _, r in recs:
            if r.get("design") == design and r.get("board") == bname and r.get("mode") == "board":
                same = [a for pd, a in ooc if pd == r.get("params")]
                if same:
                    over, over_src = int(r["area"]["LUT4"] - same[0]["LUT4"]), f"{bname} board result"
        models[engine] = {"design": design, "lut": _fit(pts_l), "dsp": _fit(pts_d, slope=1.0),
                          "lut_board_overhead": over, "overhead_from": over_src}
    return models


def memory_map(width: int, depth: int) -> tuple[str, int]:
    """Where Yosys's ECP5 mapper puts a ``width`` x ``depth`` memory: ("bram", DP16KD tiles) or
    ("lutram", 16 x 4 LUT RAM cells), the cheaper by its costs."""
    tiles = min(math.ceil(depth / d) * math.ceil(width / w) for d, w in DP16KD_MODES)
    cells = math.ceil(width / 4) * math.ceil(depth / 16)
    return ("bram", tiles) if DP16KD_COST * tiles < LUTRAM_COST * cells else ("lutram", cells)


_MEMS: dict = {}
#: memory names of the board tops' weight stores
_WEIGHT_MEMS = ("wmem", "wstore")


def elaborated_memories(engine: str, params) -> list[tuple[str, int, int]]:
    """(name, width, depth) of every memory of ``engine``'s board top at ``params``, from its elaborated
    Amaranth netlist (about a second each; :func:`board_memories` gives the same list from formulas and
    the tests hold the two equal)."""
    from amaranth.hdl import Fragment, Shape
    from amaranth.hdl._mem import MemoryInstance
    from hwcosim.cosim.registry import resolve

    out = []

    def walk(fr, path):
        if isinstance(fr, MemoryInstance):
            out.append((path.rsplit(".", 1)[-1], Shape.cast(fr._data.shape).width, fr._data.depth))
        for sub, name, *_ in fr.subfragments:
            walk(sub, f"{path}.{name}" if path else str(name))

    walk(Fragment.get(resolve(BOARD_TOPS[engine][1])(params, 8), None), "")
    return out


def board_memories(engine: str, params) -> list[tuple[str, int, int]]:
    """(name, width, depth) of every memory of ``engine``'s board top at ``params``: the engine's vector
    buffers, the host's weight, vector and result memories and FIFOs (``hdl/bbs/board.py``,
    ``hdl/bbs/lstm.py`` + ``board_lstm.py``, ``hdl/fss/gemm.py`` + ``axi_top.py`` + ``board.py``)."""
    from hwcosim.hdl.fss.gemm import OUT_DEPTH

    p = params
    if engine == "fss-gemm":
        aw, ow = p.act_fmt.width, p.out_fmt.width
        abits = max(1, (p.max_k_regions - 1).bit_length())
        ybits = p.pe_rows * p.r_h * p.pe_cols * ow
        mems = [(f"abuf_{t}_{b}", aw, 2 << abits) for t in range(p.pe_cols) for b in range(p.r_w)]
        return mems + [("out_queue", ybits, OUT_DEPTH),
                       ("wstore", p.weight_beat_bits, p.max_row_groups * p.max_k_regions),
                       ("storage", ybits, max(2, p.max_row_groups) - 1)]
    bbs = p.bbs if engine == "bbs-lstm" else p
    vw = bbs.vec_fmt.width
    P, B = bbs.pes, bbs.banks
    mems = [(f"vmem_{i}_{j}", vw, 2 << bbs.index_bits) for i in range(P) for j in range(B)]
    mems.append(("wmem", P * B * bbs.lane_width, bbs.weight_beats))
    if engine == "bbs-spmxv":
        return mems + [("xmem", B * vw, bbs.vector_beats), ("ymem", P * bbs.out_fmt.width, bbs.row_groups)]
    U, G, H = p.units, p.rows // p.pes, p.hidden
    return mems + [("bmem", p.gate_fmt.width * P, G), ("cmem", p.cell_fmt.width * U, G),
                   ("storage", U * vw, H // U), ("storage", U * vw, max(2, H // U) - 1)]


def bram_split(engine: str, params) -> tuple[int, int]:
    """DP16KD tiles of a board top's memories: (without the weight store, the weight store)."""
    other = weights = 0
    for name, w, d in board_memories(engine, params):
        kind, n = memory_map(w, d)
        if kind != "bram":
            continue
        if name in _WEIGHT_MEMS:
            weights += n
        else:
            other += n
    return other, weights


def check_bram_rule(roots=None) -> list[dict]:
    """The BRAM rule against every measured ECP5 result of a board-top design: estimate vs nextpnr."""
    from hwcosim.cosim.registry import get_design

    rows = []
    for f, r in _records(roots):
        for engine, (design, _, _) in BOARD_TOPS.items():
            if r.get("design") == design and r.get("family") == "ecp5" and isinstance(r.get("params"), dict):
                p = type(get_design(design).default_params()).from_dict(r["params"])
                o, w = bram_split(engine, p)
                rows.append({"design": design, "mode": r.get("mode"), "board": r.get("board"),
                             "measured_bram": int(r["area"]["BRAM"]), "estimate_bram": o + w,
                             "source": str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f)})
    return rows


# -- per-layer engine parameters -------------------------------------------------------------------

def _pow2_floor(n: int) -> int:
    return 1 << (max(1, int(n)).bit_length() - 1)


def layer_options(lay, target: str, level: tuple[int, int]) -> dict:
    """The engine options of one layer at ``level``, clamped to the layer's shape (BBS: no bank of one
    column, no more PEs than rows; FSS: no more PE rows than row groups)."""
    a, b = level
    if target == "fss":
        return {"pe_rows": a, "pe_cols": b}
    if lay.kind == "lstm":
        I, H = lay.attrs["input_size"], lay.attrs["hidden"]
        banks = min(a, _pow2_floor(max(1, I + H) // 2))
        pes = max(4, min(b, 4 * _pow2_floor(H)))
        return {"banks": banks, "pes": pes}
    out_f, in_f = lay.w.shape
    banks = a
    while banks > 1 and -(-in_f // banks) < 2:
        banks //= 2
    return {"banks": banks, "pes": max(1, min(b, _pow2_floor(out_f)))}


def layer_params(lay, target: str, sparsity: float, opts: dict, region=(2, 8)):
    """The engine and its parameters (formats at the compiled widths) compile_model makes for ``lay``
    with ``opts`` (the same padding and kept count as :func:`hwcosim.cosim.compile._prune_stage` /
    ``_prune_fss``)."""
    from hwcosim.models.bbs.lstm import LSTMParams
    from hwcosim.models.bbs.spmxv import BBSParams
    from hwcosim.models.fss.gemm import FSSParams

    if target == "fss":
        out_f, in_f = lay.w.shape
        rh, rw = region
        pr = opts["pe_rows"]
        rows = -(-out_f // (rh * pr)) * rh * pr
        cols = -(-in_f // rw) * rw
        return "fss-gemm", FSSParams(region=tuple(region), n=keep_count(rh * rw, sparsity), pe_rows=pr,
                                     pe_cols=opts["pe_cols"], max_rows=rows, max_cols=cols, weight_fmt=_W,
                                     act_fmt=_V, out_fmt=_O)
    banks, pes = opts["banks"], opts["pes"]
    if lay.kind == "lstm":
        I, H = lay.attrs["input_size"], lay.attrs["hidden"]
        unit = int(np.lcm(banks, pes // 4))
        Hp, Ip = -(-H // unit) * unit, -(-I // banks) * banks
        p0 = LSTMParams(input_size=Ip, hidden=Hp, banks=banks, k=1, pes=pes)
        return "bbs-lstm", LSTMParams(input_size=Ip, hidden=Hp, banks=banks, k=keep_count(p0.bank_size, sparsity),
                                      pes=pes, weight_fmt=_W, vec_fmt=_V, gate_fmt=Q(6, 10), cell_fmt=Q(6, 10))
    out_f, in_f = lay.w.shape
    rows, cols = -(-out_f // pes) * pes, -(-in_f // banks) * banks
    return "bbs-spmxv", BBSParams(rows=rows, cols=cols, banks=banks, k=keep_count(cols // banks, sparsity), pes=pes,
                                  weight_fmt=_W, vec_fmt=_V, out_fmt=_O)


class _Estimate(dict):
    """LUT4, DSP and lanes at once; BRAM and BRAM_weights (an elaboration) on first use."""

    def __init__(self, engine: str, params, **kw):
        super().__init__(**kw)
        self.engine, self.params = engine, params

    def __missing__(self, key):
        if key not in ("BRAM", "BRAM_weights"):
            raise KeyError(key)
        self["BRAM"], self["BRAM_weights"] = bram_split(self.engine, self.params)
        return self[key]


def _estimate(models: dict, engine: str, params) -> dict:
    m = models[engine]
    x = lanes(engine, params)
    return _Estimate(engine, params, LUT4=int(round(m["lut"](x) + m["lut_board_overhead"])),
                     DSP=int(round(m["dsp"](x))), lanes=x)


# -- the plan --------------------------------------------------------------------------------------

def _opts_text(o: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in o.items())


def plan_board(net, target: str, sparsity: float, board: str, region=(2, 8), roots=None) -> dict:
    """The board plan of a network before it is pruned: the configuration level, per engine layer its
    options, parameters, resource estimate and placement (on chip or reloaded per layer), and the
    totals against the part. UsageError (one line: layer, resource, need vs have) when a layer cannot
    fit even at the smallest configuration with its weights reloaded."""
    part = part_resources(board)
    models = fit_models(board, roots)
    lut_cap = int(part["LUT4"] * LUT_FILL)
    dsp_cap = min(part["DSP"], part["DSP_routed"] or part["DSP"])  # routability: see routed_dsp_max
    caps = {"DSP": f" (the most a recorded bitstream has routed on {part['part']}: {part['DSP_routed_from']};"
                   f" the part has {part['DSP']})" if dsp_cap < part["DSP"] else "",
            "LUT4": f" ({int(LUT_FILL * 100)}% of {part['LUT4']})", "BRAM": ""}
    layers = net.engine_layers
    levels = FSS_LEVELS if target == "fss" else BBS_LEVELS
    def at(level):
        rows = []
        for i, lay in enumerate(layers):
            opts = layer_options(lay, target, level)
            engine, p = layer_params(lay, target, sparsity, opts, region)
            rows.append({"index": i, "name": lay.name, "engine": engine, "options": opts, "params": p,
                         "estimate": _estimate(models, engine, p)})
        return rows

    # the smallest configuration: each layer alone, its weights reloaded, must fit the part
    for r in at(levels[0]):
        e = r["estimate"]
        where = f"layer {r['index']} ({r['name']!r}, {r['engine']}) cannot fit {part['board']}"
        for res, need, have in (("DSP", e["DSP"], dsp_cap), ("LUT4", e["LUT4"], lut_cap),
                                ("BRAM", e["BRAM"], part["BRAM"])):
            if need > have:
                raise UsageError(f"{where} even at the smallest configuration ({_opts_text(r['options'])}): {res} "
                                 f"needs {need}, the plan allows {have}{caps[res]}")
        if e["BRAM"] + e["BRAM_weights"] > part["BRAM"]:
            raise UsageError(f"{where} even with its weights reloaded per layer: BRAM needs {e['BRAM_weights']} "
                             f"for its weight store beside {e['BRAM']} for its buffers, the part has {part['BRAM']}")
    chosen = None
    for level in reversed(levels):
        rows = at(level)
        dsp = sum(r["estimate"]["DSP"] for r in rows)
        lut = sum(r["estimate"]["LUT4"] for r in rows)
        if dsp > dsp_cap or lut > lut_cap:   # before any elaboration (the BRAM estimate)
            continue
        other = sum(r["estimate"]["BRAM"] for r in rows)
        left = part["BRAM"] - other
        if left < 0:
            continue
        resident = [r for r in rows if r["estimate"]["BRAM_weights"]]
        reloaded: list = []
        while resident and (sum(r["estimate"]["BRAM_weights"] for r in resident)
                            + max((r["estimate"]["BRAM_weights"] for r in reloaded), default=0)) > left:
            big = max(resident, key=lambda r: r["estimate"]["BRAM_weights"])
            resident.remove(big)
            reloaded.append(big)
        buf = max((r["estimate"]["BRAM_weights"] for r in reloaded), default=0)
        if sum(r["estimate"]["BRAM_weights"] for r in resident) + buf > left:
            continue
        chosen = (level, rows, {id(r) for r in reloaded}, dsp, lut, other, buf)
        break
    if chosen is None:  # every layer fits alone (checked above) but not all side by side
        rows = at(levels[0])
        tot = {k: sum(r["estimate"][k] for r in rows) for k in ("DSP", "LUT4", "BRAM")}
        res, need, have = next((k, tot[k], v) for k, v in (("DSP", dsp_cap), ("LUT4", lut_cap),
                                                           ("BRAM", part["BRAM"])) if tot[k] > v)
        big = max(rows, key=lambda r: r["estimate"][res])
        raise UsageError(f"the {len(rows)} engine layers cannot fit {part['board']} side by side even at the "
                         f"smallest configuration: {res} needs {need}, the plan allows {have}{caps[res]} (largest: "
                         f"layer {big['index']} {big['name']!r}, {big['estimate'][res]})")
    level, rows, reloaded, dsp, lut, other, buf = chosen
    out = []
    for r in rows:
        e = r["estimate"]
        placed = "reloaded per layer" if id(r) in reloaded else "on-chip"
        out.append({"index": r["index"], "name": r["name"], "engine": r["engine"], "options": r["options"],
                    "lanes": e["lanes"], "estimate": {"LUT4": e["LUT4"], "DSP": e["DSP"],
                                                      "BRAM_buffers": e["BRAM"], "BRAM_weights": e["BRAM_weights"]},
                    "weights": placed})
    bram = other + buf + sum(e["estimate"]["BRAM_weights"] for e in out if e["weights"] == "on-chip")
    return {"board": part["board"], "part": part["part"], "level": list(level),
            "level_names": ["pe_rows", "pe_cols"] if target == "fss" else ["banks", "pes"],
            "available": {k: part[k] for k in ("LUT4", "DSP", "BRAM")}, "lut_fill_limit": LUT_FILL,
            "dsp_limit": dsp_cap, "dsp_limit_from": part["DSP_routed_from"],
            "resources_from": part["source"],
            "estimate_total": {"LUT4": lut, "DSP": dsp, "BRAM": bram, "BRAM_reload_buffer": buf},
            "layers": out,
            "models": {k: {"design": v["design"], "lut4": v["lut"].to_dict(), "dsp": v["dsp"].to_dict(),
                           "lut4_board_overhead": v["lut_board_overhead"], "overhead_from": v["overhead_from"]}
                       for k, v in models.items()},
            "notes": ["every engine layer has its own board top (UART bridge, engine, memories) side by side on the "
                      "part; LUT4 and DSP: linear fits on measured nextpnr points (models.*; their error is on their "
                      "own points only), BRAM: each elaborated memory mapped by Yosys's ECP5 costs",
                      "reloaded per layer: the layer's weights cross the loader (one 32-bit word per cycle) into one "
                      "shared buffer before it runs; those cycles are in cycles_expected_on_board",
                      "the level is the largest configuration whose summed estimate fits; each layer clamps it to "
                      "its shape"]}


def load_words(st) -> int:
    """32-bit words a layer's weight load puts through the loader (the board sessions' own packing)."""
    from hwcosim.cosim.flow.board import beats_to_words

    p = st.params
    if st.engine == "bbs-spmxv":
        from hwcosim.hdl.bbs.board import beat_bits
        from hwcosim.models.bbs.spmxv import pack_weight_beats

        return len(beats_to_words(pack_weight_beats(p, st.values, st.indices), beat_bits(p)["w"]))
    if st.engine == "bbs-lstm":
        from hwcosim.models.bbs.lstm import pack_bias_beats
        from hwcosim.models.bbs.spmxv import pack_weight_beats

        bbs = p.bbs
        w = st.lstm_w
        return (len(beats_to_words(pack_weight_beats(bbs, w.values, w.indices), bbs.pes * bbs.banks * bbs.lane_width))
                + len(beats_to_words(pack_bias_beats(p, w.bias), p.pes * p.gate_fmt.width)))
    from hwcosim.cosim.designs.fss.gemm import pack_axi_weight_words

    return len(pack_axi_weight_words(p, st.values, st.indices))


def board_report(m, plan: dict) -> dict:
    """The plan completed with the compiled layers: each layer's load words, reload cycles (reloaded
    layers: one cycle per word) and expected cycles on the board; the per-layer report rows gain
    ``weights``, ``reload_cycles`` and ``cycles_expected_on_board``."""
    rep = m._report
    total = 0
    for d, st, pl in zip(rep["layers"], m.stages, plan["layers"]):
        words = load_words(st)
        reload = words if pl["weights"] != "on-chip" else 0
        pl.update(load_words=words, reload_cycles=reload, cycles_expected=d["cycles_expected"],
                  cycles_expected_on_board=d["cycles_expected"] + reload)
        d.update(weights=pl["weights"], board_options=pl["options"], reload_cycles=reload,
                 cycles_expected_on_board=d["cycles_expected"] + reload)
        total += d["cycles_expected"] + reload
    plan["cycles_expected_on_board"] = total
    rep["board"] = plan
    return plan


# -- build ----------------------------------------------------------------------------------------

def combined_config(stages):
    """The combined board top of a compiled model's engine layers ``stages``
    (:class:`hwcosim.hdl.compiled.board.CompiledTopParams`: one engine per distinct configuration, in the
    order of their first layer) and each layer's engine slot."""
    from hwcosim.hdl.compiled.board import MAX_ENGINES, CompiledTopParams

    engines, slots, seen = [], [], {}
    for st in stages:
        key = (st.engine, json.dumps(st.params.to_dict(), sort_keys=True))
        if key not in seen:
            seen[key] = len(engines)
            engines.append((st.engine, st.params))
        slots.append(seen[key])
    if len(engines) > MAX_ENGINES:
        raise UsageError(f"the model has {len(engines)} distinct engine configurations, one board top holds at most "
                         f"{MAX_ENGINES}; build one top per configuration (build_compiled(..., combined=False))")
    return CompiledTopParams(tuple(engines)), slots


class _CombinedDesign:
    """The combined board top as the build flow sees a design (``name``, ``top``, ``build``, ``board_tops``)."""

    name = "compiled-board"
    top = "compiled_host"
    board_tops = (("uart", "hwcosim.hdl.compiled.board:board_top", "hwcosim.cosim.compile_board"),)
    on_board_in = None

    def build(self, params):
        """The core out of context: the bridge, the decode and the engines, the UART at 115200 baud from
        100 MHz (the divisor is a counter's limit; it changes little)."""
        from hwcosim.hdl.compiled.board import CompiledHost
        from hwcosim.models.hostlink import divisor_for

        return CompiledHost(params, divisor_for(100e6, 115200))


#: the combined board top of a compiled model, as the build flow takes a design
COMBINED = _CombinedDesign()


def _combined_stem(cfg) -> str:
    import hashlib

    return f"compiled-{len(cfg.engines)}engines-{hashlib.sha256(cfg.key().encode()).hexdigest()[:10]}"


def build_plan(stages, stem, board: str = "ulx3s-85f", ooc: bool = True, out=None, combined: bool = True) -> list[dict]:
    """What :func:`build_compiled` runs for the engine layers ``stages``. ``combined`` (the default): ONE
    plan, the combined board top (:mod:`hwcosim.hdl.compiled.board`: every distinct engine configuration
    behind one UART bridge; ``slots``: each layer's engine), in ``build/pnr/compiled-...`` (OOC) or
    ``build/board/compiled-...``. ``combined=False``: per distinct configuration, the engine (OOC, where
    ``hwcosim run`` looks for the measured Fmax: ``build/pnr/<stem(engine, params)>``) or its own board top."""
    from hwcosim.cosim.flow.build import get_board

    b = get_board(board)
    if not ooc and not b.platform:
        raise UsageError(f"{b.name} is a bare part: a bitstream needs a board (ulx3s-85f), or use --ooc")
    root = Path(out) if out is not None else (PNR_ROOT if ooc else Path("build") / "board")
    if combined:
        cfg, slots = combined_config(stages)
        return [{"layers": [s.index for s in stages], "design": COMBINED.name,
                 "engine": "+".join(e for e, _ in cfg.engines), "params": cfg, "slots": slots, "board": b.name,
                 "mode": "out-of-context" if ooc else "board", "out": str(root / _combined_stem(cfg))}]
    plans, seen = [], set()
    for st in stages:
        name = stem(st.engine, st.params)
        if name in seen:
            continue
        seen.add(name)
        plans.append({"layers": [s.index for s in stages if stem(s.engine, s.params) == name],
                      "design": st.engine if ooc else BOARD_TOPS[st.engine][0], "engine": st.engine,
                      "params": st.params, "board": b.name, "mode": "out-of-context" if ooc else "board",
                      "out": str(root / name)})
    return plans


def build_compiled(stages, stem, board: str = "ulx3s-85f", ooc: bool = True, out=None, *, clock: float = 100.0,
                   seed: int = 1, max_minutes: float = 30.0, dry_run: bool = False,
                   combined: bool = True) -> list[dict]:
    """Build a compiled model's ``stages``: by default its ONE combined board top (every distinct engine
    configuration behind one UART bridge), out of context (nextpnr Fmax and area of the whole top) or,
    ``ooc=False``, into a bitstream for ``board``. ``combined=False``: every engine configuration on its
    own (OOC: exactly that engine, ``build.json`` where ``hwcosim run`` reads it; else its own board
    top). ``dry_run``: only the plan."""
    from hwcosim.cosim.flow.build import get_board
    from hwcosim.cosim.flow.builds import build_board_tops, build_ooc_designs
    from hwcosim.cosim.registry import get_design

    plans = build_plan(stages, stem, board, ooc, out, combined)
    if dry_run:
        return plans
    b = get_board(board)
    for pl in plans:
        d = COMBINED if pl["design"] == COMBINED.name else get_design(pl["design"])
        if ooc:
            build_ooc_designs([(d, pl["params"])], b, clock, [seed], Path(pl["out"]), max_minutes=max_minutes,
                              timing_allow_fail=True)
        else:
            build_board_tops([(d, pl["params"])], b, Path(pl["out"]), seed=seed, max_minutes=max_minutes,
                             timing_allow_fail=True)
    return plans


# -- the board run ---------------------------------------------------------------------------------

def _session_args(st, xin) -> tuple:
    if st.engine == "bbs-lstm":
        return (st.params, st.lstm_w, xin)
    if st.engine == "fss-gemm":
        return (st.params, st.values, st.indices, xin[None])
    return (st.params, st.values, st.indices, xin)


def board_session(st, xin, port: str | None, *, baud: int = 115200, run_dir=None, sim: str | None = None):
    """One engine layer's board session: load its weights over the UART bridge protocol and run the words
    ``xin`` (the engine's input words as :meth:`CompiledModel.predict` feeds them), on a board at ``port``
    or, without one, against the layer's board top RTL through a UART model (run folder ``run_dir``).
    Returns (output words or None, run cycles, a failure text or None)."""
    import importlib

    host = importlib.import_module(BOARD_TOPS[st.engine][2])
    args = _session_args(st, xin)
    if port:
        from hwcosim.cosim.flow.board import HostLink, SerialTransport, run_sync

        transport = SerialTransport(port, baud)
        try:
            res = run_sync(host.session(HostLink(transport), *args))
        finally:
            transport.close()
        return (res["h"] if st.engine == "bbs-lstm" else res["y"]), res.get("run_cycles"), None
    res = host.run_board_sim(*args, test_dir=run_dir, sim=sim, raise_on_fail=False)
    f = Path(run_dir) / "outputs.npz"
    failure = None if res.passed else f"the board session failed (log {res.log})"
    if not f.exists():
        return None, None, failure or f"see {run_dir}"
    with np.load(f) as z:
        got = z["rtl"]
    return got, res.metrics.get("run_cycles"), failure


#: UART divisor and bridge watchdog of the simulated combined top (the engines' board sessions' own)
SIM_DIVISOR, SIM_TIMEOUT = 8, 2000


def _layer_arrays(st, xin) -> dict:
    """A layer's board-session arrays, named as its own board top's testbench names them."""
    if st.engine == "bbs-lstm":
        w = st.lstm_w
        return {"values": w.values, "indices": w.indices, "bias": w.bias, "w_float": w.w_float, "b_float": w.b_float,
                "xs": np.asarray(xin, dtype=np.int64)}
    xs = np.asarray(xin, dtype=np.int64)
    return {"values": np.asarray(st.values, dtype=np.int64), "indices": np.asarray(st.indices, dtype=np.int64),
            "xs": xs[None] if st.engine == "fss-gemm" else np.atleast_2d(xs)}


def layer_args(engine: str, params, arrays: dict) -> tuple:
    """The positional arguments of ``engine``'s board session (and its ``compare``) from :func:`_layer_arrays`."""
    if engine == "bbs-lstm":
        from hwcosim.models.bbs.lstm import LSTMWeights

        a = arrays
        return (params, LSTMWeights(a["values"], a["indices"], a["bias"], a["w_float"], a["b_float"]), a["xs"])
    return (params, arrays["values"], arrays["indices"], arrays["xs"])


def run_combined_sim(stages, xins, test_dir, *, sim: str | None = None):
    """Every layer's board session, in turn, against the RTL of the model's ONE combined board top
    (:class:`hwcosim.hdl.compiled.board.CompiledHost`; cocotb, a bit-level UART model on its pins, one
    simulation). The run folder ``test_dir`` holds the simulation; ``NN-LAYER/`` beside its files, each
    layer's inputs, parameters and words as its own board top's run would (sealed, so ``hwcosim check``
    re-verifies each). Returns the runner's result."""
    from hwcosim.cosim.flow import runner
    from hwcosim.cosim.flow.runs import seal_outputs
    from hwcosim.hdl.compiled.board import CompiledHost

    cfg, slots = combined_config(stages)
    arrays = {f"l{i}_{k}": v for i, (st, x) in enumerate(zip(stages, xins)) for k, v in _layer_arrays(st, x).items()}
    res = runner.run(
        CompiledHost(cfg, SIM_DIVISOR, timeout=SIM_TIMEOUT), "compiled_host", "hwcosim.cosim.tb.compiled_board",
        testcase="compiled_board_sessions_match_golden",
        inputs={"top": cfg.to_dict(), "slots": slots, "engines": [st.engine for st in stages],
                "layer_params": [st.params.to_dict() for st in stages], "divisor": SIM_DIVISOR,
                "timeout": SIM_TIMEOUT},
        arrays=arrays, test_dir=test_dir, sim=sim, raise_on_fail=False)
    out = Path(res.test_dir)
    f = out / "outputs.npz"
    if f.exists():
        with np.load(f) as z:
            words = {k: z[k] for k in z.files}
        metrics = res.metrics.get("layers", [])
        for i, (st, x) in enumerate(zip(stages, xins)):
            if f"rtl_{i}" not in words:
                continue
            d = out / f"{st.index:02d}-{_safe_name(st.layer.name)}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "inputs.json").write_text(json.dumps({"params": st.params.to_dict(), "divisor": SIM_DIVISOR,
                                                       "timeout": SIM_TIMEOUT, "rate_error": 0.0,
                                                       "combined_top_slot": slots[i]}, indent=1))
            np.savez(d / "arrays.npz", **_layer_arrays(st, x))
            np.savez(d / "outputs.npz", rtl=words[f"rtl_{i}"], golden=words[f"golden_{i}"])
            (d / "metrics.json").write_text(json.dumps(metrics[i] if i < len(metrics) else {}, indent=1))
            seal_outputs(d, BOARD_TOPS[st.engine][0])
    return res


def _safe_name(name: str) -> str:
    """A layer's run folder name part (as ``CompiledModel.simulate`` names its folders)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or "layer"


def board_sessions(stages, xins, port: str | None, *, baud: int = 115200, out=None, sim: str | None = None) -> list:
    """Every engine layer of ``stages`` on the model's ONE combined board top, in one session: each layer's
    weights loaded over the UART bridge into its engine (layers of one configuration share it, reloaded
    per layer), then its input words ``xins[i]`` run; on a board at ``port`` (one serial link for all
    layers) or, without one, against the combined top's RTL (:func:`run_combined_sim`, run folder ``out``).
    Returns per layer (output words or None, run cycles, a failure text or None, its run folder or None)."""
    import importlib

    cfg, slots = combined_config(stages)
    if port:
        from hwcosim.cosim.flow.board import EngineLink, HostLink, SerialTransport, run_sync

        async def all_layers(link):
            got = []
            for st, x, e in zip(stages, xins, slots):
                host = importlib.import_module(BOARD_TOPS[st.engine][2])
                res = await host.session(EngineLink(link, e), *_session_args(st, x))
                got.append(((res["h"] if st.engine == "bbs-lstm" else res["y"]), res.get("run_cycles"), None, None))
            return got

        transport = SerialTransport(port, baud)
        try:
            return run_sync(all_layers(HostLink(transport)))
        finally:
            transport.close()
    res = run_combined_sim(stages, xins, out, sim=sim)
    failure = None if res.passed else f"the board session failed (log {res.log})"
    f = Path(res.test_dir) / "outputs.npz"
    words = {}
    if f.exists():
        with np.load(f) as z:
            words = {k: z[k] for k in z.files}
    layers = res.metrics.get("layers", [])
    outs = []
    for i, st in enumerate(stages):
        got = words.get(f"rtl_{i}")
        cycles = layers[i].get("run_cycles") if i < len(layers) else None
        outs.append((got, cycles, failure if got is not None else (failure or f"see {res.test_dir}"),
                     str(Path(res.test_dir) / f"{st.index:02d}-{_safe_name(st.layer.name)}")))
    return outs


def is_compiled_folder(path) -> bool:
    """True when ``path`` is a folder with a compiled model's ``manifest.json``."""
    return bool(path) and os.path.isdir(path) and os.path.isfile(os.path.join(path, "manifest.json"))
