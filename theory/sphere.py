"""Generators on the unit sphere S^{d-1} for the paper's geometric model (PUAudit §4.1).

Cone model (Assumptions 4.1 and 4.2 of PUAudit):

- a consensus direction z_bar in S^{d-1};
- positives z with <z, z_bar> >= tau (the cone C_tau(z_bar));
- negatives z with <z, z_bar> < tau - delta (margin delta), and the paper's extra requirement
  tau^2 > tau - delta (a non-empty "utility gap" Delta_base = tau^2 - tau + delta > 0);
- every vector is z = t z_bar + sqrt(1 - t^2) u with t its projection and u uniform on the unit
  sphere of the orthogonal complement z_bar^perp (S^{d-2}): "orthogonal parts uniform";
- the unlabelled pool U is the mixture alpha mu_+ + (1 - alpha) mu_-, P is drawn from mu_+.

Projections are drawn uniformly from an interval: positives from [tau, pos_high], negatives from
[tau - delta - neg_width, tau - delta) (clipped to [-1, 1]). ``proj="boundary"`` puts every
positive exactly at tau and every negative at tau - delta - 1e-9: the worst case of the paper's
Appendix A.1 argument.

Everything is a pure function of an explicit ``numpy.random.Generator``; all vectors are float64
rows of unit norm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PROJ_MODES = ("uniform", "boundary")


@dataclass(frozen=True)
class ConeModel:
    """Parameters of the cone model on S^{d-1} (dimensionless; d is the ambient dimension).

    Attributes:
      d: ambient dimension (>= 3, so that z_bar^perp holds a sphere S^{d-2} of positive dim).
      tau: cone concentration, positives satisfy <z, z_bar> >= tau, 0 < tau < 1.
      delta: margin, negatives satisfy <z, z_bar> < tau - delta, delta > 0, tau - delta > -1.
      alpha: mixture proportion of positives in U, 0 < alpha < 1.
      pos_high: upper end of the positives' projection interval, tau < pos_high <= 1.
      neg_width: length of the negatives' projection interval below tau - delta (> 0).
      proj: "uniform" (projections uniform on the intervals) or "boundary" (worst case).
      require_gap: enforce the paper's tau^2 > tau - delta (Assumption 4.2). Set False to
        study the regime the theorem excludes.
    """

    d: int
    tau: float = 0.6
    delta: float = 0.4
    alpha: float = 0.5
    pos_high: float = 1.0
    neg_width: float = 0.3
    proj: str = "uniform"
    require_gap: bool = True

    def __post_init__(self):
        if int(self.d) != self.d or self.d < 3:
            raise ValueError(f"d must be an integer >= 3; got {self.d!r}")
        if not 0.0 < self.tau < 1.0:
            raise ValueError(f"tau must lie in (0, 1); got {self.tau!r}")
        if not self.delta > 0.0:
            raise ValueError(f"delta must be positive; got {self.delta!r}")
        if not self.tau - self.delta > -1.0:
            raise ValueError(
                f"tau - delta must exceed -1 (negatives must exist); got tau={self.tau}, delta={self.delta}"
            )
        if self.require_gap and not self.tau**2 > self.tau - self.delta:
            raise ValueError(
                f"Assumption 4.2 requires tau^2 > tau - delta (Delta_base = tau^2 - tau + delta "
                f"> 0); got tau={self.tau}, delta={self.delta}, Delta_base={self.gap_base:.4g}"
            )
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1); got {self.alpha!r}")
        if not self.tau < self.pos_high <= 1.0:
            raise ValueError(f"pos_high must lie in (tau, 1]; got {self.pos_high!r}")
        if not self.neg_width > 0.0:
            raise ValueError(f"neg_width must be positive; got {self.neg_width!r}")
        if self.proj not in PROJ_MODES:
            raise ValueError(f"proj must be one of {PROJ_MODES}; got {self.proj!r}")

    @property
    def gap_base(self) -> float:
        """The paper's Delta_base = tau^2 - tau + delta (Appendix A.1)."""
        return self.tau**2 - self.tau + self.delta


def random_direction(rng: np.random.Generator, d: int) -> np.ndarray:
    """A uniform unit vector in R^d."""
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v)


def uniform_orthogonal(rng: np.random.Generator, n: int, z_bar: np.ndarray) -> np.ndarray:
    """(n, d) i.i.d. uniform unit vectors in the orthogonal complement of the unit z_bar."""
    g = rng.standard_normal((n, z_bar.shape[0]))
    g -= np.outer(g @ z_bar, z_bar)
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def with_projection(rng: np.random.Generator, proj: np.ndarray, z_bar: np.ndarray) -> np.ndarray:
    """Unit vectors z = t z_bar + sqrt(1 - t^2) u, t = proj (n,), u uniform in z_bar^perp."""
    proj = np.asarray(proj, np.float64)
    if np.any(np.abs(proj) > 1.0):
        raise ValueError("projections must lie in [-1, 1]")
    u = uniform_orthogonal(rng, proj.shape[0], z_bar)
    return proj[:, None] * z_bar[None, :] + np.sqrt(1.0 - proj**2)[:, None] * u


def decompose(z: np.ndarray, z_bar: np.ndarray):
    """z = tau_z z_bar + eps_z z_perp with eps_z = sqrt(1 - tau_z^2) and unit z_perp.

    Returns (tau_z (n,), eps_z (n,), z_perp (n, d)); z_perp is 0 where eps_z == 0.
    """
    tau = z @ z_bar
    resid = z - np.outer(tau, z_bar)
    eps = np.linalg.norm(resid, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        perp = np.where(eps[:, None] > 0, resid / eps[:, None], 0.0)
    return tau, eps, perp


def positive_projections(rng: np.random.Generator, model: ConeModel, n: int) -> np.ndarray:
    if model.proj == "boundary":
        return np.full(n, model.tau)
    return rng.uniform(model.tau, model.pos_high, n)


def negative_projections(rng: np.random.Generator, model: ConeModel, n: int) -> np.ndarray:
    hi = model.tau - model.delta
    if model.proj == "boundary":
        return np.full(n, hi - 1e-9)
    lo = max(-1.0, hi - model.neg_width)
    # uniform on [lo, hi): numpy's uniform excludes the upper end
    return rng.uniform(lo, hi, n)


def sample_positives(rng, model: ConeModel, n: int, z_bar: np.ndarray) -> np.ndarray:
    """(n, d) draws from mu_+ (inside the cone C_tau(z_bar))."""
    return with_projection(rng, positive_projections(rng, model, n), z_bar)


def sample_negatives(rng, model: ConeModel, n: int, z_bar: np.ndarray) -> np.ndarray:
    """(n, d) draws from mu_- (projection below tau - delta)."""
    return with_projection(rng, negative_projections(rng, model, n), z_bar)


@dataclass(frozen=True)
class PUSample:
    """One draw of the PU problem. ``u_pos[j]`` says whether U's item j is a hidden positive."""

    z_bar: np.ndarray
    P: np.ndarray
    U: np.ndarray
    u_pos: np.ndarray

    @property
    def alpha_hat(self) -> float:
        """Empirical fraction of positives in U (what the constraint m <= alpha really needs)."""
        return float(self.u_pos.mean())


def sample_pu(
    rng: np.random.Generator,
    model: ConeModel,
    n_p: int,
    n_u: int,
    *,
    exact_alpha: bool = True,
    z_bar: np.ndarray | None = None,
) -> PUSample:
    """P: n_p positives; U: n_u mixture items in random order.

    exact_alpha=True puts exactly round(alpha * n_u) positives in U (so "m <= alpha" is the
    same as "m <= empirical fraction"); False draws the labels i.i.d. Bernoulli(alpha).
    """
    if n_p < 1 or n_u < 1:
        raise ValueError(f"n_p and n_u must be >= 1; got {n_p}, {n_u}")
    if z_bar is None:
        z_bar = random_direction(rng, model.d)
    if exact_alpha:
        n_pos = int(round(model.alpha * n_u))
        u_pos = np.zeros(n_u, bool)
        u_pos[:n_pos] = True
        u_pos = rng.permutation(u_pos)
    else:
        u_pos = rng.random(n_u) < model.alpha
    P = sample_positives(rng, model, n_p, z_bar)
    U = np.empty((n_u, model.d))
    U[u_pos] = sample_positives(rng, model, int(u_pos.sum()), z_bar)
    U[~u_pos] = sample_negatives(rng, model, int((~u_pos).sum()), z_bar)
    return PUSample(z_bar=z_bar, P=P, U=U, u_pos=u_pos)


def bias_direction(rng: np.random.Generator, z_bar: np.ndarray) -> np.ndarray:
    """A uniform unit vector orthogonal to z_bar (Assumption 4.4: <z_bar, z_bias> = 0)."""
    return uniform_orthogonal(rng, 1, z_bar)[0]


def perturb(z: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """The paper's attack (Appendix A.2): z -> (z + lam b) / sqrt(1 + lam^2).

    This is a unit vector only when b is orthogonal to z (the paper applies it to z = z_bar);
    use :func:`perturb_normalised` for general targets.
    """
    return (z + lam * b) / np.sqrt(1.0 + lam**2)


def perturb_normalised(z: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """(z + lam b) / ||z + lam b|| row-wise: the attack for targets not orthogonal to b."""
    w = z + lam * b
    return w / np.linalg.norm(w, axis=-1, keepdims=True)
