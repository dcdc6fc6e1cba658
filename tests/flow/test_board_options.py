"""``hwcosim board run``'s workload options: each design's host module names the ones it takes
(``OPTIONS``) and receives them as keywords of its ``inputs``; the command line refuses the others
with one line naming the option and the design, before any work."""

from __future__ import annotations

import importlib
import inspect

import pytest
from hwcosim.cosim.cli import main
from hwcosim.cosim.cli.board import _WORKLOAD
from hwcosim.cosim.flow.board_build import board_top_ref
from hwcosim.cosim.registry import designs

BOARD_DESIGNS = sorted(n for n, d in designs().items() if d.board_tops)
#: a value of each workload option (never read: the option is refused first)
VALUES = {"csb": "w.npz", "vector": "x.npy", "n": "2", "steps": "2", "seed": "5"}


def _host(name):
    return importlib.import_module(board_top_ref(designs()[name])[2])


@pytest.mark.parametrize("name", BOARD_DESIGNS)
def test_inputs_takes_exactly_its_options_as_keywords(name):
    host = _host(name)
    assert set(host.OPTIONS) <= set(_WORKLOAD), f"{name}: an option the command line does not offer"
    sig = inspect.signature(host.inputs)
    params = list(sig.parameters.values())
    assert params[0].name == "design" and all(p.kind is p.KEYWORD_ONLY for p in params[1:])
    assert {p.name for p in params[1:]} == {"family", "param", "params_file", *host.OPTIONS}
    assert not hasattr(host, "cli_inputs")


@pytest.mark.parametrize("name", BOARD_DESIGNS)
def test_an_option_the_design_does_not_take_is_refused(name, capsys):
    refused = [k for k in _WORKLOAD if k not in _host(name).OPTIONS]
    for k in refused:
        assert main(["board", "run", name, "--sim", _WORKLOAD[k], VALUES[k]]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{_WORKLOAD[k]} does not apply to {name}" in err[0], err


def test_bbs_spmxv_refuses_steps(capsys, tmp_path):
    out = tmp_path / "run"
    assert main(["board", "run", "bbs-spmxv", "--sim", "--steps", "3", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--steps" in err[0] and "bbs-spmxv" in err[0], err
    assert not out.exists()


def test_library_inputs_defaults_match_the_command_line():
    """The keyword defaults (-n 4, --steps 3, --seed 1 in the command's help) are each design's."""
    for name in BOARD_DESIGNS:
        sig = inspect.signature(_host(name).inputs)
        for k, want in {"n": 4, "steps": 3, "seed": 1, "csb": None, "vector": None}.items():
            if k in sig.parameters:
                assert sig.parameters[k].default == want, (name, k)
