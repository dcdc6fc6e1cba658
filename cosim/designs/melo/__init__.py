"""cosim.designs.melo: testbenches, runner glue, benches, sweep adapter and bridges of the melo designs.

The registry entries are in :mod:`cosim.designs.melo.design`.
"""
