"""The designs: one sub-package per family ``X`` (``cosim/designs/X/``: testbenches, runner glue,
benches, sweep adapter, bridges and the family's registry entries in ``design.py``).

The registry that discovers them is :mod:`hwcosim.cosim.registry`.
"""
