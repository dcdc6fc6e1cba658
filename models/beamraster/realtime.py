"""BeamRaster precoder: is it real time? Requirement, measured throughput and what a part needs.

Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed Precoders",
IEEE TMC 18(5), 2019: the abstract states that the precoding of a 64-antenna MU-MIMO system runs in
real time on one Altera Stratix V FPGA. The paper's cell numerology and user count are not
confirmed in SPECS.md; :data:`LTE20` is the LTE 20 MHz carrier (3GPP TS 36.211: 100 resource blocks
of 12 subcarriers = 1,200 used subcarriers, 15 kHz spacing, 14 OFDM symbols per ms with the normal
cyclic prefix) with the project's default ``K = 8`` users, and every figure that depends on ``K``
is also given over ``K`` = 4..16.

Steps (every number derived, nothing typed from a result):

1. :func:`requirement`: subcarrier-symbols per second ``S = subcarriers x symbols/s``; complex MACs
   per subcarrier-symbol ``K M + K^2`` (beam synthesis, pre-distortion: the golden model
   :func:`hwcosim.models.beamraster.datapath.precode_fixed`); complex MACs/s, 18x18 products/s (4 per
   complex MAC), input and output complex samples/s.
2. :func:`achieved`: for a built :class:`~hwcosim.models.beamraster.datapath.PrecoderParams` at its
   measured Fmax: cycles per subcarrier-symbol from the RTL's structure
   (:class:`~hwcosim.models.beamraster.datapath.CycleModel`: ``K M / L``), complex MACs per lane per
   cycle derived from it (``K M / (L x cycles)``), throughput ``L x Fmax x MACs/lane/cycle`` and the
   fraction of real time.
3. :func:`needs`: the lanes, multipliers (``4 (K + L)`` MULT18X18D) and clock a part needs for real
   time with this datapath, and the ideal multiplier count at a given clock.
4. :func:`stratix_v`: the same for a Stratix V (two 18x18 multipliers per variable-precision DSP
   block, Intel Stratix V Device Overview 683258, section 1.11, Table 11; an 18x18 complex multiply
   is two blocks, Table 12).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from hwcosim.models.beamraster.datapath import CycleModel, PrecoderParams
from hwcosim.models.errors import UsageError

__all__ = ["Cell", "LTE20", "requirement", "achieved", "needs", "stratix_v", "part_bound", "load_builds",
           "load_attempts", "realtime_report", "realtime_rows", "REALTIME_COLUMNS", "write_realtime", "STRATIX_V",
           "ECP5_85F_MULTS", "DESIGN"]

DESIGN = "beamraster-precoder"
#: MULT18X18D of the LFE5U-85F (the part's utilisation report, e.g. docs/boards/results.json).
ECP5_85F_MULTS = 156


@dataclass(frozen=True)
class Cell:
    """What real time means: ``antennas`` (M), ``users`` (K), used ``subcarriers`` per OFDM symbol
    and OFDM ``symbols_per_s``."""

    antennas: int
    users: int
    subcarriers: int
    symbols_per_s: float
    source: str = ""

    def __post_init__(self):
        for n in ("antennas", "users", "subcarriers"):
            if not isinstance(getattr(self, n), int) or getattr(self, n) < 1:
                raise UsageError(f"cell {n} must be a positive integer, not {getattr(self, n)!r}")
        if not self.symbols_per_s > 0:
            raise UsageError(f"cell symbols_per_s must be > 0, not {self.symbols_per_s!r}")


#: 64 antennas (paper, abstract), 8 users (ours: the project default; the paper's count is not
#: confirmed), LTE 20 MHz: 1,200 subcarriers x 14 symbols per ms (3GPP TS 36.211).
LTE20 = Cell(antennas=64, users=8, subcarriers=1200, symbols_per_s=14_000.0,
             source="M = 64 (Meng et al., TMC 2019, abstract); K = 8 (ours); LTE 20 MHz numerology "
                    "(3GPP TS 36.211: 1,200 subcarriers, 14 symbols/ms)")

#: Stratix V: two 18x18 per variable-precision DSP block (683258 section 1.11, Table 11). The
#: smallest and largest DSP-block counts of the family (683258, device feature tables: 5SGXA3..A7
#: 256 blocks, 5SGSD8 1,963); the paper does not name its device.
STRATIX_V = {"mults_per_dsp_block": 2, "dsp_blocks_min": 256, "dsp_blocks_max": 1963,
             "source": "Intel Stratix V Device Overview (683258): section 1.11 Tables 11-12 (two 18x18 per "
                       "block); per-device block counts from its family tables, not in the search index: confirm",
             "clock_band_mhz": (150.0, 300.0)}


def requirement(cell: Cell = LTE20) -> dict:
    """Throughput the precoder needs for ``cell`` in real time."""
    S = cell.subcarriers * cell.symbols_per_s
    K, M = cell.users, cell.antennas
    cmac = K * M + K * K
    return {"cell": asdict(cell), "subcarrier_symbols_per_s": S, "cmac_per_subcarrier_symbol": cmac,
            "cmac_beam_per_subcarrier_symbol": K * M, "cmac_predistortion_per_subcarrier_symbol": K * K,
            "cmac_per_s": S * cmac, "real_mults_per_s": 4 * S * cmac,
            "input_samples_per_s": S * K, "output_samples_per_s": S * M}


def achieved(p: PrecoderParams, fmax_mhz: float, cell: Cell = LTE20) -> dict:
    """Throughput of ``Precoder(p)`` at ``fmax_mhz`` and its fraction of ``cell``'s real time."""
    if not fmax_mhz > 0:
        raise UsageError(f"Fmax must be > 0 MHz, not {fmax_mhz!r}")
    cm = CycleModel(p)
    cyc = cm.cycles_per_symbol
    mac_lane_cycle = p.K * p.M / (p.lanes * cyc)     # beam stage: complex MACs per lane per cycle
    f = fmax_mhz * 1e6
    sym_s = f / cyc
    req = requirement(cell)
    return {"M": p.M, "K": p.K, "lanes": p.lanes, "fmax_mhz": fmax_mhz, "cycles_per_subcarrier_symbol": cyc,
            "cmac_per_lane_per_cycle": mac_lane_cycle, "real_multipliers": p.real_multipliers,
            "beam_cmac_per_s": p.lanes * f * mac_lane_cycle,
            "cmac_per_s": sym_s * (p.K * p.M + p.K * p.K), "subcarrier_symbols_per_s": sym_s,
            "realtime_fraction": sym_s / req["subcarrier_symbols_per_s"]}


def _pow2_at_least(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, x))))


def needs(cell: Cell = LTE20, clock_mhz: float | None = None) -> dict:
    """What real time needs with this datapath (``L`` lanes a power of two dividing ``M``).

    - ``clock_at_lanes``: lanes -> the clock (MHz) that sustains the cell, and ``4 (K + L)`` multipliers;
    - at ``clock_mhz``: the lanes (``L = S K M / f``, rounded up to a power of two; copies of the
      full ``L = M`` datapath when that exceeds ``M``), their multipliers, and the ideal count
      ``4 x cmac/s / f`` of a datapath that keeps every multiplier busy.
    """
    req = requirement(cell)
    S, K, M = req["subcarrier_symbols_per_s"], cell.users, cell.antennas
    rows = []
    L = 1
    while L <= M:
        rows.append({"lanes": L, "clock_mhz": S * K * M / L / 1e6, "real_multipliers": 4 * (K + L)})
        L *= 2
    out = {"clock_at_lanes": rows}
    if clock_mhz is not None:
        f = clock_mhz * 1e6
        lanes = S * K * M / f
        L = _pow2_at_least(lanes)
        copies = max(1, math.ceil(L / M))
        Lc = min(L, M)
        out.update({"clock_mhz": clock_mhz, "lanes_exact": lanes, "lanes": Lc, "copies": copies,
                    "real_multipliers": copies * 4 * (K + Lc),
                    "ideal_real_multipliers": math.ceil(4 * req["cmac_per_s"] / f)})
    return out


def part_bound(cell: Cell, mults: int, clock_mhz: float) -> dict:
    """Upper bound of a part with ``mults`` 18x18 multipliers at ``clock_mhz``, every multiplier busy
    every cycle (any datapath): the fraction of real time, and the clock real time would need."""
    req = requirement(cell)
    return {"mults": mults, "clock_mhz": clock_mhz,
            "realtime_fraction_max": mults * clock_mhz * 1e6 / req["real_mults_per_s"],
            "clock_needed_mhz": req["real_mults_per_s"] / mults / 1e6}


def stratix_v(cell: Cell = LTE20) -> dict:
    """How a Stratix V meets ``cell``: the full ``L = M`` datapath's clock and DSP blocks vs the family."""
    full = needs(cell)["clock_at_lanes"][-1]
    blocks = math.ceil(full["real_multipliers"] / STRATIX_V["mults_per_dsp_block"])
    lo, hi = STRATIX_V["clock_band_mhz"]
    at = []
    for c in (lo, hi):
        n = {k: v for k, v in needs(cell, c).items() if k != "clock_at_lanes"}
        at.append(dict(n, dsp_blocks=math.ceil(n["real_multipliers"] / STRATIX_V["mults_per_dsp_block"])))
    return {"lanes": full["lanes"], "clock_mhz": full["clock_mhz"], "real_multipliers": full["real_multipliers"],
            "dsp_blocks": blocks, "fraction_of_smallest": blocks / STRATIX_V["dsp_blocks_min"],
            "fraction_of_largest": blocks / STRATIX_V["dsp_blocks_max"], "at_clock_band": at, **STRATIX_V}


def load_builds(paths) -> list[dict]:
    """Build results of :data:`DESIGN` from ``hwcosim build`` JSON files (a summary with ``results``,
    e.g. docs/boards/results.json, or one design's ``build.json``); failures are kept with their error."""
    out = []
    for path in paths:
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot read build JSON {path}: {e}; pass a build.json written by hwcosim build") from e
        items = d.get("results", [d]) if isinstance(d, dict) else []
        for r in items:
            if r.get("design") == DESIGN and r.get("worst_fmax_mhz"):
                out.append({"source": str(path), "params": r["params"], "fmax_mhz": r["worst_fmax_mhz"],
                            "fmax_per_seed": r["fmax_mhz"]["clk"]["per_seed"] if "clk" in r["fmax_mhz"] else [],
                            "part": r.get("part"), "speed": r.get("speed"), "area": r.get("area", {}),
                            "timing_met": r.get("timing_met"), "router": r.get("router", "router1"),
                            "built": True})
        for f in d.get("failures", []) if isinstance(d, dict) else []:
            if f.get("design") == DESIGN:
                out.append({"source": str(path), "params": f.get("params", {}), "error": f.get("error", ""),
                            "built": False})
    return out


def load_attempts(dirs) -> list[dict]:
    """Outcomes of ``hwcosim build ... --json > stdout.json 2> stderr.txt`` runs, one folder each:
    the ``--param`` values of the command, its exit status and its ``FAILED:`` line if any (a
    configuration that does not fit writes no build.json)."""
    out = []
    for d in dirs:
        d = Path(d)
        try:
            run = json.loads((d / "stdout.json").read_text())
        except (OSError, ValueError):
            continue
        cmd = run.get("command", [])
        params = dict(a.split("=", 1) for a, b in zip(cmd[1:], cmd[:-1], strict=True) if b == "--param")
        err = ""
        if (d / "stderr.txt").exists():
            err = next((ln.strip() for ln in (d / "stderr.txt").read_text().splitlines() if "FAILED" in ln), "")
        out.append({"folder": str(d), "params": params, "exit": run.get("exit"), "error": err,
                    "build_json": str(d / "build.json") if (d / "build.json").exists() else None})
    return out


def _params(d: dict) -> PrecoderParams:
    return PrecoderParams.from_dict(d) if "sym_fmt" in d else PrecoderParams(
        **{k: int(d[k]) for k in ("M", "K", "lanes", "groups", "sc_per_group", "symbols_per_frame") if k in d})


def realtime_report(build_paths, cell: Cell = LTE20, attempts: list[dict] | None = None) -> dict:
    """Requirement, every built configuration's throughput at its measured Fmax, what real time needs
    (at the best measured Fmax) and the Stratix V comparison, with the band over ``K`` = 4..16."""
    builds = load_builds(build_paths)
    rows = []
    for b in builds:
        if not b["built"]:
            continue
        p = _params(b["params"])
        c = Cell(antennas=p.M, users=p.K, subcarriers=cell.subcarriers, symbols_per_s=cell.symbols_per_s)
        r = achieved(p, b["fmax_mhz"], c)
        seeds = b["fmax_per_seed"] or [b["fmax_mhz"]]
        r.update({"source": b["source"], "part": b["part"], "speed": b["speed"], "area": b["area"],
                  "fmax_per_seed_mhz": seeds, "timing_met": b["timing_met"], "router": b["router"],
                  "realtime_fraction_band": [achieved(p, min(seeds), c)["realtime_fraction"],
                                             achieved(p, max(seeds), c)["realtime_fraction"]],
                  "fits_dsp": p.real_multipliers <= ECP5_85F_MULTS})
        rows.append(r)
    rows.sort(key=lambda r: (r["K"], r["lanes"]))
    if not rows:
        raise UsageError("no built beamraster-precoder configuration in the build JSON(s); pass the JSON of an "
                         "hwcosim build beamraster-precoder --ooc run (or docs/boards/results.json)")
    main = [r for r in rows if r["K"] == cell.users and r["M"] == cell.antennas] or rows
    best = max(main, key=lambda r: r["realtime_fraction"])
    k_band = []
    for K in (4, 8, 16):
        c = Cell(cell.antennas, K, cell.subcarriers, cell.symbols_per_s)
        p = PrecoderParams(M=cell.antennas, K=K, lanes=best["lanes"])
        k_band.append({"K": K, "realtime_fraction": achieved(p, best["fmax_mhz"], c)["realtime_fraction"],
                       **{k: v for k, v in needs(c, best["fmax_mhz"]).items() if k != "clock_at_lanes"},
                       "full_lanes_clock_mhz": needs(c)["clock_at_lanes"][-1]["clock_mhz"]})
    return {"paper": {"claim": "64-antenna MU-MIMO precoding in real time on one Altera Stratix V FPGA",
                      "source": "Meng et al., IEEE TMC 18(5) 2019, abstract"},
            "cell": asdict(cell), "requirement": requirement(cell), "builds": rows,
            "attempts": attempts or [], "best": best,
            "needs_at_measured_fmax": needs(cell, best["fmax_mhz"]), "ecp5_mults": ECP5_85F_MULTS,
            "ecp5_bound": part_bound(cell, ECP5_85F_MULTS, best["fmax_mhz"]),
            "stratix_v": stratix_v(cell), "users_band": k_band,
            "sensitivity": "users K (the paper's is not confirmed): the fraction scales as 1/K"}


def realtime_rows(res: dict) -> list[list]:
    """Table rows: ours per built configuration beside the requirement."""
    S = res["requirement"]["subcarrier_symbols_per_s"]
    rows = []
    for r in res["builds"]:
        lo, hi = r["realtime_fraction_band"]
        rows.append([r["M"], r["K"], r["lanes"], r["real_multipliers"], f"{r['fmax_mhz']:.1f}",
                     r["cycles_per_subcarrier_symbol"], f"{r['subcarrier_symbols_per_s'] / 1e6:.2f}",
                     f"{S / 1e6:.1f}", f"{r['realtime_fraction']:.1%}", f"{lo:.1%}..{hi:.1%}", r["router"]])
    return rows


REALTIME_COLUMNS = ("M antennas", "K users", "lanes", "mults", "Fmax (MHz)", "cycles/symbol",
                    "ours (M symbols/s)", "needed (M symbols/s)", "real-time fraction (%)", "over seeds (%)",
                    "router")


def write_realtime(res: dict, out: Path) -> tuple[Path, Path]:
    """``beamraster_realtime_verdict.json`` + ``.png`` (fraction of real time per configuration, and the
    clock real time needs per lane count) into ``out``."""
    from hwcosim.models.atomic import save_png
    from hwcosim.models.benchio import pyplot, write_json

    out = Path(out)
    js = write_json(out / "beamraster_realtime_verdict.json", res)
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"K{r['K']} L{r['lanes']}" for r in res["builds"]]
    ax[0].bar(range(len(labels)), [100 * r["realtime_fraction"] for r in res["builds"]])
    ax[0].axhline(100, color="k", ls="--", lw=1, label="real time")
    ax[0].set_xticks(range(len(labels)), labels)
    ax[0].set_ylabel("fraction of real time (%) at measured Fmax")
    ax[0].set_title("BeamRaster precoder on the LFE5U-85F (nextpnr)")
    ax[0].legend()
    cl = res["needs_at_measured_fmax"]["clock_at_lanes"] if "clock_at_lanes" in res["needs_at_measured_fmax"] else []
    ax[1].plot([c["lanes"] for c in cl], [c["clock_mhz"] for c in cl], "o-", label="clock real time needs")
    ax[1].axhline(res["best"]["fmax_mhz"], color="tab:red", ls="--", lw=1, label="best measured Fmax (ECP5)")
    over = [c["lanes"] for c in cl if c["real_multipliers"] > res["ecp5_mults"]]
    if over:
        ax[1].axvspan(min(over) / 2 ** 0.5, max(over) * 2 ** 0.5, color="0.9",
                      label=f"more than the LFE5U-85F's {res['ecp5_mults']} multipliers")
    ax[1].set_xscale("log", base=2)
    ax[1].set_yscale("log")
    ax[1].set_xlabel("lanes L (4 (K + L) multipliers)")
    ax[1].set_ylabel("clock (MHz)")
    ax[1].set_title(f"M = {res['cell']['antennas']}, K = {res['cell']['users']}, LTE 20 MHz")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    png = save_png(fig, out / "beamraster_realtime_verdict.png", dpi=110)
    return js, png
