"""Test-wide settings.

RTL tests are short simulations whose time is dominated by compiling the Verilator model and by
cocotb's Python side, not by the model's speed: they build it at -O0 (measured here on the trained
digits CSR/BBS and LSTM runs: 28 s at -O0 against 45 s at Verilator's default -Os, builds included).
Benchmarks and user runs keep the default. Set HWCOSIM_VERILATOR_OPT to override.
"""

import os

os.environ.setdefault("HWCOSIM_VERILATOR_OPT", "-O0")
