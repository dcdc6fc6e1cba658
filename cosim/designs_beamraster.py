"""BeamRaster designs for ``hwcosim verilog``."""

from models.beamraster.datapath import PrecoderParams


def _precoder(p: PrecoderParams):
    from hdl.beamraster import Precoder

    return Precoder(p)


DESIGNS = []


def _add():
    from cosim.designs import Design

    DESIGNS.append(Design(
        name="beamraster-precoder", top="beamraster_precoder", build=_precoder,
        default_params=lambda: PrecoderParams(M=64, K=8, lanes=64, groups=100, sc_per_group=12, symbols_per_frame=14),
        description="BeamRaster precoder: K users -> M antennas per subcarrier, DFT beams + pre-distortion "
                    "(Meng et al., IEEE TMC 2019)"))


_add()
