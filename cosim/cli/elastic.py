"""``hwcosim easyscale|elasticbatch|goldminer``: the studies of :mod:`hwcosim.models.systems.elastic.bench`
(JSON + PNG, written atomically under ``build/elastic`` by default)."""

from __future__ import annotations

from hwcosim.cosim.cli.util import add_study, entry, lazy

__all__ = ["register", "main"]

_BENCH = "hwcosim.models.systems.elastic.bench"


def _easyscale(out, quick, seed=0, steps=None):
    return lazy(f"{_BENCH}:run_easyscale")(out, quick, seed, steps if steps is not None else (15 if quick else 30))


def register(subparsers) -> None:
    """Add ``easyscale``, ``elasticbatch`` and ``goldminer`` to a ``hwcosim`` subparser set."""
    for name, hlp, ref, rows in (
            ("easyscale", "EasyScale (SC 2023): bitwise-consistent elastic training", _easyscale,
             [("--steps", "training steps (default 30, quick 15)", dict(type=int, default=None))]),
            ("elasticbatch", "ElasticBatch (TPDS 2024): MIG serving planner", f"{_BENCH}:run_elasticbatch",
             [("--gpu", "A100-40GB or H100-80GB", dict(default="A100-40GB", metavar="GPU",
                                                       choices=("A100-40GB", "H100-80GB")))]),
            ("goldminer", "GoldMiner (SIGMOD 2023): elastic data workers", f"{_BENCH}:run_goldminer", [])):
        add_study(subparsers, name, hlp, ref, "build/elastic", rows, quick="small run, well under a minute",
                  seed="random seed (default 0)", say=False)


main = entry()
