"""KV-Direct RTL pipeline: Mops and latency at its measured clock, beside the paper's 180 / 114 Mops.

KV-Direct: Li et al., SOSP 2017 (SPECS.md, KV-Direct "Results": YCSB, Zipf 0.99, 10 B KVs, one
NIC: GET 180 Mops, PUT 114 Mops, latency 4.3 / 5.4 us, clock 180 MHz).

For each mix (GET only, PUT only, 50 % GET / 50 % PUT; Zipf 0.99):

1. **Memory model** (:func:`hwcosim.models.kvdirect.perf.nic_throughput` with the clock set to the
   measured Fmax, accesses per op measured on the golden store with the paper's 5 B key + 5 B
   value): the load-dispatch fraction ``l``, the DRAM hit ratio ``h``, the memory-bandwidth cap
   (PCIe + NIC DRAM) and the 40 GbE cap. The mean memory round trip an op sees is
   ``p t_DRAM + (1 - p) t_PCIe`` with ``p = l h``.
2. **Pipeline** (:func:`hwcosim.models.kvdirect.cycles.simulate_cycles`, the cycle model the
   ``kvdirect-pipeline`` sweep sets against the RTL): the built configuration (entries,
   dependency slots, store size, from the build JSON) on a Zipf 0.99 stream of the mix, with the
   memory round trip above converted to cycles at the measured Fmax and the reads in flight capped
   by the PCIe tags (``links x min(tags, non-posted credits)``) and the entries. Its ops/cycle x
   Fmax is the pipeline's cap (also run at the paper's 180 MHz, where the same round trip is more
   cycles, to separate the clock from the rest); the steady-state bound
   :func:`hwcosim.models.kvdirect.rtl_model.predict_ops_per_cycle` is reported beside it.
3. **Mops** = min(pipeline, memory, network); the binding one is named. The band re-runs the
   pipeline with every access served by NIC DRAM and by PCIe (the two ends of the memory round trip).

The RTL keeps 8 B keys and 8 B values inline (one 64 B bucket line per op, as 10 B KVs do), and the
built store is a 128 KiB on-chip table (1,024 buckets), so the pipeline's stream draws its Zipf
keys from ``n_keys`` keys that fit it; the memory and network caps use the paper's 10 B KVs and key space.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from hwcosim.models.errors import UsageError
from hwcosim.models.kvdirect.perf import PAPER, HWParams, measure_store_accesses, nic_throughput
from hwcosim.models.kvdirect.workload import Workload, generate

__all__ = ["MIXES", "DESIGN", "load_fmax", "mops_at", "pipeline_ops_per_cycle", "mops_report", "mops_rows",
           "MOPS_COLUMNS", "write_mops", "PAPER_CLOCK_MHZ"]

DESIGN = "kvdirect-pipeline"
#: The paper's clock (SPECS.md, KV-Direct results: "Clock 180 MHz"; :class:`HWParams` default).
PAPER_CLOCK_MHZ = HWParams().clock_hz / 1e6
#: (label, GET fraction, the paper's Mops for it or None)
MIXES = (("GET", 1.0, PAPER["get_mops_1nic"]), ("PUT", 0.0, PAPER["put_mops_1nic"]),
         ("50/50 GET/PUT", 0.5, None))


def mops_at(ops_per_cycle: float, fmax_mhz: float) -> float:
    """Millions of operations per second: ops/cycle x Fmax (MHz)."""
    if not fmax_mhz > 0 or ops_per_cycle < 0:
        raise UsageError(f"need Fmax > 0 MHz and ops/cycle >= 0, not {fmax_mhz!r} and {ops_per_cycle!r}")
    return ops_per_cycle * fmax_mhz


def load_fmax(path, design: str = DESIGN) -> dict:
    """``design``'s measured Fmax (worst over seeds), seeds and parameters from an ``hwcosim build``
    JSON (a summary with ``results`` such as docs/boards/results.json, or one design's build.json)."""
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read build JSON {path}: {e}; pass docs/boards/results.json or a build.json "
                         "written by hwcosim build kvdirect-pipeline --ooc") from e
    items = d.get("results", [d]) if isinstance(d, dict) else []
    for r in items:
        if r.get("design") == design and r.get("worst_fmax_mhz"):
            per = r.get("fmax_mhz", {}).get("clk", {}).get("per_seed", [])
            return {"source": str(path), "fmax_mhz": float(r["worst_fmax_mhz"]), "fmax_per_seed_mhz": per,
                    "params": r["params"], "part": r.get("part"), "speed": r.get("speed")}
    raise UsageError(f"no {design} result with an Fmax in {path}; build it first "
                     f"(hwcosim build {design} --ooc) or pass docs/boards/results.json")


def pipeline_ops_per_cycle(params, get_ratio: float, latency_cycles: int, outstanding: int, n_ops: int,
                           n_keys: int, seed: int) -> dict:
    """Ops/cycle of the RTL pipeline's cycle model (and the steady-state bound) on a Zipf 0.99 stream."""
    from hwcosim.models.kvdirect.cycles import simulate_cycles
    from hwcosim.models.kvdirect.rtl_model import GET, PUT, make_stream, predict_ops_per_cycle

    mix = {k: v for k, v in ((GET, get_ratio), (PUT, 1.0 - get_ratio)) if v > 0}
    reqs = make_stream(n_ops, n_keys, "zipf", seed, mix=mix)
    cm = simulate_cycles(params, reqs, latency_cycles, outstanding, forward=True)
    an = predict_ops_per_cycle(params, reqs, latency_cycles, outstanding, True)
    return {"latency_cycles": latency_cycles, "outstanding": outstanding, "n_ops": n_ops, "n_keys": n_keys,
            "cycles": cm["cycles"], "ops_per_cycle": cm["ops_per_cycle"], "forwarded": cm["forwarded"],
            "stall_full_cycles": cm["stall_full"], "mem_reads": cm["mem_reads"], "mem_writes": cm["mem_writes"],
            "analytic_ops_per_cycle": an["ops_per_cycle"], "analytic_bound": an["bound"],
            "merge_fraction": an["merge_fraction"]}


def mops_report(build_json, *, pipeline_ops: int = 20000, stream_ops: int = 200000, store_ops: int = 4000,
                seed: int = 0, n_keys: int | None = None, hw: HWParams | None = None) -> dict:
    """Mops and latency of the built pipeline at its measured Fmax per mix (module doc).

    ``pipeline_ops``: operations through the cycle model per run (5 runs per mix); ``stream_ops``:
    the key stream of the memory model; ``store_ops``: operations counted on the golden store.
    """
    if min(pipeline_ops, stream_ops, store_ops) < 100:
        raise UsageError(f"need at least 100 operations per run, not {min(pipeline_ops, stream_ops, store_ops)}")
    from hwcosim.models.kvdirect.rtl_model import PIPE_CYCLES, PipelineParams

    b = load_fmax(build_json)
    fmax = b["fmax_mhz"]
    p = PipelineParams.from_dict(b["params"])
    hw = replace(hw or HWParams(), clock_hz=fmax * 1e6)
    n_ops, n_stream = pipeline_ops, stream_ops
    keys = n_keys or p.n_buckets          # half the inline capacity of the built store (2 KVs per bucket)
    acc = measure_store_accesses(10**9, (5, 5), seed, n_ops=store_ops)
    accesses = {"get": acc["get"], "put": acc["put"]}
    outstanding = min(p.entries, hw.pcie_links * min(hw.dma_tags, hw.np_credits))
    rows = []
    for label, g, paper in MIXES:
        w = Workload(get_ratio=g, theta=0.99, kv_sizes=((5, 5, 1.0),))
        nic = nic_throughput(w, hw, generate(w, n_stream, seed), accesses)
        p_dram = nic.l * nic.h
        t_mem = p_dram * hw.dram_latency_ns + (1 - p_dram) * hw.pcie_rtt_ns
        runs = {}
        for name, t in (("mean", t_mem), ("all_dram", hw.dram_latency_ns), ("all_pcie", hw.pcie_rtt_ns)):
            cyc = max(1, math.ceil(t * fmax / 1e3))
            runs[name] = pipeline_ops_per_cycle(p, g, cyc, outstanding, n_ops, keys, seed)
        # the same pipeline at the paper's 180 MHz: the memory round trip is more cycles there; and
        # with the paper's ~256 ops in flight (reads then capped by the PCIe tags)
        cyc180 = max(1, math.ceil(t_mem * PAPER_CLOCK_MHZ / 1e3))
        runs["paper_clock"] = pipeline_ops_per_cycle(p, g, cyc180, outstanding, n_ops, keys, seed)
        p256 = replace(p, entries=256)
        runs["paper_clock_256_entries"] = pipeline_ops_per_cycle(
            p256, g, cyc180, min(256, hw.pcie_links * min(hw.dma_tags, hw.np_credits)), n_ops, keys, seed)
        opc = runs["mean"]["ops_per_cycle"]
        caps = {"pipeline": mops_at(opc, fmax), "memory": nic.caps["memory"] / 1e6,
                "network": nic.caps["network"] / 1e6}
        bound = min(caps, key=caps.get)
        # what holds the pipeline below 1 op/cycle: the steady-state bound's name, with the cycle
        # model at the NIC DRAM's round trip beside it (what remains without the PCIe round trip)
        why = {"clock": "the clock (1 op/cycle)",
               "port": "the memory port (one read or write-back per cycle)",
               "memory": f"reads in flight ({p.entries} entries) over the {runs['mean']['latency_cycles']}-cycle "
                         "round trip",
               "chain": "same-bucket chains"}
        pipe_limit = (why["clock"] if opc >= 0.95 else
                      f"{why.get(runs['mean']['analytic_bound'], runs['mean']['analytic_bound'])}; "
                      f"{runs['all_dram']['ops_per_cycle']:.2f} ops/cycle at the NIC DRAM round trip")
        band = sorted(min(mops_at(runs[k]["ops_per_cycle"], fmax), caps["memory"], caps["network"])
                      for k in ("all_dram", "all_pcie"))
        rtl_ns = (PIPE_CYCLES + runs["mean"]["latency_cycles"]) / fmax * 1e3
        rows.append({"mix": label, "get_ratio": g, "paper_mops": paper, "mops": caps[bound], "bound": bound,
                     "caps_mops": caps, "mops_band_memory_latency": band, "ops_per_cycle": opc,
                     "analytic_ops_per_cycle": runs["mean"]["analytic_ops_per_cycle"],
                     "analytic_mops": min(mops_at(runs["mean"]["analytic_ops_per_cycle"], fmax),
                                          caps["memory"], caps["network"]),
                     "analytic_bound": runs["mean"]["analytic_bound"],
                     "pipeline_mops_at_paper_clock": mops_at(runs["paper_clock"]["ops_per_cycle"], PAPER_CLOCK_MHZ),
                     "pipeline_mops_at_paper_clock_256_entries":
                         mops_at(runs["paper_clock_256_entries"]["ops_per_cycle"], PAPER_CLOCK_MHZ),
                     "pipeline_limit": pipe_limit,
                     "dram_fraction": p_dram, "l": nic.l, "h": nic.h, "mean_memory_rtt_ns": t_mem,
                     "pipeline_runs": runs, "rtl_latency_ns": rtl_ns, "rtl_latency_cycles":
                     PIPE_CYCLES + runs["mean"]["latency_cycles"],
                     "model_latency_get_ns": nic.latency_get_ns, "model_latency_put_ns": nic.latency_put_ns,
                     "paper_latency_us": {1.0: PAPER["get_latency_us"], 0.0: PAPER["put_latency_us"]}.get(g)})
    return {"build": b, "pipeline_params": p.to_dict(), "fmax_mhz": fmax, "paper_clock_mhz": PAPER_CLOCK_MHZ,
            "store_accesses_10B": acc, "outstanding_reads": outstanding, "n_keys_pipeline": keys, "seed": seed,
            "pipeline_ops": n_ops, "stream_ops": n_stream, "store_ops": store_ops,
            "hw": {k: v for k, v in hw.__dict__.items()}, "rows": rows,
            "paper": {"get_mops": PAPER["get_mops_1nic"], "put_mops": PAPER["put_mops_1nic"],
                      "source": "Li et al., SOSP 2017 (SPECS.md, KV-Direct results: YCSB, Zipf 0.99, 10 B KVs)"},
            "sensitivity": "memory round trip in cycles (all NIC DRAM .. all PCIe) against the built "
                           f"{p.entries} reservation-station entries (Little's law)"}


MOPS_COLUMNS = ("mix", "ops/cycle (cycle model)", "ops/cycle (analytic)", "pipeline cap (Mops)",
                "memory cap (Mops)", "network cap (Mops)", "ours (Mops)", "band (Mops)", "paper (Mops)", "bound",
                "RTL latency (us)", "end-to-end model latency (us)")


def mops_rows(res: dict) -> list[list]:
    rows = []
    for r in res["rows"]:
        c = r["caps_mops"]
        lo, hi = r["mops_band_memory_latency"]
        lat = r["model_latency_get_ns"] if r["get_ratio"] >= 0.5 else r["model_latency_put_ns"]
        rows.append([r["mix"], f"{r['ops_per_cycle']:.3f}", f"{r['analytic_ops_per_cycle']:.3f}",
                     f"{c['pipeline']:.1f}", f"{c['memory']:.0f}", f"{c['network']:.0f}", f"{r['mops']:.1f}",
                     f"{lo:.0f}..{hi:.0f}", "-" if r["paper_mops"] is None else f"{r['paper_mops']:.0f}",
                     r["bound"], f"{r['rtl_latency_ns'] / 1e3:.2f}", f"{lat / 1e3:.1f}"])
    return rows


def write_mops(res: dict, out: Path) -> tuple[Path, Path]:
    """``kvdirect_mops.json`` + ``kvdirect_mops.png`` into ``out``."""
    from hwcosim.models.benchio import bar_png, write_json

    out = Path(out)
    js = write_json(out / "kvdirect_mops.json", res)
    labels = [r["mix"] for r in res["rows"]]
    png = bar_png(out / "kvdirect_mops.png", labels,
                  {"ours (RTL at measured Fmax)": [r["mops"] for r in res["rows"]],
                   "same pipeline at 180 MHz": [r["pipeline_mops_at_paper_clock"] for r in res["rows"]],
                   "at 180 MHz, 256 entries": [r["pipeline_mops_at_paper_clock_256_entries"] for r in res["rows"]],
                   "paper": [r["paper_mops"] or 0.0 for r in res["rows"]]},
                  "Mops", f"KV-Direct pipeline at {res['fmax_mhz']:.1f} MHz (LFE5U-85F) vs the paper at 180 MHz")
    return js, png
