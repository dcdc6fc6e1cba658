"""hwcosim.cosim.designs.beamraster: testbenches, runner glue, benches, sweep adapter and bridges of the
beamraster designs.

The registry entries are in :mod:`hwcosim.cosim.designs.beamraster.design`.
"""
