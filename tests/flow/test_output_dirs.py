"""Output folders: every command's -o is refused before any work when it cannot be a folder, and the
outputs of one command are staged beside it and renamed into place only when all are written."""

from __future__ import annotations

import argparse
import errno
import os

import hwcosim.cosim.cli as cli
import pytest
from hwcosim.cosim.cli import build_parser, main
from hwcosim.models.atomic import check_out_dir, staged_dir
from hwcosim.models.errors import UsageError


def _commands_with_output() -> list[list[str]]:
    """Every (sub)command of the parser that takes -o, with its required positionals and options filled in."""
    found = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, sp in subs[0].choices.items():
                walk(sp, [*prefix, name])
            return
        if not any("-o" in a.option_strings for a in parser._actions):
            return
        argv = list(prefix)
        for a in parser._actions:
            if not a.option_strings and a.nargs not in ("?", "*", argparse.REMAINDER):
                argv.append("x")  # a positional (a design, a scenario, a spec): not read before the -o check
            elif a.option_strings and a.required:
                argv += [a.option_strings[-1], "x"]  # a required option (run --inputs): not read before it either
        found.append(argv)

    walk(PARSER, [])
    return found


PARSER = build_parser()
COMMANDS = _commands_with_output()


def test_the_list_of_commands_is_derived_from_the_parser():
    names = {" ".join(a for a in c if a != "x") for c in COMMANDS}
    assert {"sim", "demo", "verilog", "build", "prune", "cosim melo", "cosim serve", "cosim kv", "board run",
            "beamraster sim", "melo run", "kvdirect study", "cluster run", "sweep"} <= names, names
    assert len(COMMANDS) >= 30


def _unwritable(tmp_path, monkeypatch):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    if os.access(d, os.W_OK):  # root ignores the mode bits: make the check see what a user would
        import hwcosim.models.atomic as atomic

        real = os.access
        monkeypatch.setattr(atomic.os, "access", lambda p, m, real=real: False if str(p).startswith(str(d))
                            else real(p, m))
    return d / "out"


@pytest.mark.parametrize("case", ["existing-file", "inside-a-file", "unwritable"])
@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_unusable_output_is_refused_before_any_work(tmp_path, capsys, monkeypatch, argv, case):
    f = tmp_path / "afile"
    f.write_text("x")
    out = {"existing-file": f, "inside-a-file": f / "sub", "unwritable": None}[case]
    if out is None:
        out = _unwritable(tmp_path, monkeypatch)

    def no_work(args):  # the command itself must not start
        raise AssertionError("the command ran although its -o is unusable")

    real_parse = argparse.ArgumentParser.parse_args

    def parse(self, *a, **k):
        ns = real_parse(self, *a, **k)
        ns.func = no_work
        return ns

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse)
    monkeypatch.setattr(cli, "build_parser", lambda: PARSER)  # built once for all the cases
    assert main([*argv, "-o", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: output path"), err
    assert f.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) in (["afile"], ["afile", "ro"])


def test_staged_dir_renames_a_new_folder_into_place(tmp_path):
    out = tmp_path / "new"
    with staged_dir(out) as st:
        (st / "a.json").write_text("1")
        assert not out.exists()
    assert (out / "a.json").read_text() == "1"
    assert [p.name for p in tmp_path.iterdir()] == ["new"]


def test_staged_dir_leaves_nothing_after_a_late_failure(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(OSError), staged_dir(out) as st:
        (st / "a.json").write_text("1")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []
    old = tmp_path / "old"
    old.mkdir()
    (old / "a.json").write_text("old")
    with pytest.raises(RuntimeError), staged_dir(old) as st:
        (st / "a.json").write_text("new")
        raise RuntimeError("late")
    assert [p.name for p in old.iterdir()] == ["a.json"] and (old / "a.json").read_text() == "old"


def test_staged_dir_merges_into_an_existing_folder_manifest_last(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("k")
    (out / "run.json").write_text("old manifest")
    (out / "sub").mkdir()
    moved = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (moved.append(os.path.basename(b)), real(a, b)))
    with staged_dir(out) as st:
        (st / "z.npz").write_text("z")
        (st / "run.json").write_text("new manifest")
        (st / "sub").mkdir()
        (st / "sub" / "f").write_text("f")
    assert moved[-1] == "run.json"
    assert (out / "run.json").read_text() == "new manifest" and (out / "keep.txt").read_text() == "k"
    assert (out / "sub" / "f").read_text() == "f" and sorted(p.name for p in out.iterdir()) == [
        "keep.txt", "run.json", "sub", "z.npz"]


def test_check_out_dir_accepts_a_new_nested_folder(tmp_path):
    assert check_out_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    with pytest.raises(UsageError, match="exists and is not a directory"):
        check_out_dir(__file__)


def test_full_disk_mid_command_exits_2_and_leaves_no_folder(tmp_path, capsys, monkeypatch):
    """hwcosim verilog writes several files; the disk fills up at the second: one line, exit 2, and
    neither the output folder nor its staging sibling is left behind."""
    import hwcosim.models.atomic as atomic

    real, calls = atomic.write_text, []

    def fill_up(path, text):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(atomic, "write_text", fill_up)
    out = tmp_path / "v"
    assert main(["verilog", "bbs-spmxv", "--synth", "none", "--param", "rows=8", "--param", "cols=16",
                 "--param", "banks=2", "--param", "k=2", "--param", "pes=2", "-o", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "No space left on device" in err[0], err
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


def _fake_bridge(exc):
    def run_bridge(sp, *, model_only, sim, test_dir):
        from hwcosim.cosim.flow.runs import seal

        test_dir.mkdir(parents=True)
        (test_dir / "inputs.json").write_text("{}")
        seal(test_dir, "kvdirect-pipeline")  # what the bridge does before it raises on a mismatch
        raise exc

    return run_bridge


def test_bridge_keeps_its_run_folder_when_the_rtl_disagrees(tmp_path, capsys, monkeypatch):
    import hwcosim.cosim.designs.kvdirect.bridge as kv
    from hwcosim.cosim.flow.bridge import BridgeMismatch

    monkeypatch.setattr(kv, "run_bridge", _fake_bridge(BridgeMismatch("1 of 32 KV-Direct RTL responses differ")))
    out = tmp_path / "o"
    assert main(["cosim", "kv", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "responses differ" in err and f"evidence in {out / 'bridge_kv'}" in err
    assert (out / "bridge_kv" / "run.json").is_file() and not (out / "bridge_kv.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["o"]  # no staging folder left


def test_bridge_leaves_nothing_after_a_full_disk(tmp_path, capsys, monkeypatch):
    import hwcosim.cosim.designs.kvdirect.bridge as kv

    monkeypatch.setattr(kv, "run_bridge", _fake_bridge(OSError(errno.ENOSPC, "No space left on device")))
    assert main(["cosim", "kv", "-o", str(tmp_path / "o")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "No space left on device" in err[0]
    assert list(tmp_path.iterdir()) == []
