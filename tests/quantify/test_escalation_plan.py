"""A guaranteed audit's rows to label, read back by ``quantify --plan``: the intervals hold after labelling.

The escalation plan draws every escalated row and a random share of the certified ones (spot checks), so
every row it speaks for has a known, non-zero probability; quantify's ratio estimator then covers the
table's agreement at its nominal rate, where the labels alone (escalated rows are the judge's likely errors)
mislead. A plan that gives rows no chance of being drawn is refused, and a plan with equal probabilities and
no earlier labels reads as the labelled rows' mean, with an interval no wider than random labels give.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.quantify import AUDIT_PPI, HUMAN_ONLY, quantify
from puaudit_jax.quantify.plan import PlanConfig, escalation_plan, plan_labels

LEVEL = 0.9


def _escalated_rows(n, rng, labelled_share=0.1, spot_checks=0.15):
    """A judge wrong with probability p; a random share labelled before; the certified rows chosen *on those
    labels* (the loosest confidence level whose labelled rows agree >= 0.93, the winner's curse of a real
    guarantee); then the plan drawn and its rows labelled: (truth, items, plan, table after labelling)."""
    p = rng.choice([0.03, 0.3, 0.45], n, p=[0.7, 0.2, 0.1])
    human = np.where(rng.random(n) < 0.5, "A", "B")
    judge = np.where(rng.random(n) < p, np.where(human == "A", "B", "A"), human)
    truth = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "judge": judge, "human": human})
    first = rng.random(n) < labelled_share
    q = np.maximum(p, 1 - p)
    ok = [t for t in np.unique(q) if np.mean((judge == human)[first & (q >= t)]) >= 0.93]
    certified = ~first & (q >= (min(ok) if ok else np.inf))
    decision = np.where(first, "", np.where(certified, "trust", "escalate"))
    items = truth.assign(human=np.where(first, human, "missing"), p_wrong=p, decision=decision)
    plan = escalation_plan(items, spot_checks, seed=int(rng.integers(1 << 30)))
    drawn = plan.set_index("id").loc[truth.id, "selected"].to_numpy(bool)
    back = truth.assign(human=np.where(first | drawn, human, "missing"))
    return truth, items, plan, back


def test_the_plan_draws_every_escalated_row_and_a_random_share_of_the_certified_ones():
    rng = np.random.default_rng(0)
    _, items, plan, _ = _escalated_rows(4000, rng, spot_checks=0.2)
    plan = plan.set_index("id")
    escalated = items.id[items.decision == "escalate"]
    certified = items.id[items.decision == "trust"]
    assert plan.loc[escalated, "selected"].all() and (plan.loc[escalated, "sampling_prob"] == 1).all()
    assert (plan.loc[escalated, "why"] == "escalated").all() and (plan.loc[certified, "why"] == "spot check").all()
    assert (plan.loc[certified, "sampling_prob"] == 0.2).all()
    assert plan.loc[certified, "selected"].mean() == pytest.approx(0.2, abs=0.03)
    labelled = items.id[items.human != "missing"]
    assert (plan.loc[labelled, "role"] == "labelled").all() and (plan.loc[labelled, "sampling_prob"] == 1).all()
    assert not plan.loc[labelled, "selected"].any() and len(plan) == len(items)


def test_after_labelling_the_plan_the_intervals_cover_at_their_nominal_rate_where_the_labels_alone_mislead():
    rng, draws = np.random.default_rng(1), 200
    covered, widths, naive = [], [], []
    for _ in range(draws):
        truth, items, plan, back = _escalated_rows(1200, rng)
        audit = items.assign(status=np.where(items.human != "missing", "labelled", "unlabelled"), reason="")
        est = quantify(back, plan=plan, audit_items=audit, level=LEVEL).to_frame().set_index(["target", "estimator"])
        rows = [est.loc[("agreement m", name)] for name in (HUMAN_ONLY, AUDIT_PPI)]
        agreement = float((truth.judge == truth.human).mean())
        covered.append([r["lower"] <= agreement <= r["upper"] for r in rows])
        widths.append([r["upper"] - r["lower"] for r in rows])
        labelled = (back.human != "missing").to_numpy()
        naive.append(abs(float((truth.judge == truth.human)[labelled].mean()) - agreement) < 0.03)
    low = LEVEL - 3 * np.sqrt(LEVEL * (1 - LEVEL) / draws)
    assert (np.mean(covered, axis=0) >= low).all(), np.mean(covered, axis=0)
    assert (np.mean(covered, axis=0) <= 0.995).all()  # not valid by being uselessly wide
    assert np.mean(widths, axis=0)[1] < np.mean(widths, axis=0)[0]  # the audit's P(judge wrong) as predictions
    assert np.mean(naive) < 0.2  # the escalated rows are the judge's likely errors: unweighted, the labels mislead


def test_a_plan_that_never_draws_some_rows_is_refused_with_what_to_do():
    """Issue 48: the escalation plan gave certified rows probability 0, and quantify's interval missed the
    truth in 9 draws of 11 (0.742 [0.719, 0.766] against 0.684): no weighting can stand for rows never drawn."""
    _, _, plan, back = _escalated_rows(600, np.random.default_rng(2), spot_checks=0.0)
    with pytest.raises(ValueError, match=r"gives \d+ pool rows probability 0 of being labelled.*--spot-checks"):
        quantify(back, plan=plan)


def test_a_plan_with_equal_probabilities_and_no_earlier_labels_reads_as_the_labelled_rows_mean():
    """Issue 48: a `plan-labels --budget 100` plan drew 84 rows, 76 agreeing, and quantify said 0.760 [0.62,
    0.90] (76 / 100, an interval 3x too wide); the ratio form gives 76 / 84 and about random labels' width."""
    rng, ratios = np.random.default_rng(3), []
    for rep in range(20):
        n = 1000
        human = np.where(rng.random(n) < 0.5, "A", "B")
        judge = np.where(rng.random(n) < 0.1, np.where(human == "A", "B", "A"), human)
        table = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "judge": judge, "human": "missing"})
        report = plan_labels(table, None, PlanConfig(budget=100, seed=rep))
        drawn = report.frame.set_index("id").loc[table.id, "selected"].to_numpy(bool)
        back = table.assign(human=np.where(drawn, human, "missing"))
        est = quantify(back, plan=report.frame, level=LEVEL).to_frame().set_index(["target", "estimator"])
        row = est.loc[("agreement m", HUMAN_ONLY)]
        assert row["estimate"] == pytest.approx(np.mean((judge == human)[drawn]), abs=1e-12)
        plain = quantify(back, level=LEVEL).to_frame().set_index(["target", "estimator"]).loc[("agreement m",
                                                                                               HUMAN_ONLY)]  # fmt: skip
        ratios.append((row["upper"] - row["lower"]) / (plain["upper"] - plain["lower"]))
    assert max(ratios) <= 1.25 and min(ratios) > 0.8
