"""One board top for a whole compiled model (:mod:`hwcosim.hdl.compiled.board`): every distinct engine
configuration behind ONE UART host bridge, built and run as one (``hwcosim build OUT/``, ``hwcosim board
run OUT/``; :func:`hwcosim.cosim.compile_board.board_sessions`).

- the decode: an engine field in the upper address bits routes each AXI4-Lite channel to exactly one
  engine's register file, and an address naming no engine is answered DECERR (Amaranth simulation
  against real register files, with random handshakes);
- the host side: an engine's session runs unchanged through :class:`EngineLink` (its addresses and
  channels offset onto its slot); layers of equal configuration share a slot;
- build: ``hwcosim build OUT/`` hands the build flow ONE design, the combined top of every engine
  (``combined=False`` keeps one build per configuration);
- board run: an LSTM -> Gemm model (two engines) through ``hwcosim board run OUT/ --sim`` on the combined
  top's RTL, one simulation through a bit-level UART model: every output word of every layer equals
  ``predict`` and each layer's run folder re-checks (``sim``).
"""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path

import numpy as np
import pytest
from amaranth import Elaboratable, Module
from amaranth.sim import Simulator
from hwcosim.cosim import compile_board as cb
from hwcosim.cosim.cli import main
from hwcosim.cosim.compile import engine_stem
from hwcosim.cosim.flow.board import EngineLink
from hwcosim.hdl.common.axil_regs import AxiLiteRegFile, Reg
from hwcosim.hdl.compiled.board import (
    DECERR,
    AxiLiteDecode,
    CompiledTopParams,
    board_top,
    in_channel,
    out_channel,
    reg_address,
)
from test_compile import lstm_model

import hwcosim

BOARD = "ulx3s-85f"


def _cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# -- the decode ------------------------------------------------------------------------------------

class _Decoded(Elaboratable):
    """The decode in front of ``n`` register files; engine ``e``'s ID register reads ``0xE0 + e``, its
    SCRATCH register keeps what is written."""

    def __init__(self, n):
        self.n = n
        self.dec = AxiLiteDecode(n)
        regs = (Reg("ID", 0x00, "r", "which engine"), Reg("SCRATCH", 0x04, "rw", "a written word"))
        self.rf = [AxiLiteRegFile(regs, addr_width=8) for _ in range(n)]
        self.writes = [0] * n

    def elaborate(self, platform):
        from amaranth.hdl import Signal
        from hwcosim.hdl.common.axil_regs import axil_members

        m = Module()
        m.submodules.dec = self.dec
        self.scratch = []
        for e, rf in enumerate(self.rf):
            m.submodules[f"rf{e}"] = rf
            for name, member in axil_members(8).items():
                mine, its = getattr(rf, name), self.dec.port(e, name[len("s_axil_"):])
                m.d.comb += mine.eq(its) if member.flow.name == "In" else its.eq(mine)
            sc = Signal(32, name=f"scratch{e}")
            self.scratch.append(sc)
            m.d.comb += [rf.w_ok.eq(rf.w_writable), rf.r_ID.eq(0xE0 + e), rf.r_SCRATCH.eq(sc)]
            with m.If(rf.wr & (rf.widx == 1)):
                m.d.sync += sc.eq(rf.wdata)
        return m


async def _write(ctx, d, addr, data, rng):
    """One write as HostBridge makes it: the address held, AW and W each held until taken, then B."""
    ctx.set(d.s_axil_awaddr, addr)
    ctx.set(d.s_axil_wdata, data)
    ctx.set(d.s_axil_wstrb, 0xF)
    aw = w = False
    for _ in range(50):
        ctx.set(d.s_axil_awvalid, int(not aw))
        ctx.set(d.s_axil_wvalid, int(not w))
        ctx.set(d.s_axil_bready, int(aw and w and rng.random() < 0.7))
        await ctx.delay(1e-9)
        _check_routing(ctx, d)
        took_aw, took_w = ctx.get(d.s_axil_awready) and not aw, ctx.get(d.s_axil_wready) and not w
        done = aw and w and ctx.get(d.s_axil_bvalid) and ctx.get(d.s_axil_bready)
        resp = ctx.get(d.s_axil_bresp)
        await ctx.tick()
        aw, w = aw or took_aw, w or took_w
        if done:
            for k in ("awvalid", "wvalid", "bready"):
                ctx.set(getattr(d, f"s_axil_{k}"), 0)
            return resp
    raise AssertionError(f"no write response at {addr:#x}")


async def _read(ctx, d, addr, rng):
    ctx.set(d.s_axil_araddr, addr)
    ar = False
    for _ in range(50):
        ctx.set(d.s_axil_arvalid, int(not ar))
        ctx.set(d.s_axil_rready, int(ar and rng.random() < 0.7))
        await ctx.delay(1e-9)
        _check_routing(ctx, d)
        took = ctx.get(d.s_axil_arready) and not ar
        done = ar and ctx.get(d.s_axil_rvalid) and ctx.get(d.s_axil_rready)
        resp, data = ctx.get(d.s_axil_rresp), ctx.get(d.s_axil_rdata)
        await ctx.tick()
        ar = ar or took
        if done:
            ctx.set(d.s_axil_arvalid, 0)
            ctx.set(d.s_axil_rready, 0)
            return resp, data
    raise AssertionError(f"no read response at {addr:#x}")


def _check_routing(ctx, d):
    """Every cycle: only the addressed engine sees a valid or a ready, with the low address bits."""
    wsel, rsel = ctx.get(d.s_axil_awaddr) >> 8, ctx.get(d.s_axil_araddr) >> 8
    for e in range(d.n):
        for k, sel, src in (("awvalid", wsel, "awvalid"), ("wvalid", wsel, "wvalid"), ("bready", wsel, "bready"),
                            ("arvalid", rsel, "arvalid"), ("rready", rsel, "rready")):
            assert ctx.get(d.port(e, k)) == (ctx.get(getattr(d, f"s_axil_{src}")) and sel == e), (e, k)
        assert ctx.get(d.port(e, "awaddr")) == ctx.get(d.s_axil_awaddr) & 0xFF


def test_decode_routes_each_engine_and_answers_decerr():
    top = _Decoded(3)
    d = top.dec
    sim = Simulator(top)
    sim.add_clock(1e-8)
    seen = {}

    async def bench(ctx):
        rng = random.Random(7)
        model = [0] * 3
        for _ in range(60):
            e = rng.choice([0, 1, 2, 3, 200])
            if rng.random() < 0.5:
                v = rng.getrandbits(32)
                resp = await _write(ctx, d, reg_address(e, 0x04), v, rng)
                if e < 3:
                    assert resp == 0
                    model[e] = v
                else:
                    assert resp == DECERR
            else:
                reg = rng.choice([0x00, 0x04])
                resp, data = await _read(ctx, d, reg_address(e, reg), rng)
                if e >= 3:
                    assert resp == DECERR
                else:
                    assert resp == 0 and data == (0xE0 + e if reg == 0 else model[e])
            seen[e] = seen.get(e, 0) + 1
        for e in range(3):
            assert ctx.get(top.scratch[e]) == model[e]

    sim.add_testbench(bench)
    sim.run()
    assert set(seen) == {0, 1, 2, 3, 200}


# -- the host side ---------------------------------------------------------------------------------

class _Recorder:
    bytes_sent = bytes_received = commands = 0

    def __init__(self):
        self.calls = []

    async def ping(self, value=None):
        return value

    async def write_reg(self, addr, value):
        self.calls.append(("w", addr, value))

    async def read_reg(self, addr):
        self.calls.append(("r", addr))
        return 0

    async def write_stream(self, channel, words):
        self.calls.append(("ws", channel, list(words)))

    async def read_stream(self, channel, n):
        self.calls.append(("rs", channel, n))
        return [0] * n


def test_engine_link_offsets_addresses_and_channels():
    rec = _Recorder()
    link = EngineLink(rec, 2)

    async def go():
        await link.write_reg(0x08, 5)
        await link.read_reg(0x24)
        await link.write_stream(1, [1, 2])
        await link.read_stream(0, 3)

    asyncio.run(go())
    assert rec.calls == [("w", 0x208, 5), ("r", 0x224), ("ws", out_channel(2, 1), [1, 2]), ("rs", in_channel(2, 0), 3)]
    assert (out_channel(2, 1), in_channel(2, 0)) == (5, 2)


@pytest.fixture(scope="module")
def two_engines():
    """An LSTM -> Gemm model (BBS LSTM + BBS SpMxV: two engines) at a tiny size, and two sequences."""
    rng = np.random.default_rng(0)
    m = hwcosim.compile(lstm_model(T=2, I=4, H=8, C=4), target="bbs", sparsity=0.5,
                        calibration=rng.normal(size=(2, 16, 4)))
    return m, rng.normal(size=(2, 2, 4))


def test_combined_config_one_slot_per_configuration(two_engines):
    m, _ = two_engines
    cfg, slots = cb.combined_config(m.stages)
    assert [e for e, _ in cfg.engines] == ["bbs-lstm", "bbs-spmxv"] and slots == [0, 1]
    assert CompiledTopParams.from_dict(cfg.to_dict()) == cfg
    cfg2, slots2 = cb.combined_config([m.stages[1], m.stages[0], m.stages[1]])   # equal layers share a slot
    assert len(cfg2.engines) == 2 and slots2 == [0, 1, 0]


# -- build -----------------------------------------------------------------------------------------

def test_build_hands_the_flow_one_combined_top(two_engines, tmp_path, capsys, monkeypatch):
    from hwcosim.cosim.flow import builds

    m, _ = two_engines
    plans = m.build(BOARD, ooc=False, dry_run=True)
    assert len(plans) == 1 and plans[0]["design"] == cb.COMBINED.name and plans[0]["layers"] == [0, 1]
    assert plans[0]["slots"] == [0, 1] and plans[0]["engine"] == "bbs-lstm+bbs-spmxv"
    per = m.build(BOARD, ooc=True, dry_run=True, combined=False)
    assert [p["out"] for p in per] == [str(cb.PNR_ROOT / engine_stem(st.engine, st.params)) for st in m.stages]
    calls = []
    monkeypatch.setattr(builds, "build_ooc_designs", lambda plans, board, clock, seeds, out, **kw: calls.append(
        ("ooc", [(d.name, p) for d, p in plans], board.name)))
    monkeypatch.setattr(builds, "build_board_tops", lambda plans, board, out, **kw: calls.append(
        ("board", [(d.name, p) for d, p in plans], board.name)))
    m.save(tmp_path / "out")
    cfg, _ = cb.combined_config(m.stages)
    for argv, kind in ((["--ooc"], "ooc"), ([], "board")):
        calls.clear()
        rc, _, _ = _cli(capsys, "build", tmp_path / "out", "--board", BOARD, *argv, "-o", tmp_path / kind)
        assert rc == 0 and calls == [(kind, [("compiled-board", cfg)], BOARD)]
    from hwcosim.cosim.registry import resolve  # the top the bitstream flow elaborates (its RTL: the sim test)

    assert resolve(cb.COMBINED.board_tops[0][1]) is board_top


# -- board run -------------------------------------------------------------------------------------

@pytest.mark.sim
def test_board_run_sim_on_the_combined_top_equals_predict(two_engines, tmp_path, capsys):
    m, x = two_engines
    m.save(tmp_path / "out")
    np.save(tmp_path / "x.npy", x)
    rc, out, err = _cli(capsys, "board", "run", tmp_path / "out", "--sim", "--inputs", tmp_path / "x.npy",
                        "-o", tmp_path / "run")
    assert rc == 0, err
    _, words, _ = m._run(x, trace=True)
    n = sum(w.size for _, w in words)
    assert f"board = predict in 100% of {n} words over 2 engine layers" in out
    with np.load(tmp_path / "run" / "outputs.npz") as z:   # one simulation, every layer's words
        for i, (_, want) in enumerate(words):
            assert np.array_equal(z[f"rtl_{i}"].reshape(want.shape), want)
    rc, out, _ = _cli(capsys, "check", tmp_path / "run" / "00-lstm")   # each layer re-checks as its own run
    assert rc == 0


def test_board_run_names_the_first_differing_word_of_a_layer(two_engines, tmp_path, capsys, monkeypatch):
    m, x = two_engines

    def fake(stages, xins, test_dir, **kw):   # the board's words with one error planted in layer 1
        from types import SimpleNamespace

        _, words, _ = m._run(x, trace=True)
        outs = {f"rtl_{i}": w.copy() for i, (_, w) in enumerate(words)}
        outs["rtl_1"][1, 2] += 1
        test_dir = Path(test_dir)
        test_dir.mkdir(parents=True, exist_ok=True)
        np.savez(test_dir / "outputs.npz", **outs)
        return SimpleNamespace(passed=True, metrics={"layers": [{"run_cycles": [0]}] * 2}, log="-", test_dir=test_dir)

    monkeypatch.setattr(cb, "run_combined_sim", fake)
    m.save(tmp_path / "out")
    np.save(tmp_path / "x.npy", x)
    rc, _, err = _cli(capsys, "board", "run", tmp_path / "out", "--sim", "--inputs", tmp_path / "x.npy",
                      "-o", tmp_path / "run")
    assert rc == 1, err
    assert re.search(r"layer 1 \('out', bbs-spmxv\): 1 of \d+ words differ from predict; first at input 1, row 2", err)


# -- the measured figures on the page ----------------------------------------------------------------

def test_docs_board_figures_are_the_jsons():
    """docs/compile.md's table of the combined top of example (a): the nextpnr row is
    ``docs/boards/compiled.json``'s result, the estimate row its ``plan_estimate``."""
    import json

    root = Path(__file__).resolve().parents[2]
    results = json.loads((root / "docs" / "boards" / "compiled.json").read_text())["results"]
    text = (root / "docs" / "compile.md").read_text()
    rows = {m.group(1): [c.strip() for c in m.group(2).split("|")]
            for m in re.finditer(r"^\| (nextpnr[^|]*|plan estimate[^|]*) \|(.*)\|$", text, re.M)}
    names = [("nextpnr", "plan estimate (`--board`)")] + [
        (f"nextpnr, {100 * r['sparsity']:g} %", f"plan estimate, {100 * r['sparsity']:g} %") for r in results[1:]]
    assert len(rows) == 2 * len(results)                # every row on the page is a result's
    for r, (measured, estimate) in zip(results, names):
        a, e = r["area"], r["plan_estimate"]["total"]
        assert rows[measured] == [f"{r['worst_fmax_mhz']:.1f}", str(a["LUT4"]), str(a["DSP"]), str(a["BRAM"])]
        assert rows[estimate] == ["-", str(e["LUT4"]), str(e["DSP"]), str(e["BRAM"])]
        assert r["design"] == cb.COMBINED.name and r["board"] == BOARD and r["mode"] == "board"
    # example (a)'s tops are the ones the plan sizes today (its DSP ceiling), and they routed
    for a in results[1:]:
        assert "example (a)" in a["model"] and a["plan_estimate"]["dsp_limit"] >= a["area"]["DSP"]
        assert a["bitstream"] and "/" not in a["bitstream"]


def test_port_run_is_one_link_with_each_layer_on_its_engine(two_engines, monkeypatch):
    """``--port``: one serial link for every layer, each layer's own session on its engine's slot."""
    import importlib

    from hwcosim.cosim.flow import board as fb

    m, x = two_engines
    opened, seen = [], []

    class FakePort:
        baud = 115200

        def __init__(self, port, baud):
            opened.append(port)

        def close(self):
            opened.append("closed")

    def fake_session(key):
        async def session(link, p, *args, log=None):
            seen.append((key, type(link).__name__, link.engine, id(link.link)))
            return {"h" if key == "bbs-lstm" else "y": np.zeros(1), "run_cycles": [1]}
        return session

    monkeypatch.setattr(fb, "SerialTransport", FakePort)
    for engine, (_, _, mod) in cb.BOARD_TOPS.items():
        monkeypatch.setattr(importlib.import_module(mod), "session", fake_session(engine))
    _, words, _ = m._run(x, trace=True)
    out = cb.board_sessions(m.stages, [w for w, _ in words], "/dev/ttyFAKE")
    assert opened == ["/dev/ttyFAKE", "closed"] and len(out) == 2
    assert [s[:3] for s in seen] == [("bbs-lstm", "EngineLink", 0), ("bbs-spmxv", "EngineLink", 1)]
    assert seen[0][3] == seen[1][3]   # one HostLink
