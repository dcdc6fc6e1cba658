"""Bank-balanced sparsity (Cao et al., FPGA 2019): golden and cycle models.

- :mod:`hwcosim.models.bbs.spmxv`: ``BBSParams`` and the bit-exact SpMxV golden model.
- :mod:`hwcosim.models.bbs.csr`: the row-wise CSR (ESE-style) baseline engine's model.
- :mod:`hwcosim.models.bbs.lstm`: the LSTM layer engine (SpMxV + element-wise unit) and its cycle model.
- :mod:`hwcosim.models.bbs.lstm_delta`: the temporal-sparsity (delta) mode.
"""
