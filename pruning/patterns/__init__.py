"""Sparsity patterns, one module each; every one implements :class:`pruning.base.Pattern`."""
