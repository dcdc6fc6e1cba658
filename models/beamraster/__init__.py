"""BeamRaster massive MU-MIMO precoding (Meng et al., IEEE TMC 18(5), 2019): channels, precoders,
the fixed-point precoder datapath golden model, and the capacity study."""
