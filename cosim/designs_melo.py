"""MELO designs for ``hwcosim verilog``."""

from models.melo.engine import MeloEngineParams


def _engine(p: MeloEngineParams):
    from hdl.melo import MeloEngine

    return MeloEngine(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="melo-engine", top="melo_engine", build=_engine,
        default_params=lambda: MeloEngineParams(n_conns=1024, psn_bits=24, block_bits=64, pool_blocks=256,
                                                max_blocks_per_conn=4),
        description="MELO receiver: metadata table, shared bits pool, free list, ACK/SACK/NACK "
                    "(Lu et al., APNet 2017)"))


_add()
