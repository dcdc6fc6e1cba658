"""``hwcosim demo``: the main job end to end, offline (:mod:`hwcosim.cosim.designs.bbs.demo`)."""

from __future__ import annotations

__all__ = ["run_demo"]


def run_demo(args) -> int:
    """``hwcosim demo`` with its parsed options: :func:`hwcosim.cosim.designs.bbs.demo.run_demo`."""
    from hwcosim.cosim.designs.bbs.demo import run_demo as demo

    return demo(output=args.output, banks=args.banks, sparsity=args.sparsity, pes=args.pes, vectors=args.vectors,
                synth=args.synth)
