"""``hwcosim bench``: performance measured as ratios against a baseline run in the same process.

Each design declares its benches in its registry entry (``Design.benches``, next to the
design); :data:`BENCHES` is derived from the registry, plus the benches of the tools and the
cluster-level systems, which are not designs (:data:`TOOL_BENCHES`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["run_benches", "BENCHES", "TOOL_BENCHES", "select_benches"]


#: name -> callable(out_dir, quick) -> dict; packages add their benchmarks here.
def _kernels(out_dir: Path, quick: bool) -> dict:
    from hwcosim.pruning.bench import run_kernel_bench

    return run_kernel_bench(out_dir, quick=quick)


def _lazy(module: str, name: str) -> Callable[[Path, bool], dict]:
    def run(out_dir: Path, quick: bool) -> dict:
        import importlib

        return getattr(importlib.import_module(module), name)(out_dir, quick)

    run.__name__ = name
    return run


#: Benches of the tools and the cluster-level systems (not designs): name -> callable(out_dir, quick).
TOOL_BENCHES: dict[str, Callable[[Path, bool], dict]] = {
    "kernels": _kernels,
    "csb_kernels": _lazy("hwcosim.pruning.csb_bench", "run_csb_bench"),
    "cluster_arnold": _lazy("hwcosim.models.systems.cluster.bench", "bench_arnold"),
    "cluster_c4p": _lazy("hwcosim.models.systems.cluster.bench", "bench_c4p"),
    "cluster_crux": _lazy("hwcosim.models.systems.cluster.bench", "bench_crux"),
    "cluster_speed": _lazy("hwcosim.models.systems.cluster.bench", "bench_cluster_speed"),
    "cluster_transport_speed": _lazy("hwcosim.models.systems.cluster.bench", "bench_transport_speed"),
    "cluster_mechanisms": _lazy("hwcosim.models.systems.cluster.bench", "bench_mechanisms"),
    "reliability_byterobust": _lazy("hwcosim.models.systems.reliability.bench", "bench_byterobust"),
    "reliability_byterobust_loop": _lazy("hwcosim.models.systems.reliability.bench", "bench_byterobust_loop"),
    "elastic_predictor": _lazy("hwcosim.models.systems.elastic.bench", "bench_predictor"),
    "reliability_c4d": _lazy("hwcosim.models.systems.reliability.bench", "bench_c4d"),
    "reliability_mycroft": _lazy("hwcosim.models.systems.reliability.bench", "bench_mycroft"),
    "reliability_noise": _lazy("hwcosim.models.systems.reliability.bench", "bench_noise"),
    "graph_engine": _lazy("hwcosim.models.systems.graph.bench", "bench_graph_engine"),
    "graph_compiled": _lazy("hwcosim.models.systems.graph.bench_compiled", "bench_graph_compiled"),
    "graph_gram_dask": _lazy("hwcosim.models.systems.graph.bench", "bench_gram_dask"),
    "gnn_rewrite": _lazy("hwcosim.models.systems.graph.bench", "bench_gnn_rewrite"),
    "tux2": _lazy("hwcosim.models.systems.graph.bench", "bench_tux2"),
    "tux2_procs": _lazy("hwcosim.models.systems.graph.bench", "bench_tux2_procs"),
    "tux2_gas": _lazy("hwcosim.models.systems.graph.bench", "bench_tux2_gas"),
    "cognn": _lazy("hwcosim.models.systems.jobs.bench", "bench_cognn"),
    "cpualloc": _lazy("hwcosim.models.systems.jobs.bench", "bench_cpualloc"),
    "jobcheck_real": _lazy("hwcosim.models.systems.jobs.bench", "bench_jobcheck_real"),
    "sim_speed": _lazy("hwcosim.cosim.flow.simspeed", "bench_simspeed"),
    "sweeps": _lazy("hwcosim.cosim.flow.sweep", "bench_sweeps"),
    "oneshot": _lazy("hwcosim.pruning.oneshot_study", "bench_oneshot"),
    "compile": _lazy("hwcosim.cosim.compile_bench", "bench_compile"),
}


def design_benches() -> dict[str, Callable[[Path, bool], dict]]:
    """The benches every registered design declares (``Design.benches``), by bench name."""
    from hwcosim.cosim.registry import designs

    out: dict[str, Callable[[Path, bool], dict]] = {}
    for d in designs().values():
        for name, ref in d.benches:
            if name in out or name in TOOL_BENCHES:
                raise RuntimeError(f"bench {name!r} of design {d.name!r} is declared twice")
            mod, _, fn = ref.partition(":")
            out[name] = _lazy(mod, fn)
    return out


#: Every bench: the designs' (from the registry) and the tools'.
BENCHES: dict[str, Callable[[Path, bool], dict]] = {**design_benches(), **TOOL_BENCHES}


def select_benches(only: str | None) -> list[str]:
    """Names of the benches to run: all of them, or the comma-separated ``--only`` list."""
    if not only:
        return list(BENCHES)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown or not names:
        raise UsageError(f"--only: unknown bench {', '.join(unknown) or '(empty)'}; "
                         f"choose from {', '.join(BENCHES)}")
    return names


def run_benches(only: str | None = None, quick: bool = False, out: Path | str = "build/bench",
                progress: Callable[[str], None] | None = None) -> dict:
    """Run the benches ``only`` names (comma-separated; default all), small configurations with ``quick``,
    each writing its JSON into ``out``; ``out/index.json`` records each bench's time (a partial run keeps
    the other benches' entries). ``progress`` gets a line as each bench starts. Returns the index."""
    names = select_benches(only)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.json"
    summary: dict = {}
    if only and index.exists():
        try:
            summary = json.loads(index.read_text())
        except (OSError, ValueError):
            summary = {}
    from hwcosim.models.atomic import write_text

    for name in names:
        t0 = time.monotonic()
        if progress:
            progress(f"bench {name} ...")
        BENCHES[name](out, quick)
        summary[name] = {"seconds": round(time.monotonic() - t0, 1), "quick": bool(quick),
                         "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_text(index, json.dumps(summary, indent=2) + "\n")
    return summary
