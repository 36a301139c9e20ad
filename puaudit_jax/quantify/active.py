"""Which items to label next, and estimates that stay valid when they were not sampled at random.

Active statistical inference (Zrnic & Candes 2024, arXiv:2403.03208, §3): each unlabelled item i is
sent to humans with a probability pi_i chosen from what is already known (here the audit's
P(judge wrong)), independently (Poisson sampling, xi_i ~ Bernoulli(pi_i)); the mean of

    Z_i = lam yhat_i + xi_i (y_i - lam yhat_i) / pi_i

over the items is unbiased for the mean of y whatever the pi (inverse-probability weighting), and
sd(Z) / sqrt(R) is its standard error. When a random sample (a share r of the items) was labelled
before the plan, pi is each item's probability of being labelled at all, r + (1 - r) pi_plan
(:func:`inclusion_probability`), for the earlier labels too. The variance is smallest with pi_i proportional to
sqrt(E[(y - yhat)^2 | x_i]) (their Theorem 1): for a calibrated P(judge wrong) = p that is
sqrt(p (1 - p)), so the planner spends labels where the judge might be wrong and few where it is
surely right or surely wrong. A share ``mix`` of uniform sampling keeps every pi away from 0 (a
tiny pi makes a huge weight). With constant p the plan is uniform sampling, and the estimator is
PPI++ on a random sample.

    sampling_probabilities(uncertainty (N,), budget, mix) -> pi (N,), sum pi = budget, 0 < pi <= 1
    active_mean(y (R,), yhat (R,), pi (R,), labelled (R,), level) -> Estimate
    inclusion_probability(pi (R,), r) -> r + (1 - r) pi: labelled before the plan or drawn by it
    predicted_half_width(pi (R,), sigma2 (R,), var_y, level) -> half-width of the mean
"""

from __future__ import annotations

import numpy as np

from .estimators import HUMAN_ONLY, PPI, Estimate, check_level, clustered_se, not_estimable, z_value

__all__ = [
    "active_lambda",
    "active_mean",
    "inclusion_probability",
    "predicted_half_width",
    "sampling_probabilities",
    "sampling_scale",
    "uncertainty",
]


def uncertainty(p_wrong) -> np.ndarray:
    """(N,) sqrt(p (1 - p)): the standard deviation of "the judge is wrong" at P(judge wrong) = p.

    Items without a P(judge wrong) (NaN: ties, rows the audit did not score) get the mean of the
    others, or 1/2 when there are none.
    """
    p = np.asarray(p_wrong, np.float64)
    u = np.sqrt(np.clip(p * (1 - p), 0.0, 0.25))
    fill = np.nanmean(u) if np.isfinite(u).any() else 0.5
    return np.where(np.isfinite(u), u, fill)


def _weights(uncertainty, pool_mean: float, mix: float) -> np.ndarray:
    """Unnormalised sampling weights (1 - mix) u / mean_pool(u) + mix (> 0)."""
    u = np.asarray(uncertainty, np.float64)
    return np.maximum((1 - mix) * (u / pool_mean if pool_mean > 0 else np.ones_like(u)) + mix, 1e-12)


def sampling_scale(weight, budget: float) -> float:
    """The c with sum_i min(1, c w_i) = budget: weights that would pass 1 are capped, the rest rescaled.

    Args:
        weight: (N,) positive sampling weights of the pool.
        budget: expected number of items to label, in (0, N].

    Returns:
        c > 0 (pi_i = min(1, c w_i) for any item, inside the pool or not).
    """
    weight = np.asarray(weight, np.float64)
    capped = np.zeros(len(weight), bool)
    while True:
        if capped.all():
            return float(1 / weight.min())  # every item is drawn (budget = N)
        c = (budget - capped.sum()) / weight[~capped].sum()
        over = (c * weight > 1) & ~capped
        if not over.any():
            return float(c)
        capped |= over


def _check_plan_settings(u: np.ndarray, budget: float, mix: float) -> None:
    if not 0 < budget <= len(u):
        raise ValueError(f"budget {budget} must be in (0, {len(u)}]: the pool has {len(u)} unlabelled items")
    if not 0 <= mix <= 1:
        raise ValueError(f"mix {mix} must be in [0, 1]")
    if not (np.isfinite(u).all() and (u >= 0).all()):
        raise ValueError("uncertainties must be finite and >= 0")


def sampling_probabilities(uncertainty, budget: float, mix: float = 0.2, others=None):
    """Probabilities pi (N,) proportional to (1 - mix) u / mean(u) + mix, summing to ``budget``, each <= 1.

    Args:
        uncertainty: (N,) non-negative u_i of the pool (constant: uniform sampling).
        budget: expected number of items to label, in (0, N].
        mix: share of uniform sampling, in [0, 1] (1: uniform).
        others: (M,) u of items outside the pool (the labelled sample), or None.

    Returns:
        (N,) float64 pi in (0, 1] with sum ``budget``; with ``others`` also the (M,) probabilities those
        items would have had under the same plan, as a pair (pool, others).

    Raises:
        ValueError: a budget outside (0, N], a mix outside [0, 1], or negative / non-finite u.
    """
    u = np.asarray(uncertainty, np.float64)
    _check_plan_settings(u, budget, mix)
    weight = _weights(u, u.mean(), mix)
    c = sampling_scale(weight, budget)
    pool = np.minimum(c * weight, 1.0)
    return pool if others is None else (pool, np.minimum(c * _weights(others, u.mean(), mix), 1.0))


def inclusion_probability(pi, labelled_share: float) -> np.ndarray:
    """P(an item is labelled) = r + (1 - r) pi: in the random sample before the plan (share r), or drawn.

    The two-phase design: the labelled sample was random (each item with probability r), the plan drew
    from the rest with pi. Weighting every label by 1 / this probability makes the estimate unbiased
    and, with a budget of 0, equal to PPI++ on the random sample alone.

    Args:
        pi: (R,) the plan's sampling probabilities (for an item of the earlier sample: the one it would
            have had).
        labelled_share: r, the share of items labelled before the plan, in [0, 1).

    Returns:
        (R,) probabilities in (0, 1].
    """
    return labelled_share + (1 - labelled_share) * np.asarray(pi, np.float64)


def _z_parts(y, yhat, pi, labelled) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) with Z = a + lam b: a = xi y / pi, b = yhat (1 - xi / pi), per row."""
    w = np.where(labelled, 1.0 / np.where(labelled, pi, 1.0), 0.0)
    return w * np.where(labelled, y, 0.0), yhat * (1 - w)


def active_lambda(y, yhat, pi, labelled) -> float:
    """The lam in [0, 1] minimising the empirical variance of Z (0 when yhat carries nothing)."""
    a, b = _z_parts(y, yhat, pi, labelled)
    var_b = b.var()
    if not var_b > 0:
        return 0.0
    return float(np.clip(-np.cov(a, b, bias=True)[0, 1] / var_b, 0.0, 1.0))


def active_mean(y, yhat, pi, labelled, level: float, lam: float | None = None, clusters=None,
                estimator: str = PPI) -> Estimate:  # fmt: skip
    """The inverse-probability-weighted PPI++ mean of the module docstring over R items.

    Args:
        y: (R,) outcomes (read where ``labelled``).
        yhat: (R,) predictions of the outcome, in [0, 1].
        pi: (R,) probability each labelled item was labelled with (:func:`inclusion_probability`; read
            where ``labelled``), in (0, 1].
        labelled: (R,) bool, the items with an outcome.
        level: the interval's coverage, in (0, 1).
        lam: a fixed lam (0: the human-only IPW mean), or None for :func:`active_lambda`.
        clusters: (R,) cluster labels for a cluster-robust interval, or None.
        estimator: the name the estimate carries.

    Returns:
        The :class:`Estimate` (not estimable with fewer than 2 labelled items; lam None for lam = 0).

    Raises:
        ValueError: a labelled item's pi outside (0, 1].
    """
    y, yhat, pi = (np.asarray(v, np.float64) for v in (y, yhat, pi))
    labelled, level = np.asarray(labelled, bool), check_level(level)
    n, rows = int(labelled.sum()), len(y)
    bad = labelled & ~((pi > 0) & (pi <= 1))
    if bad.any():
        raise ValueError(f"sampling probability {pi[bad][0]!r} of labelled row {int(np.flatnonzero(bad)[0])} "
                         "is outside (0, 1]")  # fmt: skip
    if n < 2:
        return not_estimable(estimator, level, n, rows - n, f"{n} labelled items (need 2)")
    lam = active_lambda(y, yhat, pi, labelled) if lam is None else float(lam)
    a, b = _z_parts(y, yhat, pi, labelled)
    z = a + lam * b
    se = z.std() / np.sqrt(rows) if clusters is None else clustered_se([(z - z.mean()) / rows], [clusters])
    half = z_value(level) * se
    return Estimate(estimator, float(z.mean()), float(z.mean() - half), float(z.mean() + half), level, n, rows - n,
                    lam=None if estimator == HUMAN_ONLY else lam)  # fmt: skip


def predicted_half_width(pi, sigma2, var_y: float, level: float) -> float:
    """The half-width the mean of Z is expected to have under labelling probabilities ``pi``.

    Var(Z_i) = var(y) + E[(1 / pi_i - 1) sigma2_i] with sigma2_i = E[(y_i - yhat_i)^2 | x_i] (p (1 - p)
    for a calibrated P(judge wrong) p, lam = 1), and Var(mean Z) = Var(Z) / R.

    Args:
        pi: (R,) every item's probability of being labelled (:func:`inclusion_probability`), in (0, 1].
        sigma2: (R,) the expected squared residuals of the predictions.
        var_y: the outcome's variance.
        level: the interval's coverage, in (0, 1).

    Returns:
        The predicted half-width, in the outcome's units.
    """
    pi, sigma2 = np.asarray(pi, np.float64), np.asarray(sigma2, np.float64)
    var = (var_y + ((1 / pi - 1) * sigma2).mean()) / len(pi)
    return float(z_value(check_level(level)) * np.sqrt(var))
