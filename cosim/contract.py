"""Simulation contracts: how ``hwcosim sim DESIGN`` and :meth:`hwcosim.DesignHandle.simulate` run a design.

A registered design names its contract in :attr:`hwcosim.cosim.registry.Design.contract`
(``"module:attribute"`` of a :class:`SimContract` instance, kept in
``cosim/designs/<family>/contract.py``). The contract generates random but realistic stimulus
for a parameter set, computes the golden model's output words, runs the RTL through the design's
cocotb run function and compares every output word (:meth:`SimContract.compare`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SimContract", "RTLOutputs"]


class RTLOutputs(dict):
    """The RTL's output words of one simulation, by stream name (a dict of integer arrays).

    Attributes
    ----------
    passed : bool
        The testbench's own checks passed (its word comparison against the golden model computed
        by the run function, its protocol, counter and status checks).
    failure : str
        The testbench's failure message (with the simulator log's tail) when ``passed`` is False.
    test_dir : pathlib.Path
        The run's folder (stimulus, log, metrics, outputs).
    metrics : dict
        What the testbench measured (cycles, counters, ...).
    sim : str
        The simulator (``verilator`` or ``icarus``).
    """

    def __init__(self, words: dict, *, passed: bool = True, failure: str = "", test_dir: Path | None = None,
                 metrics: dict | None = None, sim: str = "", waves: Path | None = None):
        super().__init__(words)
        self.passed = passed
        self.failure = failure
        self.test_dir = test_dir
        self.metrics = dict(metrics or {})
        self.sim = sim
        self.waves = waves


class SimContract:
    """How to simulate one registered design against its golden model.

    A design's contract (named by :attr:`Design.contract`) generates random but realistic
    stimulus for a parameter set, computes the golden model's output words, runs the RTL (its
    cocotb run function) and compares every output word. Outputs are dicts of integer arrays keyed
    by stream name; :meth:`golden` and :meth:`rtl` use the same keys.

    Subclasses implement :meth:`stimulus`, :meth:`golden` and :meth:`rtl`; :meth:`compare` is shared.
    """

    #: the registry name of the design this contract simulates
    design: str = ""

    def stimulus(self, params: Any, seed: int = 0, **kw) -> dict:
        """Random stimulus for ``params`` (a dict of numpy arrays), deterministic for ``seed``."""
        raise NotImplementedError

    def golden(self, params: Any, stimulus: dict) -> dict:
        """The golden model's output words for ``stimulus`` (a dict of integer arrays)."""
        raise NotImplementedError

    def rtl(self, params: Any, stimulus: dict, *, sim: str | None = None, test_dir: str | os.PathLike | None = None,
            waves: bool | None = None) -> RTLOutputs:
        """Simulate the RTL on ``stimulus``; its output words (an :class:`RTLOutputs`)."""
        raise NotImplementedError

    def seal(self, run_dir: Path) -> bool:
        """Make ``run_dir`` (the RTL run's folder) a run folder ``hwcosim check`` re-verifies, when the
        design's ``recheck`` reads this layout; True when it did."""
        return False

    def compare(self, got: dict, want: dict) -> dict:
        """Every output word of ``got`` (RTL) against ``want`` (golden), stream by stream.

        Returns :func:`hwcosim.cosim.flow.runs.merge_diffs`' record (``words``, ``rtl_words``,
        ``mismatches``, ``first``, ``mismatch_list``; positions prefixed by the stream name) plus
        ``streams``: ``{name: {"words": n, "mismatches": m}}``.
        """
        import numpy as np
        from hwcosim.cosim.flow.runs import merge_diffs, word_diff

        diffs, streams = [], {}
        for key in want:
            d = word_diff(got[key] if key in got else np.zeros(0, dtype=np.int64), want[key], labels=(key,))
            diffs.append(d)
            streams[key] = {"words": d["words"], "mismatches": d["mismatches"]}
        res = merge_diffs(diffs)
        res["streams"] = streams
        return res

    # ---- helpers for subclasses -------------------------------------------------------------
    @staticmethod
    def ints(words) -> Any:
        """Words as an integer array: int64 when every word fits, else Python ints (``dtype=object``);
        decimal strings (how run folders keep words wider than 64 bits) are converted."""
        import numpy as np

        a = np.asarray(words)
        if a.dtype.kind in "USO":
            vals = [int(str(w)) for w in a.reshape(-1)]
            if all(-(1 << 63) <= v < (1 << 63) for v in vals):
                return np.asarray(vals, dtype=np.int64).reshape(a.shape)
            return np.asarray(vals, dtype=object).reshape(a.shape)
        return a

    @classmethod
    def shaped(cls, words, shape: tuple) -> Any:
        """:meth:`ints` of ``words``, reshaped to ``shape`` when the count fits (else flat: the
        comparison then counts the missing or extra words)."""
        import math

        a = cls.ints(words)
        return a.reshape(shape) if a.size == math.prod(shape) else a.reshape(-1)

    @staticmethod
    def run_dir(test_dir: str | os.PathLike | None, name: str) -> Path:
        """``test_dir``, or a fresh folder under ``<build root>/sim/runs``."""
        import tempfile

        from hwcosim.cosim.flow.runner import build_root

        if test_dir is not None:
            return Path(test_dir)
        runs = build_root() / "sim" / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=runs))

    @staticmethod
    def collect(run: Callable[[], Any], test_dir: Path, words: Callable[[dict, dict], dict]) -> RTLOutputs:
        """Call ``run()`` (a cocotb run function writing into ``test_dir``), keeping a testbench failure
        as evidence instead of raising it; ``words(outputs, metrics)`` picks the RTL's output words from
        the run's ``outputs.npz`` and ``metrics.json``. Raises :class:`~hwcosim.models.errors.CheckFailed`
        when the run left no output words (the simulation failed before it compared them)."""
        import json

        from hwcosim.cosim.flow.runner import SimFailure
        from hwcosim.cosim.flow.runs import read_npz
        from hwcosim.models.errors import CheckFailed

        res, failure = None, ""
        try:
            res = run()
            if res is not None and not res.passed:
                failure = f"{res.n_failed} of {res.n_tests} cocotb tests failed (log {res.log})"
        except SimFailure as e:
            failure = str(e)
        test_dir = Path(res.test_dir) if res is not None else Path(test_dir).resolve()
        outputs = read_npz(test_dir / "outputs.npz") if (test_dir / "outputs.npz").is_file() else {}
        metrics = json.loads((test_dir / "metrics.json").read_text()) if (test_dir / "metrics.json").is_file() else {}
        try:
            got = words(outputs, metrics)
        except (KeyError, ValueError) as e:
            tail = failure.strip().splitlines()[-1] if failure.strip() else ""
            raise CheckFailed(f"the simulation in {test_dir} left no RTL output words ({e}); it failed before "
                              f"it compared them: {tail or 'see sim.log'}") from None
        return RTLOutputs(got, passed=not failure, failure=failure, test_dir=test_dir, metrics=metrics,
                          sim=res.sim if res is not None else "", waves=res.waves if res is not None else None)
