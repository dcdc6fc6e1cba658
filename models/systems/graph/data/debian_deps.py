"""Derive the Debian package dependency graph (a real directed graph) from an apt ``Packages`` index.

Usage: ``python debian_deps.py Packages OUT.txt.gz`` (``Packages`` uncompressed, e.g.
``lz4 -dc /var/lib/apt/lists/*_main_binary-amd64_Packages.lz4 > Packages``).

One vertex per binary package, numbered in index order; one edge ``p -> q`` when ``p``'s
``Depends`` or ``Pre-Depends`` names ``q`` in the first alternative of a clause (a virtual package
resolves to its first provider in index order). Self-loops and duplicate edges are dropped. The
output is a gzip SNAP edge list: ``#`` comment lines, then ``src<TAB>dst`` per line.
"""

from __future__ import annotations

import gzip
import sys


def _stanzas(text: str):
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in block.split("\n"):
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            yield fields


def _names(value: str) -> list[str]:
    out = []
    for clause in value.split(","):
        first = clause.split("|")[0].strip().split(" ")[0].split(":")[0]
        if first:
            out.append(first)
    return out


def main(src: str, dst: str) -> None:
    with open(src, encoding="utf-8") as f:
        stanzas = list(_stanzas(f.read()))
    ids: dict[str, int] = {}
    provider: dict[str, str] = {}
    for s in stanzas:
        ids.setdefault(s["Package"], len(ids))
    for s in stanzas:
        for virtual in _names(s.get("Provides", "")):
            provider.setdefault(virtual, s["Package"])
    edges = set()
    for s in stanzas:
        u = ids[s["Package"]]
        for name in _names(s.get("Depends", "")) + _names(s.get("Pre-Depends", "")):
            target = name if name in ids else provider.get(name)
            if target is not None and ids[target] != u:
                edges.add((u, ids[target]))
    with gzip.open(dst, "wt", encoding="ascii", compresslevel=9) as f:
        f.write("# Debian bookworm main amd64 package dependencies (Depends + Pre-Depends, first alternative)\n")
        f.write(f"# directed: package -> dependency; {len(ids)} vertices, {len(edges)} edges\n")
        for u, v in sorted(edges):
            f.write(f"{u}\t{v}\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
