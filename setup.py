"""Package layout only (everything else is in pyproject.toml).

The repository keeps its four folders at the top (``hdl/``, ``models/``, ``pruning/``,
``cosim/``); they install as sub-packages of the one top-level package ``hwcosim``, whose own
``__init__`` (the public Python API) lives in ``hwcosim/``.
"""

from setuptools import find_packages, setup

ROOTS = ("hdl", "models", "pruning", "cosim")

setup(
    packages=["hwcosim", *(f"hwcosim.{r}" + (f".{p}" if p else "") for r in ROOTS for p in ["", *find_packages(r)])],
    package_dir={"hwcosim": "hwcosim", **{f"hwcosim.{r}": r for r in ROOTS}},
)
