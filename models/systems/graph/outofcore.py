"""PageRank on graphs bigger than memory: R-MAT edges streamed to disk, memory-mapped CSR blocks.

Three stages, each bounded in memory by the vertex count (never by the edge count):

1. :func:`write_rmat_edges` streams a Graph500 R-MAT graph to two raw edge files in chunks. The edge
   stream is *the same* as :func:`~models.systems.graph.graph.rmat`'s for the same
   :class:`~models.systems.graph.graph.RMATParams` (same seed, same chunking, same label
   permutation): the in-memory generator draws ``scale`` uniform doubles per edge and then the
   permutation, so the permutation is drawn first here from a second generator advanced past the
   ``m * scale`` edge draws (``PCG64.advance``; one 64-bit output per double), and the edges are then
   drawn chunk by chunk and relabelled as they go. Weights are not drawn (PageRank ignores them).
2. :func:`build_blocks` is an external build of ``P`` destination-range blocks: a pass for the
   degrees (the block bounds balance in-edges), a pass that appends each chunk's edges to one bucket
   file per block, and per block a stable sort by destination into a CSR block (``offsets`` per
   destination, ``src`` ids), both ``.npy`` files for :func:`numpy.load` with ``mmap_mode="r"``. The
   source ids are *gather ids* (vertices numbered by decreasing out-degree, as the compiled engine
   orders its gathers), so the values the hubs emit share cache lines; destinations keep their ids.
   Ids are int32 while ``n < 2**31``, offsets int32 while a block's edges fit, else int64. A JSON
   header (``blocks.json``) records every file's dtype, shape, byte size and CRC-32; the store is
   written in a staging folder and renamed into place, so a store is whole or absent.
3. :func:`pagerank_out_of_core` keeps four float64 vectors in memory (rank, emitted rank/out-degree
   in gather order, accumulator, 1/out-degree) and the gather ids and dangling mask (37 bytes per
   vertex), and streams the blocks one at a time through a numba pull kernel, mapping a block,
   summing into its destination range, and unmapping it, so the resident edge data is one block. It
   computes the function of :class:`~models.systems.graph.algorithms.PageRank` (uniform start,
   dangling mass spread evenly, stop when the L1 change is below ``n * tol``) with the same vector
   arithmetic; only the order of the additions within a destination differs from the engine's
   (rounding, ~1e-16 relative).

Every iteration reads each block's two arrays once: :attr:`OOCResult.bytes_per_iteration` is their
size. ``evict=True`` drops each block from the page cache after use (``posix_fadvise DONTNEED``), so
every iteration reads from the storage device, as when the blocks do not fit the page cache; the
device bytes actually read (``/proc/self/io`` ``read_bytes``) are recorded beside it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hwcosim.models.errors import UsageError
from numba import njit

from .graph import RMATParams, rmat_chunk

__all__ = ["FORMAT", "CHUNK", "BYTES_PER_VERTEX", "BLOCK_BYTES", "write_rmat_edges", "rmat_edge_chunks",
           "build_blocks", "BlockStore", "OOCResult", "pagerank_out_of_core", "check_ooc_budget",
           "build_rmat_store", "device_read_bytes", "pagerank_rmat_out_of_core"]

FORMAT = "hwcosim-ooc-csr/1"
#: edges per generated chunk: the in-memory generator's chunk, so the edge streams are identical
CHUNK = 1 << 22
#: bytes held per vertex: PageRank's four float64 vectors, the gather ids and the dangling mask (37 B), the
#: build's two int64 degree counts and gather ids, or the generator's int64 label permutation, rounded up
BYTES_PER_VERTEX = 40
#: default size of one block's source ids (the number of blocks follows from it)
BLOCK_BYTES = 128 << 20
_EDGES = "edges.json"
_HEADER = "blocks.json"


# ---- budget --------------------------------------------------------------------------------------------
def _id_dtype(n: int):
    return np.dtype(np.int32) if n < 2**31 else np.dtype(np.int64)


def check_ooc_budget(n: int, block_edges: int, what: str) -> None:
    """Refuse (UsageError, one line) a graph whose in-memory vectors plus one block (and the build's
    sort of one block: 20 bytes per edge) exceed the memory budget of :mod:`hwcosim.models.budget`."""
    from hwcosim.models.budget import check_alloc

    per_edge = 20 + _id_dtype(n).itemsize
    check_alloc(int(n) * BYTES_PER_VERTEX + max(int(block_edges), CHUNK) * per_edge,
                f"out-of-core PageRank of {what} ({n} vertices: {BYTES_PER_VERTEX} B each in memory, plus one block)",
                "lower the scale or use more blocks")


# ---- stage 1: the R-MAT edge stream --------------------------------------------------------------------
def rmat_edge_chunks(params: RMATParams, chunk: int = CHUNK):
    """Yield ``(src, dst)`` int64 chunks of :func:`~models.systems.graph.graph.rmat` ``(params)``'s edges
    (identical edges in the same order, for the same ``chunk``), holding one chunk and the permutation."""
    n = 1 << params.scale
    m = params.edge_factor * n
    ahead = np.random.default_rng(params.seed)
    ahead.bit_generator.advance(m * params.scale)  # past the edge draws: the permutation rmat draws next
    perm = ahead.permutation(n)
    del ahead
    rng = np.random.default_rng(params.seed)
    for lo in range(0, m, chunk):
        s, d = rmat_chunk(rng, min(chunk, m - lo), params)
        yield perm[s], perm[d]


def _new_stage(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".staging", dir=out.parent))


def _commit(stage: Path, out: Path) -> Path:
    if out.exists():
        raise UsageError(f"{out} already exists; remove it or give another folder")
    os.rename(stage, out)
    return out


def write_rmat_edges(params: RMATParams, out: str | os.PathLike, chunk: int = CHUNK) -> Path:
    """Stream R-MAT ``params``'s edges to ``out`` (a new folder): ``src.bin``, ``dst.bin`` (raw int32 or
    int64) and ``edges.json`` (n, m, dtype, params); staged and renamed into place."""
    out = Path(out)
    n = 1 << params.scale
    m = params.edge_factor * n
    dt = _id_dtype(n)
    check_ooc_budget(n, chunk, f"an R-MAT graph of scale {params.scale}")
    if out.exists():
        raise UsageError(f"{out} already exists; remove it or give another folder")
    stage = _new_stage(out)
    try:
        with open(stage / "src.bin", "wb") as fs, open(stage / "dst.bin", "wb") as fd:
            for s, d in rmat_edge_chunks(params, chunk):
                fs.write(s.astype(dt).tobytes())
                fd.write(d.astype(dt).tobytes())
        meta = {"format": FORMAT + "-edges", "n": n, "m": m, "dtype": dt.name, "files": ["src.bin", "dst.bin"],
                "rmat": {"scale": params.scale, "edge_factor": params.edge_factor, "a": params.a, "b": params.b,
                         "c": params.c, "seed": params.seed}}
        (stage / _EDGES).write_text(json.dumps(meta, indent=1) + "\n")
        return _commit(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _read_edges_meta(edges: Path) -> dict:
    try:
        meta = json.loads((edges / _EDGES).read_text())
        int(meta["n"])
        m, dt = int(meta["m"]), np.dtype(meta["dtype"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{edges / _EDGES}: not an edge folder written by write_rmat_edges ({e})") from None
    for f in ("src.bin", "dst.bin"):
        size = (edges / f).stat().st_size if (edges / f).exists() else -1
        if size != m * dt.itemsize:
            raise UsageError(f"{edges / f}: {size} bytes, expected {m * dt.itemsize} ({m} edges of {dt.name}); "
                             "the edge file is truncated or missing, write it again")
    return meta


def _edge_chunks(edges: Path, meta: dict, chunk: int):
    dt, m = np.dtype(meta["dtype"]), int(meta["m"])
    with open(edges / "src.bin", "rb") as fs, open(edges / "dst.bin", "rb") as fd:
        for lo in range(0, m, chunk):
            k = min(chunk, m - lo)
            yield np.fromfile(fs, dt, k), np.fromfile(fd, dt, k)


# ---- stage 2: external build of the CSR blocks ---------------------------------------------------------
def _save(path: Path, a: np.ndarray) -> dict:
    np.save(path, a)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # on the device before the store is renamed into place (and evictable from the cache)
    finally:
        os.close(fd)
    return {"file": path.name, "dtype": a.dtype.name, "shape": list(a.shape), "bytes": path.stat().st_size,
            "crc32": zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B"))}


def _bounds(indeg: np.ndarray, m: int, P: int) -> np.ndarray:
    """Destination-range bounds (P + 1, non-decreasing) with about m / P in-edges per block."""
    cum = np.cumsum(indeg)
    b = np.searchsorted(cum, (np.arange(1, P) * (m / P)), side="left") + 1
    return np.concatenate([[0], np.minimum(b, indeg.size), [indeg.size]]).astype(np.int64)


def build_blocks(edges: str | os.PathLike, out: str | os.PathLike, blocks: int | None = None,
                 chunk: int = CHUNK) -> Path:
    """Build the CSR block store ``out`` (a new folder) from the edge folder ``edges``.

    ``blocks``: the block count (default: one per :data:`BLOCK_BYTES` of source ids). Memory: two int64
    degree vectors and the sort of one block. Returns ``out``.
    """
    edges, out = Path(edges), Path(out)
    meta = _read_edges_meta(edges)
    n, m = int(meta["n"]), int(meta["m"])
    idt = _id_dtype(n)
    P = blocks if blocks is not None else max(1, math.ceil(m * idt.itemsize / BLOCK_BYTES))
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or not 1 <= P <= max(1, n):
        raise UsageError(f"block count must be an integer in [1, {n}] (the vertex count), not {blocks!r}")
    P = int(P)
    check_ooc_budget(n, math.ceil(m / P), f"{edges} ({m} edges in {P} blocks)")
    if out.exists():
        raise UsageError(f"{out} already exists; remove it or give another folder")
    t0 = time.perf_counter()
    indeg = np.zeros(n, np.int64)
    outdeg = np.zeros(n, np.int64)
    for s, d in _edge_chunks(edges, meta, chunk):  # pass 1: degrees
        indeg += np.bincount(d, minlength=n)
        outdeg += np.bincount(s, minlength=n)
    bounds = _bounds(indeg, m, P)
    del indeg
    # gather ids: vertices by decreasing out-degree (stable), so the hubs' values share cache lines
    gid = np.empty(n, idt)
    gid[np.argsort(-outdeg, kind="stable")] = np.arange(n, dtype=idt)
    stage = _new_stage(out)
    try:
        header = {"format": FORMAT, "n": n, "m": m, "blocks": [], "id_dtype": idt.name,
                  "source": meta.get("rmat", {"edges": str(edges)})}
        odt = np.dtype(np.int32) if int(outdeg.max(initial=0)) < 2**31 else np.dtype(np.int64)
        header["outdeg"] = _save(stage / "outdeg.npy", outdeg.astype(odt))
        header["gid"] = _save(stage / "gid.npy", gid)
        del outdeg
        bk = [(open(stage / f"bucket{p}.src", "wb"), open(stage / f"bucket{p}.dst", "wb")) for p in range(P)]
        try:
            for s, d in _edge_chunks(edges, meta, chunk):  # pass 2: bucket by destination block
                part = (np.searchsorted(bounds, d, side="right") - 1).astype(np.int16 if P < 2**15 else np.int64)
                order = np.argsort(part, kind="stable")  # a radix sort for 16-bit keys
                s = gid[s]
                cuts = np.searchsorted(part[order], np.arange(P + 1))
                s, d = s[order], d[order]
                for p in range(P):
                    if cuts[p + 1] > cuts[p]:
                        bk[p][0].write(s[cuts[p]:cuts[p + 1]].tobytes())
                        bk[p][1].write(d[cuts[p]:cuts[p + 1]].tobytes())
                del s, d, part, order
        finally:
            for f1, f2 in bk:
                f1.close()
                f2.close()
        for p in range(P):  # pass 3: each bucket sorted (stably) by destination into a CSR block
            lo, hi = int(bounds[p]), int(bounds[p + 1])
            s = np.fromfile(stage / f"bucket{p}.src", idt)
            loc = np.fromfile(stage / f"bucket{p}.dst", idt) - lo
            (stage / f"bucket{p}.src").unlink()
            (stage / f"bucket{p}.dst").unlink()
            order = np.argsort(loc, kind="stable")
            s = s[order]
            del order
            odt = np.dtype(np.int32) if s.size < 2**31 else np.dtype(np.int64)
            off = np.zeros(hi - lo + 1, odt)
            np.cumsum(np.bincount(loc, minlength=hi - lo), out=off[1:])
            del loc
            header["blocks"].append({"lo": lo, "hi": hi, "edges": int(s.size),
                                     "offsets": _save(stage / f"block{p}.offsets.npy", off),
                                     "src": _save(stage / f"block{p}.src.npy", s)})
            del s, off
        del gid
        header["build_s"] = time.perf_counter() - t0
        (stage / _HEADER).write_text(json.dumps(header, indent=1) + "\n")
        return _commit(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def build_rmat_store(params: RMATParams, out: str | os.PathLike, blocks: int | None = None,
                     keep_edges: bool = False) -> dict:
    """Generate R-MAT ``params`` to ``out/edges`` and build ``out/blocks``; the edge folder is removed
    afterwards unless ``keep_edges``. Returns the timings (s) and the disk bytes of each stage."""
    out = Path(out)
    t0 = time.perf_counter()
    e = write_rmat_edges(params, out / "edges")
    t1 = time.perf_counter()
    b = build_blocks(e, out / "blocks", blocks)
    t2 = time.perf_counter()
    res = {"generate_s": t1 - t0, "build_s": t2 - t1, "edge_bytes": sum(f.stat().st_size for f in e.iterdir()),
           "block_bytes": sum(f.stat().st_size for f in b.iterdir()), "blocks_dir": str(b)}
    if not keep_edges:
        shutil.rmtree(e)
    return res


# ---- the store -----------------------------------------------------------------------------------------
class BlockStore:
    """A CSR block store on disk (see the module docstring), checked when opened.

    Every file is checked against the header: present, of the recorded byte size, dtype and shape;
    with ``verify`` (default) also its CRC-32 (one read of the store). A file that fails is refused
    with a UsageError naming it.
    """

    def __init__(self, path: str | os.PathLike, verify: bool = True):
        self.path = Path(path)
        hp = self.path / _HEADER
        try:
            h = json.loads(hp.read_text())
            if h.get("format") != FORMAT:
                raise ValueError(f"format {h.get('format')!r}, expected {FORMAT!r}")
            self.n, self.m = int(h["n"]), int(h["m"])
            self.blocks = [(int(b["lo"]), int(b["hi"]), int(b["edges"]), b["offsets"], b["src"]) for b in h["blocks"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UsageError(f"{hp}: not a block store written by build_blocks ({e}); build it again") from None
        self.header = h
        for rec in [h["outdeg"], h["gid"]] + [r for b in self.blocks for r in b[3:]]:
            self._check(rec, verify)
        if sum(b[2] for b in self.blocks) != self.m or (self.blocks and self.blocks[-1][1] != self.n):
            raise UsageError(f"{hp}: the blocks hold {sum(b[2] for b in self.blocks)} edges up to vertex "
                             f"{self.blocks[-1][1] if self.blocks else 0}, the header says {self.m} and {self.n}")

    def _check(self, rec: dict, verify: bool) -> None:
        f = self.path / rec["file"]
        size = f.stat().st_size if f.exists() else -1
        if size != rec["bytes"]:
            raise UsageError(f"{f}: {size} bytes, the header says {rec['bytes']}; the block file is truncated, "
                             "damaged or missing: build the store again")
        try:
            a = np.load(f, mmap_mode="r")
        except ValueError as e:
            raise UsageError(f"{f}: not a readable .npy array ({e}); build the store again") from None
        if a.dtype.name != rec["dtype"] or list(a.shape) != rec["shape"]:
            raise UsageError(f"{f}: {a.dtype.name} {list(a.shape)}, the header says {rec['dtype']} {rec['shape']}; "
                             "build the store again")
        if verify:
            crc = 0
            flat = np.asarray(a).reshape(-1).view(np.uint8)
            for lo in range(0, flat.size, 1 << 26):
                crc = zlib.crc32(flat[lo:lo + (1 << 26)], crc)
            del flat, a
            if crc != rec["crc32"]:
                raise UsageError(f"{f}: CRC-32 {crc:#010x}, the header says {rec['crc32']:#010x}; the block file "
                                 "is corrupt: build the store again")

    def outdeg(self) -> np.ndarray:
        return np.load(self.path / self.header["outdeg"]["file"])

    def gid(self) -> np.ndarray:
        """Gather id of every vertex (its place in decreasing out-degree order): the blocks' source ids."""
        return np.load(self.path / self.header["gid"]["file"])

    def block_bytes(self) -> int:
        """Bytes of the block arrays one PageRank iteration reads (offsets and source ids)."""
        return sum(int(np.prod(r["shape"])) * np.dtype(r["dtype"]).itemsize for b in self.blocks for r in b[3:])

    def max_block_edges(self) -> int:
        return max((b[2] for b in self.blocks), default=0)


# ---- stage 3: PageRank streaming the blocks ------------------------------------------------------------
@njit(nogil=True, cache=True)
def _pull_block(off, src, y, out, lo):
    for v in range(off.size - 1):
        s = 0.0
        for e in range(off[v], off[v + 1]):
            s += y[src[e]]
        out[lo + v] = s


def device_read_bytes() -> int:
    """Bytes this process has read from storage (``/proc/self/io`` read_bytes; -1 where unavailable)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def _evict(path: Path) -> None:
    if hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@dataclass
class OOCResult:
    """Ranks and counters of :func:`pagerank_out_of_core` (``seconds``: the iterations only)."""

    state: np.ndarray
    steps: int
    seconds: float
    edges_processed: int
    bytes_per_iteration: int
    device_bytes_read: int
    blocks: int

    @property
    def edges_per_second(self) -> float:
        return self.edges_processed / max(self.seconds, 1e-12)


def pagerank_out_of_core(store: BlockStore | str | os.PathLike, *, damping: float = 0.85, tol: float = 1e-10,
                         max_steps: int = 200, iterations: int | None = None, evict: bool = False) -> OOCResult:
    """PageRank of the graph in block store ``store``: the function of
    :class:`~models.systems.graph.algorithms.PageRank` (same damping, dangling mass, stopping rule).

    ``iterations``: run exactly that many (no convergence test; for timing). ``evict``: drop every block
    from the page cache after use, so each iteration reads the blocks from the device.
    """
    from .algorithms import PageRank

    PageRank(damping=damping, tol=tol, max_steps=max_steps)  # validates the parameters
    if iterations is not None and (isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer))
                                   or iterations < 1):
        raise UsageError(f"iterations must be an integer >= 1, not {iterations!r}")
    st = store if isinstance(store, BlockStore) else BlockStore(store)
    n = st.n
    check_ooc_budget(n, st.max_block_edges(), f"the block store {st.path}")
    deg = st.outdeg()
    dangling = deg == 0
    inv = np.zeros(n)
    np.divide(1.0, deg, out=inv, where=~dangling)
    del deg
    gid = st.gid()
    x = np.full(n, 1.0 / n)
    y = np.empty(n)
    acc = np.empty(n)
    c0 = (1 - damping) / n
    cap = iterations if iterations is not None else max_steps
    thresh = n * tol
    for ro, rs in {(b[3]["dtype"], b[4]["dtype"]) for b in st.blocks}:  # compile outside the timed loop
        _pull_block(np.zeros(1, ro), np.zeros(0, rs), y, acc, 0)
    if evict:  # opening the store read (CRC-32) every file: start from the device
        for b in st.blocks:
            _evict(st.path / b[3]["file"])
            _evict(st.path / b[4]["file"])
    io0 = device_read_bytes()
    t0 = time.perf_counter()
    steps = 0
    while steps < cap:
        np.multiply(x, inv, out=acc)
        y[gid] = acc  # emitted values in gather order
        acc[:] = 0.0
        for lo, _hi, _m, ro, rs in st.blocks:
            fo, fs = st.path / ro["file"], st.path / rs["file"]
            off, src = np.load(fo, mmap_mode="r"), np.load(fs, mmap_mode="r")
            _pull_block(np.asarray(off), np.asarray(src), y, acc, lo)
            del off, src  # unmapped: the resident edge data is one block
            if evict:
                _evict(fo)
                _evict(fs)
        # new = (1-d)/n + d (acc + dangling x / n), in place; the same operations as PageRank.apply
        acc += x[dangling].sum() / n
        acc *= damping
        acc += c0
        np.subtract(acc, x, out=y)
        np.abs(y, out=y)
        diff = y.sum()
        x, acc = acc, x
        steps += 1
        if iterations is None and diff < thresh:
            break
    dt = time.perf_counter() - t0
    io1 = device_read_bytes()
    return OOCResult(x, steps, dt, steps * st.m, st.block_bytes(), io1 - io0 if io0 >= 0 and io1 >= 0 else -1,
                     len(st.blocks))


def pagerank_rmat_out_of_core(scale: int = 14, edge_factor: int = 16, seed: int = 0, *,
                              store: str | os.PathLike | None = None, blocks: int | None = None,
                              iterations: int | None = None, evict: bool = False, damping: float = 0.85,
                              tol: float = 1e-10, max_steps: int = 200) -> tuple[OOCResult, dict]:
    """PageRank of R-MAT ``(scale, edge_factor, seed)`` out of core; ``(result, info)``.

    ``store``: a folder. If it holds a block store (``blocks/blocks.json``, e.g. from an earlier call)
    that store is used (its R-MAT parameters must match); otherwise the graph is generated and built
    there and kept. ``None``: a temporary folder under the system temporary directory, deleted
    afterwards. ``info`` has the build timings and sizes (``built`` False when reused).
    """
    params = RMATParams(scale=scale, edge_factor=edge_factor, seed=seed)
    n = 1 << scale
    check_ooc_budget(n, CHUNK, f"an R-MAT graph of scale {scale}")
    tmp = store is None
    root = Path(tempfile.mkdtemp(prefix="hwcosim-ooc-")) if tmp else Path(store)
    try:
        if (root / "blocks" / _HEADER).exists():
            st = BlockStore(root / "blocks")
            want = {"scale": scale, "edge_factor": edge_factor, "seed": seed}
            got = {k: st.header.get("source", {}).get(k) for k in want}
            if got != want:
                raise UsageError(f"{root / 'blocks'} holds R-MAT {got}, not {want}; give another folder")
            info = {"built": False, "blocks_dir": str(st.path)}
        else:
            if root.exists() and any(root.iterdir()):
                raise UsageError(f"{root} exists and holds no block store; give an empty or a new folder")
            info = build_rmat_store(params, root, blocks)
            info["built"] = True
            st = BlockStore(info["blocks_dir"], verify=False)  # just written and checked by its sizes
        r = pagerank_out_of_core(st, damping=damping, tol=tol, max_steps=max_steps, iterations=iterations,
                                 evict=evict)
        info.update(n=st.n, m=st.m, blocks=len(st.blocks), store_bytes=st.block_bytes(), kept=not tmp)
        return r, info
    finally:
        if tmp:
            shutil.rmtree(root, ignore_errors=True)
