"""``hwcosim bench --only``: choosing benches by name, with a one-line error on unknown names."""

import json

import pytest
from hwcosim.cosim.cli import UsageError, main
from hwcosim.cosim.flow.bench import BENCHES, run_benches, select_benches


def test_select_all_and_some():
    assert select_benches(None) == list(BENCHES)
    assert select_benches("kernels, bbs_lstm") == ["kernels", "bbs_lstm"]


@pytest.mark.parametrize("only", ["nope", "kernels,nope", ","])
def test_unknown_names_are_refused(only):
    with pytest.raises(UsageError, match="unknown bench"):
        select_benches(only)


def test_cli_unknown_bench_exit_2(tmp_path, capsys):
    assert main(["bench", "--only", "nope", "-o", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "choose from" in err[0]
    assert not (tmp_path / "b").exists()


def test_partial_run_keeps_other_entries(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setitem(BENCHES, "fake_a", lambda out, quick: ran.append(("a", quick)) or {})
    monkeypatch.setitem(BENCHES, "fake_b", lambda out, quick: ran.append(("b", quick)) or {})
    (tmp_path / "index.json").write_text(json.dumps({"older": {"seconds": 1.0}}))

    assert set(run_benches("fake_b", quick=True, out=tmp_path)) == {"older", "fake_b"}
    assert ran == [("b", True)]
    index = json.loads((tmp_path / "index.json").read_text())
    assert set(index) == {"older", "fake_b"} and index["fake_b"]["quick"] is True
