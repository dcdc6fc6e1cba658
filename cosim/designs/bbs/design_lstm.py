"""Registry entries of the BBS LSTM layer engine, its AXI top and the CSR baseline
(see :mod:`hwcosim.cosim.registry`)."""

from hwcosim.cosim.designs.bbs.design import PAPER, SPMXV_DOCS
from hwcosim.cosim.registry import Design, DocsEntry
from hwcosim.models.bbs.csr import CSRParams
from hwcosim.models.bbs.lstm import LSTMParams

LSTM_DOCS = DocsEntry("bbs-lstm", "BBS LSTM layer engine", PAPER)


def _lstm(p: LSTMParams):
    from hwcosim.hdl.bbs.lstm import LSTMLayer

    return LSTMLayer(p)


def _lstm_axi(p: LSTMParams):
    from hwcosim.hdl.bbs.axi_top import LSTMAxiTop

    return LSTMAxiTop(p)


def _csr(p: CSRParams):
    from hwcosim.hdl.bbs.csr import CSRSpMxV

    return CSRSpMxV(p)


DESIGNS = [
    Design(
        name="bbs-lstm", top="bbs_lstm", build=_lstm,
        default_params=lambda: LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8),
        # the SpMxV's output register on the board: a faster clock (docs/boards/results.json) for
        # one cycle more per step; the cycle model follows p.bbs.latency
        board_params=lambda: LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8, out_stage=True,
                                      mul_stage=True, skid=True),
        # the iCE40UP5K: P = 4 PEs of one bank (4 SB_MAC16) + the element-wise unit's 3 = 7 of 8;
        # H = 32 (area and Fmax with the scan harness: docs/boards/ice40.json)
        family_params=(("ice40", lambda: LSTMParams(input_size=8, hidden=32, banks=1, k=4, pes=4, out_stage=True)),),
        description="BBS LSTM layer: SpMxV (P x B) + PLAN element-wise unit + vector builder "
                    "(Cao et al., FPGA 2019)",
        golden="hwcosim.models.bbs.lstm:lstm_golden", testbench="hwcosim.cosim.designs.bbs.tb_lstm",
        formal="hwcosim.hdl.bbs.lstm_formal:formal_checks",
        benches=(("bbs_lstm", "hwcosim.cosim.designs.bbs.lstm_bench:bench_bbs_lstm"),
                 ("bbs_lstm_delta", "hwcosim.cosim.designs.bbs.lstm_bench:bench_bbs_lstm_delta")),
        on_board_in="bbs-lstm-axi", docs=LSTM_DOCS, contract="hwcosim.cosim.designs.bbs.contract:LSTM"),
    Design(
        name="bbs-lstm-axi", top="bbs_lstm_axi", build=_lstm_axi,
        default_params=lambda: LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8),
        description="BBS LSTM layer behind AXI4-Stream (weights, x, h), an AXI4 read master (weights "
                    "from memory: LOAD_MM) and AXI4-Lite (start, soft reset, busy/done/error, read-error "
                    "address, performance counters); map and fault behaviour in hdl/bbs/axi_top.py",
        golden="hwcosim.models.bbs.lstm:lstm_golden", testbench="hwcosim.cosim.designs.bbs.tb_axi",
        formal="hwcosim.hdl.bbs.axi_top_formal:formal_checks",
        formal_extra=(("axi-reader", "hwcosim.hdl.common.axi_reader_formal:formal_checks"),),
        register_map="hwcosim.hdl.bbs.axi_top:REGISTER_MAP", docs=LSTM_DOCS,
        recheck="hwcosim.cosim.designs.bbs.board_lstm:recheck",  # hwcosim check of a board run --sim folder
        # the same board configuration as bbs-lstm (the SpMxV's output register): the AXI top
        # wraps that layer, so without it the FPGA build would measure the slower layer
        board_params=lambda: LSTMParams(input_size=8, hidden=64, banks=8, k=2, pes=8, out_stage=True,
                                      mul_stage=True, skid=True),
        # no iCE40 configuration: with the AXI top, bbs-lstm's (I = 8, H = 32, P = 4, one bank) no
        # longer fits the iCE40UP5K since the SpMxV's registered vector write (docs/boards/ice40.json
        # lists the failure; CHANGELOG.md the cell counts)
        # UART host bridge straight onto the AXI ports (hdl/bbs/board_lstm.py)
        board_tops=(("uart", "hwcosim.hdl.bbs.board_lstm:board_top", "hwcosim.cosim.designs.bbs.board_lstm"),),
        contract="hwcosim.cosim.designs.bbs.contract:LSTM_AXI"),
    Design(
        name="bbs-csr", top="bbs_csr", build=_csr,
        default_params=lambda: CSRParams(rows=256, cols=72, mults=64, lanes=8),
        description="Row-wise CSR SpMxV baseline (ESE-style, unbalanced rows), M single-multiplier PEs",
        golden="hwcosim.models.bbs.csr:spmxv_entries", testbench="hwcosim.cosim.designs.bbs.tb_csr",
        formal="hwcosim.hdl.bbs.csr_formal:formal_checks", formal_prove=False, docs=SPMXV_DOCS,
        # 16 PEs on the LFE5U-85F: with the default 64, each PE's private copy of the vector (64 LUT-RAM
        # copies written from one bus) left nextpnr with 138k overused wires after 14 minutes; the
        # replication a row-wise CSR engine needs is the cost the BBS engine's banking avoids
        board_params=lambda: CSRParams(rows=256, cols=72, mults=16, lanes=8),
        recheck="hwcosim.cosim.designs.bbs.board_csr:recheck",  # hwcosim check of a board run --sim folder
        # the generic stream host (hdl/common/stream_host.py) behind the UART bridge (hdl/bbs/board_csr.py)
        board_tops=(("uart", "hwcosim.hdl.bbs.board_csr:board_top", "hwcosim.cosim.designs.bbs.board_csr"),),
        contract="hwcosim.cosim.designs.bbs.contract:CSR"),
]
