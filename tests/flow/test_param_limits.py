"""Parameter objects refuse shapes no FPGA holds at once, instead of hanging the elaboration."""

import pytest
from hwcosim.cosim.cli import main
from hwcosim.models.bbs.spmxv import BBSParams


@pytest.mark.parametrize("field,value", [("rows", 10**20), ("cols", 1 << 17), ("pes", 4096), ("banks", 2048)])
def test_bbs_limits(field, value):
    kw = dict(rows=64, cols=64, banks=4, k=2, pes=1)
    kw[field] = value
    with pytest.raises(ValueError, match=f"{field}={value} is beyond"):
        BBSParams(**kw)


def test_bbs_largest_lstm_shape_still_accepted():
    # the 1024-hidden LSTM of the BBS paper: 4H x (I + H) = 4096 x 2048, P=16, B=16
    BBSParams(rows=4096, cols=2048, banks=16, k=16, pes=16)


def test_cli_huge_param_exit_2(tmp_path, capsys):
    rc = main(["verilog", "bbs-spmxv", "--param", "rows=100000000000000000000", "--synth", "none",
               "-o", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "beyond what this generator builds" in err[0]


def test_beamraster_limits():
    from hwcosim.models.beamraster.datapath import PrecoderParams

    with pytest.raises(ValueError, match="M=1048576 is beyond"):
        PrecoderParams(M=1 << 20)
    PrecoderParams(M=256, K=32, lanes=64)


def test_csr_limits():
    from hwcosim.models.bbs.csr import CSRParams

    with pytest.raises(ValueError, match="rows=100000000 is beyond"):
        CSRParams(rows=10**8, cols=64, mults=8)
    CSRParams(rows=4096, cols=2048, mults=256, depth=64)
