"""Tests of the pluggable scorers (puaudit_jax.audit.scorers) and decision rules (puaudit_jax.audit.rules)."""

from __future__ import annotations

import numpy as np
import pytest

from puaudit_jax.audit.rules import RuleContext, budget_rule, get_rule, paper_rule
from puaudit_jax.audit.scorers import (
    SCORERS,
    BalancedOTScorer,
    CentroidScorer,
    KNNScorer,
    POTScorer,
    PULogisticScorer,
    UnbalancedOTScorer,
    get_scorer,
)
from puaudit_jax.ot import PartialSinkhorn, SolveOptions

# fixture cone_points (tests/conftest.py): P' in a cone around e_0, U = 30 cone items then 20 orthogonal


def auc(scores, truth):
    pos, neg = scores[truth], scores[~truth]
    return (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_every_scorer_shape_range_and_separation(name, cone_points):
    zp, zu, truth = cone_points
    res = get_scorer(name)(zp, zu, 0.6)
    assert res.scores.shape == (len(zu),)
    assert np.isfinite(res.scores).all() and (res.scores >= 0).all()
    assert auc(res.scores, truth) > 0.95, (name, auc(res.scores, truth))


def test_pot_scores_are_received_mass(cone_points):
    zp, zu, truth = cone_points
    res = get_scorer("pot-exact")(zp, zu, 0.6)
    assert res.scores.sum() == pytest.approx(0.6, abs=1e-9)
    assert (res.scores <= 1 / len(zu) + 1e-12).all()
    # m = 0.6 = 30 of 50 items: exactly the cone items are served
    assert set(np.flatnonzero(res.scores > 1e-9)) == set(range(30))
    ent = get_scorer("pot")(zp, zu, 0.6)
    assert ent.info["converged"] and ent.scores.sum() == pytest.approx(0.6, abs=1e-3)


def test_pot_scorer_padding_to_buckets_keeps_the_scores(cone_points):
    """25 x 50 is solved as 32 x 64 with zero-weight padding: same scores, padding never returned."""
    zp, zu, _ = cone_points
    settings = dict(solver=PartialSinkhorn(tol=1e-10), options=SolveOptions(dtype="float64"))
    padded = get_scorer("pot", **settings)(zp, zu, 0.6)
    plain = get_scorer("pot", **settings, bucket=False)(zp, zu, 0.6)
    assert padded.scores.shape == (len(zu),)
    np.testing.assert_allclose(padded.scores, plain.scores, atol=1e-9)
    assert padded.info["cost"] == pytest.approx(plain.info["cost"], abs=1e-9)


def test_ot_scorers_hold_the_solver_defaults():
    """The OT scorers take their Sinkhorn settings from a PartialSinkhorn, not from defaults of their own."""
    assert POTScorer().solver == BalancedOTScorer().solver == PartialSinkhorn()
    assert POTScorer().options == SolveOptions()
    assert UnbalancedOTScorer().solver == PartialSinkhorn(epsilon=0.05)  # picked on the cone model
    exact = get_scorer("pot-exact", options=SolveOptions(dtype="float64"))
    assert exact.options == SolveOptions(method="exact", dtype="float64") and exact.name == "pot-exact"
    # a JSON config's dicts
    json = get_scorer("pot", solver={"tol": 1e-10}, options={"dtype": "float64"})
    assert json == POTScorer(solver=PartialSinkhorn(tol=1e-10), options=SolveOptions(dtype="float64"))


def test_ot_scorers_old_keywords_warn_and_map_onto_the_configs():
    with pytest.warns(DeprecationWarning, match=r"options=SolveOptions\(method='sinkhorn', dtype='float64'\)"):
        old = get_scorer("pot", dtype="float64", tol=1e-10, method="sinkhorn")
    assert old == POTScorer(solver=PartialSinkhorn(tol=1e-10), options=SolveOptions(method="sinkhorn", dtype="float64"))
    with pytest.warns(DeprecationWarning, match=r"solver=PartialSinkhorn\(tol=1e-05, max_iter=100\)"):
        ott = BalancedOTScorer(threshold=1e-5, max_iterations=100)
    assert ott.solver == PartialSinkhorn(tol=1e-5, max_iter=100)
    with pytest.warns(DeprecationWarning, match="UnbalancedOTScorer"):
        assert UnbalancedOTScorer(epsilon=0.1).solver.epsilon == 0.1


def test_centroid_and_knn_by_hand():
    zp = np.array([[1.0, 0], [0, 1.0]])
    zu = np.array([[1.0, 1.0], [-1.0, 0], [1.0, 0]])
    np.testing.assert_allclose(CentroidScorer()(zp, zu, 0.5).scores, [1.0, 0.0, 1 / np.sqrt(2)])
    np.testing.assert_allclose(KNNScorer(k=1)(zp, zu, 0.5).scores, [1 / np.sqrt(2), 0.0, 1.0])
    np.testing.assert_allclose(KNNScorer(k=5)(zp, zu, 0.5).scores, [1 / np.sqrt(2), 0.0, 0.5])
    assert KNNScorer(k=5)(zp, zu, 0.5).info["k"] == 2


def test_pu_logistic_c_estimate(cone_points):
    zp, zu, _ = cone_points
    res = PULogisticScorer()(zp, zu, 0.6)
    assert res.info["c_estimate"] == "3-fold" and 0 < res.info["c"] < 1
    assert res.scores.max() <= 1.0
    assert PULogisticScorer()(zp[:4], zu, 0.6).info["c_estimate"] == "in-sample"


def test_get_scorer_errors_and_callables():
    with pytest.raises(ValueError, match="unknown scorer"):
        get_scorer("nope")
    fn = lambda zp, zu, m: None  # noqa: E731
    assert get_scorer(fn) is fn
    with pytest.raises(ValueError, match="options"):
        get_scorer(fn, k=3)
    assert get_scorer("knn", k=3).k == 3


def test_rules():
    s = np.array([1.0, 0.5, 0.49, 0.0, 0.7])
    ctx = RuleContext(m=0.6, eta=0.5)
    np.testing.assert_array_equal(paper_rule(s, ctx), [False, False, True, True, False])
    # budget: floor(0.4 * 5) = 2 lowest
    np.testing.assert_array_equal(budget_rule(s, ctx), [False, False, True, True, False])
    np.testing.assert_array_equal(budget_rule(np.zeros(4), RuleContext(m=0.5, eta=0.5)), [True, True, False, False])
    assert not get_rule("none")(s, ctx).any()
    with pytest.raises(ValueError, match="unknown rule"):
        get_rule("magic")
