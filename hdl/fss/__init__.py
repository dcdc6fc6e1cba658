"""FSS (fine-grained structured sparsity) RTL: the sparse GEMM engine (Zhang et al., IEEE TCAD 2025)."""

from hwcosim.hdl.fss.gemm import FSSGemm, weight_layout

__all__ = ["FSSGemm", "weight_layout"]
