"""One top-level package: the wheel installs only ``hwcosim``, and a user's own ``models``/``hdl``
beside their script never shadow the toolkit's sub-packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".venv", ".git", "build", "site", "__pycache__", "*.egg-info", ".pytest_cache",
                              ".ruff_cache", "sim_build*", "*.vcd", "*.fst")


def _wheel(tmp_path: Path) -> Path:
    src = tmp_path / "src"  # a copy: building in the checkout would write build/ and egg-info there
    shutil.copytree(ROOT, src, ignore=SKIP, symlinks=True)
    out = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                        "-w", str(out), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("hwcosim-*.whl")
    return whl


def test_the_wheel_has_one_top_level_package(tmp_path):
    whl = zipfile.ZipFile(_wheel(tmp_path))
    names = whl.namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"hwcosim"}
    for part in ("hwcosim/__init__.py", "hwcosim/hdl/__init__.py", "hwcosim/models/bbs/spmxv.py",
                 "hwcosim/pruning/base.py", "hwcosim/cosim/cli/__init__.py", "hwcosim/cosim/registry.py",
                 "hwcosim/cosim/flow/sweeps/bbs_small.toml"):  # package data travels too
        assert part in names, part
    for n in names:
        if n.endswith(".dist-info/top_level.txt"):
            assert whl.read(n).split() == [b"hwcosim"]


def test_a_users_own_models_and_hdl_do_not_shadow_the_toolkit(tmp_path):
    (tmp_path / "models.py").write_text("MINE = 'user models'\n")
    (tmp_path / "hdl").mkdir()
    (tmp_path / "hdl" / "__init__.py").write_text("MINE = 'user hdl'\n")
    code = (
        "import sys, models, hdl\n"
        "assert models.MINE == 'user models' and hdl.MINE == 'user hdl'\n"
        "import hwcosim\n"
        "from hwcosim.models.bbs.spmxv import BBSParams\n"
        "from hwcosim.cosim.registry import designs\n"
        "from hwcosim.cosim.cli import build_parser\n"
        "build_parser()\n"
        "assert 'melo-engine' in designs()\n"
        "assert sys.modules['models'].MINE == 'user models' and sys.modules['hdl'].MINE == 'user hdl'\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_the_toolkit_imports_no_bare_package(tmp_path):
    """Loading the command line and every design's registry entry puts no bare ``models``, ``hdl``,
    ``pruning`` or ``cosim`` module in ``sys.modules`` (each would be a second copy of ours)."""
    code = ("import sys\n"
            "from hwcosim.cosim.cli import build_parser\n"
            "from hwcosim.cosim.registry import designs, resolve\n"
            "build_parser()\n"
            "for d in designs().values():\n"
            "    resolve(d.golden)\n"
            "bare = sorted(m for m in sys.modules if m.split('.')[0] in ('models', 'hdl', 'pruning', 'cosim'))\n"
            "print(bare)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
