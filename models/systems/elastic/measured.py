"""ElasticBatch's latency predictor checked against measured timings it was not fitted to.

The MIG study (:mod:`hwcosim.models.systems.elastic.elasticbatch`) fits :class:`LatencyPredictor` to points of the
analytical :class:`MigInstance` model, the same formula that then plays the cluster, so its
accuracy there says little. Here the devices are real computations timed on this machine:

- :class:`NumpyLSTMDevice`: the project's numpy LSTM (:class:`hwcosim.models.nn.lstm.LSTMClassifier`), a
  request being a sequence of ``input_size`` steps, a batch of ``b`` requests one forward pass of
  shape ``(b, input_size, features)``;
- :class:`NumpyEncoderDevice`: one transformer-encoder layer in numpy (multi-head self-attention
  + feed-forward, float32), a request being ``input_size`` tokens: its cost has the quadratic
  attention term the predictor's ``b * s^2`` feature is for.

:func:`validate` profiles a device at a few (batch, size) points, fits the predictor there, then
measures every batch 1-64 at sizes that include ones not profiled, and reports the prediction
error on the points the fit never saw. A latency is the minimum over ``reps`` timed runs after
one warm-up run, in CPU time of the process with BLAS on one thread (a single-threaded device):
on this shared machine the wall time mostly measures the other tenants.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .elasticbatch import LatencyPredictor

__all__ = ["NumpyLSTMDevice", "NumpyEncoderDevice", "validate", "run_study"]


def _timed(fn, reps: int) -> float:
    """Minimum over ``reps`` runs of the CPU time of ``fn`` with BLAS on one thread.

    CPU time, not wall time: on a machine shared with other tenants the wall time of a run
    measures the time slices they take (load averages of 5-9 on 2 cores were seen during the
    study); the CPU time of a single-threaded run is the device's own work.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        fn()  # warm-up (allocation, caches)
        best = np.inf
        for _ in range(reps):
            t0 = time.process_time()
            fn()
            best = min(best, time.process_time() - t0)
    return float(best)


@dataclass
class NumpyLSTMDevice:
    """The numpy LSTM as a serving device (measured wall time per batch)."""

    hidden: int = 128
    features: int = 32
    reps: int = 5
    capacity: float = 64 * 256
    name: str = "numpy-lstm"
    _model: object = field(default=None, repr=False)

    def __post_init__(self):
        from hwcosim.models.nn.lstm import LSTMClassifier, LSTMConfig

        self._model = LSTMClassifier(LSTMConfig(input_size=self.features, hidden=self.hidden, classes=10,
                                                dtype="float32"), seed=0)

    def latency(self, batch: int, input_size: int) -> float:
        x = np.random.default_rng(0).standard_normal((int(batch), int(input_size), self.features)).astype(np.float32)
        return _timed(lambda: self._model.forward(x), self.reps)


@dataclass
class NumpyEncoderDevice:
    """One transformer-encoder layer (float32 numpy) as a serving device."""

    d_model: int = 256
    heads: int = 4
    ffn: int = 1024
    reps: int = 5
    capacity: float = 64 * 256
    name: str = "numpy-encoder"
    _w: dict = field(default=None, repr=False)

    def __post_init__(self):
        rng = np.random.default_rng(0)
        d, f = self.d_model, self.ffn
        s = 1 / np.sqrt(d)
        self._w = {k: (rng.standard_normal(shape) * s).astype(np.float32)
                   for k, shape in (("qkv", (d, 3 * d)), ("o", (d, d)), ("f1", (d, f)), ("f2", (f, d)))}

    def forward(self, x: np.ndarray) -> np.ndarray:
        b, n, d = x.shape
        h, w = self.heads, self._w
        qkv = (x.reshape(b * n, d) @ w["qkv"]).reshape(b, n, 3, h, d // h)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        a = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d // h))
        a = np.exp(a - a.max(axis=-1, keepdims=True))
        a /= a.sum(axis=-1, keepdims=True)
        o = (a @ v).transpose(0, 2, 1, 3).reshape(b * n, d) @ w["o"]
        y = x.reshape(b * n, d) + o
        z = np.maximum(y @ w["f1"], 0) @ w["f2"]
        return (y + z).reshape(b, n, d)

    def latency(self, batch: int, input_size: int) -> float:
        x = np.random.default_rng(0).standard_normal((int(batch), int(input_size), self.d_model)).astype(np.float32)
        return _timed(lambda: self.forward(x), self.reps)


def validate(dev, fit_batches=(1, 8, 32), fit_sizes=(16, 64, 256), test_batches=None, test_sizes=(24, 64, 200),
             seed: int = 0) -> dict:
    """Fit the predictor on ``fit_batches x fit_sizes`` measured points, then measure every test
    point and report the relative error on the points not used for the fit."""
    test_batches = tuple(range(1, 65)) if test_batches is None else tuple(test_batches)
    pred = LatencyPredictor(noise=0.0, reps=1, seed=seed)
    pred.profile(dev, fit_batches, fit_sizes)
    fitted = {(b, s) for b in fit_batches for s in fit_sizes}
    rows = []
    for s in test_sizes:
        for b in test_batches:
            if b * s > dev.capacity:
                continue
            meas = dev.latency(b, s)
            p = float(pred.predict(dev, b, s)[0])
            rows.append({"batch": b, "size": s, "measured_s": meas, "predicted_s": p, "rel_err": p / meas - 1,
                         "held_out": (b, s) not in fitted})
    held = np.array([abs(r["rel_err"]) for r in rows if r["held_out"]])
    return {"device": dev.name, "fit_points": sorted(fitted), "profile_time_s": pred.profile_time_s,
            "coef": dict(zip(("b*s", "b*s^2", "b", "s", "1"), pred.models[dev.name].coef_.tolist())),
            "rows": rows, "held_out_points": int(held.size),
            "abs_rel_err": {"mean": float(held.mean()), "median": float(np.median(held)),
                            "p90": float(np.percentile(held, 90)), "max": float(held.max())}}


def run_study(quick: bool = False, seed: int = 0) -> dict:
    """Both numpy devices; quick: fewer batch sizes and repeats."""
    reps = 2 if quick else 5
    tb = (1, 2, 3, 5, 12, 24, 48, 64) if quick else None
    import os

    devs = [NumpyLSTMDevice(reps=reps), NumpyEncoderDevice(reps=reps)]
    load0 = os.getloadavg()[0]
    out = [validate(d, test_batches=tb, seed=seed) for d in devs]
    return {"devices": out, "load_average": [load0, os.getloadavg()[0]], "cpus": os.cpu_count(),
            "note": "CPU time (process_time) with BLAS on one thread, minimum of the repeats; the load "
                    "average shows how shared the machine was"}
