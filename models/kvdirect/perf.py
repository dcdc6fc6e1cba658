"""Analytic performance model of a KV-Direct NIC (throughput, latency, atomics, multi-NIC).

KV-Direct: Li, Ruan, Xiao, Lu, Xiong, Putnam, Chen, Zhang, SOSP 2017. Inputs are the hardware
figures collected in SPECS.md (PCIe Gen3 x8: 7.87 GB/s, 26 B TLP header, 64 DMA tags, 84
non-posted credits, ~1,050 ns uncached round trip; NIC DRAM 4 GiB at 12.8 GB/s; host 64 GiB over
two x8 links; 40 GbE; 180 MHz clock), memory accesses per operation (measured on
:class:`hwcosim.models.kvdirect.store.KVStore` or the paper's 1 / 2), and a seeded YCSB stream.

The model, step by step (every constant in :class:`HWParams`; ours are marked there):

1. **PCIe per link.** Reads are tag-limited (``min(tags, np_credits) / rtt``, Little's law) and
   use the downstream direction for completions (``64 + 26`` B each); writes (``64 + 26`` B) and
   read requests (26 B) share the upstream direction. Ops/s on one link for ``r`` reads and
   ``w`` writes per op is the minimum of the three limits.
2. **Load dispatch.** A fraction ``l`` of host memory is cacheable in the NIC DRAM. Every access
   to it touches DRAM; non-cacheable accesses and cache misses go over PCIe. ``l`` solves the
   paper's balance ``l / tput_DRAM = [(1 - l) + l (1 - h(l))] / tput_PCIe`` (``l = 1`` if DRAM
   never saturates). ``h(l)`` is the hit ratio of an *ideal* (popularity-ordered) cache of
   ``C = dram_bytes`` over the cacheable ``l M`` bytes: ``h = Zipf mass of the hottest
   C / (l M) of keys`` (uniform: ``C / (l M)``); a real direct-mapped cache hits less, so this
   is an upper bound.
3. **Out-of-order engine.** With ``W`` ops in flight, an op whose key is already in flight is
   merged (its data is forwarded; no memory access of its own). The merge fraction is measured
   on the seeded key stream; so is the false-dependency fraction of the 1,024-slot hash table.
4. **Caps.** Throughput = min(clock x 1 op/cycle, memory, 40 GbE both directions with batching).
5. **Latency** = network base round trip (ours) + batching wait + pipeline + memory round trips
   (DRAM hit or PCIe) + M/D/1 queueing at the bottleneck at the stated load.
6. **Atomics on one key.** Without forwarding, each must wait for the previous one's read round
   trip and compute: ``1 / (rtt + compute)``; with forwarding the engine retires one per cycle.
7. **Several NICs.** Keys are hash-partitioned; each NIC caches its own ``M / n`` share. Skewed
   load is uneven: aggregate = ``min_i cap_i / share_i`` with the shares measured from the Zipf
   mass of the hottest keys' placement (exact for the hottest 2**20 keys, even split of the rest),
   also capped by the host's PCIe lanes.

``hwcosim kvdirect study`` prints our figures beside the paper's (seed 0, Zipf 0.99, 5 B key +
5 B value, accesses per op measured on the golden store; the OoO merge fraction beside the
paper's ~15%). What the comparison shows:

- GET, 1 NIC: clock-bound in our model, as the paper's 180 Mops is.
- PUT, 1 NIC: also clock-bound in our model, above the paper's 114 Mops. Our model is optimistic:
  it assumes DRAM delivers its peak 12.8 GB/s to random 64 B lines and an ideal popularity
  cache, and omits DRAM read/write turnaround, cache fills and dirty-line write-backs and PCIe
  posted credit return, all of which a measured PUT pays.
- 10 NICs: GET is bound by the NIC owning the hottest keys (paper: 1.22 Gops); PUT by our
  assumed 80 host PCIe lanes (paper: 610 Mops), again optimistic for the reasons above.
- Latency at 90% load (paper: 4.3 / 5.4 us): most of ours is the assumed 2 us network base round
  trip, which the paper's testbed sets and we do not know.
- Single-key atomics: stalled vs forwarding gives the paper's 191x; this follows from the same two
  inputs (1,050 ns PCIe round trip, 180 MHz), so it is a consistency check, not an independent
  prediction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from hwcosim.models.errors import UsageError

from .hashing import key_hash_batch
from .workload import Workload, zipf_harmonic, zipf_top_mass

__all__ = ["HWParams", "pcie_link_ops", "hit_ratio", "dispatch_ratio", "prev_distance",
           "ooo_stats", "NICResult", "nic_throughput", "atomic_rates", "multi_nic",
           "measure_store_accesses", "PAPER"]

PAPER = {"get_mops_1nic": 180.0, "put_mops_1nic": 114.0, "get_gops_10nic": 1.22,
         "put_mops_10nic": 610.0, "get_latency_us": 4.3, "put_latency_us": 5.4,
         "atomic_stalled_mops": 0.94, "atomic_forward_mops": 180.0, "atomic_speedup": 191.0,
         "ooo_merge_fraction_skewed": 0.15}
"""The paper's headline figures (SPECS.md), for side-by-side reporting only."""

GiB = 1 << 30


@dataclass(frozen=True)
class HWParams:
    """Hardware figures. Values from SPECS.md unless marked *ours* (an assumption).

    Parameters
    ----------
    clock_hz : 180 MHz, one op issued per cycle.
    pcie_links : 2 Gen3 x8 links per NIC.
    pcie_raw_Bps : 7.87e9 B/s per direction per link.
    tlp_header_bytes : 26.
    pcie_rtt_ns : 1,050 ns uncached DMA read round trip (random host memory).
    dma_tags, np_credits : 64, 84 (reads in flight per link).
    dram_Bps : 12.8e9 NIC DRAM bandwidth; dram_bytes : 4 GiB; host_bytes : 64 GiB.
    dram_latency_ns : 200 ns (*ours*).
    net_Bps : 40 GbE = 5e9 B/s per direction.
    packet_overhead_bytes : 66 = preamble 8 + Ethernet 14 + FCS 4 + IFG 12 + IPv4 20 + UDP 8.
    mtu_payload_bytes : 1472; op_header_bytes : 4 (*ours*: opcode, lengths); max_batch : 32 (*ours*).
    pipeline_cycles : 100 (*ours*: decode, RS, OoO, hash, response).
    net_base_rtt_ns : 2,000 ns (*ours*: client stack, two NIC MAC/PHY crossings, one switch, both ways).
    compute_cycles : 2 (*ours*: ALU + write issue of an atomic).
    ooo_window : 256 ops in flight; ooo_slots : 1,024.
    host_pcie_lanes : 80 (*ours*: two 40-lane Xeon sockets shared by all NICs).
    load : 0.9 (*ours*) offered load, as a fraction of capacity, at which latency is quoted.
    """

    clock_hz: float = 180e6
    pcie_links: int = 2
    pcie_raw_Bps: float = 7.87e9
    tlp_header_bytes: int = 26
    pcie_rtt_ns: float = 1050.0
    dma_tags: int = 64
    np_credits: int = 84
    dram_Bps: float = 12.8e9
    dram_bytes: int = 4 * GiB
    host_bytes: int = 64 * GiB
    dram_latency_ns: float = 200.0
    net_Bps: float = 40e9 / 8
    packet_overhead_bytes: int = 66
    mtu_payload_bytes: int = 1472
    op_header_bytes: int = 4
    max_batch: int = 32
    pipeline_cycles: int = 100
    net_base_rtt_ns: float = 2000.0
    compute_cycles: int = 2
    ooo_window: int = 256
    ooo_slots: int = 1024
    host_pcie_lanes: int = 80
    load: float = 0.9

    def __post_init__(self):
        for name in ("clock_hz", "pcie_raw_Bps", "pcie_rtt_ns", "dram_Bps", "net_Bps", "dram_latency_ns"):
            v = getattr(self, name)
            if not v > 0:
                raise UsageError(f"{name} must be > 0, not {v!r}")
        for name in ("pcie_links", "dma_tags", "np_credits", "max_batch", "ooo_window", "ooo_slots",
                     "host_pcie_lanes", "dram_bytes", "host_bytes", "mtu_payload_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise UsageError(f"{name} must be a positive integer, not {v!r}")
        if self.ooo_slots & (self.ooo_slots - 1):
            raise UsageError(f"ooo_slots must be a power of two (it indexes by hash bits), "
                             f"not {self.ooo_slots}")
        if not 0 < self.load < 1:
            raise UsageError(f"load must be in (0, 1) (M/D/1 queueing diverges at 1), not {self.load!r}")

    @property
    def pcie_read_cap(self) -> float:
        """Reads/s one link sustains (tags or non-posted credits over the round trip)."""
        return min(self.dma_tags, self.np_credits) / (self.pcie_rtt_ns * 1e-9)

    @property
    def dram_accesses(self) -> float:
        return self.dram_Bps / 64.0


def pcie_link_ops(reads: float, writes: float, hw: HWParams) -> float:
    """Ops/s one PCIe link carries when each op does ``reads`` reads and ``writes`` writes of 64 B."""
    line = 64 + hw.tlp_header_bytes
    lim = [np.inf]
    if reads > 0:
        lim += [hw.pcie_read_cap / reads, hw.pcie_raw_Bps / (reads * line)]
    if reads > 0 or writes > 0:
        lim.append(hw.pcie_raw_Bps / (writes * line + reads * hw.tlp_header_bytes))
    return float(min(lim))


def hit_ratio(l: float, n_keys: int, theta: float, hw: HWParams, host_bytes: float | None = None) -> float:
    """Ideal-cache hit ratio of the cacheable fraction ``l`` of host memory (see module doc)."""
    m = hw.host_bytes if host_bytes is None else host_bytes
    if l <= 0:
        return 1.0
    frac = min(1.0, hw.dram_bytes / (l * m))
    return float(zipf_top_mass(frac, n_keys, theta))


def dispatch_ratio(n_keys: int, theta: float, reads: float, writes: float, hw: HWParams,
                   host_bytes: float | None = None) -> tuple[float, float, float]:
    """Solve the load-dispatch balance.

    Returns
    -------
    (l, h, accesses_per_s) : the cacheable fraction, its hit ratio, the memory access rate.
    """
    acc = reads + writes
    tput_pcie = hw.pcie_links * pcie_link_ops(reads, writes, hw) * acc if acc > 0 else np.inf
    tput_dram = hw.dram_accesses

    def f(l):
        return l / tput_dram - (1.0 - l * hit_ratio(l, n_keys, theta, hw, host_bytes)) / tput_pcie

    if f(1.0) <= 0:
        l = 1.0
    else:
        from scipy.optimize import brentq  # (loaded here: the testbench imports this module)

        l = brentq(f, 1e-9, 1.0, xtol=1e-12)
    h = hit_ratio(l, n_keys, theta, hw, host_bytes)
    rate = min(tput_dram / l, tput_pcie / max(1e-12, 1.0 - l * h))
    return float(l), float(h), float(rate)


def prev_distance(ids: np.ndarray) -> np.ndarray:
    """Distance from each position to the previous occurrence of the same id (int64, -1 if none).

    Parameters
    ----------
    ids : ndarray, shape (n,), int
    """
    ids = np.asarray(ids)
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    same = np.r_[False, s[1:] == s[:-1]]
    d = np.full(len(ids), -1, dtype=np.int64)
    d_sorted = np.where(same, np.r_[0, np.diff(order)], -1)
    d[order] = d_sorted
    return d


def ooo_stats(stream: dict, w: Workload, hw: HWParams) -> dict:
    """Merge and false-dependency fractions of a key stream in the out-of-order engine.

    An op merges if the same key is among the previous ``ooo_window`` ops; it has a false
    dependency if its 10-bit OoO slot (``crc & 0x3FF`` of the key, see
    :mod:`hwcosim.models.kvdirect.hashing`) is taken by an in-flight op of another key and its own key
    is not in flight.
    """
    kid = stream["key_id"]
    dk = prev_distance(kid)
    merged = (dk > 0) & (dk <= hw.ooo_window)
    kb = stream["key_bytes"]
    mk = int(kb.max())
    raw = (kid[:, None] >> (8 * np.arange(8, dtype=np.int64))) & 0xFF
    keys = np.zeros((len(kid), mk), dtype=np.uint8)
    width = min(8, mk)
    keys[:, :width] = raw[:, :width].astype(np.uint8)
    keys[np.arange(mk)[None, :] >= kb[:, None]] = 0
    h = key_hash_batch(keys, kb, mk)
    ds = prev_distance(h & np.uint32(hw.ooo_slots - 1))
    slot_busy = (ds > 0) & (ds <= hw.ooo_window)
    return {"merge_fraction": float(merged.mean()),
            "false_dependency_fraction": float((slot_busy & ~merged).mean())}


@dataclass
class NICResult:
    """Prediction for one NIC under one workload (rates in ops/s, latency in ns)."""

    workload: str
    throughput: float
    bound: str
    caps: dict
    l: float
    h: float
    reads_per_op: float
    writes_per_op: float
    merge_fraction: float
    latency_get_ns: float
    latency_put_ns: float

    def to_dict(self) -> dict:
        return asdict(self)


def _net_cap(w: Workload, stream: dict, hw: HWParams) -> tuple[float, int]:
    g = stream["is_get"]
    kb, vb = stream["key_bytes"].astype(np.float64), stream["value_bytes"].astype(np.float64)
    req = hw.op_header_bytes + kb + np.where(g, 0.0, vb)
    resp = hw.op_header_bytes + np.where(g, vb, 0.0)
    per = max(req.mean(), resp.mean())
    batch = int(max(1, min(hw.max_batch, hw.mtu_payload_bytes // max(1.0, per))))
    cap = hw.net_Bps / (per + hw.packet_overhead_bytes / batch)
    return float(cap), batch


def nic_throughput(w: Workload, hw: HWParams, stream: dict, accesses: dict | None = None,
                   host_bytes: float | None = None, n_keys: int | None = None,
                   ooo: dict | None = None) -> NICResult:
    """Predict one NIC's throughput and latency.

    Parameters
    ----------
    w : Workload
    hw : HWParams
    stream : dict
        From :func:`hwcosim.models.kvdirect.workload.generate` (for the size mix, merge fraction).
    accesses : dict, optional
        ``{"get": (reads, writes), "put": (reads, writes)}`` per op (64 B lines); default the
        paper's inline figures ``(1, 0)`` and ``(1, 1)``.
    host_bytes, n_keys : optional
        Memory and keys this NIC serves (multi-NIC partitions); default all.
    ooo : dict, optional
        Precomputed :func:`ooo_stats`.
    """
    acc = accesses or {"get": (1.0, 0.0), "put": (1.0, 1.0)}
    n_keys = w.n_keys if n_keys is None else n_keys
    g = w.get_ratio
    r0 = g * acc["get"][0] + (1 - g) * acc["put"][0]
    w0 = g * acc["get"][1] + (1 - g) * acc["put"][1]
    ooo = ooo if ooo is not None else ooo_stats(stream, w, hw)
    m = ooo["merge_fraction"]
    r, wr = r0 * (1 - m), w0 * (1 - m)
    l, h, acc_rate = dispatch_ratio(n_keys, w.theta, r, wr, hw, host_bytes)
    mem_cap = acc_rate / (r + wr) if r + wr > 0 else np.inf
    net_cap, batch = _net_cap(w, stream, hw)
    caps = {"clock": hw.clock_hz, "memory": mem_cap, "network": net_cap}
    bound = min(caps, key=caps.get)
    x = caps[bound]
    # latency at the offered load hw.load x capacity
    lam = hw.load * x
    p_dram = l * h
    t_mem = p_dram * hw.dram_latency_ns + (1 - p_dram) * hw.pcie_rtt_ns
    wait_q = hw.load / (2 * x * (1 - hw.load)) * 1e9          # M/D/1 mean wait
    wait_batch = 2 * (batch - 1) / (2 * lam) * 1e9            # request and response batching
    base = hw.net_base_rtt_ns + hw.pipeline_cycles / hw.clock_hz * 1e9 + wait_q + wait_batch
    lat_get = base + acc["get"][0] * t_mem
    lat_put = base + (acc["put"][0] + acc["put"][1]) * t_mem   # write waits for completion (ours)
    return NICResult(w.label, float(x), bound, {k: float(v) for k, v in caps.items()}, l, h,
                     r0, w0, m, float(lat_get), float(lat_put))


def atomic_rates(hw: HWParams, in_dram: bool = False) -> dict:
    """Single-key atomic throughput without and with forwarding (ops/s) and the speedup."""
    t_read = hw.dram_latency_ns if in_dram else hw.pcie_rtt_ns
    stalled = 1.0 / (t_read * 1e-9 + hw.compute_cycles / hw.clock_hz)
    forward = hw.clock_hz
    return {"stalled": stalled, "forwarding": forward, "speedup": forward / stalled}


def _nic_shares(w: Workload, n_nics: int, seed: int) -> np.ndarray:
    """Fraction of accesses landing on each NIC under a random hash partition of the keys."""
    rng = np.random.default_rng(seed)
    if w.theta == 0:
        return np.full(n_nics, 1.0 / n_nics)
    m = min(w.n_keys, 1 << 20)
    p = np.arange(1, m + 1, dtype=np.float64) ** -w.theta / float(zipf_harmonic(w.n_keys, w.theta))
    owner = rng.integers(0, n_nics, size=m)
    share = np.bincount(owner, weights=p, minlength=n_nics)
    return share + (1.0 - p.sum()) / n_nics


def multi_nic(w: Workload, hw: HWParams, stream: dict, n_nics: int, seed: int,
              accesses: dict | None = None) -> dict:
    """Aggregate throughput of ``n_nics`` NICs in one host (see module doc, step 7)."""
    if n_nics < 1:
        raise UsageError(f"n_nics must be >= 1, not {n_nics}")
    ooo = ooo_stats(stream, w, hw)
    per = nic_throughput(w, hw, stream, accesses, host_bytes=hw.host_bytes / n_nics,
                         n_keys=max(1, w.n_keys // n_nics), ooo=ooo)
    shares = _nic_shares(w, n_nics, seed)
    skew_cap = float(per.throughput / shares.max())
    # host PCIe lanes: PCIe access demand per op at the per-NIC dispatch point
    acc_per_op = (per.reads_per_op + per.writes_per_op) * (1 - ooo["merge_fraction"])
    pcie_frac = 1.0 - per.l * per.h
    lane_links = hw.host_pcie_lanes / 8.0
    host_cap = (lane_links * pcie_link_ops(per.reads_per_op, per.writes_per_op, hw)
                * (per.reads_per_op + per.writes_per_op) / max(1e-12, acc_per_op * pcie_frac))
    caps = {"per_nic_x_n": per.throughput * n_nics, "skew": skew_cap, "host_pcie": float(host_cap)}
    bound = min(caps, key=caps.get)
    return {"n_nics": n_nics, "throughput": caps[bound], "bound": bound, "caps": caps,
            "max_share": float(shares.max()), "per_nic": per.to_dict()}


def measure_store_accesses(n_keys: int, kv: tuple[int, int], seed: int, fill: float = 0.5,
                           n_ops: int = 4000, inline_threshold: int = 20) -> dict:
    """Mean 64 B lines read/written per GET and PUT on a real :class:`KVStore`.

    The store (1 MiB, hash-index ratio 0.5) is filled to ``fill`` of its inline slot capacity
    with ``kv = (key_bytes, value_bytes)`` pairs, then ``n_ops`` uniform GETs and PUTs of
    existing keys (new values) are counted for traffic.
    """
    from .params import KVDParams
    from .store import KVStore
    from .workload import key_bytes

    p = KVDParams(memory_bytes=1 << 20, hash_index_ratio=0.5, inline_threshold=inline_threshold,
                  max_key_bytes=max(8, kv[0]))
    s = KVStore(p)
    enc = 2 + kv[0] + kv[1]
    per_bucket = 10 // -(-enc // 5) if enc <= inline_threshold else 10
    n = int(min(n_keys, fill * p.n_buckets * per_bucket))
    val = bytes(kv[1])
    for i in range(n):
        s.put(key_bytes(i, kv[0]), val)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, n, size=n_ops)
    s.totals.clear()
    for j, i in enumerate(ids):
        k = key_bytes(int(i), kv[0])
        if j & 1:
            s.put(k, (j & 0xFFFF).to_bytes(2, "little").ljust(kv[1], b"\0")[:kv[1]] if kv[1] else val)
        else:
            s.get(k)
    out = {}
    for op in ("get", "put"):
        c, r, wr, dma = s.totals[op]
        out[op] = (float(r / c), float((wr + dma) / c))
    out["n_keys_loaded"] = n
    return out
