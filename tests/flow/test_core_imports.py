"""The RTL/pruning core without the systems stack (``hwcosim[systems]``: networkx, igraph,
python-graphblas, Dask): every core module imports and the dispatcher starts with the four made
unimportable; a systems command that needs one exits 2 naming the extra; a sweep without Dask runs
on a local pool."""

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hwcosim.models.extras import SYSTEMS_INSTALL, SYSTEMS_PACKAGES, ExtraMissing, missing_extra, systems_extra

REPO = Path(__file__).resolve().parents[2]

# installed first, before any import: every systems package (and its submodules) is unimportable
BLOCKER = textwrap.dedent(f"""
    import sys

    BLOCKED = {sorted(SYSTEMS_PACKAGES)!r}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    for m in [m for m in sys.modules if m.split(".")[0] in BLOCKED]:
        del sys.modules[m]
""")


def _core_modules() -> list[str]:
    """Every module of hdl/, pruning/, cosim/ and models/ outside models/systems, and outside the
    command modules of the systems (cosim/cli modules that import hwcosim.models.systems)."""
    mods = []
    for top in ("hdl", "pruning", "cosim", "models"):
        for f in sorted((REPO / top).rglob("*.py")):
            rel = f.relative_to(REPO)
            if rel.parts[:2] == ("models", "systems") or f.name == "__main__.py":
                continue
            if rel.parts[:2] == ("cosim", "cli") and "models.systems" in f.read_text(encoding="utf-8"):
                continue
            parts = rel.with_suffix("").parts
            mods.append("hwcosim." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return mods


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)


def test_every_core_module_imports_without_the_systems_stack(tmp_path):
    mods = _core_modules()
    assert len(mods) > 100 and "hwcosim.cosim.flow.sweep" in mods and "hwcosim.pruning.csb_bench" in mods
    r = _run(f"""
        import importlib, traceback
        failed = []
        for m in {mods!r}:
            try:
                importlib.import_module(m)
            except BaseException:
                failed.append(m + ": " + traceback.format_exc().strip().splitlines()[-1])
        # the dispatcher registers every command (the systems ones included) without the stack
        from hwcosim.cosim.cli import build_parser
        build_parser()
        print("\\n".join(failed) or "ok")
        print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert out[0] == "ok", "\n".join(out[:-1])
    assert out[-1] == "loaded: []"


def test_a_systems_command_without_the_extra_exits_2_naming_it(tmp_path):
    r = _run(f"""
        from hwcosim.cosim.cli import main
        sys.exit(main(["graph", "run", "pagerank", "--scale", "4", "--executor", "dask", "--workers", "1",
                       "-o", {str(tmp_path / "out")!r}]))
    """, tmp_path)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-3000:]
    assert "systems extra" in lines[0] and SYSTEMS_INSTALL in lines[0] and "distributed" in lines[0]


def test_missing_extra_maps_only_the_systems_packages():
    assert isinstance(missing_extra(ModuleNotFoundError("x", name="networkx.algorithms")), ExtraMissing)
    assert missing_extra(ModuleNotFoundError("x", name="numpy")) is None
    assert missing_extra(ValueError("distributed")) is None
    with pytest.raises(ExtraMissing, match=r"the thing needs the systems extra \(igraph is not installed\)"):
        with systems_extra("the thing"):
            raise ModuleNotFoundError("No module named 'igraph'", name="igraph")
    with pytest.raises(ModuleNotFoundError):  # any other missing module is not an extra: it propagates
        with systems_extra("the thing"):
            raise ModuleNotFoundError("No module named 'nothere'", name="nothere")


# ---- hwcosim sweep without Dask: a local pool; --scheduler refused naming the extra -------------------------
def test_sweep_without_dask_runs_on_a_local_pool(tmp_path, monkeypatch, capsys):
    from hwcosim.cosim.flow import sweep

    for m in ("distributed", "dask"):
        monkeypatch.setitem(sys.modules, m, None)  # `import distributed` raises ImportError
    calls = []

    def simulate(p, w, sim, test_dir):  # a stand-in simulation: no simulator needed
        calls.append(p.pes)
        return {"cycles": 10 * p.pes, "ideal": 8 * p.pes, "utilisation": 0.8, "mismatches": 0}

    monkeypatch.setitem(sweep.ADAPTERS, "bbs-spmxv", dataclasses.replace(sweep.ADAPTERS["bbs-spmxv"],
                                                                           simulate=simulate))
    spec = sweep.SweepSpec(design="bbs-spmxv", params={"rows": 16, "cols": 32, "banks": 4, "sparsity": 0.5},
                           grid={"pes": [2, 4]}, name="t")
    rep = sweep.run_sweep(spec, tmp_path, workers=2, processes=False, progress=False, plots=False)
    assert sorted(calls) == [2, 4] and rep["counts"] == {"ok": 2, "failed": 0, "pending": 0}
    assert "local pool, 2 threads (no Dask)" in capsys.readouterr().err
    with pytest.raises(ExtraMissing, match=r"--scheduler .*needs the systems extra .*hwcosim\[systems\]"):
        sweep.run_sweep(spec, tmp_path / "remote", scheduler="tcp://127.0.0.1:1", force=True, progress=False,
                        plots=False)


def test_local_pool_of_processes_runs_a_point_task(monkeypatch):
    # without Dask the default pool is spawned processes: the task pickles there and evaluate_point imports
    from hwcosim.cosim.flow import sweep

    monkeypatch.setitem(sys.modules, "distributed", None)
    _, pts = sweep.expand(sweep.SweepSpec(design="bbs-spmxv", params={"rows": 16, "cols": 32, "banks": 4},
                                          grid={"pes": [2]}, name="t"))
    client, cluster = sweep._client(None, 1, True)
    try:
        assert isinstance(client, sweep._LocalPool) and cluster is None
        task = {"design": "bbs-spmxv", "params": pts[0].params, "workload": pts[0].workload, "sim": "icarus",
                "test_dir": "/nonexistent", "do_sim": False, "synth": None}
        assert client.submit(sweep.evaluate_point, task, pure=False).result(timeout=120) == {"sim": None,
                                                                                             "synth": None}
    finally:
        client.close()
