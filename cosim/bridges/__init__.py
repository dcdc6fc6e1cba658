"""RTL-in-the-loop bridges between the system models (``models/``) and the accelerator RTL (``hdl/``).

- :mod:`cosim.bridges.core`: the common layer (clock mapping, device interface, the event loop
  shared by the RTL and model devices, comparison record and report).
- :mod:`cosim.bridges.melo`: (a) MELO loss recovery for chosen flows of a flow-level cluster
  network.
- :mod:`cosim.bridges.serve`: (b) BBS SpMxV / FSS GEMM as serving devices under an
  ElasticBatch-style request stream.
- :mod:`cosim.bridges.kv`: (c) the KV-Direct pipeline serving a parameter-server job.
- :mod:`cosim.bridges.cli`: ``hwcosim cosim melo|serve|kv`` and the ``cosim_bridges`` benchmark.

The cocotb halves (RTL devices) are the testbenches ``cosim.tb.bridge_melo``,
``cosim.tb.bridge_serve`` and ``cosim.tb.bridge_kv``; :mod:`cosim.bridges.rtl` holds their
shared clock and serial-device base.
"""
