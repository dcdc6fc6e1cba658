"""Run an untrusted command (``hwcosim jobcheck --run``'s dry run) in a Linux sandbox.

Guarantees, each given by the kernel rather than by the command's good manners:

private inputs
    The folders the command needs (its working folder, the script's folder) are private
    copy-on-write copies: an overlay mount whose lower layer is the folder (read-only) and whose
    upper layer is in the scratch ``tmpfs``. The command sees its files at their usual paths;
    the first write to a file copies it into the scratch (the kernel's copy-up), new files are
    created there, deletions are recorded there; nothing is ever written back, and the copies
    vanish with the sandbox. Reading costs no copy, so there is no read budget: the budget is on
    what the command writes (copied-up files included), :class:`SandboxLimits` ``scratch_bytes``
    (default 1 GiB; over it, writes fail with "No space left on device"). Mounts below a copied
    folder (which an overlay's lower layer does not show) are bound back read-only. ``/`` itself
    and folders in ``/proc``, ``/sys``, ``/dev``, ``/run`` are never made private: run from one
    and it stays read-only.
writes confined, then discarded
    A new mount namespace in which every existing mount is remounted read-only (``nosuid``,
    ``nodev``); ``/tmp`` is an overlay over the host's ``/tmp`` whose writes go to the scratch;
    ``/dev`` is private (``null``, ``zero``, ``full``, ``random``, ``urandom``, a ``tmpfs``
    ``/dev/shm``); ``/run`` is hidden. The scratch (a ``tmpfs`` of ``scratch_bytes``) disappears with
    the namespace. The command runs as uid 0 with every capability dropped
    (bounding set included, ``no_new_privs``), so it cannot remount, mount, or write a device.
no network
    A new network namespace: a downed loopback and nothing else (a connect to a listener on the
    host's 127.0.0.1 fails; the abstract unix socket namespace is private too).
every descendant killed
    A new PID namespace whose init is ours: when the command exits (or the wall-clock limit
    expires and the host kills the sandbox) the kernel kills every process left in it, ``setsid``
    and double-forked children included. The host also puts the sandbox in a fresh ``pids``
    cgroup and returns only once that cgroup is empty.
resource limits
    ``RLIMIT_AS`` (address space), ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (file size, also bounding the
    captured output), ``RLIMIT_CORE`` = 0 in the command's process. Processes: uid 0 is exempt
    from ``RLIMIT_NPROC``, so the number of tasks (processes and threads) is bounded by the
    ``pids`` cgroup's ``pids.max`` (``tasks``, default 256).

Mechanism: the ``unshare`` command of util-linux (mount, network, PID, IPC and UTS namespaces),
with :mod:`_sandbox_init` as the namespace's PID 1 (it does the mounts, drops privileges, forks
the command and reaps orphans). Requirements, checked by :func:`unavailable_reason`: Linux, root,
``unshare``, overlayfs, a writable ``pids`` cgroup (v1 or v2), and a namespace probe that succeeds.
When one is missing, :func:`require` raises :class:`SandboxUnavailable` (a ``UsageError``) naming
the guarantee that cannot be given, and nothing is run.

Not covered: the command can *read* whatever uid 0 can read on the host (read-only); it could
connect to a unix socket file of a host daemon outside ``/run`` and ``/var/run`` (for example
under ``/tmp``), since a socket file stays connectable on a read-only mount; memory is bounded
per process (``RLIMIT_AS``) times the task limit, plus the scratch's size for files; the kernel
keyrings of uid 0 are not namespaced (a ``keyctl`` call could leave a key behind).
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["SandboxLimits", "SandboxResult", "SandboxUnavailable", "unavailable_reason", "require", "run",
           "private_roots", "find_unshare", "UNSHARE_FLAGS"]

UNSHARE_FLAGS = ("--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--mount-proc", "--propagation", "private",
                 "--kill-child")
_INIT = Path(__file__).with_name("_sandbox_init.py")


class SandboxUnavailable(UsageError):
    """The sandbox cannot give one of its guarantees on this machine; nothing was run."""


@dataclass(frozen=True)
class SandboxLimits:
    """Budgets of the sandbox.

    Parameters
    ----------
    scratch_bytes : int
        Space the command may write: ``/tmp`` and its private copies (files it changes are copied
        up whole).
    shm_bytes : int
        Size of ``/dev/shm``.
    file_bytes : int
        ``RLIMIT_FSIZE``: largest file the command may write (its captured output included).
    tasks : int
        ``pids.max`` of the sandbox's cgroup: processes plus threads, the sandbox's own two included.
    """

    scratch_bytes: int = 1 * 2**30
    shm_bytes: int = 256 * 2**20
    file_bytes: int = 1 * 2**30
    tasks: int = 256

    def __post_init__(self):
        for name in ("scratch_bytes", "shm_bytes", "file_bytes"):
            if int(getattr(self, name)) < 1:
                raise UsageError(f"sandbox limit {name} must be >= 1, not {getattr(self, name)}")
        if self.tasks < 8:
            raise UsageError(f"sandbox limit tasks must be >= 8 (the sandbox itself takes 2), not {self.tasks}")


@dataclass
class SandboxResult:
    """Outcome of :func:`run`: ``returncode`` as :class:`subprocess.Popen` gives it (negative: the
    signal that killed the command; None: wall-clock limit) and the private folders."""

    returncode: int | None
    timed_out: bool
    private: list[str] = field(default_factory=list)


def find_unshare() -> str | None:
    """Path of util-linux's ``unshare`` (a separate function, so that tests can take it away)."""
    return shutil.which("unshare")


def _mountinfo() -> list[tuple[str, str, str]]:
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                pre, _, post = line.partition(" - ")
                fields, tail = pre.split(), post.split()
                if len(fields) >= 5 and len(tail) >= 3:
                    out.append((fields[4].replace("\\040", " "), tail[0], tail[2]))
    except OSError:
        pass
    return out


def _pids_cgroup_root() -> Path | None:
    """A writable cgroup folder under which a child with ``pids.max`` can be made, or None."""
    mounts = _mountinfo()
    for mp, fstype, opts in mounts:  # cgroup v1 with the pids controller
        if fstype == "cgroup" and "pids" in opts.split(",") and os.access(mp, os.W_OK):
            return Path(mp)
    for mp, fstype, _ in mounts:  # cgroup v2: its root, with pids enabled for children
        if fstype != "cgroup2" or not os.access(mp, os.W_OK):
            continue
        try:
            if "pids" not in Path(mp, "cgroup.controllers").read_text().split():
                continue
            ctl = Path(mp, "cgroup.subtree_control")
            if "pids" not in ctl.read_text().split():
                ctl.write_text("+pids")
            return Path(mp)
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=4)
def _probe(unshare: str) -> str | None:
    try:
        p = subprocess.run([unshare, *UNSHARE_FLAGS, "true"], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{unshare} could not be run ({e})"
    if p.returncode != 0:
        err = p.stderr.decode(errors="replace").strip().splitlines()
        return f"the kernel refused the namespaces ({err[-1] if err else f'status {p.returncode}'})"
    return None


def unavailable_reason() -> str | None:
    """None when every guarantee can be given here; else the missing one, as a phrase."""
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform}): no namespaces to confine writes, network and processes"
    unshare = find_unshare()
    if not unshare:
        return ("the util-linux `unshare` command is not installed: writes, network and processes cannot be "
                "confined")
    if os.geteuid() != 0:
        return ("not running as root: the mount, network and PID namespaces and the pids cgroup it needs cannot be "
                "created by an unprivileged user here")
    try:
        has_overlay = "overlay" in Path("/proc/filesystems").read_text()
    except OSError:
        has_overlay = False
    if not has_overlay:
        return "no overlayfs in this kernel: /tmp cannot be made private"
    if _pids_cgroup_root() is None:
        return "no writable pids cgroup: the number of processes cannot be bounded"
    return _probe(unshare)


def require(what: str = "this command", hint: str = "") -> None:
    """Raise :class:`SandboxUnavailable` (one line, ending with ``hint``) when the sandbox cannot be given here."""
    why = unavailable_reason()
    if why:
        raise SandboxUnavailable(f"{what} refused: the sandbox cannot be guaranteed on this machine ({why}); "
                                 f"nothing was run{'; ' + hint if hint else ''}")


def _system_folder(p: Path) -> bool:
    """``/`` itself, or a folder in ``/proc``, ``/sys``, ``/dev``, ``/run``: never given a private copy."""
    return p == Path(p.anchor) or any(p == Path(d) or Path(d) in p.parents for d in ("/proc", "/sys", "/dev", "/run"))


def private_roots(folders: list[str | os.PathLike]) -> list[str]:
    """The folders that get a private copy: ``folders`` resolved, without those inside another and
    without system folders (``/`` itself, ``/proc``, ``/sys``, ``/dev``, ``/run``), which stay read-only."""
    tops: list[Path] = []
    for f in (Path(os.path.realpath(f)) for f in folders):
        if _system_folder(f) or any(t == f or t in f.parents for t in tops):
            continue
        tops = [t for t in tops if f not in t.parents] + [f]
    return [str(t) for t in tops]


class _PidsCgroup:
    def __init__(self, tasks: int):
        root = _pids_cgroup_root()
        if root is None:
            raise SandboxUnavailable("the sandbox cannot bound the number of processes: no writable pids cgroup; "
                                     "nothing was run")
        self.path = root / f"hwcosim-sandbox-{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(int(tasks)))
        self._procs = str(self.path / "cgroup.procs")

    def join(self) -> None:  # runs in the child between fork and exec
        with open(self._procs, "w") as f:
            f.write(str(os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in Path(self._procs).read_text().split()]
        except (OSError, ValueError):
            return []

    def destroy(self, deadline_s: float = 10.0) -> bool:
        """Kill whatever is left in the cgroup, wait until it is empty, remove it."""
        end = time.monotonic() + deadline_s
        while True:
            left = self.pids()
            if not left:
                break
            if time.monotonic() > end:
                return False
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > end:
                    return False
                time.sleep(0.01)


def run(argv: list[str], *, cwd: str | os.PathLike, inputs: list[str | os.PathLike] = (),
        limits: SandboxLimits = SandboxLimits(), address_space_bytes: int = 0, cpu_s: int | None = None,
        timeout_s: float = 60.0, env: dict | None = None, stdout=None, stderr=None, pass_fds=(),
        what: str = "this command") -> SandboxResult:
    """Run ``argv`` (an absolute executable path first) in the sandbox, in ``cwd``.

    ``cwd`` and ``inputs`` (folders) get private copies as described above; ``stdout``/``stderr`` are open
    files of the host (files, not pipes: nothing the command leaves behind can keep us waiting);
    ``pass_fds`` are handed through to the command. Returns once every process of the sandbox is
    gone. Raises :class:`SandboxUnavailable` when a guarantee cannot be given (nothing is run).
    """
    require(what)
    cwd = Path(os.path.realpath(cwd))
    if not cwd.is_dir():
        raise UsageError(f"working folder {cwd} is not a folder")
    roots = private_roots([cwd, *inputs])
    try:
        cg = _PidsCgroup(limits.tasks)
    except OSError as e:
        raise SandboxUnavailable(f"{what} refused: the sandbox's pids cgroup could not be made ({e.strerror or e}); "
                                 "nothing was run") from None
    td = Path(tempfile.mkdtemp(prefix="hwcosim-sandbox-"))
    try:
        scratch = td / "scratch"
        scratch.mkdir()
        status_path = td / "status.json"
        status_fd = os.open(status_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        spec = {"roots": roots, "cwd": str(cwd), "scratch": str(scratch), "argv": list(argv),
                "scratch_bytes": int(limits.scratch_bytes),
                "shm_bytes": int(limits.shm_bytes), "status_fd": status_fd, "keep_fds": [status_fd, *pass_fds],
                "env": {"TMPDIR": "/tmp", "XDG_CACHE_HOME": "/tmp/.cache", "MPLCONFIGDIR": "/tmp/.matplotlib"},
                "limits": {"address_space_bytes": int(address_space_bytes or 0), "cpu_s": cpu_s,
                           "file_bytes": int(limits.file_bytes), "tasks": int(limits.tasks)}}
        spec_path = td / "spec.json"
        spec_path.write_text(json.dumps(spec))
        cmd = [find_unshare(), *UNSHARE_FLAGS, sys.executable, "-I", "-S", str(_INIT), str(spec_path)]
        try:
            p = subprocess.Popen(cmd, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                                 pass_fds=(status_fd, *pass_fds), start_new_session=True, preexec_fn=cg.join)
        except (OSError, subprocess.SubprocessError) as e:  # joining the cgroup or starting unshare failed
            raise SandboxUnavailable(f"{what} refused: the sandbox could not be started ({e}); nothing was run") \
                from None
        finally:
            os.close(status_fd)
        try:
            p.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if p.poll() is None:
                p.kill()  # --kill-child: the namespace's init dies, and with it every process inside
            p.wait()
            cg.destroy()
        try:
            status = json.loads(status_path.read_text() or "{}")
        except (OSError, ValueError):
            status = {}
    finally:
        shutil.rmtree(td, ignore_errors=True)
        if cg.path.exists():
            cg.destroy()
    if "setup_error" in status:
        raise SandboxUnavailable(f"{what} refused: the sandbox could not be set up ({status['setup_error']}); "
                                 "nothing was run")
    if timed_out:
        rc = None
    elif "signal" in status:
        rc = -int(status["signal"])
    elif "exit" in status:
        rc = int(status["exit"])
    else:  # the init itself was killed (its status never written)
        rc = p.returncode if p.returncode and p.returncode < 0 else -signal.SIGKILL
    return SandboxResult(rc, timed_out, roots)
