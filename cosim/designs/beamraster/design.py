"""Registry entry of the BeamRaster precoder (see :mod:`hwcosim.cosim.designs`)."""

from hwcosim.cosim.registry import Design, DocsEntry
from hwcosim.models.beamraster.datapath import PrecoderParams


def _precoder(p: PrecoderParams):
    from hwcosim.hdl.beamraster import Precoder

    return Precoder(p)


DESIGNS = [
    Design(
        name="beamraster-precoder", top="beamraster_precoder", build=_precoder,
        default_params=lambda: PrecoderParams(M=64, K=8, lanes=64, groups=100, sc_per_group=12,
                                              symbols_per_frame=14),
        description="BeamRaster precoder: K users -> M antennas per subcarrier, DFT beams + pre-distortion "
                    "(Meng et al., IEEE TMC 2019)",
        # on the LFE5U-85F (156 MULT18X18D) the 64 antennas share 16 lanes of multipliers over 4 cycles
        # per subcarrier (the default 64 lanes need 284 multipliers, 182% of the part)
        board_params=lambda: PrecoderParams(M=64, K=8, lanes=16, groups=100, sc_per_group=12, symbols_per_frame=14),
        # its board top (the precoder behind the stream host and the UART bridge) shares 8 lanes over 8
        # cycles: at 16 lanes the 96 multipliers and 60 block RAMs of the top fit the ULX3S-85F but did
        # not route (nextpnr router1 and router2 stalled at 4,000-9,000 overused wires); at 8 lanes it
        # routes in minutes (docs/boards/bitstreams.json)
        board_top_params=lambda: PrecoderParams(M=64, K=8, lanes=8, groups=100, sc_per_group=12,
                                                symbols_per_frame=14),
        golden="hwcosim.models.beamraster.datapath:precode_fixed",
        testbench="hwcosim.cosim.designs.beamraster.tb_precoder",
        formal="hwcosim.hdl.beamraster.precoder_formal:formal_checks",
        recheck="hwcosim.cosim.designs.beamraster.precoder:recheck",  # also the folders of hwcosim board run --sim
        # the generic stream host (hdl/common/stream_host.py) behind the UART bridge (hdl/beamraster/board.py)
        board_tops=(("uart", "hwcosim.hdl.beamraster.board:board_top", "hwcosim.cosim.designs.beamraster.board"),),
        benches=(("beamraster_realtime", "hwcosim.cosim.designs.beamraster.precoder:bench_beamraster_realtime"),
                 ("beamraster_dsp", "hwcosim.cosim.designs.beamraster.precoder:bench_beamraster_dsp")),
        contract="hwcosim.cosim.designs.beamraster.contract:PRECODER",
        docs=DocsEntry("beamraster", "BeamRaster MU-MIMO precoder",
                       "Meng et al., \"BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed "
                       "Precoders\", IEEE TMC 18(5), 2019")),
]
