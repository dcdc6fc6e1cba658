"""MELO receiver engine: hand-worked cases, exhaustion policy, and a set-based reference."""

from __future__ import annotations

import heapq
import random

import numpy as np
import pytest
from hwcosim.models.melo.engine import ACK, DUP, NACK, SACK, MeloEngineModel, MeloEngineParams, MeloResponse


# ---------------------------------------------------------------------------------------------
# independent reference: unbounded integers, a Python set as reorder buffer, and the block count
# of a connection computed from a closed form instead of a linked list
# ---------------------------------------------------------------------------------------------
class SetReference:
    def __init__(self, p: MeloEngineParams):
        self.p = p
        self.M = 1 << p.psn_bits
        self.lb = p.block_shift
        self.e = [0] * p.n_conns  # unbounded expected PSN
        self.buf = [set() for _ in range(p.n_conns)]

    def blocks(self, c, buf=None, e=None):
        buf = self.buf[c] if buf is None else buf
        e = self.e[c] if e is None else e
        return 0 if not buf else (max(buf) >> self.lb) - (e >> self.lb) + 1

    def used(self):
        return sum(self.blocks(c) for c in range(self.p.n_conns))

    def process(self, c, psn):
        e = self.e[c]
        d = (psn - e) % self.M
        if d == 0:
            out = [e]
            e += 1
            while e in self.buf[c]:
                self.buf[c].discard(e)
                out.append(e)
                e += 1
            self.e[c] = e
            return [x % self.M for x in out], ACK
        if d >= self.M // 2:
            return [], DUP
        a = e + d
        if (a >> self.lb) - (e >> self.lb) >= self.p.max_blocks_per_conn:
            return [], NACK
        if a in self.buf[c]:
            return [], DUP
        extra = self.blocks(c, self.buf[c] | {a}) - self.blocks(c)
        if extra > self.p.pool_blocks - self.used():
            return [], NACK
        self.buf[c].add(a)
        return [], SACK


def _random_run(p: MeloEngineParams, steps: int, seed: int, start_psns=None):
    rng = random.Random(seed)
    eng, ref = MeloEngineModel(p), SetReference(p)
    M = 1 << p.psn_bits
    if start_psns is not None:
        for c, s in enumerate(start_psns):
            eng.open_connection(c, s)
            ref.e[c] = s
    kinds = [0, 0, 0, 0]
    delivered = [[] for _ in range(p.n_conns)]

    def step(c, psn):
        r = eng.process(c, psn)
        want_d, want_k = ref.process(c, psn)
        assert list(r.delivered) == want_d, (c, psn, r, want_d)
        assert r.response.kind == want_k, (c, psn, r.response, want_k)
        assert r.response.cum_psn == ref.e[c] % M
        assert r.response.psn == psn and r.response.conn == c
        assert r.blocks_in_use == ref.used()
        delivered[c].extend(r.delivered)
        kinds[want_k] += 1

    for _ in range(steps):
        c = rng.randrange(p.n_conns)
        e = ref.e[c]
        u = rng.random()
        if u < 0.3:
            a = e
        elif u < 0.8:
            a = e + rng.randint(1, p.window_psns + p.block_bits)
        elif u < 0.9:
            a = e - rng.randint(1, 40)
        else:
            a = rng.choice(sorted(ref.buf[c])) if ref.buf[c] else e + 1
        step(c, a % M)
    eng.check_invariants()
    # drain: fill every hole (retransmissions of the expected PSN)
    for c in rng.sample(range(p.n_conns), p.n_conns):
        while ref.buf[c]:
            step(c, ref.e[c] % M)
    eng.check_invariants()
    assert eng.quiescent() and eng.free_count == p.pool_blocks
    st = eng.state()
    assert int(st["count"].sum()) == 0 and int(st["ooo"].sum()) == 0
    # released streams are exactly start, start+1, ... (exactly once, in order)
    for c in range(p.n_conns):
        s = 0 if start_psns is None else start_psns[c]
        assert delivered[c] == [(s + i) % M for i in range(len(delivered[c]))]
        assert (s + len(delivered[c])) % M == eng.epsn[c]
    return eng, kinds


@pytest.mark.parametrize(
    "p",
    [
        MeloEngineParams(n_conns=40, psn_bits=24, block_bits=16, pool_blocks=4096, max_blocks_per_conn=4),
        MeloEngineParams(n_conns=40, psn_bits=8, block_bits=8, pool_blocks=12, max_blocks_per_conn=4),
        MeloEngineParams(n_conns=7, psn_bits=10, block_bits=32, pool_blocks=3, max_blocks_per_conn=2),
        MeloEngineParams(n_conns=1, psn_bits=8, block_bits=4, pool_blocks=1, max_blocks_per_conn=1),
    ],
)
@pytest.mark.parametrize("seed", [1, 2])
def test_matches_set_reference(p, seed):
    M = 1 << p.psn_bits
    starts = [(M - 37 * (c + 1)) % M for c in range(p.n_conns)]  # wrap the PSN space early
    eng, kinds = _random_run(p, 6000, seed, starts)
    assert kinds[ACK] > 100 and kinds[SACK] > 100 and kinds[DUP] > 50 and kinds[NACK] > 10
    if p.pool_blocks < p.n_conns * p.max_blocks_per_conn:
        assert eng.stats["nack_pool"] > 0  # the exhaustion path was exercised


def test_same_seed_same_result():
    p = MeloEngineParams(n_conns=5, psn_bits=8, block_bits=8, pool_blocks=6, max_blocks_per_conn=3)
    a, ka = _random_run(p, 2000, 9)
    b, kb = _random_run(p, 2000, 9)
    assert ka == kb and a.stats == b.stats


def test_hand_worked_chain_and_free_list():
    p = MeloEngineParams(n_conns=2, psn_bits=8, block_bits=8, pool_blocks=4, max_blocks_per_conn=2)
    e = MeloEngineModel(p)
    r = e.process(0, 3)
    assert r.response == MeloResponse(SACK, 0, 0, 3) and r.blocks_in_use == 1
    assert e.head[0] == 0 and e.count[0] == 1  # first pop is block 0
    r = e.process(0, 9)  # block index 1 -> chain position 1 -> block 1
    assert r.response.kind == SACK and r.blocks_in_use == 2 and e.tail[0] == 1
    assert e.process(0, 16).response.kind == NACK  # position 2 >= max_blocks: out of window
    assert e.process(0, 0).delivered == (0,)
    assert e.process(0, 1).delivered == (1,)
    r = e.process(0, 2)
    assert r.delivered == (2, 3) and r.response == MeloResponse(ACK, 0, 4, 2)
    for psn in (4, 5, 6):
        e.process(0, psn)
    r = e.process(0, 7)  # epsn -> 8 crosses into block 1: block 0 is freed (pushed on the stack)
    assert r.delivered == (7,) and r.blocks_in_use == 1 and e.free_head == 0 and e.head[0] == 1
    assert e.process(0, 9).response.kind == DUP  # already buffered
    assert e.process(0, 5).response == MeloResponse(DUP, 0, 8, 5)  # already delivered
    r = e.process(0, 8)
    assert r.delivered == (8, 9) and r.blocks_in_use == 0
    # LIFO free list: block 1 was freed last, so it is popped first
    e.process(1, 5)
    assert e.head[1] == 1
    e.check_invariants()


def test_pool_exhaustion_drops_and_nacks_then_recovers():
    p = MeloEngineParams(n_conns=2, psn_bits=8, block_bits=8, pool_blocks=1, max_blocks_per_conn=2)
    e = MeloEngineModel(p)
    assert e.process(0, 5).response.kind == SACK
    r = e.process(1, 3)
    assert r.response == MeloResponse(NACK, 1, 0, 3) and e.stats["nack_pool"] == 1
    assert e.ooo[1] == 0  # the dropped packet left no trace
    assert e.process(1, 0).delivered == (0,)  # the expected PSN never needs a block
    for psn in range(5):
        e.process(0, psn)
    assert e.epsn[0] == 6 and e.quiescent()
    assert e.process(1, 3).response.kind == SACK  # the resent packet now fits
    for psn in (1, 2):
        e.process(1, psn)
    assert e.epsn[1] == 4 and e.quiescent()
    e.check_invariants()


def test_state_arrays_and_pack():
    p = MeloEngineParams(n_conns=3, psn_bits=24, block_bits=64, pool_blocks=8, max_blocks_per_conn=4)
    e = MeloEngineModel(p)
    e.process(2, 70)
    st = e.state()
    assert st["bits"].shape == (8, 64) and st["bits"].dtype == np.uint8
    assert st["bits"][1, 6] == 1 and int(st["bits"].sum()) == 1  # PSN 70 = block 1, bit 6
    assert st["count"].tolist() == [0, 0, 2] and st["epsn"].dtype == np.uint32
    resp = MeloResponse(NACK, 2, (1 << 24) - 1, 12345)
    v = resp.pack(p)
    assert v < 1 << p.response_bits and MeloResponse.unpack(v, p) == resp
    assert p.metadata_bits == 24 + 2 * 3 + 3 + 9


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"n_conns": 0}, "n_conns"),
        ({"block_bits": 48}, "power of two"),
        ({"psn_bits": 40}, "psn_bits"),
        ({"pool_blocks": 0}, "pool_blocks"),
        ({"psn_bits": 8, "block_bits": 64, "max_blocks_per_conn": 2}, "half the PSN space"),
        ({"n_conns": 2.0}, "int"),
    ],
)
def test_wrong_params(kw, word):
    args = {"n_conns": 4} | kw
    with pytest.raises(ValueError, match=word):
        MeloEngineParams(**args)


def test_wrong_inputs():
    e = MeloEngineModel(MeloEngineParams(n_conns=2, psn_bits=8, block_bits=8))
    with pytest.raises(ValueError, match="conn"):
        e.process(2, 0)
    with pytest.raises(ValueError, match="psn"):
        e.process(0, 256)
    e.process(0, 5)
    with pytest.raises(ValueError, match="idle"):
        e.open_connection(0, 7)


@pytest.mark.parametrize("pool", [2, 64])
def test_lossy_network_stream_matches_reference(pool):
    """Senders with windows over a network that drops, duplicates and reorders; both receivers see
    the same arrivals and must agree on every output until every packet is delivered."""
    p = MeloEngineParams(n_conns=16, psn_bits=12, block_bits=16, pool_blocks=pool, max_blocks_per_conn=3)
    rng = random.Random(pool)
    eng, ref = MeloEngineModel(p), SetReference(p)
    M, L, W = 1 << p.psn_bits, 200, 32  # random starts: some connections wrap the PSN space
    starts = [rng.randrange(M) for _ in range(p.n_conns)]
    for c, s in enumerate(starts):
        eng.open_connection(c, s)
        ref.e[c] = s
    una = [0] * p.n_conns  # sender's view (relative PSN)
    got = [[] for _ in range(p.n_conns)]
    t, net = 0, []  # (arrival time, tiebreak, conn, relative psn)
    while any(u < L for u in una):
        t += 1
        for c in range(p.n_conns):  # each sender (re)sends its window every 40 ticks
            if una[c] < L and t % 40 == c % 40:
                for x in range(una[c], min(L, una[c] + W)):
                    if rng.random() < 0.1:
                        continue  # lost
                    for _ in range(2 if rng.random() < 0.05 else 1):  # duplicated
                        heapq.heappush(net, (t + rng.randint(1, 30), rng.random(), c, x))  # reordered
        while net and net[0][0] <= t:
            _, _, c, x = heapq.heappop(net)
            psn = (starts[c] + x) % M
            r = eng.process(c, psn)
            want_d, want_k = ref.process(c, psn)
            assert (list(r.delivered), r.response.kind) == (want_d, want_k)
            assert r.blocks_in_use == ref.used()
            got[c].extend(r.delivered)
            una[c] = (r.response.cum_psn - starts[c]) % M  # cumulative ACK (responses not lost here)
    for c in range(p.n_conns):
        assert got[c] == [(starts[c] + i) % M for i in range(L)]
    eng.check_invariants()
    assert eng.quiescent()
    if pool == 2:
        assert eng.stats["nack_pool"] > 0
