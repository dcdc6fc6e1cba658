"""The on-disk container shared by the FSS, N:M and CSR/BSR formats (CSB's own lives in
:mod:`hwcosim.pruning.formats.csb`, whose layout this follows).

``<stem>.npz`` holds the arrays (no pickles); ``<stem>.json`` is the manifest: format name and
version, the format's fields, and for every array its dtype, shape and the sha256 of its
C-order bytes; an optional memory image (``<stem>.hex`` / ``<stem>.bin``) is listed with its
own sha256. Everything is written atomically, the manifest last, so a reader that finds the
manifest finds complete files beside it. :func:`load_bundle` refuses (with
:class:`~pruning.formats.csb.FormatError`) a manifest of another format or version, a missing,
truncated or corrupt ``.npz``, arrays that differ from the manifest, and stray or missing arrays.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
from hwcosim.models.atomic import write_bytes, write_text
from hwcosim.models.safeparse import json_loads, one_line
from hwcosim.pruning.formats.csb import FormatError, check_file, check_seal, seal

__all__ = ["sha256_array", "sha256_bytes", "save_bundle", "load_bundle", "resolve_manifest", "read_manifest"]


def sha256_array(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def save_bundle(
    out_dir: str | Path,
    stem: str,
    format_name: str,
    version: int,
    arrays: dict[str, np.ndarray],
    fields: dict,
    images: dict[str, bytes] | None = None,
) -> dict:
    """Write ``<stem>.npz``, the image files in ``images`` (suffix -> bytes) and ``<stem>.json``.

    Returns the manifest (a JSON-ready dict).
    """
    out_dir = Path(out_dir)
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    manifest = {
        "format": format_name,
        "version": version,
        **fields,
        "arrays": {
            k: {"dtype": str(v.dtype), "shape": list(v.shape), "sha256": sha256_array(v)}
            for k, v in arrays.items()
        },
        "files": {},
    }
    write_bytes(out_dir / f"{stem}.npz", buf.getvalue())
    manifest["files"]["npz"] = {"file": f"{stem}.npz", "bytes": buf.getbuffer().nbytes}
    for suffix, data in (images or {}).items():
        write_bytes(out_dir / f"{stem}.{suffix}", data)
        manifest["files"][suffix] = {
            "file": f"{stem}.{suffix}",
            "bytes": len(data),
            "sha256": sha256_bytes(data),
        }
    seal(manifest)
    write_text(out_dir / f"{stem}.json", json.dumps(manifest, indent=2) + "\n")
    return manifest


def read_manifest(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FormatError(f"{path}: no such manifest") from None
    except OSError as e:
        raise FormatError(f"{path}: cannot read the manifest ({e.strerror or e})") from None
    man = json_loads(raw, f"{path}: manifest", FormatError, "manifest")
    if not isinstance(man, dict):
        raise FormatError(f"{path}: manifest is not a JSON object")
    return man


def resolve_manifest(path: str | Path, format_name: str) -> Path:
    """The manifest path for ``path`` (a ``.json``, its ``.npz`` or a folder holding one)."""
    path = Path(path)
    if path.is_dir():
        found = []
        for f in sorted(path.glob("*.json")):
            try:
                if json.loads(f.read_text()).get("format") == format_name:
                    found.append(f)
            except (ValueError, RecursionError, MemoryError, AttributeError, OSError):
                continue
        if len(found) != 1:
            raise FormatError(
                f"{path}: expected exactly one {format_name} manifest (*.json), found {len(found)}"
            )
        return found[0]
    if path.suffix != ".json":
        path = path.with_suffix(".json")
    if not path.exists():
        raise FormatError(f"{path}: no such {format_name} manifest; give the .json written beside the .npz")
    return path


def load_bundle(path: str | Path, format_name: str, version: int) -> tuple[dict, dict[str, np.ndarray], Path]:
    """Read and verify a bundle. Returns ``(manifest, arrays, manifest_path)``."""
    mpath = resolve_manifest(path, format_name)
    man = read_manifest(mpath)
    if man.get("format") != format_name:
        raise FormatError(f"{mpath}: not a {format_name} manifest (format {man.get('format')!r})")
    if man.get("version") != version:
        raise FormatError(
            f"{mpath}: {format_name} version {man.get('version')!r} is not supported (want {version})"
        )
    check_seal(man, mpath)
    spec = man.get("arrays")
    if not isinstance(spec, dict) or not spec:
        raise FormatError(f"{mpath}: manifest lists no arrays")
    files = man.get("files")
    if not isinstance(files, dict):
        raise FormatError(f"{mpath}: manifest has no 'files' table")
    for suffix, entry in files.items():
        if suffix == "npz":
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) \
                or Path(entry["file"]).name != entry["file"]:
            raise FormatError(f"{mpath}: bad entry for the .{suffix} file")
        check_file(mpath.parent / entry["file"], entry.get("sha256"), f".{suffix} memory image")
    npz = mpath.with_suffix(".npz")
    try:
        with open(npz, "rb") as f, np.load(f, allow_pickle=False) as z:  # (numpy leaks a handle it opens)
            names = set(z.files)
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise FormatError(f"{npz}: missing; the manifest needs its .npz beside it") from None
    except Exception as e:  # noqa: BLE001 - a damaged zip raises many types (BadZipFile,
        # NotImplementedError for a flipped compression field, zlib.error, EOFError, ...)
        raise FormatError(f"{npz}: corrupt or truncated ({type(e).__name__}: {one_line(e)})") from None
    if names != set(spec):
        raise FormatError(
            f"{npz}: holds arrays {sorted(names)}, the manifest lists {sorted(spec)}; "
            "the .npz and .json come from different exports"
        )
    for k, a in arrays.items():
        s = spec[k]
        if not isinstance(s, dict):
            raise FormatError(f"{mpath}: bad entry for array {k!r}")
        if str(a.dtype) != s.get("dtype") or list(a.shape) != s.get("shape"):
            raise FormatError(
                f"{npz}: array {k!r} is {a.dtype}{list(a.shape)}, the manifest says "
                f"{s.get('dtype')}{s.get('shape')}; the files do not belong together"
            )
        if sha256_array(a) != s.get("sha256"):
            raise FormatError(
                f"{npz}: array {k!r} does not match the manifest checksum; "
                "the file is corrupt or from another export"
            )
    return man, arrays, mpath


def field(man: dict, key: str, mpath: Path, kind=int):
    """A required manifest field converted by ``kind``, or :class:`FormatError`."""
    try:
        return kind(man[key])
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as e:
        raise FormatError(f"{mpath}: manifest is missing or has a bad field {key!r} ({e})") from None
