"""Test-wide settings.

RTL tests are short simulations whose time is dominated by compiling the Verilator model and by
cocotb's Python side, not by the model's speed: they build it at -O0 (measured here on the trained
digits CSR/BBS and LSTM runs: 28 s at -O0 against 45 s at Verilator's default -Os, builds included).
Benchmarks and user runs keep the default. Set HWCOSIM_VERILATOR_OPT to override.
"""

import os

os.environ.setdefault("HWCOSIM_VERILATOR_OPT", "-O0")
# every table a test prints is audited: a numeric column whose header names no unit is an error
# (models/tables.py, missing_unit)
os.environ.setdefault("HWCOSIM_STRICT_TABLES", "1")


# ---- run folders (hwcosim check) -------------------------------------------------------------
import pytest  # noqa: E402


def _edit_word(run_dir, key: str, index: int) -> None:
    """Change one RTL output word (``outputs.npz[key].flat[index]``) by one, leaving run.json alone."""
    import numpy as np
    from hwcosim.cosim.flow.runs import read_npz, save_npz

    out = read_npz(run_dir / "outputs.npz")
    a = out[key].copy()
    a.flat[index] = str(int(a.flat[index]) + 1) if a.dtype.kind in "US" else a.flat[index] + 1
    out[key] = np.asarray(a)
    save_npz(run_dir / "outputs.npz", **out)


@pytest.fixture
def run_folder_checks(tmp_path_factory, capsys):
    """``check(run_dir, design, key, index=0)``: a real run folder re-checks clean (exit 0); one RTL
    word changed and the manifest re-hashed is caught by the recomputed golden model (exit 1, the
    mismatch named); the same change without re-hashing is refused as tampering (exit 2)."""
    import json
    import shutil

    from hwcosim.cosim.cli import main
    from hwcosim.cosim.flow.runs import write_manifest

    def check(run_dir, design: str, key: str, index: int = 0) -> None:
        assert json.loads((run_dir / "run.json").read_text())["design"] == design
        capsys.readouterr()
        assert main(["check", str(run_dir)]) == 0, capsys.readouterr().err
        work = tmp_path_factory.mktemp("recheck")
        wrong, tampered = work / "wrong", work / "tampered"
        for d in (wrong, tampered):
            shutil.copytree(run_dir, d)
            _edit_word(d, key, index)
        write_manifest(wrong, design)
        capsys.readouterr()
        assert main(["check", str(wrong)]) == 1
        err = capsys.readouterr().err
        assert "1 of" in err and "differ from the golden model" in err, err
        assert main(["check", str(tampered)]) == 2
        assert "sha256 differs" in capsys.readouterr().err

    return check


# ---- scheduling ------------------------------------------------------------------------------
def pytest_collection_modifyitems(config, items):
    """Start the longest tests first: the formal checks' solver runs, so pytest-xdist's other worker
    and its work stealing fill in around them instead of one of them running on alone after every
    other test has finished. (The LSTM's data BMC, 5.5 minutes at depth 24, is marked slow and runs
    in make formal; it goes first when selected.) The order within each group is kept."""
    def rank(item):
        if "test_fast_check[" not in item.nodeid:
            return 2
        return 0 if "data-bmc" in item.nodeid else 1

    items.sort(key=rank)


# ---- real datasets: the data directory ($HWCOSIM_DATA, else ../shared/data; models/data.py) --------------
def _no_data_dir() -> str | None:
    """Why there is no data directory, or None when there is one."""
    from hwcosim.models.data import ENV, data_dir

    d = data_dir()
    if d is None:
        return f"no data directory: set {ENV}=DIR or check out ../shared/data beside the repository"
    return None if d.is_dir() else f"no data directory: {ENV}={d} is not a folder"


@pytest.fixture(scope="session")
def shared_data():
    """The data directory (a Path). A test that takes it is skipped, with the reason, only when there is
    no data directory; a dataset missing from an existing one fails (``dataset(name)``)."""
    from hwcosim.models.data import data_dir

    why = _no_data_dir()
    if why:
        pytest.skip(why)
    return data_dir()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that reads a dataset through the library (``lingjun_2023()`` and the studies on it) and
    fails with ``DatasetMissing`` is reported as skipped, with that reason, when there is no data
    directory at all; with a data directory the missing dataset stays a failure."""
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is None or not rep.failed:
        return
    from hwcosim.models.data import DatasetMissing

    e, seen = call.excinfo.value, set()
    while e is not None and not isinstance(e, DatasetMissing) and id(e) not in seen:  # also when re-raised
        seen.add(id(e))  # as a reader's own error (a scenario's ScenarioError names the topology's problem)
        e = e.__cause__ or e.__context__
    if isinstance(e, DatasetMissing):
        why = _no_data_dir()
        if why:
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1], f"Skipped: {why} ({str(e).split(':')[0]})")
