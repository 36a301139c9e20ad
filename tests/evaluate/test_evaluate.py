"""Tests of the evaluation protocol (puaudit_jax.evaluate): splits, hidden labels, consistency
against an independent reading of the raw MT-Bench files, summaries, rules and sweeps."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit.embed import PairEmbeddings
from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.datasets import data_path, item_status
from puaudit_jax.evaluate import PeakMemory, consistency, evaluate, reapply_rule, split_labels, sweep
from tests.helpers import read_jsonl


def raw_mtbench():
    """(qid, model_a, model_b, turn) -> (gpt4 verdict, plurality human verdict | None, usable texts),
    read with json only (no package code)."""
    to_abt = {"model_a": "A", "model_b": "B", "tie": "tie", "tie (inconsistent)": "tie"}
    folder = data_path("mtbench")
    votes = defaultdict(list)
    for v in read_jsonl(folder / "human_votes_partial.jsonl"):
        votes[(v["question_id"], v["model_a"], v["model_b"], v["turn"])].append(to_abt[v["winner"]])
    answers = {}
    for path in (folder / "model_answer").glob("*.jsonl"):
        for rec in read_jsonl(path):
            answers[(rec["question_id"], path.stem)] = rec["choices"][0]["turns"]
    out = {}
    for g in read_jsonl(folder / "gpt4_pair_partial.jsonl"):
        key = (g["question_id"], g["model_a"], g["model_b"], g["turn"])
        human = None
        if key in votes:
            counts = Counter(votes[key])
            top = max(counts.values())
            best = [v for v, c in counts.items() if c == top]
            human = best[0] if len(best) == 1 else "tie"
        ta = answers.get((key[0], key[1]), [])
        tb = answers.get((key[0], key[2]), [])
        ra = ta[key[3] - 1] if len(ta) >= key[3] else ""
        rb = tb[key[3] - 1] if len(tb) >= key[3] else ""
        usable = bool(ra.strip()) and bool(rb.strip()) and ra.strip() != rb.strip()
        out[f"mtbench:{key[0]}:{key[1]}:{key[2]}:t{key[3]}"] = (to_abt[g["winner"]], human, usable)
    return out


def random_embeddings(table, d=16, seed=0):
    usable = item_status(table)["status"] != "excluded"
    ids = table.loc[usable.to_numpy(), "id"].to_numpy()
    rng = np.random.default_rng(seed)
    return PairEmbeddings(ids, rng.normal(size=(len(ids), d)), rng.normal(size=(len(ids), d)))


@pytest.fixture(scope="module")
def mtbench_eval(mtbench):
    return evaluate(
        mtbench,
        random_embeddings(mtbench),
        scorers=["centroid"],
        rules=["paper", "budget"],
        seeds=2,
        p_ratio=0.2,
        progress=False,
    )


def test_split_hides_labels_per_type(mtbench):
    split = split_labels(mtbench, p_ratio=0.2, seed=5)
    status = item_status(mtbench)
    labelled = mtbench[(status["status"] == "labelled").to_numpy()]
    for _, part in labelled.groupby("question_type"):
        visible = split.table[split.table.id.isin(part.id) & (split.table.human != "missing")]
        assert len(visible) == int(np.floor(0.2 * len(part)))
    assert len(split.eval_ids) == len(labelled) - sum(
        int(np.floor(0.2 * len(p))) for _, p in labelled.groupby("question_type")
    )
    hidden = split.table.set_index("id").loc[split.eval_ids]
    assert (hidden.human == "missing").all()
    assert (split.truth == mtbench.set_index("id").loc[split.eval_ids, "human"]).all()
    assert split_labels(mtbench, p_ratio=0.2, seed=5).eval_ids.tolist() == split.eval_ids.tolist()
    with pytest.raises(ValueError, match="p_ratio"):
        split_labels(mtbench, p_ratio=1.0, seed=0)


def test_cons_orig_equals_raw_agreement_from_the_files(mtbench, mtbench_eval):
    raw = raw_mtbench()
    decisive_usable = [k for k, (j, h, ok) in raw.items() if ok and j in "AB" and h in ("A", "B")]
    assert len(decisive_usable) == 755
    res = mtbench_eval
    for seed in (0, 1):
        split = split_labels(mtbench, p_ratio=0.2, seed=seed)
        rows = res.per_seed[(res.per_seed.seed == seed) & (res.per_seed.rule == "paper")].set_index("question_type")
        qtype = mtbench.set_index("id")["question_type"]
        # every decisive usable item is either visible (P / holdout) or in the evaluation pool
        visible = split.table[(split.table.human != "missing")].id
        assert len(set(split.eval_ids)) + len(set(visible) & set(decisive_usable)) == 755
        ids = pd.Index(split.eval_ids)
        agree = pd.Series([raw[i][0] == raw[i][1] for i in ids], index=ids)
        assert rows.loc["all", "cons_orig"] == pytest.approx(agree.mean(), abs=1e-12)
        assert rows.loc["all", "n_eval"] == len(ids)
        for qt, part in agree.groupby(qtype.loc[ids].to_numpy()):
            assert rows.loc[qt, "cons_orig"] == pytest.approx(part.mean(), abs=1e-12)


def test_summary_mean_std_over_seeds(mtbench_eval):
    res = mtbench_eval
    per = res.per_seed[(res.per_seed.rule == "paper") & (res.per_seed.question_type == "all")]
    row = res.summary[(res.summary.rule == "paper") & (res.summary.question_type == "all")].iloc[0]
    assert row.seeds == 2
    assert row.cons_adj_mean == pytest.approx(per.cons_adj.mean())
    assert row.cons_adj_std == pytest.approx(per.cons_adj.std(ddof=1))
    assert row.gain_mean == pytest.approx(row.cons_adj_mean - row.cons_orig_mean)
    assert set(res.summary.columns) >= {
        "n",
        "cons_orig_mean",
        "cons_orig_std",
        "cons_adj_mean",
        "cons_adj_std",
        "flip_rate",
        "time_s",
        "peak_rss_mb",
    }
    assert (res.summary.peak_rss_mb > 0).all() and (res.summary.time_s > 0).all()


def test_budget_rule_flips_one_minus_m_per_group(mtbench_eval):
    res = mtbench_eval
    audit_result = res.first_audit
    m = audit_result.report.m.value
    pool, info = reapply_rule(audit_result, "budget")
    assert info is None
    for _, part in pool.groupby("group"):
        assert part.flipped.sum() == int(np.floor((1 - m) * len(part) + 1e-9))
    # cons_orig does not depend on the rule
    per = res.per_seed.pivot_table(index=["seed", "question_type"], columns="rule", values="cons_orig")
    np.testing.assert_allclose(per["paper"], per["budget"])


def test_protocol_on_cone_model_raises_agreement():
    data = cone_comparisons(400, 0, d=32, seed=3)
    res = evaluate(data.table, data.embeddings, scorers=["centroid", "knn"], seeds=3, p_ratio=0.4, progress=False)
    overall = res.summary[res.summary.question_type == "all"].set_index("scorer")
    assert (overall.cons_adj_mean > overall.cons_orig_mean + 0.15).all()


def test_sweep_over_m():
    data = cone_comparisons(200, 0, d=16, seed=1)
    res = sweep(
        data.table,
        data.embeddings,
        param="m",
        values=[0.5, 0.9],
        scorers=["centroid"],
        seeds=2,
        rules=["budget"],
        progress=False,
    )
    overall = res.summary[res.summary.question_type == "all"]
    assert overall["m"].tolist() == [0.5, 0.9]
    assert overall["m_mean"].tolist() == [0.5, 0.9]
    # budget rule: flip share floor((1 - m) k) / k
    assert overall.flip_rate.iloc[0] > overall.flip_rate.iloc[1]
    with pytest.raises(ValueError, match="param"):
        sweep(data.table, data.embeddings, param="eta", values=[0.5])


def test_peak_memory_sees_an_allocation():
    with PeakMemory() as mem:
        block = np.ones((64, 2**20 // 8))  # 64 MiB
        block.sum()
    assert mem.delta_mb > 30 and mem.peak_mb >= mem.start_mb


def test_consistency_by_hand():
    pool = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "question_type": ["x", "x", "y", "y"],
            "judge": ["A", "B", "A", "A"],
            "adjusted": ["A", "A", "B", "A"],
            "flipped": [False, True, True, False],
        }
    )
    truth = pd.Series(["A", "A", "A", "B"], index=["a", "b", "c", "d"])
    out = consistency(pool, truth).set_index("question_type")
    assert out.loc["x", "cons_orig"] == 0.5 and out.loc["x", "cons_adj"] == 1.0
    assert out.loc["y", "cons_orig"] == 0.5 and out.loc["y", "cons_adj"] == 0.0
    assert out.loc["all", "cons_orig"] == 0.5 and out.loc["all", "flip_rate"] == 0.5


def test_evaluate_defaults_to_the_default_audit_and_the_seed_configuration():
    """No scorers/rules: the two pairs that mean something, each scorer audited once per split."""
    from puaudit_jax.evaluate import DEFAULT_PAIRS, pairs_by_scorer

    data = cone_comparisons(160, 60, d=16, seed=5)
    res = evaluate(data.table, data.embeddings, seeds=1, progress=False)
    pairs = set(map(tuple, res.summary[["scorer", "rule"]].drop_duplicates().to_numpy()))
    assert pairs == set(DEFAULT_PAIRS) == {("knn", "evidence"), ("pot", "paper")}
    assert res.meta["pairs"] == [list(p) for p in DEFAULT_PAIRS] and res.first_audit.report.scorer == "knn"
    grid = pairs_by_scorer(scorers=["knn", "pot"], rules=["paper", "budget"])
    assert [(s, r) for s, r in grid] == [("knn", ["paper", "budget"]), ("pot", ["paper", "budget"])]
    assert pairs_by_scorer([("knn", "paper"), ("pot", "paper"), ("knn", "none")]) == [
        ("knn", ["paper", "none"]),
        ("pot", ["paper"]),
    ]
    with pytest.raises(ValueError, match="either pairs or scorers"):
        pairs_by_scorer([("knn", "paper")], scorers=["knn"])
    with pytest.raises(ValueError, match="unknown rule"):
        pairs_by_scorer([("knn", "nope")])


def test_evaluate_options_are_protocol_or_audit_fields():
    data = cone_comparisons(120, 0, d=16, seed=6)
    res = evaluate(
        data.table, data.embeddings, pairs=[("centroid", "paper")], seeds=[3], p_ratio=0.3, eta=0.4, progress=False
    )
    assert res.meta["seeds"] == [3] and res.meta["p_ratio"] == 0.3 and res.meta["audit_config"]["eta"] == 0.4
    assert res.first_audit.config.eta == 0.4 and res.first_audit.config.seed == 3
    with pytest.raises(TypeError, match="unknown option"):
        evaluate(data.table, data.embeddings, pairs=[("centroid", "paper")], sedes=2, progress=False)


def test_the_demo_adds_a_guaranteed_run_and_says_what_it_kept_on_the_same_splits():
    """``run_demo``'s third run: the default audit with a guarantee, summarised from the hidden labels.

    A guarantee given for the comparison runs does not reach them (their rows stay uncertified), its delta
    reaches the guaranteed run; the summary equals a guaranteed protocol run of its own, and the printed
    paragraph gives its numbers.
    """
    from puaudit_jax.audit import AuditConfig
    from puaudit_jax.evaluate.demo import demo_text, run_demo

    hard = cone_comparisons(n_labelled=400, n_unlabelled=300, d=32, alpha=0.7, neg_range=(0.3, 0.65), seed=4)
    opts = dict(seeds=3, p_ratio=0.4, progress=False)
    res = run_demo(hard.table, hard.embeddings, scorers=["centroid"], default_rule="evidence", paper_scorer="pot",
                   guarantee=0.8, config=AuditConfig(guarantee=0.95, delta=0.3), **opts)  # fmt: skip
    assert "coverage" not in res.summary and "violated" not in res.per_seed  # the comparisons ran without one
    g = res.meta["guarantee"]
    alone = evaluate(hard.table, hard.embeddings, pairs=[("centroid", "evidence")], guarantee=0.8, delta=0.3,
                     ceiling=False, **opts)  # fmt: skip
    rows = alone.per_seed[alone.per_seed.question_type == "all"]
    assert (g["A"], g["delta"], g["splits"]) == (0.8, 0.3, 3)  # the delta given, the demo's A
    assert [r["coverage"] for r in g["per_seed"]] == pytest.approx(rows.coverage.tolist())
    assert g["coverage_mean"] == pytest.approx(rows.coverage.mean()) and 0 < g["coverage_mean"] <= 1
    assert g["violations"] == int((rows.certified_agreement < 0.8).sum())
    text = demo_text(res, first_scorer="centroid", eta=0.5, p_ratio=0.4, source="synthetic")
    paragraph = text[text.index("-- trust, flip or escalate") :]
    assert "`--guarantee 0.8 --delta 0.3` on the same splits" in paragraph and "probability >= 0.7 over" in paragraph
    assert f"kept {g['coverage_mean'] * 100:.1f}% of the pool" in paragraph
    assert f"agreed with the hidden expert verdicts {g['certified_agreement_mean']:.3f}" in paragraph


def test_the_demo_says_when_its_guarantee_cannot_run_and_keeps_the_comparisons():
    """Too few labels per split for A and delta: the guaranteed run's error is the demo's last paragraph
    (before, the demo would have stopped after both comparison runs, writing nothing)."""
    from puaudit_jax.evaluate.demo import demo_text, run_demo

    hard = cone_comparisons(n_labelled=120, n_unlabelled=200, d=16, alpha=0.7, seed=5)
    res = run_demo(hard.table, hard.embeddings, scorers=["centroid"], default_rule="evidence", paper_scorer="pot",
                   guarantee=0.99, seeds=2, p_ratio=0.2, progress=False)  # fmt: skip
    g = res.meta["guarantee"]
    assert (g["A"], g["delta"]) == (0.99, 0.1) and "needs at least" in g["error"]
    assert len(res.summary) and "Not available: guarantee 0.99" in demo_text(
        res, first_scorer="centroid", eta=0.5, p_ratio=0.2, source="synthetic"
    )


def test_the_demo_takes_the_guarantees_own_settings_for_its_guaranteed_run_only():
    """``demo --guarantee 0.8 --human-ties disagree`` was refused: "human_ties ... needs a guarantee", the
    comparison runs (run without one) keeping the guarantee's settings; they reach the guaranteed run only."""
    from puaudit_jax.audit import AuditConfig
    from puaudit_jax.evaluate.demo import run_demo

    hard = cone_comparisons(n_labelled=400, n_unlabelled=300, d=32, alpha=0.7, neg_range=(0.3, 0.65), seed=4)
    config = AuditConfig(guarantee=0.8, human_ties="disagree", certify="fitted", spot_checks=0.2)
    res = run_demo(hard.table, hard.embeddings, scorers=["centroid"], default_rule="evidence", paper_scorer="pot",
                   guarantee=0.8, config=config, seeds=2, p_ratio=0.4, progress=False)  # fmt: skip
    g = res.meta["guarantee"]
    assert "error" not in g and (g["splits"], g["human_ties"], g["certify"]) == (2, "disagree", "fitted")
    assert res.meta["audit_config"]["human_ties"] == "exclude" and res.meta["audit_config"]["certify"] == "auto"


def test_evaluate_grid_with_ceiling_and_calibrated_rules():
    data = cone_comparisons(400, 0, d=32, seed=3)
    res = evaluate(
        data.table,
        data.embeddings,
        scorers=["centroid"],
        seeds=3,
        p_ratio=0.4,
        progress=False,
        rules=["none", "budget", "calibrated", "two-sided"],
        ceiling=True,
    )
    per = res.per_seed[res.per_seed.question_type == "all"].pivot_table(index="seed", columns="rule", values="cons_adj")
    assert (per["hindsight"] >= per["budget"] - 1e-12).all() and (per["hindsight"] >= per["none"] - 1e-12).all()
    assert (per["calibrated"] > per["none"] + 0.15).all()
    summary = res.summary.set_index(["rule", "question_type"])
    assert summary.loc[("calibrated", "all"), "abstained"] == 0
    assert summary.loc[("calibrated", "all"), "flip_precision"] > 0.9
    assert np.isnan(summary.loc[("budget", "all"), "abstained"])
