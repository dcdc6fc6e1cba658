"""``hwcosim jobcheck --run`` runs the user's script in a real sandbox: each escape of issue 45 is
tried by a real script and shown contained (the user's files unchanged, nothing written outside,
no network, no process left behind, resource limits hit as findings), and a machine that cannot
give the sandbox refuses ``--run``."""

import os
import socket
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from hwcosim.cosim.cli import main as cli_main
from hwcosim.models.systems.jobs import sandbox
from hwcosim.models.systems.jobs.jobcheck import CheckConfig, check
from hwcosim.models.systems.jobs.sandbox import SandboxLimits

needs_sandbox = pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                                   reason=f"no sandbox here: {sandbox.unavailable_reason()}")
CFG = CheckConfig(timeout_s=20)


def _script(folder, body, name="train.py"):
    p = Path(folder) / name
    p.write_text(textwrap.dedent(body))
    return p


@pytest.fixture
def outside():
    """A folder of the test outside /tmp (on the root file system), removed afterwards."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else str(Path.home())
    d = Path(tempfile.mkdtemp(prefix="hwcosim-sandbox-test-", dir=base))
    yield d
    for p in sorted(d.rglob("*"), reverse=True):
        p.unlink() if not p.is_dir() else p.rmdir()
    d.rmdir()


def _alive(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@needs_sandbox
def test_writes_to_the_working_folder_stay_private(tmp_path):
    (tmp_path / "data.txt").write_text("the user's data")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "keep.txt").write_text("keep")
    p = _script(tmp_path, """
        import os, shutil
        print("read:", open("data.txt").read())
        open("data.txt", "w").write("overwritten")
        open("new.txt", "w").write("new")
        if os.path.exists("sub"):  # the dry run runs the script three times in one sandbox
            os.remove("sub/keep.txt")
            shutil.rmtree("sub")
        print("loss 0.5")
    """)
    rep = check(p, cfg=CFG, cwd=tmp_path)
    assert rep.findings == [], rep.findings  # the check still runs, and the script is fine
    assert "read: the user's data" in rep.dryrun["stdout"]
    assert (tmp_path / "data.txt").read_text() == "the user's data"
    assert (tmp_path / "sub" / "keep.txt").read_text() == "keep"
    assert not (tmp_path / "new.txt").exists()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["data.txt", "sub", "train.py"]


@needs_sandbox
def test_absolute_paths_and_os_system_leave_nothing_outside(tmp_path, tmp_path_factory, outside):
    other_tmp = tmp_path_factory.mktemp("other")  # another folder of the test, under /tmp
    (outside / "victim.txt").write_text("intact")
    p = _script(tmp_path, f"""
        import os
        for path in ({str(outside / "abs.txt")!r}, {str(other_tmp / "abs.txt")!r}, {str(outside / "victim.txt")!r}):
            try:
                open(path, "w").write("x")
                print("wrote", path)
            except OSError as e:
                print("refused", path, e.errno)
        os.system("touch {outside / 'OUTSIDE'} {other_tmp / 'OUTSIDE'}; echo x > {outside / 'victim.txt'}")
        os.system("rm -rf {outside} {other_tmp}")
        open({str(outside / "final.txt")!r}, "w")  # not caught: the dry run reports it
    """)
    rep = check(p, cfg=CFG, cwd=tmp_path)
    assert f"refused {outside / 'abs.txt'} 30" in rep.dryrun["stdout"]  # read-only file system
    assert sorted(x.name for x in outside.iterdir()) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "intact"
    assert other_tmp.is_dir() and list(other_tmp.iterdir()) == []
    # the refused write is a warning (it would work on the host), not a problem of the script
    assert rep.ok and [f.category for f in rep.findings] == ["permission"]
    assert "read-only" in rep.findings[0].message


@needs_sandbox
def test_setsid_and_double_forked_children_are_killed(tmp_path):
    marker = f"hwcosim-sandbox-marker-{uuid.uuid4().hex}"
    p = _script(tmp_path, f"""
        import os, subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # {marker}"], start_new_session=True)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)  # {marker}"])
            os._exit(0)
        os.system("nohup sleep 60 {marker} >/dev/null 2>&1 &")
        print("pid", os.getpid())
    """)
    t0 = time.monotonic()
    rep = check(p, cfg=CFG, cwd=tmp_path)
    assert time.monotonic() - t0 < 15
    assert rep.dryrun["returncode"] == 0 and "pid" in rep.dryrun["stdout"]
    assert _alive(marker) == [], "a process of the dry run outlived it"
    left = [d for d in Path("/sys/fs/cgroup").rglob(f"hwcosim-sandbox-{os.getpid()}-*")]
    assert left == []


@needs_sandbox
def test_no_network_even_around_the_python_guard(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    try:
        p = _script(tmp_path, f"""
            import _socket, subprocess, sys
            s = _socket.socket()  # below the dry run's Python-level guard: only the kernel can stop it
            try:
                s.connect(("127.0.0.1", {port}))
                print("connected")
            except OSError as e:
                print("refused", e.errno)
            subprocess.run([sys.executable, "-c", "import socket; socket.create_connection(('127.0.0.1', {port}), 2)"])
        """)
        rep = check(p, cfg=CFG, cwd=tmp_path)
        assert "refused 101" in rep.dryrun["stdout"]  # ENETUNREACH: the namespace's loopback is down
        assert "connected" not in rep.dryrun["stdout"]
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()


@needs_sandbox
def test_privileges_dropped(tmp_path):
    p = _script(tmp_path, """
        import ctypes, os
        st = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
        print("caps", st["CapEff"].strip(), st["CapBnd"].strip())
        libc = ctypes.CDLL(None, use_errno=True)
        r = libc.mount(None, b"/", None, 32 | 4096, None)  # MS_REMOUNT | MS_BIND: read-write again
        print("remount", r, ctypes.get_errno())
    """)
    out = check(p, cfg=CFG, cwd=tmp_path).dryrun["stdout"]
    assert "caps 0000000000000000 0000000000000000" in out
    assert "remount -1 1" in out  # EPERM


@needs_sandbox
def test_memory_file_size_and_task_limits_are_findings(tmp_path):
    mem = _script(tmp_path, "import numpy as np\nx = np.ones(2**31)\n", "mem.py")
    rep = check(mem, cfg=CheckConfig(timeout_s=20, address_space_bytes=2 * 2**30), cwd=tmp_path)
    assert rep.categories == {"memory"}, rep.findings
    big = _script(tmp_path, "open('big.bin', 'wb').write(bytes(2 * 2**20))\n", "big.py")
    rep = check(big, cfg=CheckConfig(timeout_s=20, sandbox=SandboxLimits(file_bytes=2**20)), cwd=tmp_path)
    assert not rep.ok and "file-size limit is 1 MiB" in rep.errors[0].message, rep.findings
    assert not (tmp_path / "big.bin").exists()
    marker = f"hwcosim-sandbox-marker-{uuid.uuid4().hex}"
    forks = _script(tmp_path, f"""
        import subprocess, sys
        procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # {marker}"])
                 for _ in range(40)]
    """, "forks.py")
    rep = check(forks, cfg=CheckConfig(timeout_s=20, sandbox=SandboxLimits(tasks=16)), cwd=tmp_path)
    assert not rep.ok and "Resource temporarily unavailable" in rep.errors[0].message, rep.findings
    assert _alive(marker) == []


def test_refused_without_unshare(tmp_path, monkeypatch, capsys):
    marker = tmp_path / "ran.txt"
    p = _script(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n")
    monkeypatch.setattr(sandbox, "find_unshare", lambda: None)
    assert cli_main(["jobcheck", "--run", "-o", str(tmp_path / "o"), str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unshare" in err[0] and "--run refused" in err[0], err
    assert not marker.exists()
    # the static checks still work
    assert cli_main(["jobcheck", "-o", str(tmp_path / "o"), str(p)]) == 0
    assert not marker.exists()


@pytest.mark.parametrize("missing", ["linux", "root", "pids cgroup"])
def test_each_missing_guarantee_refuses(tmp_path, monkeypatch, missing):
    import sys
    import types

    marker = tmp_path / "ran.txt"
    p = _script(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n")
    if missing == "linux":
        monkeypatch.setattr(sandbox, "sys", types.SimpleNamespace(platform="darwin", executable=sys.executable))
    elif missing == "root":
        monkeypatch.setattr(sandbox, "find_unshare", lambda: "/usr/bin/unshare")
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    else:
        if sandbox.find_unshare() is None or os.geteuid() != 0:
            pytest.skip("the earlier guarantees are already missing here")
        monkeypatch.setattr(sandbox, "_pids_cgroup_root", lambda: None)
    with pytest.raises(sandbox.SandboxUnavailable, match=missing.split()[0] if missing != "linux" else "not Linux"):
        check(p, cfg=CFG, cwd=tmp_path)
    assert not marker.exists()
