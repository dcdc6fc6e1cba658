"""MELO receiver engine (Lu et al., "Memory Efficient Loss Recovery for Hardware-based Transport in
Datacenter", APNet 2017): metadata table, shared bits pool with a linked free list."""

from hwcosim.hdl.melo.engine import MeloEngineRTL

__all__ = ["MeloEngineRTL"]
