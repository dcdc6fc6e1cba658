"""Downlink channels of a uniform linear array (ULA) over OFDM subcarriers, seeded.

Context: Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed
Precoders", IEEE Trans. Mobile Computing 18(5):1014-1027, 2019. The paper's channel equations
were not available to us *(unconfirmed)*; everything below is derived from first principles and
the choices that are ours are marked **ours**.

Geometry and conventions
------------------------
- ``M`` antennas on a line, half-wavelength spacing. A plane wave leaving at angle ``theta``
  from broadside has spatial frequency ``u = sin(theta)`` in [-1, 1) and phase ``pi * m * u``
  at antenna ``m``. The steering vector is ``a(u)[m] = exp(1j * pi * m * u)`` (not normalised).
- Downlink: user ``k`` receives ``y_k = h_k @ x + n_k`` with ``h_k`` a row of ``H`` (K x M) and
  ``x`` the transmit vector. A path at spatial frequency ``u`` contributes
  ``g * conj(a(u))``, so that the matched beam ``a(u) / sqrt(M)`` gives gain ``g * sqrt(M)``.
- OFDM: subcarrier ``f`` (of ``n_sc``, spacing ``df``) sees path delay ``tau`` as the phase
  ``exp(-2j pi f df tau)``; delays are drawn in units of the sample time ``1 / (n_sc df)``.

Models
------
- :func:`geometric`: each user has ``paths`` paths clustered around a user direction drawn
  uniformly in the sector ``[-sector, +sector]`` degrees; path angles are the user direction plus
  Gaussian spread ``spread_deg`` (**ours**); the first path carries ``los_fraction`` of the power
  (a Rician-like dominant path, **ours**), the others share the rest with circular Gaussian
  gains; delays are uniform in ``[0, max_delay)`` samples (the first path at 0). Average power
  per antenna per user is 1.
- :func:`rayleigh`: i.i.d. CN(0, 1) entries, independent per subcarrier (the textbook model
  behind the ZF closed form, used for contrast and as a check).

All functions return complex128 arrays of shape ``(n_sc, K, M)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["ChannelParams", "steering", "geometric", "rayleigh", "make_channel"]


def steering(M: int, u) -> np.ndarray:
    """ULA steering vectors ``exp(1j*pi*m*u)``: shape ``(..., M)`` for ``u`` of shape ``(...)``."""
    u = np.asarray(u, dtype=np.float64)
    return np.exp(1j * np.pi * np.arange(M) * u[..., None])


@dataclass(frozen=True)
class ChannelParams:
    """One channel draw: array size, users, subcarriers and the multipath geometry.

    Parameters
    ----------
    M : int
        Antennas (>= 2).
    K : int
        Users (1 <= K <= M).
    n_sc : int
        OFDM subcarriers (>= 1).
    kind : str
        ``"geometric"`` (few paths per user) or ``"rayleigh"`` (i.i.d.).
    paths : int
        Paths per user (geometric).
    spread_deg : float
        Angular spread of a user's paths around its direction, degrees (geometric).
    sector_deg : float
        User directions are uniform in [-sector, +sector] degrees (< 90).
    los_fraction : float
        Power fraction of the first path, in [0, 1] (geometric).
    max_delay : float
        Path delays uniform in [0, max_delay) samples (geometric; frequency selectivity).
    seed : int
        Seed of the draw.
    """

    M: int = 64
    K: int = 8
    n_sc: int = 16
    kind: str = "geometric"
    paths: int = 4
    spread_deg: float = 4.0
    sector_deg: float = 60.0
    los_fraction: float = 0.7
    max_delay: float = 8.0
    seed: int = 0

    def __post_init__(self):
        for name in ("M", "K", "n_sc", "paths"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise UsageError(f"channel {name} must be a positive integer, not {v!r}")
        if self.M < 2:
            raise UsageError(f"channel M={self.M}: an array needs at least 2 antennas")
        if self.K > self.M:
            raise UsageError(f"channel K={self.K} users exceed M={self.M} antennas; use K <= M")
        if self.kind not in ("geometric", "rayleigh"):
            raise UsageError(f"channel kind {self.kind!r} is unknown; use 'geometric' or 'rayleigh'")
        if not 0.0 < self.sector_deg < 90.0:
            raise UsageError(f"sector_deg={self.sector_deg} must lie in (0, 90)")
        if not 0.0 <= self.los_fraction <= 1.0:
            raise UsageError(f"los_fraction={self.los_fraction} must lie in [0, 1]")
        if self.spread_deg < 0 or self.max_delay < 0:
            raise UsageError(f"spread_deg={self.spread_deg} and max_delay={self.max_delay} must be >= 0")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise UsageError(f"seed must be a non-negative integer, not {self.seed!r}")


def geometric(p: ChannelParams, rng: np.random.Generator | None = None) -> np.ndarray:
    """Geometric multipath channel, shape ``(n_sc, K, M)``; see the module notes."""
    rng = np.random.default_rng(p.seed) if rng is None else rng
    K, P = p.K, p.paths
    centre = rng.uniform(-p.sector_deg, p.sector_deg, size=(K, 1))
    ang = centre + rng.normal(0.0, p.spread_deg, size=(K, P))
    ang[:, :1] = centre  # the dominant path points at the user direction
    u = np.sin(np.deg2rad(np.clip(ang, -89.0, 89.0)))  # (K, P)
    if P == 1:
        power = np.ones((1,))
    else:
        power = np.concatenate([[p.los_fraction], np.full(P - 1, (1 - p.los_fraction) / (P - 1))])
    g = np.sqrt(power / 2) * (rng.standard_normal((K, P)) + 1j * rng.standard_normal((K, P)))
    g[:, 0] = np.sqrt(power[0]) * np.exp(2j * np.pi * rng.uniform(size=K))  # deterministic LoS amplitude
    tau = rng.uniform(0.0, p.max_delay, size=(K, P))
    tau[:, 0] = 0.0
    f = np.arange(p.n_sc) / p.n_sc  # subcarrier frequency in units of the sample rate
    phase = np.exp(-2j * np.pi * f[:, None, None] * tau[None])  # (n_sc, K, P)
    a = np.conj(steering(p.M, u))  # (K, P, M)
    return np.einsum("skp,kpm->skm", phase * g[None], a)


def rayleigh(p: ChannelParams, rng: np.random.Generator | None = None) -> np.ndarray:
    """i.i.d. Rayleigh channel: CN(0, 1) entries, shape ``(n_sc, K, M)``."""
    rng = np.random.default_rng(p.seed) if rng is None else rng
    shape = (p.n_sc, p.K, p.M)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2)


def make_channel(p: ChannelParams) -> np.ndarray:
    """The channel ``p`` describes, shape ``(n_sc, K, M)``."""
    return geometric(p) if p.kind == "geometric" else rayleigh(p)
