"""FSS designs for ``hwcosim verilog``."""

from models.fss import FSSParams


def _gemm(p: FSSParams):
    from hdl.fss import FSSGemm

    return FSSGemm(p)


def _axi(p: FSSParams):
    from hdl.fss.axi_top import FSSAxiTop

    return FSSAxiTop(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="fss-gemm", top="fss_gemm", build=_gemm,
        default_params=lambda: FSSParams(region=(2, 8), n=4, pe_rows=4, pe_cols=4, max_rows=1024, max_cols=1024),
        description="FSS sparse GEMM engine: PR x PC PEs, r_h x r_w regions, N per region "
                    "(Zhang et al., IEEE TCAD 2025)"))
    DESIGNS.append(Design(
        name="fss-axi", top="fss_axi", build=_axi,
        default_params=lambda: FSSParams(region=(2, 8), n=4, pe_rows=4, pe_cols=4, max_rows=256, max_cols=256),
        description="FSS GEMM engine + on-chip weight store behind AXI4-Stream (weights, activations, "
                    "results) and AXI4-Lite (start, sizes, busy/done/error, counters, SLVERR); map in "
                    "hdl/fss/axi_top.py"))


_add()
