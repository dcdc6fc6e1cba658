"""Sparsity patterns, one module each; every one implements :class:`hwcosim.pruning.base.Pattern`."""
