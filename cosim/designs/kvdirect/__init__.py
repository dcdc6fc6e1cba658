"""hwcosim.cosim.designs.kvdirect: testbenches, runner glue, benches, sweep adapter and bridges of the kvdirect designs.

The registry entries are in :mod:`hwcosim.cosim.designs.kvdirect.design`.
"""
