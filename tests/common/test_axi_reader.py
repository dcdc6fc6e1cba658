"""AXI4 read master (:class:`hwcosim.hdl.common.axi_reader.AxiReader`) in Amaranth's simulator against a
Python AXI slave model that checks the protocol on every cycle: ARVALID/ARADDR/ARLEN held
until ARREADY, no burst across 4 KiB, burst length and outstanding limits, every beat drained
after an error or an abort. Every forwarded word is compared with the memory model. The
watchdog: a memory that stops answering ends the transfer with ERR_TIMEOUT after exactly
``timeout_cycles`` cycles, late beats are discarded, and the next transfer (started after
they drained or while they are still owed) reads exactly its own data; a consumer stall never
times out."""

import random

import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator
from hwcosim.hdl.common.axi_reader import DEFAULT_TIMEOUT, ERR_TIMEOUT, RESP_DECERR, RESP_SLVERR, AxiReader

# a constructor that raises leaves an object behind that Amaranth reports when it is collected
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


def _word(addr: int, dw: int) -> int:
    """Memory model: the beat at byte address ``addr`` (a hash, every beat differs)."""
    return (addr * 0x9E3779B97F4A7C15 + 0x1234567) & ((1 << dw) - 1)


class _Slave:
    """Cycle model of an AXI4 read slave with random ARREADY and R gaps, protocol checks and
    response codes injected by beat address."""

    def __init__(self, dut: AxiReader, rng: random.Random, p_ar: float, p_r: float, faults: dict,
                 stall: tuple[int, int] | None = None):
        self.dut, self.rng, self.p_ar, self.p_r = dut, rng, p_ar, p_r
        self.faults, self.stall = faults, stall
        self.bursts = []            # accepted bursts: [addr, beats left]
        self.beat = None            # (data, resp, last) held on R until RREADY
        self.held_ar = None         # AR presented and not accepted: must not change
        self.ars = []               # accepted (addr, beats)
        self.max_inflight = 0
        self.cycle = 0

    def _next_beat(self):
        addr, left = self.bursts[0]
        nb = self.dut.data_width // 8
        self.bursts[0] = [addr + nb, left - 1]
        if left == 1:
            self.bursts.pop(0)
        return _word(addr, self.dut.data_width), self.faults.get(addr, 0), int(left == 1)

    async def step(self, ctx):
        d = self.dut
        stalled = self.stall is not None and self.stall[0] <= self.cycle < self.stall[1]
        ctx.set(d.arready, int(not stalled and self.rng.random() >= self.p_ar))
        if self.beat is None and self.bursts and not stalled and self.rng.random() >= self.p_r:
            self.beat = self._next_beat()
        ctx.set(d.rvalid, int(self.beat is not None))
        if self.beat is not None:
            ctx.set(d.rdata, self.beat[0])
            ctx.set(d.rresp, self.beat[1])
            ctx.set(d.rlast, self.beat[2])
        arvalid, arready = ctx.get(d.arvalid), ctx.get(d.arready)
        if arvalid:
            ar = (ctx.get(d.araddr), ctx.get(d.arlen), ctx.get(d.arsize), ctx.get(d.arburst))
            assert self.held_ar is None or self.held_ar == ar, f"AR changed before ARREADY: {self.held_ar} -> {ar}"
            addr, beats = ar[0], ar[1] + 1
            assert ar[2] == d.size and ar[3] == 1, ar
            assert beats <= d.max_burst, f"burst of {beats} beats > {d.max_burst}"
            nb = d.data_width // 8
            assert addr // 4096 == (addr + beats * nb - 1) // 4096, f"burst {addr:#x}+{beats} crosses 4 KiB"
            inflight = len(self.bursts) + (self.beat is not None and self.beat[2] == 1) + 1
            self.max_inflight = max(self.max_inflight, inflight)
            assert inflight <= d.max_outstanding, f"{inflight} bursts in flight > {d.max_outstanding}"
            if arready:
                self.bursts.append([addr, beats])
                self.ars.append((addr, beats))
                self.held_ar = None
            else:
                self.held_ar = ar
        r_fire = self.beat is not None and ctx.get(d.rready)
        if r_fire:
            self.beat = None
        self.cycle += 1
        return r_fire


async def _run_transfer(ctx, dut, slave, base, length, *, p_o=0.0, rng=None, abort_at=None, limit=20000):
    """Start a transfer, clock it until ``busy`` falls; return the forwarded words, the cycle
    count and the error outputs."""
    rng = rng or random.Random(0)
    ctx.set(dut.base, base)
    ctx.set(dut.length, length)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)
    got, strobes, cycles = [], 0, 0
    after_abort = False
    while True:
        aborting = abort_at is not None and cycles == abort_at
        after_abort |= aborting
        ctx.set(dut.abort, int(aborting))
        # once stopped, the consumer refuses everything: draining must not depend on it
        ctx.set(dut.o.ready, int(not after_abort and rng.random() >= p_o))
        await slave.step(ctx)
        if after_abort:
            assert not ctx.get(dut.o.valid), "o.valid after abort"
            assert not ctx.get(dut.arvalid) or slave.held_ar is not None, "a new burst after abort"
        if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
            got.append(ctx.get(dut.o.payload))
        strobes += ctx.get(dut.err_strobe)
        if ctx.get(dut.err_strobe):
            after_abort = True          # the same rules hold after an error
        busy = ctx.get(dut.busy)
        await ctx.tick()
        cycles += 1
        if not busy and cycles > 1:
            break
        assert cycles < limit, "transfer did not finish"
    return got, cycles, ctx.get(dut.error), ctx.get(dut.err_addr), strobes


def _sim(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _want(base, n, dw):
    return [_word(base + i * dw // 8, dw) for i in range(n)]


def test_init():
    r = AxiReader(addr_width=40, data_width=64, max_burst=8, max_outstanding=3)
    Fragment.get(r, None)
    assert r.size == 3 and len(r.araddr) == 40 and len(r.rdata) == 64 and len(r.o.payload) == 64


@pytest.mark.parametrize("kw,match", [
    (dict(addr_width=8), "Address width"), (dict(data_width=48), "Data width"),
    (dict(max_burst=0), "Burst length"), (dict(max_burst=257), "Burst length"),
    (dict(max_outstanding=0), "Outstanding"), (dict(len_width=33), "Length width")])
def test_wrong_params(kw, match):
    with pytest.raises(ValueError, match=match):
        AxiReader(**kw)


@pytest.mark.parametrize("dw,burst,outst,base,n,p_ar,p_r,p_o", [
    (32, 16, 2, 0x0FC0, 150, 0.3, 0.3, 0.3),     # starts 16 words before a 4 KiB boundary
    (64, 4, 1, 0x1FF8, 41, 0.5, 0.2, 0.0),       # one beat before the boundary, single outstanding
    (32, 256, 4, 0x2F00, 300, 0.0, 0.6, 0.5),    # long bursts cut at the boundary
])
def test_sim_reads_in_order(dw, burst, outst, base, n, p_ar, p_r, p_o):
    dut = AxiReader(data_width=dw, max_burst=burst, max_outstanding=outst)
    rng = random.Random(n)
    out = {}

    async def bench(ctx):
        slave = _Slave(dut, rng, p_ar, p_r, {})
        out["res"] = await _run_transfer(ctx, dut, slave, base, n, p_o=p_o, rng=rng)
        out["slave"] = slave
        # a second transfer after the first: state is clean
        out["res2"] = await _run_transfer(ctx, dut, slave, base + 4 * dw, 5, rng=rng)

    _sim(dut, bench)
    got, cycles, err, _, strobes = out["res"]
    assert got == _want(base, n, dw) and err == 0 and strobes == 0
    ars = out["slave"].ars
    assert sum(b for _, b in ars) == n + 5
    assert any((a + b * dw // 8) % 4096 == 0 for a, b in ars), "a burst must end at the boundary"
    assert out["slave"].max_inflight == min(outst, 2), "the outstanding limit is used"
    assert out["res2"][0] == _want(base + 4 * dw, 5, dw)


def test_sim_throughput_one_beat_per_cycle():
    """Slave and consumer always ready: 2 outstanding bursts of 16 move 256 beats in ~256 cycles."""
    dut = AxiReader(data_width=32, max_burst=16, max_outstanding=2)
    out = {}

    async def bench(ctx):
        out["res"] = await _run_transfer(ctx, dut, _Slave(dut, random.Random(1), 0.0, 0.0, {}), 0x100, 256)

    _sim(dut, bench)
    got, cycles, *_ = out["res"]
    assert got == _want(0x100, 256, 32)
    assert cycles <= 256 + 4, cycles


@pytest.mark.parametrize("resp", [RESP_SLVERR, RESP_DECERR])
@pytest.mark.parametrize("outst", [1, 3])
def test_sim_error_stops_and_drains(resp, outst):
    dw, base, n = 32, 0x0F80, 200
    bad = base + 37 * 4                     # the 38th beat fails
    dut = AxiReader(data_width=dw, max_burst=8, max_outstanding=outst)
    out = {}

    async def bench(ctx):
        slave = _Slave(dut, random.Random(resp), 0.3, 0.3, {bad: resp})
        out["res"] = await _run_transfer(ctx, dut, slave, base, n, p_o=0.2, rng=random.Random(outst))
        out["slave"], out["ars"] = slave, list(slave.ars)
        out["res2"] = await _run_transfer(ctx, dut, slave, base, 50, rng=random.Random(2))

    _sim(dut, bench)
    got, cycles, err, err_addr, strobes = out["res"]
    slave = out["slave"]
    assert got == _want(base, 37, dw), "exactly the beats before the failing one are forwarded"
    assert (err, err_addr, strobes) == (resp, bad, 1)
    assert not slave.bursts and slave.beat is None, "every beat in flight was drained"
    issued = sum(b for _, b in out["ars"])
    assert issued <= 38 + 8 * outst, f"issuing stopped at the error ({issued} beats issued)"
    got2, _, err2, addr2, _ = out["res2"]
    assert got2 == _want(base, 37, dw) and (err2, addr2) == (resp, bad), "the fault is still there"


def test_sim_abort_drains_and_restarts():
    dw, base = 64, 0x3000
    dut = AxiReader(data_width=dw, max_burst=16, max_outstanding=4)
    out = {}

    async def bench(ctx):
        slave = _Slave(dut, random.Random(5), 0.2, 0.4, {})
        out["res"] = await _run_transfer(ctx, dut, slave, base, 500, rng=random.Random(6), abort_at=40)
        out["slave_state"] = (list(slave.bursts), slave.beat)
        out["res2"] = await _run_transfer(ctx, dut, slave, base, 70, rng=random.Random(7))

    _sim(dut, bench)
    got, cycles, err, _, strobes = out["res"]
    assert 0 < len(got) < 500 and got == _want(base, len(got), dw) and err == 0 and strobes == 0
    assert out["slave_state"] == ([], None)
    assert out["res2"][0] == _want(base, 70, dw) and out["res2"][2] == 0


def test_sim_long_stall_loses_nothing():
    """AR and R both stalled for 3000 cycles in the middle of a transfer."""
    dut = AxiReader(data_width=32, max_burst=8, max_outstanding=2)
    out = {}

    async def bench(ctx):
        slave = _Slave(dut, random.Random(3), 0.1, 0.1, {}, stall=(30, 3030))
        out["res"] = await _run_transfer(ctx, dut, slave, 0x40, 120, p_o=0.3, rng=random.Random(4))

    _sim(dut, bench)
    got, cycles, err, *_ = out["res"]
    assert got == _want(0x40, 120, 32) and err == 0 and cycles > 3000


# --- watchdog: a memory that stops answering ---------------------------------------------------

@pytest.mark.parametrize("t", [0, 1, True, 1.5, (1 << 32) + 1])
def test_wrong_timeout(t):
    with pytest.raises(ValueError, match="Timeout must be None or 2 to 2\\*\\*32 cycles"):
        AxiReader(timeout_cycles=t)


def test_init_timeout_encoding():
    assert ERR_TIMEOUT not in (RESP_SLVERR, RESP_DECERR) and ERR_TIMEOUT >> 2 == 1
    r = AxiReader()
    assert r.timeout_cycles == DEFAULT_TIMEOUT == 1 << 16 and len(r.error) == 3
    Fragment.get(AxiReader(timeout_cycles=None), None)


async def _clock_until(ctx, dut, slave, cond, limit=20000):
    """Clock with the consumer ready until ``cond()``; no beat may be forwarded meanwhile."""
    for n in range(limit):
        ctx.set(dut.o.ready, 1)
        await slave.step(ctx)
        assert not ctx.get(dut.o.valid), "a stale beat was forwarded"
        if cond():
            return n
        await ctx.tick()
    raise AssertionError("condition never reached")


@pytest.mark.parametrize("where", ["r", "ar"])
@pytest.mark.parametrize("restart", ["after_drain", "while_stale"])
def test_sim_timeout_ends_transfer_and_recovers(where, restart):
    """The memory stops answering mid-transfer (R beats, or ARREADY too) for longer than the
    timeout: the transfer ends with ERR_TIMEOUT and the address of the first missing beat,
    nothing more is issued, the beats that come late are discarded, and a new transfer, started
    after they drained or while they are still owed, reads exactly its own data."""
    dw, base, n, T = 32, 0x0FE0, 100, 40
    dut = AxiReader(data_width=dw, max_burst=8, max_outstanding=3, timeout_cycles=T)
    out = {}

    class StuckSlave(_Slave):
        """Stops after ``after`` R beats (and, for ``ar``, stops accepting AR) until released."""

        def __init__(self, *a, after: int, ar_too: bool, **k):
            super().__init__(*a, **k)
            self.after, self.ar_too, self.sent, self.stuck = after, ar_too, 0, False

        async def step(self, ctx):
            if self.sent >= self.after and not self.stuck and self.after >= 0:
                self.stuck, self.stall = True, (self.cycle, 10**9)
            if self.stuck and not self.ar_too and self.stall is not None:
                # R stops, AR keeps being accepted: only the R side is stalled
                ctx.set(self.dut.arready, int(self.rng.random() >= self.p_ar))
            r_fire = await super().step(ctx)
            self.sent += int(r_fire)
            return r_fire

        def release(self):
            self.stall, self.after = None, -1

    async def bench(ctx):
        slave = StuckSlave(dut, random.Random(9), 0.2, 0.2, {}, after=29, ar_too=where == "ar")
        got, cycles, err, err_addr, strobes = await _run_transfer(ctx, dut, slave, base, n, rng=random.Random(1))
        out["first"] = (got, cycles, err, err_addr, strobes, ctx.get(dut.busy))
        out["owed"] = (len(slave.bursts), ctx.get(dut.stale), ctx.get(dut.arvalid))
        ar_before = len(slave.ars)
        # stuck for a while longer: still nothing issued, nothing forwarded
        for _ in range(3 * T):
            ctx.set(dut.o.ready, 1)
            await slave.step(ctx)
            assert not ctx.get(dut.o.valid) and not ctx.get(dut.busy)
            await ctx.tick()
        if restart == "after_drain":
            slave.release()
            out["drain"] = await _clock_until(ctx, dut, slave, lambda: not slave.bursts and slave.beat is None
                                              and not ctx.get(dut.stale))
            out["ar_after_timeout"] = len(slave.ars) - ar_before - out["owed"][2]  # the held one
            out["second"] = await _run_transfer(ctx, dut, slave, 0x2000, 37, rng=random.Random(2))
        else:
            # start the next transfer while the stale bursts are owed, release the memory later
            ctx.set(dut.base, 0x2000)
            ctx.set(dut.length, 37)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for _ in range(T // 2):
                ctx.set(dut.o.ready, 1)
                await slave.step(ctx)
                assert not ctx.get(dut.o.valid)
                await ctx.tick()
            slave.release()
            out["ar_after_timeout"] = 0
            got2, strobes2 = [], 0
            for _ in range(5000):
                ctx.set(dut.o.ready, int(random.random() >= 0.3))
                await slave.step(ctx)
                if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                    got2.append(ctx.get(dut.o.payload))
                strobes2 += ctx.get(dut.err_strobe)
                busy = ctx.get(dut.busy)
                await ctx.tick()
                if not busy:
                    break
            out["second"] = (got2, 0, ctx.get(dut.error), ctx.get(dut.err_addr), strobes2)
        out["final"] = (len(slave.bursts), slave.beat, ctx.get(dut.stale))

    _sim(dut, bench)
    got, cycles, err, err_addr, strobes, busy = out["first"]
    assert err == ERR_TIMEOUT and strobes == 1 and not busy
    assert got == _want(base, len(got), dw) and 0 < len(got) < n
    assert err_addr == base + 4 * len(got), "err_addr is the first beat not received"
    n_owed, stale, arvalid = out["owed"]
    assert stale == 1 and n_owed + arvalid > 0, "bursts were in flight at the timeout"
    assert out["ar_after_timeout"] == 0, "no burst issued after the timeout"
    got2, _, err2, _, strobes2 = out["second"]
    assert got2 == _want(0x2000, 37, dw) and err2 == 0 and strobes2 == 0
    assert out["final"] == (0, None, 0)


def test_sim_consumer_stall_never_times_out():
    """``o.ready`` low for 10x the timeout with a beat waiting: no timeout, nothing lost."""
    T = 20
    dut = AxiReader(data_width=32, max_burst=4, max_outstanding=2, timeout_cycles=T)
    out = {}

    async def bench(ctx):
        slave = _Slave(dut, random.Random(4), 0.0, 0.0, {})
        ctx.set(dut.base, 0x100)
        ctx.set(dut.length, 30)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        got, cyc = [], 0
        while True:
            ctx.set(dut.o.ready, int(not 10 <= cyc < 10 + 10 * T))
            await slave.step(ctx)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                got.append(ctx.get(dut.o.payload))
            busy = ctx.get(dut.busy)
            await ctx.tick()
            cyc += 1
            if not busy:
                break
        out["res"] = (got, ctx.get(dut.error), cyc)

    _sim(dut, bench)
    got, err, cyc = out["res"]
    assert got == _want(0x100, 30, 32) and err == 0 and cyc > 10 * T


def test_sim_timeout_exact_cycle_count():
    """ARREADY never rises: the transfer ends exactly ``T`` cycles after the burst was presented
    (``busy`` falls in the next cycle), with the first beat's address; ``timeout_cycles=None``
    waits forever."""
    for T in (2, 7, None):
        dut = AxiReader(data_width=32, max_burst=4, max_outstanding=1, timeout_cycles=T)
        out = {}

        async def bench(ctx, dut=dut, out=out):
            ctx.set(dut.base, 0x40)
            ctx.set(dut.length, 5)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            trace = []
            for _ in range(40):
                trace.append((ctx.get(dut.arvalid), ctx.get(dut.busy), ctx.get(dut.err_strobe)))
                await ctx.tick()
            out["trace"], out["err"] = trace, (ctx.get(dut.error), ctx.get(dut.err_addr))

        _sim(dut, bench)
        tr = out["trace"]
        # cycle 0: busy, the burst is being presented; cycles 1..: ARVALID waits
        assert tr[0] == (0, 1, 0) and all(a for a, _, _ in tr[1:]), "ARVALID held throughout"
        if T is None:
            assert all(b for _, b, _ in tr) and out["err"] == (0, 0)
        else:
            assert [b for _, b, _ in tr[:T + 2]] == [1] * (T + 1) + [0], tr[:T + 3]
            assert [s for _, _, s in tr].index(1) == T + 1 and sum(s for _, _, s in tr) == 1
            assert out["err"] == (ERR_TIMEOUT, 0x40)
