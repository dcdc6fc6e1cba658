"""Compile a user's trained network onto the BBS engines: ``hwcosim.compile(model, target="bbs", ...)``.

A first vertical slice of issue 41 (``docs/compile.md`` says exactly what it supports):

- the network is read by :mod:`hwcosim.pruning.frontends` (ONNX, or ``.npz`` + TOML) into a chain
  of layers;
- every dense layer (``Gemm``, ``MatMul``) goes to the BBS SpMxV engine
  (:class:`hwcosim.models.bbs.spmxv.BBSParams`), pruned bank-balanced at ``sparsity`` (0: dense on
  the same engine, ``k`` = bank size); every LSTM to the BBS LSTM layer
  (:class:`hwcosim.models.bbs.lstm.LSTMParams`), pruned on the engine's interleaved banks;
- bias adds, activations, reshapes and the final softmax run on the host: bias, ReLU and the
  requantisation between layers in the fixed point of the layers around them; sigmoid and tanh
  with the engine's PLAN approximations (:func:`hwcosim.models.bbs.lstm.plan_sigmoid`); the
  softmax in float64 on the dequantised fixed-point logits (deterministic; not an engine op);
- every layer's fixed-point formats are chosen from the calibration inputs (a float pass of the
  pruned network, with headroom :data:`HEADROOM`); the words that saturate on the calibration
  data are counted and reported per layer.

:meth:`CompiledModel.predict` is the bit-exact golden model of the compiled accelerator (the
engines' golden models chained with the host ops); :meth:`CompiledModel.simulate` runs every
engine layer's RTL (cocotb + Verilator) on the very words ``predict`` feeds it and compares
every output word with ``predict``'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hwcosim.models.bbs.lstm import (
    LSTMCycleModel,
    LSTMParams,
    LSTMWeights,
    bbs_mask,
    column_perm,
    lstm_golden,
    plan_sigmoid,
    plan_tanh,
    prepare_weights,
)
from hwcosim.models.bbs.spmxv import BBSParams, CycleModel, spmxv
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.fixedpoint import Q, dequantize, quantize, requantize, saturate
from hwcosim.pruning.frontends import Layer, Network, read_model

__all__ = ["compile_model", "CompiledModel", "HEADROOM", "TARGETS"]

TARGETS = ("bbs",)
#: Formats hold ``HEADROOM`` x the largest magnitude seen on the calibration data.
HEADROOM = 1.25
#: Bits of weights, of vectors between layers (engine inputs) and of engine results.
WEIGHT_BITS, VEC_BITS, OUT_BITS = 8, 16, 16
#: Host sigmoid/tanh output format: Q(2, ACT_FRAC) (PLAN approximations, max error ~0.019 / 0.038).
ACT_FRAC = 12


def _fit(max_abs: float, width: int, min_frac: int = 0) -> Q:
    q = Q.fitting(max(float(max_abs), 2.0 ** -(width - 2)) * HEADROOM, width)
    return q if q.frac_bits >= min_frac else Q(q.int_bits, min_frac)


def _requant(raw: np.ndarray, src_frac: int, fmt: Q) -> tuple[np.ndarray, int]:
    """:func:`requantize` plus the count of values it saturated."""
    raw = np.asarray(raw, dtype=np.int64)
    out = requantize(raw, src_frac, fmt)
    shift = src_frac - fmt.frac_bits
    pre = (raw + (1 << (shift - 1))) >> shift if shift > 0 else raw << max(0, -shift)
    return out, int(((pre < fmt.min_raw) | (pre > fmt.max_raw)).sum())


def _reshape(a: np.ndarray, lay: Layer) -> np.ndarray:
    if lay.kind == "flatten":
        ax = lay.attrs["axis"]
        return a.reshape(int(np.prod(a.shape[:ax], dtype=np.int64)), -1)
    shape = [a.shape[i] if s == 0 else s for i, s in enumerate(lay.attrs["shape"])]
    try:
        return a.reshape(shape)
    except ValueError:
        raise UsageError(f"Reshape {lay.name!r}: cannot reshape {list(a.shape)} to {lay.attrs['shape']}; "
                         "check the input's shape") from None


def _sigmoid(z):
    return 0.5 * (np.tanh(0.5 * z) + 1.0)


def _softmax(z, lay: Layer | None = None):
    ax = -1 if lay is None else lay.attrs.get("axis", -1)
    if ax not in (-1, z.ndim - 1):
        raise UsageError(f"Softmax {lay.name!r} on axis {ax} of a {z.ndim}-D tensor; only the last axis is supported")
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@dataclass
class Stage:
    """One engine layer of a compiled model."""

    index: int
    layer: Layer
    engine: str                         # "bbs-spmxv" | "bbs-lstm"
    params: BBSParams | LSTMParams
    w_pruned: np.ndarray                # logical float weights after pruning (out, in) / (4H, I+H)
    b: np.ndarray | None
    values: np.ndarray | None = None    # spmxv CSB (rows_p, k, banks)
    indices: np.ndarray | None = None
    bias_raw: np.ndarray | None = None  # spmxv: bias in out_fmt (out,)
    lstm_w: LSTMWeights | None = None
    hidden_p: int = 0                   # LSTM: hidden units after padding
    info: dict = field(default_factory=dict)

    @property
    def in_fmt(self) -> Q:
        return self.params.vec_fmt

    @property
    def out_fmt(self) -> Q:
        return self.params.out_fmt if self.engine == "bbs-spmxv" else self.params.vec_fmt


class CompiledModel:
    """A network compiled onto the BBS engines (build it with :func:`compile_model`).

    Attributes
    ----------
    network : Network
        The layer IR the front end read.
    stages : list of Stage
        The engine layers, in order, with their parameters, quantised weights and formats.
    input_fmt : Q
        The format the input is quantised to (the first engine layer's vector format).
    """

    def __init__(self, network: Network, stages: list[Stage], sparsity: float, seq_len: int | None):
        self.network = network
        self.stages = stages
        self.sparsity = sparsity
        self.seq_len = seq_len
        self._by_layer = {id(s.layer): s for s in stages}
        self._report: dict | None = None

    @property
    def input_fmt(self) -> Q:
        return self.stages[0].in_fmt

    # -- golden model of the accelerator -------------------------------------------------------
    def predict(self, x) -> np.ndarray:
        """The bit-exact golden model of the compiled accelerator on float inputs ``x`` (the model's
        input shape); returns the float output (dequantised, or the softmax of the fixed-point logits)."""
        return self._run(x)[0]

    def saturations(self, x) -> list[int]:
        """Per engine layer, the words that saturate on inputs ``x`` (the input's quantisation counts
        in the first layer; LSTM cell: words at the rails of the cell format, an upper bound)."""
        return [s["saturated"] for s in self._run(x, trace=True)[2]]

    def _check_input(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if not np.isfinite(x).all():
            raise UsageError("the inputs hold NaN/inf values; clean them first")
        first = self.network.layers[0]
        if first.kind == "lstm":
            if x.ndim != 3 or x.shape[2] != first.attrs["input_size"]:
                want = "(T, N, I)" if first.attrs["layout"] == "tni" else "(N, T, I)"
                raise UsageError(f"inputs of shape {list(x.shape)}; this model takes {want} with "
                                 f"I = {first.attrs['input_size']}")
        elif first.kind == "dense" and x.shape[-1] != first.w.shape[1]:
            raise UsageError(f"inputs of shape {list(x.shape)}; this model takes (..., {first.w.shape[1]})")
        return x

    def _run(self, x, trace: bool = False):
        """Fixed-point pass: (output, per-stage engine words [(in, out)], per-stage stats); the words and
        the saturation counts only with ``trace``."""
        x = self._check_input(x)
        fmt = self.input_fmt
        a = quantize(x, fmt)
        sat_in = int((np.abs(x) > fmt.max_value + fmt.lsb / 2).sum())
        words, stats = [], []
        out_float = None
        for lay in self.network.layers:
            st = self._by_layer.get(id(lay))
            if st is not None:
                a, fmt, w, s = self._engine(st, a, fmt, trace)
                if st.index == 0:
                    s["saturated"] += sat_in
                words.append(w)
                stats.append(s)
            elif lay.kind == "relu":
                a = np.maximum(a, 0)
            elif lay.kind in ("sigmoid", "tanh"):
                src = fmt
                if src.frac_bits < 4:  # PLAN needs >= 3 (sigmoid) / 4 (tanh) fractional bits: exact shift up
                    a, src = a << (4 - src.frac_bits), Q(src.int_bits, 4)
                f = plan_sigmoid if lay.kind == "sigmoid" else plan_tanh
                a, fmt = f(a, src.frac_bits, ACT_FRAC), Q(2, ACT_FRAC)
            elif lay.kind in ("flatten", "reshape"):
                a = _reshape(a, lay)
            elif lay.kind == "softmax":
                out_float = _softmax(dequantize(a, fmt), lay)
        return (dequantize(a, fmt) if out_float is None else out_float), words, stats

    def _engine(self, st: Stage, a: np.ndarray, fmt: Q, trace: bool):
        p = st.params
        a, n_sat = _requant(a, fmt.frac_bits, st.in_fmt)
        if st.engine == "bbs-spmxv":
            lead = a.shape[:-1]
            xb = a.reshape(-1, a.shape[-1])
            xp = np.zeros((xb.shape[0], p.cols), dtype=np.int64)
            xp[:, :xb.shape[1]] = xb
            y = spmxv(p, st.values, st.indices, xp)
            words = (xp, y) if trace else None
            out = st.layer.w.shape[0]
            # saturations of the engine's own requantisation: the exact sums, rounded, out of range
            s_eng = _requant(xp @ _dense_raw(st).T, p.acc_frac, p.out_fmt)[1] if trace else 0
            z = y[:, :out]
            if st.bias_raw is not None:
                pre = z + st.bias_raw
                z = saturate(pre, p.out_fmt)
                s_eng += int((pre != z).sum())
            return z.reshape(*lead, out), p.out_fmt, words, {"saturated": n_sat + s_eng}
        # LSTM
        tni = st.layer.attrs["layout"] == "tni"
        xs = a.transpose(1, 0, 2) if tni else a
        if xs.shape[2] < p.input_size:
            xs = np.concatenate([xs, np.zeros((*xs.shape[:2], p.input_size - xs.shape[2]), np.int64)], axis=2)
        h, s_lstm = _lstm_traced(p, st.lstm_w, xs) if trace else (lstm_golden(p, st.lstm_w, xs)[0], 0)
        words = (xs, h) if trace else None
        H = st.layer.attrs["hidden"]
        last = h[:, -1, :H]
        return (last[None] if tni else last), p.vec_fmt, words, {"saturated": n_sat + s_lstm}

    # -- float references --------------------------------------------------------------------
    def predict_float(self, x, pruned: bool = True) -> np.ndarray:
        """Float64 reference of the network with exact activations: with the pruned weights (the
        quantisation error is ``predict - predict_float``) or, ``pruned=False``, the original ones."""
        a = self._check_input(x)
        for lay in self.network.layers:
            st = self._by_layer.get(id(lay))
            if lay.kind == "dense":
                w = st.w_pruned if pruned else lay.w
                a = a @ w.T + (0 if lay.b is None else lay.b)
            elif lay.kind == "lstm":
                w = st.w_pruned if pruned else lay.w
                tni = lay.attrs["layout"] == "tni"
                last = _lstm_float_stats(w, lay.b, a.transpose(1, 0, 2) if tni else a)[0][:, -1]
                a = last[None] if tni else last
            else:
                a = _float_host_op(lay, a)
        return a

    # -- RTL ---------------------------------------------------------------------------------
    def simulate(self, x, *, out: str | os.PathLike | None = None, sim: str | None = None) -> dict:
        """Run every engine layer's RTL on the words :meth:`predict` feeds it; compare every word.

        Returns per layer the words compared and the measured cycles (with the cycle model's
        expected and ideal counts). Raises :class:`hwcosim.CheckFailed` naming the first layer,
        input, row and word where the RTL differs from ``predict``.
        """
        from hwcosim.cosim.designs.bbs.lstm import run_lstm
        from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
        from hwcosim.cosim.flow.runner import SimFailure, build_root

        _, words, _ = self._run(x, trace=True)
        if out is None:
            import tempfile

            root = build_root() / "compile-sim"
            root.mkdir(parents=True, exist_ok=True)
            out = tempfile.mkdtemp(prefix="run-", dir=root)
        out = Path(out)
        layers = []
        for st, (xin, want) in zip(self.stages, words):
            tdir = out / f"{st.index:02d}-{_safe(st.layer.name)}"
            where = f"layer {st.index} ({st.layer.name!r}, {st.engine})"
            failure = None
            if st.engine == "bbs-spmxv":
                res = run_spmxv(st.params, st.values, st.indices, xin, test_dir=tdir, sim=sim, raise_on_fail=False)
                f = tdir / "outputs.npz"
                got = np.load(f)["rtl"] if f.exists() else None
                if not res.passed:
                    failure = f"the testbench failed (log {res.log})"
                metrics = res.metrics
            else:
                try:
                    res = run_lstm(st.params, st.lstm_w, xin, test_dir=tdir, sim=sim)
                    metrics = res.metrics
                except SimFailure:
                    mf = tdir / "metrics.json"
                    metrics = json.loads(mf.read_text()) if mf.exists() else {}
                    failure = f"the testbench failed (log {tdir / 'sim.log'})"
                got = np.asarray(metrics["h_rtl"], dtype=np.int64) if "h_rtl" in metrics else None
            if got is None:
                why = failure or f"see {tdir}"
                raise CheckFailed(f"{where}: the RTL simulation produced no output words; {why}")
            _compare(where, got, want, st.engine)   # the words first: a mismatch is the most useful message
            if failure:
                raise CheckFailed(f"{where}: every word equals predict but {failure}")
            layers.append({"layer": st.index, "name": st.layer.name, "engine": st.engine, "words": int(want.size),
                           "cycles": metrics.get("cycles"), "expected": metrics.get("expected"),
                           "ideal": metrics.get("ideal"), "run_dir": str(tdir)})
        return {"ok": True, "layers": layers, "words": sum(d["words"] for d in layers)}

    # -- report and output ---------------------------------------------------------------------
    def report(self) -> dict:
        """Per layer: shape, engine, pattern and sparsity, formats, padding, saturations and error vs
        float on the calibration data, expected and ideal cycles per inference (a JSON-ready copy)."""
        return json.loads(json.dumps(self._report))

    def save(self, out: str | os.PathLike) -> Path:
        """Write ``out/``: each engine layer's quantised weights (``layerNN-NAME.npz``: CSB values and
        indices, bias, parameters), ``report.json`` and ``manifest.json`` (sha256 of each file),
        all at once (:func:`hwcosim.models.atomic.staged_dir`)."""
        from hwcosim.models.atomic import staged_dir

        with staged_dir(out) as st_dir:
            files = {}
            for st in self.stages:
                name = f"layer{st.index:02d}-{_safe(st.layer.name)}.npz"
                if st.engine == "bbs-spmxv":
                    arrays = {"values": st.values, "indices": st.indices}
                    if st.bias_raw is not None:
                        arrays["bias"] = st.bias_raw
                else:
                    arrays = {"values": st.lstm_w.values, "indices": st.lstm_w.indices, "bias": st.lstm_w.bias}
                arrays["params"] = np.frombuffer(json.dumps(st.params.to_dict()).encode(), dtype=np.uint8)
                np.savez(st_dir / name, **arrays)
                files[name] = _sha256(st_dir / name)
            (st_dir / "report.json").write_text(json.dumps(self._report, indent=1))
            files["report.json"] = _sha256(st_dir / "report.json")
            manifest = {"kind": "hwcosim-compiled-model", "target": "bbs", "files": files}
            (st_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
        return Path(out)


def _compare(where: str, got: np.ndarray, want: np.ndarray, engine: str) -> None:
    want = np.asarray(want)
    if got.size != want.size:
        raise CheckFailed(f"{where}: the RTL gave {got.size} words, predict {want.size}")
    got = got.reshape(want.shape)
    bad = np.argwhere(got != want)
    if len(bad):
        i = tuple(int(v) for v in bad[0])
        pos = (f"input {i[0]}, row {i[1]}" if engine == "bbs-spmxv"
               else f"sequence {i[0]}, step {i[1]}, unit {i[2]}")
        raise CheckFailed(f"{where}: {len(bad)} of {want.size} words differ from predict; first at {pos}: "
                          f"RTL {int(got[i])} != golden {int(want[i])}")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or "layer"


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _dense_raw(st: Stage) -> np.ndarray:
    """The CSB weights of a SpMxV stage as a dense raw matrix (rows_p, cols_p)."""
    if "dense_raw" not in st.info:
        p = st.params
        d = np.zeros((p.rows, p.banks, p.bank_size), dtype=np.int64)
        r = np.arange(p.rows)[:, None, None]
        b = np.arange(p.banks)[None, None, :]
        np.add.at(d, (np.broadcast_to(r, st.indices.shape), np.broadcast_to(b, st.indices.shape), st.indices),
                  st.values)
        st.info["dense_raw"] = d.reshape(p.rows, p.cols)
    return st.info["dense_raw"]


def _lstm_traced(p: LSTMParams, wts: LSTMWeights, xs: np.ndarray) -> tuple[np.ndarray, int]:
    """:func:`lstm_golden` (its h), and the count of gate words saturated in ``gate_fmt`` and cell
    words at the rails of ``cell_fmt`` (an upper bound on the cell's saturations).

    The hidden states are :func:`lstm_golden`'s own; the step loop here only counts."""
    h, c = lstm_golden(p, wts, xs)
    n, T, H = h.shape
    sat = int(((c == p.cell_fmt.min_raw) | (c == p.cell_fmt.max_raw)).sum())
    # gate pre-activations: the exact sums, recomputed from the golden h, against gate_fmt
    d = np.zeros((p.rows, p.banks, p.bank_size), dtype=np.int64)
    r = np.arange(p.rows)[:, None, None]
    b = np.arange(p.banks)[None, None, :]
    np.add.at(d, (np.broadcast_to(r, wts.indices.shape), np.broadcast_to(b, wts.indices.shape), wts.indices),
              wts.values)
    dense = d.reshape(p.rows, p.cols)
    cperm = column_perm(p)
    bb = p.bbs
    for t in range(T):
        v = np.zeros((n, p.cols), dtype=np.int64)
        v[:, :p.input_size] = xs[:, t]
        v[:, p.x_pad:] = h[:, t - 1] if t else 0
        acc = v[:, cperm] @ dense.T
        y, s1 = _requant(acc, bb.acc_frac, p.gate_fmt)
        pre = y + wts.bias
        sat += s1 + int(((pre < p.gate_fmt.min_raw) | (pre > p.gate_fmt.max_raw)).sum())
    return h, sat


def _lstm_float_stats(w: np.ndarray, b: np.ndarray, xs: np.ndarray):
    """Float LSTM (gates i, f, g, o): h (N, T, H), max |gate pre-activation|, max |c|."""
    n, T, _ = xs.shape
    H = w.shape[0] // 4
    h = np.zeros((n, H))
    c = np.zeros((n, H))
    hs = np.empty((n, T, H))
    zmax = cmax = 0.0
    for t in range(T):
        z = np.concatenate([xs[:, t], h], axis=1) @ w.T + b
        zmax = max(zmax, float(np.abs(z).max(initial=0)))
        i, f, g, o = _sigmoid(z[:, :H]), _sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), _sigmoid(z[:, 3 * H:])
        c = f * c + i * g
        cmax = max(cmax, float(np.abs(c).max(initial=0)))
        h = o * np.tanh(c)
        hs[:, t] = h
    return hs, zmax, cmax


# -- the compiler ------------------------------------------------------------------------------

def _keep(bank_size: int, sparsity: float) -> int:
    """Weights kept per bank: the fewest that keep at least ``1 - sparsity`` of it (and at least one)."""
    return max(1, int(np.ceil(bank_size * (1 - sparsity) - 1e-9)))


def _pad_lstm(w: np.ndarray, b: np.ndarray, I: int, H: int, Ip: int, Hp: int) -> tuple[np.ndarray, np.ndarray]:
    """Fused (4H, I+H) -> (4Hp, Ip+Hp): zero input columns (the host feeds them zeros) and zero units.
    A zero unit's gates are 0, so its c and h stay 0 in float and in the engine's fixed point (PLAN
    sigmoid(0) = 1/2, tanh(0) = 0); its column of the recurrent matrix is zero too."""
    wp = np.zeros((4 * Hp, Ip + Hp))
    bp = np.zeros(4 * Hp)
    for q in range(4):
        wp[q * Hp:q * Hp + H, :I] = w[q * H:(q + 1) * H, :I]
        wp[q * Hp:q * Hp + H, Ip:Ip + H] = w[q * H:(q + 1) * H, I:]
        bp[q * Hp:q * Hp + H] = b[q * H:(q + 1) * H]
    return wp, bp


def compile_model(model, target: str = "bbs", sparsity: float = 0.0, calibration=None, *,
                  banks: int = 4, pes: int = 4, description=None) -> CompiledModel:
    """Compile ``model`` onto the BBS engines.

    Parameters
    ----------
    model : path or onnx.ModelProto or Network
        An ``.onnx`` file (or a loaded model), or an ``.npz`` weight bundle with its TOML layer
        description (``description``, default the ``.toml`` beside it).
    target : str
        ``"bbs"`` (the only target of this slice).
    sparsity : float
        Bank-balanced sparsity of every engine layer in [0, 1); 0 = dense on the same engine.
    calibration : array
        Representative inputs in the model's input shape; the formats are chosen so that they do
        not saturate (the report counts any that still do).
    banks, pes : int
        Engine banks (multipliers per PE) and PEs; LSTM layers need ``pes`` a multiple of 4.

    Returns
    -------
    CompiledModel
    """
    if target not in TARGETS:
        raise UsageError(f"target {target!r} is not supported yet; this compiler maps to: {', '.join(TARGETS)} "
                         "(fss is planned)")
    try:
        sparsity = float(sparsity)
    except (TypeError, ValueError):
        raise UsageError(f"sparsity must be a number in [0, 1), not {sparsity!r}") from None
    if not 0.0 <= sparsity < 1.0:
        raise UsageError(f"sparsity must lie in [0, 1), not {sparsity}")
    for name, v in (("banks", banks), ("pes", pes)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise UsageError(f"{name} must be a positive integer, not {v!r}")
    net = read_model(model, description)
    if calibration is None:
        raise UsageError("compile needs calibration inputs (a few representative inputs in the model's input "
                         "shape) to choose the fixed-point formats; pass calibration=X")
    stages: list[Stage] = []
    for i, lay in enumerate(net.engine_layers):
        stages.append(_prune_stage(i, lay, sparsity, banks, pes))
    m = CompiledModel(net, stages, sparsity, None)
    xcal = m._check_input(calibration)
    if net.layers[0].kind == "lstm":
        m.seq_len = int(xcal.shape[0] if net.layers[0].attrs["layout"] == "tni" else xcal.shape[1])
    _choose_formats(m, xcal)
    m._report = _make_report(m, xcal, target)
    return m


def _prune_stage(i: int, lay: Layer, sparsity: float, banks: int, pes: int) -> Stage:
    from hwcosim.pruning.prune_api import prune

    if lay.kind == "dense":
        out_f, in_f = lay.w.shape
        rows = -(-out_f // pes) * pes
        cols = -(-in_f // banks) * banks
        if cols // banks < 2:
            raise UsageError(f"layer {lay.name!r}: {in_f} inputs over {banks} banks leave banks of 1 column; "
                             "pass fewer banks")
        wpad = np.zeros((rows, cols))
        wpad[:out_f, :in_f] = lay.w
        k = _keep(cols // banks, sparsity)
        pr = prune(wpad, pattern="bbs", banks=banks, sparsity=1 - k / (cols // banks))
        wfmt = Q.fitting(max(float(np.abs(pr.weights).max(initial=0)), 2.0 ** -6), WEIGHT_BITS)
        csb = pr.encode(wfmt)
        p = BBSParams(rows=rows, cols=cols, banks=banks, k=csb.values.shape[1], pes=pes, weight_fmt=wfmt)
        return Stage(i, lay, "bbs-spmxv", p, pr.weights[:out_f, :in_f], lay.b, values=csb.values,
                     indices=csb.indices, info={"pad_rows": rows - out_f, "pad_cols": cols - in_f})
    I, H = lay.attrs["input_size"], lay.attrs["hidden"]
    if pes % 4:
        raise UsageError(f"layer {lay.name!r}: the LSTM engine needs pes a multiple of 4, not {pes}")
    unit = int(np.lcm(banks, pes // 4))
    Hp = -(-H // unit) * unit
    # the input is padded here to whole banks (the engine's own x_pad would leave zero columns that
    # the bank-balanced mask cannot count as kept weights)
    Ip = -(-I // banks) * banks
    w, b = _pad_lstm(lay.w, lay.b, I, H, Ip, Hp)
    p0 = LSTMParams(input_size=Ip, hidden=Hp, banks=banks, k=1, pes=pes)
    k = _keep(p0.bank_size, sparsity)
    p0 = LSTMParams(input_size=Ip, hidden=Hp, banks=banks, k=k, pes=pes)
    mask = bbs_mask(p0, w, 1 - k / p0.bank_size)
    wm = np.where(mask, w, 0.0)
    wfmt = Q.fitting(max(float(np.abs(wm).max(initial=0)), 2.0 ** -6), WEIGHT_BITS)
    p0 = LSTMParams(input_size=Ip, hidden=Hp, banks=banks, k=k, pes=pes, weight_fmt=wfmt)
    st = Stage(i, lay, "bbs-lstm", p0, _unpad_lstm(wm, I, H, Ip, Hp), lay.b, hidden_p=Hp,
               info={"pad_hidden": Hp - H, "pad_input": Ip - I, "mask": mask, "w_padded": w, "b_padded": b})
    return st


def _unpad_lstm(wp: np.ndarray, I: int, H: int, Ip: int, Hp: int) -> np.ndarray:
    w = np.zeros((4 * H, I + H))
    for q in range(4):
        w[q * H:(q + 1) * H, :I] = wp[q * Hp:q * Hp + H, :I]
        w[q * H:(q + 1) * H, I:] = wp[q * Hp:q * Hp + H, Ip:Ip + H]
    return w


def _choose_formats(m: CompiledModel, xcal: np.ndarray) -> None:
    """A float pass of the pruned network on the calibration data; each stage's formats from it."""
    a = xcal
    for lay in m.network.layers:
        st = m._by_layer.get(id(lay))
        if lay.kind == "dense":
            vmax = float(np.abs(a).max(initial=0))
            pre = a @ st.w_pruned.T
            post = pre + (0 if lay.b is None else lay.b)
            omax = max(float(np.abs(pre).max(initial=0)), float(np.abs(post).max(initial=0)))
            p = st.params
            st.params = BBSParams(rows=p.rows, cols=p.cols, banks=p.banks, k=p.k, pes=p.pes, weight_fmt=p.weight_fmt,
                                  vec_fmt=_fit(vmax, VEC_BITS), out_fmt=_fit(omax, OUT_BITS))
            if lay.b is not None:
                st.bias_raw = quantize(lay.b, st.params.out_fmt)
            a = post
        elif lay.kind == "lstm":
            tni = lay.attrs["layout"] == "tni"
            xs = a.transpose(1, 0, 2) if tni else a
            hs, zmax, cmax = _lstm_float_stats(st.w_pruned, lay.b, xs)
            vmax = max(float(np.abs(xs).max(initial=0)), 1.0)
            p = st.params
            st.params = LSTMParams(input_size=p.input_size, hidden=p.hidden, banks=p.banks, k=p.k, pes=p.pes,
                                   weight_fmt=p.weight_fmt, vec_fmt=_fit(vmax, VEC_BITS),
                                   gate_fmt=_fit(zmax, OUT_BITS, 4), cell_fmt=_fit(max(cmax, 1.0), OUT_BITS, 4))
            st.lstm_w = prepare_weights(st.params, st.info["w_padded"], st.info["b_padded"], st.info["mask"])
            last = hs[:, -1]
            a = last[None] if tni else last
        else:
            a = _float_host_op(lay, a)


def _float_host_op(lay, a: np.ndarray) -> np.ndarray:
    """A host layer (activation, reshape, softmax) in float, as the float reference and the format fit run it."""
    if lay.kind == "relu":
        return np.maximum(a, 0.0)
    if lay.kind == "sigmoid":
        return _sigmoid(a)
    if lay.kind == "tanh":
        return np.tanh(a)
    if lay.kind in ("flatten", "reshape"):
        return _reshape(a, lay)
    if lay.kind == "softmax":
        return _softmax(a, lay)
    raise ValueError(f"no float host op for layer kind {lay.kind!r}")  # the front end admits no other kind


def _make_report(m: CompiledModel, xcal: np.ndarray, target: str) -> dict:
    _, words, stats = m._run(xcal, trace=True)
    # error vs float at each engine layer's output (after the bias), on the calibration data
    errs = _layer_errors(m, xcal, words)
    out_q = m.predict(xcal)
    out_f = m.predict_float(xcal, pruned=True)
    out_d = m.predict_float(xcal, pruned=False)
    layers = []
    cycles = ideal = 0
    for st, s, e in zip(m.stages, stats, errs):
        p = st.params
        d = {"index": st.index, "name": st.layer.name, "engine": st.engine, "params": p.to_dict()}
        if st.engine == "bbs-spmxv":
            cm = CycleModel(p)
            d.update(shape=list(st.layer.w.shape), padded_shape=[p.rows, p.cols],
                     pad_rows=st.info["pad_rows"], pad_cols=st.info["pad_cols"],
                     formats={"weight": str(p.weight_fmt), "input": str(p.vec_fmt), "output": str(p.out_fmt)},
                     cycles_expected=cm.expected(1), cycles_ideal=cm.ideal(1), cycles_per="input vector")
        else:
            cm = LSTMCycleModel(p)
            T = m.seq_len
            d.update(shape=list(st.layer.w.shape), padded_shape=[p.rows, p.cols],
                     pad_hidden=st.info["pad_hidden"], pad_input=st.info["pad_input"],
                     formats={"weight": str(p.weight_fmt), "input_and_h": str(p.vec_fmt), "gates": str(p.gate_fmt),
                              "cell": str(p.cell_fmt), "activations": str(p.act_fmt)},
                     cycles_expected=cm.expected(1, T), cycles_ideal=cm.ideal(1, T),
                     cycles_per=f"sequence of {T} steps")
        cycles += d["cycles_expected"]
        ideal += d["cycles_ideal"]
        d.update(pattern="bbs (bank-balanced)", banks=p.banks, k=p.k, bank_size=p.bank_size,
                 sparsity=float(1 - p.k / p.bank_size),
                 kept_weights_sparsity=float(1 - np.count_nonzero(st.w_pruned) / st.w_pruned.size),
                 saturated_words=s["saturated"], max_abs_err_vs_float=e)
        layers.append(d)
    return {"target": target, "source": m.network.source, "sparsity": m.sparsity,
            "calibration_inputs": list(xcal.shape), "input_format": str(m.input_fmt),
            "host_ops": [lay.kind for lay in m.network.layers if lay.kind not in ("dense", "lstm")],
            "layers": layers, "cycles_expected": cycles, "cycles_ideal": ideal,
            "output_max_abs_err_vs_float_pruned": float(np.abs(out_q - out_f).max(initial=0)),
            "output_max_abs_err_vs_float_dense": float(np.abs(out_q - out_d).max(initial=0)),
            "notes": ["cycles: the cycle models per inference (batch 1, streams that never stall), engine layers "
                      "only; host ops and weight loading are not counted",
                      "saturated_words: words that saturated on the calibration data (LSTM cell: words at "
                      "the rails of the cell format, an upper bound)",
                      "softmax runs in float64 on the host, on the dequantised fixed-point logits"]}


def _layer_errors(m: CompiledModel, xcal: np.ndarray, words) -> list[float]:
    """Max |golden - float| at each engine layer's output, the float pass fed the golden's own input."""
    errs = []
    for st, (xin, yout) in zip(m.stages, words):
        p = st.params
        if st.engine == "bbs-spmxv":
            xf = dequantize(xin, p.vec_fmt)[:, :st.layer.w.shape[1]]
            yf = xf @ st.w_pruned.T
            yq = dequantize(yout, p.out_fmt)[:, :st.layer.w.shape[0]]
        else:
            H = st.layer.attrs["hidden"]
            xf = dequantize(xin, p.vec_fmt)[:, :, :st.layer.attrs["input_size"]]
            yf = _lstm_float_stats(st.w_pruned, st.layer.b, xf)[0]
            yq = dequantize(yout, p.vec_fmt)[:, :, :H]
        if st.engine == "bbs-spmxv" and st.layer.b is not None:
            yf = yf + st.layer.b
            yq = dequantize(saturate(yout[:, :st.layer.w.shape[0]] + st.bias_raw, p.out_fmt), p.out_fmt)
        errs.append(float(np.abs(yq - yf).max(initial=0)))
    return errs
