"""Registry entry of the MELO receiver engine (see :mod:`hwcosim.cosim.designs`)."""

from hwcosim.cosim.registry import Design, DocsEntry
from hwcosim.models.melo.engine import MeloEngineParams


def _engine(p: MeloEngineParams):
    from hwcosim.hdl.melo import MeloEngineRTL

    return MeloEngineRTL(p)


DESIGNS = [
    Design(
        name="melo-engine", top="melo_engine", build=_engine,
        default_params=lambda: MeloEngineParams(n_conns=1024, psn_bits=24, block_bits=64, pool_blocks=256,
                                                max_blocks_per_conn=4),
        # the iCE40UP5K (iCEBreaker): 256 connections; its area and Fmax there are in
        # docs/boards/ice40.json (make boards-ice40)
        family_params=(("ice40", lambda: MeloEngineParams(n_conns=256, psn_bits=24, block_bits=64, pool_blocks=256,
                                                          max_blocks_per_conn=4)),),
        description="MELO receiver: metadata table, shared bits pool, free list, ACK/SACK/NACK "
                    "(Lu et al., APNet 2017)",
        golden="hwcosim.models.melo.engine:MeloEngineModel", testbench="hwcosim.cosim.designs.melo.tb_engine",
        formal="hwcosim.hdl.melo.engine_formal:formal_checks",
        # cosim_bridges: the MELO, FSS serving and KV-Direct bridges, RTL vs model (cosim/designs/bridges.py)
        benches=(("melo_engine", "hwcosim.cosim.designs.melo.engine:bench_melo_engine"),
                 ("cosim_bridges", "hwcosim.cosim.designs.bridges:bench_bridges")),
        sweep="hwcosim.cosim.designs.melo.sweep:ADAPTER",
        recheck="hwcosim.cosim.designs.melo.bridge:recheck",  # run folders of hwcosim cosim melo and board run --sim
        # the generic stream host (hdl/common/stream_host.py) behind the UART bridge (hdl/melo/board.py)
        board_tops=(("uart", "hwcosim.hdl.melo.board:board_top", "hwcosim.cosim.designs.melo.board"),),
        contract="hwcosim.cosim.designs.melo.contract:ENGINE",
        docs=DocsEntry("melo", "MELO loss-recovery engine",
                       "Lu et al., \"Memory Efficient Loss Recovery for Hardware-based Transport in Datacenter\", "
                       "APNet 2017")),
]
