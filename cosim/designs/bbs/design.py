"""Registry entries of the BBS SpMxV engine (see :mod:`hwcosim.cosim.designs`)."""

from hwcosim.cosim.registry import Design, DocsEntry
from hwcosim.models.bbs.spmxv import BBSParams

PAPER = "Cao et al., \"Efficient and Effective Sparse LSTM on FPGA with Bank-Balanced Sparsity\", FPGA 2019"
SPMXV_DOCS = DocsEntry("bbs-spmxv", "BBS sparse matrix-vector engine", PAPER, handwritten=True)


def _spmxv(p: BBSParams):
    from hwcosim.hdl.bbs import SpMxV

    return SpMxV(p)


DESIGNS = [
    Design(
        name="bbs-spmxv", top="bbs_spmxv", build=_spmxv,
        default_params=lambda: BBSParams(rows=128, cols=128, banks=8, k=2, pes=8),
        # for the FPGA: the output register after the accumulator (one cycle of latency) splits the
        # accumulate -> round -> saturate path; the products registered twice (mul_stage: the DSP's
        # output register, then the fabric) take the FF -> DSP -> FF routing out of it (figures:
        # docs/boards/results.json; their history: CHANGELOG.md)
        board_params=lambda: BBSParams(rows=128, cols=128, banks=8, k=2, pes=8, out_stage=True, mul_stage=True),
        # the iCE40UP5K (iCEBreaker): its 8 SB_MAC16 make P x B = 2 x 4 multipliers; same matrix,
        # the same 87.5 % sparsity (k = 4 of 32 per bank); no mul_stage there (little gain for its FFs)
        family_params=(("ice40", lambda: BBSParams(rows=128, cols=128, banks=4, k=4, pes=2, out_stage=True)),),
        description="BBS sparse matrix-vector engine: P PEs x B banks (Cao et al., FPGA 2019)",
        golden="hwcosim.models.bbs.spmxv:spmxv", testbench="hwcosim.cosim.designs.bbs.tb_spmxv",
        formal="hwcosim.hdl.bbs.spmxv_formal:formal_checks",
        benches=(("bbs_spmxv", "hwcosim.cosim.designs.bbs.bench:bench_bbs_spmxv"),),
        sweep="hwcosim.cosim.designs.bbs.sweep:ADAPTER", recheck="hwcosim.cosim.designs.bbs.spmxv:recheck",
        docs=SPMXV_DOCS,
        # host bridge (UART) + weight/vector/result memories + the engine (hdl/bbs/board.py);
        # driven by hwcosim board run bbs-spmxv (the host module: session, compare, run_board_sim)
        board_tops=(("uart", "hwcosim.hdl.bbs.board:board_top", "hwcosim.cosim.designs.bbs.board"),),
        contract="hwcosim.cosim.designs.bbs.contract:SPMXV"),
]
