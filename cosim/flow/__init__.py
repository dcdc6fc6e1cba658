"""Flows that serve every registered design: Verilog + simulation runner with its build cache
(:mod:`~cosim.flow.runner`), synthesis estimates, formal proofs, FuseSoC cores, waveforms,
reports, simulator speed, the bench and sweep engines, the docs hook and the reader fuzzer."""
