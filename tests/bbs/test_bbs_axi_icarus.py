"""Icarus Verilog regressions for the BBS engines (skipped when ``iverilog`` is missing).

Cause of the P16 B2 LSTM failure under Icarus (an X on ``x__ready`` at the start of a run):
not an uninitialised register or memory in the design. Yosys's Verilog back end (used by
Amaranth) declares every register with an initialiser (``reg in_h = 1'h0;``) and relies on
Verilog-2005 semantics, where applying it is an event that wakes every ``always @*`` block at
time 0. cocotb compiles with ``iverilog -g2012``; under IEEE 1800 semantics Icarus 11 applies
initialisers without an event, so a combinational ``always @*`` block whose inputs never change
after time 0 (``x.ready`` of P16 B2: ``in_h``, ``xb`` and the SpMxV's ``x.ready`` are constant
until the first input) is never evaluated and stays X. Verilator (and synthesis) evaluate it.
The fix is in ``cosim/flow/runner.py``: it passes ``-g2005`` to Icarus (a later ``-g`` overrides
cocotb's ``-g2012``); with it the P16 B2 run is bit- and cycle-exact under Icarus.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hwcosim.models.bbs.lstm import LSTMCycleModel

needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None or shutil.which("vvp") is None,
                                    reason="Icarus Verilog (iverilog) is not installed")

_T0 = """module t;
  reg d = 0;  reg a = 0;  reg y;
  always @* begin if (d) begin end y = 1'b0; if (~a) y = 1'b1; end
  initial #5 $display("y=%b", y);
endmodule
"""


@needs_iverilog
@pytest.mark.parametrize("gen,want", [("-g2012", "y=x"), ("-g2005", "y=1")])
def test_icarus_time0_always_star_semantics(tmp_path, gen, want):
    """The mechanism, on Yosys's own time-0 idiom: only Verilog-2005 semantics evaluate it."""
    (tmp_path / "t.v").write_text(_T0)
    subprocess.run(["iverilog", gen, "-o", str(tmp_path / "t"), str(tmp_path / "t.v")], check=True)
    out = subprocess.run(["vvp", str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout
    assert want in out


@needs_iverilog
@pytest.mark.sim
def test_lstm_p16_b2_on_icarus(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from hwcosim.cosim.designs.bbs.lstm import run_lstm
    from test_bbs_lstm_sim import _case

    p, wts, xs = _case(16, 2, 2, 16, 4, n=2, T=3, seed=18)
    mt = run_lstm(p, wts, xs, test_dir=tmp_path, sim="icarus").metrics
    assert mt["mismatches"] == 0 and mt["cycles"] == LSTMCycleModel(p).expected(2, 3)
