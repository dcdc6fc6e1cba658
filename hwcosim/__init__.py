"""hwcosim: hardware/software co-design of AI-datacenter systems.

The one top-level package. Its sub-packages are the repository's four folders:

- :mod:`hwcosim.hdl`: Amaranth RTL of every design, with its formal properties;
- :mod:`hwcosim.models`: golden and cycle models (the specification) and the cluster-level
  systems models (:mod:`hwcosim.models.systems`, the ``hwcosim[systems]`` extra);
- :mod:`hwcosim.pruning`: pruning patterns, sparse formats and weight readers/writers;
- :mod:`hwcosim.cosim`: the design registry, the flows (simulation, synthesis, place and route,
  formal, boards) and the command line.
"""

from __future__ import annotations

__version__ = "0.1.0"
