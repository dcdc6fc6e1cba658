"""Training jobs: DP x TP x PP on a GPU placement, one iteration = compute then communication.

An iteration is bulk-synchronous. By default nothing overlaps (ASTRA-sim's "no overlap" mode; an
upper bound on exposed communication, and what Crux's intensity and C4's iteration time are
measured against):

1. compute for ``compute_s`` (forward + backward of all micro-batches, pipeline bubble included);
2. if ``a2a_bytes > 0`` and ``dp > 1``: MoE all-to-all of ``a2a_bytes`` per rank within every DP
   group (expert parallelism over the DP dimension, EP = DP, as DeepSpeed-MoE does);
3. if ``pp > 1``: pipeline P2P, every stage boundary of every DP replica and TP rank sends
   ``act_bytes`` forward (activations) and ``act_bytes`` backward (gradients), concurrently;
4. if ``tp > 1`` and ``tp_bytes > 0``: TP ring all-reduce within every TP group (NVLink when the
   group is inside a host);
5. if ``dp > 1``: DP all-reduce of ``grad_bytes`` per rank within every DP group (one group per
   (stage, TP rank); ring or tree).

**Overlap.** With ``overlap = f > 0`` the DP all-reduce is launched when a fraction ``1 - f`` of
the compute has run and proceeds beside the last ``f * compute_s`` (the backward pass, where
PyTorch DDP / Megatron bucket gradients and all-reduce them as they are produced); the steps are
then compute ``(1 - f) c``, [DP all-reduce || compute ``f c``], all-to-all, PP, TP. Alone on the
network an iteration takes ``(1 - f) c + max(f c, T_dp) + T_rest``: the exposed DP time is
``max(0, T_dp - f c)``. Simplification: the all-reduce may start as soon as the window opens
(gradient buckets are not modelled), and the rest follows the all-reduce.

Rank order is Megatron-LM's (TP fastest, then DP, then PP): GPU list index
``k = (stage * dp + d) * tp + t``; :func:`placement` maps a GPU list to the (pp, dp, tp) array.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

from .collectives import Collective, alltoall, p2p, ring_allreduce, tree_allreduce

__all__ = ["JobSpec", "Compute", "Comm", "placement"]


@dataclass(frozen=True)
class Compute:
    """A compute step of ``seconds``."""

    seconds: float


@dataclass(frozen=True, eq=False)
class Comm:
    """A communication step: its collectives run concurrently; ``label`` names it (dp, pp, tp, ep).

    ``compute_s`` > 0: compute of that many seconds runs beside the collectives (overlap); the step
    ends when both are done.
    """

    label: str
    collectives: tuple[Collective, ...]
    compute_s: float = 0.0


@dataclass(frozen=True)
class JobSpec:
    """One training job.

    Parameters
    ----------
    name : str
    dp, tp, pp : int
        Data-, tensor- and pipeline-parallel degrees; GPUs = dp * tp * pp.
    compute_s : float
        Compute time per iteration per GPU (seconds).
    grad_bytes : float
        DP all-reduce size per rank per iteration (bytes; parameters / (tp * pp) * bytes/param).
    act_bytes : float
        PP bytes per stage boundary per direction per iteration per TP rank.
    tp_bytes : float
        TP all-reduce bytes per iteration per rank.
    iterations : int
        Iterations to run (the job then ends).
    channels : int
        Rings per collective (NCCL channels).
    algo : {"ring", "tree"}
        DP all-reduce algorithm.
    alpha_s : float
        Per-step latency of collectives (alpha of the alpha-beta model).
    a2a_bytes : float
        MoE all-to-all bytes per rank per iteration within every DP group (0: none).
    overlap : float
        Fraction in [0, 1] of the compute that the DP all-reduce may run beside (module docstring).
    """

    name: str
    dp: int
    tp: int = 1
    pp: int = 1
    compute_s: float = 0.1
    grad_bytes: float = 0.0
    act_bytes: float = 0.0
    tp_bytes: float = 0.0
    iterations: int = 10
    channels: int = 1
    algo: str = "ring"
    alpha_s: float = 5e-6
    a2a_bytes: float = 0.0
    overlap: float = 0.0

    def __post_init__(self):
        for n in ("dp", "tp", "pp", "iterations", "channels"):
            v = getattr(self, n)
            if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1):
                raise UsageError(f"job {self.name!r}: {n} must be an integer >= 1, not {v!r}")
        if not self.compute_s >= 0:
            raise UsageError(f"job {self.name!r}: compute_s must be >= 0, not {self.compute_s!r}")
        if not 0.0 <= self.overlap <= 1.0:
            raise UsageError(f"job {self.name!r}: overlap must be in [0, 1], not {self.overlap!r}")
        for n in ("grad_bytes", "act_bytes", "tp_bytes", "alpha_s", "a2a_bytes"):
            if not getattr(self, n) >= 0:
                raise UsageError(f"job {self.name!r}: {n} must be >= 0, not {getattr(self, n)!r}")
        if self.algo not in ("ring", "tree"):
            raise UsageError(f"job {self.name!r}: algo must be 'ring' or 'tree', not {self.algo!r}")

    @property
    def n_gpus(self) -> int:
        return self.dp * self.tp * self.pp

    def steps(self, place: np.ndarray) -> list[Compute | Comm]:
        """The steps of one iteration on placement ``place`` (shape (pp, dp, tp) of GPU ids)."""
        place = np.asarray(place, dtype=np.int64)
        if place.shape != (self.pp, self.dp, self.tp):
            raise UsageError(f"job {self.name!r}: placement shape must be {(self.pp, self.dp, self.tp)}, "
                             f"not {place.shape}")
        dp_step = None
        if self.dp > 1 and self.grad_bytes > 0:
            fn = ring_allreduce if self.algo == "ring" else tree_allreduce
            colls = [fn(place[s, :, t], self.grad_bytes, self.channels, self.alpha_s)
                     for s in range(self.pp) for t in range(self.tp)]
            dp_step = tuple(colls)
        hidden = self.overlap * self.compute_s if dp_step is not None else 0.0
        out: list[Compute | Comm] = [Compute(self.compute_s - hidden)]
        if hidden > 0:
            out.append(Comm("dp", dp_step, compute_s=hidden))
        if self.dp > 1 and self.a2a_bytes > 0:
            out.append(Comm("ep", tuple(alltoall(place[s, :, t], self.a2a_bytes, self.channels, self.alpha_s)
                                        for s in range(self.pp) for t in range(self.tp))))
        if self.pp > 1 and self.act_bytes > 0:
            colls = []
            for s in range(self.pp - 1):
                for a, b in zip(place[s].ravel().tolist(), place[s + 1].ravel().tolist()):
                    colls.append(p2p(a, b, self.act_bytes, self.channels, self.alpha_s))
                    colls.append(p2p(b, a, self.act_bytes, self.channels, self.alpha_s))
            out.append(Comm("pp", tuple(colls)))
        if self.tp > 1 and self.tp_bytes > 0:
            colls = [ring_allreduce(place[s, d], self.tp_bytes, self.channels, self.alpha_s)
                     for s in range(self.pp) for d in range(self.dp)]
            out.append(Comm("tp", tuple(colls)))
        if dp_step is not None and hidden == 0:
            out.append(Comm("dp", dp_step))
        return out


def placement(job: JobSpec, gpus) -> np.ndarray:
    """Map a GPU list (Megatron rank order: TP fastest, then DP, then PP) to shape (pp, dp, tp)."""
    g = np.asarray(gpus, dtype=np.int64).ravel()
    if g.size != job.n_gpus:
        raise UsageError(f"job {job.name!r} needs {job.n_gpus} GPUs, got {g.size}")
    if np.unique(g).size != g.size:
        raise UsageError(f"job {job.name!r}: placement repeats a GPU")
    return g.reshape(job.pp, job.dp, job.tp)
