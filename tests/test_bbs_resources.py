"""Yosys resource estimates of the BBS LSTM layer vs (P, B) (one small configuration in CI)."""

import pytest


@pytest.mark.synth
def test_resource_table_small_config(tmp_path):
    from cosim.bbs_lstm_bench import resource_markdown, resource_table

    rows = resource_table(configs=((4, 4),), hidden=8, input_size=4, targets=("xcup",), out_dir=tmp_path)
    assert len(rows) == 1 and (tmp_path / "bbs_lstm_resources.json").exists()
    r = rows[0]
    # 16 SpMxV multipliers + 3 per hidden unit in the element-wise unit map to DSPs or LUT logic
    assert r["LUT"] > 100 and r["FF"] > 100 and r["DSP"] + r["LUT"] > 0
    assert "| 4 | 4 |" in resource_markdown(rows)
