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

__all__ = ["ONNX_HINT", "load_onnx", "write_onnx", "consumers", "OnnxIOError"]

ONNX_HINT = "pip install onnx"
_TWO_GIB = 2**31 - 1


class OnnxIOError(ValueError):
    """An ONNX file that cannot be read or written, or a replacement that does not fit."""


def _onnx():
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise OnnxIOError(f"reading and writing .onnx models needs the package onnx: {ONNX_HINT}") from None
    return onnx, numpy_helper


def _load_model(path: Path):
    onnx, _ = _onnx()
    if not Path(path).is_file():
        raise OnnxIOError(f"{path}: no such ONNX file")
    try:
        return onnx.load(str(path))  # external data is loaded from beside the file
    except Exception as e:  # noqa: BLE001 - protobuf DecodeError, OSError for missing external data...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OnnxIOError(f"{path}: not a readable ONNX model ({first})") from None


def _to_array(init, numpy_helper) -> np.ndarray:
    a = numpy_helper.to_array(init)
    if a.dtype.kind not in "fiub":  # bfloat16 / float8 come back as ml_dtypes types
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
        onnx not installed, a missing or corrupt file, or a model without initialisers.
    """
    onnx, numpy_helper = _onnx()
    model = _load_model(Path(path))
    out = {init.name: _to_array(init, numpy_helper) for init in model.graph.initializer}
    if not out:
        raise OnnxIOError(f"{path}: the graph has no initialisers (weights in Constant nodes are not read)")
    return out


def consumers(path: str | Path) -> dict[str, list[str]]:
    """For each initialiser, the ``op_type[input index]`` of the nodes that read it, e.g. ``Gemm[1]``."""
    model = _load_model(Path(path))
    names = {i.name for i in model.graph.initializer}
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
    from models.atomic import atomic_path

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
