"""GoldMiner: stateless/stateful separation, data workers, back-pressure, exactly-once, autoscaling."""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest
from hwcosim.models.systems.elastic.goldminer import (
    Autoscaler,
    ClusterConfig,
    DataWorkerPool,
    Pipeline,
    augment_digit,
    is_stateless,
    simulate_cluster,
    stateful,
)

COUNTER = 0


def square(x):
    return x * x


def plus_one(x):
    return x + 1


def bump_global(x):
    global COUNTER
    COUNTER += 1
    return x


def slow_square(x):
    time.sleep(0.002)
    return x * x


def test_classification():
    buf = []

    def uses_buffer(x):
        buf.append(x)
        return x

    class Shuffler:
        def __init__(self):
            self.state = []

        def __call__(self, x):
            return x

    rng = np.random.default_rng(0)

    def uses_rng(x):
        return x + rng.random()

    scale = 3.0

    def pure_closure(x):
        return x * scale

    assert is_stateless(square) and is_stateless(pure_closure) and is_stateless(np.sqrt)
    assert is_stateless(augment_digit)
    assert not is_stateless(uses_buffer)
    assert not is_stateless(Shuffler())
    assert not is_stateless(uses_rng)
    assert not is_stateless(bump_global)
    assert is_stateless(functools.partial(plus_one))
    assert not is_stateless(functools.partial(plus_one, []))
    assert not is_stateless(stateful(lambda x: x * x))
    p = Pipeline([square, plus_one, uses_buffer, square])
    off, loc = p.split()
    assert off == [square, plus_one] and loc == [uses_buffer, square]
    with pytest.raises(ValueError):
        Pipeline([])


def test_exactly_once_in_order_with_backpressure_and_resizing():
    seen = []

    def record(x):
        seen.append(x)
        return x

    pipe = Pipeline([slow_square, plus_one, record])
    n = 300
    with DataWorkerPool(pipe, workers=1, max_workers=3, max_inflight=8) as pool:
        out = []
        for k, y in enumerate(pool.imap(range(n))):
            out.append(y)
            if k == 50:
                pool.resize(3)
            if k == 150:
                pool.resize(1)
            assert pool.sent - pool.delivered <= 8
        assert pool.max_seen_inflight <= 8
        assert pool.workers == 1
    assert out == [i * i + 1 for i in range(n)]
    assert seen == out  # the stateful stage ran in the trainer, once per sample, in order


def test_autoscaler_scales_out_when_trainer_starves():
    pipe = Pipeline([slow_square])
    with DataWorkerPool(pipe, workers=1, max_workers=2, max_inflight=4) as pool:
        out = list(pool.imap(range(120), Autoscaler(window=8, max_workers=2)))
        assert any(w == 2 for _, w in pool.history)
    assert out == [i * i for i in range(120)]


def test_autoscaler_rules():
    a = Autoscaler(window=2, up=0.1, down=0.01, max_workers=3)
    assert a.observe(1.0, 0.1, 1) == 1
    assert a.observe(1.0, 0.1, 1) == 2  # starving -> scale out
    a.observe(0.0, 1.0, 2)
    assert a.observe(0.0, 1.0, 2) == 1  # never waits -> scale in


def test_augmentation_identical_on_workers():
    from sklearn.datasets import load_digits

    imgs = load_digits().images[:12]
    pipe = Pipeline([augment_digit])
    ref = list(pipe.run_inline(enumerate(imgs)))
    with DataWorkerPool(pipe, workers=2, max_workers=2) as pool:
        out = list(pool.imap(enumerate(imgs)))
    assert [i for i, _ in out] == list(range(12))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(out, ref))
    assert out[0][1].shape == (32, 32)


def test_cluster_sim():
    c = ClusterConfig(jobs=60, seed=0)
    s, e = simulate_cluster(c, "static"), simulate_cluster(c, "elastic")
    assert e["mean_jct_s"] < s["mean_jct_s"]
    assert e["gpu_util_allocated"] > s["gpu_util_allocated"]
    assert 0 < s["gpu_util_allocated"] <= 1 + 1e-9 and 0 < e["gpu_util_allocated"] <= 1 + 1e-9
    assert simulate_cluster(c, "static") == s
    with pytest.raises(ValueError):
        simulate_cluster(c, "dynamic")


def fails_on_seven(x):
    if x == 7:
        raise ValueError("bad sample")
    return x


def test_stage_error_reported_not_hung():
    with DataWorkerPool(Pipeline([fails_on_seven]), workers=1, max_workers=1, stall_timeout_s=30) as pool:
        with pytest.raises(RuntimeError, match="sample 7"):
            list(pool.imap(range(20)))


def test_dask_backend_exactly_once_and_resize():
    pytest.importorskip("distributed")
    from hwcosim.models.systems.elastic.goldminer import DaskDataWorkers, data_workers

    seen = []

    def record(x):
        seen.append(x)
        return x

    pipe = Pipeline([square, plus_one, record])
    with DaskDataWorkers(pipe, workers=1, max_workers=2, max_inflight=6) as pool:
        out = []
        for k, y in enumerate(pool.imap(range(80))):
            out.append(y)
            assert pool.sent - pool.delivered <= 6
            if k == 20:
                pool.resize(2)
    assert out == [i * i + 1 for i in range(80)] and seen == out
    with pytest.raises(ValueError):
        data_workers(pipe, backend="spark")


# -- the Alibaba GPU trace 2023 study ------------------------------------------------------------------
def test_trace_sim_static_reproduces_durations_elastic_feeds_starved():
    from hwcosim.models.systems.elastic.goldminer import simulate_trace

    arr = np.array([0.0, 0.0])
    gpus = np.array([1, 1])
    need = np.array([8.0, 2.0])
    req = np.array([4.0, 4.0])  # job 0 starved (half its need), job 1 over-provisioned
    dur = np.array([1000.0, 1000.0])
    work = dur * np.minimum(1, req / need)
    st = simulate_trace(arr, gpus, need, work, req, 2, 64.0, "static")
    el = simulate_trace(arr, gpus, need, work, req, 2, 64.0, "elastic")
    assert st["mean_jct_s"] == pytest.approx(1000.0)  # the trace's durations, as run
    assert el["mean_jct_s"] == pytest.approx(750.0)  # job 0 fed: 500 s
    assert el["gpu_util_allocated"] == pytest.approx(1.0) and st["gpu_util_allocated"] < 1
    assert el["cpu_held"] < st["cpu_held"]  # the over-request is returned to the pool
    small = simulate_trace(arr, gpus, need, work, req, 2, 5.0, "elastic")  # pool binds: water-filled
    assert small["mean_jct_s"] > el["mean_jct_s"]
    with pytest.raises(ValueError):
        simulate_trace(arr, gpus, need, work, req, 2, 64.0, "greedy")


def test_measured_pipelines_and_jpeg_transform():
    from hwcosim.models.systems.elastic.goldminer import _jpeg_samples, jpeg_train_transform, measure_pipelines

    item = _jpeg_samples(1)[0]
    i, a = jpeg_train_transform(item)
    assert a.shape == (3, 224, 224) and a.dtype == np.float32
    assert np.array_equal(a, jpeg_train_transform(item)[1])  # deterministic: stateless
    m = measure_pipelines(n=2, reps=1)
    c = m["cpu_s_per_sample"]
    assert set(c) == {"digits-augment", "jpeg-imagenet", "text-tokenise"} and all(v > 0 for v in c.values())
    assert len(m["load_average"]) == 3


def test_trace_jobs(shared_data):
    from hwcosim.models.systems.elastic.goldminer import trace_jobs

    tr = trace_jobs(fraction=0.01, n=50)
    assert tr["tasks_in_trace"] == 3986 and len(tr["gpus"]) == 50
    assert tr["cluster_gpus"] > 0 and tr["cluster_cores"] > tr["cluster_gpus"]
    assert np.all(tr["req_cores"] > 0)
