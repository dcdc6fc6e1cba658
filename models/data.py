"""The one data directory: real datasets (traces, topologies, graphs) are read from it, never copied
into the repository.

The directory is ``$HWCOSIM_DATA`` when set, else ``../shared/data`` beside the repository
checkout (or beside the current directory) when that exists. Each dataset is a folder in it
(``lingjun-2023/topo.csv``, ``alibaba-pai-2020/job_1_norm.csv``, ...) with the README and the
license of its source. :func:`dataset` returns a dataset's folder, or raises
:class:`DatasetMissing` (bad input, exit 2) with one line naming the dataset, what it is, where
it comes from and how to point ``HWCOSIM_DATA`` at it.
"""

from __future__ import annotations

import os
from pathlib import Path

from hwcosim.models.errors import UsageError

__all__ = ["ENV", "DATASETS", "DatasetMissing", "data_dir", "dataset"]

#: The environment variable naming the data directory.
ENV = "HWCOSIM_DATA"

#: Known datasets: folder name -> (what it is, where it comes from), as their READMEs give them.
DATASETS: dict[str, tuple[str, str]] = {
    "lingjun-2023": (
        "the Alibaba Lingjun GPU cluster topology, topo.csv: 847 hosts on a 3-layer Clos",
        "the 'Alibaba GPU Cluster Dataset 2023' released with Crux, Cao et al., SIGCOMM 2024"),
    "alibaba-pai-2020": (
        "Alibaba PAI per-worker mini-batch times of 4 training jobs, 100 jobs' coefficients of variation, "
        "Philly job runtimes",
        "https://github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2020"),
    "acme-2024": (
        "job outcome rates of five GPU clusters, cluster_summary.csv",
        "https://github.com/InternLM/AcmeTrace, Hu et al., NSDI 2024"),
    "alibaba-gpu-2023": (
        "the Alibaba PAI GPU cluster trace 2023 'openb': nodes and GPU-sharing pods",
        "https://github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2023"),
    "snap-wiki-vote": (
        "the SNAP wiki-Vote graph: 7,115 nodes, 103,689 edges",
        "the Stanford Large Network Dataset Collection, https://snap.stanford.edu/data/wiki-Vote.html"),
}


class DatasetMissing(UsageError):
    """A dataset that is not in the data directory (or no data directory at all): exit 2, one line."""


def _repo() -> Path | None:
    """The repository checkout holding this package (``pyproject.toml`` beside ``models/``), if any."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def data_dir() -> Path | None:
    """The data directory: ``$HWCOSIM_DATA`` if set (whether or not it exists), else
    ``../shared/data`` relative to the repository checkout or to the current directory when it
    is a folder, else None."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    repo = _repo()
    for base in ([repo] if repo else []) + [Path.cwd()]:
        cand = base.parent / "shared" / "data"
        if cand.is_dir():
            return cand.resolve()
    return None


def _describe(name: str) -> str:
    what, source = DATASETS.get(name, ("a dataset this command reads", "its publisher"))
    return f"{what}, from {source}"


def dataset(name: str, *parts: str) -> Path:
    """The folder of dataset ``name`` in the data directory (or the file ``parts`` inside it).

    Raises
    ------
    DatasetMissing
        No data directory, or the dataset (or the file) is not in it: one line naming the dataset,
        what it is, its source and how to set ``HWCOSIM_DATA``.
    """
    root = data_dir()
    fix = f"put it in DIR/{name}/ and set {ENV}=DIR"
    if root is None:
        raise DatasetMissing(f"dataset {name!r} not found (no data directory: ${ENV} is not set and there is no "
                             f"../shared/data): {_describe(name)}; {fix}")
    path = root.joinpath(name, *parts)
    if not path.exists():
        where = f"{root}, from ${ENV}" if os.environ.get(ENV) else str(root)
        missing = f"{name}/{'/'.join(parts)}" if parts else f"{name}/"
        raise DatasetMissing(f"dataset {name!r} not found (no {missing} in {where}): {_describe(name)}; {fix}")
    return path
