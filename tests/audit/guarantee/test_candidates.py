"""The guarantee's candidates and the valid choice among them (``candidates``, ``semi_supervised``, ``needed``).

The label-free score is the sum of the judge's agreements (both orders, other judges, its certainty);
every labelled row tests it, which certifies a strong judge whole where half of the labels cannot; the
choice among candidates keeps the guarantee over simulated splits; prediction-powered p-values stay
valid and test thresholds the exact test cannot reach; the labels-needed range never reads 0 or more
rows than exist.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit.evidence import label_free_score, preference_certainty
from puaudit_jax.audit.guarantee import (
    LabelsNeeded,
    binomial_curve,
    choose,
    fitted,
    label_free,
    labels_needed,
    ppi_curve,
    select_on,
)
from puaudit_jax.audit.guarantee.semi_supervised import MIN_CLT

A, D = 0.8, 0.1
FLIP = {"A": "B", "B": "A"}


def test_the_label_free_score_sums_the_judges_agreements_and_is_minus_inf_where_it_picked_no_side():
    table = pd.DataFrame({"id": list("abcde"), "judge": ["A", "B", "A", "tie", "B"],
                          "judge_swapped": ["A", "A", "missing", "A", "B"],
                          "judge_confidence": [1.0, 0.5, np.nan, 0.9, 0.9],
                          "g": ["A", "B", "B", "A", "tie"], "h": ["A", "A", "missing", "B", "B"]})  # fmt: skip
    score = label_free_score(table, ("g", "h"))
    certain = preference_certainty(np.array([0.9]))[0]
    np.testing.assert_allclose(score, [1 + 1 + 1, -1 + 0 + 0, 0 - 1 + 0, -np.inf, 1 + 1 + certain])
    np.testing.assert_allclose(preference_certainty(np.array([0.5, 1.0, 0.0])), [0.0, 1.0, 1.0], atol=1e-9)
    assert (label_free_score(table[["id", "judge"]]) == np.where(table.judge == "tie", -np.inf, 0.0)).all()
    np.testing.assert_allclose(label_free_score(table, ("g", "h"), kinds=("others",))[:3], [1, 0, -1])


def _judge(rng, n, agreement):
    human = rng.choice(np.array(["A", "B"], dtype=object), n)
    right = rng.random(n) < agreement
    return np.where(right, human, [FLIP[h] for h in human]).astype(object), human, right


def test_every_label_tests_a_label_free_candidate_which_certifies_a_strong_judge_whole_where_half_cannot():
    rng, whole, half = np.random.default_rng(0), [], []
    for _ in range(200):
        judge, human, _ = _judge(rng, 900, 0.87)
        labelled, pool = np.arange(150), np.arange(150, 900)  # 150 labels, no evidence: one level
        flat = label_free(np.zeros(900), judge, labelled)
        whole.append(choose([flat], pool, human, A, D).kept is not None)
        half.append(choose([replace(flat, calibration=labelled[:75])], pool, human, A, D).kept is not None)
    assert np.mean(whole) > 0.75 and np.mean(half) < np.mean(whole) - 0.2


def _candidates(rng, n=1400, n_lab=400):
    """A judge right with probability q ~ U(0.5, 1); a fitted P(wrong) that knows q, tested on half of the labels,
    and a label-free score that knows nothing (one level), tested on all."""
    q = rng.uniform(0.5, 1.0, n)
    human = rng.choice(np.array(["A", "B"], dtype=object), n)
    judge = np.where(rng.random(n) < q, human, [FLIP[h] for h in human]).astype(object)
    labelled, pool = np.arange(n_lab), np.arange(n_lab, n)
    cands = [label_free(np.zeros(n), judge, labelled), fitted(1 - q, judge, labelled[: n_lab // 2], pool)]
    return cands, human, pool


def test_the_choice_among_candidates_keeps_the_guarantee_and_takes_the_one_that_certifies_more():
    rng, splits, violations, kept = np.random.default_rng(1), 500, [], []
    for _ in range(splits):
        cands, human, pool = _candidates(rng)
        choice = choose(cands, pool, human, A, D)
        assert all(s.level == pytest.approx(D / 2) for s in choice.selections.values())  # equal shares: D / 2 each
        assert choice.n_calibration == {"label-free": 400, "fitted": 200}
        kept.append(choice.kept)
        if choice.kept is None:
            continue
        c = next(c for c in cands if c.name == choice.kept)
        rows = pool[c.q[pool] >= choice.selection.threshold]
        violations.append(np.mean(c.final[rows] == human[rows]) < A)
        best = max(s.coverage for s in choice.selections.values())
        assert choice.selection.coverage == best
    assert np.sum(violations) / splits <= D + 3 * np.sqrt(D * (1 - D) / splits)
    assert kept.count("fitted") > splits / 2  # the score that ranks wins where the flat one cannot reach A


def test_prediction_powered_p_values_stay_valid_and_certify_more_where_the_predictions_are_calibrated():
    rng, splits, out = np.random.default_rng(2), 400, {"exact": [], "ppi": []}
    for _ in range(splits):
        q_cal, q_pool = rng.uniform(0.6, 1.0, 120), rng.uniform(0.6, 1.0, 3000)
        correct = rng.random(120) < q_cal
        for name, curve_of in (("exact", binomial_curve), ("ppi", ppi_curve)):
            sel = select_on(curve_of(q_cal, correct, q_pool, 0.85), 120, 0.85, D)
            t = sel.threshold
            out[name].append((t is not None and (1 + t) / 2 < 0.85, 0.0 if t is None else np.mean(q_pool >= t)))
    for name, rows in out.items():
        assert np.mean([v for v, _ in rows]) <= D + 3 * np.sqrt(D * (1 - D) / splits), name
    # measured: 33 against 17 % of the pool (A = 0.85, 120 calibration rows, 3,000 pool rows)
    assert np.mean([c for _, c in out["ppi"]]) > np.mean([c for _, c in out["exact"]]) + 0.08


def test_prediction_powered_p_values_fall_back_to_the_exact_ones_with_few_rows_or_no_error():
    rng = np.random.default_rng(3)
    q_cal, q_pool = rng.uniform(0.6, 1.0, 200), rng.uniform(0.6, 1.0, 2000)
    correct = rng.random(200) < q_cal
    exact, ppi = binomial_curve(q_cal, correct, q_pool, 0.9), ppi_curve(q_cal, correct, q_pool, 0.9)
    fallback = (exact.n < MIN_CLT) | (exact.errors == 0)
    assert fallback.any() and (~fallback).any()
    np.testing.assert_array_equal(ppi.p_value[fallback], exact.p_value[fallback])
    assert not np.allclose(ppi.p_value[~fallback], exact.p_value[~fallback])


def test_labels_needed_is_a_range_above_zero_no_larger_than_the_pool_and_about_right():
    rng = np.random.default_rng(4)
    judge, human, _ = _judge(rng, 660, 0.93)
    labelled, pool = np.arange(60), np.arange(60, 660)  # 60 labels: too few to certify A = 0.9 at once
    cands = [label_free(np.zeros(660), judge, labelled)]
    assert choose(cands, pool, human, 0.9, D).kept is None
    needed = labels_needed(cands, pool, human, 60, 0.9, D)
    assert isinstance(needed, LabelsNeeded) and 1 <= needed.low <= (needed.high or 600) <= 600
    assert "more labelled rows" in needed.text() and " 0 more" not in needed.text()
    certify = []  # with `low` more labels from the same judge, about half of fresh samples certify
    for _ in range(60):
        j, h, _ = _judge(rng, 60 + needed.low + 600, 0.93)
        size = 60 + needed.low
        certify.append(choose([label_free(np.zeros(len(j)), j, np.arange(size))], np.arange(size, len(j)), h,
                              0.9, D).kept is not None)  # fmt: skip
    assert 0.25 <= np.mean(certify) <= 0.9
    weak, h, _ = _judge(rng, 660, 0.8)  # a judge at 80 %: no number of labels certifies A = 0.9
    assert labels_needed([label_free(np.zeros(660), weak, labelled)], pool, h, 60, 0.9, D) is None


def test_the_labels_needed_simulation_tests_each_candidate_at_its_own_share_of_delta():
    """A candidate beside a useless one whose share is nearly 0 is simulated as if alone (at nearly all of D)."""
    from puaudit_jax.audit.guarantee.needed import certify_share

    rng = np.random.default_rng(5)
    judge, human, _ = _judge(rng, 700, 0.9)
    labelled, pool = np.arange(100), np.arange(100, 700)
    alone = label_free(np.zeros(700), judge, labelled)
    useless = replace(fitted(np.full(700, np.nan), judge, np.zeros(0, int), pool), share=1e-9)  # draws nothing
    beside = [replace(alone, share=1.0), useless]
    for scale in (0.5, 1.0, 1.5):
        one = certify_share([alone], pool, human, 0.85, D, scale, np.random.default_rng(0))
        two = certify_share(beside, pool, human, 0.85, D, scale, np.random.default_rng(0))
        assert one == two, scale
    half = certify_share([replace(alone, share=0.5), replace(useless, share=0.5)], pool, human, 0.85, D, 1.0,
                         np.random.default_rng(0))  # fmt: skip
    assert half < certify_share([alone], pool, human, 0.85, D, 1.0, np.random.default_rng(0))
