"""Pre-flight checks for a training script: catch, before a long run, the failures of Philly jobs.

Zhang, Xiao, Zhang, Liu, Lin and Yang, "An Empirical Study on Program Failures of Deep Learning
Jobs" (ICSE 2020) classify 4,960 failed jobs of Microsoft's Philly cluster into 20 categories:
48.0% come from the execution environment (paths and files not found, libraries missing,
permission denied, GPU unavailable, ...), 13.5% are deep-learning specific (bad model structure
such as tensor shape mismatches, API misunderstanding, NaN/Inf), and GPU out-of-memory alone is
about 9%. Most of them fail early, yet after queueing and resource allocation, so a check that
runs in seconds before submission pays off. The related tools DNNMem (memory estimation, FSE
2020) and Refty (shape refinement types, ICSE 2022) each target one class; this module covers
the list at the depth a few seconds allow.

:func:`check` runs two passes.

Static pass (AST of the script, nothing executed)
    ``syntax``: what Python refuses; with the job's interpreter given (``CheckConfig.target_python``,
    ``--python 3.5``) the script is also parsed with that version's grammar (``ast.parse(...,
    feature_version=...)``: f-strings before 3.6, ``:=`` before 3.8, ``match`` before 3.10 ...), since a
    job runs on the cluster's interpreter, not the checker's.
    ``module``: every ``import`` not guarded by ``try/except ImportError`` must resolve
    (``importlib.util.find_spec``, or a file beside the script).
    ``path``: string literals read by ``open``/``np.load``/``np.loadtxt``/``torch.load``/
    ``pd.read_csv``/``os.listdir``... and argparse defaults or command-line values of input
    options (``--data``, ``--train-file``...) must exist relative to the working directory (the
    message says when a path exists only relative to the script); ``os.environ["X"]`` must be set.
    ``permission``: targets of ``open(..., "w")``, ``np.save``, ``torch.save``, ``os.makedirs``
    and output options (``--out``, ``--save-dir``...) need a writable nearest existing ancestor
    (``os.access`` plus read-only mounts and ``/sys``, ``/proc``, which refuse even root).
    ``api``: results of in-place calls assigned (``x = np.random.shuffle(a)`` is ``None``);
    results of non-in-place array methods discarded (``a.reshape(...)`` as a statement);
    ``optimizer.step()`` without ``zero_grad``; softmax fed to ``CrossEntropyLoss`` (which
    applies log-softmax itself); ``torch.load`` without ``map_location`` on a CPU-only host.
    ``gpu``: ``.cuda()`` / ``"cuda"`` devices without an ``is_available()`` guard where CUDA is
    absent.

Dry run (:mod:`hwcosim.models.systems.jobs._dryrun` in a child interpreter in a :mod:`~.sandbox`)
    The script runs for ``steps`` steps at two tiny batch sizes. Convention: the child sets
    ``HWCOSIM_DRYRUN=1``, ``HWCOSIM_BATCH`` and ``HWCOSIM_STEPS``; scripts that read them (or that
    take ``--batch-size``/``--epochs``/``--steps`` options, which are rewritten) run in well
    under a second. The sandbox (Linux namespaces): the working folder and the script's folder
    are private copy-on-write copies, every other path is read-only, ``/tmp`` is private, there is
    no network, every process the script starts is killed at the end (``setsid`` children
    included), address space, CPU time, file size and the number of tasks are limited, stdin is
    closed, the wall-clock timeout kills the whole sandbox; nothing the script writes survives it.
    Where the sandbox cannot be guaranteed the dry run is refused (``SandboxUnavailable``). The first exception is
    classified (``module``, ``path``, ``permission``, ``memory``, ``shape``, ``gpu``,
    ``runtime``); numpy floating-point invalid/overflow/divide events and ``nan``/``inf`` in
    printed loss lines are ``numeric``. ``memory``: the peak of traced allocations (numpy; the
    maximum RSS when torch is loaded) at the two batch sizes is extrapolated linearly to the full
    batch size (``--batch-size`` value or default, or ``BATCH_SIZE = N``) and compared with the
    device memory. For numpy scripts this is the host working set standing in for the device's.

Limits, honestly: the checks are heuristics over common idioms; a path built at run time is
only seen by the dry run, which sees only the code the first steps execute; the memory model is
linear in the batch size and ignores allocator fragmentation and CUDA context memory.
"""

from __future__ import annotations

import ast
import errno
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
import time
import tokenize
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hwcosim.models.errors import UsageError
from hwcosim.models.systems.jobs import sandbox
from hwcosim.models.systems.jobs.sandbox import SandboxLimits

__all__ = ["Finding", "Report", "CheckConfig", "ScriptError", "check", "static_check", "dry_run", "CATEGORIES",
           "TARGET_PYTHONS",
           "corpus_dir", "corpus_scripts", "evaluate_corpus"]

#: Finding categories, each with the ICSE 2020 class it stands for.
CATEGORIES = {
    "syntax": "program: syntax error",
    "module": "execution environment: library not found",
    "path": "execution environment: path / file / environment variable not found",
    "permission": "execution environment: permission denied",
    "gpu": "execution environment: GPU unavailable",
    "memory": "execution environment: (GPU) out of memory",
    "shape": "DL specific: tensor shape mismatch",
    "numeric": "DL specific: NaN / Inf (loss or activations)",
    "api": "DL specific / general: framework API misuse",
    "args": "program: bad command-line arguments",
    "timeout": "dry run did not finish (script ignores HWCOSIM_STEPS?)",
    "runtime": "other runtime error in the first steps",
}

_READERS = {"open", "load", "loadtxt", "genfromtxt", "fromfile", "read_csv", "read_parquet", "listdir",
            "scandir", "imread", "load_state_dict_from_file", "read_text", "read_bytes"}
_WRITERS = {"save", "savez", "savez_compressed", "savetxt", "tofile", "makedirs", "mkdir", "imwrite", "to_csv"}
#: methods that work in place and return None, by the type that has them (list, dict, set, numpy.ndarray,
#: numpy.random.Generator); a test calls each on a real object and checks it returns None
INPLACE_METHODS = {"sort": ("list", "ndarray"), "append": ("list",), "extend": ("list",), "reverse": ("list",),
                   "update": ("dict", "set"), "fill": ("ndarray",), "shuffle": ("Generator",),
                   "insert": ("list",), "clear": ("list", "dict", "set")}
#: module-level functions that work in place and return None (numpy.sort, numpy.append, torch.sort ...
#: return new arrays and are not here); checked against the libraries by a test
INPLACE_FUNCTIONS = {"random.shuffle", "random.seed", "numpy.random.shuffle", "numpy.random.seed"}
#: array/tensor methods that return a new object and leave the original unchanged, so a statement that
#: discards the result does nothing; checked against numpy (and torch when installed) by a test. Not here:
#: float/double/half (torch.nn.Module's convert the module in place, and a static check cannot tell a
#: module from a tensor), sort/fill (in place)
_DISCARDED = {"reshape", "astype", "transpose", "flatten", "squeeze", "unsqueeze", "clip", "round", "copy",
              "ravel", "swapaxes", "view", "detach", "contiguous"}
_IN_OPT = re.compile(r"(data|input|train|valid|val|test|file|path|dataset|root|vocab|ckpt_in|resume|pretrained)",
                     re.I)
_OUT_OPT = re.compile(r"(out|save|log|ckpt|checkpoint|model_dir|dump|result|export)", re.I)
_BATCH_OPT = ("--batch-size", "--batch_size", "--bs", "--batchsize")
_EPOCH_OPT = ("--epochs", "--epoch", "--n-epochs", "--num-epochs", "--num_epochs")
_STEP_OPT = ("--steps", "--iters", "--iterations", "--max-steps", "--max_steps", "--num-steps")
_SHAPE_RE = re.compile(r"shape|broadcast|size mismatch|mat1 and mat2|dimension|not aligned|must match the size|"
                       r"cannot reshape|expected input|sizes of tensors", re.I)
_NAN_RE = re.compile(r"loss\W[^\n]*\b(nan|-?inf)\b", re.I)
#: versions ``ast.parse(feature_version=...)`` of this interpreter accepts (3.4 up to the running one)
TARGET_PYTHONS = tuple(f"3.{m}" for m in range(4, sys.version_info.minor + 1))


@dataclass(frozen=True)
class Finding:
    """One problem found.

    Attributes
    ----------
    category : str
        A key of :data:`CATEGORIES`.
    severity : {"error", "warning"}
    message : str
    line : int or None
        Line in the script, when known.
    source : {"static", "dryrun"}
    """

    category: str
    severity: str
    message: str
    line: int | None = None
    source: str = "static"

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown finding category {self.category!r}")
        if self.severity not in ("error", "warning"):
            raise ValueError(f"severity must be 'error' or 'warning', not {self.severity!r}")


@dataclass(frozen=True)
class CheckConfig:
    """Parameters of a check.

    Parameters
    ----------
    device_memory_bytes : float
        Memory of the target device (default 16 GiB, a V100-16GB / P100 class GPU of Philly).
    batches : tuple of int
        Tiny batch sizes of the dry run (two, increasing, for the memory slope).
    steps : int
        Training steps the dry run asks for (``HWCOSIM_STEPS``).
    timeout_s : float
        Wall-clock limit of the dry run.
    address_space_bytes : int
        ``RLIMIT_AS`` of the child (0: no limit).
    dry_run : bool
        Run the dry run at all.
    sandbox : SandboxLimits
        Scratch space, file size and task limits of the dry run's sandbox.
    target_python : str, optional
        The job's Python version (``"3.5"``): the script is also parsed with that version's grammar.
    """

    device_memory_bytes: float = 16 * 2**30
    batches: tuple[int, ...] = (4, 32)
    steps: int = 2
    timeout_s: float = 60.0
    address_space_bytes: int = 8 * 2**30
    dry_run: bool = True
    sandbox: SandboxLimits = SandboxLimits()
    target_python: str | None = None

    def __post_init__(self):
        if self.target_python is not None and self.target_python not in TARGET_PYTHONS:
            raise UsageError(f"target Python must be one of {', '.join(TARGET_PYTHONS)} (the grammars this checker "
                             f"knows), not {self.target_python!r}")
        if not self.device_memory_bytes > 0:
            raise UsageError(f"device memory must be > 0, not {self.device_memory_bytes}")
        if len(self.batches) != 2 or not 1 <= self.batches[0] < self.batches[1]:
            raise UsageError(f"batches must be two increasing sizes >= 1, not {self.batches}")
        if self.steps < 1:
            raise UsageError(f"steps must be >= 1, not {self.steps}")
        if not 0 < self.timeout_s <= 3600:
            raise UsageError(f"timeout must be in (0, 3600] s, not {self.timeout_s}")
        if self.address_space_bytes < 0:
            raise UsageError(f"address space limit must be >= 0, not {self.address_space_bytes}")


@dataclass
class Report:
    """Findings of :func:`check` on one script, plus the dry-run measurements."""

    script: str
    findings: list[Finding] = field(default_factory=list)
    dryrun: dict | None = None
    memory_estimate_bytes: float | None = None
    full_batch: int | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def categories(self) -> set[str]:
        return {f.category for f in self.findings}

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict:
        return {"script": self.script, "ok": self.ok, "findings": [asdict(f) for f in self.findings],
                "memory_estimate_bytes": self.memory_estimate_bytes, "full_batch": self.full_batch,
                "dryrun": self.dryrun}


# ---- static pass ---------------------------------------------------------------------------------
def _dotted(node) -> str:
    """``a.b().c`` for an expression node (iterative: a script's attribute chains can be deep)."""
    parts = []
    while True:
        if isinstance(node, ast.Name):
            parts.append(node.id)
            break
        if isinstance(node, ast.Attribute):
            parts.append("." + node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            parts.append("()")
            node = node.func
        else:
            parts.append("?")
            break
    return "".join(reversed(parts))


def _module_aliases(tree) -> dict[str, str]:
    """``{local name: module}`` of the script's imports (``import numpy as np`` -> ``np: numpy``)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _assigns_none(call: ast.Call, modules: dict[str, str]) -> bool:
    """Whether ``call`` returns None because it works in place (its result should not be assigned).

    A call on a module (``np.sort(a)``, ``random.shuffle(x)``) is judged by the function it names
    (:data:`INPLACE_FUNCTIONS`); a call on anything else (``lst.sort()``, ``rng.shuffle(a)``) by
    the method (:data:`INPLACE_METHODS`); a plain name by what it was imported as.
    """
    f = call.func
    if isinstance(f, ast.Name):
        return modules.get(f.id, "") in INPLACE_FUNCTIONS
    if not isinstance(f, ast.Attribute):
        return False
    dotted = _dotted(f)
    root = dotted.split(".")[0]
    if root in modules and "()" not in dotted and "?" not in dotted:
        full = modules[root] + dotted[len(root):]
        return full in INPLACE_FUNCTIONS
    if f.attr == "update":  # dict.update / set.update on a name; a module's update() is something else
        return root not in modules
    return f.attr in INPLACE_METHODS


def _exists(p: Path) -> bool:
    """``p.exists()`` that says False, not raises, for names the OS refuses (too long, NUL, ...)."""
    try:
        return p.exists()
    except (OSError, ValueError):
        return False


def _too_long(p: Path) -> str | None:
    for part in p.parts:
        if len(part.encode("utf-8", "surrogatepass")) > 255:
            return f"{part[:40]}...: a file name longer than 255 bytes cannot be created"
    return None


def _const_str(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _guarded_imports(tree) -> set[int]:
    """Line numbers of imports inside ``try`` blocks that catch ImportError (or everything)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            names = set()
            for h in node.handlers:
                if h.type is None:
                    names.add("*")
                else:
                    for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]):
                        names.add(_dotted(t).split(".")[-1])
            if names & {"*", "ImportError", "ModuleNotFoundError", "Exception", "BaseException"}:
                for sub in node.body:
                    for n in ast.walk(sub):
                        if isinstance(n, (ast.Import, ast.ImportFrom)):
                            out.add(n.lineno)
    return out


def _module_ok(name: str, script_dir: Path) -> bool:
    if _exists(script_dir / f"{name}.py") or _exists(script_dir / name):
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _looks_like_path(s: str) -> bool:
    if not s or len(s) > 400 or "\n" in s or "{" in s or "%" in s or "://" in s:
        return False
    return "/" in s or bool(re.search(r"\.(npy|npz|csv|txt|json|pt|pth|ckpt|h5|pkl|tsv|bin|tar|gz|zip|png|jpg)$",
                                      s, re.I))


def _writable(p: Path) -> tuple[bool, str]:
    p = Path(os.path.abspath(p))
    long = _too_long(p)
    if long:
        return False, long
    if _exists(p) and p.is_file():
        return (True, "") if os.access(p, os.W_OK) else (False, f"no write permission on file {p}")
    anc = p
    while not _exists(anc):
        anc = anc.parent
    if not anc.is_dir():
        return False, f"{anc} is a file, not a directory"
    parts = anc.parts
    if len(parts) > 1 and parts[1] in ("sys", "proc"):
        return False, f"{anc} is a kernel filesystem ({'/' + parts[1]}), not writable even by root"
    if not os.access(anc, os.W_OK | os.X_OK):
        return False, f"no write permission on {anc}"
    try:
        if os.statvfs(anc).f_flag & os.ST_RDONLY:
            return False, f"{anc} is on a read-only filesystem"
    except OSError:
        pass
    return True, ""


def _cli_values(args: list[str]) -> dict[str, str]:
    out = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            if "=" in a:
                k, v = a.split("=", 1)
                out[k] = v
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                out[a] = args[i + 1]
                i += 1
        i += 1
    return out


class ScriptError(UsageError):
    """The script file cannot be read at all (permissions, a folder, an I/O error): bad input."""


#: Largest script the checker reads (parsing holds its syntax tree, tens of times the file's size, in memory).
MAX_SCRIPT_BYTES = 4 << 20


def _read(script: Path) -> bytes:
    try:
        size = script.stat().st_size
        if size > MAX_SCRIPT_BYTES:
            raise ScriptError(f"{script}: {size / 2**20:.1f} MiB, larger than the {MAX_SCRIPT_BYTES >> 20} MiB a "
                              "training script is checked up to; check the script that is run, not generated data")
        return script.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"no such script: {script}") from None
    except OSError as e:
        raise ScriptError(f"cannot read the script {script} ({e.strerror or e}); check the path and its "
                          "permissions") from None


def _parse(script: Path) -> tuple[ast.Module | None, str, Finding | None]:
    """(tree, source text, None) or (None, "", a ``syntax`` finding): what Python itself would refuse.

    The bytes go to the parser as Python reads a script (a PEP 263 coding line or a BOM picks the
    encoding, otherwise UTF-8), so an undecodable file, NUL bytes or nesting deeper than the
    parser's limits are the syntax errors Python would report, not a crash of the checker.
    """
    data = _read(script)
    try:
        tree = ast.parse(data, filename=str(script))
    except SyntaxError as e:
        msg = " ".join(str(e.msg).split())
        return None, "", Finding("syntax", "error", f"syntax error: {msg}", e.lineno if isinstance(e.lineno, int)
                                 and e.lineno > 0 else None)
    except (RecursionError, MemoryError):
        return None, "", Finding("syntax", "error", "syntax error: nested too deeply for Python's parser "
                                 "(it would refuse the script too)")
    except ValueError as e:  # e.g. NUL bytes in the source (older Pythons)
        return None, "", Finding("syntax", "error", f"syntax error: {' '.join(str(e).split())}")
    try:
        enc = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
        src = data.decode(enc, errors="replace")
    except (SyntaxError, LookupError):
        src = data.decode("utf-8", errors="replace")
    return tree, src, None


def _target_syntax(src: str, script: Path, target_python: str) -> Finding | None:
    """A ``syntax`` finding when the job's interpreter ``target_python`` would refuse ``src``, else None."""
    if target_python not in TARGET_PYTHONS:
        raise UsageError(f"target Python must be one of {', '.join(TARGET_PYTHONS)}, not {target_python!r}")
    major, minor = (int(x) for x in target_python.split("."))
    try:
        ast.parse(src, filename=str(script), feature_version=(major, minor))
    except SyntaxError as e:
        msg = " ".join(str(e.msg).split())
        return Finding("syntax", "error", f"syntax error on Python {target_python} (the job's interpreter): {msg}",
                       e.lineno if isinstance(e.lineno, int) and e.lineno > 0 else None)
    return None


def static_check(script: str | os.PathLike, args: list[str] | None = None, cwd: str | os.PathLike | None = None,
                 cuda_available: bool | None = None,
                 target_python: str | None = None) -> tuple[list[Finding], int | None]:
    """Static pass over ``script``: returns (findings, full batch size or None).

    Parameters
    ----------
    script : path
    args : list of str
        The command-line arguments the job will get.
    cwd : path
        Working directory of the job (default: the current one).
    cuda_available : bool, optional
        Whether the target has CUDA; default: ask torch if installed, else False.
    target_python : str, optional
        The job's Python version (one of :data:`TARGET_PYTHONS`): a construct its grammar lacks is a
        ``syntax`` error.
    """
    script = Path(script)
    args = list(args or [])
    cwd = Path(cwd) if cwd is not None else Path.cwd()
    tree, src, problem = _parse(script)
    if problem is None and target_python is not None:
        problem = _target_syntax(src, script, target_python)
    if problem is not None:
        return [problem], None
    out: list[Finding] = []
    sdir = script.parent
    modules = _module_aliases(tree)

    def resolve(s: str) -> Path:
        return Path(s) if os.path.isabs(s) else cwd / s

    # modules
    guarded = _guarded_imports(tree)
    seen = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module.split(".")[0]]
        for n in names:
            if n in seen or node.lineno in guarded:
                continue
            seen.add(n)
            if not _module_ok(n, sdir):
                out.append(Finding("module", "error", f"module {n!r} is not installed in {sys.executable}",
                                   node.lineno))

    # argparse options: defaults and command-line values
    cli = _cli_values(args)
    full_batch = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            opts = [s for s in (_const_str(a) for a in node.args) if s and s.startswith("-")]
            if not opts:
                continue
            default = None
            for kw in node.keywords:
                if kw.arg == "default" and isinstance(kw.value, ast.Constant):
                    default = kw.value.value
            val = next((cli[o] for o in opts if o in cli), default)
            name = opts[-1].lstrip("-")
            if any(o in _BATCH_OPT for o in opts):
                try:
                    full_batch = int(val)
                except (TypeError, ValueError, OverflowError):
                    pass
                continue
            if not isinstance(val, str) or not val:
                continue
            if _OUT_OPT.search(name) and not re.search(r"resume|pretrained|_in\b", name, re.I):
                okw, why = _writable(resolve(val))
                if not okw:
                    out.append(Finding("permission", "error", f"{opts[-1]}={val!r}: {why}", node.lineno))
            elif _IN_OPT.search(name) and _looks_like_path(val) and not _exists(resolve(val)):
                extra = " (it exists relative to the script's folder)" if _exists(sdir / val) else ""
                out.append(Finding("path", "error", f"{opts[-1]}={val!r} does not exist in {cwd}{extra}",
                                   node.lineno))
    if full_batch is None:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id.upper() in ("BATCH_SIZE", "BATCH", "BS")
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
                full_batch = node.value.value
    # calls: reads, writes, API misuse
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for node in calls:
        fname = _dotted(node.func)
        last = fname.split(".")[-1]
        first = _const_str(node.args[0]) if node.args else None
        mode = None
        if last == "open":
            m = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"),
                                                                None)
            mode = _const_str(m) if m is not None else "r"
        is_write = last in _WRITERS or (mode is not None and any(c in mode for c in "wax+"))
        target = first
        if last in ("save",) and fname.startswith("torch") and len(node.args) > 1:
            target = _const_str(node.args[1])
        if target is not None and is_write and (_looks_like_path(target) or last in ("makedirs", "mkdir")):
            okw, why = _writable(resolve(target))
            if not okw:
                out.append(Finding("permission", "error", f"{fname}({target!r}): {why}", node.lineno))
        elif first is not None and last in _READERS and _looks_like_path(first) and not _exists(resolve(first)):
            extra = " (it exists relative to the script's folder)" if _exists(sdir / first) else ""
            out.append(Finding("path", "error", f"{fname}({first!r}): no such file in {cwd}{extra}", node.lineno))
        if last == "load" and fname.startswith("torch") and not any(k.arg == "map_location" for k in node.keywords):
            if cuda_available is False or (cuda_available is None and not _cuda()):
                out.append(Finding("api", "warning", "torch.load without map_location: tensors saved on a GPU "
                                   "fail to load on this CPU-only host", node.lineno))
        if last == "cuda" and isinstance(node.func, ast.Attribute) and not node.args:
            if "is_available" not in src and (cuda_available is False or (cuda_available is None and not _cuda())):
                out.append(Finding("gpu", "error", f"{fname}: CUDA is not available here and the script does not "
                                   "check torch.cuda.is_available()", node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _assigns_none(node.value, modules):
            out.append(Finding("api", "error", f"{_dotted(node.value.func)}() works in place and returns None; "
                               "its result is assigned", node.lineno))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func,
                                                                                          ast.Attribute):
            attr = node.value.func.attr
            if attr in _DISCARDED and isinstance(node.value.func.value, (ast.Name, ast.Attribute, ast.Subscript)):
                out.append(Finding("api", "error", f"result of {_dotted(node.value.func)}() is discarded: it returns "
                                   "a new array/tensor, the original is unchanged", node.lineno))
        if (isinstance(node, ast.Subscript) and _dotted(node.value) == "os.environ" and isinstance(node.ctx, ast.Load)):
            key = _const_str(node.slice)
            if key and key not in os.environ and not key.startswith("HWCOSIM_"):
                out.append(Finding("path", "error", f"environment variable {key!r} is not set", node.lineno))
    names = {_dotted(c.func).split(".")[-1] for c in calls}
    if "step" in names and "zero_grad" not in names and "backward" in names:
        line = next(c.lineno for c in calls if _dotted(c.func).endswith(".step"))
        out.append(Finding("api", "error", "optimizer.step() without zero_grad(): gradients accumulate across steps",
                           line))
    if names & {"softmax", "Softmax"} and names & {"CrossEntropyLoss", "cross_entropy"}:
        line = next(c.lineno for c in calls if _dotted(c.func).split(".")[-1] in ("softmax", "Softmax"))
        out.append(Finding("api", "warning", "softmax output fed to CrossEntropyLoss/cross_entropy, which applies "
                           "log-softmax itself: pass logits", line))
    return out, full_batch


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


# ---- dry run -------------------------------------------------------------------------------------
def _top_imports(script: Path) -> list[str]:
    tree = _parse(script)[0]
    if tree is None:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return [n for n in dict.fromkeys(out) if _module_ok(n.split(".")[0], script.parent)]


def dry_run(script: str | os.PathLike, args: list[str] | None = None, cfg: CheckConfig = CheckConfig(),
            cwd: str | os.PathLike | None = None) -> dict:
    """Run ``script`` in the sandbox (:mod:`hwcosim.models.systems.jobs.sandbox`) at the tiny batch
    sizes of ``cfg``; return the child's result dict.

    The working folder ``cwd`` and the script's folder are private copy-on-write copies, every
    other path is read-only, ``/tmp`` is private, there is no network, every process the script
    starts is killed at the end, and address space, CPU time, file size and the number of tasks
    are limited. Adds ``returncode``, ``stdout``/``stderr`` tails, ``timed_out`` and ``sandbox``
    (its limits). Raises :class:`~hwcosim.models.systems.jobs.sandbox.SandboxUnavailable` (a
    ``UsageError``) when the sandbox cannot be guaranteed here; nothing is run then.
    """
    runner = Path(__file__).with_name("_dryrun.py")
    script = Path(os.path.realpath(script))
    work = Path(os.path.realpath(cwd if cwd is not None else Path.cwd()))
    with tempfile.TemporaryDirectory(prefix="jobcheck-") as td:
        res_path, cfg_path = Path(td) / "result.json", Path(td) / "cfg.json"
        res_fd = os.open(res_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        conf = {"script": str(script), "args": list(args or []), "batches": list(cfg.batches),
                "steps": cfg.steps, "result": f"fd:{res_fd}", "cpu_s": int(cfg.timeout_s) + 1,
                "address_space_bytes": cfg.address_space_bytes, "batch_options": list(_BATCH_OPT),
                "epoch_options": list(_EPOCH_OPT), "step_options": list(_STEP_OPT),
                "preimport": _top_imports(script)}
        cfg_path.write_text(json.dumps(conf))
        cfg_fd = os.open(cfg_path, os.O_RDONLY)
        env = dict(os.environ)
        env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                    "CUDA_VISIBLE_DEVICES": env.get("CUDA_VISIBLE_DEVICES", ""), "HF_HUB_OFFLINE": "1",
                    "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "",
                    "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"})
        # output to files, not pipes: a process the script leaves behind must not keep us waiting
        out_f, err_f = Path(td) / "stdout.txt", Path(td) / "stderr.txt"
        try:
            with open(out_f, "wb") as fo, open(err_f, "wb") as fe:
                sb = sandbox.run([sys.executable, str(runner), f"fd:{cfg_fd}"], cwd=work, inputs=[script.parent],
                                 limits=cfg.sandbox, address_space_bytes=cfg.address_space_bytes,
                                 cpu_s=int(cfg.timeout_s) + 1, timeout_s=cfg.timeout_s, env=env, stdout=fo,
                                 stderr=fe, pass_fds=(cfg_fd, res_fd), what="hwcosim jobcheck --run")
        finally:
            os.close(cfg_fd)
            os.close(res_fd)
        so = out_f.read_bytes()[-8000:].decode(errors="replace")
        se = err_f.read_bytes()[-8000:].decode(errors="replace")
        try:
            res = json.loads(res_path.read_text())
        except (OSError, ValueError):  # the child died before writing it (signal, resource limit)
            res = {"runs": [], "fp_events": [], "exception": None}
    res.update({"returncode": sb.returncode, "timed_out": sb.timed_out, "stdout": so[-4000:], "stderr": se[-4000:],
                "sandbox": {"private": sb.private, **asdict(cfg.sandbox),
                            "address_space_bytes": cfg.address_space_bytes, "cpu_s": int(cfg.timeout_s) + 1}})
    return res


def _classify(exc: dict) -> str:
    mro, msg = set(exc["mro"]), exc["message"]
    if mro & {"ModuleNotFoundError", "ImportError"}:
        return "module"
    if mro & {"FileNotFoundError", "NotADirectoryError", "IsADirectoryError"}:
        return "path"
    if "PermissionError" in mro or exc.get("errno") in (13, 30, 1):
        return "permission"
    if "MemoryError" in mro or "_ArrayMemoryError" in mro or re.search(r"out of memory|Unable to allocate", msg):
        return "memory"
    if re.search(r"CUDA|cuda|NVIDIA driver|no GPU", msg):
        return "gpu"
    if "KeyError" in mro and exc.get("line") is not None and "environ" in exc.get("traceback", ""):
        return "path"
    if mro & {"ValueError", "RuntimeError", "IndexError"} and _SHAPE_RE.search(msg):
        return "shape"
    if "FloatingPointError" in mro:
        return "numeric"
    if exc["type"] == "SystemExit" and msg == "exit 2":
        return "args"
    return "runtime"


def _dryrun_findings(res: dict, cfg: CheckConfig, full_batch: int | None) -> tuple[list[Finding], float | None]:
    out: list[Finding] = []
    exc = res.get("exception")
    if res.get("timed_out"):
        out.append(Finding("timeout", "warning", f"dry run exceeded {cfg.timeout_s:.0f} s; make the script honour "
                           "HWCOSIM_STEPS / HWCOSIM_BATCH", source="dryrun"))
    elif exc is not None:
        cat = _classify(exc)
        msg = f"dry run (batch {exc['batch']}) raised {exc['type']}: {exc['message'][:300]}"
        sev = "error"
        lim = cfg.sandbox
        if exc.get("errno") == errno.EFBIG:
            msg += f" (the dry run's file-size limit is {lim.file_bytes / 2**20:g} MiB)"
        elif exc.get("errno") == errno.ENOSPC:
            msg += f" (the dry run's scratch space of {lim.scratch_bytes / 2**20:g} MiB is full)"
        elif exc.get("errno") == errno.EROFS and exc.get("filename") and _writable(Path(exc["filename"]))[0]:
            # writable on the host: only the sandbox refused it (read-only outside the private folders)
            sev = "warning"
            msg += ("; the sandbox keeps everything outside the working folder, the script's folder and /tmp "
                    "read-only, and this path is writable here, so the dry run stopped at this write")
        out.append(Finding(cat, sev, msg, exc.get("line"), "dryrun"))
    elif res.get("returncode") not in (0, None):
        out.append(Finding("runtime", "error", f"dry run child exited with status {res['returncode']} "
                           f"(signal or resource limit); stderr: {res.get('stderr', '')[-200:]}", source="dryrun"))
    fp = res.get("fp_events", [])
    if fp:
        kinds = sorted({e["kind"] for e in fp})
        out.append(Finding("numeric", "error", f"numpy floating-point {', '.join(kinds)} in the first steps "
                           f"({len(fp)} event(s)): NaN/Inf in activations or loss", fp[0].get("line"), "dryrun"))
    elif _NAN_RE.search(res.get("stdout", "")):
        out.append(Finding("numeric", "error", "a printed loss is NaN/Inf in the first steps", source="dryrun"))
    est = None
    runs = res.get("runs", [])
    if len(runs) == 2 and exc is None and full_batch:
        key = "max_rss_bytes" if runs[-1]["torch"] else "traced_peak_bytes"
        (b1, m1), (b2, m2) = [(r["batch"], r[key]) for r in runs]
        slope = max((m2 - m1) / (b2 - b1), 0.0)
        est = m1 + slope * (full_batch - b1)
        if est > cfg.device_memory_bytes:
            out.append(Finding("memory", "error", f"estimated peak memory {est / 2**30:.1f} GiB at batch {full_batch} "
                               f"exceeds the device's {cfg.device_memory_bytes / 2**30:.1f} GiB "
                               f"(linear fit of {b1} -> {m1 / 2**20:.1f} MiB, {b2} -> {m2 / 2**20:.1f} MiB)",
                               source="dryrun"))
        elif est > 0.9 * cfg.device_memory_bytes:
            out.append(Finding("memory", "warning", f"estimated peak memory {est / 2**30:.1f} GiB is within 10% of "
                               f"the device's {cfg.device_memory_bytes / 2**30:.1f} GiB", source="dryrun"))
    return out, est


def check(script: str | os.PathLike, args: list[str] | None = None, cfg: CheckConfig = CheckConfig(),
          cwd: str | os.PathLike | None = None) -> Report:
    """Static pass, then (unless the static pass found a syntax error or ``cfg.dry_run`` is off) the dry run.

    Raises
    ------
    FileNotFoundError
        If ``script`` does not exist.
    ScriptError
        If it cannot be read (a folder, no permission, an I/O error). A script Python would refuse
        (bad syntax, undecodable bytes) is not an error: it is a ``syntax`` finding.
    SandboxUnavailable
        If ``cfg.dry_run`` and the sandbox cannot be guaranteed on this machine (nothing is run).
    """
    script = Path(script)
    if not _exists(script):
        raise FileNotFoundError(f"no such script: {script}")
    if script.is_dir():
        raise ScriptError(f"{script} is a folder; pass the training script (.py) itself")
    if cfg.dry_run:  # refused before anything runs when the sandbox cannot be guaranteed here
        sandbox.require("hwcosim jobcheck --run", hint="the static checks run without --run")
    findings, full_batch = static_check(script, args, cwd, target_python=cfg.target_python)
    rep = Report(str(script), findings, full_batch=full_batch)
    if cfg.dry_run and "syntax" not in rep.categories:
        res = dry_run(script, args, cfg, cwd)
        dyn, est = _dryrun_findings(res, cfg, full_batch)
        # a dry-run failure already explained by the static pass is reported once
        static_cats = {f.category for f in findings if f.severity == "error"}
        rep.findings += [f for f in dyn if not (f.category in static_cats and f.category in ("module", "path",
                                                                                               "permission", "gpu"))]
        rep.dryrun, rep.memory_estimate_bytes = res, est
    return rep


# ---- corpus --------------------------------------------------------------------------------------
def corpus_dir() -> Path:
    """Folder of the shipped corpus of small training scripts."""
    return Path(__file__).with_name("corpus")


def corpus_scripts(exclude_requires: tuple[str, ...] = ()) -> list[tuple[Path, str, list[str]]]:
    """(script, expected category or "ok", args) for every corpus script.

    Each script's header holds ``# jobcheck-expect: CATEGORY`` and optionally
    ``# jobcheck-args: ...`` and ``# jobcheck-requires: torch``; scripts needing a missing module
    are left out, and so are scripts requiring a module in ``exclude_requires``.
    """
    out = []
    for p in sorted(corpus_dir().glob("*.py")):
        head = p.read_text().splitlines()[:8]
        meta = dict(re.match(r"#\s*jobcheck-(\w+):\s*(.*)", h).groups() for h in head
                    if re.match(r"#\s*jobcheck-(\w+):", h))
        if "expect" not in meta:
            continue
        req = meta.get("requires", "").split()
        if any(r in exclude_requires or importlib.util.find_spec(r) is None for r in req):
            continue
        out.append((p, meta["expect"].strip(), meta.get("args", "").split()))
    return out


def evaluate_corpus(cfg: CheckConfig = CheckConfig(), cwd: str | os.PathLike | None = None,
                    exclude_requires: tuple[str, ...] = (), progress=None) -> dict:
    """Run :func:`check` on the corpus; detection rate over broken scripts, false positives over correct ones.

    A broken script counts as detected when a finding of its expected category (error or
    warning) is reported; a correct script is a false positive when any finding is reported.
    ``progress(k, n, row)`` is called after each script (``row`` as in the result's ``rows``).
    """
    rows = []
    scripts = corpus_scripts(exclude_requires)
    for k, (p, expect, args) in enumerate(scripts):
        t0 = time.monotonic()
        rep = check(p, args, cfg, cwd)
        hit = (expect in rep.categories) if expect != "ok" else not rep.findings
        rows.append({"script": p.name, "expect": expect, "found": sorted(rep.categories), "correct": hit,
                     "findings": [asdict(f) for f in rep.findings],
                     "memory_estimate_GiB": None if rep.memory_estimate_bytes is None
                     else rep.memory_estimate_bytes / 2**30, "seconds": time.monotonic() - t0})
        if progress:
            progress(k + 1, len(scripts), rows[-1])
    bad = [r for r in rows if r["expect"] != "ok"]
    good = [r for r in rows if r["expect"] == "ok"]
    return {"rows": rows, "broken": len(bad), "detected": sum(r["correct"] for r in bad),
            "detection_rate": sum(r["correct"] for r in bad) / max(len(bad), 1), "correct_scripts": len(good),
            "false_positives": sum(not r["correct"] for r in good),
            "missed": [r["script"] for r in bad if not r["correct"]],
            "false_positive_scripts": [r["script"] for r in good if not r["correct"]]}
