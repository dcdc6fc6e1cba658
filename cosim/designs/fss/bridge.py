"""Bridge (b): the BBS and FSS accelerators as serving devices under an ElasticBatch-style stream.

Scenario
--------
Requests arrive as a Poisson stream (``rate`` per second); each has an input size (vectors for
the BBS SpMxV engine, activation columns / tokens for the FSS GEMM engine) drawn from the
log-normal law of :class:`hwcosim.models.systems.elastic.elasticbatch.ServingConfig` and padded to its
*bucket* bound, as ElasticBatch does. One device serves every bucket; when it is free it takes
the bucket of the oldest waiting request and batches up to ``batch[bucket]`` waiting requests
of that bucket (dynamic batching). ``batch[bucket]`` comes from ElasticBatch's planner
(:func:`hwcosim.models.systems.elastic.elasticbatch.plan_device`): its latency predictor is fitted to nine
profiled points of the device's *cycle model* (3 batches x 3 buckets), and per bucket the batch
whose predicted service time is at most ``slo_fraction`` of the SLO and that needs the fewest
device instances at the bucket's arrival rate wins (the planner sees only the model, in both
runs).

A batch of ``b`` requests of bucket ``s`` is one engine run:

- BBS SpMxV (:class:`hwcosim.hdl.bbs.SpMxV`, one CSB weight matrix, ``rows x cols``): ``b * s`` vectors;
- FSS GEMM (:class:`hwcosim.hdl.fss.FSSGemm`, one FSS weight matrix): ``T = b * s`` activation columns,
  rounded up to a multiple of ``pe_cols``.

From a cluster scenario file
----------------------------
:func:`params_from_scenario` (``hwcosim cosim serve --scenario FILE.toml``) reads the same TOML file as
``hwcosim cluster run`` through the cluster's parser. What maps cleanly: the seed, and the
``[cosim.serve]`` table (``device``, ``requests``, ``load``, ``slo_us``, ``p_stall``, ``cache``,
``clock_mhz``). What does not map, and is ignored: ``[topology]``, ``[routing]``, ``[[jobs]]`` and
``[[failures]]``. The serving bridge is one accelerator behind a request queue with no network in
the model (requests are not moved across the fabric), and a training job's DP x TP x PP, compute
time and gradient bytes say nothing about an inference request stream's rate or sizes.

Devices and time base
---------------------
The engine clock is ``f_clk_mhz`` (default 200 MHz, the clock of
:class:`hwcosim.models.systems.elastic.elasticbatch.BBSDevice`). The **model device** takes the service time of
a batch from the cycle model (``hwcosim.models.bbs.spmxv.CycleModel.expected`` / ``hwcosim.models.fss.gemm.CycleModel.
expected``). The **RTL device** (:mod:`hwcosim.cosim.designs.fss.tb_bridge`) runs the batch's real data (each
request's seeded input vectors, zero-padded to the bucket) through the engine at the batch's
start cycle; the service time is the measured cycle count from the first input beat to the last
result beat, and every result word is compared with the golden model (``hwcosim.models.bbs.spmxv.spmxv`` /
``hwcosim.models.fss.gemm.gemm``). **Cache per shape:** the engine's cycle count depends only on the batch
shape (the number of vectors / columns), not on the data, so a shape measured once is not
simulated again: a repeated shape advances the RTL clock by the cached count (one timer, no
engine activity) and its data is not checked. ``cache=False`` simulates every batch (the tests
check that it gives the same times).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from hwcosim.cosim.flow.bridge import ClockMap, Completion, ModelDevice, co_simulate, compare, run_sync
from hwcosim.models.errors import UsageError

__all__ = ["ServeScenarioParams", "ServeScenario", "ServeModelDevice", "make_engine", "run_model", "run_rtl",
           "run_bridge", "DEVICES", "params_from_scenario"]

DEVICES = ("bbs", "fss")


@dataclass(frozen=True)
class ServeScenarioParams:
    """Parameters of the serving bridge (see the module docstring).

    Raises
    ------
    ValueError
        On a value the scenario cannot run, naming it.
    """

    device: str = "bbs"
    n_requests: int = 60
    load: float = 1.3
    buckets: tuple = (2, 4, 8)
    size_median: float = 3.0
    size_sigma: float = 0.8
    batches: tuple = (1, 2, 4, 8)
    slo_us: float = 10.0
    slo_fraction: float = 0.5
    f_clk_mhz: float = 200.0
    rows: int = 32
    cols: int = 64
    cache: bool = True
    p_stall: float = 0.0
    seed: int = 1

    def __post_init__(self):
        if self.device not in DEVICES:
            raise UsageError(f"device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        if not isinstance(self.n_requests, int) or self.n_requests < 1:
            raise UsageError(f"n_requests must be an integer >= 1, not {self.n_requests!r}")
        if not 0 < self.load <= 4:
            raise UsageError(f"load must be in (0, 4] (offered load vs the device serving requests one at a time), "
                             f"not {self.load}")
        if not self.buckets or list(self.buckets) != sorted(set(self.buckets)) or self.buckets[0] < 1:
            raise UsageError(f"buckets must be increasing positive sizes, not {self.buckets!r}")
        if not self.batches or min(self.batches) < 1:
            raise UsageError(f"batches must be positive, not {self.batches!r}")
        if not (self.slo_us > 0 and 0 < self.slo_fraction <= 1 and self.f_clk_mhz > 0):
            raise UsageError("slo_us and f_clk_mhz must be > 0 and slo_fraction in (0, 1]")
        if not 0 <= self.p_stall < 0.95:
            raise UsageError(f"p_stall must be in [0, 0.95), not {self.p_stall}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["buckets"], d["batches"] = list(self.buckets), list(self.batches)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ServeScenarioParams:
        d = dict(d)
        d["buckets"], d["batches"] = tuple(d["buckets"]), tuple(d["batches"])
        return cls(**d)


def params_from_scenario(sc, device: str | None = None, **flags) -> list[ServeScenarioParams]:
    """The serving scenarios (one per device: ``device`` "both" gives BBS then FSS) of a cluster scenario
    ``sc`` (module docstring). ``device`` and ``flags`` (keyword arguments of :class:`ServeScenarioParams`
    given on the command line; None: not given) override the file's ``[cosim.serve]``.
    Raises ``ScenarioError`` (one line)."""
    from hwcosim.models.systems.cluster.scenario import ScenarioError

    conf = sc.cosim_conf("serve")
    names = {"requests": "n_requests", "load": "load", "slo_us": "slo_us", "p_stall": "p_stall", "cache": "cache",
             "clock_mhz": "f_clk_mhz"}
    from hwcosim.models.precedence import layered

    # command line over [cosim.serve] over the scenario's seed and the class defaults
    kw = layered(("scenario", {"seed": sc.seed}),
                 ("[cosim.serve]", {names[k]: v for k, v in conf.items() if k in names}), ("command line", flags))
    dev = layered(("default", {"device": "both"}), ("[cosim.serve]", {"device": conf.get("device")}),
                  ("command line", {"device": device}))["device"]
    try:
        return [ServeScenarioParams(device=d, **kw) for d in (DEVICES if dev == "both" else (dev,))]
    except ValueError as e:
        raise ScenarioError(f"[cosim.serve]: {e}") from None


def make_engine(sp: ServeScenarioParams):
    """The engine parameters and its seeded weights: ``(params, values, indices)``.

    BBS: 32 x 64 at 75 % bank-balanced sparsity, 8 banks, 2 PEs (an RTL test configuration);
    FSS: 2 x 8 regions with 4 nonzeros (50 %), 2 x 4 PEs (four activation columns per tile).
    """
    rng = np.random.default_rng([sp.seed, 17])
    w = rng.normal(0, 0.6, size=(sp.rows, sp.cols))
    if sp.device == "bbs":
        from hwcosim.models.bbs.spmxv import BBSParams
        from hwcosim.models.fixedpoint import Q
        from hwcosim.pruning.formats.csb import encode

        m = encode(w, 8, 0.75, fmt=Q(2, 6))
        p = BBSParams(rows=sp.rows, cols=sp.cols, banks=8, k=m.k, pes=2, weight_fmt=m.fmt)
        return p, np.asarray(m.values, dtype=np.int64), np.asarray(m.indices, dtype=np.int64)
    from hwcosim.models.fss.gemm import FSSParams
    from hwcosim.pruning.formats.fss import encode

    p = FSSParams(region=(2, 8), n=4, pe_rows=2, pe_cols=4, max_rows=max(32, sp.rows), max_cols=max(64, sp.cols))
    m = encode(w, p.region, n=p.n, fmt=p.weight_fmt)
    return p, np.asarray(m.values, dtype=np.int64), np.asarray(m.indices, dtype=np.int64)


def batch_shape(sp: ServeScenarioParams, p, n_req: int, bucket: int) -> int:
    """Vectors (BBS) or activation columns (FSS, padded to ``pe_cols``) of a batch."""
    n = n_req * bucket
    if sp.device == "fss":
        n = -(-n // p.pe_cols) * p.pe_cols
    return n


def model_cycles(sp: ServeScenarioParams, p, shape: int) -> int:
    if sp.device == "bbs":
        from hwcosim.models.bbs.spmxv import CycleModel

        return CycleModel(p).expected(shape)
    from hwcosim.models.fss.gemm import CycleModel

    return CycleModel(p).expected(sp.rows, sp.cols, shape)


def request_inputs(sp: ServeScenarioParams, p, rid: int, size: int, bucket: int) -> np.ndarray:
    """Raw input of request ``rid``: (bucket, cols) vectors / columns, the last ``bucket - size`` zero."""
    fmt = p.vec_fmt if sp.device == "bbs" else p.act_fmt
    rng = np.random.default_rng([sp.seed, 101, rid])
    x = np.zeros((bucket, sp.cols), dtype=np.int64)
    x[:size] = rng.integers(fmt.min_raw, fmt.max_raw + 1, size=(size, sp.cols))
    return x


class _CycleDevice:
    """The engine's cycle model as an ElasticBatch :class:`~models.systems.elastic.elasticbatch.Device`
    (what the planner profiles)."""

    def __init__(self, sp: ServeScenarioParams, p, clock: ClockMap):
        self.sp, self.p, self.clock = sp, p, clock
        self.name = f"{sp.device}-cycle-model"
        self.capacity = float(max(sp.batches) * max(sp.buckets))

    def latency(self, batch: int, input_size: int) -> float:
        return self.clock.seconds(model_cycles(self.sp, self.p, batch_shape(self.sp, self.p, int(batch),
                                                                            int(input_size))))


class ServeScenario:
    """Arrivals, buckets, dynamic batching and latency accounting of the serving bridge."""

    def __init__(self, sp: ServeScenarioParams, p):
        from hwcosim.models.systems.elastic.elasticbatch import LatencyPredictor, ServingConfig, plan_device

        self.sp, self.p = sp, p
        self.clock = ClockMap(sp.f_clk_mhz * 1e6)
        rng = np.random.default_rng([sp.seed, 3])
        cfg0 = ServingConfig(rate=1.0, slo_s=sp.slo_us * 1e-6, buckets=tuple(sp.buckets), size_median=sp.size_median,
                             size_sigma=sp.size_sigma, batches=tuple(sp.batches), seed=sp.seed)
        self.sizes = cfg0.sample_sizes(sp.n_requests, rng)
        self.bucket = np.asarray(sp.buckets)[np.searchsorted(np.asarray(sp.buckets), self.sizes)]
        # rate: ``load`` / mean service time of a request served alone (load > 1 needs batching)
        per_req = np.mean([self.clock.seconds(model_cycles(sp, p, batch_shape(sp, p, 1, s))) for s in self.bucket])
        self.rate = sp.load / per_req
        # the ElasticBatch planner: a latency predictor fitted to a few profiled points of the cycle
        # model, then ElasticBatch's rule (2 x latency <= SLO, fewest instances at the bucket's rate);
        # ``slo_fraction`` of the SLO is the service-time budget, so the planner's SLO is twice it
        self.planner_device = _CycleDevice(sp, p, self.clock)
        self.predictor = LatencyPredictor(noise=0.0, reps=1, seed=sp.seed)
        bs, ks = sorted(set(sp.batches)), sorted(set(sp.buckets))
        self.profiled = ([bs[0], bs[len(bs) // 2], bs[-1]], [ks[0], ks[len(ks) // 2], ks[-1]])
        self.predictor.profile(self.planner_device, *self.profiled)
        cfg = ServingConfig(rate=self.rate, slo_s=2 * sp.slo_fraction * sp.slo_us * 1e-6, buckets=tuple(sp.buckets),
                            size_median=sp.size_median, size_sigma=sp.size_sigma, batches=tuple(sp.batches),
                            seed=sp.seed)
        self.plan = plan_device(self.planner_device, cfg, self.predictor)
        self.arrival = np.cumsum(rng.exponential(1.0 / self.rate, sp.n_requests))
        self.now = 0.0
        self.next_arr = 0
        self.waiting: list[int] = []
        self.busy = False
        self.batches: dict[int, list[int]] = {}
        self.done_t = np.full(sp.n_requests, np.nan)
        self.start_t = np.full(sp.n_requests, np.nan)
        self.batch_log: list[tuple] = []
        self._bid = 0

    def done(self) -> bool:
        return not np.isnan(self.done_t).any()

    def next_time(self) -> float:
        return float(self.arrival[self.next_arr]) if self.next_arr < len(self.arrival) else math.inf

    def step(self, t: float, dev) -> None:
        self.now = t
        while self.next_arr < len(self.arrival) and self.arrival[self.next_arr] <= t:
            self.waiting.append(self.next_arr)
            self.next_arr += 1
        self._dispatch(dev)

    def _dispatch(self, dev) -> None:
        if self.busy or not self.waiting:
            return
        s = int(self.bucket[self.waiting[0]])
        take = [r for r in self.waiting if self.bucket[r] == s][: self.plan[s]]
        self.waiting = [r for r in self.waiting if r not in take]
        self._bid += 1
        self.batches[self._bid] = take
        shape = batch_shape(self.sp, self.p, len(take), s)
        dev.submit(self.now, self._bid, {"shape": shape, "bucket": s, "requests": take,
                                         "sizes": [int(self.sizes[r]) for r in take]})
        self.start_t[take] = self.now
        self.busy = True

    def on_complete(self, c: Completion, dev) -> None:
        self.now = c.t
        take = self.batches.pop(c.rid)
        self.done_t[take] = c.t
        shape = c.result["shape"]
        self.batch_log.append((c.rid, len(take), int(self.bucket[take[0]]), shape, c.result["cycles"],
                               model_cycles(self.sp, self.p, shape), c.result.get("simulated", False)))
        self.busy = False
        self._dispatch(dev)

    def result(self) -> dict:
        lat = (self.done_t - self.arrival) * 1e6
        span = float(self.done_t.max() - self.arrival[0])
        cyc = [b[4] for b in self.batch_log]
        plan = {str(k): v for k, v in self.plan.items()}
        return {"requests": int(self.sp.n_requests), "rate_per_s": float(self.rate), "plan": plan,
                "batches": len(self.batch_log), "mean_batch": float(np.mean([b[1] for b in self.batch_log])),
                "p50_latency_us": float(np.percentile(lat, 50)), "p99_latency_us": float(np.percentile(lat, 99)),
                "max_latency_us": float(lat.max()), "mean_latency_us": float(lat.mean()),
                "slo_attainment": float(np.mean(lat <= self.sp.slo_us)),
                "throughput_req_per_s": float(self.sp.n_requests / span),
                "busy_cycles": int(sum(cyc)), "latencies_us": lat.tolist(),
                "batch_cycles": [list(b) for b in self.batch_log]}


class ServeModelDevice(ModelDevice):
    """Service times from the cycle model."""

    name = "model"

    def __init__(self, clock: ClockMap, sp: ServeScenarioParams, p):
        super().__init__(clock)
        self.sp, self.p = sp, p

    def serve(self, request, start_cycle):
        cyc = model_cycles(self.sp, self.p, request["shape"])
        return cyc, {"shape": request["shape"], "cycles": cyc}


def run_model(sp: ServeScenarioParams) -> dict:
    p, _, _ = make_engine(sp)
    scn = ServeScenario(sp, p)
    dev = ServeModelDevice(scn.clock, sp, p)
    t0 = time.perf_counter()
    run_sync(co_simulate(scn, dev))
    out = scn.result()
    out["wall_s"] = time.perf_counter() - t0
    return out


def save_evidence(run_dir, device: str) -> None:
    """Seal the run folder the serving testbench filled (``hwcosim check``): every simulated batch's
    inputs (``xs``, one row per vector / activation column; ``batch_rows``) and golden words
    (``expected``) in ``arrays.npz``, the RTL's words (``rtl``) in ``outputs.npz``. The design is the
    engine (``bbs-spmxv`` or ``fss-gemm``): a batch is one engine run, and the rows of different
    batches are independent, so the engine's recheck re-verifies them all in one call."""
    from hwcosim.cosim.flow.runs import read_npz, seal, word_diff

    d = Path(run_dir)
    diff = None
    if (d / "outputs.npz").is_file():
        diff = word_diff(read_npz(d / "outputs.npz")["rtl"], read_npz(d / "arrays.npz")["expected"])
    seal(d, "bbs-spmxv" if device == "bbs" else "fss-gemm", diff)


def run_rtl(sp: ServeScenarioParams, *, sim: str | None = None, test_dir=None) -> dict:
    """The serving stream with the engine's RTL under cocotb as the device; the run folder keeps every
    simulated batch's inputs, RTL words and golden words (:func:`save_evidence`)."""
    from hwcosim.cosim.flow import runner

    p, values, indices = make_engine(sp)
    if sp.device == "bbs":
        from hwcosim.hdl.bbs import SpMxV

        design, top = SpMxV(p), "bbs_spmxv"
    else:
        from hwcosim.hdl.fss import FSSGemm

        design, top = FSSGemm(p), "fss_gemm"
    t0 = time.perf_counter()
    res = runner.run(design, top, "hwcosim.cosim.designs.fss.tb_bridge",
                     inputs={"scenario": sp.to_dict(), "params": p.to_dict()},
                     arrays={"values": values, "indices": indices}, test_dir=test_dir, sim=sim, raise_on_fail=False)
    save_evidence(res.test_dir, sp.device)
    runner.check(res, top)
    out = dict(res.metrics["result"])
    out["wall_total_s"] = time.perf_counter() - t0
    out["checks"] = {"word_for_word": res.metrics["check"], "rebuilt": res.rebuilt, "simulator": res.sim}
    return out


def _rows(m: dict, r: dict | None):
    rr = r or {}
    keys = (("batches", "batches"), ("mean_batch", "mean batch (requests)"), ("busy_cycles", "device busy cycles"),
            ("mean_latency_us", "mean latency us"), ("p50_latency_us", "p50 latency us"),
            ("p99_latency_us", "p99 latency us"), ("slo_attainment", "SLO attainment"),
            ("throughput_req_per_s", "throughput req/s"))
    rows = [("requests / offered rate per s", f"{m['requests']} / {m['rate_per_s']:.4g}",
             f"{rr['requests']} / {rr['rate_per_s']:.4g}" if rr else None),
            ("planned batch per bucket", str(m["plan"]), str(rr.get("plan")) if rr else None)]
    rows += [(label, m[k], rr.get(k)) for k, label in keys]
    if rr:
        diffs = [b for b in rr["batch_cycles"] if b[4] != b[5]]
        rows.append(("RTL batches with cycles != cycle model", 0, len(diffs)))
        rows.append(("shapes simulated on the RTL (cache misses)", "-", rr.get("shapes_simulated")))
    return rows


NOTES = [
    "Time base: engine clock f_clk; a batch dispatched at t starts at cycle ceil(t*f_clk); its service time is the "
    "RTL's measured cycles (first input beat to last result beat) or the cycle model's expected count.",
    "Cache per shape: the engine's cycle count depends only on the batch shape, so each shape is simulated once "
    "(its results compared word for word with the golden model) and repeated shapes reuse the count.",
    "With free-flowing streams (p_stall=0) the cycle models are exact for these engines (tests/test_bbs_spmxv_sim, "
    "tests/test_fss_gemm_sim), so both runs give identical latencies; with output stalls the RTL is slower.",
]


def run_bridge(sp: ServeScenarioParams, *, model_only: bool = False, sim: str | None = None, test_dir=None):
    return compare(f"serve_{sp.device}", sp.to_dict(), lambda: run_model(sp),
                   None if model_only else (lambda: run_rtl(sp, sim=sim, test_dir=test_dir)), _rows, NOTES)
