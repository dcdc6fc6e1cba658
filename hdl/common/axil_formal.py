"""AXI4-Lite slave and AXI4-Stream master rules for the formal harnesses of the board tops.

The board tops (:mod:`hwcosim.hdl.bbs.axi_top`, :mod:`hwcosim.hdl.fss.axi_top`) have flat, AXI-named ports
(``s_axil_awaddr``, ``m_axis_h_tvalid``, ...). Their harnesses (``hdl/*/axi_top_formal.py``)
use the pieces here:

- :func:`assume_axil_master`: the master obeys AXI4-Lite: ``AWVALID``/``AWADDR``,
  ``WVALID``/``WDATA``/``WSTRB`` and ``ARVALID``/``ARADDR`` hold until the matching ``READY``;
  ``BREADY`` and ``RREADY`` are free.
- :func:`assume_axis_source`: an AXI4-Stream input holds ``TVALID`` and its payload until
  ``TREADY``.
- :func:`axil_slave_props`: the slave's promises, by group:

  ``b_hold``   ``BVALID`` and ``BRESP`` hold until ``BREADY``.
  ``r_hold``   ``RVALID``, ``RRESP`` and ``RDATA`` hold until ``RREADY``.
  ``b_count``  exactly one B per accepted write: the address and the data are accepted in the
               same cycle (both tops document it), ``BVALID`` is high exactly while an accepted
               write is unanswered, and at most one is (no B without a write, no write lost).
  ``r_count``  exactly one R per accepted read: ``RVALID`` is high exactly while an accepted
               read is unanswered, and at most one is.
  ``resp``     ``BRESP``/``RRESP`` are the ones the register map gives for the accepted address
               (and, where the map says so, data and state), latched at acceptance: SLVERR
               exactly where documented, OKAY elsewhere; an unmapped read returns 0; reads of
               constant registers return their value.

- :func:`assert_axis_hold` (group of the caller's choice): an AXI4-Stream output holds
  ``TVALID``, ``TDATA`` and ``TLAST`` until ``TREADY``, except in the cycle after a documented
  flush (SOFT_RESET).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.hdl import Assume, Cat, Signal
from hwcosim.hdl.common.formal import Props, past

__all__ = ["AXIL_GROUPS", "assume_axil_master", "assume_axis_source", "axil_slave_props", "assert_axis_hold",
           "OKAY", "SLVERR"]

AXIL_GROUPS = ("b_hold", "r_hold", "b_count", "r_count", "resp")
OKAY, SLVERR = 0b00, 0b10


def _port(top, prefix, name):
    return getattr(top, f"{prefix}_{name}")


def _hold_assume(m, has_past, valid, ready, payload, name):
    pv, pr = past(m, valid, f"past_{name}_valid"), past(m, ready, f"past_{name}_ready")
    pp = past(m, payload, f"past_{name}_payload")
    with m.If(has_past & pv & ~pr):
        m.d.comb += Assume(valid & (payload == pp))


def assume_axil_master(m: Module, top, has_past, prefix: str = "s_axil") -> None:
    """The AXI4-Lite master's rules on the address and write-data channels."""
    p = lambda n: _port(top, prefix, n)  # noqa: E731
    _hold_assume(m, has_past, p("awvalid"), p("awready"), p("awaddr"), f"{prefix}_aw")
    _hold_assume(m, has_past, p("wvalid"), p("wready"), Cat(p("wdata"), p("wstrb")), f"{prefix}_w")
    _hold_assume(m, has_past, p("arvalid"), p("arready"), p("araddr"), f"{prefix}_ar")


def assume_axis_source(m: Module, top, has_past, prefix: str) -> None:
    """An AXI4-Stream input (``{prefix}_tvalid``/``_tready``/``_tdata``) holds until ready."""
    _hold_assume(m, has_past, _port(top, prefix, "tvalid"), _port(top, prefix, "tready"),
                 _port(top, prefix, "tdata"), prefix)


def axil_slave_props(m: Module, top, chk: Props, has_past, *, w_resp, r_resp, r_data=(),
                     prefix: str = "s_axil") -> dict:
    """Assert the AXI4-Lite slave rules (groups :data:`AXIL_GROUPS`) on ``top``.

    Parameters
    ----------
    w_resp : Value
        The BRESP the register map gives for the write being accepted (from ``awaddr``,
        ``wdata`` and the design's state in the acceptance cycle).
    r_resp : Value
        The RRESP for the read being accepted (from ``araddr``).
    r_data : iterable of (Value, Value)
        ``(condition on araddr, value)``: reads accepted under the condition must return the
        value (unmapped addresses: 0; constant registers: the constant).

    Returns the harness's handshake signals (``aw_fire``, ``w_fire``, ``ar_fire``, ``b_fire``,
    ``r_fire``) and its pending counts, for covers and white-box invariants.
    """
    p = lambda n: _port(top, prefix, n)  # noqa: E731
    aw_fire, w_fire, ar_fire, b_fire, r_fire = (Signal(name=f"{n}_fire") for n in ("aw", "w", "ar", "b", "r"))
    m.d.comb += [aw_fire.eq(p("awvalid") & p("awready")), w_fire.eq(p("wvalid") & p("wready")),
                 ar_fire.eq(p("arvalid") & p("arready")), b_fire.eq(p("bvalid") & p("bready")),
                 r_fire.eq(p("rvalid") & p("rready"))]

    # --- b_hold / r_hold ------------------------------------------------------------------------
    pb, pbr = past(m, p("bvalid"), "past_bvalid"), past(m, p("bready"), "past_bready")
    pbresp = past(m, p("bresp"), "past_bresp")
    with m.If(has_past & pb & ~pbr):
        chk(p("bvalid"), "b_hold: BVALID fell before BREADY")
        chk(p("bresp") == pbresp, "b_hold: BRESP changed before BREADY")
    prv, prr = past(m, p("rvalid"), "past_rvalid"), past(m, p("rready"), "past_rready")
    pr = past(m, Cat(p("rresp"), p("rdata")), "past_r")
    with m.If(has_past & prv & ~prr):
        chk(p("rvalid"), "r_hold: RVALID fell before RREADY")
        chk(Cat(p("rresp"), p("rdata")) == pr, "r_hold: RRESP or RDATA changed before RREADY")

    # --- b_count / r_count ----------------------------------------------------------------------
    aw_pend, w_pend, ar_pend = Signal(2, name="aw_pend"), Signal(2, name="w_pend"), Signal(2, name="ar_pend")
    m.d.sync += [aw_pend.eq(aw_pend + aw_fire - b_fire), w_pend.eq(w_pend + w_fire - b_fire),
                 ar_pend.eq(ar_pend + ar_fire - r_fire)]
    chk(aw_fire == w_fire, "b_count: write address and data not accepted together")
    chk(aw_pend == w_pend, "b_count: write addresses and data accepted in different numbers")
    chk((aw_pend <= 1) & (w_pend <= 1), "b_count: a second write accepted before the first was answered")
    chk(p("bvalid") == ((aw_pend == 1) & (w_pend == 1)), "b_count: BVALID differs from an unanswered write")
    chk(ar_pend <= 1, "r_count: a second read accepted before the first was answered")
    chk(p("rvalid") == (ar_pend == 1), "r_count: RVALID differs from an unanswered read")

    # --- resp -----------------------------------------------------------------------------------
    exp_b, exp_r = Signal(2, name="exp_bresp"), Signal(2, name="exp_rresp")
    with m.If(aw_fire):
        m.d.sync += exp_b.eq(w_resp)
    with m.If(ar_fire):
        m.d.sync += exp_r.eq(r_resp)
    with m.If(p("bvalid")):
        chk(p("bresp") == exp_b, "resp: BRESP differs from the register map")
    with m.If(p("rvalid")):
        chk(p("rresp") == exp_r, "resp: RRESP differs from the register map")
    for i, (cond, value) in enumerate(r_data):
        want, armed = Signal(len(p("rdata")), name=f"exp_rdata{i}"), Signal(name=f"exp_rdata{i}_armed")
        with m.If(ar_fire):
            m.d.sync += [want.eq(value), armed.eq(cond)]
        with m.If(p("rvalid") & armed):
            chk(p("rdata") == want, "resp: RDATA differs from the register map")
    return {"aw_fire": aw_fire, "w_fire": w_fire, "ar_fire": ar_fire, "b_fire": b_fire, "r_fire": r_fire,
            "aw_pend": aw_pend, "w_pend": w_pend, "ar_pend": ar_pend, "exp_b": exp_b, "exp_r": exp_r}


def assert_axis_hold(m: Module, top, chk: Props, has_past, prefix: str, group: str, flushed) -> None:
    """``{prefix}_tvalid``, ``_tdata`` and ``_tlast`` hold until ``_tready`` (group ``group``),
    unless ``flushed`` (a signal high in the cycle after a documented flush)."""
    p = lambda n: _port(top, prefix, n)  # noqa: E731
    pv, pr = past(m, p("tvalid"), f"past_{prefix}_tvalid"), past(m, p("tready"), f"past_{prefix}_tready")
    pd = past(m, Cat(p("tdata"), p("tlast")), f"past_{prefix}_t")
    with m.If(has_past & pv & ~pr & ~flushed):
        chk(p("tvalid"), f"{group}: {prefix} TVALID fell before TREADY")
        chk(Cat(p("tdata"), p("tlast")) == pd, f"{group}: {prefix} TDATA or TLAST changed before TREADY")
