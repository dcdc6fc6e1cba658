"""Golden model, stream words and throughput model of the KV-Direct processing pipeline in RTL.

KV-Direct: Li, Ruan, Xiao, Lu, Xiong, Putnam, Chen, Zhang, SOSP 2017. The RTL
(:mod:`hwcosim.hdl.kvdirect`) implements the interface documented in :mod:`hwcosim.models.kvdirect` (156-bit
request, 76-bit response, 64 B memory lines) for **inline 8 B keys and 8 B values**, with one
documented simplification of the table organisation:

**No chaining.** A key lives only in its first bucket (``bucket_index(hash)``). A PUT of a new
key into a bucket that has no run of 4 free slots answers ``FULL`` and leaves memory unchanged,
where the full store would chain a 64 B slab. :class:`RTLStore` is exactly that: the golden
:class:`~models.kvdirect.store.KVStore` whose slab allocator refuses every allocation, so the
store's own PUT planning raises :class:`StoreFullError` *before* it changes memory. Everything
else (hash, bucket layout, slot placement, replace-moves-to-the-first-free-run, which operations
write, the values of atomics) is the unchanged golden store, and the final bucket array of the
RTL must equal ``RTLStore.mem[:index_bytes]`` byte for byte.

Two further rules the RTL defines (the store raises exceptions there, the RTL must answer):

- a reserved opcode (4..7) or an ATOMIC with ``func_id >= 8`` answers ``status = 3`` (ERROR),
  reads its bucket (it travels the pipeline like any op) and writes nothing;
- ``existed`` is 1 for a PUT that replaced a key and a DELETE that removed one, else 0; ``value``
  is the value (GET) or the element before the update (ATOMIC) when ``status == OK``, else 0.

Memory accesses per op (reads, writes) in 64 B lines, for the no-forwarding RTL: every op reads
its bucket once; GET never writes; PUT writes iff the bucket changed (a PUT of the same value at
the same slot writes nothing); DELETE writes iff the key was found; ATOMIC writes iff found
(even when the value does not change, as ``KVStore._writeback`` does).

Throughput model (:func:`predict_ops_per_cycle`) for the RTL's parameters, following the same
reasoning as :mod:`hwcosim.models.kvdirect.perf` (Little's law on reads in flight, OoO merging on the
measured stream, serialisation of one key without forwarding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

from .hashing import bucket_index, key_hash
from .params import KVDParams
from .perf import prev_distance
from .slab import SlabAllocator, StoreFullError
from .store import KVStore

__all__ = ["PipelineParams", "RTLStore", "Request", "Response", "pack_request", "unpack_request",
           "pack_response", "unpack_response", "golden_run", "key_to_bytes", "bucket_of",
           "predict_ops_per_cycle", "make_stream", "GET", "PUT", "DELETE", "ATOMIC",
           "OK", "NOT_FOUND", "FULL", "ERROR", "REQ_BITS", "RESP_BITS", "LINE_ADDR_BITS", "EX_STAGES",
           "HASH_STAGES", "FRONT_STAGES", "PIPE_CYCLES"]

GET, PUT, DELETE, ATOMIC = 0, 1, 2, 3
OK, NOT_FOUND, FULL, ERROR = 0, 1, 2, 3
REQ_BITS = 156
RESP_BITS = 76
LINE_ADDR_BITS = 30
EX_STAGES = 4
"""Execute pipeline stages of the RTL (x1 issue, x2 match, x3 decide, x4 ALU; an op retires from x4)."""
HASH_STAGES = 5
"""Stages of the RTL key hash (:class:`hwcosim.hdl.kvdirect.hash.KeyHash`: CRC, then two stages per 32x32
constant multiplication, products and their sum)."""
FRONT_STAGES = HASH_STAGES + 1
"""Stages from an accepted request to its dispatch: the hash, then the dispatch stage (bucket
index and the reservation station's chain match, registered)."""
PIPE_CYCLES = FRONT_STAGES + EX_STAGES + 3
"""Cycles of an op that heads its chain besides the memory round trip, from its accept cycle to
its response beat inclusive: the front stages, the cycle its read takes the memory port, the
execute stages, the response FIFO and the output beat (13; it was 11 with a 3-stage hash)."""
KEY_BYTES = 8
VALUE_BYTES = 8
_M64 = (1 << 64) - 1


@dataclass(frozen=True)
class PipelineParams:
    """Parameters of the KV-Direct RTL pipeline (shared by model, RTL, testbench and Verilog).

    Parameters
    ----------
    memory_bytes, hash_index_ratio : int, float
        Passed to :class:`KVDParams` (``max_key_bytes = 8``, ``inline_threshold = 20``); the
        bucket count ``n_buckets`` must be a power of two (the bucket index is then the top
        bits of the hash: no multiplier) and at most ``2**30`` (line address bits).
    entries : int
        Operations in flight in the reservation station (power of two, 2..256). The paper needs
        about 256 to cover a PCIe round trip.
    rs_slots : int
        Slots of the dependency table, indexed by the low bits of the bucket index (power of
        two, 1..4096; the paper uses 1,024). With ``rs_slots >= n_buckets`` there are no false
        dependencies; with fewer, ops on different buckets in one slot are serialised (never
        forwarded to each other).
    resp_fifo_depth, write_fifo_depth : int
        Response and write-back FIFO depths (>= 2).

    Raises
    ------
    ValueError
        A value the RTL cannot build, naming it and the fix.
    """

    memory_bytes: int = 8192
    hash_index_ratio: float = 0.5
    entries: int = 32
    rs_slots: int = 64
    resp_fifo_depth: int = 8
    write_fifo_depth: int = 8

    def __post_init__(self):
        kp = self.kvd  # validates memory_bytes and the ratio
        n = kp.n_buckets
        if n & (n - 1):
            raise UsageError(f"n_buckets={n} (memory_bytes={self.memory_bytes} x hash_index_ratio="
                             f"{self.hash_index_ratio} / 64) must be a power of two for the RTL; "
                             "pick memory_bytes and ratio accordingly")
        if n > 1 << LINE_ADDR_BITS:
            raise UsageError(f"n_buckets={n} exceeds the 2**{LINE_ADDR_BITS} lines of the memory port")
        for name, lo, hi in (("entries", 2, 256), ("rs_slots", 1, 4096)):
            v = getattr(self, name)
            if not isinstance(v, int) or not lo <= v <= hi or v & (v - 1):
                raise UsageError(f"{name} must be a power of two in {lo}..{hi}, not {v!r}")
        for name in ("resp_fifo_depth", "write_fifo_depth"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 2:
                raise UsageError(f"{name} must be an integer >= 2, not {v!r}")

    @property
    def kvd(self) -> KVDParams:
        return KVDParams(memory_bytes=self.memory_bytes, hash_index_ratio=self.hash_index_ratio,
                         inline_threshold=20, max_key_bytes=KEY_BYTES)

    @property
    def n_buckets(self) -> int:
        return self.kvd.n_buckets

    @property
    def bucket_bits(self) -> int:
        return (self.n_buckets - 1).bit_length()

    @property
    def entry_bits(self) -> int:
        return (self.entries - 1).bit_length()

    @property
    def slot_bits(self) -> int:
        return (self.rs_slots - 1).bit_length()

    def to_dict(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "hash_index_ratio": self.hash_index_ratio,
                "entries": self.entries, "rs_slots": self.rs_slots,
                "resp_fifo_depth": self.resp_fifo_depth, "write_fifo_depth": self.write_fifo_depth}

    @classmethod
    def from_dict(cls, d: dict) -> PipelineParams:
        return cls(**d)


class _NoChainAllocator(SlabAllocator):
    """A slab allocator with no free slab: every allocation fails (the RTL does not chain)."""

    def alloc(self, cls: int) -> int:
        raise StoreFullError("the RTL pipeline does not chain buckets (no slab allocation)")


class RTLStore(KVStore):
    """:class:`KVStore` restricted to what the RTL implements: first bucket only, no chaining."""

    def __init__(self, params: PipelineParams):
        super().__init__(params.kvd)
        self.alloc = _NoChainAllocator(self.p)


@dataclass(frozen=True)
class Request:
    tag: int
    opcode: int
    key: int          # 64-bit, byte 0 in bits 0..7
    operand: int = 0  # 64-bit two's complement
    func_id: int = 0


@dataclass(frozen=True)
class Response:
    tag: int
    status: int
    existed: int = 0
    value: int = 0    # 64-bit two's complement


def pack_request(r: Request) -> int:
    return ((r.tag & 0xFF) | (r.opcode & 7) << 8 | (r.func_id & 0xFF) << 11 | (r.key & _M64) << 28
            | (r.operand & _M64) << 92)


def unpack_request(w: int) -> Request:
    return Request(w & 0xFF, (w >> 8) & 7, (w >> 28) & _M64, (w >> 92) & _M64, (w >> 11) & 0xFF)


def pack_response(r: Response) -> int:
    return (r.tag & 0xFF) | (r.status & 3) << 8 | (r.existed & 1) << 10 | (r.value & _M64) << 12


def unpack_response(w: int) -> Response:
    return Response(w & 0xFF, (w >> 8) & 3, (w >> 10) & 1, (w >> 12) & _M64)


def key_to_bytes(key: int) -> bytes:
    return (key & _M64).to_bytes(KEY_BYTES, "little")


def bucket_of(key: int, n_buckets: int) -> int:
    return bucket_index(key_hash(key_to_bytes(key), KEY_BYTES), n_buckets)


def _signed(v: int) -> int:
    v &= _M64
    return v - (1 << 64) if v >> 63 else v


def execute(store: RTLStore, r: Request) -> Response:
    """One request on the golden store, answered as the RTL answers it."""
    k = key_to_bytes(r.key)
    if r.opcode == GET:
        v = store.get(k)
        return Response(r.tag, NOT_FOUND) if v is None else Response(r.tag, OK, 0, int.from_bytes(v, "little"))
    if r.opcode == PUT:
        try:
            existed = store.put(k, (r.operand & _M64).to_bytes(VALUE_BYTES, "little"))
        except StoreFullError:
            return Response(r.tag, FULL)
        return Response(r.tag, OK, int(existed))
    if r.opcode == DELETE:
        return Response(r.tag, OK, 1) if store.delete(k) else Response(r.tag, NOT_FOUND)
    if r.opcode == ATOMIC and r.func_id < 8:
        old = store.update_scalar(k, r.func_id, _signed(r.operand))
        return Response(r.tag, NOT_FOUND) if old is None else Response(r.tag, OK, 0, old & _M64)
    store.get(k)  # reserved opcode / function: the RTL reads the bucket and writes nothing
    return Response(r.tag, ERROR)


def golden_run(params: PipelineParams, reqs: list[Request]) -> tuple[list[Response], np.ndarray, dict]:
    """Run ``reqs`` in order on a fresh :class:`RTLStore`.

    Returns
    -------
    responses : list of Response, in request order
    image : ndarray, shape (index_bytes,), uint8 -- the final bucket array
    traffic : dict -- ``reads``, ``writes``: 64 B lines the no-forwarding RTL moves in total
    """
    st = RTLStore(params)
    out, reads, writes = [], 0, 0
    for r in reqs:
        out.append(execute(st, r))
        reads += st.last.reads
        writes += st.last.writes
    return out, st.mem[:params.kvd.index_bytes].copy(), {"reads": reads, "writes": writes}


# --- streams ------------------------------------------------------------------------------------
def make_stream(n_ops: int, n_keys: int, dist: str, seed: int, mix: dict | None = None,
                burst: int = 0) -> list[Request]:
    """A seeded operation stream (tags assigned ``i % 256``).

    Parameters
    ----------
    dist : ``"uniform"``, ``"zipf"`` (theta 0.99) or ``"burst"`` (runs of ``burst`` ops on one
        key, the key uniform).
    mix : op -> weight, default GET 0.35, PUT 0.35, DELETE 0.1, ATOMIC 0.2; ATOMIC func ids are
        uniform over 0..7.
    """
    from .workload import zipf_ranks

    rng = np.random.default_rng(seed)
    if dist == "uniform":
        ids = rng.integers(0, n_keys, size=n_ops)
    elif dist == "zipf":
        perm = rng.permutation(n_keys)
        ids = perm[zipf_ranks(n_keys, 0.99, n_ops, rng)]
    elif dist == "burst":
        if burst < 1:
            raise UsageError(f"dist='burst' needs burst >= 1, not {burst}")
        ids = np.repeat(rng.integers(0, n_keys, size=-(-n_ops // burst)), burst)[:n_ops]
    else:
        raise UsageError(f"dist must be 'uniform', 'zipf' or 'burst', not {dist!r}")
    mix = mix or {GET: 0.35, PUT: 0.35, DELETE: 0.1, ATOMIC: 0.2}
    ops_, w = zip(*sorted(mix.items()), strict=True)
    ops = rng.choice(np.array(ops_), size=n_ops, p=np.array(w, dtype=float) / sum(w))
    keyspace = rng.integers(0, 1 << 64, size=n_keys, dtype=np.uint64)
    vals = rng.integers(0, 1 << 64, size=n_ops, dtype=np.uint64)
    small = rng.random(n_ops) < 0.5  # small magnitudes too, so min/max/add cross zero often
    vals[small] = (rng.integers(-1000, 1000, size=int(small.sum()))).astype(np.int64).view(np.uint64)
    funcs = rng.integers(0, 8, size=n_ops)
    return [Request(i & 0xFF, int(o), int(keyspace[k]), int(v), int(f) if o == ATOMIC else 0)
            for i, (o, k, v, f) in enumerate(zip(ops, ids, vals, funcs, strict=True))]


# --- throughput model ---------------------------------------------------------------------------
def predict_ops_per_cycle(params: PipelineParams, reqs: list[Request], latency: int, outstanding: int,
                          forward: bool, pipeline_cycles: int = PIPE_CYCLES - 1) -> dict:
    """Predicted steady-state operations per cycle of the RTL on ``reqs``.

    The bounds, as in :mod:`hwcosim.models.kvdirect.perf` (steps 1, 3, 4 and 6) but in cycles:

    - **clock**: one op per cycle (the execute pipeline);
    - **port**: one memory request (read or write) per cycle on the ordered port; an op needs
      ``(1 - merge)`` reads and, forwarding off, the golden store's writes per op ``w``
      (forwarding on: about ``(1 - merge) * w``, one write-back per chain);
    - **memory**: reads in flight are capped by the memory port (``outstanding``) and by the
      reservation station (``entries``); by Little's law the read rate is
      ``min(outstanding, entries) / (latency + pipeline_cycles)``, and an op needs
      ``1 - merge`` reads, ``merge`` being the fraction of ops whose bucket is already in flight
      within the previous ``entries`` ops (they are forwarded and read nothing);
    - **dependency chain**: ops on one bucket are serialised. Forwarding off, each pays a full
      memory round trip, so the busiest bucket with a share ``f`` of the stream caps throughput
      at ``1 / (f * (latency + pipeline_cycles))`` -- the paper's 0.94 Mops single-key case.
      Forwarding on, each pays one pass of the execute pipeline (:data:`EX_STAGES` cycles: a
      successor issues when its predecessor retires): ``1 / (f * EX_STAGES)``. The share is
      taken over windows of ``entries`` ops (a chain only forms in flight).

    ``pipeline_cycles`` (default ``PIPE_CYCLES - 1`` = 12) is the RTL's fixed latency outside the
    memory: 5 hash + 1 dispatch + 1 memory port + 4 execute + 1 response FIFO.
    """
    b = np.array([bucket_of(r.key, params.n_buckets) for r in reqs], dtype=np.int64)
    n = len(b)
    rtt = latency + pipeline_cycles
    d = prev_distance(b)
    merge = float(((d > 0) & (d <= params.entries)).mean()) if forward else 0.0
    inflight = min(outstanding, params.entries)
    _, _, traffic = golden_run(params, reqs)
    w = traffic["writes"] / max(1, n)
    caps = {"clock": 1.0, "port": 1.0 / max(1e-9, (1.0 - merge) * (1.0 + w)),
            "memory": inflight / rtt / max(1e-9, 1.0 - merge)}
    win = params.entries
    shares = []
    for lo in range(0, max(1, n - win + 1), max(1, win // 2)):
        seg = b[lo:lo + win]
        shares.append(np.bincount(seg - seg.min()).max() / len(seg))
    f = float(np.mean(shares)) if shares else 1.0
    # a chain of c same-bucket ops in a window of W ops takes c round trips (c execute passes forwarded)
    caps["chain"] = 1.0 / (f * (EX_STAGES if forward else rtt))
    bound = min(caps, key=caps.get)
    return {"ops_per_cycle": float(caps[bound]), "bound": bound, "caps": caps, "merge_fraction": merge}
