"""Optional extras: the systems stack is ``hwcosim[systems]``, never needed by the RTL/pruning core.

The cluster, reliability, elastic, jobs and graph models (``hwcosim.models.systems``) use
networkx, igraph, python-graphblas and Dask; ``pip install 'hwcosim[systems]'`` installs them.
The core (hdl, pruning, cosim, the models outside ``systems``, the command dispatcher) imports
none of them at module level; a code path that needs one imports it where it is used, through
:func:`systems_extra`, so that a missing package is bad input (:class:`ExtraMissing`, exit 2,
one line naming the extra), not a traceback::

    with systems_extra("the Dask executor"):
        from distributed import Client, LocalCluster
"""

from __future__ import annotations

import contextlib

from hwcosim.models.errors import UsageError

__all__ = ["SYSTEMS_PACKAGES", "SYSTEMS_INSTALL", "ExtraMissing", "systems_extra", "missing_extra", "have"]

#: Top-level import names of the systems stack (``dask`` and ``distributed`` are Dask's).
SYSTEMS_PACKAGES = frozenset({"networkx", "igraph", "graphblas", "dask", "distributed"})
#: The command that installs them.
SYSTEMS_INSTALL = "pip install 'hwcosim[systems]'"


class ExtraMissing(UsageError):
    """A code path needs a package of an optional extra that is not installed (exit 2)."""


def _message(what: str, package: str) -> str:
    return f"{what} needs the systems extra ({package} is not installed): {SYSTEMS_INSTALL}"


def missing_extra(exc: BaseException, what: str = "this command") -> ExtraMissing | None:
    """The :class:`ExtraMissing` that ``exc`` stands for when it is an ImportError of a systems
    package (``distributed``, ``networkx.algorithms``, ...), else None."""
    if not isinstance(exc, ImportError):
        return None
    name = (getattr(exc, "name", None) or "").split(".")[0]
    return ExtraMissing(_message(what, name)) if name in SYSTEMS_PACKAGES else None


@contextlib.contextmanager
def systems_extra(what: str):
    """Imports inside this block that fail for a systems package raise :class:`ExtraMissing`
    (``what`` names the feature that needs it); any other ImportError propagates unchanged."""
    try:
        yield
    except ImportError as e:
        err = missing_extra(e, what)
        if err is None:
            raise
        raise err from None


def have(package: str) -> bool:
    """Whether ``package`` (a top-level import name) imports."""
    import importlib

    try:
        importlib.import_module(package)
    except ImportError:
        return False
    return True
