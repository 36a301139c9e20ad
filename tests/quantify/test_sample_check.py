"""The tests of labelled against pool rows equal scipy.stats' (chi-square with Yates, Fisher exact)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2_contingency

from puaudit_jax.quantify.sample_check import fisher_exact_p, independence_p_value, sample_check

tables = st.integers(2, 6).flatmap(
    lambda g: st.lists(st.tuples(st.integers(1, 400), st.integers(0, 400)), min_size=g, max_size=g)
)


@settings(max_examples=200, deadline=None)
@given(tables)
def test_independence_p_value_equals_scipy(rows):
    counts = np.array(rows)
    if counts[:, 1].sum() == 0:  # the check returns no p-value then (an empty column)
        counts[0, 1] = 1
    assert independence_p_value(counts) == pytest.approx(chi2_contingency(counts)[1], rel=1e-9, abs=1e-300)


def test_a_labelled_share_that_depends_on_the_group_is_flagged():
    groups = np.array(["a"] * 100 + ["b"] * 100)
    labelled = np.r_[np.ones(60, bool), np.zeros(40, bool), np.ones(10, bool), np.zeros(90, bool)]
    check = sample_check(groups, labelled, ~labelled, "question_type")
    assert check.p_value == pytest.approx(chi2_contingency([[60, 40], [10, 90]])[1])
    assert "not a random sample" in check.warning


def test_within_strata_the_check_sums_the_strata_and_ignores_shares_that_differ_between_them():
    """Labels random within each type but at 80 % in one type and 10 % in the other, whose verdict mixes
    differ: the pooled check by verdict flags it, the check within types does not; a within-type
    dependence is still found, and the p-value is the chi-square of the summed statistics."""
    from scipy.stats import chi2

    rng = np.random.default_rng(3)
    types = np.repeat(["code", "chat"], 500)
    verdict = np.where(
        types == "code", np.where(rng.random(1000) < 0.8, "A", "B"), np.where(rng.random(1000) < 0.2, "A", "B")
    )
    labelled = rng.random(1000) < np.where(types == "code", 0.8, 0.1)
    pooled = sample_check(verdict, labelled, ~labelled, "judge")
    within = sample_check(verdict, labelled, ~labelled, "judge", strata=types, within="question_type")
    assert pooled.warning and not within.warning and within.within == "question_type"
    tables = [[[int(((verdict == v) & (types == t) & lab).sum()) for lab in (labelled, ~labelled)] for v in "AB"]
              for t in ("chat", "code")]  # fmt: skip
    stat = sum(chi2_contingency(t)[0] for t in tables)
    assert within.p_value == pytest.approx(chi2.sf(stat, 2), rel=1e-9)
    chosen = labelled & ((verdict == "B") | (rng.random(1000) < 0.3))  # labels drawn less on A, in both types
    found = sample_check(verdict, chosen, ~chosen, "judge", strata=types, within="question_type")
    assert "differs across judge values within question_type values" in found.warning


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=4, max_size=4))
def test_fisher_exact_p_equals_scipy(cells):
    from scipy.stats import fisher_exact

    table = np.array(cells).reshape(2, 2)
    assert fisher_exact_p(table) == pytest.approx(fisher_exact(table).pvalue, rel=1e-9, abs=1e-300)


def test_the_balance_check_is_uniform_under_random_labels_and_flags_labels_drawn_by_a_feature():
    """Permutation p-values within strata: about alpha of random labellings flagged; labels drawn where one
    feature is high flagged every time, and the warning names that feature."""
    from puaudit_jax.quantify.sample_check import BalanceCheck, balance_check, check_from_dict

    rng = np.random.default_rng(0)
    n = 600
    x = np.column_stack([rng.normal(size=n), rng.integers(-1, 2, n), rng.random(n)])
    strata = rng.integers(0, 3, n).astype(str)
    p_values = []
    for seed in range(200):
        lab = np.random.default_rng(seed).random(n) < 0.3
        p_values.append(balance_check(x, ["a", "b", "c"], lab, ~lab, strata, permutations=199, seed=seed).p_value)
    assert 0.35 < np.mean(p_values) < 0.65 and np.mean(np.array(p_values) < 0.05) <= 0.05 + 3 * np.sqrt(0.05 / 200)
    chosen = (x[:, 1] == 1) & (rng.random(n) < 0.8)  # labels only where "b" agrees
    check = balance_check(x, ["a", "b", "c"], chosen, ~chosen, strata)
    assert check.p_value == pytest.approx(1 / 1000) and check.features["b"][0] == 1.0
    assert "largest gap: b 1.00 labelled" in check.warning and "within question_type values" in check.warning
    assert check_from_dict(check.to_dict()) == check and isinstance(check_from_dict(check.to_dict()), BalanceCheck)
    # a share that differs between strata is no imbalance within them
    by_stratum = np.where(strata == "0", rng.random(n) < 0.6, rng.random(n) < 0.1)
    shifted = x + (strata == "0")[:, None] * 2.0  # stratum 0 sits elsewhere
    assert balance_check(shifted, ["a", "b", "c"], by_stratum, ~by_stratum, strata).p_value > 0.01
    assert balance_check(x, ["a", "b", "c"], np.zeros(n, bool), np.ones(n, bool), strata).p_value is None
