"""Trust, flip or escalate (``puaudit_jax.audit.guarantee``): the guarantee holds by simulation, the naive
plug-in threshold does not; the extremes (a useless score, a perfect one); the audit's items and report; the
errors a user meets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit import AuditConfig, AuditReport, audit, run_audit
from puaudit_jax.audit.guarantee import (
    DECISIONS,
    STARTS,
    cascade,
    certify_items,
    confidence,
    decisions,
    escalation_plan,
    final_verdicts,
    labels_needed,
    min_rows,
    plug_in,
    probability,
    select,
)
from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.quantify import AUDIT_PPI, HUMAN_ONLY, quantify

A, D = 0.9, 0.1


def _draw(rng, n_cal=500, n_pool=2000):
    """A calibrated score: q ~ U(0.5, 1) and the verdict right with probability q.

    The agreement of the rows with q >= t is (1 + t) / 2, so a threshold t violates A when (1 + t) / 2 < A.
    """
    q = rng.uniform(0.5, 1.0, n_cal)
    return q, rng.random(n_cal) < q, rng.uniform(0.5, 1.0, n_pool)


def _violation(t):
    return t is not None and (1 + t) / 2 < A


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
    assert certified > splits / 4  # not valid by certifying nothing (measured: 417 of 1000 splits certify)


def test_a_useless_score_escalates_nearly_everything_and_a_perfect_one_certifies_every_row():
    rng = np.random.default_rng(1)
    judge = rng.choice(np.array(["A", "B"], dtype=object), 400)
    right = rng.random(400) < 0.8  # the judge agrees with humans on 80 %, below A
    human = np.where(right, judge, np.where(judge == "A", "B", "A"))
    cal, pool = np.arange(200), np.arange(200, 400)

    useless = rng.uniform(0, 0.5, 400)  # P(judge wrong) that knows nothing
    q = np.maximum(useless, 1 - useless)
    sel = select(q[cal], judge[cal] == human[cal], q[pool], A, D)
    decision, _ = decisions(useless[pool], judge[pool], sel.threshold)
    assert np.mean(decision == "escalate") > 0.9

    perfect = np.where(right, 0.0, 1.0)
    for agreement in (0.8, 0.95, 0.985):  # up to the largest A that 200 rows can certify (0.985^200 < 0.1)
        sel = select(np.ones(200), np.ones(200, bool), np.ones(200), agreement, D)
        decision, final = decisions(perfect[pool], judge[pool], sel.threshold)
        assert set(decision) <= {"trust", "flip"}, agreement
        assert (final == human[pool]).all() and ((decision == "flip") == ~right[pool]).all()


def test_fixed_sequence_testing_stops_at_the_first_threshold_it_cannot_certify():
    # every calibration row above 0.95 is right, then a run of errors: the sequence must stop there, even
    # though the agreement over all rows would pass again further down
    q = np.r_[np.linspace(1.0, 0.95, 60), np.linspace(0.949, 0.9, 20), np.linspace(0.899, 0.5, 400)]
    correct = np.r_[np.ones(60, bool), np.zeros(20, bool), np.ones(400, bool)]
    sel = select(q, correct, q, A, D, starts=())
    assert sel.threshold is not None and sel.threshold >= 0.9
    tested = [r for r in sel.curve if r[6]]
    assert tested[-1][5] > D and all(r[5] <= D for r in tested[:-1])
    assert min_rows(A, D) == 22  # 0.9^22 = 0.098 <= 0.1 < 0.9^21
    # the default's other sequences (from 25, 50, 75 and 100 % coverage, each at D / 5) certify the rest
    assert select(q, correct, q, A, D).threshold == 0.5


def test_a_weak_score_on_a_judge_above_a_certifies_everything_where_one_sequence_certifies_little():
    rng, certified = np.random.default_rng(2), {"one": [], "default": []}
    for _ in range(100):
        q, pool = rng.uniform(0.5, 0.6, 500), rng.uniform(0.5, 0.6, 2000)  # ranks nothing
        correct = rng.random(500) < 0.87  # the judge agrees on 87 %
        for name, starts in (("one", ()), ("default", STARTS)):
            t = select(q, correct, pool, 0.8, D, starts=starts).threshold
            certified[name].append(0.0 if t is None else np.mean(pool >= t))
    assert np.mean(certified["default"]) > 0.95 and np.mean(certified["one"]) < 0.5


def test_too_few_labels_say_how_many_more_would_certify_and_a_hopeless_a_says_labels_will_not_help():
    rng = np.random.default_rng(3)
    q, pool = rng.uniform(0.5, 1.0, 60), rng.uniform(0.5, 1.0, 600)
    correct = rng.random(60) < 0.95  # 60 rows calibrate a 95 % judge: too few to certify A = 0.9 ...
    sel = select(q, correct, pool, A, D)
    assert sel.threshold is None
    more = labels_needed(sel, 60, 120, A, D)
    assert more is not None and more > 0
    # ... and with that many more rows from the same judge, half of them calibrating, about half of the
    # splits certify it (the estimate reads the best observed rate: measured 19 of 40 here)
    size = 60 + more // 2
    certified = [select(rng.uniform(0.5, 1.0, size), rng.random(size) < 0.95, pool, A, D).threshold
                 for _ in range(40)]  # fmt: skip
    assert np.mean([t is not None for t in certified]) >= 0.4
    weak = rng.random(60) < 0.7  # no threshold reaches A: more labels will not help
    assert labels_needed(select(q, weak, pool, A, D), 60, 120, A, D) is None


@pytest.fixture(scope="module")
def cone():
    return cone_comparisons(n_labelled=300, n_unlabelled=500, d=32, alpha=0.7, seed=4)


@pytest.fixture(scope="module")
def certified(cone):
    return run_audit(cone.table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.85))


def test_every_pool_row_is_trusted_flipped_or_escalated_and_every_row_is_accounted_for(cone, certified):
    items, g = certified.items, certified.report.guarantee
    pool = items[items.role == "U"]
    assert len(items) == len(cone.table) and set(pool.decision) <= set(DECISIONS)
    assert (items.loc[items.role != "U", "decision"] == "").all()
    assert len(pool) == 500 and g.n_calibration == (items.role == "calibration").sum() == 150
    # the calibration rows got their labels back; the audit fitted on the other half
    assert (items.loc[items.role == "calibration", "status"] == "labelled").all()
    assert g.n_fit + g.n_calibration == (items.status == "labelled").sum() == 300
    assert sum(g.counts.values()) == len(pool) and g.coverage == pytest.approx((pool.decision != "escalate").mean())
    assert (pool.flipped == (pool.decision == "flip")).all()
    kept = pool[pool.decision != "escalate"]
    assert (kept.adjusted[kept.decision == "trust"] == kept.judge[kept.decision == "trust"]).all()
    assert (kept.adjusted[kept.decision == "flip"] != kept.judge[kept.decision == "flip"]).all()
    escalated = pool[pool.decision == "escalate"]
    assert (escalated.adjusted == escalated.judge).all()
    assert g.threshold is not None and g.lower_bound >= 0.85 and g.coverage > 0.2


def test_the_certified_verdicts_agree_with_the_hidden_truth(cone, certified):
    items = certified.items
    pool = (items.role == "U").to_numpy()
    kept = pool & (items.decision != "escalate").to_numpy()
    assert np.mean(items.adjusted.to_numpy()[kept] == cone.truth[kept]) >= 0.85
    assert np.mean(items.judge.to_numpy()[pool] == cone.truth[pool]) < 0.85  # the judge alone would not reach it


def test_the_report_says_what_was_certified_and_reads_back(certified):
    report = certified.report
    assert AuditReport.from_dict(report.to_dict()).guarantee == report.guarantee
    text = report.summary()
    assert "guarantee: agreement >= 0.85 with probability >= 0.9" in text and "certified" in text
    assert report.counts.calibration == report.guarantee.n_calibration


def test_without_a_guarantee_the_audit_is_unchanged(cone):
    plain = run_audit(cone.table, cone.embeddings, AuditConfig(scorer="centroid"))
    assert "decision" not in plain.items and plain.report.guarantee is None
    assert plain.report.counts.calibration == 0


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(guarantee=1.0), "guarantee must be in (0, 1)"),
        (dict(guarantee=0.9, delta=0.0), "delta must be in (0, 1)"),
        (dict(guarantee=0.9, rule="paper"), "guarantee needs a calibrated rule"),
        (dict(guarantee=0.999), "needs at least 2302 calibration rows, i.e. 4604 labelled rows"),
    ],
)
def test_bad_settings_are_named(cone, options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_audit(cone.table, cone.embeddings, AuditConfig(scorer="centroid", **options))


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(other_judges=("gpt4",), rule="calibrated"), "rule 'calibrated' reads no evidence and would ignore"),
        (dict(other_judges=("gpt4",), rule="paper"), "rule 'paper' reads no evidence"),
        (dict(evidence=("embedding", "style"), rule="calibrated"), "rule 'calibrated' reads none and would ignore it"),
    ],
)
def test_evidence_a_rule_would_ignore_is_refused(cone, options, message):
    """Before: other_judges / evidence with a rule that reads no evidence were accepted and ignored."""
    with pytest.raises(ValueError, match=message):
        audit(cone.table, cone.embeddings, scorer="centroid", **options)


def test_a_score_that_ties_every_row_is_an_error(cone):
    table = cone.table.reset_index(drop=True)
    items = run_audit(table, cone.embeddings, AuditConfig(scorer="centroid")).items
    items = items.assign(p_wrong=np.where(items.role == "U", 0.2, np.nan))
    pool = np.flatnonzero(items.role.to_numpy() == "U")
    with pytest.raises(ValueError, match="everything tied"):
        certify_items(items, pool[:100], table.human.to_numpy(dtype=object), (), AuditConfig(guarantee=0.9))


def _escalated_rows(n, rng, threshold=0.85, labelled_share=0.1):
    """A judge wrong with a known probability p, a random share of rows labelled before, and the guarantee's
    decisions on the rest (escalate where the confidence max(p, 1 - p) < threshold): (truth table, items)."""
    p = rng.choice([0.03, 0.3, 0.45], n, p=[0.7, 0.2, 0.1])
    human = np.where(rng.random(n) < 0.5, "A", "B")
    judge = np.where(rng.random(n) < p, np.where(human == "A", "B", "A"), human)
    truth = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "judge": judge, "human": human})
    first = rng.random(n) < labelled_share
    decision = np.where(first, "", np.where(np.maximum(p, 1 - p) >= threshold, "trust", "escalate"))
    items = truth.assign(human=np.where(first, human, "missing"), p_wrong=p, decision=decision)
    return truth, items


def test_the_escalation_plan_reads_back_into_valid_intervals_where_the_escalated_labels_alone_are_biased():
    rng, level, covered, widths, naive = np.random.default_rng(5), 0.9, [], [], []
    for _ in range(200):
        truth, items = _escalated_rows(1200, rng)
        plan = escalation_plan(items, 0.85)
        escalated = set(items.loc[items.decision == "escalate", "id"])
        assert set(plan.loc[plan.selected, "id"]) == escalated and len(plan) == len(items)
        assert (plan.loc[plan.role == "pool", "sampling_prob"] == plan.loc[plan.role == "pool", "selected"]).all()
        back = truth.assign(human=np.where(items["id"].isin(escalated) | (items.human != "missing"), truth.human,
                                           "missing"))  # fmt: skip
        audit = items.assign(status=np.where(items.human != "missing", "labelled", "unlabelled"), reason="")
        est = quantify(back, plan=plan, audit_items=audit).to_frame().set_index(["target", "estimator"])
        rows = [est.loc[("agreement m", name)] for name in (HUMAN_ONLY, AUDIT_PPI)]
        agreement = float((truth.judge == truth.human).mean())
        covered.append([r["lower"] <= agreement <= r["upper"] for r in rows])
        widths.append([r["upper"] - r["lower"] for r in rows])
        labelled = (back.human != "missing").to_numpy()
        naive.append(abs(float((truth.judge == truth.human)[labelled].mean()) - agreement) < 0.03)
    assert (np.mean(covered, axis=0) >= level - 3 * np.sqrt(level * (1 - level) / 200)).all()
    assert np.mean(widths, axis=0)[1] < 0.5 * np.mean(widths, axis=0)[0]  # the audit's P(judge wrong) as predictions
    assert np.mean(naive) < 0.2  # the escalated rows are the judge's likely errors: unweighted, the labels mislead


def test_the_plan_of_an_audit_selects_its_escalated_rows_and_keeps_every_usable_row(cone, certified):
    items, g = certified.items, certified.report.guarantee
    plan = escalation_plan(items, g.thresholds()).set_index("id")
    pool = items[items.role == "U"].set_index("id")
    assert len(plan) == len(items) and set(plan.index[plan.role == "pool"]) == set(pool.index)
    assert (plan.loc[pool.index, "selected"] == (pool.decision == "escalate")).all()
    assert plan.loc[plan.role == "labelled", "sampling_prob"].isin([0.0, 1.0]).all()
    assert plan.loc[~plan.selected & (plan.role == "pool"), "sampling_prob"].eq(0).all()


def test_evaluate_measures_coverage_the_certified_rows_agreement_and_violations_on_hidden_labels():
    from puaudit_jax.evaluate import evaluate

    hard = cone_comparisons(n_labelled=400, n_unlabelled=300, d=32, alpha=0.7, neg_range=(0.3, 0.65), seed=4)
    res = evaluate(hard.table, hard.embeddings, pairs=[("centroid", "evidence")], seeds=3, guarantee=0.8,
                   ceiling=False, progress=False)  # fmt: skip
    overall = res.per_seed[res.per_seed.question_type == "all"]
    first = overall[overall.seed == res.meta["seeds"][0]].iloc[0]
    pool, truth = res.first_audit.pool, res.first_truth
    pool = pool[pool.id.isin(truth.index)]
    kept = pool[pool.decision != "escalate"]
    assert first.coverage == pytest.approx(len(kept) / len(pool)) and 0 < first.coverage < 1
    assert first.certified_agreement == pytest.approx(np.mean(kept.adjusted.to_numpy() == truth.loc[kept.id]))
    assert first.violated == float(first.certified_agreement < 0.8)
    summary = res.summary[res.summary.question_type == "all"].iloc[0]
    assert summary.violation_rate == pytest.approx(overall.violated.mean())
    assert summary.coverage == pytest.approx(overall.coverage.mean())
    assert res.per_seed.loc[res.per_seed.question_type != "all", "violated"].isna().all()  # the guarantee is overall


def _two_judges(rng, n):
    """Two judges with calibrated P(wrong): right with probability q_1 ~ U(0.5, 1) and q_2 ~ U(0.7, 1)."""
    q1, q2 = rng.uniform(0.5, 1.0, n), rng.uniform(0.7, 1.0, n)
    human = np.where(rng.random(n) < 0.5, "A", "B")
    flip = {"A": "B", "B": "A"}
    judges = [np.where(rng.random(n) < q, human, [flip[h] for h in human]).astype(object) for q in (q1, q2)]
    p_wrong = [np.where(rng.random(n) < 0.5, 1 - q, q) for q in (q1, q2)]  # either side of 1/2: flips happen
    judges = [np.where(p > 0.5, [flip[v] for v in j], j).astype(object) for p, j in zip(p_wrong, judges)]
    return list(zip(p_wrong, judges)), human.astype(object)


def test_the_cascade_keeps_its_guarantee_over_simulated_splits_and_certifies_more_than_its_first_judge():
    rng, splits, a, d = np.random.default_rng(6), 1000, 0.85, 0.1
    violations, coverage, first_only = [], [], []
    for _ in range(splits):
        stages, human = _two_judges(rng, 1300)
        cal, pool = np.arange(300), np.arange(300, 1300)
        chosen, selections = cascade(stages, cal, pool, human, a, d)
        kept = pool[chosen[pool] >= 0]
        final = np.empty(len(human), dtype=object)
        for k, (p, judge) in enumerate(stages):
            rows = kept[chosen[kept] == k]
            final[rows] = final_verdicts(p[rows], judge[rows])
        violations.append(len(kept) > 0 and np.mean(final[kept] == human[kept]) < a)
        coverage.append(len(kept) / len(pool))
        first_only.append(np.mean(chosen[pool] == 0))
    assert np.mean(violations) <= d + 3 * np.sqrt(d * (1 - d) / splits)
    assert np.mean(coverage) > np.mean(first_only) + 0.1  # the second judge certifies rows the first could not


def test_the_cascade_never_sends_a_row_past_a_judge_certified_for_it():
    stages, human = _two_judges(np.random.default_rng(12), 1300)
    chosen, selections = cascade(stages, np.arange(300), np.arange(300, 1300), human, 0.8, 0.1)
    assert all(s.threshold is not None for s in selections) and (chosen[300:] == -1).any()  # all three outcomes
    for k, ((p, _), sel) in enumerate(zip(stages, selections)):
        later = (chosen == -1) | (chosen > k)  # rows that went past judge k
        assert (confidence(p)[later] < sel.threshold).all()
        assert (confidence(p)[chosen == k] >= sel.threshold).all()
    # one judge: the plain fixed-sequence test at the full delta
    one, _ = cascade(stages[:1], np.arange(300), np.arange(300, 1300), human, 0.8, 0.1)
    p, judge = stages[0]
    single = select(confidence(p[:300]), final_verdicts(p, judge)[:300] == human[:300], confidence(p[300:]), 0.8, 0.1)
    assert (np.flatnonzero(one >= 0) == np.flatnonzero(confidence(p) >= single.threshold)).all()


def test_an_audit_with_a_cascade_names_the_judge_of_every_certified_row(cone):
    """The first judge (67 % right) on uninformative embeddings certifies nothing at A = 0.8; a second judge
    right 90 % of the time takes the rows; the second one's audit weighs the first one's verdict, not vice versa."""
    rng = np.random.default_rng(8)
    emb = cone.embeddings
    noise = replace(emb, a=rng.normal(size=emb.a.shape).astype(np.float32),
                    b=rng.normal(size=emb.b.shape).astype(np.float32))  # fmt: skip
    second = np.where(rng.random(len(cone.truth)) < 0.9, cone.truth, np.where(cone.truth == "A", "B", "A"))
    table = cone.table.assign(second=second)
    config = AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",), cascade=True)
    res = run_audit(table, noise, config)
    items, g = res.items, res.report.guarantee
    pool = items[items.role == "U"]
    assert set(pool.decided_by) <= {"judge", "second", "human"}
    assert (items.loc[items.role != "U", "decided_by"] == "").all()
    assert ((pool.decided_by == "human") == (pool.decision == "escalate")).all()
    assert [s[0] for s in g.stages] == ["judge", "second"] and g.stages[0][1] is None  # the first judge: nothing
    p_second = pool["p_wrong[second]"].to_numpy()  # the second judge's own P(wrong) decided its rows
    assert np.isfinite(p_second).all() and (confidence(p_second) >= g.stages[1][1]).sum() == g.stages[1][2]
    by_second = pool[pool.decided_by == "second"]
    assert len(by_second) == g.stages[1][2] == (pool.decision != "escalate").sum() > 0
    trusted = by_second[by_second.decision == "trust"]
    assert (trusted.adjusted.to_numpy() == table.second.to_numpy()[trusted.index]).all()
    kept = (items.role == "U").to_numpy() & (items.decision != "escalate").to_numpy()
    assert np.mean(items.adjusted.to_numpy()[kept] == cone.truth[kept]) >= 0.8
    assert "guarantee: cascade: second: confidence >=" in res.report.summary()
    # the label plan: a labelled row the second judge would have been certified for would not have been drawn
    assert g.thresholds() == {"p_wrong": None, "p_wrong[second]": g.stages[1][1]}
    plan = escalation_plan(items, g.thresholds()).set_index("id")
    cal = items[items.role == "calibration"]
    would = confidence(cal["p_wrong[second]"].to_numpy()) >= g.stages[1][1]
    assert would.any() and (plan.loc[cal.id, "sampling_prob"].to_numpy() == np.where(would, 0.0, 1.0)).all()
    assert AuditReport.from_dict(res.report.to_dict()).guarantee == g
    assert res.report.config.other_judges == ("second",)  # the first judge's audit did not weigh the second


def test_a_cascade_without_other_judges_or_a_guarantee_is_an_error(cone):
    with pytest.raises(ValueError, match="cascade needs a guarantee"):
        run_audit(cone.table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.9, cascade=True))


def test_a_cascade_embeds_the_rows_only_a_later_judge_can_use(cone):
    """Before: where the first judge said tie and the second A or B, those rows had no embeddings and the
    cascade stopped with "usable comparisons have no embeddings (mismatched id sets)"."""
    import zlib

    from puaudit_jax.audit.embed import embed_comparisons

    def encoder(texts):
        return np.stack([np.random.default_rng(zlib.crc32(t.encode())).normal(size=16) for t in texts])

    rng = np.random.default_rng(9)
    pool = np.flatnonzero(cone.table.human.to_numpy() == "missing")
    first = cone.table.judge.to_numpy(dtype=object).copy()
    first[pool[:30]] = "tie"  # the first judge abstains on 30 pool rows; the second gives a verdict on all
    second = np.where(rng.random(len(cone.truth)) < 0.9, cone.truth, np.where(cone.truth == "A", "B", "A"))
    table = cone.table.assign(judge=first, second=second)
    assert len(embed_comparisons(table, encoder).ids) == len(table) - 30  # the first judge's usable rows only
    emb = embed_comparisons(table, encoder, judges=("second",))
    assert len(emb.ids) == len(table)  # what the cascade's audit of the second judge needs (its test: above)


def test_rows_the_first_judge_tied_go_to_the_next_judge_of_the_cascade(cone):
    """Before: a pool row where the first judge said tie stayed excluded (no decision), although the second
    judge had a verdict for it; labelled ones never calibrated the second judge."""
    rng = np.random.default_rng(10)
    human = cone.table.human.to_numpy(dtype=object)
    pool, labelled = np.flatnonzero(human == "missing"), np.flatnonzero(human != "missing")
    first = cone.table.judge.to_numpy(dtype=object).copy()
    tied = np.r_[pool[:40], labelled[:40]]
    first[tied] = "tie"
    second = np.where(rng.random(len(cone.truth)) < 0.95, cone.truth, np.where(cone.truth == "A", "B", "A"))
    table = cone.table.assign(judge=first, second=second)
    config = AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",), cascade=True)
    res = run_audit(table, cone.embeddings, config)
    items = res.items.set_index("id")
    ids = table.id.to_numpy()
    tied_pool = items.loc[ids[pool[:40]]]
    assert (
        (tied_pool.decision != "").all() and (tied_pool.role == "U").all() and (tied_pool.status == "unlabelled").all()
    )
    assert set(tied_pool.decided_by) <= {"second", "human"} and (tied_pool.decided_by == "second").any()
    decided = tied_pool[tied_pool.decided_by == "second"]
    assert (decided.adjusted.isin(["A", "B"])).all()
    tied_labelled = items.loc[ids[labelled[:40]]]
    assert (tied_labelled.role == "calibration").any()  # the second judge's calibration rows include them
    # the others were the second judge's labelled rows: so they are said to be (before: "excluded, judge tie")
    assert (tied_labelled.status == "labelled").all() and (tied_labelled.reason == "").all()
    assert set(tied_labelled.role) <= {"calibration", "P", "P-filtered", "holdout"}
    assert res.report.counts.U == (items.role == "U").sum() == len(pool)  # every pool row has a decision
    assert (items.loc[items.role == "U", "decision"] != "").all()


def test_a_cascade_reads_its_judges_verdicts_in_normal_form_and_names_a_bad_one(cone):
    """Before: an other judge's "a", "C" (a tie's spelling) or null was copied into the cascade's judge column
    as it was, and certified: ``adjusted`` could be "C" or "a"; a null counted as a verdict."""
    rng = np.random.default_rng(11)
    truth = cone.truth.astype(object)
    second = np.where(rng.random(len(truth)) < 0.9, truth, np.where(truth == "A", "B", "A")).astype(object)
    pool = np.flatnonzero(cone.table.human.to_numpy(dtype=object) == "missing")
    spelled = second.copy()
    spelled[pool[:20]] = np.char.lower(second[pool[:20]].astype(str)).astype(object)  # "a" / "b"
    spelled[pool[20:25]], spelled[pool[25:30]] = "C", None
    normal = second.copy()
    normal[pool[20:25]], normal[pool[25:30]] = "tie", "missing"
    config = AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",), cascade=True)
    spelled_res = run_audit(cone.table.assign(second=spelled), cone.embeddings, config)
    normal_res = run_audit(cone.table.assign(second=normal), cone.embeddings, config)
    assert set(spelled_res.items.adjusted) <= {"A", "B", "tie", "missing"}
    cols = ["id", "role", "status", "decision", "decided_by", "adjusted", "p_wrong[second]"]
    pd.testing.assert_frame_equal(spelled_res.items[cols], normal_res.items[cols])
    bad = spelled.copy()
    bad[pool[3]] = "X"
    with pytest.raises(ValueError, match=rf"row {pool[3] + 1}.*second.*unknown verdict 'X'"):
        run_audit(cone.table.assign(second=bad), cone.embeddings, config)


def test_a_failed_audit_of_a_later_judge_names_that_judge(cone):
    config = AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",), cascade=True)
    with pytest.raises(ValueError, match="cascade: the audit of other judge 'second': no usable human-labelled"):
        run_audit(cone.table.assign(second="tie"), cone.embeddings, config)


def test_delta_without_a_guarantee_is_refused():
    """Before: ``--delta`` without ``--guarantee`` was silently ignored (``--cascade`` without one is refused)."""
    with pytest.raises(ValueError, match="delta 0.2 is the guarantee's failure probability: it needs a guarantee"):
        AuditConfig(delta=0.2).validate()
    AuditConfig(delta=0.2, guarantee=0.8).validate()


def test_the_probability_printed_is_never_rounded_up_to_one(certified):
    """Before: delta 1e-12 printed "with probability >= 1", a false statement."""
    assert probability(0.1) == "0.9" and probability(1e-12) == "1 - 1e-12"
    assert "with probability >= 1 - 1e-12 (" in replace(certified.report.guarantee, delta=1e-12).lines()[0]


def test_with_every_row_labelled_the_report_says_there_is_nothing_to_decide(cone):
    """Before: an empty pool read "nothing certified; every pool row is escalated", then two notes that
    contradicted each other (more labels will not help; the judge agrees but too few rows calibrate)."""
    table = cone.table.assign(human=cone.truth)
    g = run_audit(table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8)).report.guarantee
    assert sum(g.counts.values()) == 0 and g.lines()[0].endswith(": no pool rows to decide")
    assert g.notes == ("there are no unlabelled rows to decide: every usable row is labelled (the guarantee decides "
                       "the verdicts no human gave)",)  # fmt: skip


def test_labels_drawn_by_their_value_are_flagged_by_the_judge_verdict_check(cone):
    """Before: labelling only rows a human called B passed the question-type check, the report said the
    guarantee applied, and the certified rows agreed with humans below A."""
    truth = cone.truth.astype(object)
    rng = np.random.default_rng(12)
    chosen = (truth == "B") & (rng.random(len(truth)) < 0.6)
    table = cone.table.assign(human=np.where(chosen, truth, "missing"))
    g = run_audit(table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8)).report.guarantee
    assert not g.applies and any("differs across judge values" in note for note in g.notes)
    fair = cone.table.assign(human=np.where(rng.random(len(truth)) < 0.4, truth, "missing"))
    report = run_audit(fair, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8)).report
    judge_check = [c for c in report.sample_checks if c.by == "judge"]
    assert len(judge_check) == 1 and not judge_check[0].warning  # a random sample passes it


@pytest.fixture(scope="module")
def tied(cone):
    """The cone with a human tie on a random 15 % of the rows, labelled and pool alike: (table, truth)."""
    rng = np.random.default_rng(15)
    truth = np.where(rng.random(len(cone.truth)) < 0.15, "tie", cone.truth.astype(object)).astype(object)
    human = cone.table.human.to_numpy(dtype=object)
    return cone.table.assign(human=np.where(human != "missing", truth, "missing")), truth


def test_human_ties_calibrate_as_disagreement_and_the_guarantee_then_covers_every_pool_row(cone, tied):
    """Before: labelled ties never calibrated, so the certified rows' agreement counting a human tie as
    disagreement fell below A (0.72 at A = 0.75 on MT-Bench) while the report claimed A for the pool."""
    table, truth = tied
    split = (table.human == "tie").to_numpy() & (np.arange(len(table)) % 2 == 0)  # half the ties: a split vote
    table = table.assign(human_split=split)
    run = run_audit(table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8, human_ties="disagree"))
    items, g, counts = run.items, run.report.guarantee, run.report.counts
    cal = items[items.role == "calibration"]
    ties = cal[cal.human == "tie"]
    assert len(ties) > 10 and (ties.status == "excluded").all()
    assert (ties.reason == np.where(split[ties.index], "human split vote", "human tie")).all()
    assert g.n_calibration == len(cal) and g.human_ties == "disagree"
    assert g.n_fit == ((items.status == "labelled") & (items.role != "calibration")).sum()
    assert counts.input == counts.labelled + counts.unlabelled + counts.excluded == len(table)
    assert f"a human tie counts as disagreement: {len(ties)} of the calibration rows are human ties" in g.notes
    pool = (items.role == "U").to_numpy()
    kept = pool & (items.decision != "escalate").to_numpy()
    assert kept.any() and np.mean(items.adjusted.to_numpy()[kept] == truth[kept]) >= 0.8  # ties count as wrong
    assert AuditReport.from_dict(run.report.to_dict()).guarantee == g


def test_by_default_human_ties_do_not_calibrate_and_the_report_says_what_it_leaves_out(cone, tied):
    table, _ = tied
    run = run_audit(table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8))
    items, g = run.items, run.report.guarantee
    assert not (items[items.role == "calibration"].human == "tie").any()
    ties = int((items.reason == "human tie").sum())
    assert g.human_ties == "exclude" and g.human_tie_rows == ties > 10
    assert any(
        note.startswith(f"it covers the pool rows a human would pick a side on: {ties} of the") for note in g.notes
    )


def test_human_ties_is_checked():
    with pytest.raises(ValueError, match="human_ties must be one of exclude, disagree"):
        AuditConfig(guarantee=0.8, human_ties="agree").validate()
    with pytest.raises(ValueError, match="human_ties says what a human tie means for the guarantee: it needs a"):
        AuditConfig(human_ties="disagree").validate()


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(folds=2.5), "folds must be an integer >= 2"),
        (dict(min_group_size=True), "min_group_size must be an integer"),
    ],
)
def test_counts_of_the_audit_are_integers(options, message):
    """Before: folds=2.5 passed and ran 2 folds, min_group_size=True passed as 1."""
    with pytest.raises(ValueError, match=message):
        AuditConfig(**options).validate()
