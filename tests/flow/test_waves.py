"""WAVES=1 keeps a waveform and a GTKWave save file whose signals exist in the dump."""

import re

import numpy as np
import pytest
from hwcosim.cosim.designs.bbs.spmxv import run_spmxv
from hwcosim.cosim.flow.waves import ports
from hwcosim.models.bbs.spmxv import BBSParams
from hwcosim.models.fixedpoint import quantize
from hwcosim.pruning.formats.csb import encode


def test_ports_parse():
    v = "module t(clk, a__valid, a__payload);\n  input clk;\n  input a__valid;\n  input [11:0] a__payload;\n" \
        "  output signed [3:0] s;\nendmodule\nmodule x(); input [3:0] zz; endmodule\n"
    assert ports(v) == [("clk", 1), ("a__valid", 1), ("a__payload", 12), ("s", 4)]


@pytest.mark.sim
def test_waves_and_gtkw(tmp_path):
    m = encode(np.random.default_rng(0).normal(size=(4, 8)), banks=2, sparsity=0.5)
    p = BBSParams(rows=4, cols=8, banks=2, k=m.k, pes=2, weight_fmt=m.fmt)
    x = quantize(np.random.default_rng(1).uniform(-1, 1, size=(1, 8)), p.vec_fmt)
    res = run_spmxv(p, m.values, m.indices, x, test_dir=tmp_path, waves=True)
    assert res.waves is not None and res.waves.exists() and res.waves.stat().st_size > 0
    gtkw = res.waves.with_suffix(".gtkw").read_text()
    assert f'[dumpfile] "{res.waves}"' in gtkw
    refs = re.findall(r"^bbs_spmxv\.(\w+)", gtkw, re.M)
    assert {"clk", "w__valid", "w__ready", "w__payload", "y__payload", "cycles"} <= set(refs)
    if res.waves.suffix == ".vcd":  # every referenced signal is declared in the dump's top scope
        text = res.waves.read_text(errors="replace").split("$enddefinitions", 1)[0]
        scope = text.split("$scope module bbs_spmxv $end", 1)[1]
        declared = set(re.findall(r"\$var \w+ \d+ \S+ (\w+)", scope))
        assert set(refs) <= declared
