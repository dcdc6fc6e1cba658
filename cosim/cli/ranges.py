"""The documented range of every numeric option of ``hwcosim``, checked before any work.

One table, applied by the dispatcher to every subcommand's parser (:func:`apply_ranges`): each
numeric option gets a type that refuses values outside its range (exit 2, one line naming the
option, the value and the range) and the range is appended to its ``--help`` text. An option
is looked up as ``"COMMAND PATH --dest"`` first (``"graph run scale"``), then by its dest alone.
A numeric option that appears in no entry falls back to :data:`DEFAULT_INT` /
:data:`DEFAULT_FLOAT` (finite, and no larger than a run on this class of machine can use), and
``tests/flow/test_cli_ranges.py`` lists every option and fails on one that has no entry here.
An option that takes a comma-separated list of numbers (``--seeds 1,2,3``) has its entry in
:data:`LISTS`: every item is checked against the range (the option still receives its text).

Sizes are bounded by what a 24 GiB, 2-core machine can hold or finish; the bound says so in
its note where it is a memory bound.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

__all__ = ["Range", "RANGES", "LISTS", "lookup", "apply_ranges"]


@dataclass(frozen=True)
class Range:
    """``lo <= v <= hi`` (``lo_open``/``hi_open`` make an end strict); ``note`` explains a bound."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    note: str = ""

    def text(self) -> str:
        def num(v):
            if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
                v = int(v)
            return f"{v:,}".replace(",", "_") if isinstance(v, int) and abs(v) >= 100_000 else str(v)

        return f"{'(' if self.lo_open else '['}{num(self.lo)}, {num(self.hi)}{')' if self.hi_open else ']'}"

    def holds(self, v: float) -> bool:
        if not math.isfinite(v):
            return False
        lo_ok = v > self.lo if self.lo_open else v >= self.lo
        hi_ok = v < self.hi if self.hi_open else v <= self.hi
        return lo_ok and hi_ok


PROB = Range(0.0, 1.0, hi_open=True)
SEED = Range(0, 2**32 - 1)
DEFAULT_INT = Range(0, 10**9, note="no count in hwcosim needs more")
DEFAULT_FLOAT = Range(-1e12, 1e12)

#: dest (or "COMMAND PATH dest") -> Range
RANGES: dict[str, Range] = {
    "seed": SEED,
    "workers": Range(1, 64, note="worker processes on one machine"),
    "jobs": Range(1, 64, note="parallel processes"),
    "graph run scale": Range(1, 24, note="R-MAT scale: 2**24 vertices x edge factor 16 = 268 M edges, about "
                                          "6 GiB of edge arrays: the most this machine holds"),
    "graph partition scale": Range(1, 24, note="2**24 vertices x 16 = 268 M edges, about 6 GiB"),
    "cosim melo scale": Range(0.0, 100.0, lo_open=True, note="flow sizes times this"),
    "clock_mhz": Range(1.0, 2000.0),
    "build clock": Range(1.0, 1000.0, note="MHz"),
    "build seed": Range(0, 2**31 - 1),
    "max_minutes": Range(0.1, 600.0),
    "sim n": Range(1, 100_000, note="random vectors through the RTL"),
    "board run n": Range(1, 100_000, note="random vectors through the board"),
    "board run steps": Range(1, 10_000, note="LSTM time steps per sequence"),
    "run rtl_tokens": Range(1, 10**7, note="tokens of a compiled BERT run through the RTL"),
    "baud": Range(115200, 921600, note="standard UART rates (choices)"),
    "prune n": Range(1, 1024),
    "prune damp": Range(0.0, 10.0, hi_open=True, note="OBS damping, a fraction of the mean Hessian diagonal"),
    "prune blocksize": Range(1, 65536, note="OBS columns per lazy-update block"),
    "pes": Range(1, 1024),
    "banks": Range(1, 1024),
    "sparsity": PROB,
    "theta": Range(0.0, 2.0),
    "loss": PROB,
    "load": Range(0.0, 10.0, lo_open=True),
    "cluster speed iterations": Range(1, 100_000),
    "cosim kv iterations": Range(1, 10_000),
    "p_stall": Range(0.0, 0.95, hi_open=True),
    "p_idle": Range(0.0, 0.95),
    "idle": Range(0.0, 0.95),
    "stall": Range(0.0, 0.95),
    "edge_factor": Range(1, 64),
    "partitions": Range(1, 1024),
    "vectors": Range(1, 100_000),
    "m": Range(1, 1024),
    "length": Range(1, 1 << 20),
    "hidden": Range(1, 4096),
    "epochs": Range(1, 10_000),
    "ops": Range(1000, 10**8),
    "nics": Range(1, 64),
    "conns": Range(1, 100_000),
    "gbps": Range(0.0, 10_000.0, lo_open=True),
    "rtt_us": Range(0.0, 1e6, lo_open=True),
    "burst": Range(1.0, 1e6),
    "reorder": PROB,
    "rto_us": Range(0.0, 1e7, lo_open=True),
    "flows": Range(1, 10**6),
    "duration_us": Range(0.0, 1e6, lo_open=True, note="one second of simulated time"),
    "pool_blocks": Range(1, 1 << 20),
    "block_bits": Range(1, 4096),
    "alpha": Range(0.0, 1.0),
    "levels": Range(1, 64),
    "gpus": Range(1, 65_536),
    "cluster speed gpus": Range(8, 65_536, note="a TP=8 job needs 8 GPUs"),
    "M": Range(1, 4096),
    "K": Range(1, 4096),
    "lanes": Range(0, 4096),
    "groups": Range(1, 4096),
    "sc_per_group": Range(1, 4096),
    "symbols_per_frame": Range(1, 1000),
    "frames": Range(1, 10_000),
    "snr_db": Range(-50.0, 100.0),
    "seconds": Range(1.0, 86_400.0),
    "source": Range(0, 1 << 40),
    "device_memory": Range(0.0, 1 << 20, lo_open=True, note="GiB"),
    "timeout": Range(0.0, 3600.0, lo_open=True),
    "steps": Range(1, 10**6),
    "easyscale steps": Range(3, 10**6),
    "lossy_gpu": Range(0, 65_535),
    "requests": Range(1, 10**6),
    "slo_us": Range(0.0, 1e9, lo_open=True),
    "keys_per_iter": Range(1, 10**6),
    "keys": Range(1, 10**7),
    "mem_latency": Range(1, 10_000),
    "graph tux2 staleness": Range(0, 1000, note="SSP bound; 0 is BSP"),
    "graph tux2 workers": Range(1, 4096, note="simulated workers = graph partitions"),
    "graph tux2 epochs": Range(1, 100_000),
    "graph tux2 batches": Range(1, 10**6, note="and at most the rows of the data"),
    "threads": Range(1, 1024, note="the command also caps it at 4 x the cores"),
    "graph compiled-bench repeats": Range(1, 100),
    "study seernet-timing repeats": Range(1, 100),
    "graph tux2-procs repeats": Range(1, 1000),
    "graph outofcore scale": Range(1, 26, note="R-MAT scale out of core: 2**26 vertices hold 2.7 GB of vectors in "
                                               "memory (over the default budget) and 1 G edges on disk"),
    "graph outofcore blocks": Range(1, 65_536, note="and at most the vertex count"),
    "graph outofcore iterations": Range(1, 10_000),
}

#: "COMMAND PATH dest" -> (item type, Range) of the options that take a comma-separated list of numbers
LISTS: dict[str, tuple[type, Range]] = {
    "build seeds": (int, Range(0, 2**31 - 1, note="1 to 16 seeds")),
    "study accuracy sparsities": (float, Range(0.0, 1.0, lo_open=True, hi_open=True)),
    "study oneshot sparsities": (float, Range(0.0, 1.0, lo_open=True, hi_open=True)),
    "study seernet bits": (int, Range(1, 8, note="a list 1,2,4 or a span 1-8")),
    "graph compiled-bench scales": (int, Range(8, 24, note="R-MAT scales")),
    "graph bench out_of_core_scales": (int, Range(8, 26, note="R-MAT scales out of core (disk: 5 GB at scale 24)")),
    "cosim melo flows": (int, Range(0, 10**6, note="flow indices")),
    "prune block": (int, Range(1, 65536, note="a block width N or a tile RxC")),
    "prune region": (int, Range(1, 65536, note="a region RxC")),
    "cluster trace seeds": (int, Range(0, 2**32 - 1, note="1 to 64 seeds")),
    "run rtl_layers": (int, Range(0, 10_000, note="linear layer indices of a compiled BERT encoder")),
}


def lookup(path: str, dest: str) -> Range | None:
    """The range of option ``dest`` of subcommand ``path`` (``"graph run"``), or None if not listed."""
    return RANGES.get(f"{path} {dest}") or RANGES.get(dest)


def _numeric_type(action: argparse.Action):
    """int or float for an option that takes one number, else None."""
    if not isinstance(action, argparse._StoreAction) or action.nargs not in (None, "?"):
        return None
    t = action.type
    if t in (int, float):
        return t
    if getattr(t, "numeric_kind", None) in (int, float):  # a checking converter that declares its kind
        return t.numeric_kind
    d = action.default
    if isinstance(d, int | float) and not isinstance(d, bool) and (t is None or callable(t)):
        return type(d)
    return None


def _actions(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(command path, action)`` of every option of ``parser`` and its subcommands."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _actions(sub, (*path, name))
        else:
            yield " ".join(path), a


def _checked_list(kind, rng: Range, option: str, orig=None):
    """Each comma-separated item (each end of an ``a-b`` span, each side of an ``RxC`` shape) checked like a
    single number; returns the text (or the option's own conversion of it)."""
    one = _checked(kind, rng, option)

    def convert(text: str):
        items = [x.strip() for x in str(text).split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"{option} {_shown(text)!r}: give comma-separated numbers in {rng.text()}")
        for item in items:
            ends = re.split(r"(?<=\d)[-x]", item) if kind is int else [item]
            for e in ends:
                one(e)
        return orig(text) if orig not in (None, str) else text

    convert.__name__ = f"list of {kind.__name__}"
    return convert


def _shown(text) -> str:
    """``text`` as echoed in a refusal: whole when short, else its start and its length (a refused value
    of thousands of characters must not become a line of thousands)."""
    text = str(text)
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text):,} characters)"


def _in_range(v, rng: Range, option: str, text: str):
    if not rng.holds(v):
        raise argparse.ArgumentTypeError(f"{option} {_shown(text)}: out of range; allowed {rng.text()}"
                                         + (f" ({rng.note})" if rng.note else ""))
    return v


def _checked(kind, rng: Range, option: str, orig=None):
    def convert(text: str):
        if orig not in (None, int, float):  # the option's own conversion first (it may check more)
            v = orig(text)
            if not isinstance(v, int | float) or isinstance(v, bool):
                return v
            return _in_range(v, rng, option, text)
        try:
            v = kind(text) if kind is float else int(str(text), 0)
        except (TypeError, ValueError):
            try:
                fv = float(text)
            except (TypeError, ValueError):
                raise argparse.ArgumentTypeError(f"{option} {_shown(text)!r}: not a number; give a {kind.__name__} in "
                                                 f"{rng.text()}") from None
            if kind is int and math.isfinite(fv) and fv.is_integer():
                v = int(fv)
            else:
                raise argparse.ArgumentTypeError(
                    f"{option} {_shown(text)!r}: give a whole number in {rng.text()}") from None
        return _in_range(v, rng, option, text)

    convert.__name__ = kind.__name__  # argparse names the type in its own messages
    return convert


def apply_ranges(parser: argparse.ArgumentParser) -> None:
    """Give every numeric option (and every list of numbers in :data:`LISTS`) its checked type and its range
    in the help text."""
    for path, action in _actions(parser):
        option = action.option_strings[-1] if action.option_strings else action.dest
        if (kind := _numeric_type(action)) is not None:
            rng = lookup(path, action.dest) or (DEFAULT_INT if kind is int else DEFAULT_FLOAT)
            action.type, note = _checked(kind, rng, option, action.type), f"[range {rng.text()}]"
        elif isinstance(action, argparse._StoreAction) and f"{path} {action.dest}" in LISTS:
            kind, rng = LISTS[f"{path} {action.dest}"]
            action.type, note = _checked_list(kind, rng, option, action.type), f"[each in {rng.text()}]"
        else:
            continue
        if action.help is not argparse.SUPPRESS:
            action.help = f"{action.help or ''} {note}".strip()
