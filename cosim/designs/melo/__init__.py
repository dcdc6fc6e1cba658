"""hwcosim.cosim.designs.melo: testbenches, runner glue, benches, sweep adapter and bridges of the melo designs.

The registry entries are in :mod:`hwcosim.cosim.designs.melo.design`.
"""
