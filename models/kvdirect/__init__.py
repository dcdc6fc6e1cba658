"""KV-Direct golden models: the store (bit-exact memory layout) and its performance model.

KV-Direct: Bojie Li, Zhenyuan Ruan, Wencong Xiao, Yuanwei Lu, Yongqiang Xiong, Andrew Putnam,
Enhong Chen, Lintao Zhang, "KV-Direct: High-Performance In-Memory Key-Value Store with
Programmable NIC", SOSP 2017 (details from the first author's thesis and his public code
``bojieli/KVS``, read for facts only).

Modules
-------
params    :class:`KVDParams` (memory size, hash-index ratio, inline threshold, key width, slab sync).
hashing   the bucket / secondary / OoO-slot hash (``fmix32(CRC-32(key || pad || len))``).
layout    64 B bucket bit layout, inline and offline KV encodings.
slab      slab allocator (32..512 B, NIC cache + host pools, split, lazy merge).
store     :class:`KVStore`: GET / PUT / DELETE / atomics / vector update / reduce / filter with
          per-operation 64 B memory access counts; :class:`StoreFullError`.
workload  seeded YCSB-style streams (uniform, Zipf), Zipf mass helpers.
perf      PCIe / DRAM load dispatch / OoO / network / multi-NIC throughput and latency model.
cli       ``register(subparsers)`` for ``hwcosim kvdirect study``.

Interface of the future RTL pipeline (the store is its golden model)
--------------------------------------------------------------------
Version 1 of the RTL serves **inline KVs of an 8 B key and an 8 B value** (one signed 64-bit
element; inline encoding ``2 + 8 + 8 = 18`` B = 4 slots, so ``inline_threshold >= 18``;
``max_key_bytes = 8``, key length fixed at 8 and still hashed with its length byte as
:mod:`hwcosim.models.kvdirect.hashing` defines). Streams are ``amaranth.lib.stream`` (valid/ready/payload),
payload fields listed LSB first:

Request record ``i`` (156 bits):

=========  =====  ==============================================================
field      bits   meaning
=========  =====  ==============================================================
tag        8      client-chosen id, echoed in the response (responses may be
                  reordered by the out-of-order engine; the tag matches them)
opcode     3      0 GET, 1 PUT, 2 DELETE, 3 ATOMIC (update_scalar), 4..7 reserved
func_id    8      ATOMIC only: registered function id (0 add, 1 sub, 2 min, 3 max,
                  4 and, 5 or, 6 xor, 7 swap; see ``store.BUILTIN_FUNCTIONS``)
pad        9      zero
key        64     key bytes, byte 0 in bits 0..7 (little endian)
operand    64     PUT: the value; ATOMIC: the operand (two's complement); else 0
=========  =====  ==============================================================

Response record ``o`` (76 bits):

=========  =====  ==============================================================
tag        8      from the request
status     2      0 OK, 1 NOT_FOUND (GET/DELETE/ATOMIC on a missing key),
                  2 FULL (PUT needed a chained bucket and no 64 B slab was free;
                  memory unchanged), 3 reserved
existed    1      PUT: the key was present before (replace); DELETE: key removed
pad        1      zero
value      64     GET: the value; ATOMIC: the element *before* the update; else 0
=========  =====  ==============================================================

Memory port (to the PCIe DMA / DRAM cache engine): 64 B lines. Read request ``addr`` (line
number, 30 bits for 64 GiB); read response ``data`` (512 bits, byte 0 in bits 0..7, identical
to :meth:`layout.Bucket.pack`); write request ``addr`` + ``data`` (512 bits, whole line).
Chained buckets come from a 64 B free-slab FIFO the host keeps filled (``slab.SlabAllocator``
class 1). Golden-model check: run the same request sequence through :class:`store.KVStore` with
the same parameters; responses must match field by field, the per-op line counts must match
``KVStore.last`` (reads, writes), and after the sequence the bucket array
``KVStore.mem[:params.index_bytes]`` must equal the RTL's memory image byte for byte (slab
contents match as long as the RTL pops free slabs in the model's order: lowest address first).
"""

from .params import KVDParams
from .slab import StoreFullError
from .store import KVStore, OpCost

__all__ = ["KVDParams", "KVStore", "OpCost", "StoreFullError"]
