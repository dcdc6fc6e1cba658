"""Compile a user's trained network onto the BBS or FSS engines: ``hwcosim.compile(model, target=..., ...)``.

Issue 41 (``docs/compile.md`` says exactly what it supports; :mod:`hwcosim.cosim.compile_run` is the
library of ``hwcosim compile`` and ``hwcosim run``):

- the network is read by :mod:`hwcosim.pruning.frontends` (ONNX, or ``.npz`` + TOML) into a chain
  of layers;
- every dense layer (``Gemm``, ``MatMul``) goes to the BBS SpMxV engine
  (:class:`hwcosim.models.bbs.spmxv.BBSParams`), pruned bank-balanced at ``sparsity`` (0: dense on
  the same engine, ``k`` = bank size); every LSTM to the BBS LSTM layer
  (:class:`hwcosim.models.bbs.lstm.LSTMParams`), pruned on the engine's interleaved banks;
- with ``target="fss"``, every dense layer and every convolution (as an im2col GEMM) goes to the FSS
  GEMM engine (:class:`hwcosim.models.fss.gemm.FSSParams`), ``n`` weights kept in every region;
  max and average pooling run on the host on the fixed-point words;
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

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hwcosim.cosim.compile_board import keep_count
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
from hwcosim.models.fss.gemm import CycleModel as FSSCycleModel
from hwcosim.models.fss.gemm import FSSParams, gemm, regions_to_dense
from hwcosim.models.safeparse import read_json
from hwcosim.pruning.frontends import ENGINE_KINDS, Layer, Network, read_model
from hwcosim.pruning.oneshot import METHODS

__all__ = ["compile_model", "CompiledModel", "load_compiled", "compile_bert", "CompiledBert",
           "HEADROOM", "TARGETS", "engine_config", "engine_stem"]

TARGETS = ("bbs", "fss")
#: The sparsity pattern of each target's engines.
PATTERNS = {"bbs": "bbs", "fss": "fss"}
#: The layer kinds each target maps onto an engine.
TARGET_KINDS = {"bbs": ("dense", "lstm"), "fss": ("dense", "conv")}
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
    engine: str                         # "bbs-spmxv" | "bbs-lstm" | "fss-gemm"
    params: BBSParams | LSTMParams | FSSParams
    w_pruned: np.ndarray                # logical float weights after pruning (out, in) / (4H, I+H)
    b: np.ndarray | None
    values: np.ndarray | None = None    # spmxv CSB (rows_p, k, banks); fss (rows_p / r_h, cols_p / r_w, n)
    indices: np.ndarray | None = None
    bias_raw: np.ndarray | None = None  # spmxv, fss: bias in out_fmt (out,)
    lstm_w: LSTMWeights | None = None
    hidden_p: int = 0                   # LSTM: hidden units after padding
    info: dict = field(default_factory=dict)

    @property
    def in_fmt(self) -> Q:
        return self.params.act_fmt if self.engine == "fss-gemm" else self.params.vec_fmt

    @property
    def out_fmt(self) -> Q:
        return self.params.vec_fmt if self.engine == "bbs-lstm" else self.params.out_fmt


class CompiledModel:
    """A network compiled onto the BBS or FSS engines (build it with :func:`compile_model`, read a saved
    one with :meth:`load`).

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
        self.target = "bbs"
        self.options: dict = {}
        self.calibration: np.ndarray | None = None
        self.folder: Path | None = None   # the folder it was loaded from
        self.host_fmts: dict[int, Q] = {}  # residual adds: layer position -> the format of the sum

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
        elif first.kind == "conv":
            c, (kh, kw), pads = first.attrs["channels"], first.attrs["kernel"], first.attrs["pads"]
            if (x.ndim != 4 or x.shape[1] != c or x.shape[2] + pads[0] + pads[2] < kh
                    or x.shape[3] + pads[1] + pads[3] < kw):
                raise UsageError(f"inputs of shape {list(x.shape)}; this model takes (N, {c}, H, W) images of at "
                                 f"least {kh} x {kw}")
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
        slots: dict[str, tuple[np.ndarray, Q]] = {}
        for pos, lay in enumerate(self.network.layers):
            st = self._by_layer.get(id(lay))
            if lay.kind == "skip":
                slots[lay.attrs["slot"]] = (a, fmt)
            elif lay.kind == "add":
                a, fmt = _add_raw(lay, a, fmt, *slots.pop(lay.attrs["slot"]), self.host_fmts[pos])
            elif st is not None:
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
            elif lay.kind in ("maxpool", "avgpool"):
                a = pool_raw(a, lay)
            elif lay.kind == "softmax":
                out_float = _softmax(dequantize(a, fmt), lay)
        return (dequantize(a, fmt) if out_float is None else out_float), words, stats

    @staticmethod
    def _engine(st: Stage, a: np.ndarray, fmt: Q, trace: bool):
        """One engine layer's golden model on raw words ``a`` in ``fmt``: (out words, out format,
        (in, out) engine words with ``trace``, {"saturated": n})."""
        p = st.params
        a, n_sat = _requant(a, fmt.frac_bits, st.in_fmt)
        if st.engine == "fss-gemm":
            return CompiledModel._fss(st, a, trace, n_sat)
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

    @staticmethod
    def _fss(st: Stage, a: np.ndarray, trace: bool, n_sat: int):
        """A dense or conv layer on the FSS GEMM: Y = W @ X, X (cols, T) the inputs as columns (a conv:
        its im2col patches), T padded to a multiple of ``pe_cols`` with zero columns."""
        p = st.params
        lay = st.layer
        out_n, in_n = lay.w.shape
        if lay.kind == "conv":
            cols, shape = im2col(a, lay)
        else:
            shape = a.shape[:-1]
            cols = a.reshape(-1, in_n).T
        t = cols.shape[1]
        xp = np.zeros((p.max_cols, -(-t // p.pe_cols) * p.pe_cols), dtype=np.int64)
        xp[:in_n, :t] = cols
        y = gemm(p, st.values, st.indices, xp)
        words = (xp, y) if trace else None
        s_eng = _requant(_fss_dense_raw(st) @ xp, p.acc_frac, p.out_fmt)[1] if trace else 0
        z = y[:out_n, :t].T
        if st.bias_raw is not None:
            pre = z + st.bias_raw
            z = saturate(pre, p.out_fmt)
            s_eng += int((pre != z).sum())
        if lay.kind == "conv":
            n, oh, ow = shape
            z = z.reshape(n, oh, ow, out_n).transpose(0, 3, 1, 2)
        else:
            z = z.reshape(*shape, out_n)
        return z, p.out_fmt, words, {"saturated": n_sat + s_eng}

    # -- float references --------------------------------------------------------------------
    def predict_float(self, x, pruned: bool = True) -> np.ndarray:
        """Float64 reference of the network with exact activations: with the pruned weights (the
        quantisation error is ``predict - predict_float``) or, ``pruned=False``, the original ones."""
        a = self._check_input(x)
        slots: dict[str, np.ndarray] = {}
        for lay in self.network.layers:
            st = self._by_layer.get(id(lay))
            if lay.kind == "skip":
                slots[lay.attrs["slot"]] = a
            elif lay.kind == "add":
                a = _add_float(lay, a, slots.pop(lay.attrs["slot"]))
            elif lay.kind == "dense":
                w = st.w_pruned if pruned else lay.w
                a = a @ w.T + (0 if lay.b is None else lay.b)
            elif lay.kind == "conv":
                a = conv_float(a, st.w_pruned if pruned else lay.w, lay)
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
        from hwcosim.cosim.flow.runner import build_root

        _, words, _ = self._run(x, trace=True)
        if out is None:
            import tempfile

            root = build_root() / "compile-sim"
            root.mkdir(parents=True, exist_ok=True)
            out = tempfile.mkdtemp(prefix="run-", dir=root)
        out = Path(out)
        layers = [simulate_stage(st, xin, want, out / f"{st.index:02d}-{_safe(st.layer.name)}", sim)
                  for st, (xin, want) in zip(self.stages, words)]
        return {"ok": True, "layers": layers, "words": sum(d["words"] for d in layers)}

    # -- on a board ----------------------------------------------------------------------------
    def build(self, board: str = "ulx3s-85f", ooc: bool = True, out=None, **kw) -> list[dict]:
        """Build this model's ONE combined board top (:func:`hwcosim.cosim.compile_board.build_compiled`: every
        distinct engine configuration behind one UART bridge): ``ooc=True``, nextpnr out of context on the
        board's part; ``ooc=False``, a bitstream. ``combined=False``: each engine configuration on its own
        (OOC: the measured Fmax ``hwcosim run`` reads from ``build/pnr/<engine stem>/build.json``).
        ``dry_run=True`` returns the plan only."""
        from hwcosim.cosim.compile_board import build_compiled

        return build_compiled(self.stages, engine_stem, board, ooc, out, **kw)

    def run_on_board(self, port: str | None, x, *, baud: int = 115200, out: str | os.PathLike | None = None,
                     sim: str | None = None) -> dict:
        """Load every engine layer's weights over the UART bridge protocol and run ``x`` through it, layer by
        layer, on the words :meth:`predict` feeds that layer; compare every output word with ``predict``'s.
        ``port=None``: the same host session against each layer's board top RTL (cocotb, a bit-level UART
        model; run folders under ``out``). Raises :class:`hwcosim.CheckFailed` naming the first differing
        layer, row and word (:func:`hwcosim.cosim.compile_board.board_sessions`: every layer on the model's
        one combined board top, in one session)."""
        from hwcosim.cosim.compile_board import board_sessions

        _, words, _ = self._run(x, trace=True)
        if out is None and port is None:
            import tempfile

            from hwcosim.cosim.flow.runner import build_root

            root = build_root() / "compile-board"
            root.mkdir(parents=True, exist_ok=True)
            out = tempfile.mkdtemp(prefix="run-", dir=root)
        layers = []
        runs = board_sessions(self.stages, [xin for xin, _ in words], port, baud=baud, out=out, sim=sim)
        for st, (_, want), (got, cycles, failure, run_dir) in zip(self.stages, words, runs):
            where = f"layer {st.index} ({st.layer.name!r}, {st.engine})"
            if got is None:
                raise CheckFailed(f"{where}: the board session produced no output words; {failure}")
            _compare(where, np.asarray(got, dtype=np.int64).reshape(want.shape), want, st.engine)
            if failure:
                raise CheckFailed(f"{where}: every word equals predict but {failure}")
            layers.append({"layer": st.index, "name": st.layer.name, "engine": st.engine, "words": int(want.size),
                           "run_cycles": cycles, "run_dir": None if run_dir is None else str(run_dir)})
        return {"ok": True, "layers": layers, "words": sum(d["words"] for d in layers),
                "where": f"{port} at {baud} baud" if port else "RTL through a UART model"}

    # -- report and output ---------------------------------------------------------------------
    def report(self) -> dict:
        """Per layer: shape, engine, pattern and sparsity, formats, padding, saturations and error vs
        float on the calibration data, expected and ideal cycles per inference (a JSON-ready copy)."""
        return json.loads(json.dumps(self._report))

    def save(self, out: str | os.PathLike) -> Path:
        """Write ``out/`` all at once (:func:`hwcosim.models.atomic.staged_dir`): each engine layer's
        quantised weights (``layerNN-NAME.npz``: the engine's arrays, the pruned float weights and the
        parameters), the engine Verilog of every engine configuration (``engine-DESIGN-CONFIG.v``, with
        its parameters as ``engine-DESIGN-CONFIG.toml`` for ``hwcosim build DESIGN --ooc --params``),
        the float network (``network.json`` + ``network.npz``), the calibration inputs
        (``calibration.npy``), ``report.json`` and ``manifest.json`` (sha256 of every other file).
        :meth:`load` reads it back and checks every checksum."""
        from hwcosim.models.atomic import staged_dir

        with staged_dir(out) as st_dir:
            for st in self.stages:
                name = _layer_file(st)
                arrays = {"w_pruned": st.w_pruned}
                if st.engine == "bbs-lstm":
                    arrays.update(values=st.lstm_w.values, indices=st.lstm_w.indices, bias=st.lstm_w.bias,
                                  w_float=st.lstm_w.w_float, b_float=st.lstm_w.b_float)
                else:
                    arrays.update(values=st.values, indices=st.indices)
                    if st.bias_raw is not None:
                        arrays["bias"] = st.bias_raw
                arrays["params"] = np.frombuffer(json.dumps(st.params.to_dict()).encode(), dtype=np.uint8)
                np.savez(st_dir / name, **arrays)
            for st in self.stages:
                stem = engine_stem(st.engine, st.params)
                if not (st_dir / f"{stem}.v").exists():
                    (st_dir / f"{stem}.v").write_text(engine_verilog(st.engine, st.params))
                    (st_dir / f"{stem}.toml").write_text(params_toml(st.params))
            meta, arrays = _network_to_files(self.network)
            np.savez(st_dir / "network.npz", **arrays)
            (st_dir / "network.json").write_text(json.dumps(meta, indent=1))
            np.save(st_dir / "calibration.npy", self.calibration)
            (st_dir / "report.json").write_text(json.dumps(self._report, indent=1))
            files = {f.name: _sha256(f) for f in sorted(st_dir.iterdir()) if f.name != "manifest.json"}
            manifest = {"kind": MANIFEST_KIND, "version": 1, "target": self.target, "sparsity": self.sparsity,
                        "seq_len": self.seq_len, "options": self.options, "files": files}
            (st_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
        return Path(out)

    @classmethod
    def load(cls, folder: str | os.PathLike) -> CompiledModel:
        """The compiled model of a folder :meth:`save` wrote; its :meth:`predict` equals the saved
        model's bit for bit. Every file of the manifest is checked against its sha256 first: a missing
        or changed file is a :class:`hwcosim.UsageError` naming it."""
        folder = Path(folder)
        mf = folder / "manifest.json"
        if not mf.is_file():
            raise UsageError(f"{folder}: no manifest.json; give a folder written by hwcosim compile (or "
                             "CompiledModel.save)")
        man = read_json(mf, "manifest")  # one line naming the file for any bytes it holds
        if isinstance(man, dict) and man.get("kind") == BERT_MANIFEST_KIND:
            raise UsageError(f"{folder}: a compiled BERT encoder; hwcosim run takes ONNX/npz compilations only "
                             "(its report.json holds the sentence-embedding cosine to the float model)")
        if not isinstance(man, dict) or man.get("kind") != MANIFEST_KIND or not isinstance(man.get("files"), dict):
            raise UsageError(f"{mf}: not a compiled-model manifest; give a folder written by hwcosim compile")
        check_manifest_files(folder, man["files"])
        meta = read_json(folder / "network.json", "network description")
        with np.load(folder / "network.npz", allow_pickle=False) as z:
            net = _network_from_files(meta, dict(z))
        report = read_json(folder / "report.json", "report")
        engine_layers = net.engine_layers
        stages = []
        for d in report["layers"]:
            lay = engine_layers[d["index"]]
            with np.load(folder / _layer_file_name(d["index"], d["name"]), allow_pickle=False) as z:
                a = dict(z)
            pd = json.loads(a.pop("params").tobytes())
            stages.append(_stage_from_arrays(d["index"], lay, d["engine"], pd, a))
        m = cls(net, stages, float(man["sparsity"]), man.get("seq_len"))
        m.target = man["target"]
        m.options = dict(man.get("options", {}))
        m.calibration = np.load(folder / "calibration.npy", allow_pickle=False)
        m.host_fmts = {int(k): Q.parse(v) for k, v in report.get("host_formats", {}).items()}
        m._report = report
        m.folder = folder
        return m


def simulate_stage(st: Stage, xin: np.ndarray, want: np.ndarray, tdir: Path, sim: str | None = None) -> dict:
    """One engine layer's RTL (cocotb + Verilator, run folder ``tdir``) on its golden model's input words
    ``xin``; every output word compared with ``want`` (:class:`hwcosim.CheckFailed` naming the first
    differing row and word). Returns the layer's words compared, measured cycles and run folder."""
    from hwcosim.cosim.designs.bbs.lstm import run_lstm
    from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
    from hwcosim.cosim.designs.fss.gemm import run_gemm
    from hwcosim.cosim.flow.runner import SimFailure

    where = f"layer {st.index} ({st.layer.name!r}, {st.engine})"
    failure = None
    if st.engine in ("bbs-spmxv", "fss-gemm"):
        run = run_spmxv if st.engine == "bbs-spmxv" else run_gemm
        res = run(st.params, st.values, st.indices, xin, test_dir=tdir, sim=sim, raise_on_fail=False)
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
    return {"layer": st.index, "name": st.layer.name, "engine": st.engine, "words": int(want.size),
            "cycles": metrics.get("cycles"), "expected": metrics.get("expected"),
            "ideal": metrics.get("ideal"), "run_dir": str(tdir)}


def _compare(where: str, got: np.ndarray, want: np.ndarray, engine: str) -> None:
    want = np.asarray(want)
    if got.size != want.size:
        raise CheckFailed(f"{where}: the RTL gave {got.size} words, predict {want.size}")
    got = got.reshape(want.shape)
    bad = np.argwhere(got != want)
    if len(bad):
        i = tuple(int(v) for v in bad[0])
        pos = (f"input {i[0]}, row {i[1]}" if engine == "bbs-spmxv"
               else f"row {i[0]}, column {i[1]}" if engine == "fss-gemm"
               else f"sequence {i[0]}, step {i[1]}, unit {i[2]}")
        raise CheckFailed(f"{where}: {len(bad)} of {want.size} words differ from predict; first at {pos}: "
                          f"RTL {int(got[i])} != golden {int(want[i])}")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or "layer"


def check_manifest_files(folder: Path, files: dict) -> None:
    """Every file a compiled folder's manifest lists is there, directly in ``folder``, with its sha256;
    :class:`UsageError` naming the first missing or changed one."""
    for name, digest in files.items():
        f = folder / name
        if Path(name).name != name or not f.is_file():
            raise UsageError(f"{folder}: {name} is missing; recompile the model or restore the file")
        if _sha256(f) != digest:
            raise UsageError(f"{folder}: {name} changed since it was compiled (its sha256 differs from "
                             "manifest.json); recompile the model or restore the file")


def _sha256(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


MANIFEST_KIND = "hwcosim-compiled-model"


def _layer_file_name(index: int, name: str) -> str:
    return f"layer{index:02d}-{_safe(name)}.npz"


def _layer_file(st: Stage) -> str:
    return _layer_file_name(st.index, st.layer.name)


def engine_config(params) -> str:
    """A short, stable name of an engine parameter set (the first 8 hex digits of the sha256 of its
    parameters as JSON): the same configuration gets the same name in every compiled model."""
    text = json.dumps(params.to_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def engine_stem(engine: str, params) -> str:
    """``engine-DESIGN-CONFIG``: the file stem of an engine configuration's Verilog and parameters."""
    return f"engine-{engine}-{engine_config(params)}"


#: engine stem -> Verilog, generated once per process (elaboration is deterministic)
_VERILOG: dict[str, str] = {}


def engine_verilog(engine: str, params) -> str:
    """The Verilog of a registered engine at ``params`` (:meth:`hwcosim.DesignHandle.verilog`)."""
    stem = engine_stem(engine, params)
    if stem not in _VERILOG:
        from hwcosim.cosim.api import design

        _VERILOG[stem] = design(engine, params).verilog()
    return _VERILOG[stem]


def params_toml(params) -> str:
    """Every field of an engine parameter set as ``FIELD = VALUE`` TOML lines (formats as ``"Qm.n"``),
    the ``--params FILE`` of ``hwcosim build DESIGN --ooc``."""
    import dataclasses

    lines = []
    for f in dataclasses.fields(params):
        v = getattr(params, f.name)
        if isinstance(v, Q):
            lines.append(f'{f.name} = "{v}"')
        elif isinstance(v, bool):
            lines.append(f"{f.name} = {'true' if v else 'false'}")
        elif isinstance(v, int | float):
            lines.append(f"{f.name} = {v}")
        elif isinstance(v, tuple | list):
            lines.append(f"{f.name} = [{', '.join(str(int(x)) for x in v)}]")
        else:
            raise ValueError(f"no TOML form for parameter {f.name}={v!r}")
    return "\n".join(lines) + "\n"


def _network_to_files(net: Network) -> tuple[dict, dict]:
    meta = {"source": net.source, "input_name": net.input_name, "layers": []}
    arrays = {}
    for i, lay in enumerate(net.layers):
        meta["layers"].append({"kind": lay.kind, "name": lay.name, "attrs": lay.attrs,
                               "w": lay.w is not None, "b": lay.b is not None})
        if lay.w is not None:
            arrays[f"w{i}"] = lay.w
        if lay.b is not None:
            arrays[f"b{i}"] = lay.b
    return meta, arrays


def _network_from_files(meta: dict, arrays: dict) -> Network:
    layers = [Layer(d["kind"], d["name"], arrays[f"w{i}"] if d["w"] else None, arrays[f"b{i}"] if d["b"] else None,
                    dict(d["attrs"])) for i, d in enumerate(meta["layers"])]
    return Network(layers, meta["source"], meta.get("input_name", "x"))


def _stage_from_arrays(index: int, lay: Layer, engine: str, pd: dict, a: dict) -> Stage:
    if engine == "bbs-lstm":
        p = LSTMParams.from_dict(pd)
        w = LSTMWeights(a["values"], a["indices"], a["bias"], a["w_float"], a["b_float"])
        return Stage(index, lay, engine, p, a["w_pruned"], lay.b, lstm_w=w, hidden_p=p.hidden)
    p = FSSParams.from_dict(pd) if engine == "fss-gemm" else BBSParams.from_dict(pd)
    return Stage(index, lay, engine, p, a["w_pruned"], lay.b, values=a["values"], indices=a["indices"],
                 bias_raw=a.get("bias"))


# -- convolution and pooling (host side and float references) ----------------------------------

def _out_hw(h: int, w: int, lay: Layer, pads=(0, 0, 0, 0)) -> tuple[int, int]:
    (kh, kw), (sh, sw) = lay.attrs["kernel"], lay.attrs["strides"]
    return (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1


def _patches(a: np.ndarray, lay: Layer, pads) -> np.ndarray:
    """(N, C, H, W) -> windows (N, C, OH, OW, kh, kw) (zero padding ``pads`` = top, left, bottom, right)."""
    (kh, kw), (sh, sw) = lay.attrs["kernel"], lay.attrs["strides"]
    if any(pads):
        a = np.pad(a, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = np.lib.stride_tricks.sliding_window_view(a, (kh, kw), axis=(2, 3))
    return win[:, :, ::sh, ::sw]


def im2col(a: np.ndarray, lay: Layer) -> tuple[np.ndarray, tuple[int, int, int]]:
    """A conv layer's input (N, C, H, W) as the columns of the GEMM: (C*kh*kw, N*OH*OW), rows in the
    kernel's (channel, row, column) order, columns in (image, output row, output column) order; and
    (N, OH, OW)."""
    if a.ndim != 4 or a.shape[1] != lay.attrs["channels"]:
        raise UsageError(f"Conv {lay.name!r} takes (N, {lay.attrs['channels']}, H, W), not {list(a.shape)}")
    win = _patches(a, lay, lay.attrs["pads"])
    n, c, oh, ow, kh, kw = win.shape
    if oh < 1 or ow < 1:
        raise UsageError(f"Conv {lay.name!r}: a {a.shape[2]} x {a.shape[3]} input is smaller than its kernel")
    return win.transpose(1, 4, 5, 0, 2, 3).reshape(c * kh * kw, n * oh * ow), (n, oh, ow)


def conv_float(a: np.ndarray, w: np.ndarray, lay: Layer) -> np.ndarray:
    """Float conv (ONNX semantics, cross-correlation) with the (M, C*kh*kw) weights ``w``."""
    cols, (n, oh, ow) = im2col(np.asarray(a, dtype=np.float64), lay)
    y = (w @ cols).reshape(-1, n, oh, ow).transpose(1, 0, 2, 3)
    return y if lay.b is None else y + lay.b[None, :, None, None]


def _pool_windows(a: np.ndarray, lay: Layer) -> np.ndarray:
    if a.ndim != 4:
        raise UsageError(f"{lay.kind} {lay.name!r} takes (N, C, H, W), not {list(a.shape)}")
    kh, kw = lay.attrs["kernel"]
    if a.shape[2] < kh or a.shape[3] < kw:
        raise UsageError(f"{lay.kind} {lay.name!r}: a {a.shape[2]} x {a.shape[3]} input is smaller than its "
                         f"{kh} x {kw} window")
    win = _patches(a, lay, (0, 0, 0, 0))
    return win.reshape(*win.shape[:4], -1)


def pool_raw(a: np.ndarray, lay: Layer) -> np.ndarray:
    """Max or average pooling on raw fixed-point words, in their own format: the max exactly, the
    average rounded half up (``floor((2 sum + count) / (2 count))``)."""
    win = _pool_windows(np.asarray(a, dtype=np.int64), lay)
    if lay.kind == "maxpool":
        return win.max(axis=-1)
    cnt = win.shape[-1]
    return (2 * win.sum(axis=-1) + cnt) // (2 * cnt)


def pool_float(a: np.ndarray, lay: Layer) -> np.ndarray:
    win = _pool_windows(np.asarray(a, dtype=np.float64), lay)
    return win.max(axis=-1) if lay.kind == "maxpool" else win.mean(axis=-1)


def _add_float(lay: Layer, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.shape != b.shape:
        raise UsageError(f"residual Add {lay.name!r}: the branches have shapes {list(a.shape)} and {list(b.shape)}; "
                         "a residual block must keep the shape")
    return a + b


def _add_raw(lay: Layer, a: np.ndarray, fa: Q, b: np.ndarray, fb: Q, fmt: Q) -> tuple[np.ndarray, Q]:
    """A residual add on the host: both branches requantised to ``fmt`` (round half up, saturate), then
    added with saturation in ``fmt``."""
    _add_float(lay, a, b)
    return saturate(_requant(a, fa.frac_bits, fmt)[0] + _requant(b, fb.frac_bits, fmt)[0], fmt), fmt


def _fss_dense_raw(st: Stage) -> np.ndarray:
    """The FSS weights of a stage as a dense raw matrix (rows_p, cols_p)."""
    if "dense_raw" not in st.info:
        st.info["dense_raw"] = regions_to_dense(st.values, st.indices, st.params.region)
    return st.info["dense_raw"]


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

#: weights kept per bank: the fewest that keep at least ``1 - sparsity`` of it (and at least one)
_keep = keep_count


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


def _target_and_sparsity(target: str, sparsity) -> float:
    """``target`` checked against :data:`TARGETS` and ``sparsity`` as a float in [0, 1) (else UsageError)."""
    if target not in TARGETS:
        raise UsageError(f"target {target!r} is not supported; this compiler maps to: {', '.join(TARGETS)}")
    try:
        sparsity = float(sparsity)
    except (TypeError, ValueError):
        raise UsageError(f"sparsity must be a number in [0, 1), not {sparsity!r}") from None
    if not 0.0 <= sparsity < 1.0:
        raise UsageError(f"sparsity must lie in [0, 1), not {sparsity}")
    return sparsity


def compile_model(model, target: str = "bbs", sparsity: float = 0.0, calibration=None, *,
                  banks: int = 4, pes: int = 4, description=None, pattern: str | None = None,
                  method: str = "magnitude", region=(2, 8), pe_rows: int = 2, pe_cols: int = 2,
                  board: str | None = None) -> CompiledModel:
    """Compile ``model`` onto the BBS or FSS engines.

    Parameters
    ----------
    model : path or onnx.ModelProto or Network
        An ``.onnx`` file (or a loaded model), or an ``.npz`` weight bundle with its TOML layer
        description (``description``, default the ``.toml`` beside it).
    target : str
        ``"bbs"`` (dense layers on the BBS SpMxV, LSTMs on the BBS LSTM layer) or ``"fss"`` (dense
        layers and convolutions on the FSS GEMM).
    sparsity : float
        Bank-balanced sparsity of every engine layer in [0, 1); 0 = dense on the same engine.
    calibration : array
        Representative inputs in the model's input shape; the formats are chosen so that they do
        not saturate (the report counts any that still do).
    banks, pes : int
        Engine banks (multipliers per PE) and PEs; LSTM layers need ``pes`` a multiple of 4.
    pattern : str
        The sparsity pattern: the target's own (``"bbs"``, ``"fss"``); given for symmetry with
        ``hwcosim prune``.
    region, pe_rows, pe_cols
        FSS: the region ``(r_h, r_w)`` (or ``"2x8"``) and the PE array.
    method : str
        How weights are pruned: ``"magnitude"`` (the pattern's rule on ``|W|``), ``"wanda"`` or
        ``"obs"`` (:mod:`hwcosim.pruning.oneshot`, activation-aware: each engine layer is pruned from
        the float activations entering it on ``calibration``, the earlier layers already pruned; the
        BBS LSTM layer is always pruned by magnitude). The report names the method of each layer.
    board : str
        Size the engines to a board's part (``"ulx3s-85f"``; :mod:`hwcosim.cosim.compile_board`): each
        layer's banks and PEs (FSS: PE array) are chosen there instead of ``banks``/``pes``
        (``pe_rows``/``pe_cols``), the weights that do not fit the block RAM are reloaded per layer,
        and the report gains ``board`` (per layer: options, resource estimate vs the part, on chip or
        reloaded, cycles with the reloads). A model that cannot fit is a UsageError.

    Returns
    -------
    CompiledModel
        (:class:`CompiledBert` for a BERT-family checkpoint folder or ``.safetensors`` file, with
        ``calibration`` sentences: :func:`compile_bert`.)
    """
    from hwcosim.pruning.frontends_bert import is_bert_checkpoint

    sparsity = _target_and_sparsity(target, sparsity)
    if pattern is not None and pattern != PATTERNS[target]:
        raise UsageError(f"pattern {pattern!r} does not run on the {target} target; it takes --pattern "
                         f"{PATTERNS[target]}")
    if is_bert_checkpoint(model):
        if board is not None:
            raise UsageError("--board sizes ONNX and .npz models; a BERT checkpoint's encoder linears are compiled "
                             "without it")
        if description is not None:
            raise UsageError("a BERT checkpoint takes no --description (its config.json describes it)")
        return compile_bert(model, target, sparsity, calibration, method=method, banks=banks, pes=pes,
                            region=region, pe_rows=pe_rows, pe_cols=pe_cols)
    if method not in METHODS:
        raise UsageError(f"unknown pruning method {method!r}; choose one of: {', '.join(METHODS)}")
    if isinstance(region, str):
        try:
            region = tuple(int(v) for v in region.lower().split("x"))
        except ValueError:
            region = (region,)
    if (not isinstance(region, tuple | list) or len(region) != 2
            or not all(isinstance(v, int) and v >= 1 for v in region) or region[0] * region[1] < 2):
        raise UsageError(f"region must be RxC with at least 2 weights, e.g. 2x8, not {region!r}")
    region = (int(region[0]), int(region[1]))
    for name, v in (("banks", banks), ("pes", pes), ("pe_rows", pe_rows), ("pe_cols", pe_cols)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise UsageError(f"{name} must be a positive integer, not {v!r}")
    net = read_model(model, description)
    if calibration is None:
        raise UsageError("compile needs calibration inputs (a few representative inputs in the model's input "
                         "shape) to choose the fixed-point formats; pass calibration=X")
    for lay in net.engine_layers:
        if lay.kind not in TARGET_KINDS[target]:
            other = [t for t in TARGETS if lay.kind in TARGET_KINDS[t]]
            raise UsageError(f"layer {lay.name!r} ({lay.kind}) cannot map to the {target} target; "
                             f"compile it with --target {' or '.join(other)}")
    xcal = CompiledModel(net, [], sparsity, None)._check_input(calibration)
    plan = None
    per_layer: dict[int, dict] = {}
    if board is not None:
        from hwcosim.cosim.compile_board import PNR_ROOT, plan_board

        plan = plan_board(net, target, sparsity, board, region, roots=[PNR_ROOT])
        per_layer = {d["index"]: d["options"] for d in plan["layers"]}

    def prune_one(i: int, lay: Layer, X: np.ndarray | None) -> Stage:
        o = per_layer.get(i, {})
        if target == "fss":
            return _prune_fss(i, lay, sparsity, region, o.get("pe_rows", pe_rows), o.get("pe_cols", pe_cols),
                              method, X)
        return _prune_stage(i, lay, sparsity, o.get("banks", banks), o.get("pes", pes), method, X)

    if method == "magnitude":
        stages = [prune_one(i, lay, None) for i, lay in enumerate(net.engine_layers)]
    else:
        stages = _prune_sequential(net, xcal, prune_one)
    m = CompiledModel(net, stages, sparsity, None)
    m.target = target
    m.options = ({"region": list(region), "pe_rows": pe_rows, "pe_cols": pe_cols} if target == "fss"
                 else {"banks": banks, "pes": pes})
    m.options.update(pattern=PATTERNS[target], method=method)
    m.calibration = xcal
    if net.layers[0].kind == "lstm":
        m.seq_len = int(xcal.shape[0] if net.layers[0].attrs["layout"] == "tni" else xcal.shape[1])
    _choose_formats(m, xcal)
    m._report = _make_report(m, xcal, target)
    if plan is not None:
        from hwcosim.cosim.compile_board import board_report

        m.options["board"] = plan["board"]
        board_report(m, plan)
    return m


def _prune_sequential(net: Network, xcal: np.ndarray, prune_one) -> list[Stage]:
    """Activation-aware pruning, layer by layer in network order (as SparseGPT prunes a model): each
    engine layer is pruned from the float activations entering it (a dense layer: its input rows; a
    conv: its im2col patches), computed on the calibration inputs with the earlier layers already
    pruned (OBS: and updated)."""
    stages: list[Stage] = []
    a = xcal
    slots: dict[str, np.ndarray] = {}
    for lay in net.layers:
        if lay.kind == "skip":
            slots[lay.attrs["slot"]] = a
        elif lay.kind == "add":
            a = _add_float(lay, a, slots.pop(lay.attrs["slot"]))
        elif lay.kind == "dense":
            st = prune_one(len(stages), lay, a.reshape(-1, a.shape[-1]))
            stages.append(st)
            a = a @ st.w_pruned.T + (0 if lay.b is None else lay.b)
        elif lay.kind == "conv":
            st = prune_one(len(stages), lay, im2col(a, lay)[0].T)
            stages.append(st)
            a = conv_float(a, st.w_pruned, lay)
        elif lay.kind == "lstm":
            st = prune_one(len(stages), lay, None)
            stages.append(st)
            tni = lay.attrs["layout"] == "tni"
            last = _lstm_float_stats(st.w_pruned, lay.b, a.transpose(1, 0, 2) if tni else a)[0][:, -1]
            a = last[None] if tni else last
        else:
            a = _float_host_op(lay, a)
    return stages


def _pad_calib(X: np.ndarray | None, cols: int) -> np.ndarray | None:
    """Calibration rows (tokens, in) padded with zero columns to the engine's padded width (zero
    inputs: OBS treats them as dead channels, Wanda scores their weights 0)."""
    if X is None:
        return None
    Xp = np.zeros((X.shape[0], cols))
    Xp[:, :X.shape[1]] = X
    return Xp


def _prune_stage(i: int, lay: Layer, sparsity: float, banks: int, pes: int, method: str = "magnitude",
                 X: np.ndarray | None = None) -> Stage:
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
        pr = prune(wpad, pattern="bbs", banks=banks, sparsity=1 - k / (cols // banks), method=method,
                   calibration=_pad_calib(X, cols))
        wfmt = Q.fitting(max(float(np.abs(pr.weights).max(initial=0)), 2.0 ** -6), WEIGHT_BITS)
        csb = pr.encode(wfmt)
        p = BBSParams(rows=rows, cols=cols, banks=banks, k=csb.values.shape[1], pes=pes, weight_fmt=wfmt)
        return Stage(i, lay, "bbs-spmxv", p, pr.weights[:out_f, :in_f], lay.b, values=csb.values,
                     indices=csb.indices, info={"pad_rows": rows - out_f, "pad_cols": cols - in_f, "method": method})
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
    # the LSTM engine's interleaved banks are pruned by magnitude whatever the method (the report says so)
    st = Stage(i, lay, "bbs-lstm", p0, _unpad_lstm(wm, I, H, Ip, Hp), lay.b, hidden_p=Hp,
               info={"pad_hidden": Hp - H, "pad_input": Ip - I, "mask": mask, "w_padded": w, "b_padded": b,
                     "method": "magnitude" if method == "magnitude" else
                     f"magnitude (method {method} is not implemented for the BBS LSTM layer)"})
    return st


def _prune_fss(i: int, lay: Layer, sparsity: float, region: tuple[int, int], pe_rows: int, pe_cols: int,
               method: str = "magnitude", X: np.ndarray | None = None) -> Stage:
    """A dense or conv layer (``w`` (out, in)) on the FSS GEMM, pruned with ``n`` of every region's
    ``r_h * r_w`` weights kept (the fewest that are at least ``1 - sparsity`` of it)."""
    from hwcosim.pruning.prune_api import prune

    out_f, in_f = lay.w.shape
    rh, rw = region
    rows = -(-out_f // (rh * pe_rows)) * rh * pe_rows
    cols = -(-in_f // rw) * rw
    wpad = np.zeros((rows, cols))
    wpad[:out_f, :in_f] = lay.w
    n = _keep(rh * rw, sparsity)
    pr = prune(wpad, pattern="fss", region=region, n=n, method=method, calibration=_pad_calib(X, cols))
    wfmt = Q.fitting(max(float(np.abs(pr.weights).max(initial=0)), 2.0 ** -6), WEIGHT_BITS)
    enc = pr.encode(wfmt)
    p = FSSParams(region=region, n=n, pe_rows=pe_rows, pe_cols=pe_cols, max_rows=rows, max_cols=cols,
                  weight_fmt=wfmt)
    return Stage(i, lay, "fss-gemm", p, pr.weights[:out_f, :in_f], lay.b, values=enc.values, indices=enc.indices,
                 info={"pad_rows": rows - out_f, "pad_cols": cols - in_f, "method": method})


def _unpad_lstm(wp: np.ndarray, I: int, H: int, Ip: int, Hp: int) -> np.ndarray:
    w = np.zeros((4 * H, I + H))
    for q in range(4):
        w[q * H:(q + 1) * H, :I] = wp[q * Hp:q * Hp + H, :I]
        w[q * H:(q + 1) * H, I:] = wp[q * Hp:q * Hp + H, Ip:Ip + H]
    return w


def _choose_formats(m: CompiledModel, xcal: np.ndarray) -> None:
    """A float pass of the pruned network on the calibration data; each stage's formats from it."""
    a = xcal
    slots: dict[str, np.ndarray] = {}
    for pos, lay in enumerate(m.network.layers):
        st = m._by_layer.get(id(lay))
        if lay.kind == "skip":
            slots[lay.attrs["slot"]] = a
        elif lay.kind == "add":
            b = slots.pop(lay.attrs["slot"])
            a = _add_float(lay, a, b)
            m.host_fmts[pos] = _fit(max(float(np.abs(a).max(initial=0)), float(np.abs(b).max(initial=0))), VEC_BITS)
        elif st is not None and st.engine == "fss-gemm":
            vmax = float(np.abs(a).max(initial=0))
            if lay.kind == "conv":
                pre = conv_float(a, st.w_pruned, Layer("conv", lay.name, attrs=lay.attrs))
                post = pre + (0 if lay.b is None else lay.b[None, :, None, None])
                st.info["t_per_inference"] = int(pre.shape[2] * pre.shape[3])
            else:
                pre = a @ st.w_pruned.T
                post = pre + (0 if lay.b is None else lay.b)
                st.info["t_per_inference"] = 1
            omax = max(float(np.abs(pre).max(initial=0)), float(np.abs(post).max(initial=0)))
            st.params = dataclasses.replace(st.params, act_fmt=_fit(vmax, VEC_BITS), out_fmt=_fit(omax, OUT_BITS))
            if lay.b is not None:
                st.bias_raw = quantize(lay.b, st.params.out_fmt)
            a = post
        elif lay.kind == "dense":
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
    if lay.kind in ("maxpool", "avgpool"):
        return pool_float(a, lay)
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
        d = {"index": st.index, "name": st.layer.name, "engine": st.engine, "params": p.to_dict(),
             "engine_config": engine_config(p), "verilog": f"{engine_stem(st.engine, p)}.v"}
        if st.engine == "fss-gemm":
            cm = FSSCycleModel(p)
            t = st.info.get("t_per_inference", 1)
            tp = -(-t // p.pe_cols) * p.pe_cols
            d.update(shape=list(st.layer.w.shape), padded_shape=[p.max_rows, p.max_cols],
                     pad_rows=st.info.get("pad_rows", 0), pad_cols=st.info.get("pad_cols", 0),
                     formats={"weight": str(p.weight_fmt), "input": str(p.act_fmt), "output": str(p.out_fmt)},
                     cycles_expected=cm.expected(p.max_rows, p.max_cols, tp),
                     cycles_ideal=cm.ideal(p.max_rows, p.max_cols, tp),
                     cycles_per=("input vector" if st.layer.kind == "dense" else f"image ({t} output positions)"))
        elif st.engine == "bbs-spmxv":
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
        if st.engine == "fss-gemm":
            d.update(pattern=f"fss ({p.n} of every {p.r_h}x{p.r_w} region)", region=list(p.region), n=p.n,
                     region_size=p.region_size, sparsity=float(1 - p.n / p.region_size))
        else:
            d.update(pattern="bbs (bank-balanced)", banks=p.banks, k=p.k, bank_size=p.bank_size,
                     sparsity=float(1 - p.k / p.bank_size))
        d["method"] = st.info.get("method", m.options.get("method", "magnitude"))
        d.update(kept_weights_sparsity=float(1 - np.count_nonzero(st.w_pruned) / st.w_pruned.size),
                 saturated_words=s["saturated"], max_abs_err_vs_float=e)
        layers.append(d)
    return {"target": target, "source": m.network.source, "sparsity": m.sparsity,
            "calibration_inputs": list(xcal.shape), "input_format": str(m.input_fmt),
            "host_ops": [lay.kind for lay in m.network.layers if lay.kind not in ENGINE_KINDS],
            "host_formats": {str(k): str(v) for k, v in m.host_fmts.items()},
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
        if st.engine == "fss-gemm":
            o, i = st.layer.w.shape
            yf = st.w_pruned @ dequantize(xin[:i], p.act_fmt)
            yq = dequantize(yout[:o], p.out_fmt)
            if st.layer.b is not None:
                yf = yf + st.layer.b[:, None]
                yq = dequantize(saturate(yout[:o] + st.bias_raw[:, None], p.out_fmt), p.out_fmt)
            errs.append(float(np.abs(yq - yf).max(initial=0)))
            continue
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


def load_compiled(folder: str | os.PathLike) -> CompiledModel:
    """:meth:`CompiledModel.load`: the compiled model a folder written by ``save`` (or ``hwcosim compile``)
    holds, every file checked against the manifest's sha256."""
    return CompiledModel.load(folder)


# -- BERT-family checkpoints ----------------------------------------------------------------------

BERT_MANIFEST_KIND = "hwcosim-compiled-bert"
#: What runs on the host (float64) when a BERT encoder is compiled: everything but its linear layers.
BERT_HOST_OPS = ("token, position and type embeddings", "embedding layer norm",
                 "attention scores QK^T / sqrt(d) and their softmax", "attention-weighted sum of V",
                 "residual adds", "layer norm", "GELU", "mean pooling and L2 normalisation")


def _set_linear_formats(st: Stage, vmax: float, omax: float) -> None:
    """A dense stage's input and output formats for inputs up to ``vmax`` and outputs up to ``omax``."""
    p = st.params
    if st.engine == "fss-gemm":
        st.params = dataclasses.replace(p, act_fmt=_fit(vmax, VEC_BITS), out_fmt=_fit(omax, OUT_BITS))
    else:
        st.params = BBSParams(rows=p.rows, cols=p.cols, banks=p.banks, k=p.k, pes=p.pes, weight_fmt=p.weight_fmt,
                              vec_fmt=_fit(vmax, VEC_BITS), out_fmt=_fit(omax, OUT_BITS))
    if st.layer.b is not None:
        st.bias_raw = quantize(st.layer.b, st.params.out_fmt)


class CompiledBert:
    """A BERT-family encoder whose linear layers (query, key, value, attention output, FFN in and out of
    every block) run on the BBS SpMxV or FSS GEMM golden models; the rest (:data:`BERT_HOST_OPS`) runs on
    the host in float64. Build it with :func:`compile_bert`."""

    def __init__(self, model, tok, stages: list[Stage], target: str, sparsity: float, options: dict):
        self.model, self.tok = model, tok
        self.stages = stages
        self._by_name = {st.layer.name: st for st in stages}
        self.target, self.sparsity, self.options = target, sparsity, options
        self._report: dict | None = None
        self._sat: dict[str, int] | None = None

    def ids(self, sentences) -> list[list[int]]:
        if isinstance(sentences, str):
            sentences = [sentences]
        return [self.tok.encode(s, min(256, self.model.cfg.max_positions)) for s in sentences]

    def _golden(self, name: str, x: np.ndarray) -> np.ndarray:
        st = self._by_name[name]
        fmt = st.in_fmt
        trace = self._sat is not None
        z, ofmt, _, s = CompiledModel._engine(st, quantize(x, fmt), fmt, trace)
        if trace:
            self._sat[name] += s["saturated"] + int((np.abs(x) > fmt.max_value + fmt.lsb / 2).sum())
        return dequantize(z, ofmt)

    def predict(self, sentences) -> np.ndarray:
        """Sentence embeddings (N, H), every encoder linear layer on its engine's bit-exact golden model."""
        from hwcosim.pruning.frontends_bert import encoder_embeddings

        return encoder_embeddings(self.model, self.ids(sentences), self._golden)

    def predict_float(self, sentences, pruned: bool = True) -> np.ndarray:
        """Float64 sentence embeddings with the pruned weights or, ``pruned=False``, the checkpoint's."""
        from hwcosim.pruning.frontends_bert import encoder_embeddings

        def lin(name, x):
            st = self._by_name[name]
            w = st.w_pruned if pruned else st.layer.w
            return x @ w.T + (0 if st.layer.b is None else st.layer.b)

        return encoder_embeddings(self.model, self.ids(sentences), lin)

    def report(self) -> dict:
        """Per linear layer: engine, pattern, method, formats, saturations on the calibration sentences,
        expected and ideal cycles; the sentence-embedding cosine to the float model on held-out sentences."""
        return json.loads(json.dumps(self._report))

    def save(self, out: str | os.PathLike) -> Path:
        """Write ``out/`` at once: each linear layer's engine arrays (``layerNN-NAME.npz``), the engine
        Verilog and parameters of every engine configuration, ``report.json`` and ``manifest.json``."""
        from hwcosim.models.atomic import staged_dir

        with staged_dir(out) as st_dir:
            for st in self.stages:
                arrays = {"w_pruned": st.w_pruned, "values": st.values, "indices": st.indices,
                          "params": np.frombuffer(json.dumps(st.params.to_dict()).encode(), dtype=np.uint8)}
                if st.bias_raw is not None:
                    arrays["bias"] = st.bias_raw
                np.savez(st_dir / _layer_file(st), **arrays)
                stem = engine_stem(st.engine, st.params)
                if not (st_dir / f"{stem}.v").exists():
                    (st_dir / f"{stem}.v").write_text(engine_verilog(st.engine, st.params))
                    (st_dir / f"{stem}.toml").write_text(params_toml(st.params))
            (st_dir / "report.json").write_text(json.dumps(self._report, indent=1))
            files = {f.name: _sha256(f) for f in sorted(st_dir.iterdir()) if f.name != "manifest.json"}
            manifest = {"kind": BERT_MANIFEST_KIND, "version": 1, "target": self.target, "sparsity": self.sparsity,
                        "options": self.options, "files": files}
            (st_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
        return Path(out)


def compile_bert(checkpoint, target: str = "fss", sparsity: float = 0.0, calibration=None, *,
                 method: str = "magnitude", banks: int = 4, pes: int = 4, region=(2, 8), pe_rows: int = 2,
                 pe_cols: int = 2, heldout: float = 0.25) -> CompiledBert:
    """Compile the encoder linear layers of a BERT-family checkpoint onto the BBS or FSS engines.

    Parameters
    ----------
    checkpoint : path
        A folder with ``model.safetensors``, ``config.json`` and ``vocab.txt``/``tokenizer.json``
        (or the ``.safetensors`` file in one).
    calibration : path or list of str
        Sentences (a ``.txt`` file, one per line, or a list): the last ``heldout`` fraction (at least
        one) is held out for the embedding cosine of the report; the others calibrate the formats and,
        with ``method="wanda"|"obs"``, the pruning (each linear layer from the float activations entering
        it, the earlier layers already pruned).
    target, sparsity, method, banks, pes, region, pe_rows, pe_cols
        As :func:`compile_model`.
    """
    from hwcosim.pruning.frontends_bert import encoder_embeddings, read_bert, read_sentences

    sparsity = _target_and_sparsity(target, sparsity)
    if method not in METHODS:
        raise UsageError(f"unknown pruning method {method!r}; choose one of: {', '.join(METHODS)}")
    if isinstance(region, str):
        try:
            region = tuple(int(v) for v in region.lower().split("x"))
        except ValueError:
            raise UsageError(f"region must be RxC, e.g. 2x8, not {region!r}") from None
    region = tuple(region)
    if calibration is None:
        raise UsageError("compiling a BERT checkpoint needs calibration sentences: --calibration sentences.txt "
                         "(one per line)")
    sents = read_sentences(calibration) if isinstance(calibration, str | os.PathLike) else list(calibration)
    if len(sents) < 2:
        raise UsageError("give at least 2 calibration sentences: some calibrate, the rest are held out")
    model, tok = read_bert(checkpoint)
    n_hold = max(1, int(round(len(sents) * heldout)))
    cal, held = sents[:-n_hold], sents[-n_hold:]
    stages: list[Stage] = []

    def prune_lin(name: str, x: np.ndarray) -> np.ndarray:
        """First use of each linear layer (a float pass, earlier layers pruned): prune it from its
        inputs ``x``, choose its formats, then compute it with the pruned weights."""
        w, b = model.p[name], model.p[name[:-len("weight")] + "bias"]
        lay = Layer("dense", name, w=np.asarray(w, np.float64), b=np.asarray(b, np.float64))
        X = x if method != "magnitude" else None
        st = (_prune_fss(len(stages), lay, sparsity, region, pe_rows, pe_cols, method, X) if target == "fss"
              else _prune_stage(len(stages), lay, sparsity, banks, pes, method, X))
        pre = x @ st.w_pruned.T
        post = pre + b
        _set_linear_formats(st, float(np.abs(x).max(initial=0)),
                            max(float(np.abs(pre).max(initial=0)), float(np.abs(post).max(initial=0))))
        st.info["t_per_inference"] = 1
        stages.append(st)
        return post

    ids_cal = [tok.encode(s, min(256, model.cfg.max_positions)) for s in cal]
    # one batch: every linear layer is met once, in forward order, with all calibration tokens
    encoder_embeddings(model, ids_cal, prune_lin, batch=max(1, len(ids_cal)))
    options = ({"region": list(region), "pe_rows": pe_rows, "pe_cols": pe_cols} if target == "fss"
               else {"banks": banks, "pes": pes})
    options.update(pattern=PATTERNS[target], method=method)
    m = CompiledBert(model, tok, stages, target, sparsity, options)
    m._sat = {st.layer.name: 0 for st in stages}
    m.predict(cal)
    sat, m._sat = m._sat, None
    e_float = m.predict_float(held, pruned=False)
    cos_q = np.sum(m.predict(held) * e_float, axis=1)
    cos_p = np.sum(m.predict_float(held) * e_float, axis=1)
    layers = []
    for st in stages:
        p = st.params
        d = {"index": st.index, "name": st.layer.name, "engine": st.engine, "shape": list(st.layer.w.shape),
             "method": st.info["method"], "params": p.to_dict(), "engine_config": engine_config(p),
             "verilog": f"{engine_stem(st.engine, p)}.v", "saturated_words": sat[st.layer.name],
             "kept_weights_sparsity": float(1 - np.count_nonzero(st.w_pruned) / st.w_pruned.size)}
        if st.engine == "fss-gemm":
            cm = FSSCycleModel(p)
            d.update(pattern=f"fss ({p.n} of every {p.r_h}x{p.r_w} region)", sparsity=float(1 - p.n / p.region_size),
                     formats={"weight": str(p.weight_fmt), "input": str(p.act_fmt), "output": str(p.out_fmt)},
                     cycles_expected=cm.expected(p.max_rows, p.max_cols, p.pe_cols),
                     cycles_ideal=cm.ideal(p.max_rows, p.max_cols, p.pe_cols), cycles_per=f"{p.pe_cols} tokens")
        else:
            cm = CycleModel(p)
            d.update(pattern="bbs (bank-balanced)", sparsity=float(1 - p.k / p.bank_size),
                     formats={"weight": str(p.weight_fmt), "input": str(p.vec_fmt), "output": str(p.out_fmt)},
                     cycles_expected=cm.expected(1), cycles_ideal=cm.ideal(1), cycles_per="token")
        layers.append(d)
    m._report = {
        "target": target, "source": str(checkpoint), "kind": "bert", "sparsity": sparsity, "method": method,
        "encoder": {"layers": model.cfg.layers, "hidden": model.cfg.hidden, "heads": model.cfg.heads,
                    "intermediate": model.cfg.intermediate},
        "calibration_sentences": len(cal), "heldout_sentences": len(held),
        "host_ops": list(BERT_HOST_OPS), "host_arithmetic": "float64",
        "layers": layers,
        "embedding_cosine_vs_float": {"compiled_mean": float(cos_q.mean()), "compiled_min": float(cos_q.min()),
                                      "pruned_float_mean": float(cos_p.mean()),
                                      "pruned_float_min": float(cos_p.min())},
        "notes": ["only the encoder's linear layers run on the engines (golden models); the host ops run in "
                  "float64 and each linear layer's input is quantised to its engine's input format",
                  "embedding_cosine_vs_float: cosine of the mean-pooled, L2-normalised sentence embeddings to "
                  "the float checkpoint's, on the held-out sentences (compiled: engine golden models; "
                  "pruned_float: the pruned weights in float64)",
                  "saturated_words: words that saturated on the calibration sentences"]}
    return m
