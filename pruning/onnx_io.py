"""ONNX models as a weight source for ``hwcosim prune``, and as its dense output.

The weights of an ONNX model are the *initialisers* of its main graph (``graph.initializer``):
:func:`load_onnx` reads them by name as numpy arrays, :func:`write_onnx` writes a copy of the
model in which some initialisers are replaced by arrays of the same name, shape and data type,
and everything else (nodes, inputs, outputs, opsets, metadata, the other initialisers, byte for
byte) is kept. The result passes ``onnx.checker``.

Limits, said plainly: weights held in ``Constant`` nodes, in sparse initialisers or in the
initialisers of subgraphs (``If``/``Loop`` bodies) are not read; models above protobuf's 2 GiB
limit are written with external data beside the output file. ``bfloat16`` initialisers are read
as ``float32`` (exact) and written back as ``bfloat16``.

Orientation: ``hwcosim prune`` prunes along the rows of the stored array. A ``Gemm`` with
``transB=1`` (what PyTorch exports for ``nn.Linear``) stores ``(out, in)`` like the hardware's
``y = W x``; a ``MatMul`` weight is stored ``(in, out)``, so its "rows" are input features.
:func:`consumers` tells which operator uses each initialiser, and ``hwcosim prune`` records it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError
from hwcosim.models.safeparse import one_line

__all__ = ["ONNX_HINT", "load_onnx", "write_onnx", "consumers", "OnnxIOError"]

ONNX_HINT = "pip install onnx"
_TWO_GIB = 2**31 - 1


class OnnxIOError(UsageError):
    """An ONNX file that cannot be read or written, or a replacement that does not fit."""


def _onnx():
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise OnnxIOError(f"reading and writing .onnx models needs the package onnx: {ONNX_HINT}") from None
    return onnx, numpy_helper


def _tensors(graph):
    """Every TensorProto of ``graph``: initialisers and node attributes, subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for g in attr.graphs:
                yield from _tensors(g)


def _external_bytes(onnx, model, path: Path) -> int:
    """Bytes the model's external-data tensors would load, each location checked to stay beside the
    model (a relative path inside its folder) before anything is read."""
    folder = path.resolve().parent
    total = 0
    for t in _tensors(model.graph):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        target = (folder / loc).resolve()
        if not loc or Path(loc).is_absolute() or not target.is_relative_to(folder):
            raise OnnxIOError(f"{path}: tensor {t.name!r} keeps its data at {loc[:80]!r}, outside the model's "
                              "folder; external data must sit beside the .onnx file")
        if info.get("length", "").isdigit():
            total += int(info["length"])
        elif target.is_file():
            total += target.stat().st_size
    return total


def _load_model(path: Path):
    """The ONNX model at ``path``, its size (and that of any external data) checked against the
    memory budget first: parsing holds the file once and the arrays read from it once more."""
    from hwcosim.models.budget import check_alloc

    onnx, _ = _onnx()
    path = Path(path)
    if not path.is_file():
        raise OnnxIOError(f"{path}: no such ONNX file")
    fix = "export a smaller model"
    check_alloc(2 * path.stat().st_size, f"{path}: parsing the model and reading its weights", fix, OnnxIOError)
    try:
        model = onnx.load(str(path), load_external_data=False)
        external = _external_bytes(onnx, model, path)
        if external:
            check_alloc(2 * (path.stat().st_size + external),
                        f"{path}: the model with its external data", fix, OnnxIOError)
            from onnx.external_data_helper import load_external_data_for_model

            load_external_data_for_model(model, str(path.resolve().parent))
        return model
    except OnnxIOError:
        raise
    except Exception as e:  # noqa: BLE001 - protobuf DecodeError, OSError for missing external data...
        first = one_line(e, 200) or type(e).__name__
        raise OnnxIOError(f"{path}: not a readable ONNX model ({first}); re-export it (onnx.save)") from None


def _type_name(onnx, code: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(code)
    except ValueError:
        return f"data type {code}"


def _to_array(init, onnx, numpy_helper, path) -> np.ndarray:
    """One initialiser as a numpy array of its declared shape; a damaged one is an OnnxIOError."""
    where = f"{path}: initialiser {init.name!r}"
    dims = tuple(init.dims)
    if any(d < 0 for d in dims):
        raise OnnxIOError(f"{where} has negative dimensions {list(dims)}; re-export the model")
    n_elem = int(np.prod(dims, dtype=object))
    held = (2 * len(init.raw_data) + len(init.float_data) + 8 * len(init.int32_data) + len(init.int64_data)
            + len(init.double_data) + len(init.uint64_data) + len(init.string_data))
    if n_elem > held:  # refused before numpy is asked to allocate the declared shape
        raise OnnxIOError(f"{where} declares shape {list(dims)} ({n_elem} values) but holds data for at most "
                          f"{held}; the file is truncated or damaged: re-export the model")
    if init.data_type == onnx.TensorProto.STRING:
        # strings are not weights: keep them (hwcosim prune skips non-numeric tensors) without decoding
        n = len(init.string_data)
        if n != int(np.prod(dims, dtype=object)):
            raise OnnxIOError(f"{where} holds {n} strings for shape {list(dims)}; re-export the model")
        return np.array(list(init.string_data), dtype=object).reshape(dims)
    try:
        a = numpy_helper.to_array(init)
    except Exception as e:  # noqa: BLE001 - onnx raises ValueError, KeyError, TypeError... on bad tensors
        raise OnnxIOError(f"{where} ({_type_name(onnx, init.data_type)}, shape {list(dims)}) cannot be read "
                          f"({type(e).__name__}: {one_line(e, 160) or 'no detail'}); re-export the model") from None
    if a.shape != dims:
        raise OnnxIOError(f"{where} decodes to shape {a.shape}, not its declared {list(dims)}; re-export the model")
    if a.dtype.kind == "V":  # bfloat16 / float8 / int4 come back as ml_dtypes types: widen (exact)
        try:
            a = a.astype(np.float32)
        except (TypeError, ValueError):
            pass
    return a


def load_onnx(path: str | Path) -> dict[str, np.ndarray]:
    """The initialisers of the main graph of an ONNX model, by name, in file order.

    Raises
    ------
    OnnxIOError
        onnx not installed, a missing or corrupt file, a damaged initialiser (a data type onnx
        does not know, data that does not fill the declared shape), two initialisers of one
        name, or a model without initialisers.
    """
    onnx, numpy_helper = _onnx()
    model = _load_model(Path(path))
    out = {}
    for init in _initialisers(model, path):
        out[init.name] = _to_array(init, onnx, numpy_helper, path)
    if not out:
        raise OnnxIOError(f"{path}: the graph has no initialisers (weights in Constant nodes are not read)")
    return out


def _initialisers(model, path) -> list:
    inits = list(model.graph.initializer)
    seen = set()
    for init in inits:
        if not isinstance(init.name, str):  # protobuf hands back bytes for a name that is not UTF-8
            raise OnnxIOError(f"{path}: an initialiser name is not UTF-8 text ({init.name[:40]!r}); re-export "
                              "the model")
        if init.name in seen:
            raise OnnxIOError(f"{path}: two initialisers are named {init.name!r}; names must be unique "
                              "(onnx.checker refuses the model too): re-export it")
        seen.add(init.name)
    return inits


def consumers(path: str | Path) -> dict[str, list[str]]:
    """For each initialiser, the ``op_type[input index]`` of the nodes that read it, e.g. ``Gemm[1]``."""
    model = _load_model(Path(path))
    names = {i.name for i in _initialisers(model, path)}
    used: dict[str, list[str]] = {n: [] for n in names}
    for node in model.graph.node:
        attrs = {a.name: a for a in node.attribute}
        for k, inp in enumerate(node.input):
            if inp in names:
                tag = f"{node.op_type}[{k}]"
                if node.op_type == "Gemm" and k == 1 and "transB" in attrs and attrs["transB"].i:
                    tag += " transB"
                used[inp].append(tag)
    return used


def write_onnx(src: str | Path, dst: str | Path, replacements: dict[str, np.ndarray]) -> list[dict]:
    """Copy the model ``src`` to ``dst`` with some initialisers replaced; returns one record per
    initialiser (``name``, ``shape``, ``dtype``, ``replaced``).

    Each replacement must have the initialiser's shape; it is cast to the initialiser's data type.
    The copy is checked with ``onnx.checker`` and written atomically.

    Raises
    ------
    OnnxIOError
        A replacement names no initialiser or has another shape; the checker rejects the copy.
    """
    from hwcosim.models.atomic import atomic_path

    onnx, numpy_helper = _onnx()
    model = _load_model(Path(src))
    inits = {i.name: i for i in model.graph.initializer}
    unknown = sorted(set(replacements) - set(inits))
    if unknown:
        raise OnnxIOError(f"{src}: no initialiser named {', '.join(map(repr, unknown))}")
    records = []
    for init in model.graph.initializer:
        orig = numpy_helper.to_array(init)
        rec = {"name": init.name, "shape": list(orig.shape), "dtype": onnx.TensorProto.DataType.Name(init.data_type),
               "replaced": init.name in replacements}
        if rec["replaced"]:
            new = np.asarray(replacements[init.name])
            if new.shape != orig.shape:
                raise OnnxIOError(f"initialiser {init.name!r}: replacement has shape {new.shape}, "
                                  f"the model's is {orig.shape}")
            t = numpy_helper.from_array(new.astype(orig.dtype), init.name)
            if t.data_type != init.data_type:
                raise OnnxIOError(f"initialiser {init.name!r}: cannot keep ONNX data type {init.data_type}")
            doc = init.doc_string
            init.Clear()
            init.CopyFrom(t)
            init.doc_string = doc
        records.append(rec)
    try:
        onnx.checker.check_model(model, full_check=False)
    except Exception as e:  # noqa: BLE001 - onnx.checker.ValidationError
        raise OnnxIOError(f"the pruned copy of {src} fails onnx.checker: {str(e).splitlines()[0]}") from None
    dst = Path(dst)
    with atomic_path(dst) as tmp:
        if model.ByteSize() > _TWO_GIB:
            onnx.save_model(model, str(tmp), save_as_external_data=True, all_tensors_to_one_file=True,
                            location=dst.name + ".data")
        else:
            onnx.save_model(model, str(tmp))
    return records
