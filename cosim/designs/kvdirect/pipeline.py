"""Run the KV-Direct pipeline RTL on an operation stream and compare with the golden store.

:func:`run_pipeline` simulates :class:`hwcosim.hdl.kvdirect.Pipeline` against the cocotb memory model
of :mod:`hwcosim.cosim.designs.kvdirect.tb_pipeline`; every response and the final memory image are checked
against :class:`hwcosim.models.kvdirect.rtl_model.RTLStore` inside the testbench.
"""

from __future__ import annotations

import os

from hwcosim.cosim.flow import runner
from hwcosim.models.errors import UsageError
from hwcosim.models.kvdirect.rtl_model import PipelineParams, Request, golden_run, pack_request, pack_response
from hwcosim.models.tables import show


def _measured_fmax(design: str) -> dict:
    """Mops per ops/cycle at the Fmax make boards measured (nextpnr, LFE5U-85F), or why there is none."""
    from hwcosim.cosim.flow.fmax import measured

    m = measured(design)
    return {"note": "no measured Fmax yet (run make boards)"} if m is None else \
        {"fmax_mhz": m.mhz, "part": m.part, "label": m.label, "mops_per_op_per_cycle": m.mhz}


__all__ = ["run_pipeline", "bench_kvdirect_rtl", "bench_kvdirect_resources", "SWEEP_PARAMS"]


def run_pipeline(p: PipelineParams, reqs: list[Request], *, latency: int = 20, outstanding: int = 16,
                 jitter: int = 0, forward: bool = True, p_idle: float = 0.0, p_stall: float = 0.0,
                 p_mem_stall: float = 0.0, seed: int = 1, test_dir: str | os.PathLike | None = None,
                 sim: str | None = None, waves: bool | None = None) -> runner.SimResult:
    """Simulate ``Pipeline(p)`` on ``reqs``; raises :class:`hwcosim.cosim.flow.runner.SimFailure` on any mismatch.

    Parameters
    ----------
    latency, jitter : memory read latency in cycles, plus a random 0..jitter per read.
    outstanding : reads the memory accepts in flight (also the DUT's ``max_reads``), <= entries.
    forward : the DUT's ``forward_en``.
    p_idle, p_stall, p_mem_stall : request idle, response back-pressure, memory refusal probabilities.
    """
    from hwcosim.hdl.kvdirect import Pipeline

    if not 1 <= outstanding <= p.entries:
        raise UsageError(f"outstanding={outstanding} must be in 1..entries={p.entries} (the DUT tracks at "
                         "most one read per entry)")
    if latency < 1:
        raise UsageError(f"latency must be >= 1 cycle, not {latency}")
    expected, image, traffic = golden_run(p, reqs)
    return runner.run(
        Pipeline(p), "kvdirect_pipeline", "hwcosim.cosim.designs.kvdirect.tb_pipeline",
        inputs={"params": p.to_dict(), "requests": [pack_request(r) for r in reqs],
                "expected": [pack_response(r) for r in expected], "image": image.tobytes().hex(),
                "traffic": traffic, "latency": latency, "jitter": jitter, "outstanding": outstanding,
                "forward": forward, "p_idle": p_idle, "p_stall": p_stall, "p_mem_stall": p_mem_stall,
                "seed": seed},
        test_dir=test_dir, sim=sim, waves=waves)


# --- benchmarks -----------------------------------------------------------------------------------
SWEEP_PARAMS = PipelineParams(memory_bytes=1 << 17, entries=64, rs_slots=1024)
"""The sweep's pipeline: 1,024 buckets, 64 ops in flight, one RS slot per bucket (no false dependency)."""


def bench_kvdirect_rtl(out_dir, quick: bool = False) -> dict:
    """Operations per cycle of the RTL (Verilator) vs :func:`predict_ops_per_cycle`.

    Uniform and Zipf 0.99 keys, forwarding on and off, memory latencies 10..200 cycles with 64
    reads in flight (the PCIe DMA tag count). Every run is checked against the golden store.
    Writes ``kvdirect_rtl_ops.json`` and ``kvdirect_rtl_ops.png`` to ``out_dir``.
    """
    import json
    import time
    from pathlib import Path

    from hwcosim.models.atomic import write_text
    from hwcosim.models.kvdirect.rtl_model import make_stream, predict_ops_per_cycle
    from rich.table import Table

    out_dir = Path(out_dir)
    p = SWEEP_PARAMS
    lats = (10, 200) if quick else (10, 25, 50, 100, 200)
    n_ops = 600 if quick else 2000
    outstanding = 64
    results = []
    for dist in ("uniform", "zipf"):
        reqs = make_stream(n_ops, 1000, dist, seed=11)
        for fwd in (True, False):
            for lat in lats:
                t0 = time.monotonic()
                res = run_pipeline(p, reqs, latency=lat, outstanding=outstanding, forward=fwd, seed=lat)
                mt = res.metrics
                pred = predict_ops_per_cycle(p, reqs, lat, outstanding, fwd)
                results.append({"dist": dist, "forward": fwd, "latency": lat, "ops": n_ops,
                                "cycles": mt["cycles"], "ops_per_cycle": mt["ops_per_cycle"],
                                "predicted": pred["ops_per_cycle"], "bound": pred["bound"],
                                "merge_fraction": pred["merge_fraction"], "mem_reads": mt["mem_reads"],
                                "forwarded": mt["dut_forwarded"], "mismatches": mt["mismatches"],
                                "bad_lines": mt["bad_lines"], "sim_seconds": round(time.monotonic() - t0, 1)})
    out = {"params": p.to_dict(), "outstanding": outstanding, "n_keys": 1000, "simulator": res.sim,
           "note": "ops/cycle from first request accepted to last response; Mops = ops/cycle x clock MHz: "
                   "180 MHz is the paper's NIC clock (ASSUMED here), the measured one is below",
           "measured_fmax": _measured_fmax("kvdirect-pipeline"),
           "results": results}
    write_text(out_dir / "kvdirect_rtl_ops.json", json.dumps(out, indent=2) + "\n")
    t = Table(title=f"KV-Direct RTL: ops/cycle, {n_ops} ops, {outstanding} reads in flight, "
                    f"{p.entries} entries, {p.n_buckets} buckets")
    for c in ("keys", "forward", "latency (cycles)", "measured ops/cycle", "model ops/cycle", "bound", "merge fraction",
              "memory reads", "forwarded ops", "ok"):
        t.add_column(c, justify="right")
    for r in results:
        t.add_row(r["dist"], "on" if r["forward"] else "off", str(r["latency"]), f"{r['ops_per_cycle']:.3f}",
                  f"{r['predicted']:.3f}", r["bound"], f"{r['merge_fraction']:.2f}", str(r["mem_reads"]),
                  str(r["forwarded"]), "yes" if not (r["mismatches"] or r["bad_lines"]) else "NO")
    show(t)
    _plot(results, out_dir / "kvdirect_rtl_ops.png")
    return out


def _plot(results: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hwcosim.models.atomic import save_png

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for dist, color in (("uniform", "C0"), ("zipf", "C3")):
        for fwd, style in ((True, "-"), (False, "--")):
            pts = sorted((r["latency"], r["ops_per_cycle"], r["predicted"]) for r in results
                         if r["dist"] == dist and r["forward"] == fwd)
            if not pts:
                continue
            x, y, yp = zip(*pts, strict=True)
            lab = f"{dist}, forwarding {'on' if fwd else 'off'}"
            ax.plot(x, y, style + "o", color=color, label=lab + " (RTL)")
            ax.plot(x, yp, style, color=color, alpha=0.35, label=lab + " (model)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memory latency (cycles)")
    ax.set_ylabel("operations per cycle")
    ax.set_title("KV-Direct pipeline RTL vs throughput model")
    ax.legend(fontsize=6)
    fig.tight_layout()
    save_png(fig, path, dpi=120)


def bench_kvdirect_resources(out_dir, quick: bool = False) -> dict:
    """Verilog and Yosys resource estimates (UltraScale+) of the hash unit and the pipeline.

    Writes ``kvdirect_resources.json`` and the Verilog of each configuration to ``out_dir``.
    Estimates, not vendor place-and-route results (see :mod:`hwcosim.cosim.flow.synth`).
    """
    import json
    from pathlib import Path

    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.flow.synth import synthesize
    from hwcosim.hdl.kvdirect import KeyHash, Pipeline
    from hwcosim.models.atomic import write_text
    from rich.table import Table

    out_dir = Path(out_dir)
    configs = [("key hash", "kvdirect_keyhash", KeyHash(), {})]
    sizes = [(8, 16)] if quick else [(8, 16), (32, 256)]
    for entries, slots in sizes:
        p = PipelineParams(memory_bytes=1 << 17, entries=entries, rs_slots=slots)
        configs.append((f"pipeline E={entries} S={slots}", f"kvdirect_pipeline_e{entries}_s{slots}", Pipeline(p),
                        p.to_dict()))
    rows = []
    for label, top, design, params in configs:
        v = to_verilog(design, top)
        write_text(out_dir / f"{top}.v", v)
        rep = synthesize(v, top, "xcup", out_dir=out_dir)
        rows.append({"design": label, "top": top, "params": params, **rep["resources"]})
    out = {"target": "xcup", "note": "Yosys estimate (synth_xilinx, classic abc LUT mapping)", "results": rows}
    write_text(out_dir / "kvdirect_resources.json", json.dumps(out, indent=2) + "\n")
    t = Table(title="KV-Direct RTL resources, Yosys estimate for Xilinx UltraScale+")
    for c in ("design", "LUT", "FF", "DSP", "BRAM", "LUTRAM", "CARRY"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(r["design"], *(str(r[k]) for k in ("LUT", "FF", "DSP", "BRAM", "LUTRAM", "CARRY")))
    show(t)
    return out
