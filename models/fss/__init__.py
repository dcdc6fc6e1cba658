"""Fine-grained structured sparsity (Zhang et al., IEEE TCAD 2025): golden and cycle models.

- :mod:`hwcosim.models.fss.gemm`: ``FSSParams``, the bit-exact GEMM golden model, the cycle and HBM models.
"""
