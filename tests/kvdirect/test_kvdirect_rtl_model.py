"""Unit tests of the KV-Direct RTL golden model, stream words and the RTL hash (no cocotb)."""

import zlib

import numpy as np
import pytest
from hwcosim.hdl.kvdirect.hash import crc_matrix
from hwcosim.models.kvdirect.hashing import key_hash
from hwcosim.models.kvdirect.rtl_model import (
    ATOMIC,
    DELETE,
    ERROR,
    FULL,
    GET,
    NOT_FOUND,
    OK,
    PUT,
    PipelineParams,
    Request,
    Response,
    bucket_of,
    golden_run,
    key_to_bytes,
    make_stream,
    pack_request,
    pack_response,
    predict_ops_per_cycle,
    unpack_request,
    unpack_response,
)


def test_init():
    p = PipelineParams()
    assert p.n_buckets == 64 and p.bucket_bits == 6 and p.entry_bits == 5 and p.slot_bits == 6
    assert PipelineParams.from_dict(p.to_dict()) == p


@pytest.mark.parametrize("kw,msg", [
    ({"memory_bytes": 3 * 1024}, "power of two"),
    ({"entries": 12}, "entries must be a power of two"),
    ({"entries": 512}, "entries"),
    ({"rs_slots": 3}, "rs_slots"),
    ({"resp_fifo_depth": 1}, "resp_fifo_depth"),
])
def test_wrong_params(kw, msg):
    with pytest.raises(ValueError, match=msg):
        PipelineParams(**kw)


def test_request_and_response_words_round_trip():
    rng = np.random.default_rng(0)
    for _ in range(50):
        r = Request(int(rng.integers(256)), int(rng.integers(8)), int(rng.integers(0, 1 << 64, dtype=np.uint64)),
                    int(rng.integers(0, 1 << 64, dtype=np.uint64)), int(rng.integers(256)))
        w = pack_request(r)
        assert w < 1 << 156 and unpack_request(w) == r
        assert (w >> 19) & 0x1FF == 0  # the pad field
        s = Response(r.tag, int(rng.integers(4)), int(rng.integers(2)), r.key)
        assert pack_response(s) < 1 << 76 and unpack_response(pack_response(s)) == s
    # field positions of the documented layout (LSB first)
    assert pack_request(Request(0, 0, 1)) == 1 << 28
    assert pack_request(Request(0, 0, 0, 1)) == 1 << 92
    assert pack_response(Response(0, 0, 0, 1)) == 1 << 12


def _keys_in_bucket(p, bucket, n):
    out, k = [], 0
    while len(out) < n:
        if bucket_of(k, p.n_buckets) == bucket:
            out.append(k)
        k += 1
    return out


def test_golden_no_chaining_answers_full_and_keeps_memory():
    p = PipelineParams()
    a, b, c = _keys_in_bucket(p, 5, 3)
    reqs = [Request(0, PUT, a, 1), Request(1, PUT, b, 2), Request(2, PUT, c, 3), Request(3, GET, c),
            Request(4, DELETE, a), Request(5, PUT, c, 3), Request(6, GET, c), Request(7, PUT, b, 2)]
    resp, img, traffic = golden_run(p, reqs)
    assert [r.status for r in resp] == [OK, OK, FULL, NOT_FOUND, OK, OK, OK, OK]
    assert resp[4].existed == 1 and resp[6].value == 3
    assert traffic["reads"] == len(reqs)
    # PUT b with the same value at the same slot changes nothing and writes nothing
    assert traffic["writes"] == 2 + 1 + 1  # put a, put b, delete a, put c (full put and re-put: none)
    assert img[64 * 5:64 * 6].any() and not img[:64 * 5].any()


def test_golden_atomics_and_errors():
    p = PipelineParams()
    k = 12345
    reqs = [Request(0, ATOMIC, k, 5, 0), Request(1, PUT, k, (-7) & (2**64 - 1)),
            Request(2, ATOMIC, k, 10, 0), Request(3, ATOMIC, k, 3, 2), Request(4, ATOMIC, k, 9, 3),
            Request(5, ATOMIC, k, 0, 9), Request(6, 5, k), Request(7, GET, k)]
    resp, _, traffic = golden_run(p, reqs)
    assert resp[0].status == NOT_FOUND
    assert resp[2].value == (-7) & (2**64 - 1)          # old value returned
    assert resp[3].value == 3 and resp[4].value == 3    # add -> 3, min(3, 3) -> 3, max(3, 9) -> 9
    assert resp[5].status == ERROR and resp[6].status == ERROR
    assert resp[7].value == 9
    assert traffic["writes"] == 1 + 3


def test_crc_matrix_is_the_zlib_crc():
    const, rows = crc_matrix(8)
    rng = np.random.default_rng(1)
    for key in [0, 1, 2**64 - 1, *rng.integers(0, 1 << 64, size=30, dtype=np.uint64).tolist()]:
        want = zlib.crc32(key.to_bytes(8, "little") + b"\x08")
        got = const
        for i, mask in enumerate(rows):
            got ^= (bin(key & mask).count("1") & 1) << i
        assert got == want


def test_key_hash_rtl_matches_model():
    """The pipelined RTL hash (HASH_STAGES stages), simulated with Amaranth's simulator, equals
    models.hashing."""
    from amaranth.sim import Simulator
    from hwcosim.hdl.kvdirect import KeyHash
    from hwcosim.models.kvdirect.rtl_model import HASH_STAGES

    dut = KeyHash()
    rng = np.random.default_rng(2)
    keys = [0, 1, 2**64 - 1, *rng.integers(0, 1 << 64, size=12, dtype=np.uint64).tolist()]
    got = []

    async def bench(ctx):
        ctx.set(dut.en, 1)
        for j in range(len(keys) + HASH_STAGES):
            ctx.set(dut.key, keys[j] if j < len(keys) else 0)
            await ctx.tick()
            if j >= HASH_STAGES - 1:
                got.append(ctx.get(dut.h))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = [key_hash(key_to_bytes(k), 8) for k in keys]
    assert got[:len(keys)] == want


def test_streams_are_seeded_and_shaped():
    a = make_stream(200, 50, "zipf", 3)
    assert a == make_stream(200, 50, "zipf", 3) and a != make_stream(200, 50, "zipf", 4)
    b = make_stream(60, 50, "burst", 3, burst=6)
    assert all(len({r.key for r in b[i:i + 6]}) == 1 for i in range(0, 60, 6))
    with pytest.raises(ValueError, match="dist"):
        make_stream(10, 5, "gauss", 0)


def test_predicted_throughput_bounds():
    p = PipelineParams(entries=32)
    burst = make_stream(400, 100, "burst", 0, burst=16)
    on = predict_ops_per_cycle(p, burst, 100, 32, forward=True)
    off = predict_ops_per_cycle(p, burst, 100, 32, forward=False)
    assert on["ops_per_cycle"] > 4 * off["ops_per_cycle"]
    assert off["bound"] == "chain" and on["merge_fraction"] > 0.8
    big = PipelineParams(memory_bytes=1 << 20, entries=32)  # 8,192 buckets: few bucket conflicts
    uni = predict_ops_per_cycle(big, make_stream(400, 10_000, "uniform", 0), 200, 16, forward=False)
    assert uni["bound"] == "memory" and uni["ops_per_cycle"] == pytest.approx(16 / 206, rel=0.05)


def test_design_is_registered_for_hwcosim_verilog():
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.registry import get_design, override_params

    d = get_design("kvdirect-pipeline")
    p = override_params(d.default_params(), ["entries=4", "rs_slots=8", "memory_bytes=4096"])
    v = to_verilog(d.build(p), d.top)
    for port in ("i__payload", "o__payload", "mem_req__payload", "mem_rsp__payload", "forward_en", "max_reads"):
        assert port in v


@pytest.mark.synth
def test_key_hash_synthesises_with_two_multipliers(tmp_path):
    from hwcosim.cosim.flow.runner import to_verilog
    from hwcosim.cosim.flow.synth import synthesize
    from hwcosim.hdl.kvdirect import KeyHash

    rep = synthesize(to_verilog(KeyHash(), "kvdirect_keyhash"), "kvdirect_keyhash", "xcup", out_dir=tmp_path)
    r = rep["resources"]
    assert r["DSP"] >= 2 and r["LUT"] > 32 and r["FF"] >= 96, r
