"""BBS designs for ``hwcosim verilog``."""

from models.bbs import BBSParams


def _spmxv(p: BBSParams):
    from hdl.bbs import SpMxV

    return SpMxV(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="bbs-spmxv", top="bbs_spmxv", build=_spmxv,
        default_params=lambda: BBSParams(rows=128, cols=128, banks=8, k=2, pes=8),
        description="BBS sparse matrix-vector engine: P PEs x B banks (Cao et al., FPGA 2019)"))


_add()
