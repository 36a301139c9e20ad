"""Trust, flip or escalate in the audit (``run_audit`` with ``AuditConfig.guarantee``): the items and the report.

Every row is accounted for; the certified verdicts agree with the hidden truth; the report reads back;
the cascade names the judge of every row; labels drawn by what the scores read make the guarantee not
apply, and then no row is trusted; the errors a user meets are named.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit import AuditConfig, AuditReport, audit, run_audit
from puaudit_jax.audit.guarantee import DECISIONS, confidence, probability
from puaudit_jax.audit.plots import pool_title
from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.quantify.plan import escalation_plan


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
        (
            dict(guarantee=0.999),
            "needs at least 2302 labelled rows (all of them agreeing with the judge); the data have 300",
        ),
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


def test_the_plan_of_an_audit_draws_its_escalated_rows_and_spot_checks_and_keeps_every_usable_row(cone, certified):
    items = certified.items
    plan = escalation_plan(items, certified.config.spot_checks, certified.config.seed).set_index("id")
    pool = items[items.role == "U"].set_index("id")
    assert len(plan) == len(items) and set(plan.index[plan.role == "pool"]) == set(pool.index)
    escalated, kept = pool.index[pool.decision == "escalate"], pool.index[pool.decision != "escalate"]
    assert plan.loc[escalated, "selected"].all() and (plan.loc[escalated, "sampling_prob"] == 1).all()
    assert (plan.loc[kept, "sampling_prob"] == 0.1).all() and 0 < plan.loc[kept, "selected"].sum() < len(kept)
    assert (plan.loc[plan.role == "labelled", "sampling_prob"] == 1).all()


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


def test_an_audit_with_a_cascade_names_the_judge_of_every_certified_row(cone):
    """The first judge (67 % right) on uninformative embeddings certifies nothing at A = 0.8; a second judge
    right 90 % of the time takes the rows; the second one's audit weighs the first one's verdict, not vice versa."""
    rng = np.random.default_rng(8)
    emb = cone.embeddings
    noise = replace(emb, a=rng.normal(size=emb.a.shape).astype(np.float32),
                    b=rng.normal(size=emb.b.shape).astype(np.float32))  # fmt: skip
    second = np.where(rng.random(len(cone.truth)) < 0.9, cone.truth, np.where(cone.truth == "A", "B", "A"))
    table = cone.table.assign(second=second)
    config = AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",), cascade=True, certify="fitted")
    res = run_audit(table, noise, config)
    items, g = res.items, res.report.guarantee
    pool = items[items.role == "U"]
    assert set(pool.decided_by) <= {"judge", "second", "human"}
    assert (items.loc[items.role != "U", "decided_by"] == "").all()
    assert ((pool.decided_by == "human") == (pool.decision == "escalate")).all()
    assert [s[0] for s in g.stages] == ["judge", "second"] and g.stages[0][1] is None  # the first judge: nothing
    p_second = pool["p_wrong[second]"].to_numpy()  # the second judge's own P(wrong) decided its rows
    assert np.isfinite(p_second).all() and (confidence(p_second) >= g.stages[1][2]).sum() == g.stages[1][3]
    by_second = pool[pool.decided_by == "second"]
    assert len(by_second) == g.stages[1][3] == (pool.decision != "escalate").sum() > 0
    trusted = by_second[by_second.decision == "trust"]
    assert (trusted.adjusted.to_numpy() == table.second.to_numpy()[trusted.index]).all()
    kept = (items.role == "U").to_numpy() & (items.decision != "escalate").to_numpy()
    assert np.mean(items.adjusted.to_numpy()[kept] == cone.truth[kept]) >= 0.8
    assert "guarantee: cascade: second: fitted confidence >=" in res.report.summary()
    assert g.thresholds() == {"judge": (None, None), "second": ("fitted", g.stages[1][2])}
    assert AuditReport.from_dict(res.report.to_dict()).guarantee == g
    assert res.report.config.other_judges == ("second",)  # the first judge's audit did not weigh the second
    auto = run_audit(table, noise, replace(config, certify="auto")).report.guarantee  # two candidates a judge
    assert auto.stages[0][1] is None and auto.stages[1][1] in ("label-free", "fitted") and auto.coverage > 0


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
    human = cone.table.human.to_numpy(dtype=object)
    pool, labelled = np.flatnonzero(human == "missing"), np.flatnonzero(human != "missing")
    first = cone.table.judge.to_numpy(dtype=object).copy()
    tied = np.r_[pool[:40], labelled[:40]]
    first[tied] = "tie"
    second = cone.truth  # a second judge always right: the ~20 hidden tie rows that reach it can certify it
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
    labelled_ties = int((table.human == "tie").sum())  # every labelled tie tests the label-free candidate
    assert f"a human tie counts as disagreement: {labelled_ties} of the calibrating rows are human ties" in g.notes
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


def _second_judge(cone, right=0.85, seed=20):
    rng = np.random.default_rng(seed)
    truth = cone.truth.astype(object)
    return np.where(rng.random(len(truth)) < right, truth, np.where(truth == "A", "B", "A")).astype(object)


def test_labels_only_where_a_second_judge_agrees_make_the_guarantee_not_apply_and_no_row_is_trusted(cone):
    """Issue 48: labels only where the judge agrees with a second judge (100 % agreement among labelled rows,
    far less in the pool) passed the checks; the guarantee said it applied and the certified rows agreed below A."""
    second = _second_judge(cone)
    truth, judge = cone.truth.astype(object), cone.table.judge.to_numpy(dtype=object)
    rng = np.random.default_rng(21)
    chosen = (second == judge) & (rng.random(len(truth)) < 0.5)
    table = cone.table.assign(human=np.where(chosen, truth, "missing"), second=second)
    run = run_audit(table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",)))
    g, pool = run.report.guarantee, run.items[run.items.role == "U"]
    assert not g.applies and (pool.decision == "escalate").all() and g.coverage == 0 and g.labels_needed is None
    assert any("differ from the pool on the evidence" in n and "no row is trusted" in n for n in g.notes)
    evidence = next(c for c in run.report.sample_checks if getattr(c, "by", "") == "evidence")
    assert evidence.p_value < 0.01 and evidence.features["others:second"][0] == 1.0
    fair = cone.table.assign(human=np.where(rng.random(len(truth)) < 0.4, truth, "missing"), second=second)
    run = run_audit(fair, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",)))
    assert run.report.guarantee.applies and (run.items.decision == "trust").any()  # a random sample passes


def test_each_certify_setting_tests_its_candidates_on_their_own_rows(cone):
    second = _second_judge(cone)
    table = cone.table.assign(second=second)
    runs = {c: run_audit(table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.8, other_judges=("second",),
                                                             certify=c)).report.guarantee
            for c in ("auto", "label-free", "fitted")}  # fmt: skip
    assert [r[0] for r in runs["auto"].candidates] == ["label-free", "fitted"]
    assert [r[1] for r in runs["auto"].candidates] == pytest.approx([0.05, 0.05])  # D split evenly
    assert [r[2] for r in runs["auto"].candidates] == [300, 150]  # every label, the hidden half
    assert runs["label-free"].candidates[0][:3] == ("label-free", 0.1, 300)
    assert runs["fitted"].candidates[0][:3] == ("fitted", 0.1, 150)
    auto = runs["auto"]
    assert auto.candidate in ("label-free", "fitted") and auto.coverage == max(r[4] for r in auto.candidates)
    assert set(auto.curves) == {"label-free", "fitted"} and auto.curve == auto.curves[auto.candidate]


def test_nothing_certified_says_how_many_more_labels_would_as_a_range_within_the_pool(cone):
    table = cone.table.assign(human=np.where(np.arange(len(cone.table)) < 100, cone.truth, "missing"))
    g = run_audit(table, cone.embeddings, AuditConfig(scorer="centroid", guarantee=0.95)).report.guarantee
    assert g.coverage == 0 and g.labels_needed is not None
    low, high = g.labels_needed
    assert 1 <= low <= (high if high is not None else low) <= (table.human == "missing").sum()
    assert any(n.startswith("between ") or n.startswith("about ") for n in g.notes)
    assert not any(" 0 more" in n for n in g.notes)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(certify="fitted"), "certify says what the guarantee certifies by: it needs a guarantee"),
        (dict(guarantee=0.8, certify="best"), "certify must be one of auto, label-free"),
        (dict(spot_checks=0.2), "spot_checks is a share of the rows the guarantee certifies: it needs a guarantee"),
        (dict(guarantee=0.8, spot_checks=1.5), "spot_checks must be in [0, 1]"),
    ],
)
def test_the_certify_settings_are_checked(options, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        AuditConfig(**options).validate()


def test_evaluate_with_its_default_pairs_applies_the_guarantee_to_the_calibrated_rules_only():
    """The default pairs (knn:evidence, pot:paper) with a guarantee: the paper rule gives no P(judge wrong),
    so its rows run uncertified (coverage n/a) instead of the whole protocol failing; a comparison with no
    calibrated rule at all is refused, naming the guarantee and the rules."""
    from puaudit_jax.evaluate import evaluate, summary_table

    hard = cone_comparisons(n_labelled=400, n_unlabelled=300, d=32, alpha=0.7, neg_range=(0.3, 0.65), seed=4)
    opts = dict(seeds=2, guarantee=0.8, progress=False)
    res = evaluate(hard.table, hard.embeddings, pairs=[("centroid", "paper"), ("centroid", "evidence")], **opts)
    overall = res.summary[res.summary.question_type == "all"].set_index("rule")
    assert 0 < overall.loc["evidence", "coverage"] <= 1 and np.isnan(overall.loc["paper", "coverage"])
    assert list(overall.index) == ["paper", "evidence"]  # the order asked for
    assert res.meta["guarantee"] == {
        "A": 0.8,
        "applies_to": ["centroid:evidence"],
        "not_applicable": ["centroid:paper"],
    }
    assert "n/a" in summary_table(res.summary)
    with pytest.raises(ValueError, match="guarantee .*calibrated rule.*'paper'"):
        evaluate(hard.table, hard.embeddings, pairs=[("centroid", "paper")], **opts)


def _flipped(summary: str) -> int:
    """The count on the summary's ``flipped N (x%)``."""
    import re

    return int(re.search(r"flipped (\d+) \(", summary).group(1))


def test_the_summary_gives_the_expected_gain_of_the_flips_applied_and_says_the_guarantee_decides(certified):
    """Under a guarantee the rule's own flips (here 209) are not applied, the guarantee's are (149): the summary
    said "flipped 149" beside "expected gain on the pool +25.30 points" of the 209, and "flipped N" beside
    "ABSTAINED" when the rule abstained and the guarantee flipped."""
    report = certified.report
    d, text = report.decision, report.summary()
    assert d.n_flipped != report.counts.flipped and _flipped(text) == report.counts.flipped
    assert f"flipped {report.counts.flipped} ({report.flip_rate:.1%}) by the guarantee" in text
    assert "expected gain on the pool" not in text
    assert "not applied: the guarantee decides every pool row" in text
    assert f"alone it would flip {d.n_flipped} pool rows, expected gain {100 * d.evidence.expected_gain:+.2f}" in text
    assert pool_title(d, guaranteed=True) == (f"(b) pool: the rule alone would flip {d.n_flipped}, expected gain "
                                              f"{100 * d.evidence.expected_gain:+.1f} pts (not applied: the "
                                              "guarantee decides)")  # fmt: skip
    abstained = replace(d, abstained=True, reason="out-of-fold gain not above 0", n_flipped=0)
    text = replace(report, decision=abstained).summary()
    assert "ABSTAINED" in text and "alone it would flip none" in text and "by the guarantee" in text


def test_an_abstaining_rule_says_it_applies_no_flip_and_what_it_would_have_flipped(cone):
    plain = run_audit(cone.table, cone.embeddings, AuditConfig(scorer="centroid"))
    d = plain.report.decision
    report = replace(plain.report, decision=replace(d, abstained=True, reason="r", n_flipped=0),
                     counts=replace(plain.report.counts, flipped=0), flip_rate=0.0)  # fmt: skip
    text = report.summary()
    would = d.evidence.n_flipped_if_not_abstaining
    assert _flipped(text) == 0 and "by the guarantee" not in text and would > 0
    assert f"no flip applied (it would have flipped the {would} pool rows with P(judge wrong) > " in text
    assert "so no gain is expected on the pool" in text and "expected gain" not in text
    text = plain.report.summary()
    assert f"expected gain of its {d.n_flipped} flips on the pool {100 * d.evidence.expected_gain:+.2f}" in text
