"""Run folders that keep the evidence, and their re-verification (``hwcosim check RUN_DIR``).

Every command that runs a design's RTL against its golden model leaves a run folder in one format
(``hwcosim sim``, ``hwcosim beamraster sim``, ``hwcosim board run DESIGN --sim``, the bridges
``hwcosim cosim melo|serve|kv``; docs/simulation.md lists where each puts it):

``inputs.json``   ``params`` (the design's parameter set, as its ``to_dict``) and the traffic or
                  scenario settings the testbench used
``arrays.npz``    the stimulus (raw input words or integer arrays) and the golden model's words as
                  computed at run time (``expected``, or ``expected_<stream>`` per output stream)
``outputs.npz``   the RTL's own output words, as the testbench read them off its ports (``rtl`` or
                  ``rtl_<stream>``; words wider than 64 bits as decimal strings)
``metrics.json``  cycles, counters, the mismatch count (``mismatches``) and the first 1000
                  mismatches (``mismatch_list``: the word's position, then rtl, then golden)
``sim.log``       the simulator's log, with the other records of the run (``results.xml``, a
                  waveform and its save file, ``summary.json``): not evidence, but hashed too
``run.json``      the manifest: ``format`` ``hwcosim-run``, ``version``, ``design`` (a registry
                  name), the sha256 of every evidence file above (``files``) and of every other
                  file in the folder (``records``, by path relative to the folder)

``hwcosim check RUN_DIR`` checks every hash, recomputes the golden model from the saved inputs
(never from the saved ``expected``) with the design's registered ``recheck`` and compares it word
for word with the RTL's saved words: exit 0 when they agree, 1 when they do not (the first
mismatches listed) or when the folder holds a file its manifest does not list (named), 2 when the
folder is damaged (a file changed or missing) or not a run.

A design's ``recheck(params: dict, arrays: dict, outputs: dict) -> dict`` returns
:func:`word_diff`'s record (``words``, ``rtl_words``, ``mismatches``, ``first``) and
``saved_expected_agrees`` (the golden words saved at run time equal the recomputed ones).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hwcosim.models.errors import CheckFailed, UsageError
from hwcosim.models.safeparse import json_loads

__all__ = ["FORMAT", "write_manifest", "load_run", "check_run", "save_npz", "add_arrays", "add_metrics", "word_diff",
           "merge_diffs", "seal", "seal_or_save", "seal_outputs", "as_words", "staged_run", "new_run_dir", "read_npz",
           "reseal"]

FORMAT = "hwcosim-run"
VERSION = 1
FILES = ("inputs.json", "arrays.npz", "outputs.npz", "metrics.json")
MAX_FILE = 1 << 30


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(run_dir: str | Path, design: str) -> Path:
    """Write ``run.json`` naming the design and hashing every evidence file present."""
    from hwcosim.models.atomic import write_text

    d = Path(run_dir)
    files = {f: _sha(d / f) for f in FILES if (d / f).is_file()}
    records = {name: _sha(d / name) for name, p in _entries(d) if name not in files and _regular(p)}
    man = {"format": FORMAT, "version": VERSION, "design": design, "files": files, "records": records}
    return write_text(d / "run.json", json.dumps(man, indent=1) + "\n")


def _regular(p: Path) -> bool:
    return p.is_file() and not p.is_symlink()


def _entries(d: Path) -> list[tuple[str, Path]]:
    """Every file (and symlink) in the run folder ``d``, by its path relative to ``d`` ('/'-separated),
    the manifest ``run.json`` itself left out."""
    out = []
    for p in sorted(d.rglob("*")):
        if p.is_symlink() or not p.is_dir():
            name = p.relative_to(d).as_posix()
            if name != "run.json":
                out.append((name, p))
    return out


def reseal(run_dir: str | Path) -> None:
    """Re-hash the records of a sealed run folder whose records changed after :func:`seal` (a
    waveform save file re-pointed at the final folder); the evidence hashes are kept as they were."""
    from hwcosim.models.atomic import write_text

    d = Path(run_dir)
    try:
        man = json.loads((d / "run.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return
    if not isinstance(man, dict) or man.get("format") != FORMAT or not isinstance(man.get("files"), dict):
        return
    man["records"] = {name: _sha(p) for name, p in _entries(d) if name not in man["files"] and _regular(p)}
    write_text(d / "run.json", json.dumps(man, indent=1) + "\n")


def save_npz(path: str | Path, **arrays) -> Path:
    """Write ``arrays`` as an ``.npz`` atomically (no pickles: object arrays of ints become strings)."""
    from hwcosim.models.atomic import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **{k: _plain_array(v) for k, v in arrays.items()})
    return path


def _plain_array(v) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype == object:
        a = a.astype(str)
    return a


def as_words(seq) -> np.ndarray:
    """Integers of any width as a string array (``int`` of each element gives them back)."""
    return np.asarray([str(int(w)) for w in seq], dtype=str)


def add_arrays(run_dir: str | Path, **arrays) -> Path:
    """Add (or replace) entries of the run folder's ``arrays.npz``."""
    path = Path(run_dir) / "arrays.npz"
    old = _npz(path) if path.is_file() else {}
    return save_npz(path, **{**old, **arrays})


def add_metrics(run_dir: str | Path, **fields) -> Path:
    """Add (or replace) entries of the run folder's ``metrics.json``."""
    from hwcosim.models.atomic import write_text

    path = Path(run_dir) / "metrics.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    old.update(fields)
    return write_text(path, json.dumps(old, indent=1, default=numpy_json_default))


def numpy_json_default(o):
    """``json.dumps`` default for numpy scalars and arrays (anything else is an error)."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def _ints(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind in "USO":
        return np.asarray([int(str(w)) for w in a.reshape(-1)], dtype=object).reshape(a.shape)
    return a


def word_diff(got, want, limit: int = 1000, labels: tuple = ()) -> dict:
    """Compare the RTL's words ``got`` with the golden ``want`` (arrays of one shape, or flat).

    Returns ``words`` (golden), ``rtl_words``, ``mismatches`` (differing words, plus any missing or
    extra), ``first`` (the first 8) and ``mismatch_list`` (the first ``limit``): each
    ``[*position, rtl, golden]``, the position a multi-index into ``want``'s shape (prefixed by
    ``labels``); a missing word has rtl ``None``, an extra one golden ``None``.
    """
    g, w = _ints(got), _ints(want)
    if g.shape != w.shape:
        g, w = g.reshape(-1), w.reshape(-1)
    n = min(g.size, w.size)
    gf, wf = g.reshape(-1), w.reshape(-1)
    bad = np.flatnonzero(np.asarray(gf[:n] != wf[:n], dtype=bool))
    lst = [[*labels, *(int(k) for k in np.unravel_index(i, w.shape)), int(gf[i]), int(wf[i])]
           for i in bad[:limit]]
    extra = list(range(n, max(g.size, w.size)))
    for i in extra[:max(0, limit - len(lst))]:
        lst.append([*labels, int(i), int(gf[i]) if i < g.size else None, int(wf[i]) if i < w.size else None])
    return {"words": int(w.size), "rtl_words": int(g.size), "mismatches": int(bad.size) + len(extra),
            "first": lst[:8], "mismatch_list": lst}


def merge_diffs(diffs: list[dict], limit: int = 1000) -> dict:
    """One record from several :func:`word_diff` records (streams, batches)."""
    lst = [m for d in diffs for m in d["mismatch_list"]][:limit]
    return {"words": sum(d["words"] for d in diffs), "rtl_words": sum(d["rtl_words"] for d in diffs),
            "mismatches": sum(d["mismatches"] for d in diffs), "first": lst[:8], "mismatch_list": lst}


def seal(run_dir: str | Path, design: str, diff: dict | None = None) -> Path:
    """Finish a run folder: record ``diff``'s mismatch count and list in ``metrics.json`` (when
    given) and write the manifest. Returns the manifest's path."""
    if diff is not None:
        add_metrics(run_dir, mismatches=diff["mismatches"], mismatch_list=diff["mismatch_list"])
    return write_manifest(run_dir, design)


def seal_or_save(run_dir: str | Path, design: str, transcript: dict | None, save) -> None:
    """A bridge run's folder: ``save(run_dir, transcript)`` keeps the transcript as evidence; a run
    whose testbench wrote none (it failed early) is sealed as it is, so it still re-checks."""
    if transcript is None:
        seal(run_dir, design)
    else:
        save(run_dir, transcript)


def seal_outputs(run_dir: str | Path, design: str, rtl: str = "rtl", golden: str = "golden") -> Path:
    """:func:`seal` a run whose testbench saved both the RTL's words (``rtl``) and the golden ones
    (``golden``) in ``outputs.npz``: their :func:`word_diff` becomes the mismatch list."""
    path = Path(run_dir) / "outputs.npz"
    diff = None
    if path.is_file():
        out = _npz(path)
        if rtl in out and golden in out:
            diff = word_diff(out[rtl], out[golden])
    return seal(run_dir, design, diff)


def new_run_dir(name: str) -> Path:
    """A fresh (not yet existing) run folder path under ``<build root>/sim/runs``."""
    import os
    import time

    from hwcosim.cosim.flow.runner import build_root

    base = build_root() / "sim" / "runs" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    out, i = base, 1
    while out.exists():
        out, i = base.with_name(f"{base.name}-{i}"), i + 1
    return out


@contextlib.contextmanager
def staged_run(output: str | Path | None, name: str) -> Iterator[tuple[Path, Path]]:
    """``(out, staging)``: a run folder (``output``, or a fresh one under build/sim/runs) staged in a
    temporary sibling (:func:`hwcosim.models.atomic.staged_dir`); the simulation writes into ``staging``, which
    is renamed into place when the block ends without an exception. A waveform save file's path to
    its waveform is re-pointed at ``out``."""
    from hwcosim.models.atomic import staged_dir

    out = Path(output) if output else new_run_dir(name)
    with staged_dir(out, replace=True, keep=_not_in_old_run(out)) as st:
        yield out, st
        gtkw = list(st.glob("*.gtkw"))
        for g in gtkw:
            g.write_text(g.read_text().replace(str(st.resolve()), str(out.resolve())))
        if gtkw:
            reseal(st)


def _not_in_old_run(out: Path):
    """``keep(name)`` for an existing run folder's entries when a new run replaces it: the files the old
    manifest lists (and its logs) belong to the old run and go with it; anything else is the user's."""
    old = {"run.json", "sim.log", "results.xml"}
    try:
        man = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        man = None
    if isinstance(man, dict) and man.get("format") == FORMAT:
        for key in ("files", "records"):
            if isinstance(man.get(key), dict):
                old |= {Path(str(n)).parts[0] for n in man[key] if Path(str(n)).parts}
        if "records" not in man:  # an older manifest did not list the waveforms
            return lambda name: name not in old and not name.endswith((".fst", ".vcd", ".gtkw"))
    return lambda name: name not in old


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (no pickles); UsageError when it cannot be read."""
    return _npz(Path(path))


def _npz(path: Path) -> dict[str, np.ndarray]:
    from hwcosim.models.budget import check_npz

    check_npz(path)  # every member's declared size against the memory budget, before unpacking
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a readable .npz ({str(e).splitlines()[0]}); the run folder is damaged") \
            from None


def load_run(run_dir: str | Path) -> dict:
    """The manifest and evidence of a run folder, every file's hash checked (UsageError if not)."""
    d = Path(run_dir)
    if not d.is_dir():
        raise UsageError(f"{str(d)!r} is not a folder; give a run folder (hwcosim sim, board run --sim, cosim ...)")
    man_path = d / "run.json"
    try:
        man = json_loads(man_path.read_bytes(), str(man_path), UsageError, "run manifest")
    except FileNotFoundError:
        raise UsageError(f"{d}: no run.json; give a run folder (hwcosim sim, board run --sim, cosim ...)") from None
    except OSError as e:
        raise UsageError(f"{man_path}: not a run manifest ({str(e).splitlines()[0]})") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT or man.get("version") != VERSION:
        raise UsageError(f"{man_path}: not a {FORMAT} v{VERSION} manifest")
    files = man.get("files")
    if not isinstance(files, dict) or not {"inputs.json", "arrays.npz", "outputs.npz"} <= set(files):
        raise UsageError(f"{man_path}: the run kept no RTL outputs (outputs.npz); it cannot be re-checked")
    for name, digest in files.items():
        if name not in FILES:
            raise UsageError(f"{man_path}: unexpected file {name!r} in the manifest")
        p = d / name
        if not p.is_file():
            raise UsageError(f"{d}: {name} is missing; the run folder is incomplete")
        if p.stat().st_size > MAX_FILE:
            raise UsageError(f"{p}: larger than {MAX_FILE >> 20} MiB; not a run file")
        if _sha(p) != digest:
            raise UsageError(f"{p}: sha256 differs from run.json; the file was changed after the run")
    records = man.get("records", {})
    if not isinstance(records, dict):
        raise UsageError(f"{man_path}: 'records' is not an object of file names and sha256 hashes")
    for name, digest in records.items():
        rel = Path(str(name))
        if name in FILES or not isinstance(digest, str) or ".." in rel.parts or rel.is_absolute():
            raise UsageError(f"{man_path}: unexpected record {name!r} in the manifest")
        p = d / rel
        if not _regular(p):
            raise UsageError(f"{d}: {name} is missing; the run folder is incomplete")
        if _sha(p) != digest:
            raise UsageError(f"{p}: sha256 differs from run.json; the file was changed after the run")
    unlisted = [name for name, _ in _entries(d) if name not in files and name not in records]
    if unlisted:
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        if "records" not in man:
            raise CheckFailed(f"{d / unlisted[0]}: not listed in run.json{more}, which predates the manifests that "
                              "cover every file of a run folder; simulate again for a folder that can be verified")
        raise CheckFailed(f"{d / unlisted[0]}: not listed in run.json{more}; a run folder holds only the files its "
                          "manifest hashes (a file added, or taken out of the manifest, after the run)")
    try:
        inputs = json_loads((d / "inputs.json").read_bytes(), str(d / "inputs.json"), UsageError, "inputs.json")
    except OSError as e:
        raise UsageError(f"{d / 'inputs.json'}: not JSON ({str(e).splitlines()[0]})") from None
    return {"manifest": man, "inputs": inputs, "arrays": _npz(d / "arrays.npz"), "outputs": _npz(d / "outputs.npz")}


def check_run(run_dir: str | Path) -> dict:
    """Re-verify a run folder with its design's ``recheck`` (from the registry); CheckFailed on a mismatch."""
    from hwcosim.cosim.registry import get_design, resolve

    run = load_run(run_dir)
    design = get_design(str(run["manifest"].get("design")))
    if not design.recheck:
        raise UsageError(f"design {design.name!r} has no re-check of saved runs yet")
    try:
        res = resolve(design.recheck)(run["inputs"]["params"], run["arrays"], run["outputs"])
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"{run_dir}: the saved inputs do not fit {design.name} ({e})") from None
    res["design"] = design.name
    res.pop("mismatch_list", None)
    if res["mismatches"]:
        raise CheckFailed(f"{run_dir}: {res['mismatches']} of {res['words']} RTL words differ from the golden model "
                          f"recomputed from the saved inputs; first ([position], rtl, golden): {res['first']}")
    return res
