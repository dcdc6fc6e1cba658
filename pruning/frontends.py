"""Front ends of ``hwcosim.compile``: a user's trained network read into a small layer IR.

Two readers, one IR (a chain of :class:`Layer` records, input to output):

- :func:`read_onnx`: an ONNX model whose main graph is a single chain from its one input to its
  one output, built of ``Gemm`` (``transA=0``, ``alpha=beta=1``, ``B`` an initialiser),
  ``MatMul`` (``B`` an initialiser) with an optional following ``Add`` of a constant bias,
  ``Conv`` (2-D, ``group=1``, no dilation; the kernel kept as an im2col matrix),
  ``MaxPool``/``AveragePool`` (2-D, no padding, ``ceil_mode=0``; run on the host), residual blocks
  (a tensor feeding the chain and an ``Add`` further along it: a ``skip`` and an ``add`` layer),
  ``Relu``, ``Sigmoid``, ``Tanh``, ``Flatten``, ``Reshape`` (a constant shape),
  ``Softmax`` (the last op, on the last axis) and ``LSTM`` (forward, default activations, no
  peepholes, no ``sequence_lens``, ``layout=0``, initial states absent or provably zero; the chain goes
  on from ``Y_h`` or from the last step of ``Y``). PyTorch exports (``torch.onnx.export`` of
  ``nn.LSTM(batch_first=True)``) are read as layout operations around the LSTM, done by the host: a
  ``Transpose(perm=[1, 0, 2])`` right before the LSTM (the input is then ``(N, T, I)``), a zero
  initial state (a constant or the ``Shape``/``ConstantOfShape``/``Expand`` subgraph a dynamic batch
  size leaves) and, after it, ``Squeeze`` of the num_directions axis, ``Transpose`` and the selection
  of the last step (``Gather`` of index -1 or ``Slice`` -1: on the time axis of ``Y``, or on axis 0
  of ``Y_h``), until the tensor is the last hidden state ``(N, H)``.
  Anything else (another op, an unsupported attribute, a branch) is a
  :class:`~hwcosim.models.errors.UsageError` naming the op type and the node name.
- :func:`read_npz`: an ``.npz`` weight bundle with a TOML description of the layers::

      input = "vector"            # or "sequence": x is (N, T, I)
      [[layer]]
      kind = "dense"              # y = x @ W.T + b
      weight = "fc1.W"            # (out, in)
      bias = "fc1.b"              # optional, (out,)
      activation = "relu"         # optional: relu, sigmoid, tanh, softmax (last layer only)
      [[layer]]
      kind = "lstm"               # fused gates (i, f, g, o): W (4H, I+H) = [W_x | W_h], bias (4H,)
      weight = "lstm.W"
      bias = "lstm.b"             # the output is the last hidden state (N, H)

Both check every weight for NaN/inf. Gate order inside the IR is (i, f, g, o) with one fused
``(4H, I+H)`` matrix, the layout of :mod:`hwcosim.models.nn.lstm` and of the BBS LSTM engine;
ONNX's (i, o, f, c) order is converted here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.safeparse import toml_loads

__all__ = ["Layer", "Network", "read_onnx", "read_npz", "read_model", "ACTIVATIONS", "ENGINE_KINDS"]

ACTIVATIONS = ("relu", "sigmoid", "tanh", "softmax")
#: Layer kinds that run on an engine (the others run on the host).
ENGINE_KINDS = ("dense", "lstm", "conv")


@dataclass
class Layer:
    """One layer of the IR.

    ``kind``: ``dense`` (``w`` (out, in), ``b`` (out,) or None), ``lstm`` (``w`` (4H, I+H) gates
    i, f, g, o; ``b`` (4H,); ``attrs["layout"]`` ``"tni"`` (ONNX: x is (T, N, I), output
    ``Y_h`` (1, N, H)) or ``"nti"`` (x (N, T, I), output (N, H))), ``relu``/``sigmoid``/``tanh``/
    ``softmax`` (host activations), ``flatten`` (``attrs["axis"]``), ``reshape``
    (``attrs["shape"]``, ONNX semantics: 0 copies a dimension, -1 is inferred), ``conv`` (``w``
    (M, C*kh*kw) in (channel, kernel row, kernel column) order, ``b`` (M,) or None; ``attrs``
    ``channels``, ``kernel`` [kh, kw], ``strides`` [sh, sw], ``pads`` [top, left, bottom, right]; x is
    (N, C, H, W)), ``maxpool``/``avgpool`` (``attrs`` ``kernel``, ``strides``), ``skip`` (keep the
    current tensor under ``attrs["slot"]``) and ``add`` (add the tensor kept under ``attrs["slot"]``:
    a residual block).
    """

    kind: str
    name: str
    w: np.ndarray | None = None
    b: np.ndarray | None = None
    attrs: dict = field(default_factory=dict)


@dataclass
class Network:
    """A chain of layers; ``source`` names where it came from."""

    layers: list[Layer]
    source: str
    input_name: str = "x"

    @property
    def engine_layers(self) -> list[Layer]:
        return [lay for lay in self.layers if lay.kind in ENGINE_KINDS]


def _finite(name: str, a: np.ndarray, where: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        bad = int((~np.isfinite(a)).sum())
        raise UsageError(f"{where}: weight {name!r} holds {bad} NaN/inf values; clean or retrain the model")
    return a


# -- ONNX ------------------------------------------------------------------------------------

def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _refuse(node, what: str) -> UsageError:
    return UsageError(f"ONNX node {node.name or '(unnamed)'!r} ({node.op_type}): {what}; this compiler "
                      "supports Gemm, MatMul(+Add), Conv, MaxPool, AveragePool, residual Add, Relu, Sigmoid, Tanh, "
                      "Flatten, Reshape, Softmax (last) and LSTM (with the layout ops of a PyTorch export around it)")


def _only(node, attrs: dict, allowed: dict) -> None:
    """Refuse any attribute not in ``allowed`` or with a value other than the allowed ones."""
    for k, v in attrs.items():
        if isinstance(v, bytes):
            v = v.decode()
        if isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        if k not in allowed:
            raise _refuse(node, f"attribute {k}={v!r} is not supported")
        ok = allowed[k]
        if ok is not None and not (v in ok if isinstance(ok, tuple) else ok(v)):
            raise _refuse(node, f"attribute {k}={v!r} is not supported")


def read_onnx(path: str | Path) -> Network:
    """Read an ONNX model (see the module docstring for what is supported) into a :class:`Network`."""
    from hwcosim.pruning.onnx_io import _load_model, _onnx

    onnx, numpy_helper = _onnx()
    where = str(path)
    model = path if hasattr(path, "graph") else _load_model(Path(path))
    if hasattr(path, "graph"):
        where = "ONNX model"
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    consts: dict[str, np.ndarray] = {}

    def const(name: str, node) -> np.ndarray:
        if name in consts:
            return consts[name]
        if name not in inits:
            raise _refuse(node, f"input {name!r} must be a constant (an initialiser)")
        consts[name] = numpy_helper.to_array(inits[name])
        return consts[name]

    for node in g.node:  # Constant nodes become constants
        if node.op_type == "Constant":
            a = _attrs(node)
            if "value" not in a:
                raise _refuse(node, "only Constant nodes with a tensor 'value' are supported")
            consts[node.output[0]] = numpy_helper.to_array(a["value"])
    nodes = [n for n in g.node if n.op_type != "Constant"]
    zero_states, state_nodes = _zero_states(nodes, inits, consts, numpy_helper)
    nodes = [n for n in nodes if id(n) not in state_nodes]
    inputs = [i.name for i in g.input if i.name not in inits]
    if len(inputs) != 1 or len(g.output) != 1:
        raise UsageError(f"{where}: the model has {len(inputs)} inputs and {len(g.output)} outputs; "
                         "this compiler takes a chain with one input and one output")
    consumers: dict[str, list] = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    layers: list[Layer] = []
    cur = inputs[0]
    out = g.output[0].name
    used: set[int] = set()
    pending: dict[int, str] = {}   # residual Add node -> the tensor its skip connection holds
    batch_first = False            # a Transpose(perm=[1, 0, 2]) feeds the next LSTM
    while cur != out:
        nxt = consumers.get(cur, [])
        adds = [n for n in nxt if n.op_type == "Add" and len(n.input) == 2 and cur in n.input]
        if len(nxt) == 2 and len(adds) == 1 and id(adds[0]) not in pending:
            # a residual block: keep the tensor (a skip), go on along the other branch to the Add
            pending[id(adds[0])] = cur
            layers.append(Layer("skip", f"{adds[0].name or 'Add'}.skip", attrs={"slot": cur}))
            nxt = [n for n in nxt if n is not adds[0]]
        if len(nxt) != 1:
            raise UsageError(f"{where}: tensor {cur!r} feeds {len(nxt)} nodes; this compiler takes a chain "
                             "(residual blocks joined by an Add are supported; no other branches)")
        node = nxt[0]
        if id(node) in used:
            raise UsageError(f"{where}: node {node.name!r} is reached twice; the graph is not a chain")
        used.add(id(node))
        op, name, a = node.op_type, node.name or node.op_type, _attrs(node)
        if op == "Add":
            _only(node, a, {})
            slot = pending.pop(id(node), None)
            other = [i for i in node.input if i != cur]
            if slot is None or other != [slot]:
                raise _refuse(node, "only a residual Add (of a tensor the chain branched from) or a bias Add "
                                    "right after a MatMul is supported")
            layers.append(Layer("add", name, attrs={"slot": slot}))
            cur = node.output[0]
            continue
        if node.input[0] != cur:
            raise _refuse(node, f"the chain's tensor {cur!r} must be its first input")
        if op == "Gemm":
            _only(node, a, {"transA": (0,), "transB": (0, 1), "alpha": (1.0,), "beta": (1.0,)})
            w = const(node.input[1], node)
            w = w if a.get("transB", 0) else w.T
            b = const(node.input[2], node) if len(node.input) > 2 and node.input[2] else None
            if b is not None and b.size not in (1, w.shape[0]):
                raise _refuse(node, f"bias of shape {list(b.shape)} does not broadcast to {w.shape[0]} outputs")
            lay = Layer("dense", name, _finite(node.input[1], w, where),
                        None if b is None else _finite(node.input[2], np.broadcast_to(b.reshape(-1), (w.shape[0],)),
                                                       where))
            cur = node.output[0]
        elif op == "MatMul":
            _only(node, a, {})
            w = const(node.input[1], node)
            if w.ndim != 2:
                raise _refuse(node, f"weight of {w.ndim} dimensions; only 2-D weights are supported")
            lay = Layer("dense", name, _finite(node.input[1], w.T, where))
            cur = node.output[0]
            after = consumers.get(cur, [])
            if cur != out and len(after) == 1 and after[0].op_type == "Add":
                add = after[0]
                other = [i for i in add.input if i != cur]
                bias = const(other[0], add) if len(other) == 1 else None
                if bias is None or bias.size not in (1, w.shape[1]):
                    raise _refuse(add, "only an Add of a constant bias after a MatMul is supported")
                lay.b = _finite(other[0], np.broadcast_to(bias.reshape(-1), (w.shape[1],)), where)
                used.add(id(add))
                cur = add.output[0]
        elif op in ("Relu", "Sigmoid", "Tanh"):
            _only(node, a, {})
            lay = Layer(op.lower(), name)
            cur = node.output[0]
        elif op == "Softmax":
            _only(node, a, {"axis": lambda v: isinstance(v, int)})
            if node.output[0] != out:
                raise _refuse(node, "Softmax is supported only as the last op")
            lay = Layer("softmax", name, attrs={"axis": int(a.get("axis", -1))})  # the last axis: checked on use
            cur = node.output[0]
        elif op == "Flatten":
            _only(node, a, {"axis": lambda v: isinstance(v, int) and v >= 0})
            lay = Layer("flatten", name, attrs={"axis": int(a.get("axis", 1))})
            cur = node.output[0]
        elif op == "Reshape":
            _only(node, a, {"allowzero": (0,)})
            shape = [int(s) for s in const(node.input[1], node).reshape(-1)]
            lay = Layer("reshape", name, attrs={"shape": shape})
            cur = node.output[0]
        elif op == "Transpose":
            _only(node, a, {"perm": None})
            perm = [int(v) for v in a.get("perm", [])]
            after = consumers.get(node.output[0], [])
            if (perm != [1, 0, 2] or node.output[0] == out or len(after) != 1 or after[0].op_type != "LSTM"
                    or after[0].input[0] != node.output[0]):
                raise _refuse(node, f"perm={perm}: a Transpose is supported only as perm=[1, 0, 2] right before an "
                                    "LSTM's input (a batch_first PyTorch export; the host transposes)")
            batch_first = True
            cur = node.output[0]
            continue
        elif op == "LSTM":
            lay = _lstm(node, a, const, zero_states, where)
            lay.attrs["layout"] = "nti" if batch_first else "tni"
            batch_first = False
            cur, shape_of = _lstm_output(node, const, consumers, out)
            layers.append(lay)
            H = lay.attrs["hidden"]
            if shape_of == "1nh" and lay.attrs["layout"] == "nti":   # Y_h as is after a batch-first input
                layers.append(Layer("reshape", f"{lay.name}.Y_h", attrs={"shape": [1, -1, H]}))
            elif shape_of == "nh" and lay.attrs["layout"] == "tni":  # the last step selected from Y_h / Y
                layers.append(Layer("reshape", f"{lay.name}.last", attrs={"shape": [-1, H]}))
            continue
        elif op == "Conv":
            lay = _conv(node, a, const, where)
            cur = node.output[0]
        elif op in ("MaxPool", "AveragePool"):
            lay = _pool(node, a)
            cur = node.output[0]
        else:
            raise _refuse(node, "this op is not supported")
        layers.append(lay)
    if pending:
        raise UsageError(f"{where}: a residual Add is never reached from the chain; the graph is not a chain of "
                         "residual blocks")
    if not any(lay.kind in ENGINE_KINDS for lay in layers):
        raise UsageError(f"{where}: no Gemm, MatMul, Conv or LSTM layer to put on an engine")
    return Network(layers, where, inputs[0])


def _lstm(node, a: dict, const, zero_states: set, where: str) -> Layer:
    def default_acts(v):
        return [s.lower() for s in v] == ["sigmoid", "tanh", "tanh"]

    _only(node, a, {"hidden_size": None, "direction": ("forward",), "layout": (0,), "input_forget": (0,),
                    "activations": default_acts})
    ins = list(node.input) + [""] * (8 - len(node.input))
    for i, what in ((4, "sequence_lens"), (5, "initial_h"), (6, "initial_c"), (7, "P (peepholes)")):
        if ins[i] and not (i in (5, 6) and ins[i] in zero_states):
            raise _refuse(node, f"input {what} is not supported" + (" (only an all-zero initial state)"
                                                                     if i in (5, 6) else ""))
    W = const(ins[1], node)
    R = const(ins[2], node)
    if W.ndim != 3 or W.shape[0] != 1 or R.shape[0] != 1:
        raise _refuse(node, "only a single direction is supported")
    H = R.shape[-1]
    if "hidden_size" in a and int(a["hidden_size"]) != H:
        raise _refuse(node, f"hidden_size={a['hidden_size']} does not match R's {H}")
    B = const(ins[3], node)[0] if ins[3] else np.zeros(8 * H)
    order = [0, 2, 3, 1]  # ONNX (i, o, f, c) -> engine (i, f, g, o)

    def gates(m):
        blocks = np.split(np.asarray(m, dtype=np.float64), 4, axis=0)
        return np.concatenate([blocks[k] for k in order], axis=0)

    w = np.concatenate([gates(W[0]), gates(R[0])], axis=1)
    b = gates(B[:4 * H]) + gates(B[4 * H:])
    return Layer("lstm", node.name or "LSTM", _finite(f"{ins[1]}|{ins[2]}", w, where),
                 _finite(ins[3] or "B", b, where), attrs={"layout": "tni", "hidden": H, "input_size": W.shape[2]})


#: ops that only compute a shape or move elements around: what a zero initial state built from the
#: input's batch size is made of (``torch.zeros`` of a dynamic batch)
_STATE_OPS = ("Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice", "Reshape", "Expand", "Tile",
              "ConstantOfShape", "Transpose", "Identity")
#: of those, the ops whose output is zero when their first input is
_ZERO_KEEPING = ("Unsqueeze", "Squeeze", "Cast", "Slice", "Reshape", "Expand", "Tile", "Transpose", "Identity",
                 "Gather", "Concat")


def _zero_states(nodes: list, inits: dict, consts: dict, numpy_helper) -> tuple[set, set]:
    """The LSTM initial states (``initial_h``/``initial_c``) that are provably all zeros, and the ids of
    the nodes that compute them and nothing else (a batch-size subgraph: ``Shape`` of the input ->
    ``Gather`` -> ... -> ``ConstantOfShape``/``Expand``); those nodes are left out of the chain."""
    producer = {o: n for n in nodes for o in n.output if o}

    def value(name: str):
        if name in consts:
            return consts[name]
        if name in inits:
            return numpy_helper.to_array(inits[name])
        return None

    def zero(name: str, seen: set) -> bool:
        """``name`` is provably zero; ``seen`` collects the nodes on the way."""
        v = value(name)
        if v is not None:
            return v.size == 0 or not np.any(v)
        n = producer.get(name)
        if n is None or n.op_type not in _STATE_OPS:
            return False
        seen.add(id(n))
        if n.op_type == "ConstantOfShape":
            a = _attrs(n)
            ok = "value" not in a or not np.any(numpy_helper.to_array(a["value"]))
        elif n.op_type == "Concat":
            ok = all(zero(i, seen) for i in n.input if i)
        elif n.op_type in _ZERO_KEEPING:
            ok = zero(n.input[0], seen)
        else:
            return False
        shape_inputs = n.input if n.op_type == "ConstantOfShape" else [] if n.op_type == "Concat" else n.input[1:]
        return ok and all(shape_side(i, seen) for i in shape_inputs if i)

    def shape_side(name: str, seen: set) -> bool:
        """``name`` is computed from constants and shapes only."""
        if value(name) is not None:
            return True
        n = producer.get(name)
        if n is None or n.op_type not in _STATE_OPS:
            return False
        seen.add(id(n))
        return n.op_type == "Shape" or all(shape_side(i, seen) for i in n.input if i)

    zeros, removed = set(), set()
    for n in nodes:
        if n.op_type != "LSTM":
            continue
        for name in list(n.input[5:7]):
            seen: set = set()
            if name and zero(name, seen):
                zeros.add(name)
                removed |= seen
    # the nodes left out must feed only each other and the LSTMs' initial states
    for n in nodes:
        if id(n) in removed:
            continue
        for k, i in enumerate(n.input):
            src = producer.get(i)
            if src is not None and id(src) in removed and not (n.op_type == "LSTM" and k in (5, 6)):
                return zeros - {o for m in nodes if id(m) in removed for o in m.output}, set()
    return zeros, removed


def _lstm_output(node, const, consumers: dict, out: str) -> tuple[str, str]:
    """Follow the LSTM's used output (``Y`` or ``Y_h``) through the layout ops of a PyTorch export
    (``Squeeze`` of num_directions, ``Transpose``, the last step by ``Gather``/``Slice``) to the tensor
    the chain goes on from. Returns (that tensor, ``"nh"`` for the last hidden state (N, H) or ``"1nh"``
    for ``Y_h`` as is, (1, N, H))."""
    outs = list(node.output) + [""] * (3 - len(node.output))
    used = [k for k in (0, 1, 2) if outs[k] and (consumers.get(outs[k]) or outs[k] == out)]
    if 2 in used:
        raise _refuse(node, "output Y_c is not supported; use Y_h or the last step of Y")
    if len(used) != 1:
        raise _refuse(node, "use one of Y (its last step) and Y_h" if used else "output Y_h or Y must be used")
    k = used[0]
    labels = ["T", "D", "N", "H"] if k == 0 else ["D", "N", "H"]   # Y (T, 1, N, H); Y_h (1, N, H)
    t, last = outs[k], k == 1
    while not (labels == ["N", "H"] and last):
        nxt = consumers.get(t, [])
        if t != out and len(nxt) == 1 and nxt[0].op_type in ("Squeeze", "Transpose", "Gather", "Slice"):
            labels, last = _layout_step(nxt[0], labels, last, const)
            t = nxt[0].output[0]
            continue
        if k == 1 and labels == ["D", "N", "H"]:
            return t, "1nh"
        what = nxt[0] if t != out and len(nxt) == 1 else node
        raise _refuse(what, "the LSTM's output Y must be reduced to its last step, shape (N, H), first (Squeeze of "
                            "num_directions, Transpose, Gather or Slice of step -1); the whole sequence is not "
                            "supported")
    return t, "nh"


_BIG = 2 ** 31 - 1  # a Slice end at or past this is "to the end"


def _layout_step(n, labels: list[str], last: bool, const) -> tuple[list[str], bool]:
    """One layout op after an LSTM on a tensor whose axes are ``labels`` (``T`` time, ``T1`` the last
    step kept as an axis, ``D`` num_directions, ``N`` batch, ``H`` hidden)."""
    op, a = n.op_type, _attrs(n)
    r = len(labels)

    def axis(v) -> int:
        v = int(v)
        if not -r <= v < r:
            raise _refuse(n, f"axis {v} is out of range for a {r}-D tensor")
        return v % r

    def consts(k: int, attr: str):
        if attr in a:
            return [int(x) for x in a[attr]]
        if len(n.input) > k and n.input[k]:
            return [int(x) for x in np.asarray(const(n.input[k], n)).reshape(-1)]
        return None

    if op == "Squeeze":
        _only(n, a, {"axes": None})
        axes = consts(1, "axes")
        if not axes:
            raise _refuse(n, "a Squeeze after an LSTM needs its axes")
        axes = {axis(v) for v in axes}
        for ax in axes:
            if labels[ax] not in ("D", "T1"):
                raise _refuse(n, f"squeezes axis {ax} ({_AXIS[labels[ax]]}); only num_directions or the selected "
                                 "time step can be squeezed")
        return [lab for i, lab in enumerate(labels) if i not in axes], last
    if op == "Transpose":
        _only(n, a, {"perm": None})
        perm = [int(v) for v in a.get("perm", range(r - 1, -1, -1))]
        if sorted(perm) != list(range(r)):
            raise _refuse(n, f"perm={perm} is not a permutation of {r} axes")
        return [labels[p] for p in perm], last
    if op == "Gather":
        _only(n, a, {"axis": None})
        ax = axis(a.get("axis", 0))
        idx = np.asarray(const(n.input[1], n))
        if idx.size != 1 or idx.ndim > 1:
            raise _refuse(n, "only a single index is supported after an LSTM")
        i, lab = int(idx.reshape(-1)[0]), labels[ax]
        if lab == "T" and i == -1:
            last, new = True, "T1"
        elif lab in ("D", "T1") and i in (0, -1):
            new = lab
        else:
            raise _refuse(n, f"Gather of index {i} on axis {ax} ({_AXIS[lab]}); only the last time step (index -1) "
                             "can be selected")
        out = list(labels)
        if idx.ndim == 0:
            del out[ax]
        else:
            out[ax] = new
        return out, last
    if op == "Slice":
        _only(n, a, {"starts": None, "ends": None, "axes": None})
        starts, ends = consts(1, "starts"), consts(2, "ends")
        axes = consts(3, "axes") or list(range(len(starts or [])))
        steps = consts(4, "steps") or [1] * len(axes)
        if starts is None or ends is None or not len(starts) == len(ends) == len(axes) == len(steps):
            raise _refuse(n, "give constant starts, ends and axes")
        out = list(labels)
        for s0, e0, ax, st in zip(starts, ends, axes, steps):
            ax = axis(ax)
            lab = labels[ax]
            if st == 1 and s0 == 0 and (e0 >= _BIG or (lab in ("D", "T1") and e0 >= 1)):
                continue                                   # the whole axis
            if st == 1 and s0 == -1 and e0 >= _BIG and lab in ("T", "D", "T1"):
                if lab == "T":
                    out[ax], last = "T1", True
                continue
            raise _refuse(n, f"Slice {s0}:{e0}:{st} of axis {ax} ({_AXIS[lab]}); only the last time step (-1:) "
                             "or a whole axis is supported")
        return out, last
    raise _refuse(n, "this op is not supported after an LSTM")


_AXIS = {"T": "time", "T1": "the selected time step", "D": "num_directions", "N": "batch", "H": "hidden"}


def _pair(v, default, name: str, node) -> list[int]:
    v = list(default if v is None else v)
    if len(v) != len(default) or any(int(x) < 0 for x in v):
        raise _refuse(node, f"attribute {name}={v!r}: give {len(default)} values for a 2-D (N, C, H, W) input")
    return [int(x) for x in v]


def _conv(node, a: dict, const, where: str) -> Layer:
    """``Conv`` (2-D, ``group=1``, no dilation): the IR keeps the kernel as a (M, C*kh*kw) matrix, the
    im2col layout (channel, kernel row, kernel column)."""
    _only(node, a, {"kernel_shape": None, "strides": None, "pads": None, "dilations": lambda v: set(v) <= {1},
                    "group": (1,), "auto_pad": ("NOTSET",)})
    k = const(node.input[1], node)
    if k.ndim != 4:
        raise _refuse(node, f"kernel of {k.ndim} dimensions; only 2-D convolutions (M, C, kh, kw) are supported")
    m, c, kh, kw = (int(d) for d in k.shape)
    if "kernel_shape" in a and [int(v) for v in a["kernel_shape"]] != [kh, kw]:
        raise _refuse(node, f"kernel_shape={a['kernel_shape']} does not match the kernel's {[kh, kw]}")
    b = const(node.input[2], node) if len(node.input) > 2 and node.input[2] else None
    if b is not None and b.size != m:
        raise _refuse(node, f"bias of {b.size} values for {m} output channels")
    strides = _pair(a.get("strides"), [1, 1], "strides", node)
    if min(strides) < 1:
        raise _refuse(node, f"strides={strides}: give strides >= 1")
    return Layer("conv", node.name or "Conv", _finite(node.input[1], k.reshape(m, c * kh * kw), where),
                 None if b is None else _finite(node.input[2], b.reshape(-1), where),
                 attrs={"channels": c, "kernel": [kh, kw], "strides": strides,
                        "pads": _pair(a.get("pads"), [0, 0, 0, 0], "pads", node)})


def _pool(node, a: dict) -> Layer:
    """``MaxPool`` / ``AveragePool`` (2-D, no padding, ``ceil_mode=0``): on the host."""
    _only(node, a, {"kernel_shape": None, "strides": None, "pads": lambda v: not any(v), "ceil_mode": (0,),
                    "dilations": lambda v: set(v) <= {1}, "storage_order": (0,), "auto_pad": ("NOTSET", "VALID"),
                    "count_include_pad": (0, 1)})
    if len(node.output) > 1 and node.output[1]:
        raise _refuse(node, "the Indices output is not supported")
    kernel = _pair(a.get("kernel_shape"), [1, 1], "kernel_shape", node)
    strides = _pair(a.get("strides"), [1, 1], "strides", node)
    if min(kernel) < 1 or min(strides) < 1:
        raise _refuse(node, "kernel_shape and strides must be >= 1")
    kind = "maxpool" if node.op_type == "MaxPool" else "avgpool"
    return Layer(kind, node.name or node.op_type, attrs={"kernel": kernel, "strides": strides})


# -- npz + TOML --------------------------------------------------------------------------------

def read_npz(npz: str | Path, toml: str | Path) -> Network:
    """Read an ``.npz`` weight bundle described by a TOML file (see the module docstring)."""
    npz, toml = Path(npz), Path(toml)
    for f in (npz, toml):
        if not f.is_file():
            raise UsageError(f"{f}: no such file")
    desc = toml_loads(toml.read_bytes(), str(toml), UsageError, "layer description")
    try:
        bundle = dict(np.load(npz, allow_pickle=False))
    except Exception as e:  # noqa: BLE001 - zipfile/ValueError/OSError on a damaged file
        raise UsageError(f"{npz}: not a readable .npz ({type(e).__name__}); save it with numpy.savez") from None
    unknown = set(desc) - {"input", "layer"}
    if unknown:
        raise UsageError(f"{toml}: unknown keys {sorted(unknown)}; write input = ... and [[layer]] tables")
    layout = desc.get("input", "vector")
    if layout not in ("vector", "sequence"):
        raise UsageError(f"{toml}: input = {layout!r}; write \"vector\" or \"sequence\"")
    specs = desc.get("layer", [])
    if not isinstance(specs, list) or not specs:
        raise UsageError(f"{toml}: no [[layer]] tables; describe at least one layer")

    def arr(spec, key, i, required=True):
        name = spec.get(key)
        if name is None:
            if required:
                raise UsageError(f"{toml}: layer {i} has no {key} = \"ARRAY\"; name the array in {npz.name}")
            return None
        if name not in bundle:
            raise UsageError(f"{toml}: layer {i}: array {name!r} is not in {npz.name} (it has {sorted(bundle)[:8]})")
        return _finite(name, bundle[name], str(npz))

    layers: list[Layer] = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise UsageError(f"{toml}: layer {i} is not a table")
        extra = set(spec) - {"kind", "weight", "bias", "activation", "name"}
        if extra:
            raise UsageError(f"{toml}: layer {i}: unknown keys {sorted(extra)}; allowed: kind, weight, bias, "
                             "activation, name")
        kind = spec.get("kind")
        name = str(spec.get("name", f"layer{i}"))
        w, b = arr(spec, "weight", i), arr(spec, "bias", i, required=False)
        if w.ndim != 2:
            raise UsageError(f"{toml}: layer {i}: weight {spec['weight']!r} has shape {list(w.shape)}; a 2-D matrix")
        if kind == "dense":
            if b is not None and b.shape != (w.shape[0],):
                raise UsageError(f"{toml}: layer {i}: bias shape {list(b.shape)} != ({w.shape[0]},)")
            layers.append(Layer("dense", name, w, b))
        elif kind == "lstm":
            if w.shape[0] % 4 or w.shape[1] <= w.shape[0] // 4:
                raise UsageError(f"{toml}: layer {i}: an LSTM weight is (4H, I+H), got {list(w.shape)}")
            H = w.shape[0] // 4
            b = np.zeros(4 * H) if b is None else b
            if b.shape != (4 * H,):
                raise UsageError(f"{toml}: layer {i}: LSTM bias shape {list(b.shape)} != ({4 * H},)")
            if layout != "sequence" or layers:
                raise UsageError(f"{toml}: layer {i}: an LSTM must be the first layer, with input = \"sequence\"")
            layers.append(Layer("lstm", name, w, b, attrs={"layout": "nti", "hidden": H,
                                                            "input_size": w.shape[1] - H}))
        else:
            raise UsageError(f"{toml}: layer {i}: kind = {kind!r} is not supported; write \"dense\" or \"lstm\"")
        act = spec.get("activation")
        if act is not None:
            if act not in ACTIVATIONS:
                raise UsageError(f"{toml}: layer {i}: activation {act!r}; choose one of {', '.join(ACTIVATIONS)}")
            if act == "softmax" and i != len(specs) - 1:
                raise UsageError(f"{toml}: layer {i}: softmax is supported on the last layer only")
            layers.append(Layer(act, f"{name}.{act}"))
    if layout == "sequence" and layers[0].kind != "lstm":
        raise UsageError(f"{toml}: input = \"sequence\" needs an LSTM first layer")
    return Network(layers, f"{npz} + {toml}")


def read_model(model, description=None) -> Network:
    """A :class:`Network` from an ONNX path or ``onnx.ModelProto``, an ``.npz`` path (with its TOML
    ``description``), or a :class:`Network` (returned as is)."""
    if isinstance(model, Network):
        return model
    if hasattr(model, "graph"):
        return read_onnx(model)
    p = Path(model)
    if p.suffix == ".onnx":
        return read_onnx(p)
    if p.suffix == ".npz":
        if description is None:
            description = p.with_suffix(".toml")
        return read_npz(p, description)
    raise UsageError(f"{model}: not a model this compiler reads; pass an .onnx file or an .npz with a .toml "
                     "layer description")
