"""Calibrated, abstaining decision rules: the calibration maps, cross-fitting, the rules
on the cone model and on data without signal, and that calibration never sees the evaluation pool."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.isotonic import IsotonicRegression

from puaudit_jax.audit import apply_rule, audit
from puaudit_jax.audit.calibration import bootstrap_indices, crossfit_folds, fit_isotonic, fit_platt
from puaudit_jax.audit.embed import PairEmbeddings
from puaudit_jax.audit.rules import CalibratedRule, get_rule
from puaudit_jax.audit.scorers import CentroidScorer
from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.evaluate import consistency, split_labels

# ------------------------------------------------------------------------------------------------
# calibration maps, folds, bootstrap


def test_isotonic_map_equals_sklearn_at_the_data_and_interpolates():
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=300), 2)  # ties on purpose
    c = (rng.random(300) < 1 / (1 + np.exp(-2 * x))).astype(float)
    ours = fit_isotonic(x, c)
    ref = IsotonicRegression(out_of_bounds="clip").fit(x, c)
    np.testing.assert_allclose(ours(x), ref.predict(x), atol=1e-12)
    grid = np.linspace(x.min() - 1, x.max() + 1, 50)
    values = ours(grid)
    assert (np.diff(values) >= -1e-15).all() and values.min() >= 0 and values.max() <= 1


def test_platt_recovers_slope_and_group_offsets_and_clamps_negative_slopes():
    rng = np.random.default_rng(1)
    n = 4000
    x = rng.normal(size=n)
    g = np.where(rng.random(n) < 0.5, "easy", "hard")
    logit = 0.2 + 1.5 * x + np.where(g == "easy", 1.0, -1.0)
    c = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    fitted = fit_platt(x, c, g, group_ridge=1e-3)
    assert fitted.b == pytest.approx(1.5, abs=0.15)
    assert fitted.offsets["easy"] - fitted.offsets["hard"] == pytest.approx(2.0, abs=0.2)
    flat = fit_platt(x, (rng.random(n) < 1 / (1 + np.exp(2 * x))).astype(float))  # anti-informative
    assert flat.b == 0.0
    assert np.ptp(flat(np.linspace(-3, 3, 7))) == 0


def test_crossfit_folds_are_stratified_and_never_split_a_cluster():
    rng = np.random.default_rng(2)
    strata = np.array(["a"] * 40 + ["b"] * 20, dtype=object)
    clusters = np.array([f"p{i // 4}" for i in range(60)], dtype=object)  # 15 clusters of 4
    fold = crossfit_folds(strata, clusters, 5, rng)
    assert set(fold) == set(range(5))
    for cl in set(clusters):
        assert len(set(fold[clusters == cl])) == 1
    for s in ("a", "b"):  # every stratum spread out
        counts = np.bincount(fold[strata == s], minlength=5)
        assert counts.max() - counts.min() <= 4
    assert len(set(crossfit_folds(strata, np.array(["x", "y"] * 30, dtype=object), 5, rng))) == 2


def test_cluster_bootstrap_keeps_clusters_whole():
    clusters = np.array([0, 0, 0, 1, 2, 2], dtype=object)
    for sample in bootstrap_indices(6, clusters, 20, np.random.default_rng(0)):
        counts = pd.Series(clusters[sample]).value_counts()
        assert all(counts[c] % {0: 3, 1: 1, 2: 2}[c] == 0 for c in counts.index)


# ------------------------------------------------------------------------------------------------
# the rules on the cone model (PUAudit §4.1) and on embeddings without signal


# fixture cone_model (tests/conftest.py): cone_comparisons(300, 600, d=32, alpha=0.7, seed=1)


def _pool_cons(result, data):
    truth = pd.Series(data.truth, index=data.table["id"])
    pool = result.pool
    return consistency(pool, truth[pool["id"]]).set_index("question_type").loc["all"]


@pytest.mark.parametrize(
    "scorer, rule",
    [
        ("centroid", "calibrated"),
        ("centroid", "calibrated-platt"),
        ("centroid", "two-sided"),
        ("centroid", "two-sided-platt"),
        ("pot-exact", "calibrated"),
        ("knn", "two-sided"),
    ],
)
def test_calibrated_rules_flip_the_bias_flipped_items_on_the_cone_model(cone_model, scorer, rule):
    result = audit(cone_model.table, cone_model.embeddings, scorer=scorer, rule=rule)
    cons = _pool_cons(result, cone_model)
    oracle_gain = 1 - cons.cons_orig
    assert cons.cons_adj - cons.cons_orig >= 0.8 * oracle_gain  # most of the oracle gain
    assert cons.flip_precision >= 0.95  # (almost) only judge errors
    decision = result.report.decision
    assert not decision.abstained and decision.evidence.crossfit_gain_lower_bound > 0
    lo, hi = decision.evidence.expected_gain_interval
    assert lo <= decision.evidence.expected_gain <= hi
    pool = result.pool
    assert ((pool.p_wrong_lo <= pool.p_wrong_hi) & pool.p_wrong.between(0, 1)).all()
    assert (pool.flipped == (pool.p_wrong > 0.5)).all()


def _shuffled(data, seed=0):
    """The same table with its embedding rows permuted: they say nothing about the judge's errors."""
    perm = np.random.default_rng(seed).permutation(len(data.table))
    e = data.embeddings
    return PairEmbeddings(e.ids, e.a[perm], e.b[perm])


@pytest.mark.parametrize("scorer", ["centroid", "knn"])
@pytest.mark.parametrize("rule", ["calibrated", "calibrated-platt", "two-sided"])
def test_without_signal_the_calibrated_rules_flip_nothing(cone_model, scorer, rule):
    result = audit(cone_model.table, _shuffled(cone_model), scorer=scorer, rule=rule)
    decision = result.report.decision
    assert result.pool.flipped.sum() == 0
    assert decision.abstained and decision.reason
    assert decision.evidence.expected_gain == 0
    paper_rule = audit(cone_model.table, _shuffled(cone_model), scorer=scorer, rule="paper")
    assert paper_rule.pool.flipped.mean() > 0.2  # the paper's rule flips anyway


def test_a_judge_that_is_always_right_is_never_flipped():
    data = cone_comparisons(n_labelled=200, n_unlabelled=300, d=16, alpha=1.0, seed=4)
    result = audit(data.table, data.embeddings, scorer="centroid", rule="calibrated")
    assert result.pool.flipped.sum() == 0 and result.report.decision.abstained


# ------------------------------------------------------------------------------------------------
# no leak: calibration uses the labelled rows only, out of fold


class NoSelfReference:
    """Centroid scores; records whether any scored row also sits in the reference it is scored against."""

    name = "no-self-reference"

    def __init__(self):
        self.overlaps = 0
        self.calls = 0

    def __call__(self, zp, zu, m):
        self.calls += 1
        sims = np.asarray(zu) @ np.asarray(zp).T
        self.overlaps += int((sims > 1 - 1e-12).any())
        return CentroidScorer()(zp, zu, m)


def test_labelled_rows_are_scored_out_of_fold_and_only_labelled_rows_calibrate(cone_model):
    scorer = NoSelfReference()
    result = audit(cone_model.table, cone_model.embeddings, scorer=scorer, rule="calibrated", folds=4)
    assert scorer.calls > 4 and scorer.overlaps == 0
    cf = result.crossfit
    items = result.items.set_index("id")
    pool_ids = set(result.pool["id"])
    assert not set(cf.labelled_ids) & pool_ids
    assert set(cf.labelled_ids) == set(items.index[items.status == "labelled"])
    np.testing.assert_array_equal(
        cf.correct, (items.loc[cf.labelled_ids, "judge"] == items.loc[cf.labelled_ids, "human"])
    )
    assert set(cf.fold) == set(range(4)) and cf.pool["score"].shape == (len(pool_ids), 4)


def test_hidden_labels_of_the_evaluation_pool_cannot_change_the_decision():
    """Rewrite the hidden human verdicts of the evaluation pool: the split, the audit's features and
    its decisions must not move (they would if calibration read the pool's truth)."""
    cone = cone_comparisons(n_labelled=600, n_unlabelled=0, d=32, alpha=0.7, seed=6)
    table = cone.table
    split = split_labels(table, p_ratio=0.3, seed=3)
    other = table.copy()
    hidden = other["id"].isin(split.eval_ids)
    other.loc[hidden, "human"] = np.where(other.loc[hidden, "human"] == "A", "B", "A")
    split2 = split_labels(other, p_ratio=0.3, seed=3)
    assert list(split2.eval_ids) == list(split.eval_ids)
    a = audit(split.table, cone.embeddings, scorer="centroid", rule="calibrated")
    b = audit(split2.table, cone.embeddings, scorer="centroid", rule="calibrated")
    pd.testing.assert_frame_equal(a.items, b.items)
    # ...while the visible labels do drive it: flip them and the calibrated rule changes its mind
    visible = ~other["id"].isin(split.eval_ids) & (split.table.human != "missing")
    flipped_visible = split.table.copy()
    flipped_visible.loc[visible, "human"] = np.where(flipped_visible.loc[visible, "human"] == "A", "B", "A")
    c = audit(flipped_visible, cone.embeddings, scorer="centroid", rule="calibrated")
    assert not c.pool.flipped.equals(a.pool.flipped)


# ------------------------------------------------------------------------------------------------
# plumbing: re-applying rules, errors, grouped splits, the hindsight ceiling


def test_rules_reapplied_to_one_audit_equal_their_own_audits(cone_model):
    base = audit(
        cone_model.table,
        cone_model.embeddings,
        scorer="centroid",
        rule="paper",
        crossfit_features=("score", "two-sided"),
    )
    for rule in ("calibrated", "two-sided", "paper"):
        own = audit(cone_model.table, cone_model.embeddings, scorer="centroid", rule=rule)
        items, _ = apply_rule(base.items, rule, crossfit=base.crossfit, m=base.report.m.value, eta=0.5, seed=0)
        np.testing.assert_array_equal(items.flipped, own.items.flipped)
        np.testing.assert_allclose(items.p_wrong, own.items.p_wrong, equal_nan=True)
    with pytest.raises(ValueError, match="cross-fitted"):
        apply_rule(
            audit(cone_model.table, cone_model.embeddings, scorer="centroid").items,
            "calibrated",
            crossfit=None,
            m=0.7,
            eta=0.5,
            seed=0,
        )
    with pytest.raises(ValueError, match="two-sided"):
        apply_rule(
            base.items,
            "two-sided",
            crossfit=audit(cone_model.table, cone_model.embeddings, scorer="centroid", rule="calibrated").crossfit,
            m=0.7,
            eta=0.5,
            seed=0,
        )


def test_threshold_and_options_are_validated():
    assert get_rule("calibrated", threshold=0.8).threshold == 0.8
    with pytest.raises(ValueError, match="threshold"):
        CalibratedRule(threshold=1.0)
    with pytest.raises(ValueError, match="method"):
        CalibratedRule(method="beta")
    with pytest.raises(ValueError, match="only apply"):
        get_rule("paper", threshold=0.6)


def test_a_higher_cost_of_wrong_flips_flips_less(cone_model):
    lenient = audit(
        cone_model.table, cone_model.embeddings, scorer="centroid", rule="calibrated", rule_options={"threshold": 0.3}
    )
    strict = audit(
        cone_model.table, cone_model.embeddings, scorer="centroid", rule="calibrated", rule_options={"threshold": 0.9}
    )
    assert strict.pool.flipped.sum() <= lenient.pool.flipped.sum()
    assert (strict.pool.flipped <= lenient.pool.flipped).all()


def test_grouped_split_keeps_each_group_on_one_side():
    data = cone_comparisons(n_labelled=240, n_unlabelled=0, d=16, seed=5)
    # prompts of 6 rows; a prompt's rows share a type except every fifth prompt, which straddles two
    table = data.table.assign(prompt=[f"q{i // 6}" if (i // 6) % 5 else f"q{i // 6}" for i in range(240)])
    table["question_type"] = [
        ("t1" if (i // 6) % 2 else "t2") if (i // 6) % 5 else ("t1" if i % 2 else "t2") for i in range(240)
    ]
    split = split_labels(table, p_ratio=0.25, seed=0, split_by="prompt")
    hidden = table["id"].isin(split.eval_ids)
    sides = table.assign(hidden=hidden).groupby("prompt")["hidden"].nunique()
    assert (sides == 1).all()
    assert 0 < hidden.mean() < 1
    with pytest.raises(ValueError, match="not a column"):
        split_labels(table, p_ratio=0.25, seed=0, split_by="nope")
    result = audit(split.table, data.embeddings, scorer="centroid", rule="calibrated", cluster_by="prompt")
    cf = result.crossfit
    assert all(len(set(cf.fold[cf.cluster == c])) == 1 for c in set(cf.cluster))
    assert result.report.decision.evidence.bootstrap_unit == "cluster"
    with pytest.raises(ValueError, match="cluster_by"):
        audit(split.table, data.embeddings, scorer="centroid", rule="calibrated", cluster_by="nope")


def test_the_papers_rule_is_named_paper_and_its_old_name_still_works_with_a_warning():
    """The rule named "seed" (the paper was "seed 000") is "paper"; "seed" is an alias for one release."""
    from puaudit_jax.audit.rules import RULES, get_rule, rule_name

    with pytest.warns(FutureWarning, match="the rule 'seed' is now named 'paper'"):
        assert get_rule("seed") is RULES["paper"]
    assert rule_name("seed") == rule_name(RULES["paper"]) == "paper"
