"""Receiver-side MELO engine: the bit-exact golden model of the reorder-state hardware.

MELO (Lu, Chen, Ruan, Xiao, Li, Zhang, Xiong, Cheng, Chen, "Memory Efficient Loss Recovery for
Hardware-based Transport in Datacenter", APNet 2017) keeps packet *data* off chip and only the
*metadata* on chip; reorder bitmaps are not provisioned per connection but taken from a shared
bits pool, and only by connections that currently hold out-of-order packets. This module is the
specification the RTL (:mod:`hwcosim.hdl.melo.engine`) implements: a cycle-free *transaction* model. One
input transaction is one arriving data packet ``(conn, psn)``; its output is the in-order list
of PSNs released to the application and one response record. The paper gives neither the block
size nor the free-list design nor the exhaustion policy *(unconfirmed)*; the choices below are
ours and are justified where they are made.

Design (ours)
-------------
**Blocks.** The pool holds ``pool_blocks`` blocks of ``block_bits`` bits. A block covers an
*aligned* PSN range ``[i * block_bits, (i + 1) * block_bits)`` (``block_bits`` is a power of two,
so the block index of a PSN is ``psn >> log2(block_bits)`` and the bit is its low bits: no adder
on the bit-index path, and wrap-around of the PSN space stays aligned). A connection's blocks form
a chain; chain position ``k`` covers block index ``(epsn >> lb) + k``, i.e. the head block always
covers the expected PSN. The window is therefore ``max_blocks_per_conn`` aligned blocks starting
at the block of ``epsn``: between ``(max_blocks_per_conn - 1) * block_bits + 1`` and
``max_blocks_per_conn * block_bits`` PSNs beyond ``epsn`` depending on alignment.

**Chains and the free list share one RAM.** Each pool entry is ``block_bits`` bitmap bits plus a
``ptr_bits`` next pointer. The free list is a LIFO *stack threaded through the same next
pointers* (a linked free list): pop is ``b = free_head; free_head = next[b]``, push is
``next[b] = free_head; free_head = b``. It needs no separate FIFO RAM (a FIFO of free ids would
cost another ``pool_blocks * ptr_bits`` bits), each operation is one RAM read or write, and
freeing a whole chain is O(1): ``next[tail] = free_head; free_head = head`` (this is why the
metadata keeps a tail pointer). At reset ``next[i] = i + 1`` and ``free_head = 0``, so the first
allocations are blocks 0, 1, 2, ... (the order is part of the bit-exact contract).

**Per-connection metadata** (on chip, one entry per connection): ``epsn`` (psn_bits), ``head``
and ``tail`` (ptr_bits each), ``count`` of chained blocks and ``ooo`` count of buffered
out-of-order packets. ``ooo`` tells when the last buffered packet leaves, at which point the
whole chain returns to the free list at once: a connection holds blocks only while it has
packets out of order (the MELO property).

**Policy when a packet does not fit** (pool exhausted, or beyond the window): *drop and NACK that
PSN*. The packet's data is not written; the response names the PSN and the sender retransmits it
(it still holds it, since the cumulative ACK has not covered it). Nothing is lost, and the
connection keeps selective retransmission. Progress is guaranteed: the packet at ``epsn`` never
needs a block (it is released at once), so retransmitted holes always get through and free blocks.
We prefer this over switching the connection to go-back-N, which would discard every later
packet already in flight.

**PSN arithmetic** is modulo ``2**psn_bits`` (RoCE uses 24 bits). ``d = (psn - epsn) mod 2**psn_bits``:
``d == 0`` in order, ``0 < d < 2**(psn_bits-1)`` ahead, otherwise behind (an old duplicate).

Responses
---------
One :class:`MeloResponse` per input: ``kind`` (2 bits: ACK=0, SACK=1, NACK=2, DUP=3), ``conn``,
``cum_psn`` (the expected PSN *after* the transaction, i.e. a cumulative ACK of everything before
it) and ``psn`` (the arriving packet's PSN).

- ACK: the packet was the expected one; it and the buffered run after it were released.
- SACK: the packet was buffered out of order (sender may infer holes in ``[cum_psn, psn)``).
- NACK: the packet was dropped (pool exhausted or out of window); the sender must resend ``psn``.
- DUP: the packet was already delivered or already buffered; nothing changed.

Stream words of the RTL
-----------------------
The RTL takes events and emits released PSNs and responses as stream words (fields LSB first):
input ``{psn, conn, open}`` (:func:`pack_event`; ``open=1`` is :meth:`MeloEngineModel.open_connection`),
released PSNs ``{psn, conn}`` one per PSN (:func:`pack_delivery`), and responses
``{kind, conn, cum_psn, psn, used}`` (:func:`pack_response_beat`: :meth:`MeloResponse.pack` with
the pool occupancy after the packet above it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = [
    "ACK",
    "SACK",
    "NACK",
    "DUP",
    "KIND_NAMES",
    "MeloEngineParams",
    "MeloResponse",
    "MeloResult",
    "MeloEngineModel",
    "pack_event",
    "pack_delivery",
    "pack_response_beat",
    "unpack_response_beat",
]

ACK, SACK, NACK, DUP = 0, 1, 2, 3
KIND_NAMES = ("ACK", "SACK", "NACK", "DUP")


def _clog2(n: int) -> int:
    """Bits needed to index ``n`` items (at least 1)."""
    return max(1, (int(n) - 1).bit_length())


@dataclass(frozen=True)
class MeloEngineParams:
    """Parameters of the receiver-side MELO engine (shared by golden model and RTL).

    Parameters
    ----------
    n_conns : int
        Number of connections (metadata table entries), 1 .. 2**20.
    psn_bits : int
        Width of a packet sequence number, 8 .. 32 (RoCE: 24).
    block_bits : int
        Bits per bitmap block, a power of two, 4 .. 1024.
    pool_blocks : int
        Blocks in the shared pool, 1 .. 2**20.
    max_blocks_per_conn : int
        Longest chain one connection may hold (its reorder window in blocks), 1 .. 256.

    Raises
    ------
    ValueError
        On a value the hardware cannot build, naming the value and the fix.
    """

    n_conns: int
    psn_bits: int = 24
    block_bits: int = 64
    pool_blocks: int = 1024
    max_blocks_per_conn: int = 4

    def __post_init__(self):
        for name in ("n_conns", "psn_bits", "block_bits", "pool_blocks", "max_blocks_per_conn"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise UsageError(f"MeloEngineParams.{name} must be an int, not {v!r}")
        if not 1 <= self.n_conns <= 1 << 20:
            raise UsageError(f"n_conns must be in 1..{1 << 20}, not {self.n_conns}")
        if not 8 <= self.psn_bits <= 32:
            raise UsageError(f"psn_bits must be in 8..32 (RoCE uses 24), not {self.psn_bits}")
        bb = self.block_bits
        if bb < 4 or bb > 1024 or bb & (bb - 1):
            raise UsageError(f"block_bits must be a power of two in 4..1024, not {bb}")
        if not 1 <= self.pool_blocks <= 1 << 20:
            raise UsageError(f"pool_blocks must be in 1..{1 << 20}, not {self.pool_blocks}")
        if not 1 <= self.max_blocks_per_conn <= 256:
            raise UsageError(f"max_blocks_per_conn must be in 1..256, not {self.max_blocks_per_conn}")
        if self.window_psns >= 1 << (self.psn_bits - 1):
            raise UsageError(
                f"the reorder window max_blocks_per_conn*block_bits = {self.window_psns} must be below "
                f"half the PSN space 2**{self.psn_bits - 1}; raise psn_bits or shrink the window"
            )

    # ---- derived widths -------------------------------------------------------------------
    @property
    def block_shift(self) -> int:
        """log2(block_bits)."""
        return self.block_bits.bit_length() - 1

    @property
    def window_psns(self) -> int:
        """PSNs covered by a full chain (``max_blocks_per_conn * block_bits``)."""
        return self.max_blocks_per_conn * self.block_bits

    @property
    def conn_bits(self) -> int:
        return _clog2(self.n_conns)

    @property
    def ptr_bits(self) -> int:
        return _clog2(self.pool_blocks)

    @property
    def count_bits(self) -> int:
        return self.max_blocks_per_conn.bit_length()

    @property
    def ooo_bits(self) -> int:
        return self.window_psns.bit_length()

    @property
    def metadata_bits(self) -> int:
        """Bits of one metadata-table entry: epsn, head, tail, count, ooo."""
        return self.psn_bits + 2 * self.ptr_bits + self.count_bits + self.ooo_bits

    @property
    def block_entry_bits(self) -> int:
        """Bits of one pool entry: bitmap plus next pointer."""
        return self.block_bits + self.ptr_bits

    @property
    def allocator_bits(self) -> int:
        """Free-list registers: head pointer and free count."""
        return self.ptr_bits + self.pool_blocks.bit_length()

    @property
    def on_chip_bits(self) -> int:
        """Total provisioned on-chip bits: metadata table + pool + allocator registers."""
        return self.n_conns * self.metadata_bits + self.pool_blocks * self.block_entry_bits + self.allocator_bits

    @property
    def response_bits(self) -> int:
        """Width of a packed :class:`MeloResponse` (kind, conn, cum_psn, psn)."""
        return 2 + self.conn_bits + 2 * self.psn_bits

    # ---- stream words of the RTL engine (hdl/melo) ------------------------------------------
    @property
    def used_bits(self) -> int:
        """Width of a pool-occupancy field (0 .. pool_blocks blocks in use)."""
        return self.pool_blocks.bit_length()

    @property
    def event_bits(self) -> int:
        """Width of an input event word ``{psn, conn, open}`` (see :func:`pack_event`)."""
        return self.psn_bits + self.conn_bits + 1

    @property
    def delivery_bits(self) -> int:
        """Width of a released-PSN word ``{psn, conn}`` (see :func:`pack_delivery`)."""
        return self.psn_bits + self.conn_bits

    @property
    def response_beat_bits(self) -> int:
        """Width of a response beat: the packed response, then the pool occupancy above it."""
        return self.response_bits + self.used_bits


@dataclass(frozen=True)
class MeloResponse:
    """Response to one packet.

    Attributes
    ----------
    kind : int
        ACK=0, SACK=1, NACK=2, DUP=3 (2 bits).
    conn : int
        Connection id (``conn_bits``).
    cum_psn : int
        Expected PSN after the transaction (``psn_bits``); every PSN before it is delivered.
    psn : int
        PSN of the packet that caused this response (``psn_bits``).
    """

    kind: int
    conn: int
    cum_psn: int
    psn: int

    def pack(self, params: MeloEngineParams) -> int:
        """Pack into ``params.response_bits`` bits: ``{psn, cum_psn, conn, kind}``, kind in the LSBs."""
        v = self.kind
        v |= self.conn << 2
        v |= self.cum_psn << (2 + params.conn_bits)
        v |= self.psn << (2 + params.conn_bits + params.psn_bits)
        return v

    @classmethod
    def unpack(cls, value: int, params: MeloEngineParams) -> MeloResponse:
        cb, pb = params.conn_bits, params.psn_bits
        return cls(
            kind=value & 3,
            conn=(value >> 2) & ((1 << cb) - 1),
            cum_psn=(value >> (2 + cb)) & ((1 << pb) - 1),
            psn=(value >> (2 + cb + pb)) & ((1 << pb) - 1),
        )


@dataclass(frozen=True)
class MeloResult:
    """Output of one transaction: released PSNs in order, the response, pool occupancy after."""

    delivered: tuple[int, ...]
    response: MeloResponse
    blocks_in_use: int


class MeloEngineModel:
    """Transaction-level golden model of the MELO receiver.

    Parameters
    ----------
    params : MeloEngineParams

    Attributes
    ----------
    free_count : int
        Blocks on the free list.
    stats : dict[str, int]
        Counters: ``packets``, ``acks``, ``sacks``, ``dups``, ``nack_pool`` (dropped for lack of
        blocks), ``nack_window`` (dropped beyond the window), ``allocs``, ``frees``,
        ``peak_blocks`` (highest pool occupancy seen).

    Notes
    -----
    State is held in Python lists (one entry per connection / block) because each transaction
    touches a handful of entries; :meth:`state` returns numpy copies with explicit dtypes.
    """

    def __init__(self, params: MeloEngineParams):
        if not isinstance(params, MeloEngineParams):
            raise UsageError(f"MeloEngineModel needs MeloEngineParams, not {type(params).__name__}")
        self.p = params
        n, P = params.n_conns, params.pool_blocks
        self._mask = (1 << params.psn_bits) - 1
        self._half = 1 << (params.psn_bits - 1)
        self._bmask = params.block_bits - 1
        self._lb = params.block_shift
        self._bidx_mask = (1 << (params.psn_bits - self._lb)) - 1
        self._full = (1 << params.block_bits) - 1
        self.epsn = [0] * n
        self.head = [0] * n
        self.tail = [0] * n
        self.count = [0] * n
        self.ooo = [0] * n
        self.bits = [0] * P
        self.next = [(i + 1) % P for i in range(P)]  # next[P-1] is never followed (free_count)
        self.free_head = 0
        self.free_count = P
        self.stats = dict.fromkeys(
            (
                "packets",
                "acks",
                "sacks",
                "dups",
                "nack_pool",
                "nack_window",
                "allocs",
                "frees",
                "peak_blocks",
            ),
            0,
        )

    # ---- connection setup ---------------------------------------------------------------------
    def open_connection(self, conn: int, start_psn: int) -> None:
        """Set the expected PSN of an idle connection (QP setup: the initial PSN).

        Raises
        ------
        ValueError
            If ``conn``/``start_psn`` are out of range or the connection holds blocks.
        """
        self._check_conn(conn)
        if not 0 <= start_psn <= self._mask:
            raise UsageError(f"start_psn must be in 0..{self._mask}, not {start_psn}")
        if self.count[conn]:
            raise UsageError(f"connection {conn} holds {self.count[conn]} blocks; open it only when idle")
        self.epsn[conn] = start_psn

    def _check_conn(self, conn: int) -> None:
        if not 0 <= conn < self.p.n_conns:
            raise UsageError(f"conn must be in 0..{self.p.n_conns - 1}, not {conn}")

    # ---- allocator ----------------------------------------------------------------------------
    def _pop_free(self) -> int:
        b = self.free_head
        self.free_head = self.next[b]
        self.free_count -= 1
        self.bits[b] = 0
        self.stats["allocs"] += 1
        return b

    def _free_chain(self, c: int) -> None:
        """Splice the whole chain of connection ``c`` onto the free stack (O(1))."""
        k = self.count[c]
        if k:
            self.next[self.tail[c]] = self.free_head
            self.free_head = self.head[c]
            self.free_count += k
            self.stats["frees"] += k
            self.count[c] = 0

    def _free_head_block(self, c: int) -> None:
        b = self.head[c]
        self.head[c] = self.next[b]
        self.next[b] = self.free_head
        self.free_head = b
        self.free_count += 1
        self.stats["frees"] += 1
        self.count[c] -= 1

    # ---- one transaction ------------------------------------------------------------------------
    def process(self, conn: int, psn: int) -> MeloResult:
        """Receive data packet ``psn`` on connection ``conn``.

        Parameters
        ----------
        conn : int
            Connection id, ``0 <= conn < n_conns``.
        psn : int
            Packet sequence number, ``0 <= psn < 2**psn_bits``.

        Returns
        -------
        MeloResult
            PSNs released in order (possibly empty), the response, blocks in use afterwards.

        Raises
        ------
        ValueError
            If ``conn`` or ``psn`` is out of range.
        """
        self._check_conn(conn)
        if not 0 <= psn <= self._mask:
            raise UsageError(f"psn must be in 0..{self._mask}, not {psn}")
        delivered, kind = self._process(conn, psn)
        used = self.p.pool_blocks - self.free_count
        return MeloResult(tuple(delivered), MeloResponse(kind, conn, self.epsn[conn], psn), used)

    def _process(self, c: int, psn: int) -> tuple[list[int], int]:
        """Unchecked core of :meth:`process`: returns (delivered list, response kind)."""
        st = self.stats
        st["packets"] += 1
        mask = self._mask
        e = self.epsn[c]
        d = (psn - e) & mask
        if d == 0:
            st["acks"] += 1
            delivered = [e]
            e = (e + 1) & mask
            if self.count[c]:
                bmask, bits, full = self._bmask, self.bits, self._full
                while True:
                    off = e & bmask
                    if off == 0:
                        # crossed into the next block: the old head covers only delivered PSNs
                        self._free_head_block(c)
                        if self.count[c] == 0:
                            break
                    b = self.head[c]
                    x = bits[b] >> off
                    run = ((~x) & (x + 1)).bit_length() - 1  # trailing ones = buffered run at e
                    if run == 0:
                        break
                    bits[b] &= full ^ (((1 << run) - 1) << off)
                    delivered.extend(((e + i) & mask) for i in range(run))
                    self.ooo[c] -= run
                    e = (e + run) & mask
                    if off + run < self.p.block_bits:
                        break
                if self.ooo[c] == 0:
                    self._free_chain(c)
            self.epsn[c] = e
            return delivered, ACK
        if d >= self._half:
            st["dups"] += 1
            return [], DUP
        # ahead of epsn: chain position of psn's block
        lb = self._lb
        k = ((psn >> lb) - (e >> lb)) & self._bidx_mask
        if k >= self.p.max_blocks_per_conn:
            st["nack_window"] += 1
            return [], NACK
        cnt = self.count[c]
        if k >= cnt:
            need = k + 1 - cnt
            if need > self.free_count:
                st["nack_pool"] += 1
                return [], NACK
            for _ in range(need):
                b = self._pop_free()
                if self.count[c] == 0:
                    self.head[c] = b
                else:
                    self.next[self.tail[c]] = b
                self.tail[c] = b
                self.count[c] += 1
            used = self.p.pool_blocks - self.free_count
            if used > st["peak_blocks"]:
                st["peak_blocks"] = used
            b = self.tail[c]
        else:
            b = self.head[c]
            for _ in range(k):
                b = self.next[b]
        bit = 1 << (psn & self._bmask)
        if self.bits[b] & bit:
            st["dups"] += 1
            return [], DUP
        self.bits[b] |= bit
        self.ooo[c] += 1
        st["sacks"] += 1
        return [], SACK

    # ---- inspection -----------------------------------------------------------------------------
    @property
    def blocks_in_use(self) -> int:
        return self.p.pool_blocks - self.free_count

    def state(self) -> dict[str, np.ndarray]:
        """Copies of the tables with explicit dtypes.

        Returns
        -------
        dict
            ``epsn``, ``head``, ``tail``, ``count``, ``ooo``: shape ``(n_conns,)`` uint32;
            ``bits``: shape ``(pool_blocks, block_bits)`` uint8 (bit ``j`` of block ``b``);
            ``next``: shape ``(pool_blocks,)`` uint32; ``free_head``, ``free_count``: ints.
        """
        P, bb = self.p.pool_blocks, self.p.block_bits
        raw = np.array(
            [[(v >> (32 * w)) & 0xFFFFFFFF for w in range((bb + 31) // 32)] for v in self.bits],
            dtype=np.uint64,
        ).reshape(P, -1)
        shifts = np.arange(32, dtype=np.uint64)
        bitarr = ((raw[:, :, None] >> shifts) & np.uint64(1)).astype(np.uint8).reshape(P, -1)[:, :bb]
        return {
            "epsn": np.array(self.epsn, dtype=np.uint32),
            "head": np.array(self.head, dtype=np.uint32),
            "tail": np.array(self.tail, dtype=np.uint32),
            "count": np.array(self.count, dtype=np.uint32),
            "ooo": np.array(self.ooo, dtype=np.uint32),
            "bits": bitarr,
            "next": np.array(self.next, dtype=np.uint32),
            "free_head": self.free_head,
            "free_count": self.free_count,
        }

    def check_invariants(self) -> None:
        """Raise AssertionError unless every block is either on the free list or in one chain.

        Walks the free list and every chain: their union must be all blocks, disjoint, with the
        lengths recorded in ``free_count`` and ``count``; ``ooo`` must equal the set bits of a
        chain, and a connection with no buffered packet must hold no block.
        """
        P = self.p.pool_blocks
        owner = [-2] * P
        b = self.free_head
        for _ in range(self.free_count):
            assert owner[b] == -2, f"block {b} appears twice"
            owner[b] = -1
            b = self.next[b]
        for c in range(self.p.n_conns):
            k = self.count[c]
            assert k <= self.p.max_blocks_per_conn, f"conn {c} holds {k} blocks"
            assert (k == 0) == (self.ooo[c] == 0), f"conn {c}: count {k} but ooo {self.ooo[c]}"
            b, ones = self.head[c], 0
            for i in range(k):
                assert owner[b] == -2, f"block {b} of conn {c} is also elsewhere"
                owner[b] = c
                ones += self.bits[b].bit_count()
                if i == k - 1:
                    assert b == self.tail[c], f"conn {c}: tail {self.tail[c]} is not the last block {b}"
                b = self.next[b]
            assert ones == self.ooo[c], f"conn {c}: {ones} bits set, ooo says {self.ooo[c]}"
        lost = [i for i, o in enumerate(owner) if o == -2]
        assert not lost, f"blocks leaked (neither free nor owned): {lost[:10]}"

    def quiescent(self) -> bool:
        """True when no connection buffers anything and every block is free."""
        return self.free_count == self.p.pool_blocks and not any(self.ooo)


# ---- stream words of the RTL engine ----------------------------------------------------------------
# Fields are listed LSB first, as in an Amaranth ``StructLayout``.
def pack_event(params: MeloEngineParams, conn: int, psn: int, open_: bool = False) -> int:
    """Input event word ``{psn: psn_bits, conn: conn_bits, open: 1}``.

    ``open=0`` is a data packet (:meth:`MeloEngineModel.process`); ``open=1`` sets the expected PSN of
    an idle connection to ``psn`` (:meth:`MeloEngineModel.open_connection`) and produces no output.
    """
    return psn | (conn << params.psn_bits) | (int(bool(open_)) << (params.psn_bits + params.conn_bits))


def pack_delivery(params: MeloEngineParams, conn: int, psn: int) -> int:
    """Released-PSN word ``{psn: psn_bits, conn: conn_bits}``; one per PSN, in delivery order."""
    return psn | (conn << params.psn_bits)


def pack_response_beat(params: MeloEngineParams, response: MeloResponse, blocks_in_use: int) -> int:
    """Response beat ``{kind, conn, cum_psn, psn, used}``: :meth:`MeloResponse.pack` with the
    pool occupancy after the transaction (``used_bits`` wide) above it."""
    return response.pack(params) | (blocks_in_use << params.response_bits)


def unpack_response_beat(params: MeloEngineParams, word: int) -> tuple[MeloResponse, int]:
    """Inverse of :func:`pack_response_beat`: ``(response, blocks_in_use)``."""
    resp = MeloResponse.unpack(word & ((1 << params.response_bits) - 1), params)
    return resp, word >> params.response_bits
