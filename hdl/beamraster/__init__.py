"""BeamRaster precoder datapath (Meng et al., IEEE TMC 18(5), 2019)."""

from hwcosim.hdl.beamraster.precoder import S_BANKS, Precoder, complex_layout

__all__ = ["Precoder", "complex_layout", "S_BANKS"]
