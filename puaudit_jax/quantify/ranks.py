"""Rank-sets: for each model, the ranks it may hold, simultaneously for every model at the chosen level.

An interval per model does not say "is #2 really behind #1?". A rank-set does: model i is
confidently above model j when the simultaneous interval of theta_i - theta_j lies above 0, and its
rank-set is [1 + #(models confidently above i), K - #(models confidently below i)] (rank 1 = the
strongest). With intervals on every pairwise difference that hold together at ``level``, every
model's true rank lies in its set together with the same probability (the construction of
prediction-powered ranking, Chatzi et al. 2024, arXiv:2402.17826, there from a confidence
ellipsoid). Here the K (K - 1) / 2 differences use Bonferroni's correction on the estimator's normal
approximation (the M-estimator's covariance, PPI++ or classical): valid whatever the correlation,
conservative by a little.

    rank_sets(theta (K,), cov (K, K), level) -> RankSets(lower (K,), upper (K,))
    rank_sets_splits(theta (S, K), cov (S, K, K), level) -> (lower (S, K), upper (S, K))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri  # norm.ppf without scipy.stats' 0.6 s import

from .estimators import check_level

__all__ = ["RankSets", "pairwise_critical_value", "rank_sets", "rank_sets_splits", "true_ranks"]


@dataclass(frozen=True)
class RankSets:
    """The simultaneous rank-sets of K models.

    Attributes:
        lower: (K,) the best rank each model may hold (1 = strongest).
        upper: (K,) the worst rank it may hold (K = weakest).
        level: the simultaneous coverage, in (0, 1).
        critical: the multiplier of a difference's standard error (Bonferroni over the pairs).
    """

    lower: np.ndarray
    upper: np.ndarray
    level: float
    critical: float


def pairwise_critical_value(k: int, level: float) -> float:
    """The multiplier z: the K (K - 1) / 2 intervals d +- z se(d) hold together at ``level`` (Bonferroni)."""
    pairs = max(1, k * (k - 1) // 2)
    return float(ndtri(1 - (1 - check_level(level)) / (2 * pairs)))


def rank_sets_splits(theta: np.ndarray, cov: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Rank-sets of S independent estimates at once.

    Args:
        theta: (S, K) strengths (any scale that is increasing in the strength, e.g. logits).
        cov: (S, K, K) their covariance.
        level: simultaneous coverage, in (0, 1).

    Returns:
        (lower, upper), each (S, K) ints; NaN rows of ``theta`` give rank-sets [1, K].
    """
    theta, cov = np.asarray(theta, np.float64), np.asarray(cov, np.float64)
    k = theta.shape[1]
    z = pairwise_critical_value(k, level)
    diff = theta[:, :, None] - theta[:, None, :]  # (S, K, K) theta_i - theta_j
    diag = np.diagonal(cov, axis1=1, axis2=2)
    var = diag[:, :, None] + diag[:, None, :] - 2 * cov
    se = np.sqrt(np.clip(var, 0, None))
    with np.errstate(invalid="ignore"):
        above = diff - z * se > 0  # i confidently above j
    above &= np.isfinite(diff) & np.isfinite(se)
    beaten_by = above.sum(axis=1)  # models j confidently above i: column sums over rows j
    beats = above.sum(axis=2)
    return 1 + beaten_by, k - beats


def rank_sets(theta: np.ndarray, cov: np.ndarray, level: float) -> RankSets:
    """The simultaneous rank-sets of one estimate (module docstring).

    Args:
        theta: (K,) strengths.
        cov: (K, K) their covariance.
        level: simultaneous coverage, in (0, 1).

    Returns:
        :class:`RankSets`.
    """
    theta = np.asarray(theta, np.float64)
    lower, upper = rank_sets_splits(theta[None], np.asarray(cov, np.float64)[None], level)
    return RankSets(lower[0], upper[0], float(level), pairwise_critical_value(len(theta), level))


def true_ranks(theta: np.ndarray) -> np.ndarray:
    """(K,) ranks of the strengths ``theta`` (1 = strongest; ties share the best of their ranks)."""
    theta = np.asarray(theta, np.float64)
    return 1 + (theta[None, :] > theta[:, None]).sum(axis=1)
