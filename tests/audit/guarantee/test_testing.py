"""Exact binomial tests of thresholds in a fallback sequence (``puaudit_jax.audit.guarantee.testing``).

The guarantee holds over simulated splits where the naive plug-in threshold does not; the fallback
procedure passes a rejected hypothesis's level on and controls the family-wise error under the global
null; it never tests below what Bonferroni over the same starts would; a single start is Jung et al.'s
fixed sequence, which stops at its first failure.
"""

from __future__ import annotations

import numpy as np
import pytest

from puaudit_jax.audit.guarantee import WEIGHTS, binomial_curve, fallback, min_rows, place, plug_in, select

A, D = 0.9, 0.1
ONE = (("strictest", 1.0),)


def _draw(rng, n_cal=500, n_pool=2000):
    """A calibrated score: q ~ U(0.5, 1) and the verdict right with probability q (agreement above t: (1 + t) / 2)."""
    q = rng.uniform(0.5, 1.0, n_cal)
    return q, rng.random(n_cal) < q, rng.uniform(0.5, 1.0, n_pool)


def _violation(t, agreement=A):
    return t is not None and (1 + t) / 2 < agreement


def test_the_guarantee_holds_over_simulated_splits_and_the_plug_in_threshold_does_not():
    rng, splits = np.random.default_rng(0), 1000
    fixed, naive, certified = 0, 0, 0
    for _ in range(splits):
        q, correct, pool = _draw(rng)
        t = select(q, correct, pool, A, D).threshold
        fixed += _violation(t)
        certified += t is not None
        naive += _violation(plug_in(q, correct, pool, A))
    se = np.sqrt(D * (1 - D) / splits)
    assert fixed / splits <= D + 3 * se
    assert naive / splits > D + 3 * se  # no finite-sample correction: it overshoots about half the time
    assert certified > splits / 4  # not valid by certifying nothing


def test_the_fallback_passes_a_rejections_level_on_and_a_failure_loses_only_its_own_share():
    p = np.array([0.01, 0.03, 0.2, 0.04, 0.09, 0.01])
    alpha = np.array([0.05, 0.0, 0.0, 0.05, 0.0, 0.0])
    rejected, level = fallback(p, alpha)
    np.testing.assert_allclose(level, [0.05, 0.05, 0.05, 0.05, 0.05, 0.0])
    assert rejected.tolist() == [True, True, False, True, False, False]
    rejected, level = fallback(np.array([0.04, 0.09]), np.array([0.05, 0.05]))  # a run carries its level on
    assert rejected.tolist() == [True, True] and level.tolist() == [0.05, 0.1]


def test_the_fallback_controls_the_family_wise_error_when_every_hypothesis_is_true():
    rng, reps = np.random.default_rng(1), 4000
    alpha = np.array([0.03, 0.0, 0.03, 0.0, 0.04])
    for correlated in (False, True):
        u = rng.random((reps, 1)) if correlated else rng.random((reps, 5))
        p = np.broadcast_to(u, (reps, 5)) if correlated else u
        any_rejected = np.mean([fallback(row, alpha)[0].any() for row in p])
        assert any_rejected <= alpha.sum() + 3 * np.sqrt(alpha.sum() / reps)


def test_every_test_runs_at_least_at_the_level_bonferroni_over_the_same_starts_would_give():
    rng = np.random.default_rng(2)
    for _ in range(200):
        q, correct, pool = _draw(rng, n_cal=300)
        curve = binomial_curve(q, correct, pool, A)
        alpha = place(curve, 300, A, D, WEIGHTS)
        _, level = fallback(curve.p_value, alpha)
        bonferroni = []  # each start's own sequence at its share
        for k in np.flatnonzero(alpha):
            a = np.zeros_like(alpha)
            a[k] = alpha[k]
            bonferroni.append(fallback(curve.p_value, a))
        kept = [np.flatnonzero(r)[-1] for r, _ in bonferroni if r.any()]
        ours = np.flatnonzero(fallback(curve.p_value, alpha)[0])
        assert not kept or (len(ours) and ours[-1] >= max(kept))  # never less certified


def test_fixed_sequence_testing_stops_at_the_first_threshold_it_cannot_certify_and_the_whole_pool_share_goes_on():
    # every calibration row above 0.95 is right, then a run of errors: one sequence must stop there, though the
    # agreement over all rows would pass again further down
    q = np.r_[np.linspace(1.0, 0.95, 60), np.linspace(0.949, 0.9, 20), np.linspace(0.899, 0.5, 400)]
    correct = np.r_[np.ones(60, bool), np.zeros(20, bool), np.ones(400, bool)]
    sel = select(q, correct, q, A, D, weights=ONE)
    assert sel.threshold is not None and sel.threshold >= 0.9
    tested = [r for r in sel.curve if r.level > 0]
    assert tested[-1].p_value > D and all(r.p_value <= D for r in tested[:-1])
    assert min_rows(A, D) == 22  # 0.9^22 = 0.098 <= 0.1 < 0.9^21
    # the default keeps half of the level for the whole pool, which certifies every row
    assert select(q, correct, q, A, D).threshold == 0.5


def test_a_weak_score_on_a_judge_above_a_certifies_everything_where_one_sequence_certifies_little():
    rng, certified = np.random.default_rng(3), {"one": [], "default": []}
    for _ in range(100):
        q, pool = rng.uniform(0.5, 0.6, 500), rng.uniform(0.5, 0.6, 2000)  # ranks nothing
        correct = rng.random(500) < 0.87  # the judge agrees on 87 %
        for name, weights in (("one", ONE), ("default", WEIGHTS)):
            t = select(q, correct, pool, 0.8, D, weights=weights).threshold
            certified[name].append(0.0 if t is None else np.mean(pool >= t))
    assert np.mean(certified["default"]) > 0.95 and np.mean(certified["one"]) < 0.5


def test_the_curve_reports_what_each_threshold_saw_and_the_kept_row_is_the_loosest_rejection():
    rng = np.random.default_rng(4)
    q, correct, pool = _draw(rng)
    sel = select(q, correct, pool, A, D)
    rows = sel.curve
    assert [r.threshold for r in rows] == sorted((r.threshold for r in rows), reverse=True)
    assert all(r.n == int((q >= r.threshold).sum()) for r in rows)
    assert all(r.errors == int((~correct[q >= r.threshold]).sum()) for r in rows)
    assert sel.row.rejected and sel.row == [r for r in rows if r.rejected][-1]
    assert sel.row.lower >= A and sel.coverage == pytest.approx(np.mean(pool >= sel.threshold))
    assert select(q, correct, np.full(10, -np.inf), A, D).threshold is None  # a pool with no confidence at all
