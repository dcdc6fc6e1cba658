"""BBS LSTM layer engine for ``hwcosim verilog bbs-lstm``."""

from models.bbs_lstm import LSTMParams


def _lstm(p: LSTMParams):
    from hdl.bbs.lstm import LSTMLayer

    return LSTMLayer(p)


def _lstm_axi(p: LSTMParams):
    from hdl.bbs.axi_top import LSTMAxiTop

    return LSTMAxiTop(p)


def _csr(p):
    from hdl.bbs.csr import CSRSpMxV

    return CSRSpMxV(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="bbs-lstm", top="bbs_lstm", build=_lstm,
        default_params=lambda: LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8),
        description="BBS LSTM layer: SpMxV (P x B) + PLAN element-wise unit + vector builder "
                    "(Cao et al., FPGA 2019)"))
    DESIGNS.append(Design(
        name="bbs-lstm-axi", top="bbs_lstm_axi", build=_lstm_axi,
        default_params=lambda: LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8),
        description="BBS LSTM layer behind AXI4-Stream (weights, x, h), an AXI4 read master (weights "
                    "from memory: LOAD_MM) and AXI4-Lite (start, soft reset, busy/done/error, read-error "
                    "address, performance counters); map and fault behaviour in hdl/bbs/axi_top.py"))

    from models.bbs_csr import CSRParams

    DESIGNS.append(Design(
        name="bbs-csr", top="bbs_csr", build=_csr,
        default_params=lambda: CSRParams(rows=256, cols=72, mults=64, lanes=8),
        description="Row-wise CSR SpMxV baseline (ESE-style, unbalanced rows), M single-multiplier PEs"))


_add()
