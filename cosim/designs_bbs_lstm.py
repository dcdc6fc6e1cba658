"""BBS LSTM layer engine for ``hwcosim verilog bbs-lstm``."""

from models.bbs_lstm import LSTMParams


def _lstm(p: LSTMParams):
    from hdl.bbs.lstm import LSTMLayer

    return LSTMLayer(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="bbs-lstm", top="bbs_lstm", build=_lstm,
        default_params=lambda: LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8),
        description="BBS LSTM layer: SpMxV (P x B) + PLAN element-wise unit + vector builder "
                    "(Cao et al., FPGA 2019)"))


_add()
