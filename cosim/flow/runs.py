"""Run folders that keep the evidence, and their re-verification (``hwcosim check RUN_DIR``).

A run folder written by ``hwcosim sim`` holds:

``inputs.json``   the parameters (``params``) and the traffic settings the testbench used
``arrays.npz``    the stimulus (raw CSB ``values``/``indices``, raw vectors ``xs``) and the golden
                  model's words (``expected``)
``outputs.npz``   the RTL's own output words: ``rtl`` (decoded values, one per result word) and
                  ``rtl_words`` (the raw output beats as decimal strings)
``metrics.json``  cycles, counters, the mismatch count and the first 1000 mismatches
                  (``mismatch_list``: vector, row, rtl, golden)
``sim.log``       the simulator's log
``run.json``      this manifest: format, design, the sha256 of every file above

``hwcosim check RUN_DIR`` checks every hash, recomputes the golden model from the saved inputs
(not from the saved ``expected``) and compares it word for word with the RTL's saved words:
exit 0 when they agree, 1 when they do not, 2 when the folder is damaged or not a run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from models.errors import CheckFailed, UsageError

__all__ = ["FORMAT", "write_manifest", "load_run", "check_run"]

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
    from models.atomic import write_text

    d = Path(run_dir)
    files = {f: _sha(d / f) for f in FILES if (d / f).is_file()}
    man = {"format": FORMAT, "version": VERSION, "design": design, "files": files}
    return write_text(d / "run.json", json.dumps(man, indent=1) + "\n")


def _npz(path: Path) -> dict[str, np.ndarray]:
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
        raise UsageError(f"{str(d)!r} is not a folder; give a run folder written by 'hwcosim sim'")
    man_path = d / "run.json"
    try:
        man = json.loads(man_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{d}: no run.json; give a run folder written by 'hwcosim sim'") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
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
    try:
        inputs = json.loads((d / "inputs.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"{d / 'inputs.json'}: not JSON ({str(e).splitlines()[0]})") from None
    return {"manifest": man, "inputs": inputs, "arrays": _npz(d / "arrays.npz"), "outputs": _npz(d / "outputs.npz")}


def check_run(run_dir: str | Path) -> dict:
    """Re-verify a run folder with its design's ``recheck`` (from the registry); CheckFailed on a mismatch."""
    from cosim.designs import get_design, resolve

    run = load_run(run_dir)
    design = get_design(str(run["manifest"].get("design")))
    if not design.recheck:
        raise UsageError(f"design {design.name!r} has no re-check of saved runs yet")
    try:
        res = resolve(design.recheck)(run["inputs"]["params"], run["arrays"], run["outputs"])
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"{run_dir}: the saved inputs do not fit {design.name} ({e})") from None
    res["design"] = design.name
    if res["mismatches"]:
        raise CheckFailed(f"{run_dir}: {res['mismatches']} of {res['words']} RTL words differ from the golden model "
                          f"recomputed from the saved inputs; first (vector, row, rtl, golden): {res['first']}")
    return res
