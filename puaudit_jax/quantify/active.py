"""Which items to label next, and estimates that stay valid when they were not sampled at random.

Active statistical inference (Zrnic & Candes 2024, arXiv:2403.03208, §3): each unlabelled item i is
sent to humans with a probability pi_i chosen from what is already known (here the audit's
P(judge wrong)), independently (Poisson sampling, xi_i ~ Bernoulli(pi_i)). The variance is smallest
with pi_i proportional to sqrt(E[(y - yhat)^2 | x_i]) (their Theorem 1): for a calibrated P(judge wrong)
= p that is sqrt(p (1 - p)), so the planner spends labels where the judge might be wrong and few where
it is surely right or surely wrong. A share ``mix`` of uniform sampling keeps every pi away from 0 (a
tiny pi makes a huge weight). With constant p the plan is uniform sampling.

**The estimate** is for the R rows of the table. Each labelled row carries w_i = 1 / p_i, p_i its
probability of being labelled at all: for a plan drawn after a random sample (a share r labelled first,
``plan-labels``), p = r + (1 - r) pi for every row, those labelled first with the pi they would have had
(:func:`inclusion_probability`: two-phase sampling); where the plan's probabilities were chosen *on* the
earlier labels (a guarantee's escalation plan), the earlier rows count as themselves, p = 1, and the plan's
rows p = pi (the estimate is conditional on the earlier labels). The ratio (Hájek) form with predictions
yhat (PPI with weights)

    mean = lam mean_R(yhat) + sum_lab w (y - lam yhat) / sum_lab w

is the labelled rows' mean when every p is equal (lam = 0), and consistent for the table's mean
whatever the p. Its variance under Poisson sampling (linearised): sum_lab (1 - p) w^2 (e - e_bar)^2 /
(sum_lab w)^2 with e = y - lam yhat; rows labelled with certainty add none. lam in [0, 1] minimises it.
The interval uses Student's t with one degree of freedom fewer than the rows drawn at random (p < 1):
a per-model win rate may rest on a handful of draws. Rows are drawn one by one, so a cluster column does
not enter the design variance.

    sampling_probabilities(uncertainty (N,), budget, mix) -> pi (N,), sum pi = budget, 0 < pi <= 1
    inclusion_probability(pi (R,), r) -> r + (1 - r) pi: labelled before the plan or drawn by it
    active_mean(y (R,), yhat (R,), p (R,), labelled (R,), level) -> Estimate
    predicted_half_width(p (R,), sigma2 (R,), level) -> half-width of the mean
"""

from __future__ import annotations

import numpy as np
from scipy.special import stdtrit  # Student's t quantile without scipy.stats' 0.6 s import

from .estimators import HUMAN_ONLY, PPI, Estimate, check_level, not_estimable, z_value

__all__ = ["active_mean", "predicted_half_width", "sampling_probabilities", "sampling_scale", "uncertainty"]


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

    The two-phase design of ``plan-labels``: the labelled sample was random (each item with probability r),
    the plan drew from the rest with pi.

    Args:
        pi: (R,) the plan's sampling probabilities (for an item of the earlier sample: the one it would
            have had).
        labelled_share: r, the share of items labelled before the plan, in [0, 1).

    Returns:
        (R,) probabilities in (0, 1].
    """
    return labelled_share + (1 - labelled_share) * np.asarray(pi, np.float64)


def _lam(y: np.ndarray, yhat: np.ndarray, v: np.ndarray) -> float:
    """The lam in [0, 1] minimising sum v (e - e_bar)^2, e = y - lam yhat (0 when yhat does not vary)."""
    if not v.sum() > 0:
        return 0.0
    dy, dh = y - np.average(y, weights=v), yhat - np.average(yhat, weights=v)
    var_h = float(np.sum(v * dh**2))
    return float(np.clip(np.sum(v * dy * dh) / var_h, 0.0, 1.0)) if var_h > 0 else 0.0


def active_mean(y, yhat, pi, labelled, level: float, lam: float | None = None, clusters=None,
                estimator: str = PPI) -> Estimate:  # fmt: skip
    """The design-based ratio (Hájek) PPI mean of the module docstring over R items.

    Args:
        y: (R,) outcomes (read where ``labelled``).
        yhat: (R,) predictions of the outcome, in [0, 1].
        pi: (R,) each item's probability of being labelled (:func:`.plan.planned_probabilities`); read on
            labelled rows, and on the unlabelled ones to tell whether rows that could have been drawn were
            left unseen.
        labelled: (R,) bool, the items with an outcome.
        level: the interval's coverage, in (0, 1).
        lam: a fixed lam (0: the human-only ratio mean), or None for the variance-minimising one.
        clusters: unused (rows are drawn one by one: clusters do not enter the design variance); kept so
            that every estimator takes the same arguments.
        estimator: the name the estimate carries.

    Returns:
        The :class:`Estimate` (not estimable with fewer than 2 labelled items, or when rows could have been
        drawn at random (pi < 1) and none of them came back labelled: nothing stands for them).

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
    random = np.isfinite(pi) & (pi < 1)
    if (random & ~labelled).any() and not (random & labelled).any():
        return not_estimable(estimator, level, n, rows - n, "no row the plan drew at random (probability < 1) "
                             "came back labelled: nothing stands for the rows it did not draw")  # fmt: skip
    w, ys, hs = 1.0 / pi[labelled], y[labelled], yhat[labelled]
    lam = _lam(ys, hs, (1 - pi[labelled]) * w**2) if lam is None else float(lam)
    e = ys - lam * hs
    rectifier = float(np.sum(w * e) / np.sum(w))
    estimate = lam * float(yhat.mean()) + rectifier
    se = float(np.sqrt(np.sum((1 - pi[labelled]) * w**2 * (e - rectifier) ** 2)) / np.sum(w))
    drawn = int((random & labelled).sum())
    half = float(stdtrit(max(drawn - 1, 1), 0.5 + level / 2)) * se  # Student's t: few draws (module docstring)
    return Estimate(estimator, estimate, estimate - half, estimate + half, level, n, rows - n,
                    lam=None if estimator == HUMAN_ONLY else lam)  # fmt: skip


def predicted_half_width(pi, sigma2, level: float) -> float:
    """The half-width :func:`active_mean` is expected to have when every row is labelled with probability ``pi``.

    Var = sum (1 / pi_i - 1) sigma2_i / R^2 (the module docstring's variance, in expectation, the ratio's
    denominator taken at its mean R), sigma2_i = E[(y_i - yhat_i)^2 | x_i] (p (1 - p) for a calibrated
    P(judge wrong) p).

    Args:
        pi: (R,) every row's probability of being labelled (:func:`inclusion_probability`), in (0, 1].
        sigma2: (R,) the rows' expected squared residuals.
        level: the interval's coverage, in (0, 1).

    Returns:
        The predicted half-width, in the outcome's units.
    """
    pi, sigma2 = np.asarray(pi, np.float64), np.asarray(sigma2, np.float64)
    var = float(((1 / pi - 1) * sigma2).sum()) / len(pi) ** 2
    return float(z_value(check_level(level)) * np.sqrt(var))
