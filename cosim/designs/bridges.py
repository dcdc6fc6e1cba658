"""The RTL-in-the-loop bridges as a library: MELO in the cluster network, BBS/FSS serving, KV-Direct.

:func:`melo_params`, :func:`serve_params` and :func:`kv_params` build each bridge's scenario from
keyword arguments (``None`` = the default, or the value a cluster scenario file gives:
``scenario=PATH``); :func:`run_bridges` runs bridges with every output staged into one folder;
:func:`bench_bridges` is the ``cosim_bridges`` benchmark of ``hwcosim bench``. ``hwcosim cosim
melo|serve|kv`` (:mod:`hwcosim.cosim.cli.bridges`) parses its flags and calls these.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["melo_params", "serve_params", "kv_params", "check_clock", "run_bridges", "bench_bridges", "progress"]


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_bridges(runs: list, out: Path, model_only: bool = False) -> int:
    """Run the bridges ``runs`` (``(name, run)``; ``run(test_dir)`` returns the comparison) with every
    output staged: each report ``bridge_<name>.json`` and RTL run folder ``bridge_<name>/`` (``hwcosim
    check`` re-verifies it) are renamed into ``out`` together at the end. When the RTL disagrees with
    the golden model its run folder is still kept (with the outputs of the bridges before it) and the
    mismatch raised (:class:`~hwcosim.cosim.flow.runner.SimFailure`)."""
    from hwcosim.cosim.flow.bridge import print_table, write_report
    from hwcosim.cosim.flow.runner import SimFailure
    from hwcosim.models.atomic import staged_dir

    out = Path(out)
    failure, done = None, []
    with staged_dir(out) as st:
        for name, run in runs:
            try:
                cmp = run(None if model_only else st / f"bridge_{name}")
            except SimFailure as e:  # the evidence stays (sealed by the bridge before it raised)
                failure = (name, e)
                break
            print_table(cmp)
            write_report(cmp, st)
            done.append(name)
    for name in done:
        run_dir = out / f"bridge_{name}"
        print(f"wrote {out / f'bridge_{name}.json'}"
              + ("" if model_only else f" and the RTL run folder {run_dir} (hwcosim check {run_dir})"))
    if failure is not None:
        run_dir = out / f"bridge_{failure[0]}"
        if (run_dir / "run.json").is_file():
            raise SimFailure(f"{str(failure[1]).splitlines()[0]}; evidence in {run_dir} (hwcosim check {run_dir})")
        raise failure[1]
    return 0


def _dflt(v, default):
    return default if v is None else v


def _load(path: str):
    """The cluster scenario file, validated by the cluster's parser (bad file: UsageError, one line)."""
    from hwcosim.models.systems.cluster.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as e:
        raise UsageError(str(e)) from None


def _from_file(path: str, fn):
    """``fn()`` (a bridge's ``params_from_scenario``) with its ScenarioError as one UsageError line."""
    from hwcosim.models.systems.cluster.scenario import ScenarioError

    try:
        return fn()
    except ScenarioError as e:
        raise UsageError(f"{path}: {e}") from None


def check_clock(mhz: float, model_only: bool) -> None:
    """The RTL clock needs a whole number of ns per period (a model-only run takes any clock)."""
    period = 1e3 / mhz
    if not model_only and abs(period - round(period)) > 1e-9:
        raise UsageError(f"--clock-mhz {mhz:g} gives a {period:g} ns period; the RTL clock needs a whole number of "
                         "ns (e.g. 100, 125, 200, 250)")


def melo_params(scenario: str | None = None, loss=None, lossy_gpu=None, flows=None, chosen=None, scale=None,
                f_clk_mhz=None, seed=None):
    """The MELO bridge's scenario: ``flows`` ((src, dst, bytes, start_us), ...) and ``chosen`` (flow
    indices run on the engine) replace the defaults; a ``scenario`` file's values come under the
    keywords given."""
    from hwcosim.cosim.designs.melo.bridge import MeloScenarioParams, params_from_scenario

    if scenario:
        sc = _load(scenario)
        return _from_file(scenario, lambda: params_from_scenario(
            sc, scale=scale, loss=loss, lossy_gpu=lossy_gpu, flows=flows, chosen=chosen, f_clk_mhz=f_clk_mhz,
            seed=seed))
    return MeloScenarioParams(loss=_dflt(loss, 0.02), lossy_gpu=_dflt(lossy_gpu, 2), chosen=chosen,
                              scale=_dflt(scale, 1.0), f_clk_mhz=_dflt(f_clk_mhz, 250.0), seed=_dflt(seed, 1),
                              **({"flows": tuple(flows)} if flows else {}))


def serve_params(scenario: str | None = None, device=None, **flags) -> list:
    """The serving bridge's scenarios, one per device (``device``: bbs, fss or both); ``flags`` are
    ``ServeScenarioParams`` fields (``n_requests``, ``load``, ``slo_us``, ``p_stall``, ``cache``,
    ``f_clk_mhz``, ``seed``; ``None`` = default or the ``scenario`` file's)."""
    from hwcosim.cosim.designs.fss.bridge import ServeScenarioParams, params_from_scenario

    if scenario:
        sc = _load(scenario)
        return _from_file(scenario, lambda: params_from_scenario(sc, device, **flags))
    dev = _dflt(device, "both")
    kw = {k: v for k, v in flags.items() if v is not None}
    return [ServeScenarioParams(device=d, **kw) for d in (("bbs", "fss") if dev == "both" else (dev,))]


def kv_params(scenario: str | None = None, **flags):
    """The KV-Direct bridge's scenario; ``flags`` are ``KVScenarioParams`` fields (``None`` = default or
    the ``scenario`` file's)."""
    from hwcosim.cosim.designs.kvdirect.bridge import KVScenarioParams, params_from_scenario

    if scenario:
        sc = _load(scenario)
        return _from_file(scenario, lambda: params_from_scenario(sc, **flags))
    return KVScenarioParams(**{k: v for k, v in flags.items() if v is not None})


def bench_bridges(out_dir, quick: bool = False) -> dict:
    """All three bridges, RTL vs model: writes ``bridge_*.json`` and ``cosim_bridges.json`` to ``out_dir``.

    ``quick``: smaller scenarios (fewer requests, half-size flows, two iterations).
    """
    from hwcosim.cosim.designs.fss import bridge as serve
    from hwcosim.cosim.designs.kvdirect import bridge as kv
    from hwcosim.cosim.designs.melo import bridge as melo
    from hwcosim.cosim.flow.bridge import print_table, write_report
    from hwcosim.models.atomic import write_text
    from rich.console import Console

    out_dir = Path(out_dir)
    n_req = 40 if quick else 120
    runs = [
        ("melo", lambda: melo.run_bridge(melo.MeloScenarioParams(scale=0.5 if quick else 1.0))),
        ("serve_bbs", lambda: serve.run_bridge(serve.ServeScenarioParams(device="bbs", n_requests=n_req))),
        ("serve_fss", lambda: serve.run_bridge(serve.ServeScenarioParams(device="fss", n_requests=n_req))),
        ("serve_bbs_stall", lambda: serve.run_bridge(serve.ServeScenarioParams(
            device="bbs", n_requests=n_req, p_stall=0.2, cache=False))),
        ("kv", lambda: kv.run_bridge(kv.KVScenarioParams(iterations=2 if quick else 3))),
        ("kv_uniform", lambda: kv.run_bridge(kv.KVScenarioParams(iterations=2 if quick else 3, theta=0.0,
                                                                 n_keys=200))),
        ("kv_noforward", lambda: kv.run_bridge(kv.KVScenarioParams(iterations=2 if quick else 3, forward=False))),
        ("kv_one_worker", lambda: kv.run_bridge(kv.KVScenarioParams(n_workers=1, iterations=2 if quick else 3))),
    ]
    renamed = {"serve_bbs_stall": "Output back-pressure: the result sink refuses 20 % of cycles; every batch is "
                                  "simulated (no cache: with stalls the cycles depend on the random pattern).",
               "kv_uniform": "Uniform key popularity over 200 keys (few forwarding chains).",
               "kv_noforward": "Zipf 0.99 as in 'kv', with the pipeline's forwarding off (every op of a hot-key chain "
                               "pays its own memory round trip).",
               "kv_one_worker": "One worker: no two batches overlap in the pipeline."}
    summary = {}
    con = Console()
    for name, fn in runs:
        progress(f"bridge {name}")
        cmp = fn()
        if name in renamed:
            cmp.bridge = name
            cmp.notes.append(renamed[name])
        print_table(cmp, con)
        write_report(cmp, out_dir)
        d = cmp.to_dict()
        summary[name] = {"slowdown": d["slowdown"], "slowdown_total": d["slowdown_total"],
                         "wall_model_s": cmp.model["wall_s"], "wall_rtl_s": (cmp.rtl or {}).get("wall_s"),
                         "checks": cmp.checks, "table": d["table"], "notes": cmp.notes}
    write_text(out_dir / "cosim_bridges.json", json.dumps(summary, indent=1, default=str) + "\n")
    return summary
