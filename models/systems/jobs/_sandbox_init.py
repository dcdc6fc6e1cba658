"""Init (PID 1) of the sandbox of :mod:`hwcosim.models.systems.jobs.sandbox` (executed by path).

Not imported by the package and standard library only: the host runs
``unshare --mount --net --pid --ipc --uts --fork --mount-proc --propagation private --kill-child
python -I -S _sandbox_init.py SPEC``, so this file starts as root, PID 1 of a new PID namespace, in
a new mount, network (a downed loopback only), IPC and UTS namespace. SPEC (JSON, written by the
host) names the folders to make private, the scratch folder, the command and the limits. Steps:

1. read ``/proc/self/mountinfo``; open (``O_PATH``) the mounts below ``/tmp`` and below the private
   folders (an overlay's lower layer does not show them);
2. remount every existing mount read-only, ``nosuid``, ``nodev`` (bind remount: only this
   namespace's view changes, the host's mounts are untouched);
3. mount the scratch ``tmpfs`` (``scratch_bytes``) on the host's empty scratch folder;
4. a private ``/dev`` (``null``, ``zero``, ``full``, ``random``, ``urandom``, a ``tmpfs`` ``/dev/shm``);
5. ``/run`` (and ``/var/run`` when it is a folder) hidden by an empty read-only ``tmpfs`` (the unix
   sockets of the host's daemons live there; a socket file is connectable on a read-only mount);
6. ``/tmp``, then each private folder not inside ``/tmp``: an overlay whose lower layer is the
   folder (read-only) and whose upper layer is in the scratch, so the command sees its files at
   their usual paths and whatever it writes is copied up into the scratch; the mounts of step 1
   bound back (read-only);
7. every other file descriptor closed, every capability dropped (bounding set, effective,
   permitted, inheritable, ambient; ``no_new_privs``): the command runs as uid 0 without
   privileges, so it can neither remount, nor mount, nor write a device or a read-only file;
8. fork; the child sets its resource limits (``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``,
   ``RLIMIT_CORE`` = 0, ``RLIMIT_NPROC``) and executes the command; this process reaps orphans until
   the command exits, writes its status to the host's status file descriptor and exits, upon
   which the kernel kills every process left in the namespace, ``setsid`` children included.

A failure of steps 1-7 is written to the status descriptor as ``setup_error`` and nothing is run.
"""

import ctypes
import json
import os
import re
import resource
import signal
import stat
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND = 32, 4096
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_OPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
              "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class SetupError(Exception):
    pass


def _b(s):
    return None if s is None else os.fsencode(s)


def mount(src, target, fstype, flags, data=None):
    if _libc.mount(_b(src), _b(target), _b(fstype), flags, _b(data)) != 0:
        e = ctypes.get_errno()
        raise SetupError(f"mount {fstype or 'bind/remount'} on {target}: {os.strerror(e)}")


def prctl(option, arg):
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        e = ctypes.get_errno()
        raise SetupError(f"prctl({option}, {arg}): {os.strerror(e)}")


def _unescape(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mountinfo():
    """(mount point, per-mount flags) of every mount of this namespace, in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            flags = 0
            for o in fields[5].split(","):
                flags |= _OPT_FLAGS.get(o, 0)
            out.append((_unescape(fields[4]), flags))
    return out


def remount_all_readonly(mounts):
    for mp, flags in mounts:
        if not os.path.lexists(mp):  # shadowed by a later mount or gone: not reachable by any path
            continue
        mount(None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | flags)


def _opt_path(p):
    """A path as an overlayfs option value (``\\``, ``:`` and ``,`` escaped)."""
    return p.replace("\\", "\\\\").replace(":", "\\:").replace(",", "\\,")


def _under(path, top):
    return path != top and path.startswith(top.rstrip("/") + "/")


def private_dev(shm_bytes):
    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=1m,mode=755")
    for name, (major, minor) in DEVICES.items():
        os.mknod(f"/dev/{name}", stat.S_IFCHR | 0o666, os.makedev(major, minor))
        os.chmod(f"/dev/{name}", 0o666)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm_bytes},mode=1777")
    mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)


def drop_privileges():
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    prctl(PR_SET_NO_NEW_PRIVS, 1)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    if _libc.capset(ctypes.byref(Header(_LINUX_CAPABILITY_VERSION_3, 0)), (Data * 2)()) != 0:
        raise SetupError(f"capset: {os.strerror(ctypes.get_errno())}")
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        if int(status.get(key, "1").strip(), 16) != 0:
            raise SetupError(f"capabilities not dropped: {key} = {status[key].strip()}")


def close_fds(keep):
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def setup(spec):
    mounts = mountinfo()
    targets = []
    if os.path.isdir("/tmp") and not os.path.islink("/tmp"):
        targets.append("/tmp")
    targets += [r for r in spec["roots"] if not any(r == t or _under(r, t) for t in targets)]
    # mounts below a target: an overlay's lower layer does not show them, so they are bound back (read-only)
    subs = []
    for t in targets:
        for mp, _ in mounts:
            if _under(mp, t) and os.path.lexists(mp):
                try:
                    subs.append((t, mp, os.open(mp, os.O_PATH | os.O_NOFOLLOW)))
                except OSError:
                    pass
    remount_all_readonly(mounts)
    scratch = spec["scratch"]
    mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(spec['scratch_bytes'])},mode=700")
    sfd = os.open(scratch, os.O_PATH | os.O_DIRECTORY)
    for sub in ("upper", "work"):
        os.mkdir(os.path.join(scratch, sub), 0o755)
    private_dev(int(spec["shm_bytes"]))
    masks = [d for d in ("/run", "/var/run") if os.path.isdir(d) and not os.path.islink(d)]
    for d in masks:
        mount("tmpfs", d, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
    for k, t in enumerate(targets):
        upper, work = f"/proc/self/fd/{sfd}/upper/{k}", f"/proc/self/fd/{sfd}/work/{k}"
        os.mkdir(upper)
        os.mkdir(work)
        st = os.stat(t)  # the overlay's root takes the upper folder's owner and mode
        os.chown(upper, st.st_uid, st.st_gid)
        os.chmod(upper, stat.S_IMODE(st.st_mode))
        mount("overlay", t, "overlay", MS_NOSUID | MS_NODEV,
              f"lowerdir={_opt_path(t)},upperdir={_opt_path(upper)},workdir={_opt_path(work)}")
        for top, mp, fd in subs:
            if top == t:
                try:
                    mount(f"/proc/self/fd/{fd}", mp, None, MS_BIND)
                finally:
                    os.close(fd)
    os.close(sfd)
    os.chdir(spec["cwd"])
    close_fds({0, 1, 2, *spec["keep_fds"]})
    drop_privileges()


def run_child(spec):
    lim = spec["limits"]
    for res, value in ((resource.RLIMIT_AS, lim.get("address_space_bytes")), (resource.RLIMIT_CPU, lim.get("cpu_s")),
                       (resource.RLIMIT_FSIZE, lim.get("file_bytes")), (resource.RLIMIT_NPROC, lim.get("tasks")),
                       (resource.RLIMIT_CORE, 0)):
        if value is not None and (value > 0 or res == resource.RLIMIT_CORE):
            hard = int(value) + 1 if res == resource.RLIMIT_CPU else int(value)
            resource.setrlimit(res, (int(value), hard))
    for s in (signal.SIGPIPE, signal.SIGXFSZ):  # as a fresh process would have them
        signal.signal(s, signal.SIG_DFL)
    argv = spec["argv"]
    os.execve(argv[0], argv, dict(os.environ, **spec.get("env", {})))


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    status_fd = int(spec["status_fd"])

    def report(doc):
        os.write(status_fd, json.dumps(doc).encode())

    try:
        setup(spec)
    except BaseException as e:  # noqa: BLE001 - every setup failure means: nothing runs
        report({"setup_error": str(e) or type(e).__name__})
        os._exit(125)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(status_fd)
            run_child(spec)
        finally:
            os._exit(127)
    while True:  # PID 1 reaps every orphan; the command's own status ends the sandbox
        try:
            done, st = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if done == pid:
            break
    doc = {"signal": os.WTERMSIG(st)} if os.WIFSIGNALED(st) else {"exit": os.WEXITSTATUS(st)}
    report(doc)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
