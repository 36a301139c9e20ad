"""Simultaneous rank-sets: the naive ranks when the intervals are disjoint, merged when they overlap,
covering together at the level in simulation, and in the leaderboard files."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from puaudit_jax.quantify.ranks import pairwise_critical_value, rank_sets, rank_sets_splits, true_ranks


def test_disjoint_intervals_give_the_naive_ranks():
    theta = np.array([0.3, 2.0, -1.0, 1.1])
    sets = rank_sets(theta, np.eye(4) * 1e-4, 0.9)
    np.testing.assert_array_equal(sets.lower, true_ranks(theta))
    np.testing.assert_array_equal(sets.upper, true_ranks(theta))
    np.testing.assert_array_equal(true_ranks(theta), [3, 1, 4, 2])


def test_overlapping_intervals_merge_and_a_far_model_stays_apart():
    theta = np.array([1.0, 1.05, -3.0])
    sets = rank_sets(theta, np.diag([0.04, 0.04, 0.04]), 0.9)
    assert sets.lower.tolist() == [1, 1, 3] and sets.upper.tolist() == [2, 2, 3]
    correlated = np.array([[0.04, 0.0399, 0], [0.0399, 0.04, 0], [0, 0, 0.04]])  # nearly the same noise
    tight = rank_sets(theta, correlated, 0.9)  # their difference is known to +-0.003: ordered
    assert tight.lower.tolist() == [2, 1, 3] and tight.upper.tolist() == [2, 1, 3]


def test_bonferroni_critical_value_and_nan_rows():
    assert pairwise_critical_value(2, 0.9) == pytest.approx(norm.ppf(0.95))
    assert pairwise_critical_value(4, 0.9) == pytest.approx(norm.ppf(1 - 0.1 / 12))
    lower, upper = rank_sets_splits(np.array([[np.nan, 0.0, 1.0]]), np.eye(3)[None] * 1e-6, 0.9)
    assert lower[0, 0] == 1 and upper[0, 0] == 3  # an unknown strength may hold any rank
    with pytest.raises(ValueError, match="level"):
        rank_sets(np.zeros(2), np.eye(2), 1.5)


def test_rank_sets_cover_every_true_rank_together_at_the_level():
    """Estimates drawn around known strengths with a correlated covariance: all K true ranks lie in
    their sets in >= 90 % of the draws (Bonferroni: somewhat more), and the sets are not all [1, K]."""
    rng = np.random.default_rng(0)
    k, draws = 6, 4000
    theta = np.array([0.0, 0.15, 0.3, 0.32, 0.8, 1.5])
    a = rng.normal(size=(k, k)) * 0.05
    cov = a @ a.T + np.eye(k) * 0.004
    est = rng.multivariate_normal(theta, cov, size=draws)
    lower, upper = rank_sets_splits(est, np.broadcast_to(cov, (draws, k, k)), 0.9)
    ranks = true_ranks(theta)
    covered = ((lower <= ranks) & (ranks <= upper)).all(1).mean()
    assert covered >= 0.9 - 3 * np.sqrt(0.09 / draws)
    assert (upper - lower + 1).mean() < k - 1.5


def test_the_leaderboard_carries_rank_sets(mtbench):
    from puaudit_jax.quantify import quantify

    frame = quantify(mtbench).to_frame()
    elo = frame[frame.target.str.startswith("elo: ") & (frame.note.fillna("") == "")]
    assert elo.rank_lower.notna().all() and (elo.rank_lower <= elo.rank_upper).all()
    boards = frame.target.str.startswith(("elo: ", "elo (style-controlled): ")) & (frame.note.fillna("") == "")
    assert frame[boards].rank_lower.notna().all() and frame[~boards].rank_lower.isna().all()
    human = elo[elo.estimator == "human only"].set_index("target")
    assert human.loc["elo: llama-13b", ["rank_lower", "rank_upper"]].tolist() == [6, 6]  # clearly last
    for est, part in elo.groupby("estimator"):  # the best possible ranks include 1 and the worst include K
        assert part.rank_lower.min() == 1 and part.rank_upper.max() == len(part), est
