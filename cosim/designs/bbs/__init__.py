"""hwcosim.cosim.designs.bbs: testbenches, runner glue, benches, sweep adapter and bridges of the bbs designs.

The registry entries are in :mod:`hwcosim.cosim.designs.bbs.design`.
"""
