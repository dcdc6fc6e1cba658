"""Terminal tables put units in their headers (issue 27, requirement 6): the audit that the test
suite runs on every table it prints (``HWCOSIM_STRICT_TABLES=1``, tests/conftest.py)."""

from __future__ import annotations

import pytest
from hwcosim.models.tables import json_session, missing_unit, show, table


@pytest.mark.parametrize("header", ["wall s", "Fmax (MHz)", "M edges/s/core", "p99 ms", "LUT", "cycles", "k",
                                    "ours 1t / scipy", "loss %", "speedup", "target sparsity", "GBN B/conn",
                                    "latency (cycles)", "mean JCT h", "worker RSS MB shared", "SNR dB"])
def test_headers_with_a_unit(header):
    assert not missing_unit(header)


@pytest.mark.parametrize("header", ["time", "makespan", "mean JCT", "MELO avg", "shared", "achieved", "ideal",
                                    "CSB", "speed", "staleness"])
def test_headers_without_a_unit(header):
    assert missing_unit(header)


def test_a_unitless_numeric_column_fails_the_suite(monkeypatch, capsys):
    monkeypatch.setenv("HWCOSIM_STRICT_TABLES", "1")
    with pytest.raises(ValueError, match=r"\['makespan'\] name no unit"):
        show(table("jobs", ["policy", "makespan"], [["fifo", "12.5"]]))
    show(table("jobs", ["policy", "makespan h"], [["fifo", "12.5"]]))  # fixed: passes
    show(table("jobs", ["policy", "note"], [["fifo", "slow start"]]))  # a text column needs no unit
    show(table(None, ["metric", "model only"], [["wall time (s)", "1.5"]]))  # the unit is in the row label
    assert "12.5" in capsys.readouterr().out


def test_json_tables_are_audited_too(monkeypatch):
    monkeypatch.setenv("HWCOSIM_STRICT_TABLES", "1")
    with json_session(), pytest.raises(ValueError, match="name no unit"):
        show(table("t", ["name", "time"], [["a", "1.0"]]))
