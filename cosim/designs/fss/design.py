"""Registry entries of the FSS sparse GEMM engine and its AXI top (see :mod:`hwcosim.cosim.designs`)."""

from hwcosim.cosim.registry import Design, DocsEntry
from hwcosim.models.fss.gemm import FSSParams

DOCS = DocsEntry("fss", "FSS sparse GEMM engine",
                 "Zhang et al., \"Fine-Grained Structured Sparse Computing for FPGA-Based AI Inference\", "
                 "IEEE TCAD 44(7), 2025")


def _gemm(p: FSSParams):
    from hwcosim.hdl.fss import FSSGemm

    return FSSGemm(p)


def _axi(p: FSSParams):
    from hwcosim.hdl.fss.axi_top import FSSAxiTop

    return FSSAxiTop(p)


DESIGNS = [
    Design(
        name="fss-gemm", top="fss_gemm", build=_gemm,
        default_params=lambda: FSSParams(region=(2, 8), n=4, pe_rows=4, pe_cols=4, max_rows=1024, max_cols=1024),
        description="FSS sparse GEMM engine: PR x PC PEs, r_h x r_w regions, N per region "
                    "(Zhang et al., IEEE TCAD 2025)",
        golden="hwcosim.models.fss.gemm:gemm", testbench="hwcosim.cosim.designs.fss.tb_gemm",
        formal="hwcosim.hdl.fss.gemm_formal:formal_checks",
        recheck="hwcosim.cosim.designs.fss.gemm:recheck",  # run folders of hwcosim cosim serve --device fss
        benches=(("fss_layers", "hwcosim.cosim.designs.fss.bench:bench_fss_layers"),
                 ("fss_synth", "hwcosim.cosim.designs.fss.bench:bench_fss_synth")),
        on_board_in="fss-axi", docs=DOCS, contract="hwcosim.cosim.designs.fss.contract:GEMM"),
    Design(
        name="fss-axi", top="fss_axi", build=_axi,
        default_params=lambda: FSSParams(region=(2, 8), n=4, pe_rows=4, pe_cols=4, max_rows=256, max_cols=256),
        description="FSS GEMM engine + on-chip weight store behind AXI4-Stream (weights, activations, "
                    "results) and AXI4-Lite (start, sizes, busy/done/error, counters, SLVERR); map in "
                    "hdl/fss/axi_top.py",
        golden="hwcosim.models.fss.gemm:gemm", testbench="hwcosim.cosim.designs.fss.tb_axi",
        formal="hwcosim.hdl.fss.axi_top_formal:formal_checks", register_map="hwcosim.hdl.fss.axi_top:REGISTER_MAP",
        recheck="hwcosim.cosim.designs.fss.board:recheck",  # hwcosim check of a board run --sim folder
        # UART host bridge straight onto the AXI ports (hdl/fss/board.py)
        board_tops=(("uart", "hwcosim.hdl.fss.board:board_top", "hwcosim.cosim.designs.fss.board"),),
        docs=DOCS, contract="hwcosim.cosim.designs.fss.contract:AXI"),
]
