"""Judge-side evidence in the audit: the features, the one model of P(judge wrong), and the decision.

Synthetic sets where the truth is known: a judge that errs exactly where it picked the longer answer
on one question type (found and flipped, nothing else), a set where style says nothing (abstain), a
judge inconsistent across orders (the inconsistent items get a higher P(wrong)); and the options'
errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit import audit
from puaudit_jax.audit.calibration import fit_logistic
from puaudit_jax.audit.embed import PairEmbeddings
from puaudit_jax.audit.evidence import judge_evidence
from puaudit_jax.datasets import ComparisonValidationError, validate_comparisons
from puaudit_jax.datasets.style import style_counts, style_differences

TYPES = ("t1", "t2", "t3")


def _words(rng, k: int) -> str:
    return " ".join(f"w{v}" for v in rng.integers(0, 1000, k))


def _table(n_labelled: int, n_pool: int, *, seed: int, judge_of) -> tuple[pd.DataFrame, pd.Series]:
    """Rows with random lengths (short 20-40 words, long 80-160), a human verdict, and the judge's
    verdict ``judge_of(rng, type, human, longer)``; pool rows have their human label hidden."""
    rng = np.random.default_rng(seed)
    n = n_labelled + n_pool
    rows, truth = [], {}
    for i in range(n):
        t = TYPES[i % len(TYPES)]
        a_long = rng.random() < 0.5
        a = _words(rng, int(rng.integers(80, 160) if a_long else rng.integers(20, 40)))
        b = _words(rng, int(rng.integers(20, 40) if a_long else rng.integers(80, 160)))
        longer = "A" if a_long else "B"
        human, judge = judge_of(rng, t, longer)
        rows.append(dict(id=f"r{i}", question=f"question {i}", response_a=a, response_b=b, judge=judge,
                         human=human if i < n_labelled else "missing", question_type=t))  # fmt: skip
        truth[f"r{i}"] = human
    return validate_comparisons(pd.DataFrame(rows)), pd.Series(truth)


def _noise_embeddings(table: pd.DataFrame, seed: int = 0) -> PairEmbeddings:
    """Embeddings that say nothing about the judge (the audit's PU score is noise here)."""
    rng = np.random.default_rng(seed)
    return PairEmbeddings(
        table["id"].to_numpy(str), rng.normal(size=(len(table), 16)), rng.normal(size=(len(table), 16))
    )


def _longer_on_t1(rng, t, longer):
    """t1: the human's winner is the shorter answer; the judge picks the longer one 40 % of the time
    (then it is wrong). t2 / t3: the judge is right except 10 % random errors, whatever the lengths."""
    shorter = "B" if longer == "A" else "A"
    if t == "t1":
        return shorter, longer if rng.random() < 0.4 else shorter
    human = "A" if rng.random() < 0.5 else "B"
    return human, human if rng.random() < 0.9 else ("B" if human == "A" else "A")


def test_style_counts_markdown_outside_code_and_differences():
    text = "# Title\nSome **bold** and __more__.\n\n- one\n* two\n3. three\n```py\n# comment\n- no\n```\n## Sub\n"
    counts = style_counts([text, None, ""]).iloc[0].to_dict()
    assert counts == dict(chars=len(text), tokens=counts["tokens"], headers=2, list_items=3, bold=2, code_blocks=1)
    assert style_counts([None]).to_numpy().sum() == 0
    diff = style_differences(pd.DataFrame(dict(response_a=["a b c", None], response_b=["a", None])))
    assert diff.loc[0, "tokens"] == pytest.approx((3 - 1) / (3 + 1)) and (diff.loc[1] == 0).all()


def test_the_audit_flips_exactly_where_the_judge_picked_the_longer_answer_on_one_type():
    table, truth = _table(600, 300, seed=0, judge_of=_longer_on_t1)
    res = audit(table, _noise_embeddings(table), scorer="centroid", rule="evidence", evidence=("style",))
    pool = res.pool.set_index("id")
    rows = table.set_index("id").loc[pool.index]
    longer = np.where(style_differences(rows)["tokens"] > 0, "A", "B")
    target = (rows["question_type"] == "t1").to_numpy() & (rows["judge"].to_numpy() == longer)
    decision = res.report.decision
    assert not decision.abstained and target.sum() > 20
    np.testing.assert_array_equal(pool["flipped"].to_numpy(bool), target)
    assert (pool["adjusted"] == truth.loc[pool.index]).mean() > (pool["judge"] == truth.loc[pool.index]).mean() + 0.05
    assert decision.judge_evidence["features"][0] == "style:tokens"  # embedding switched off: style alone
    assert decision.judge_evidence["skipped"]["swapped"] == "switched off"


def test_where_style_says_nothing_the_rule_abstains():
    def random_errors(rng, t, longer):
        human = "A" if rng.random() < 0.5 else "B"
        return human, human if rng.random() < 0.8 else ("B" if human == "A" else "A")

    table, _ = _table(300, 200, seed=1, judge_of=random_errors)
    res = audit(table, _noise_embeddings(table, 1), scorer="centroid", rule="evidence")
    assert res.report.decision.abstained and not res.pool["flipped"].any()
    assert set(res.report.decision.judge_evidence["skipped"]) >= {"swapped", "confidence", "others"}


def test_inconsistent_verdicts_get_a_higher_p_wrong():
    """Consistent across orders: right 90 %; inconsistent: right 40 % (the swapped verdict differs)."""
    rng = np.random.default_rng(2)
    table, _ = _table(400, 300, seed=2, judge_of=lambda r, t, longer: ("A", "A"))
    human = np.where(rng.random(len(table)) < 0.5, "A", "B")
    consistent = rng.random(len(table)) < 0.7
    right = rng.random(len(table)) < np.where(consistent, 0.9, 0.4)
    judge = np.where(right, human, np.where(human == "A", "B", "A"))
    swapped = np.where(consistent, judge, np.where(judge == "A", "B", "A"))
    table = table.assign(
        judge=judge, judge_swapped=swapped, human=np.where(np.arange(len(table)) < 400, human, "missing")
    )
    res = audit(validate_comparisons(table), _noise_embeddings(table, 2), scorer="centroid", rule="evidence")
    pool = res.pool.set_index("id")
    inconsistent = ~consistent[np.isin(table["id"], pool.index)]
    p = pool["p_wrong"].to_numpy(float)
    assert p[inconsistent].mean() > p[~inconsistent].mean() + 0.25
    assert res.report.decision.judge_evidence["rows"]["swapped"] == len(table)
    assert res.report.decision.judge_evidence["coefficients"]["swapped:agrees"] > 0.5


def test_evidence_features_are_signed_by_the_judge_and_validated():
    rows = dict(id=["1", "2", "3", "4"], question="q", response_a=["a b c d", "x", "y", "z z"],
                response_b=["a", "x y z", "y", "z"], judge=["A", "A", "B", "tie"], judge_swapped=["A", "B", None, "A"],
                judge_confidence=[0.9, None, 0.5, 0.1], other=["A", "B", "tie", "A"], other2=["A"] * 4)  # fmt: skip
    table = validate_comparisons(pd.DataFrame(rows))
    ev = judge_evidence(table, ("style", "swapped", "confidence", "others"), ("other", "other2"))
    x = pd.DataFrame(ev.features, columns=ev.names)
    assert x["style:tokens"].tolist() == pytest.approx([0.6, -0.5, 0.0, 0.0])  # the judge picked the longer / shorter
    assert x["swapped:agrees"].tolist() == [1.0, -1.0, 0.0, 0.0] and x["swapped:missing"].tolist() == [0, 0, 1, 0]
    assert x["others:agree"].tolist() == [1.0, 0.0, -1.0, 0.0]  # means over the judges that chose a side
    assert x["confidence"].tolist() == pytest.approx([0.2, 0.0, -0.2, 0.0]) and ev.rows["confidence"] == 2
    assert "style:headers" not in ev.names and ev.rows == {"style": 3, "swapped": 2, "confidence": 2, "others": 3}
    with pytest.raises(ComparisonValidationError, match="column 'nope': no such column"):
        judge_evidence(table, ("others",), ("nope",))
    with pytest.raises(ValueError, match="unknown evidence"):
        judge_evidence(table, ("vibes",))
    bad = pd.DataFrame(dict(id=["1", "2"], question="q", response_a="a", response_b="b", judge="A",
                            judge_swapped=["A", "maybe"], judge_confidence=[0.5, 2]))  # fmt: skip
    with pytest.raises(ComparisonValidationError) as err:
        validate_comparisons(bad)
    assert "row 2 (id '2'): column 'judge_swapped'" in str(err.value)
    assert "row 2 (id '2'): column 'judge_confidence': expected a number in [0, 1], got 2" in str(err.value)


def test_logistic_map_learns_a_per_group_slope_only_where_there_is_one():
    rng = np.random.default_rng(3)
    n = 20000
    x = rng.normal(size=(n, 2))
    g = rng.choice(["a", "b"], n)
    logit = 1.0 + 1.2 * x[:, 0] + np.where(g == "a", -2.0, 0.0) * x[:, 1]
    c = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    fitted = fit_logistic(x, c, g, ridge=0.1, slope_ridge=1.0)  # light penalties: the structure, not shrinkage
    total = {k: fitted.w + fitted.slopes[k] for k in ("a", "b")}  # each group's slopes
    sd = x.std(0)  # slopes are per standard deviation
    assert total["a"][0] == pytest.approx(1.2 * sd[0], abs=0.2) and total["b"][0] == pytest.approx(1.2 * sd[0], abs=0.2)
    assert total["a"][1] == pytest.approx(-2.0 * sd[1], abs=0.3) and total["b"][1] == pytest.approx(0.0, abs=0.2)
    pooled = fit_logistic(x, c, g, interact=[True, False], ridge=0.1, slope_ridge=1.0)
    assert pooled.slopes["a"][1] == 0.0 and pooled.slopes["b"][1] == 0.0
    assert -1.3 * sd[1] < pooled.w[1] < -0.7 * sd[1]  # one slope for both: about the average of -2 and 0


def test_maps_look_up_each_items_group_and_give_unknown_groups_no_effect():
    """LogisticMap and PlattMap evaluated at once on a pool equal the item-by-item formula; a group the
    map never saw (or None) gets no offset and no slope deviation."""
    from puaudit_jax.audit.calibration import LogisticMap, PlattMap

    rng = np.random.default_rng(4)
    x = rng.normal(size=(9, 2))
    groups = np.array(["new", "a", "b", "a", None, "b", "b", "a", "new"], dtype=object)  # None after "b": -1 codes
    slopes = {"a": np.array([0.5, -1.0]), "b": np.array([0.0, 2.0])}
    fitted = LogisticMap(0.3, np.array([1.0, 0.2]), {"a": -0.7, "b": 0.4}, slopes, np.zeros(2), np.ones(2))
    z = x
    by_item = [
        0.3 + fitted.offsets.get(g, 0.0) + z[i] @ (fitted.w + slopes.get(g, np.zeros(2))) for i, g in enumerate(groups)
    ]
    np.testing.assert_allclose(fitted(x, groups), 1 / (1 + np.exp(-np.array(by_item))), rtol=1e-12)
    np.testing.assert_allclose(fitted(x), 1 / (1 + np.exp(-(0.3 + z @ fitted.w))), rtol=1e-12)
    assert fitted(x[:0], groups[:0]).shape == (0,)
    platt = PlattMap(0.1, 2.0, {"a": 1.0})
    expected = [1 / (1 + np.exp(-(0.1 + (1.0 if g == "a" else 0.0) + 2.0 * v))) for v, g in zip(x[:, 0], groups)]
    np.testing.assert_allclose(platt(x[:, 0], groups), expected, rtol=1e-12)


def _confident_where_right(seed: int, shown):
    """A cone set whose judge reports confidence 0.9-1 when right and 0.5-0.6 when wrong, on the rows ``shown``
    picks (a function of the labelled mask and a Generator); NaN elsewhere."""
    from puaudit_jax.audit.synthetic import cone_comparisons

    cone = cone_comparisons(n_labelled=300, n_unlabelled=600, d=32, alpha=0.7, seed=seed)
    table, rng = cone.table.copy(), np.random.default_rng(seed)
    right = table["judge"].to_numpy() == cone.truth
    confidence = np.where(right, rng.uniform(0.9, 1.0, len(table)), rng.uniform(0.5, 0.6, len(table)))
    keep = shown((table["human"] != "missing").to_numpy(), rng)
    return table.assign(judge_confidence=np.where(keep, confidence, np.nan)), cone, right


def test_evidence_present_only_where_a_human_looked_is_left_out_and_the_interval_covers():
    """Issue 40: confidence filled on the labelled rows only told the model which rows were labelled; the
    PPI++ (audit) agreement interval excluded the truth at 3 of 3 seeds (0.741 [0.720, 0.762] against 0.681)."""
    for seed in range(3):
        table, cone, right = _confident_where_right(seed, lambda labelled, rng: labelled)
        res = audit(table, cone.embeddings, scorer="centroid")
        why = res.report.decision.judge_evidence["skipped"]["confidence"]
        assert why.startswith("missing unequally: present on 100% of the labelled rows and 0% of the pool"), why
        assert "warning: evidence 'confidence' left out, missing unequally" in res.report.summary()
        ppi = next(r.estimate for r in res.report.agreement if r.estimate.estimator == "ppi++ (audit)")
        assert ppi.lower <= right.mean() <= ppi.upper, (seed, ppi, right.mean())


def test_evidence_missing_at_random_on_both_sides_is_kept():
    table, cone, _ = _confident_where_right(0, lambda labelled, rng: rng.random(len(labelled)) < 0.7)
    res = audit(table, cone.embeddings, scorer="centroid")
    evidence = res.report.decision.judge_evidence
    assert "confidence" not in evidence["skipped"] and "confidence" in evidence["features"]
