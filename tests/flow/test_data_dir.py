"""The one data directory (``$HWCOSIM_DATA``, else ``../shared/data``): where it is found, the one-line
refusal of a missing dataset (exit 2), the readers that use it, and no dataset copied into the repository."""

import subprocess
from pathlib import Path

import pytest
from hwcosim.cosim.cli import main
from hwcosim.models import data
from hwcosim.models.data import DATASETS, DatasetMissing, data_dir, dataset

REPO = Path(__file__).resolve().parents[2]


def test_env_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("HWCOSIM_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    (tmp_path / "lingjun-2023").mkdir()
    (tmp_path / "lingjun-2023" / "topo.csv").write_text("ip,DSW,PSW,ASW\n")
    assert dataset("lingjun-2023") == tmp_path / "lingjun-2023"
    assert dataset("lingjun-2023", "topo.csv") == tmp_path / "lingjun-2023" / "topo.csv"


def test_shared_data_beside_the_checkout_then_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("HWCOSIM_DATA", raising=False)
    beside = REPO.parent / "shared" / "data"
    if beside.is_dir():
        assert data_dir() == beside.resolve()
    monkeypatch.setattr(data, "_repo", lambda: None)  # an installed copy: no checkout around the package
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert data_dir() == (tmp_path / "shared" / "data").resolve()
    (tmp_path / "work" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "work" / "sub")  # no ../shared/data here
    assert data_dir() is None


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_a_missing_dataset_is_one_line_naming_it_and_its_source(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HWCOSIM_DATA", str(tmp_path))  # an empty data directory
    with pytest.raises(DatasetMissing) as e:
        dataset(name)
    msg = str(e.value)
    what, source = DATASETS[name]
    assert "\n" not in msg and f"dataset {name!r} not found" in msg
    assert what in msg and source in msg and "HWCOSIM_DATA" in msg and str(tmp_path) in msg


def test_no_data_directory_at_all_is_one_line(monkeypatch):
    monkeypatch.delenv("HWCOSIM_DATA", raising=False)
    monkeypatch.setattr(data, "data_dir", lambda: None)
    with pytest.raises(DatasetMissing, match=r"^dataset 'acme-2024' not found \(no data directory: \$HWCOSIM_DATA"):
        dataset("acme-2024")


def test_a_command_without_its_dataset_exits_2_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HWCOSIM_DATA", str(tmp_path))
    rc = main(["cluster", "speed", "--gpus", "64", "--jobs", "1", "--iterations", "1", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "dataset 'lingjun-2023' not found" in err[0], err


def test_lingjun_is_read_from_the_data_directory(shared_data):
    from hwcosim.models.systems.cluster.topology import _data_path, lingjun_2023

    assert _data_path() == shared_data / "lingjun-2023" / "topo.csv"
    assert lingjun_2023().n_hosts == 847


def test_fuzz_seed_skips_the_real_topology_when_missing(tmp_path, monkeypatch):
    from hwcosim.cosim.flow import fuzz

    monkeypatch.setenv("HWCOSIM_DATA", str(tmp_path))
    assert len(fuzz.seeds("topology-csv")) == 1  # the built-in CSV only


def test_no_dataset_is_copied_into_the_repository(shared_data):
    """No file of the data directory (beyond READMEs and licenses) is tracked in the repository."""
    files = {}
    for f in shared_data.glob("*/*"):
        if f.is_file() and not f.name.upper().startswith(("README", "LICENSE", "UPSTREAM")):
            files.setdefault(f.name, []).append(f)
    assert files
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, tracked.decode().split("\0")):
        p = REPO / rel
        for src in files.get(p.name, ()):
            assert not (p.is_file() and p.read_bytes() == src.read_bytes()), f"{rel} is a copy of {src}"
    assert not (REPO / "models" / "systems" / "cluster" / "data").exists()
