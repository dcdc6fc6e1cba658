"""BeamRaster precoding and its baselines (zero-forcing, MMSE, conjugate/MRT, plain codebook).

Meng et al., "BeamRaster: A Practical Fast Massive MU-MIMO System With Pre-Computed Precoders",
IEEE Trans. Mobile Computing 18(5):1014-1027, 2019. The paper's equations were not available to
us *(unconfirmed)*; this is our derivation from ULA steering vectors and DFT beams. Choices that
are ours are marked **ours**.

Shapes: channels ``H`` are ``(S, K, M)`` (S subcarriers, K users, M antennas), precoders ``W``
are ``(S, M, K)`` with ``x = W @ s`` for unit-power user symbols ``s``.

Power rule (all precoders, **ours**, the textbook equal-power rule): every column of ``W`` has
power ``1/K``, so the total transmit power is 1 and the noise power at a receiver is
``1 / snr``. For zero-forcing on i.i.d. Rayleigh channels this gives each user the gain
``X / K`` with ``X ~ Gamma(M - K + 1, 1)``, whence the closed form :func:`zf_sum_rate_closed_form`.

BeamRaster, as we build it
--------------------------
1. **Beam filter bank** (pre-computed, angle domain): the ``M`` DFT beams
   ``w_b[m] = exp(2j pi m (b - M/2) / M) / sqrt(M)``, i.e. the normalised steering vector
   ``a(u_b) / sqrt(M)`` at the grid ``u_b = 2 (b - M/2) / M``. They are orthonormal, and
   every coefficient is an ``M``-th root of unity, so the whole bank is one table of ``M``
   twiddles (what the RTL stores).
2. **Grating table** (**ours**: a user x beam gain table): ``T = H @ F``, the complex gain of
   every user on every beam (``(S, K, M)``), computed with one length-``M`` FFT per user and
   subcarrier. The paper's grating table tracks cross-beam correlation; ours stores the
   user-by-beam gains from which that correlation follows for any beam set: with the selected
   beams ``G = T[:, :, beams]`` (``K x K`` per subcarrier, :meth:`GratingTable.correlation`) is
   the gain of each user on every selected beam, i.e. how much each beam leaks into every other
   selected user. When users move only their rows are recomputed (:class:`GratingTable`), so
   an update costs ``S (M/2) log2 M`` multiplies per *changed* user. A user's power sits on the
   beams next to its path directions; off-grid paths leak into side lobes (Dirichlet kernel).
3. **Interference-aware user-beam selection** (greedy, **ours**): users in descending order of
   their strongest beam power (wideband, averaged over subcarriers) each take the unused beam
   maximising ``P[k, b] / (sigma^2 + sum_j P[k, b_j] + sum_j P[j, b])`` over the users ``j``
   already placed: own power over the leakage it receives from, and causes to, them.
4. **Side-lobe pre-distortion**: with the selected beams the users see the ``K x K`` matrix
   ``G = T[:, :, beams]`` (diagonal ``D``: own beam; off-diagonal ``O``: side-lobe and multipath
   residue). The symbols are pre-distorted by ``P`` so that ``G @ P`` is near diagonal:
   ``order = n`` uses the Neumann series ``P = sum_{i<=n} (-D^-1 O)^i D^-1`` (residue
   ``D (D^-1 O)^{n+1} D^-1``: order 1 costs ``K^2`` multiplies, **ours**); ``order = None`` uses
   ``G^-1`` (exact cancellation, ``K^3``). Columns are then scaled to power ``1/K``.
   The transmit vector is ``x = F[:, beams] @ (P @ s)``: a K x K product and a K-beam
   synthesis, the datapath of :mod:`hwcosim.models.beamraster.datapath`.

The plain **codebook** baseline gives each user its strongest beam (collisions allowed), no
pre-distortion. ZF, MMSE and MRT (conjugate) are the textbook linear precoders on the full
``M``-antenna channel.
"""

from __future__ import annotations

import math

import numpy as np
from hwcosim.models.errors import UsageError

__all__ = ["dft_beams", "beam_grid", "grating_table", "GratingTable", "select_beams", "strongest_beams",
           "predistortion", "normalise_columns", "zf", "mmse", "mrt", "codebook", "beamraster",
           "beamraster_coefficients", "PRECODERS", "sinr", "sum_rate", "zf_sum_rate_closed_form", "update_cost",
           "COUNTING_RULE"]


def beam_grid(M: int) -> np.ndarray:
    """Spatial frequencies ``u_b = 2 (b - M//2) / M`` of the DFT beams, shape ``(M,)``."""
    return 2.0 * (np.arange(M) - M // 2) / M


def dft_beams(M: int) -> np.ndarray:
    """The beam filter bank ``F`` (M x M, orthonormal columns): ``F[m, b] = a(u_b)[m] / sqrt(M)``."""
    m = np.arange(M)[:, None]
    return np.exp(2j * np.pi * m * (np.arange(M)[None, :] - M // 2) / M) / math.sqrt(M)


def grating_table(H: np.ndarray) -> np.ndarray:
    """``T = H @ F`` by FFT: ``(..., K, M)`` -> ``(..., K, M)``, beam index last.

    ``T[k, b] = sum_m h[k, m] exp(2j pi m (b - M/2) / M) / sqrt(M)`` is ``M / sqrt(M)`` times
    the inverse DFT of ``h`` at bin ``(b - M/2) mod M``. Cost: ``(M/2) log2 M`` complex
    multiplies per user (radix-2).
    """
    M = H.shape[-1]
    return np.roll(np.fft.ifft(H, axis=-1), M // 2, axis=-1) * math.sqrt(M)


class GratingTable:
    """The grating table (user x beam gains) kept up to date as channels change, one user at a time.

    Parameters
    ----------
    H : complex array (S, K, M)
        Initial channels.

    Attributes
    ----------
    T : complex array (S, K, M)
        Current user-by-beam gains ``H @ F``.
    updates : int
        User rows computed so far, the initial ``K`` included (each costs ``S`` FFTs of length
        ``M``); a full recompute per update would add ``K`` every time.
    """

    def __init__(self, H: np.ndarray):
        self.H = np.array(H, dtype=np.complex128)
        self.T = grating_table(self.H)
        self.updates = self.T.shape[1]

    def update(self, H_new: np.ndarray, users=None) -> np.ndarray:
        """Recompute the rows of ``users`` from ``H_new``; returns the users updated.

        ``users=None``: the users whose channel differs from the stored one (found by comparing
        channels, no transform), so the FFT work scales with the number of changed users.
        """
        H_new = np.asarray(H_new, dtype=np.complex128)
        if H_new.shape != self.T.shape:
            raise UsageError(f"channel shape {H_new.shape} differs from the table's {self.T.shape}")
        if users is None:
            users = np.flatnonzero(np.any(H_new != self.H, axis=(0, 2)))
        else:
            users = np.atleast_1d(np.asarray(users, dtype=np.int64))
        if len(users) == self.T.shape[1]:
            self.H[...] = H_new
            self.T = grating_table(self.H)
        elif len(users):
            self.H[:, users] = H_new[:, users]
            self.T[:, users] = grating_table(self.H[:, users])
        self.updates += len(users)
        return users

    def copy(self) -> GratingTable:
        """An independent copy (same channels, table and update count)."""
        c = GratingTable.__new__(GratingTable)
        c.H, c.T, c.updates = self.H.copy(), self.T.copy(), self.updates
        return c

    def correlation(self, beams) -> np.ndarray:
        """Cross-beam gains ``G = T[:, :, beams]`` (S, K, K): user ``k``'s gain on user ``j``'s beam."""
        return self.T[..., np.asarray(beams, dtype=np.int64)]

    def power(self) -> np.ndarray:
        """Wideband beam power ``mean_s |T|^2``, shape ``(K, M)``."""
        return np.mean(np.abs(self.T) ** 2, axis=0)


def strongest_beams(power: np.ndarray) -> np.ndarray:
    """Codebook selection: each user's strongest beam (collisions allowed), shape ``(K,)``."""
    return np.argmax(power, axis=-1)


def select_beams(power: np.ndarray, noise: float = 0.0) -> np.ndarray:
    """Interference-aware greedy user-beam selection (distinct beams), shape ``(K,)``.

    Parameters
    ----------
    power : array (K, M)
        Wideband user-beam power from the grating table.
    noise : float
        Noise power ``sigma^2`` (``1/snr``) in the score's denominator.
    """
    power = np.asarray(power, dtype=np.float64)
    K, M = power.shape
    if K > M:
        raise UsageError(f"cannot give {K} users distinct beams out of {M}")
    beams = np.full(K, -1, dtype=np.int64)
    leak_to_new = np.zeros(M)           # sum over placed users j of P[j, b]: what beam b would leak to them
    used = np.zeros(M, dtype=bool)
    placed: list[int] = []
    for k in np.argsort(-power.max(axis=1), kind="stable"):
        recv = power[k, beams[placed]].sum() if placed else 0.0   # leakage k receives from placed beams
        score = power[k] / (noise + recv + leak_to_new + 1e-300)
        score[used] = -np.inf
        b = int(np.argmax(score))
        beams[k], used[b] = b, True
        leak_to_new += power[k]
        placed.append(int(k))
    return beams


def normalise_columns(W: np.ndarray) -> np.ndarray:
    """Scale every column of ``W`` (..., M, K) to power ``1 / K``."""
    K = W.shape[-1]
    n = np.linalg.norm(W, axis=-2, keepdims=True)
    return W / np.where(n > 0, n, 1.0) / math.sqrt(K)


def predistortion(G: np.ndarray, order: int | None = 1) -> np.ndarray:
    """Pre-distortion matrices ``P`` (S, K, K) for effective beam channels ``G`` (S, K, K).

    ``order=None``: ``G^-1``; ``order=n >= 0``: Neumann series of ``n + 1`` terms (see module).
    Columns are not normalised here.
    """
    G = np.asarray(G, dtype=np.complex128)
    if order is None:
        return np.linalg.inv(G)
    if not isinstance(order, (int, np.integer)) or order < 0:
        raise UsageError(f"pre-distortion order must be a non-negative integer or None (exact), not {order!r}")
    d = np.diagonal(G, axis1=-2, axis2=-1)
    dinv = np.where(np.abs(d) > 0, 1.0 / np.where(d == 0, 1, d), 0.0)
    K = G.shape[-1]
    A = dinv[..., :, None] * (G - d[..., :, None] * np.eye(K))  # D^-1 O: K^2 multiplies
    P = dinv[..., :, None] * np.eye(K)                            # D^-1
    if order >= 1:
        term = -A * dinv[..., None, :]                            # -(D^-1 O) D^-1: a column scaling, K^2
        P = P + term
        for _ in range(order - 1):
            term = -A @ term                                      # higher powers: K^3 each
            P = P + term
    return P


def zf(H: np.ndarray, snr: float | None = None) -> np.ndarray:
    """Zero-forcing ``H^H (H H^H)^-1``, equal power per user."""
    Hh = np.conj(np.swapaxes(H, -1, -2))
    return normalise_columns(Hh @ np.linalg.inv(H @ Hh))


def mmse(H: np.ndarray, snr: float) -> np.ndarray:
    """Regularised ZF / MMSE ``H^H (H H^H + (K / snr) I)^-1``, equal power per user."""
    K = H.shape[-2]
    Hh = np.conj(np.swapaxes(H, -1, -2))
    return normalise_columns(Hh @ np.linalg.inv(H @ Hh + (K / snr) * np.eye(K)))


def mrt(H: np.ndarray, snr: float | None = None) -> np.ndarray:
    """Conjugate beamforming (maximum-ratio transmission) ``H^H``, equal power per user."""
    return normalise_columns(np.conj(np.swapaxes(H, -1, -2)))


def codebook(H: np.ndarray, snr: float | None = None, T: np.ndarray | None = None) -> np.ndarray:
    """Plain codebook precoding: each user's strongest DFT beam (wideband), no pre-distortion."""
    T = grating_table(H) if T is None else T
    beams = strongest_beams(np.mean(np.abs(T) ** 2, axis=0))
    F = dft_beams(H.shape[-1])
    return np.broadcast_to(F[:, beams] / math.sqrt(H.shape[-2]), (H.shape[0],) + (H.shape[-1], H.shape[-2]))


def beamraster(H: np.ndarray, snr: float, order: int | None = 1, T: np.ndarray | None = None,
               return_parts: bool = False):
    """BeamRaster precoder ``W = F[:, beams] @ P`` (S, M, K); see the module notes.

    With ``return_parts`` also returns ``beams`` (K,) and the column-normalised ``P`` (S, K, K).
    """
    T = grating_table(H) if T is None else T
    beams = select_beams(np.mean(np.abs(T) ** 2, axis=0), noise=1.0 / snr)
    P = beamraster_coefficients(T, beams, order)
    W = dft_beams(H.shape[-1])[:, beams] @ P
    return (W, beams, P) if return_parts else W


def beamraster_coefficients(T: np.ndarray, beams: np.ndarray, order: int | None = 1) -> np.ndarray:
    """Per-update BeamRaster work after the grating table: column-normalised ``P`` (S, K, K).

    ``G = T[..., beams]`` is user ``k``'s gain on user ``j``'s beam; ``P`` pre-distorts it
    (the DFT beams are orthonormal, so the column power of ``W = F[:, beams] P`` is that of ``P``).
    ``P`` and ``beams`` are what the datapath loads: ``W`` itself is never formed.
    """
    return normalise_columns(predistortion(T[..., beams], order))


PRECODERS = {"zf": zf, "mmse": mmse, "mrt": mrt, "codebook": codebook, "beamraster": beamraster}


def sinr(H: np.ndarray, W: np.ndarray, snr: float, distortion: np.ndarray | None = None) -> np.ndarray:
    """Per-user SINR ``(S, K)`` for unit-power symbols, total power 1, noise ``1/snr``.

    ``distortion`` (S, K), optional: extra noise power at each receiver (e.g. fixed-point error).
    """
    HW = H @ W
    p = np.abs(HW) ** 2
    sig = np.diagonal(p, axis1=-2, axis2=-1)
    interf = p.sum(axis=-1) - sig
    extra = 0.0 if distortion is None else distortion
    return sig / (interf + 1.0 / snr + extra)


def sum_rate(H: np.ndarray, W: np.ndarray, snr: float, distortion: np.ndarray | None = None) -> float:
    """Sum rate in bit/s/Hz, averaged over subcarriers."""
    return float(np.mean(np.sum(np.log2(1.0 + sinr(H, W, snr, distortion)), axis=-1)))


def zf_sum_rate_closed_form(M: int, K: int, snr: float) -> float:
    """Expected ZF sum rate (equal power) on i.i.d. CN(0,1) channels, bit/s/Hz.

    User gain ``X / K`` with ``X ~ Gamma(n = M - K + 1, 1)``; for integer ``n``,
    ``E[ln(1 + a X)] = exp(1/a) sum_{i=1}^{n} E_i(1/a)`` (exponential integrals, from
    integrating by parts), with ``a = snr / K``.
    """
    from scipy.special import expn

    if not 1 <= K <= M:
        raise UsageError(f"ZF needs 1 <= K <= M, got K={K}, M={M}")
    a = snr / K
    n = M - K + 1
    z = 1.0 / a
    if z < 700:
        s = sum(expn(i, z) * math.exp(z) for i in range(1, n + 1))
    else:  # exp(z) E_i(z) ~ 1 / (z + i - 1) for large z (tiny SNR), avoiding exp overflow
        s = sum(1.0 / (z + i - 1) for i in range(1, n + 1))
    return K * s / math.log(2)


#: The counting rule of :func:`update_cost` (also written into the study's JSON).
COUNTING_RULE = (
    "cmul_per_update = complex multiplies per subcarrier to turn a new channel estimate into the coefficients the "
    "method's datapath loads: ZF/MMSE form W = H^H (H H^H)^-1 (M x K, included: Gram K^2 M, inverse K^3, "
    "product M K^2, column norms M K); MRT forms W = H^H (column norms M K); codebook: the grating table "
    "(K FFTs of M points, (M/2) log2 M each); BeamRaster: the grating table plus the K x K pre-distortion P "
    "(order 1: D^-1 O, (D^-1 O) D^-1 and column norms, 3 K^2; exact: inverse K^3 plus norms K^2). "
    "BeamRaster never forms W: its datapath applies P (K^2) and synthesises the K DFT beams from the "
    "pre-computed twiddle table (K M) per subcarrier-symbol, versus K M for a loaded W "
    "(datapath_cmul_per_symbol). ops_per_frame = wideband user-beam selection (real operations, once per "
    "frame, not per subcarrier): codebook K M compares, BeamRaster ~4 K M (score, compare, leakage sums). "
    "Divisions and |.|^2 of the wideband beam power are not counted.")


def update_cost(method: str, M: int, K: int, order: int | None = 1) -> dict:
    """Complex multiplies per subcarrier per precoder update (our operation counts).

    ``cmul_per_update``: what must be redone whenever the channel changes (see
    :data:`COUNTING_RULE`); ``ops_per_frame``: wideband beam selection, real operations once per
    frame; ``datapath_cmul_per_symbol``: applying the loaded coefficients to one
    subcarrier-symbol. Counts: Gram ``K^2 M``, ``K x K`` inverse ``K^3``, ``M x K`` by ``K x K``
    product ``M K^2``, column norms ``M K``; an ``M``-point radix-2 FFT ``(M/2) log2 M``.
    """
    fft = (M // 2) * max(1, int(math.log2(M)))
    if method in ("zf", "mmse"):
        per = K * K * M + K ** 3 + M * K * K + M * K
        frame, path = 0, M * K
    elif method == "mrt":
        per, frame, path = M * K, 0, M * K
    elif method == "codebook":
        per, frame, path = K * fft, K * M, M * K
    elif method == "beamraster":
        if order is None:
            pd = K ** 3 + K * K
        elif order == 0:
            pd = K * K  # D^-1 is diagonal; column norms
        else:
            pd = 2 * K * K + (order - 1) * K ** 3 + K * K  # D^-1 O, (D^-1 O) D^-1, higher powers, norms
        per, frame, path = K * fft + pd, 4 * K * M, K * K + M * K
    else:
        raise UsageError(f"unknown precoder {method!r}; choose one of {', '.join(PRECODERS)}")
    return {"method": method, "M": M, "K": K, "cmul_per_update": int(per), "ops_per_frame": int(frame),
            "datapath_cmul_per_symbol": int(path)}
