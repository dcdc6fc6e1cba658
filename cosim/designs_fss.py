"""FSS designs for ``hwcosim verilog``."""

from models.fss import FSSParams


def _gemm(p: FSSParams):
    from hdl.fss import FSSGemm

    return FSSGemm(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="fss-gemm", top="fss_gemm", build=_gemm,
        default_params=lambda: FSSParams(region=(2, 8), n=4, pe_rows=4, pe_cols=4, max_rows=1024, max_cols=1024),
        description="FSS sparse GEMM engine: PR x PC PEs, r_h x r_w regions, N per region "
                    "(Zhang et al., IEEE TCAD 2025)"))


_add()
