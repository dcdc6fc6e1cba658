"""Write a pruned model back as dense tensors in the input's own format.

``hwcosim prune --dense-out`` calls :func:`write_dense` with the input file and the pruned
tensors (same names and shapes as in the input). The output has the input's format, tensor
names, shapes, data types and order; tensors that were not pruned are copied bit for bit:

================  =============================================================================
``.safetensors``  rewritten at the byte level: the header keeps every dtype (also ``BF16`` and
                  the ``F8`` types numpy cannot hold), the ``__metadata__`` block and the order;
                  untouched tensors' bytes are copied from the input unchanged
``.npz``          the same member names, in the same order (``np.savez``, uncompressed)
``.npy``          the one array
``.pt``/``.pth``  the state dict loaded with ``torch.load(weights_only=True)``, the pruned
                  tensors replaced (cast back to their torch dtype, e.g. ``bfloat16``), nested
                  containers and non-tensor entries kept, saved with ``torch.save``
``.onnx``         the same graph with replaced initialisers (:mod:`hwcosim.pruning.onnx_io`)
================  =============================================================================

:func:`read_safetensors` is the matching reader (it also reads ``BF16`` as ``float32``, which
the ``safetensors`` package's numpy API refuses).
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import atomic_path, write_bytes
from hwcosim.models.errors import UsageError
from hwcosim.models.safeparse import json_loads

__all__ = ["RoundTripError", "DENSE_SUFFIXES", "write_dense", "read_safetensors", "safetensors_header",
           "default_dense_path"]

DENSE_SUFFIXES = (".npy", ".npz", ".safetensors", ".pt", ".pth", ".onnx")

#: safetensors dtype -> numpy dtype (little-endian); BF16 is handled separately.
_ST_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


class RoundTripError(UsageError):
    """The dense output cannot be written: unknown format, a mismatching tensor, a bad file."""


def default_dense_path(src: str | Path, out_dir: str | Path) -> Path:
    """``<out_dir>/<input stem>.pruned<input suffix>``."""
    src = Path(src)
    return Path(out_dir) / f"{src.stem}.pruned{src.suffix}"


# --- safetensors, byte level -------------------------------------------------------------------
def safetensors_header(path: str | Path) -> tuple[dict, int]:
    """The JSON header of a safetensors file and the offset where its data starts."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise RoundTripError(f"{path}: too short for a safetensors file")
            (n,) = struct.unpack("<Q", raw)
            size = path.stat().st_size
            if n > size - 8:
                raise RoundTripError(f"{path}: header length {n} exceeds the file size {size}")
            header = json_loads(f.read(n), str(path), RoundTripError, "safetensors header")
    except OSError as e:
        raise RoundTripError(f"{path}: not a readable safetensors file ({e})") from None
    if not isinstance(header, dict):
        raise RoundTripError(f"{path}: safetensors header is not a JSON object")
    return header, 8 + n


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 bits, to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """All tensors of a safetensors file in file (offset) order; ``BF16`` is returned as float32.

    Raises
    ------
    RoundTripError
        A damaged file, or a dtype numpy cannot hold (``F8_*``): convert those first.
    """
    path = Path(path)
    header, start = safetensors_header(path)
    out = {}
    data = np.memmap(path, dtype=np.uint8, mode="r")
    for name, info in _entries(header, path):
        b, e = (start + o for o in info["data_offsets"])
        raw = np.asarray(data[b:e])
        dt = info["dtype"]
        if dt == "BF16":
            a = _bf16_to_f32(raw.view("<u2"))
        elif dt in _ST_DTYPES:
            a = raw.view(_ST_DTYPES[dt]).copy()
        else:
            raise RoundTripError(f"{path}: tensor {name!r} has dtype {dt}, which numpy cannot hold; "
                                 "convert it to F32/F16/BF16 first")
        out[name] = a.reshape(info["shape"])
    return out


def _entries(header: dict, path) -> list[tuple[str, dict]]:
    """The tensor entries in offset order, each checked: a dtype name, a shape of non-negative
    integers, two integer offsets inside the data section whose span is the shape's byte size."""
    items = [(k, v) for k, v in header.items() if k != "__metadata__"]
    data_len = Path(path).stat().st_size - safetensors_header(path)[1]
    for k, v in items:
        if not (isinstance(v, dict) and {"dtype", "shape", "data_offsets"} <= set(v)):
            raise RoundTripError(f"{path}: malformed header entry for {k!r}")
        dt, shape, offs = v["dtype"], v["shape"], v["data_offsets"]
        if not isinstance(dt, str):
            raise RoundTripError(f"{path}: tensor {k!r} has a dtype that is not a name: {dt!r}")
        if not (isinstance(shape, list) and all(type(d) is int and 0 <= d < 2**40 for d in shape)):
            raise RoundTripError(f"{path}: tensor {k!r} has a malformed shape {str(shape)[:60]}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)
                and 0 <= offs[0] <= offs[1] <= data_len):
            raise RoundTripError(f"{path}: tensor {k!r} has data_offsets {str(offs)[:60]} outside the "
                                 f"{data_len}-byte data section; the file is damaged")
        size = {"BF16": 2}.get(dt) or (np.dtype(_ST_DTYPES[dt]).itemsize if dt in _ST_DTYPES else None)
        if size is not None and offs[1] - offs[0] != size * int(np.prod(shape, dtype=object)):
            raise RoundTripError(f"{path}: tensor {k!r}: {offs[1] - offs[0]} bytes do not hold a {dt} "
                                 f"tensor of shape {shape}; the file is damaged")
    return sorted(items, key=lambda kv: kv[1]["data_offsets"][0])


def _st_bytes(a: np.ndarray, dt: str, name: str) -> bytes:
    if dt == "BF16":
        return _f32_to_bf16(a.astype(np.float32)).astype("<u2").tobytes()
    if dt not in _ST_DTYPES:
        raise RoundTripError(f"tensor {name!r}: cannot write dtype {dt}")
    return np.ascontiguousarray(a.astype(_ST_DTYPES[dt])).tobytes()


def _write_safetensors(src: Path, dst: Path, repl: dict[str, np.ndarray]) -> list[dict]:
    header, start = safetensors_header(src)
    entries = _entries(header, src)
    blob = src.read_bytes()
    new_header: dict = {}
    if "__metadata__" in header:
        new_header["__metadata__"] = header["__metadata__"]
    chunks, records, off = [], [], 0
    for name, info in entries:
        if name in repl:
            a = np.asarray(repl[name])
            if list(a.shape) != list(info["shape"]):
                raise RoundTripError(f"tensor {name!r}: pruned shape {a.shape} differs from {tuple(info['shape'])}")
            data = _st_bytes(a, info["dtype"], name)
        else:
            b, e = info["data_offsets"]
            data = blob[start + b:start + e]
        new_header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
        records.append({"name": name, "shape": list(info["shape"]), "dtype": info["dtype"], "replaced": name in repl})
    text = json.dumps(new_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as the safetensors writer does
    write_bytes(dst, struct.pack("<Q", len(text)) + text + b"".join(chunks))
    return records


# --- numpy --------------------------------------------------------------------------------------
def _check_fit(name: str, orig: np.ndarray, new: np.ndarray) -> np.ndarray:
    new = np.asarray(new)
    if new.shape != orig.shape:
        raise RoundTripError(f"tensor {name!r}: pruned shape {new.shape} differs from {orig.shape}")
    return new.astype(orig.dtype, copy=False)


def _write_npz(src: Path, dst: Path, repl: dict[str, np.ndarray]) -> list[dict]:
    import zipfile

    # every member is read here (the pruner read only the selected ones): a damaged other member is
    # a clean refusal, not a traceback
    try:
        with np.load(src, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        why = str(e).splitlines()[0] if str(e) else "damaged"
        raise RoundTripError(f"{src}: cannot read every array of the .npz to copy it ({type(e).__name__}: {why}); "
                             "re-save the file with numpy") from None
    out, records = {}, []
    for k, a in arrays.items():
        out[k] = _check_fit(k, a, repl[k]) if k in repl else a
        records.append({"name": k, "shape": list(a.shape), "dtype": a.dtype.name, "replaced": k in repl})
    with atomic_path(dst) as tmp, open(tmp, "wb") as f:
        np.savez(f, **out)
    return records


def _write_npy(src: Path, dst: Path, repl: dict[str, np.ndarray]) -> list[dict]:
    a = np.load(src, allow_pickle=False)
    name = src.stem
    new = _check_fit(name, a, repl[name]) if name in repl else a
    with atomic_path(dst) as tmp, open(tmp, "wb") as f:
        np.save(f, new)
    return [{"name": name, "shape": list(a.shape), "dtype": a.dtype.name, "replaced": name in repl}]


# --- PyTorch ------------------------------------------------------------------------------------
def _write_torch(src: Path, dst: Path, repl: dict[str, np.ndarray]) -> list[dict]:
    try:
        import torch
    except ImportError:
        raise RoundTripError(f"writing {dst.suffix} needs torch (pip install torch), or use .safetensors") from None
    obj = torch.load(str(src), map_location="cpu", weights_only=True)
    records: list[dict] = []

    def walk(o, prefix):
        if isinstance(o, torch.Tensor):
            hit = prefix in repl
            records.append({"name": prefix, "shape": list(o.shape), "dtype": str(o.dtype).removeprefix("torch."),
                            "replaced": hit})
            if not hit:
                return o
            a = np.asarray(repl[prefix])
            if tuple(a.shape) != tuple(o.shape):
                raise RoundTripError(f"tensor {prefix!r}: pruned shape {a.shape} differs from {tuple(o.shape)}")
            return torch.from_numpy(np.ascontiguousarray(a)).to(o.dtype)
        if isinstance(o, dict):
            items = {k: walk(v, f"{prefix}.{k}" if prefix else str(k)) for k, v in o.items()}
            try:
                new = type(o)()  # OrderedDict keeps its type
                new.update(items)
                if hasattr(o, "_metadata"):
                    new._metadata = o._metadata  # nn.Module.state_dict() versions
                return new
            except TypeError:
                return items
        if isinstance(o, (list, tuple)):
            vals = [walk(v, f"{prefix}.{i}" if prefix else str(i)) for i, v in enumerate(o)]
            return type(o)(vals) if isinstance(o, list) or type(o) is tuple else type(o)(*vals)
        return o

    new = walk(obj, "")
    with atomic_path(dst) as tmp:
        torch.save(new, str(tmp))
    return records


# --- dispatch -----------------------------------------------------------------------------------
def write_dense(src: str | Path, dst: str | Path, replacements: dict[str, np.ndarray]) -> dict:
    """Write ``src`` to ``dst`` in the same format with ``replacements`` (name -> dense array).

    Returns ``{"file", "format", "sha256", "bytes", "tensors": [{"name", "shape", "dtype",
    "replaced"}]}``, the tensors in file order.

    Raises
    ------
    RoundTripError
        ``dst`` has another suffix than ``src``, an unsupported format, a replacement whose
        name is not in the file or whose shape differs.
    """
    from hwcosim.pruning.onnx_io import OnnxIOError, write_onnx

    src, dst = Path(src), Path(dst)
    suffix = src.suffix.lower()
    if suffix not in DENSE_SUFFIXES:
        raise RoundTripError(f"{src}: cannot write {suffix!r} back; dense output supports {', '.join(DENSE_SUFFIXES)}")
    if dst.suffix.lower() != suffix and not (suffix in (".pt", ".pth") and dst.suffix.lower() in (".pt", ".pth")):
        raise RoundTripError(f"--dense-out {dst}: must end in {suffix} like the input {src.name}")
    if dst.resolve() == src.resolve():
        raise RoundTripError(f"--dense-out {dst}: would overwrite the input; choose another path")
    writer = {".npy": _write_npy, ".npz": _write_npz, ".safetensors": _write_safetensors,
              ".pt": _write_torch, ".pth": _write_torch}.get(suffix)
    try:
        records = write_onnx(src, dst, replacements) if suffix == ".onnx" else writer(src, dst, replacements)
    except OnnxIOError as e:
        raise RoundTripError(str(e)) from None
    missing = sorted(set(replacements) - {r["name"] for r in records})
    if missing:
        dst.unlink(missing_ok=True)
        raise RoundTripError(f"{src}: has no tensor named {', '.join(map(repr, missing))}")
    data = dst.read_bytes()
    return {"file": str(dst), "format": suffix.lstrip("."), "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data), "tensors": records}
