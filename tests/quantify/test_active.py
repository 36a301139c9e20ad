"""The label planner and the active (inverse-probability-weighted) estimators.

The weighted estimator equals the plain one when sampling is uniform; the planner samples uniformly
when P(judge wrong) is constant; a simulation where the plan over-samples the items the judge gets
wrong covers at the nominal level while the unweighted mean of the same labels does not; bad plans
are named errors.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.quantify import HUMAN_ONLY, PPI, ppi_mean, quantify
from puaudit_jax.quantify.active import active_mean, inclusion_probability, sampling_probabilities, uncertainty
from puaudit_jax.quantify.plan import PlanConfig, plan_labels, planned_probabilities


def test_sampling_probabilities_sum_to_the_budget_cap_at_one_and_are_uniform_for_constant_uncertainty():
    rng = np.random.default_rng(0)
    u = rng.random(500) ** 4
    for budget, mix in ((50, 0.2), (400, 0.0), (500, 0.5)):
        pi = sampling_probabilities(u, budget, mix)
        assert pi.sum() == pytest.approx(budget) and (pi > 0).all() and (pi <= 1).all()
    np.testing.assert_allclose(sampling_probabilities(np.full(300, 0.4), 30, 0.0), 0.1)
    pool, others = sampling_probabilities(u[:400], 40, 0.2, others=u[400:])
    order = np.argsort(np.r_[u[:400], u[400:]])
    assert np.all(np.diff(np.r_[pool, others][order]) >= -1e-12)  # one monotone rule for both sets
    with pytest.raises(ValueError, match="budget 501 must be in"):
        sampling_probabilities(u, 501)


def test_the_weighted_estimator_equals_the_plain_one_under_uniform_sampling():
    rng = np.random.default_rng(1)
    y = rng.binomial(1, 0.6, 1000).astype(float)
    yhat = np.clip(y + rng.normal(0, 0.4, 1000), 0, 1)
    lab = np.zeros(1000, bool)
    lab[rng.choice(1000, 150, replace=False)] = True
    pi = np.full(1000, 0.15)
    for lam in (0.0, 0.5, 1.0):
        ours = active_mean(y, yhat, pi, lab, 0.9, lam=lam)
        plain = ppi_mean(y[lab], yhat[lab], yhat, 0.9, lam=lam)  # the "unlabelled" set: every item
        assert ours.estimate == pytest.approx(plain.estimate, abs=1e-12)
    assert active_mean(y, yhat, pi, lab, 0.9, lam=0.0).estimate == pytest.approx(y[lab].mean())


def _judged(n: int, rng) -> pd.DataFrame:
    """A judge that is wrong with probability p_wrong, p_wrong known (a calibrated audit)."""
    p_wrong = np.where(rng.random(n) < 0.2, 0.45, 0.03)
    human = np.where(rng.random(n) < 0.5, "A", "B")
    judge = np.where(rng.random(n) < p_wrong, np.where(human == "A", "B", "A"), human)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "judge": judge, "human": human}), p_wrong


def test_the_planner_is_uniform_without_signal_and_a_budget_larger_than_the_pool_is_an_error():
    table, _ = _judged(400, np.random.default_rng(2))
    shown = table.assign(human=np.where(np.arange(400) < 40, table["human"], "missing"))
    report = plan_labels(shown, None, PlanConfig(budget=36))
    pool = report.frame[report.frame["role"] == "pool"]
    np.testing.assert_allclose(pool["sampling_prob"], 36 / 360)
    assert not report.informative and (report.power["planned"] == report.power["random"]).all()
    with pytest.raises(ValueError, match="larger than the pool of 360"):
        plan_labels(shown, None, PlanConfig(budget=361))
    with pytest.raises(ValueError, match="every usable row already has a human label"):
        plan_labels(table, None, PlanConfig(budget=10))
    failed = shown.assign(judge=np.where(shown["human"] == "missing", "missing", shown["judge"]))  # a failed run
    with pytest.raises(ValueError, match="the 360 rows without a human label have no judge verdict either"):
        plan_labels(failed, None, PlanConfig(budget=10))


def test_active_estimates_cover_where_the_unweighted_labels_are_biased():
    rng = np.random.default_rng(3)
    level, covered, naive = 0.9, [], []
    for rep in range(200):
        table, p_wrong = _judged(1500, rng)
        truth = float((table["judge"] == table["human"]).mean())
        first = rng.random(1500) < 0.05
        shown = table.assign(human=np.where(first, table["human"], "missing"))
        report = plan_labels(shown, p_wrong, PlanConfig(budget=150, seed=rep))
        chosen = report.frame.set_index("id")["selected"].reindex(table["id"]).fillna(False).to_numpy(bool)
        back = shown.assign(human=np.where(chosen | first, table["human"], "missing"))
        frame = quantify(back, plan=report.frame, audit_items=None).to_frame().set_index(["target", "estimator"])
        est, share = frame.loc[("agreement m", HUMAN_ONLY)], frame.loc[("share of A wins", PPI)]
        truth_a = float((table["human"] == "A").mean())
        covered.append([est["lower"] <= truth <= est["upper"], share["lower"] <= truth_a <= share["upper"]])
        agree = (table["judge"] == table["human"]).to_numpy(float)[chosen | first]
        half = 1.645 * agree.std() / np.sqrt(len(agree))
        naive.append(abs(agree.mean() - truth) <= half)  # the same labels, unweighted
    assert (np.mean(covered, axis=0) >= level - 3 * np.sqrt(level * (1 - level) / 200)).all()
    assert np.mean(naive) < 0.5  # the plan over-samples the judge's errors: the unweighted mean is biased


def test_a_plan_read_back_names_labels_never_planned_and_planned_items_without_labels():
    table, p_wrong = _judged(300, np.random.default_rng(4))
    shown = table.assign(human=np.where(np.arange(300) < 30, table["human"], "missing"))
    report = plan_labels(shown, p_wrong, PlanConfig(budget=40))
    chosen = report.frame.set_index("id")["selected"].reindex(table["id"]).to_numpy(bool)
    back = shown.assign(human=np.where(chosen, table["human"], shown["human"]))
    pi = planned_probabilities(back, report.frame)
    share = 30 / 300
    np.testing.assert_allclose(pi, inclusion_probability(report.frame["sampling_prob"], share))  # two-phase
    assert (report.frame["design"] == "two-phase").all()
    conditional = report.frame.assign(design="conditional")  # the earlier labels count as themselves
    np.testing.assert_allclose(planned_probabilities(back, conditional)[:30], 1.0)
    np.testing.assert_allclose(planned_probabilities(back, conditional)[30:], report.frame["sampling_prob"][30:])
    with pytest.raises(ValueError, match="design column must hold one of two-phase, conditional"):
        planned_probabilities(back, report.frame.assign(design="other"))
    stray = int(np.flatnonzero(~chosen & (np.arange(300) >= 30))[0])
    with pytest.raises(ValueError, match=rf"labels came back for 1 items the plan never selected, e.g. id 'r{stray}'"):
        planned_probabilities(back.assign(human=np.where(np.arange(300) == stray, "A", back["human"])), report.frame)
    with pytest.raises(ValueError, match="planned items have no human label"):
        planned_probabilities(shown, report.frame)
    broken = report.frame.assign(
        sampling_prob=np.where(report.frame["selected"], np.nan, report.frame["sampling_prob"])
    )
    with pytest.raises(ValueError, match="no valid sampling probability"):
        planned_probabilities(back, broken)
    with pytest.raises(ValueError, match="not in the label plan"):
        planned_probabilities(back, report.frame.iloc[1:])
    stranger = pd.concat([report.frame, report.frame.iloc[[5]].assign(id="bogus:1")], ignore_index=True)
    with pytest.raises(ValueError, match=r"lists 1 ids that are not in the table.*e.g. id 'bogus:1'"):
        planned_probabilities(back, stranger)  # before: ignored in silence
    doubled = pd.concat([report.frame, report.frame.iloc[[5]]], ignore_index=True)
    with pytest.raises(ValueError, match=r"lists 2 rows under an id that is not unique, e.g. id 'r5'"):
        planned_probabilities(back, doubled)
    # values the planner never writes were read as "not selected" / ignored
    with pytest.raises(ValueError, match=r"300 rows whose selected is neither True nor False, e.g. id 'r0'"):
        planned_probabilities(back, report.frame.assign(selected="maybe"))
    odd = report.frame.assign(role=np.where(np.arange(300) == 7, "weird", report.frame["role"]))
    with pytest.raises(ValueError, match=r"has 1 rows whose role is neither pool nor labelled, e.g. id 'r7'"):
        planned_probabilities(back, odd)


def test_uncertainty_is_largest_at_one_half_and_fills_missing_values():
    u = uncertainty([0.5, 0.1, np.nan, 0.0])
    assert u[0] == pytest.approx(0.5) and u[3] == 0.0 and u[2] == pytest.approx(np.mean(u[[0, 1, 3]]))


def test_the_cli_plans_labels_and_quantify_weights_them_back(tmp_path, capsys):
    from puaudit_jax.cli import CommandError, main

    table, _ = _judged(400, np.random.default_rng(5))
    table = table.assign(question="q", response_a="a", response_b="b")
    hidden = table.assign(human=np.where(np.arange(400) < 80, table["human"], "missing"))
    hidden.to_csv(tmp_path / "data.csv", index=False)
    assert main(["plan-labels", str(tmp_path / "data.csv"), "--budget", "40", "--width", "0.05", "--out",
                 str(tmp_path / "plan")]) == 0  # fmt: skip
    assert (tmp_path / "plan" / "power.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "drawn uniformly (no audit: random sampling)" in printed and "for a half-width of 0.05" in printed
    plan = pd.read_csv(tmp_path / "plan" / "plan.csv", dtype={"id": str})
    to_label = pd.read_csv(tmp_path / "plan" / "to_label.csv", dtype={"id": str})
    assert set(to_label["id"]) == set(plan.loc[plan["selected"], "id"]) and to_label["human"].isna().all()
    back = hidden.assign(human=np.where(hidden["id"].isin(to_label["id"]), table["human"], hidden["human"]))
    back.to_csv(tmp_path / "back.csv", index=False)
    assert main(["quantify", str(tmp_path / "back.csv"), "--plan", str(tmp_path / "plan"), "--out",
                 str(tmp_path / "q"), "--no-figures"]) == 0  # fmt: skip
    frame = pd.read_csv(tmp_path / "q" / "leaderboard.csv")
    human = frame[(frame["target"] == "agreement m") & (frame["estimator"] == HUMAN_ONLY)].iloc[0]
    assert "label plan" in human["caveat"] and human["n_labelled"] == 80 + len(to_label)
    # the filled sheet itself is a --labels file: the same intervals as labels written into DATA
    filled = to_label.assign(human=table.set_index("id").loc[to_label["id"], "human"].to_numpy())
    filled.to_csv(tmp_path / "filled.csv", index=False)
    assert main(["quantify", str(tmp_path / "data.csv"), "--labels", str(tmp_path / "filled.csv"), "--plan",
                 str(tmp_path / "plan"), "--out", str(tmp_path / "q3"), "--no-figures"]) == 0  # fmt: skip
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "q3" / "leaderboard.csv"), frame)
    stray = back.assign(human=np.where(~back["id"].isin(to_label["id"]) & (np.arange(400) >= 80), "A", back["human"]))
    stray.to_csv(tmp_path / "stray.csv", index=False)
    with pytest.raises(CommandError):
        main(["quantify", str(tmp_path / "stray.csv"), "--plan", str(tmp_path / "plan"), "--out", str(tmp_path / "q2")])
    assert "the plan never selected" in capsys.readouterr().err
    with pytest.raises(CommandError):
        main(["plan-labels", str(tmp_path / "data.csv"), "--budget", "500", "--out", str(tmp_path / "p2")])
    assert "larger than the pool of 320" in capsys.readouterr().err


def test_weighted_logistic_equals_ppi_logistic_under_uniform_sampling():
    from puaudit_jax.quantify.m_estimation import ppi_logistic, ppi_logistic_active

    rng = np.random.default_rng(6)
    X = rng.normal(size=(600, 3))
    y = rng.binomial(1, 1 / (1 + np.exp(-X @ np.array([1.0, -0.5, 0.3])))).astype(float)
    yhat = np.clip(y + rng.normal(0, 0.3, 600), 0, 1)
    lab = np.zeros(600, bool)
    lab[rng.choice(600, 120, replace=False)] = True
    pi = np.full(600, 0.2)
    for lam in (0.0, 0.6):
        ours = ppi_logistic_active(X, y, yhat, lab, pi, lam=lam)
        plain = ppi_logistic(X, y, yhat, lab, np.ones(600, bool), lam=lam)  # every row predicted
        np.testing.assert_allclose(ours.theta, plain.theta, atol=1e-8)
    tuned = ppi_logistic_active(X, y, yhat, lab, pi)
    assert 0 < tuned.lam <= 1 and tuned.converged and np.all(np.diag(tuned.cov) > 0)


def test_the_weighted_bradley_terry_fit_covers_under_a_plan_that_over_samples_errors():
    from puaudit_jax.quantify.leaderboard import bt_leaderboard

    rng = np.random.default_rng(7)
    theta = np.array([0.5, 0.0, -0.5])
    covered, naive = [], []
    for _ in range(120):
        n = 1500
        a = rng.integers(0, 3, n)
        b = (a + rng.integers(1, 3, n)) % 3
        y = (rng.random(n) < 1 / (1 + np.exp(-(theta[a] - theta[b])))).astype(float)
        judge = np.where(rng.random(n) < 0.2, 1 - y, y)
        m0_won = ((a == 0) & (judge == 1)) | ((b == 0) & (judge == 0))
        u = np.where(m0_won, 0.5, 0.05)  # the plan over-samples the judge's wins of m0, which track the outcome
        first = rng.random(n) < 0.05
        pi_plan, pi_first = sampling_probabilities(u[~first], 150, 0.0, others=u[first])
        drawn = np.zeros(n, bool)
        drawn[~first] = rng.random((~first).sum()) < pi_plan
        plan_pi = np.ones(n)
        plan_pi[~first], plan_pi[first] = pi_plan, pi_first
        lab = first | drawn
        prob = inclusion_probability(plan_pi, first.mean())
        names = np.array(["m0", "m1", "m2"])
        args = (names[a], names[b], np.where(lab, y, np.nan), {PPI: judge}, lab, ~lab, 0.9)
        full = bt_leaderboard(names[a], names[b], y, {PPI: judge}, np.ones(n, bool), np.zeros(n, bool), 0.9)
        truth = next(e.estimate for m, e in full if m == "m0" and e.estimator == HUMAN_ONLY)
        for weighted, out in ((True, covered), (False, naive)):
            rows = bt_leaderboard(*args, probability=prob if weighted else None)
            est = {m: e for m, e in rows if e.estimator == HUMAN_ONLY}["m0"]
            out.append(est.lower <= truth <= est.upper)
    assert np.mean(covered) >= 0.9 - 3 * np.sqrt(0.09 / 120)
    assert np.mean(naive) < np.mean(covered) - 0.15


@pytest.mark.parametrize(("target", "judge_of", "value"), [("agreement", "human", "1"), ("a-share", "tie", "0.5")])
def test_labelled_outcomes_that_never_vary_give_no_zero_width_power_analysis(target, judge_of, value):
    """Issue 40: a judge agreeing with all 40 labels had a predicted half-width of 0.0000 at every budget
    ("the labels at hand suffice" for any width), where quantify gives a Wilson interval."""
    table, _ = _judged(80, np.random.default_rng(4))
    labelled = np.arange(80) < 40
    human = table["human"] if judge_of == "human" else "tie"
    table = table.assign(human=np.where(labelled, human, "missing"), judge=table["human"])
    report = plan_labels(table, None, PlanConfig(budget=5, target=target, width=0.01))
    partial = report.power[report.power.budget < 40]  # labelling all 40 pool rows leaves no sampling error: 0
    assert report.current > 0.02 and (partial[["planned", "random"]] > 0.005).all().all()
    assert (report.power.loc[report.power.budget == 40, ["planned", "random"]] == 0).all().all()
    assert report.needed > 0
    assert report.note.startswith(f"the 40 labelled outcomes never vary (all {value}): the power analysis uses")
