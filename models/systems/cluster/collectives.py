"""Collectives decomposed into streams of flows (alpha-beta model, pipelined algorithms).

Every collective becomes one or more :class:`StreamSpec` (a set of src -> dst flows moving the same
bytes at one common rate, see :mod:`hwcosim.models.systems.cluster.network`) plus a latency term. Sizes follow
NCCL's conventions (``S`` is the buffer size per rank; Thakur, Rabenseifner & Gropp, IJHPCA 2005;
NCCL ``PERFORMANCE.md`` for bus bandwidth):

===================  ==========================  ==========================  ==============
collective           bytes on every ring/tree    latency steps               bus bw factor
                     hop                                                     (busbw/algbw)
===================  ==========================  ==========================  ==============
ring all-reduce      2 (n-1)/n * S               2 (n-1)                     2 (n-1)/n
ring all-gather      (n-1)/n * S  (S = output)   n-1                         (n-1)/n
ring reduce-scatter  (n-1)/n * S  (S = input)    n-1                         (n-1)/n
tree all-reduce      S up + S down, pipelined    2 * depth                   --
P2P (PP send/recv)   S                           1                           1
all-to-all           S / n on each of n (n-1)    1 (all sends posted at      (n-1)/n
                     pairs                       once, as NCCL does)
===================  ==========================  ==========================  ==============

On links of bandwidth B with no contention the ring all-reduce therefore takes
``2 (n-1)/n * S / B + 2 (n-1) * alpha`` (the closed form the tests check). ``channels`` splits a
collective into that many independent rings (NCCL channels: separate QPs, so separate ECMP
hashes), each carrying ``1/channels`` of the bytes.

All-to-all (MoE expert parallelism): rank i sends a distinct ``S / n`` to every other rank. It is
decomposed into the ``n - 1`` shift permutations ``i -> (i + r) mod n`` (r = 1 .. n-1), one
stream each (NCCL posts every send at once; a shift is the unit of the pairwise-exchange algorithm
and its flows advance together). Every NIC then sends ``(n-1)/n * S``, so on a non-blocking
switch of NIC bandwidth B it takes ``(n-1)/n * S / B + alpha`` (the closed form the tests check).

The pipelined binary tree (heap order: rank i's parent is (i-1)//2) sends S up every edge and S
down every edge concurrently; an inner rank with two children and a parent then receives 3 S
through its NIC, so on a non-blocking switch it takes ``3 S / B`` (n >= 5; 2 S / B for n = 3, 4). NCCL's double binary
tree halves this; we model the single tree and say so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["StreamSpec", "Collective", "ring_allreduce", "tree_allreduce", "ring_allgather",
           "ring_reducescatter", "p2p", "alltoall", "bus_bw_factor"]


@dataclass(frozen=True, eq=False)
class StreamSpec:
    """Flows ``src[i] -> dst[i]`` that move ``nbytes`` each at one common rate.

    ``key`` distinguishes streams of one collective for routing (the channel: a new QP, a new
    ECMP hash).
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: float
    key: int = 0

    def __post_init__(self):
        src = np.asarray(self.src, dtype=np.int64).ravel()
        dst = np.asarray(self.dst, dtype=np.int64).ravel()
        if src.shape != dst.shape or src.size == 0:
            raise UsageError(f"src and dst must be equal, non-empty 1-D arrays, not {src.shape} and {dst.shape}")
        if np.any(src == dst):
            raise UsageError("a flow needs src != dst")
        if not self.nbytes > 0:
            raise UsageError(f"stream bytes must be > 0, not {self.nbytes!r}")
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)


@dataclass(frozen=True, eq=False)
class Collective:
    """A collective: its streams run concurrently; it ends ``latency_s`` after the last finishes."""

    kind: str
    streams: tuple[StreamSpec, ...]
    latency_s: float
    size: float
    ranks: int

    @property
    def empty(self) -> bool:
        return not self.streams


def _ranks(ranks) -> np.ndarray:
    r = np.asarray(ranks, dtype=np.int64).ravel()
    if r.size == 0:
        raise UsageError("a collective needs at least one rank")
    if np.unique(r).size != r.size:
        raise UsageError("collective ranks must be distinct GPUs")
    return r


def _check(size: float, channels: int, alpha_s: float) -> None:
    if not size > 0:
        raise UsageError(f"collective size must be > 0 bytes, not {size!r}")
    if not (isinstance(channels, (int, np.integer)) and channels >= 1):
        raise UsageError(f"channels must be an integer >= 1, not {channels!r}")
    if not alpha_s >= 0:
        raise UsageError(f"alpha_s must be >= 0, not {alpha_s!r}")


def _ring(kind: str, ranks, size: float, factor: float, steps: int, channels: int, alpha_s: float) -> Collective:
    r = _ranks(ranks)
    _check(size, channels, alpha_s)
    n = r.size
    if n == 1:
        return Collective(kind, (), 0.0, size, 1)
    nxt = np.roll(r, -1)
    per = factor * size / channels
    streams = tuple(StreamSpec(r, nxt, per, key=c) for c in range(channels))
    return Collective(kind, streams, steps * alpha_s, size, n)


def ring_allreduce(ranks, size: float, channels: int = 1, alpha_s: float = 0.0) -> Collective:
    """Ring all-reduce of ``size`` bytes per rank over ``ranks`` (GPU ids, ring order)."""
    n = np.asarray(ranks).size
    return _ring("allreduce", ranks, size, 2 * (n - 1) / max(n, 1), 2 * (n - 1), channels, alpha_s)


def ring_allgather(ranks, size: float, channels: int = 1, alpha_s: float = 0.0) -> Collective:
    """Ring all-gather; ``size`` is the gathered output per rank."""
    n = np.asarray(ranks).size
    return _ring("allgather", ranks, size, (n - 1) / max(n, 1), n - 1, channels, alpha_s)


def ring_reducescatter(ranks, size: float, channels: int = 1, alpha_s: float = 0.0) -> Collective:
    """Ring reduce-scatter; ``size`` is the input per rank."""
    n = np.asarray(ranks).size
    return _ring("reducescatter", ranks, size, (n - 1) / max(n, 1), n - 1, channels, alpha_s)


def tree_allreduce(ranks, size: float, channels: int = 1, alpha_s: float = 0.0) -> Collective:
    """Pipelined binary-tree all-reduce (reduce up, broadcast down, concurrently)."""
    r = _ranks(ranks)
    _check(size, channels, alpha_s)
    n = r.size
    if n == 1:
        return Collective("tree-allreduce", (), 0.0, size, 1)
    child = np.arange(1, n)
    parent = (child - 1) // 2
    src = np.concatenate([r[child], r[parent]])
    dst = np.concatenate([r[parent], r[child]])
    depth = int(np.floor(np.log2(n)))
    streams = tuple(StreamSpec(src, dst, size / channels, key=c) for c in range(channels))
    return Collective("tree-allreduce", streams, 2 * depth * alpha_s, size, n)


def p2p(src: int, dst: int, size: float, channels: int = 1, alpha_s: float = 0.0) -> Collective:
    """Point-to-point send (pipeline-parallel activations or gradients)."""
    _check(size, channels, alpha_s)
    streams = tuple(StreamSpec([src], [dst], size / channels, key=c) for c in range(channels))
    return Collective("p2p", streams, alpha_s, size, 2)


def alltoall(ranks, size: float, channels: int = 1, alpha_s: float = 0.0) -> Collective:
    """All-to-all of ``size`` bytes per rank (``size / n`` to each rank, itself included)."""
    r = _ranks(ranks)
    _check(size, channels, alpha_s)
    n = r.size
    if n == 1:
        return Collective("alltoall", (), 0.0, size, 1)
    per = size / n / channels
    streams = tuple(StreamSpec(r, np.roll(r, -sh), per, key=(sh - 1) * channels + c)
                    for sh in range(1, n) for c in range(channels))
    return Collective("alltoall", streams, alpha_s, size, n)


def bus_bw_factor(kind: str, n: int) -> float:
    """NCCL bus-bandwidth factor: busbw = algbw * factor (algbw = S / t)."""
    if kind == "allreduce":
        return 2 * (n - 1) / n
    if kind in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0
