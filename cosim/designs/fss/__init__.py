"""hwcosim.cosim.designs.fss: testbenches, runner glue, benches, sweep adapter and bridges of the fss designs.

The registry entries are in :mod:`hwcosim.cosim.designs.fss.design`.
"""
