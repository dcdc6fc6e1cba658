"""KV-Direct slab allocator: NIC-side free-slab caches synced in batches with host-side pools.

KV-Direct (Li et al., SOSP 2017, section on the slab allocator) keeps one free pool per slab
size (32/64/128/256/512 B). The NIC allocates and frees from a small on-NIC cache of free
pointers per class; the cache exchanges pointers with the host pools in batches over DMA (the
paper reports < 0.07 DMA per alloc/free). Splitting and merging of slabs is done by the host.

How this model does it (our choices, documented):

- Host pools are sets of free slab addresses per class; the slab region starts 512 B aligned
  and is initially all 512 B slabs, so every slab of size ``s`` is ``s``-aligned and its buddy
  is ``addr ^ s`` relative to the region base.
- **Refill.** A class whose NIC cache is empty takes up to ``slab_sync_batch`` lowest-address
  free slabs of that class from its host pool; the host splits larger free slabs in halves
  (smallest larger class first) until it has a batch or runs out.
- **Return.** A class whose NIC cache exceeds ``slab_cache_high`` returns its
  ``slab_sync_batch`` oldest entries to the host pool.
- **Lazy merge.** The host merges buddies only when an allocation cannot be served by
  splitting: it pulls back every NIC-cached free slab, then merges free buddy pairs bottom-up
  (32 -> 64 -> ... -> 512). The paper's host merges in the background; doing it on demand gives
  the same answer to "is there room", which is what the store's correctness depends on.
- **DMA cost.** Each batch moves 5 B pointer entries: ``ceil(5 * n / 64)`` 64 B accesses,
  counted in :attr:`SlabAllocator.dma_accesses`. Host split/merge work is counted separately
  (host CPU, not NIC memory traffic).
"""

from __future__ import annotations

import numpy as np
from hwcosim.models.errors import UsageError

from .params import SLAB_SIZES, KVDParams

__all__ = ["SlabAllocator", "StoreFullError"]

_ENTRY_BYTES = 5


class StoreFullError(UsageError, RuntimeError):
    """The store has no free memory for the request; nothing was changed."""


class SlabAllocator:
    """Free-slab management of one store's slab region.

    Parameters
    ----------
    params : KVDParams

    Attributes
    ----------
    host : list of set of int
        Host free pools per class (byte addresses).
    nic : list of list of int
        NIC-side caches per class (stack; the end is popped first).
    used : dict int -> int
        Allocated slab address -> class (for consistency checks and double-free detection).
    dma_accesses, host_splits, host_merges, syncs : int
        Counters.
    """

    def __init__(self, params: KVDParams):
        self.p = params
        self.base = params.slab_base
        self.size = params.slab_bytes
        self.host: list[set[int]] = [set() for _ in SLAB_SIZES]
        self.host[-1].update(range(self.base, self.base + self.size, SLAB_SIZES[-1]))
        self.nic: list[list[int]] = [[] for _ in SLAB_SIZES]
        self.used: dict[int, int] = {}
        self.dma_accesses = 0
        self.host_splits = 0
        self.host_merges = 0
        self.syncs = 0

    # --- NIC side -------------------------------------------------------------------------
    def alloc(self, cls: int) -> int:
        """Allocate one slab of class ``cls``; raise :class:`StoreFullError` if none can be made."""
        if not self.nic[cls]:
            self._refill(cls)
        if not self.nic[cls]:
            raise StoreFullError(
                f"store full: no free {SLAB_SIZES[cls]} B slab left in the {self.size} B slab region "
                f"(memory_bytes={self.p.memory_bytes}, hash_index_ratio={self.p.hash_index_ratio}); "
                "delete keys, raise memory_bytes or lower hash_index_ratio")
        a = self.nic[cls].pop()
        self.used[a] = cls
        return a

    def free(self, addr: int, cls: int) -> None:
        if self.used.get(addr) != cls:
            raise ValueError(f"free of slab {addr:#x} class {cls} that is not allocated as that class")
        del self.used[addr]
        self.nic[cls].append(addr)
        if len(self.nic[cls]) > self.p.slab_cache_high:
            batch = self.nic[cls][:self.p.slab_sync_batch]
            del self.nic[cls][:self.p.slab_sync_batch]
            self.host[cls].update(batch)
            self._dma(len(batch))

    def _dma(self, entries: int) -> None:
        if entries:
            self.syncs += 1
            self.dma_accesses += -(-entries * _ENTRY_BYTES // 64)

    def _refill(self, cls: int) -> None:
        want = self.p.slab_sync_batch
        while len(self.host[cls]) < want and self._split_one(cls):
            pass
        if not self.host[cls]:
            self._merge_all()
            while len(self.host[cls]) < want and self._split_one(cls):
                pass
        take = sorted(self.host[cls])[:want]
        self.host[cls].difference_update(take)
        self.nic[cls].extend(reversed(take))  # lowest address is popped first
        self._dma(len(take))

    # --- host side ------------------------------------------------------------------------
    def _split_one(self, cls: int) -> bool:
        for c in range(cls + 1, len(SLAB_SIZES)):
            if self.host[c]:
                a = min(self.host[c])
                self.host[c].remove(a)
                self.host[c - 1].update((a, a + SLAB_SIZES[c - 1]))
                self.host_splits += 1
                return True
        return False

    def _merge_all(self) -> None:
        for c in range(len(SLAB_SIZES)):
            self._dma(len(self.nic[c]))
            self.host[c].update(self.nic[c])
            self.nic[c].clear()
        for c in range(len(SLAB_SIZES) - 1):
            s = SLAB_SIZES[c]
            if not self.host[c]:
                continue
            arr = np.fromiter(self.host[c], dtype=np.int64, count=len(self.host[c]))
            lo = arr[(((arr - self.base) // s) & 1) == 0]
            lo = lo[np.isin(lo + s, arr)]
            if lo.size:
                self.host[c].difference_update(lo.tolist())
                self.host[c].difference_update((lo + s).tolist())
                self.host[c + 1].update(lo.tolist())
                self.host_merges += int(lo.size)

    # --- inspection -----------------------------------------------------------------------
    def free_bytes(self) -> int:
        return sum(SLAB_SIZES[c] * (len(self.host[c]) + len(self.nic[c])) for c in range(len(SLAB_SIZES)))

    def check(self) -> None:
        """Every 32 B unit of the slab region is either in exactly one used or one free slab."""
        cover = np.zeros(self.size // 32, dtype=np.int64)
        spans = [(a, c) for a, c in self.used.items()]
        for c in range(len(SLAB_SIZES)):
            spans += [(a, c) for a in self.host[c]] + [(a, c) for a in self.nic[c]]
        if spans:
            a = np.array([s[0] for s in spans], dtype=np.int64)
            c = np.array([s[1] for s in spans], dtype=np.int64)
            sz = np.asarray(SLAB_SIZES, dtype=np.int64)[c]
            if ((a - self.base) % sz).any():
                raise AssertionError("slab not aligned to its size")
            units = sz // 32
            starts = (a - self.base) // 32
            within = np.arange(units.sum()) - np.repeat(np.cumsum(units) - units, units)
            idx = np.repeat(starts, units) + within
            np.add.at(cover, idx, 1)
        if not (cover == 1).all():
            raise AssertionError(f"slab region covered {cover.min()}..{cover.max()} times "
                                 "(must be exactly once)")
