"""The KV-Direct performance study (``hwcosim kvdirect study``): our model's figures beside the paper's.

KV-Direct: Li et al., SOSP 2017. :func:`study` predicts GET/PUT throughput for 1 and N NICs, latency
and the single-key atomic speedup with the model of :mod:`hwcosim.models.kvdirect.perf`, using memory
accesses per operation measured on the golden store (:class:`hwcosim.models.kvdirect.store.KVStore`);
:func:`write_study` writes its JSON + PNG and :func:`study_table` lays it out beside the paper's
180 / 114 Mops, 1.22 Gops, 4.3 / 5.4 us and 191x.
"""

from __future__ import annotations

import json
from pathlib import Path

from hwcosim.models.atomic import save_png, write_text
from hwcosim.models.kvdirect.perf import (
    PAPER,
    HWParams,
    atomic_rates,
    measure_store_accesses,
    multi_nic,
    nic_throughput,
)
from hwcosim.models.kvdirect.workload import Workload, generate

__all__ = ["study", "write_study", "study_table"]


def study(seed: int = 0, n_ops: int = 200_000, n_nics: int = 10, theta: float = 0.99,
          kv: tuple[int, int] = (5, 5), hw: HWParams | None = None) -> dict:
    """Run the study; returns a JSON-ready dict of every number (same seed, same result)."""
    hw = hw or HWParams()
    acc = measure_store_accesses(10**9, kv, seed)
    accesses = {"get": acc["get"], "put": acc["put"]}
    rows = []
    for label, g in (("GET", 1.0), ("PUT", 0.0), ("YCSB-B 95% GET", 0.95)):
        w = Workload(get_ratio=g, theta=theta, kv_sizes=((kv[0], kv[1], 1.0),))
        st = generate(w, n_ops, seed)
        one = nic_throughput(w, hw, st, accesses)
        many = multi_nic(w, hw, st, n_nics, seed, accesses)
        rows.append({"op": label, "one_nic": one.to_dict(), "multi_nic": many})
    uni = Workload(get_ratio=1.0, theta=0.0, kv_sizes=((kv[0], kv[1], 1.0),))
    uni_res = nic_throughput(uni, hw, generate(uni, n_ops, seed), accesses).to_dict()
    at = atomic_rates(hw)
    return {"seed": seed, "n_ops": n_ops, "n_nics": n_nics, "theta": theta, "kv_bytes": list(kv),
            "hw": {k: v for k, v in hw.__dict__.items()}, "store_accesses": acc, "rows": rows,
            "uniform_get": uni_res, "atomic": at, "paper": PAPER}


def _plot(res: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    get, put = res["rows"][0], res["rows"][1]
    labels = ["GET 1 NIC", "PUT 1 NIC", f"GET {res['n_nics']} NICs", f"PUT {res['n_nics']} NICs"]
    ours = [get["one_nic"]["throughput"], put["one_nic"]["throughput"],
            get["multi_nic"]["throughput"], put["multi_nic"]["throughput"]]
    paper = [PAPER["get_mops_1nic"] * 1e6, PAPER["put_mops_1nic"] * 1e6, PAPER["get_gops_10nic"] * 1e9,
             PAPER["put_mops_10nic"] * 1e6]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    x = range(len(labels))
    ax[0].bar([i - 0.2 for i in x], [v / 1e6 for v in ours], 0.4, label="our model")
    ax[0].bar([i + 0.2 for i in x], [v / 1e6 for v in paper], 0.4, label="paper")
    ax[0].set_xticks(list(x), labels, rotation=15)
    ax[0].set_ylabel("Mops")
    ax[0].set_title(f"KV-Direct throughput, Zipf {res['theta']}, {sum(res['kv_bytes'])} B KVs")
    ax[0].legend()
    at = res["atomic"]
    ax[1].bar([0, 1], [at["stalled"] / 1e6, at["forwarding"] / 1e6], color=["tab:red", "tab:green"])
    ax[1].set_yscale("log")
    ax[1].set_xticks([0, 1], ["stalled", "forwarding"])
    ax[1].set_ylabel("single-key atomics, Mops")
    ax[1].set_title(f"atomic speedup {at['speedup']:.0f}x (paper 191x)")
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def study_table(res: dict):
    """The study beside the paper's figures, as a rich Table."""
    from rich.table import Table

    t = Table(title="KV-Direct study: our model vs the paper")
    for c in ("figure", "ours", "paper", "bound / note"):
        t.add_column(c)
    g, p = res["rows"][0], res["rows"][1]
    n = res["n_nics"]
    t.add_row("GET, 1 NIC", f"{g['one_nic']['throughput'] / 1e6:.0f} Mops", "180 Mops", g["one_nic"]["bound"])
    t.add_row("PUT, 1 NIC", f"{p['one_nic']['throughput'] / 1e6:.0f} Mops", "114 Mops", p["one_nic"]["bound"])
    t.add_row(f"GET, {n} NICs", f"{g['multi_nic']['throughput'] / 1e9:.2f} Gops", "1.22 Gops (10)",
              g["multi_nic"]["bound"])
    t.add_row(f"PUT, {n} NICs", f"{p['multi_nic']['throughput'] / 1e6:.0f} Mops", "610 Mops (10)",
              p["multi_nic"]["bound"])
    t.add_row("GET latency", f"{g['one_nic']['latency_get_ns'] / 1e3:.1f} us", "4.3 us", "at 90% load")
    t.add_row("PUT latency", f"{p['one_nic']['latency_put_ns'] / 1e3:.1f} us", "5.4 us", "at 90% load")
    a = res["atomic"]
    t.add_row("atomics stalled / fwd", f"{a['stalled'] / 1e6:.2f} / {a['forwarding'] / 1e6:.0f} Mops",
              "0.94 / 180 Mops", f"speedup {a['speedup']:.0f}x (paper 191x)")
    t.add_row("OoO merged ops", f"{g['one_nic']['merge_fraction']:.1%}", "~15%", "Zipf, 256 in flight")
    sa = res["store_accesses"]
    t.add_row("lines per GET / PUT", f"{sa['get'][0]:.2f} / {sa['put'][0] + sa['put'][1]:.2f}", "~1 / ~2",
              "measured on the golden store")
    t.add_row("uniform GET, 1 NIC", f"{res['uniform_get']['throughput'] / 1e6:.0f} Mops", "-",
              res["uniform_get"]["bound"])
    return t


def write_study(res: dict, out: Path) -> tuple[Path, Path]:
    """``kvdirect_study.json`` + ``kvdirect_study.png`` into ``out`` (both appear together, at the end)."""
    from hwcosim.models.atomic import staged_dir

    out = Path(out)
    with staged_dir(out) as st:
        write_text(st / "kvdirect_study.json", json.dumps(res, indent=2, default=float) + "\n")
        _plot(res, st / "kvdirect_study.png")
    return out / "kvdirect_study.json", out / "kvdirect_study.png"
