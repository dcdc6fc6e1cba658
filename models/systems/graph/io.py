"""Users' own graphs in: SNAP edge lists (plain or gzip), Matrix Market ``.mtx`` and ``.npz`` CSR.

:func:`read_graph` picks the reader by suffix:

- SNAP-style edge lists (``.txt``, ``.tsv``, ``.csv``, ``.el``, ``.edges``, any of them ``.gz``):
  one edge per line, ``src dst`` or ``src dst weight``, separated by tabs, spaces or commas;
  ``#`` and ``%`` lines are comments. The file is streamed in blocks of lines (memory bounded by
  the block plus the edge arrays), with a progress line on stderr for large files.
- Matrix Market (``.mtx``, ``.mtx.gz``): a coordinate ``matrix`` (``pattern``, ``integer`` or
  ``real``; ``general`` or ``symmetric``), one-based; the header's entry count is checked against
  the entries present.
- ``.npz`` written by ``scipy.sparse.save_npz`` (CSR/CSC/COO; no pickles).

Vertex ids are the file's own: an edge list's graph has one vertex per distinct id found in it
(``n`` is that count: SNAP's wiki-Vote, ids 3 .. 8,297, has its 7,115 nodes), numbered internally
``0 .. n-1`` in id order, with ``Graph.ids`` mapping each internal index back to the file's id (and
``Graph.index`` the inverse); a Matrix Market file's vertices are its one-based row/column numbers
``1 .. max(rows, cols)``; an ``.npz`` adjacency's are its indices ``0 .. n-1``. Options (a BFS
source) and reports speak these ids; the internal numbering never reaches the user.
Every defect is a :class:`GraphFormatError` (a ``ValueError``) naming the file and, for text, the
line: a non-integer or negative id, a missing column, a non-finite weight, a truncated gzip, a
header promising more entries than the file holds.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from pathlib import Path

import numpy as np
from hwcosim.models.budget import budget_bytes, check_alloc, check_npz
from hwcosim.models.errors import UsageError
from hwcosim.models.systems.graph.graph import Graph, graph_bytes

__all__ = ["read_graph", "GraphFormatError", "EDGE_SUFFIXES"]

EDGE_SUFFIXES = (".txt", ".tsv", ".csv", ".el", ".edges", ".snap")
BLOCK_LINES = 1 << 20
MAX_EDGES = 1 << 31


class GraphFormatError(UsageError):
    """A graph file that cannot be read; the message names the file and the line."""


#: Fewest bytes one Matrix Market entry line takes ("1 1\n"; "1 1 1\n" with a value).
_MIN_ENTRY_BYTES = {"pattern": 4, "integer": 6, "real": 6}
#: A gzip stream inflating more than this many times its compressed bytes (past 1 MiB) is refused:
#: real edge lists compress 3-10x; a 1 MB file of 300 M identical edges inflates about 1000x.
MAX_GZIP_RATIO = 100


class _CappedGzip(io.RawIOBase):
    """A gzip file's decompressed bytes, refused (GraphFormatError) past the memory budget or past
    :data:`MAX_GZIP_RATIO` times the compressed bytes read: a small file cannot stream forever."""

    def __init__(self, path: Path):
        self.path = path
        self.raw = open(path, "rb")
        self.gz = gzip.GzipFile(fileobj=self.raw, mode="rb")
        self.out = 0
        self.cap = budget_bytes()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.gz.read(len(b))
        n = len(data)
        b[:n] = data
        self.out += n
        if self.out > 1 << 20 and self.out > MAX_GZIP_RATIO * max(self.raw.tell(), 1):
            raise GraphFormatError(f"{self.path}: inflates more than {MAX_GZIP_RATIO}x its compressed size "
                                   f"({self.out >> 20} MiB from {self.raw.tell() >> 10} KiB so far); a decompression "
                                   "bomb or a degenerate file: decompress it yourself (gunzip) and pass the text file")
        if self.out > self.cap:
            check_alloc(self.out, f"{self.path}: the decompressed text", "use a smaller graph", GraphFormatError)
        return n

    def tell(self) -> int:
        return self.out

    def close(self) -> None:
        try:
            self.gz.close()
        finally:
            self.raw.close()
            super().close()


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(io.BufferedReader(_CappedGzip(path)), encoding="utf-8", errors="strict")
    return open(path, encoding="utf-8", errors="strict")


def _base_suffix(path: Path) -> str:
    return Path(path.stem).suffix.lower() if path.suffix == ".gz" else path.suffix.lower()


def read_graph(path: str | os.PathLike, *, progress: bool = True) -> Graph:
    """Read a graph file (see the module docstring); :class:`GraphFormatError` on any defect."""
    path = Path(path)
    if not path.is_file():
        raise GraphFormatError(f"{path}: no such graph file")
    suf = _base_suffix(path)
    try:
        if suf == ".mtx":
            g = _read_mtx(path)
        elif suf == ".npz" and path.suffix != ".gz":
            g = _read_npz(path)
        elif suf in EDGE_SUFFIXES:
            g = _read_edges(path, progress)
        else:
            raise GraphFormatError(f"{path}: unknown graph format {suf or '(no suffix)'}; give a SNAP edge list "
                                   f"({', '.join(EDGE_SUFFIXES)}, optionally .gz), a .mtx or a .npz")
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise GraphFormatError(f"{path}: truncated or corrupt gzip ({e}); download the file again") from None
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"{path}: not a text file (byte {e.start}: {e.reason})") from None
    return g


def _compact(src: np.ndarray, dst: np.ndarray, w, name: str) -> Graph:
    if src.size == 0:
        raise GraphFormatError(f"{name}: holds no edges")
    ids = np.unique(np.concatenate([src, dst]))  # the file's vertex ids, sorted: internal index -> id
    if ids[-1] != ids.size - 1:  # not already 0 .. n-1: number the vertices in id order
        src = np.searchsorted(ids, src)
        dst = np.searchsorted(ids, dst)
    return Graph(int(ids.size), src, dst, w, name=name, ids=ids)


def _bad_line(path: Path, lineno: int, line: str, why: str) -> GraphFormatError:
    shown = line.strip()
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return GraphFormatError(f"{path}:{lineno}: {why} in {shown!r}; each line must be 'src dst' or 'src dst weight' "
                            "with non-negative integer ids")


def _parse_block(path: Path, lines: list[tuple[int, str]], has_w: list):
    rows = []
    for lineno, line in lines:
        parts = line.replace(",", " ").split()
        if len(parts) not in (2, 3):
            raise _bad_line(path, lineno, line, f"{len(parts)} columns")
        if has_w[0] is None:
            has_w[0] = len(parts) == 3
        elif has_w[0] != (len(parts) == 3):
            raise _bad_line(path, lineno, line, "a different number of columns than the first edge")
        rows.append((lineno, parts))
    n = len(rows)
    src = np.empty(n, np.int64)
    dst = np.empty(n, np.int64)
    w = np.empty(n, np.float64) if has_w[0] else None
    for i, (lineno, parts) in enumerate(rows):
        try:
            s, d = int(parts[0]), int(parts[1])
        except ValueError:
            raise _bad_line(path, lineno, " ".join(parts), "a non-integer vertex id") from None
        if s < 0 or d < 0:
            raise _bad_line(path, lineno, " ".join(parts), "a negative vertex id")
        if s >= 1 << 62 or d >= 1 << 62:
            raise _bad_line(path, lineno, " ".join(parts), "a vertex id beyond 2**62")
        src[i], dst[i] = s, d
        if w is not None:
            try:
                w[i] = float(parts[2])
            except ValueError:
                raise _bad_line(path, lineno, " ".join(parts), "a weight that is not a number") from None
            if not np.isfinite(w[i]):
                raise _bad_line(path, lineno, " ".join(parts), "a non-finite weight")
    return src, dst, w


def _read_edges(path: Path, progress: bool) -> Graph:
    size = path.stat().st_size
    srcs, dsts, ws = [], [], []
    has_w: list = [None]
    block: list[tuple[int, str]] = []
    total = 0
    shown = False
    with _open_text(path) as f:
        raw = f.buffer if hasattr(f, "buffer") else None
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if not s or s[0] in "#%":
                continue
            block.append((lineno, s))
            if len(block) >= BLOCK_LINES:
                a, b, c = _parse_block(path, block, has_w)
                srcs.append(a), dsts.append(b), ws.append(c)
                total += a.size
                block = []
                if total > MAX_EDGES:
                    raise GraphFormatError(f"{path}: more than {MAX_EDGES} edges; split the graph")
                check_alloc(graph_bytes(0, total), f"{path}: {total} edges read so far", "use a smaller graph",
                            GraphFormatError)
                if progress and size > 50 << 20:
                    pos = raw.tell() if raw is not None and hasattr(raw, "tell") else 0
                    print(f"\rreading {path.name}: {total / 1e6:.0f} M edges"
                          + (f" ({100 * pos / size:.0f}% of the file)" if pos and path.suffix != ".gz" else ""),
                          end="", file=sys.stderr, flush=True)
                    shown = True
    if block:
        a, b, c = _parse_block(path, block, has_w)
        srcs.append(a), dsts.append(b), ws.append(c)
    if shown:
        print(file=sys.stderr)
    if not srcs:
        raise GraphFormatError(f"{path}: holds no edges (only comments or blank lines)")
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    w = np.concatenate(ws) if has_w[0] else None
    return _compact(src, dst, w, path.name)


def _read_mtx(path: Path) -> Graph:
    with _open_text(path) as f:
        header = f.readline()
        if not header.startswith("%%MatrixMarket"):
            raise GraphFormatError(f"{path}:1: not a Matrix Market file (no %%MatrixMarket header)")
        h = header.lower().split()
        if len(h) < 5 or h[1] != "matrix" or h[2] != "coordinate":
            raise GraphFormatError(f"{path}:1: only coordinate matrices are graphs; found {' '.join(h[1:3])}")
        field, symmetry = h[3], h[4]
        if field not in ("pattern", "integer", "real") or symmetry not in ("general", "symmetric"):
            raise GraphFormatError(f"{path}:1: field {field!r} / symmetry {symmetry!r} not supported "
                                   "(pattern, integer or real; general or symmetric)")
        lineno = 1
        for line in f:
            lineno += 1
            if line.strip() and not line.startswith("%"):
                break
        else:
            raise GraphFormatError(f"{path}: no size line")
        try:
            nr, nc, nnz = (int(t) for t in line.split())
        except ValueError:
            raise GraphFormatError(f"{path}:{lineno}: bad size line {line.strip()!r}; want 'rows cols entries'") \
                from None
        if nr < 1 or nc < 1 or nnz < 0 or nnz > MAX_EDGES:
            raise GraphFormatError(f"{path}:{lineno}: sizes {nr} x {nc} with {nnz} entries are out of range")
        if path.suffix != ".gz" and nnz * _MIN_ENTRY_BYTES[field] > path.stat().st_size + 1:
            raise GraphFormatError(f"{path}:{lineno}: the header promises {nnz} entries, more than the file's "
                                   f"{path.stat().st_size} bytes can hold; it is truncated or the size line is wrong")
        check_alloc(graph_bytes(max(nr, nc), nnz * (2 if symmetry == "symmetric" else 1)),
                    f"{path}:{lineno}: a graph of {max(nr, nc)} vertices and {nnz} entries", "use a smaller graph",
                    GraphFormatError)
        src = np.empty(nnz, np.int64)
        dst = np.empty(nnz, np.int64)
        w = np.empty(nnz) if field != "pattern" else None
        k = 0
        want = 2 if field == "pattern" else 3
        for line in f:
            lineno += 1
            s = line.strip()
            if not s or s.startswith("%"):
                continue
            if k >= nnz:
                raise GraphFormatError(f"{path}:{lineno}: more entries than the {nnz} the header promises")
            parts = s.split()
            if len(parts) != want:
                raise GraphFormatError(f"{path}:{lineno}: {len(parts)} columns, a {field} entry has {want}")
            try:
                i, j = int(parts[0]), int(parts[1])
                if w is not None:
                    w[k] = float(parts[2])
            except ValueError:
                raise GraphFormatError(f"{path}:{lineno}: non-numeric entry {s[:60]!r}") from None
            if not (1 <= i <= nr and 1 <= j <= nc):
                raise GraphFormatError(f"{path}:{lineno}: entry ({i}, {j}) outside the {nr} x {nc} matrix "
                                       "(indices are one-based)")
            src[k], dst[k] = i - 1, j - 1
            k += 1
        if k < nnz:
            raise GraphFormatError(f"{path}:{lineno}: the header promises {nnz} entries, the file holds {k}; "
                                   "it is truncated")
    if w is not None and not np.all(np.isfinite(w)):
        raise GraphFormatError(f"{path}: non-finite weights")
    if symmetry == "symmetric":
        off = src != dst
        src, dst = np.concatenate([src, dst[off]]), np.concatenate([dst, src[off]])
        w = None if w is None else np.concatenate([w, w[off]])
    n = max(nr, nc)
    return Graph(n, src, dst, w, name=path.name, ids=np.arange(1, n + 1, dtype=np.int64))  # one-based ids


def _read_npz(path: Path) -> Graph:
    import scipy.sparse as sp

    check_npz(path, GraphFormatError, fix="use a smaller graph")  # the arrays' declared sizes, before unpacking
    try:
        a = sp.load_npz(path)
    except (OSError, ValueError, KeyError) as e:
        raise GraphFormatError(f"{path}: not a scipy sparse .npz ({str(e).splitlines()[0]})") from None
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise GraphFormatError(f"{path}: adjacency must be square, not {a.shape}")
    check_alloc(graph_bytes(a.shape[0], a.nnz), f"{path}: a graph of {a.shape[0]} vertices and {a.nnz} edges",
                "use a smaller graph", GraphFormatError)
    c = a.tocoo()
    if not np.all(np.isfinite(c.data)):
        raise GraphFormatError(f"{path}: non-finite weights")
    return Graph(int(a.shape[0]), c.row.astype(np.int64), c.col.astype(np.int64), c.data.astype(np.float64),
                 name=path.name)
