"""hwcosim: hardware/software co-design of AI-datacenter systems.

The one top-level package. Its sub-packages are the repository's four folders:

- :mod:`hwcosim.hdl`: Amaranth RTL of every design, with its formal properties;
- :mod:`hwcosim.models`: golden and cycle models (the specification) and the cluster-level
  systems models (:mod:`hwcosim.models.systems`, the ``hwcosim[systems]`` extra);
- :mod:`hwcosim.pruning`: pruning patterns, sparse formats and weight readers/writers;
- :mod:`hwcosim.cosim`: the design registry, the flows (simulation, synthesis, place and route,
  formal, boards) and the command line.

The Python API (the command line calls the same functions; ``docs/python-api.md``):

- :func:`designs` -> the registered design names; :func:`design` -> a :class:`DesignHandle`
  with ``verilog()``, ``stimulus()``, ``golden()``, ``simulate()`` (a :class:`SimResult`),
  ``build()`` and ``formal()``;
- :func:`prune` -> a :class:`PruneResult` (mask, pruned weights, hardware encoding, ``save``);
- :func:`compile` -> a compiled network on the BBS or FSS engines (``predict``, ``simulate``, ``report``,
  ``save``; an ONNX/``.npz`` network, or a BERT-family checkpoint's encoder linears; ``docs/compile.md``),
  :func:`load_compiled` to read a saved one back;
- :class:`UsageError` (bad input) and :class:`CheckFailed` (a check that ran and failed).

Importing :mod:`hwcosim` is light: each name is imported when first used.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: public name -> (module, attribute), imported on first use
_LAZY = {
    "designs": ("hwcosim.cosim.api", "designs"),
    "design": ("hwcosim.cosim.api", "design"),
    "DesignHandle": ("hwcosim.cosim.api", "DesignHandle"),
    "SimResult": ("hwcosim.cosim.api", "SimResult"),
    "prune": ("hwcosim.pruning.prune_api", "prune"),
    "PruneResult": ("hwcosim.pruning.prune_api", "PruneResult"),
    "compile": ("hwcosim.cosim.compile", "compile_model"),
    "load_compiled": ("hwcosim.cosim.compile", "load_compiled"),
    "CompiledModel": ("hwcosim.cosim.compile", "CompiledModel"),
    "papers": ("hwcosim.cosim.papers", "papers"),
    "pagerank_out_of_core": ("hwcosim.models.systems.graph.outofcore", "pagerank_rmat_out_of_core"),
    "UsageError": ("hwcosim.models.errors", "UsageError"),
    "CheckFailed": ("hwcosim.models.errors", "CheckFailed"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    try:
        modname, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'hwcosim' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(modname), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
