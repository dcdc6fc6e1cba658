"""The BBS (bank-balanced sparsity) LSTM accelerator's blocks (Cao et al., FPGA 2019)."""

from hwcosim.hdl.bbs.lstm import ElementWise, LSTMLayer
from hwcosim.hdl.bbs.spmxv import SpMxV

__all__ = ["SpMxV", "LSTMLayer", "ElementWise"]
