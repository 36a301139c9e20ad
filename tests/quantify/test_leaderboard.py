"""PPI++ logistic M-estimation equal to ppi-python's, the Bradley-Terry leaderboard equal to the
consensus package's fit, clusters, not-estimable rows, and audit-powered predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.quantify import (
    AUDIT_PPI,
    HUMAN_ONLY,
    JUDGE_BIAS,
    JUDGE_ONLY,
    PPI,
    STRATIFIED,
    audit_predictions,
    ppi_logistic,
    ppi_logistic_splits,
    ppi_mean,
    quantify,
    stratified_ppi_mean,
)
from puaudit_jax.quantify.estimators import mean_splits, z_value
from puaudit_jax.quantify.leaderboard import bt_leaderboard

ppi_py = pytest.importorskip("ppi_py")


def _logistic_data(n, big_n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + big_n, d))
    p = 1 / (1 + np.exp(-X @ rng.normal(size=d)))
    y = rng.binomial(1, p).astype(float)
    yhat = np.clip(p + rng.normal(0, 0.2, n + big_n), 0, 1)
    lab = np.r_[np.ones(n, bool), np.zeros(big_n, bool)]
    return X, y, yhat, lab


@pytest.mark.parametrize("n, big_n, d", [(60, 600, 3), (300, 100, 5), (40, 3000, 4)])
@pytest.mark.parametrize("lam", [None, 0.0, 0.4, 1.0])
def test_ppi_logistic_equals_ppi_python(n, big_n, d, lam):
    X, y, yhat, lab = _logistic_data(n, big_n, d, d)  # seeds where ppi_py's own fit succeeds
    fit = ppi_logistic(X, np.where(lab, y, np.nan), yhat, lab, ~lab, lam=lam)
    lo, hi = ppi_py.ppi_logistic_ci(X[:n], y[:n], yhat[:n], X[n:], yhat[n:], alpha=0.1, lam=lam)
    half = z_value(0.9) * np.sqrt(np.diag(fit.cov))
    np.testing.assert_allclose(fit.theta - half, lo, atol=1e-6)
    np.testing.assert_allclose(fit.theta + half, hi, atol=1e-6)
    if lam is not None:
        point = ppi_py.ppi_logistic_pointestimate(X[:n], y[:n], yhat[:n], X[n:], yhat[n:], lam=lam)
        np.testing.assert_allclose(fit.theta, point, atol=1e-6)
    assert fit.converged and (lam is None or fit.lam == lam)


def test_classical_logistic_equals_ppi_python_and_the_splits_equal_single_fits():
    X, y, yhat, lab = _logistic_data(200, 400, 3, 7)
    fit = ppi_logistic(X[:200], y[:200], y[:200], lab[:200], ~lab[:200], lam=0.0)
    lo, hi = ppi_py.classical_logistic_ci(X[:200], y[:200], alpha=0.1)
    half = z_value(0.9) * np.sqrt(np.diag(fit.cov))
    np.testing.assert_allclose(np.r_[fit.theta - half, fit.theta + half], np.r_[lo, hi], atol=1e-6)
    rng = np.random.default_rng(0)
    masks = rng.random((4, len(y))) < 0.2
    theta, cov, lam, ok = ppi_logistic_splits(X, y, yhat, masks, ~masks)
    for s in range(4):
        one = ppi_logistic(X, np.where(masks[s], y, np.nan), yhat, masks[s], ~masks[s])
        np.testing.assert_allclose(theta[s], one.theta, atol=1e-10)
        np.testing.assert_allclose(cov[s], one.cov, atol=1e-10)
        assert lam[s] == pytest.approx(one.lam) and ok[s]


def test_mean_splits_equal_the_single_estimators():
    rng = np.random.default_rng(0)
    y = rng.binomial(1, 0.6, 300).astype(float)
    y[rng.random(300) < 0.2] = 0.5
    yhat = np.clip(y + rng.normal(0, 0.4, 300), 0, 1)
    lab = rng.random((5, 300)) < 0.2
    unl = ~lab & (rng.random((5, 300)) < 0.9)
    out = mean_splits(y, yhat, lab, unl, 0.9)
    for s in range(5):
        one = ppi_mean(y[lab[s]], yhat[lab[s]], yhat[unl[s]], 0.9)
        np.testing.assert_allclose([v[s] for v in out[PPI]], [one.estimate, one.lower, one.upper], atol=1e-12)


def _tournament(seed=0, n=900, hidden=0.7, strengths=(-0.5, 1.0, 0.5, 0.0, -1.0)):
    """Comparisons of 5 models with BT strengths; the judge favours model m0 (a self-preference)."""
    rng = np.random.default_rng(seed)
    models = [f"m{k}" for k in range(len(strengths))]
    a, b = rng.integers(0, len(models), (2, n * 2))
    a, b = a[a != b][:n], b[a != b][:n]
    theta = np.asarray(strengths)
    human = np.where(rng.random(n) < 1 / (1 + np.exp(-(theta[a] - theta[b]))), "A", "B")
    human = np.where(rng.random(n) < 0.1, "tie", human)
    judge = np.where(rng.random(n) < 0.8, human, np.where(rng.random(n) < 0.5, "A", "B"))
    judge = np.where((a == 0) & (rng.random(n) < 0.5), "A", np.where((b == 0) & (rng.random(n) < 0.5), "B", judge))
    shown = np.where(rng.random(n) < hidden, "missing", human)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "judge": judge, "human": shown,
                         "model_a": np.array(models)[a], "model_b": np.array(models)[b]})  # fmt: skip


def test_human_only_elo_equals_the_consensus_bradley_terry_fit():
    from puaudit_jax.consensus.bradley_terry import fit_bt

    table = _tournament()
    frame = quantify(table).to_frame().set_index(["target", "estimator"])
    labelled = table[table.human != "missing"]
    bt = fit_bt(labelled.assign(winner=labelled.human))
    judged = fit_bt(table.assign(winner=table.judge))
    for model in bt.scores.index:
        assert frame.loc[(f"elo: {model}", HUMAN_ONLY), "estimate"] == pytest.approx(bt.scores[model], abs=1e-6)
        assert frame.loc[(f"elo: {model}", JUDGE_ONLY), "estimate"] == pytest.approx(judged.scores[model], abs=1e-6)
    elo = frame[frame.index.get_level_values(0).str.startswith("elo: ")]
    assert (elo["lower"] < elo["estimate"]).all() and (elo["estimate"] < elo["upper"]).all()
    assert elo.xs(PPI, level=1)["estimate"].mean() == pytest.approx(1000.0)
    # the judge's self-preference lifts m0 above the humans' score; PPI++ corrects towards them
    judge_gap = frame.loc[("elo: m0", JUDGE_ONLY), "estimate"] - bt.scores["m0"]
    ppi_gap = frame.loc[("elo: m0", PPI), "estimate"] - bt.scores["m0"]
    assert judge_gap > 30 and abs(ppi_gap) < judge_gap / 2


def test_cluster_robust_leaderboard_intervals_ignore_copies():
    """Every comparison copied twice into one cluster: the clustered Elo intervals of the copies equal
    the plain intervals of the original (copies add no information; CR0 against ddof-1 covariances
    differ by ~1/n), while the naive intervals of the copies shrink by sqrt(2)."""
    table = _tournament(seed=1, n=400, hidden=0.5)
    lab, unl = (table.human != "missing").to_numpy(), (table.human == "missing").to_numpy()
    y = np.select([table.human == "A", table.human == "B", table.human == "tie"], [1.0, 0.0, 0.5], np.nan)
    yhat = np.select([table.judge == "A", table.judge == "B"], [1.0, 0.0], 0.5)
    args = (table.model_a.to_numpy(), table.model_b.to_numpy(), y, {PPI: yhat}, lab, unl, 0.9)
    rep = lambda a: np.repeat(np.asarray(a), 2, axis=0)  # noqa: E731
    copies = (*map(rep, args[:3]), {PPI: rep(yhat)}, rep(lab), rep(unl), 0.9)
    width = lambda rows: np.array([e.upper - e.lower for _, e in rows if e.estimator != JUDGE_ONLY])  # noqa: E731
    original = width(bt_leaderboard(*args))
    np.testing.assert_allclose(width(bt_leaderboard(*copies, clusters=rep(np.arange(len(table))))), original, rtol=0.02)
    np.testing.assert_allclose(width(bt_leaderboard(*copies)), original / np.sqrt(2), rtol=0.02)


def test_not_estimable_leaderboard_rows_say_why():
    table = _tournament(n=300, hidden=0.3)
    extra = pd.DataFrame({"id": ["u1", "u2"], "judge": ["A", "B"], "human": ["missing", "missing"],
                          "model_a": ["new", "m1"], "model_b": ["m2", "new"]})  # fmt: skip
    frame = quantify(pd.concat([table, extra], ignore_index=True)).to_frame().set_index(["target", "estimator"])
    for est in (JUDGE_ONLY, HUMAN_ONLY, PPI):
        row = frame.loc[("elo: new", est)]
        assert np.isnan(row["estimate"]) and "fewer than 2 labelled comparisons" in row["note"]
    # the judge-only fit needs no label, but "new" won both of its comparisons: its strength is infinite
    assert "the judge's verdicts do not score it either" in frame.loc[("elo: new", JUDGE_ONLY), "note"]
    assert "never lost: ['new']" in frame.loc[("elo: new", JUDGE_ONLY), "note"]
    assert frame.loc[("elo: m1", PPI), "caveat"].startswith("2 rows with a model")
    # a model that never lost in the labelled rows: the human-only strengths are not identified
    lost = table[~((table.human != "missing") & ((table.model_a == "m4") & (table.human == "B")
                                                 | (table.model_b == "m4") & (table.human == "A")))]  # fmt: skip
    lost = lost[~((lost.human == "tie") & ((lost.model_a == "m4") | (lost.model_b == "m4")))]
    frame = quantify(lost).to_frame().set_index(["target", "estimator"])
    assert "not estimable" in frame.loc[("elo: m4", HUMAN_ONLY), "note"]


def test_judge_only_elo_scores_every_model_the_judge_compared_on_the_labelled_models_scale():
    """A model with no labelled comparison but the judge's verdicts on 60: its judge-only win rate was given and its
    judge-only Elo "not estimable: fewer than 2 labelled comparisons" (the judge-only fit needs no label). Now it
    has one; the scale stays the other estimators' (the labelled models average 1000), and the label-based
    estimators still say why they cannot score it."""
    table = _tournament(n=400, hidden=0.3)
    rng = np.random.default_rng(3)
    others = rng.choice([f"m{k}" for k in range(5)], 60)
    new_wins = rng.random(60) < 0.5
    extra = pd.DataFrame({"id": [f"u{i}" for i in range(60)], "judge": np.where(new_wins, "A", "B"),
                          "human": "missing", "model_a": "new", "model_b": others})  # fmt: skip
    frame = quantify(pd.concat([table, extra], ignore_index=True)).to_frame().set_index(["target", "estimator"])
    judge = frame.loc[("elo: new", JUDGE_ONLY)]
    assert np.isfinite(judge["estimate"]) and judge["lower"] < judge["estimate"] < judge["upper"]
    assert np.isfinite(frame.loc[("win rate: new", JUDGE_ONLY), "estimate"])
    for est in (HUMAN_ONLY, PPI):
        assert "fewer than 2 labelled comparisons" in frame.loc[("elo: new", est), "note"]
    labelled = [frame.loc[(f"elo: m{k}", JUDGE_ONLY), "estimate"] for k in range(5)]
    assert np.mean(labelled) == pytest.approx(1000.0)


def test_stratified_ppi_combines_the_strata_and_pools_tiny_ones():
    rng = np.random.default_rng(5)
    strata = np.array(["x", "y"])[(rng.random(400) < 0.3).astype(int)]
    y_all = np.where(strata == "x", rng.binomial(1, 0.7, 400), rng.binomial(1, 0.2, 400)).astype(float)
    yhat = np.clip(y_all + rng.normal(0, 0.3, 400), 0, 1)
    lab = rng.random(400) < np.where(strata == "x", 0.4, 0.8)  # labelled share differs by stratum
    est = stratified_ppi_mean(y_all[lab], yhat[lab], yhat[~lab], strata[lab], strata[~lab], 0.9)
    parts = {t: ppi_mean(y_all[lab & (strata == t)], yhat[lab & (strata == t)], yhat[~lab & (strata == t)], 0.9)
             for t in ("x", "y")}  # fmt: skip
    weights = {t: (strata == t).mean() for t in ("x", "y")}
    assert est.estimate == pytest.approx(sum(weights[t] * parts[t].estimate for t in parts))
    se = np.sqrt(sum((weights[t] * (parts[t].upper - parts[t].lower) / (2 * z_value(0.9))) ** 2 for t in parts))
    assert est.upper - est.lower == pytest.approx(2 * z_value(0.9) * se)
    assert est.estimator == STRATIFIED and abs(est.estimate - y_all.mean()) < 0.1
    few = lab & ((strata == "y") | (np.cumsum(strata == "x") <= 5))
    tiny = stratified_ppi_mean(y_all[few], yhat[few], yhat[~few], strata[few], strata[~few], 0.9)
    pooled = ppi_mean(y_all[few], yhat[few], yhat[~few], 0.9)  # x (<= 5 labels) pooled with y: one stratum
    assert tiny.estimate == pytest.approx(pooled.estimate) and tiny.caveat.endswith("pooled: x + y")
    none = few & (np.cumsum(few) <= 6)
    assert "stratum 'x + y' has 6 labelled items" in stratified_ppi_mean(
        y_all[none], yhat[none], yhat[~none], strata[none], strata[~none], 0.9).note  # fmt: skip


def test_collapse_strata_pools_the_smallest_until_each_is_big_enough():
    from puaudit_jax.quantify.estimators import collapse_strata

    assert collapse_strata({"a": 30, "b": 12, "c": 10}, 10) == {"a": "a", "b": "b", "c": "c"}
    assert set(collapse_strata({"a": 30, "b": 12, "c": 10}).values()) == {"a + b + c"}  # default: pools of 30
    merged = collapse_strata({"a": 30, "b": 3, "c": 4, "d": 5, "e": 12}, 10)  # b + c = 7, then + d = 12
    assert merged == {"a": "a", "b": "b + c + d", "c": "b + c + d", "d": "b + c + d", "e": "e"}
    assert set(collapse_strata({"a": 2, "b": 3}).values()) == {"a + b"}  # one stratum left: not estimable then


def test_audit_predictions_check_the_audit_matches_the_table():
    table = pd.DataFrame({"id": ["1", "2", "3", "4"], "judge": ["A", "B", "tie", "A"],
                          "human": ["A", "missing", "tie", "missing"]})  # fmt: skip
    items = pd.DataFrame({"id": ["1", "2", "3", "4"], "judge": ["A", "B", "tie", "A"],
                          "human": ["A", "missing", "tie", "missing"],
                          "status": ["labelled", "unlabelled", "excluded", "unlabelled"],
                          "reason": ["", "", "judge tie", ""],
                          "p_wrong": [0.2, 0.3, np.nan, 0.9]})  # fmt: skip
    np.testing.assert_allclose(audit_predictions(table, items), [0.8, 0.3, 0.5, 0.1])
    with pytest.raises(ValueError, match="not in the audit"):
        audit_predictions(table.assign(id=["1", "2", "3", "9"]), items)
    with pytest.raises(ValueError, match="labelled in the audit but not here"):
        audit_predictions(table.assign(human=["missing", "missing", "tie", "missing"]), items)
    with pytest.raises(ValueError, match="calibrated rule"):
        audit_predictions(table, items.assign(p_wrong=np.nan))
    with pytest.raises(ValueError, match="for their tie label"):
        audit_predictions(table, items.assign(reason=["", "", "judge tie; human tie", ""]))


def test_quantify_with_a_real_audit_adds_audit_powered_rows(tmp_path):
    """MT-Bench with 70 % of the labels hidden, hashed features (no model): an audit with the tie labels
    hidden gives estimable, never much wider rows for every target; a plain audit (which excludes the
    tie-labelled rows, so their prediction would depend on their label) is refused; the CLI agrees."""
    from puaudit_jax.audit import AuditConfig, run_audit
    from puaudit_jax.audit.embed import save_embeddings
    from puaudit_jax.audit.predictions import audit_for_quantify
    from puaudit_jax.cli import CommandError, main
    from puaudit_jax.datasets import load_bundled
    from tests.data.golden.record import hashed_embeddings

    table = load_bundled("mtbench")
    rng = np.random.default_rng(0)
    table = table.assign(human=np.where(rng.random(len(table)) < 0.7, "missing", table.human))
    features = hashed_embeddings(table.assign(human="missing"))
    items = audit_for_quantify(table, features)
    frame = quantify(table, audit_items=items).to_frame()
    audit_rows = frame[frame.estimator == AUDIT_PPI]
    # the judge's bias rows are judge - human alone; kappa and alpha have their own estimators
    estimated = frame.target[(frame.estimator != JUDGE_BIAS) & ~frame.target.str.startswith("beyond chance: ")]
    assert set(audit_rows.target) == set(estimated) and (audit_rows.note == "").all()
    human = frame[frame.estimator == HUMAN_ONLY].set_index("target")
    widths = (audit_rows.set_index("target").eval("upper - lower") / human.eval("upper - lower")).dropna()
    assert (widths < 1.05).all(), widths  # PPI++ never much wider than the labels alone
    with pytest.raises(ValueError, match="tie label"):
        quantify(table, audit_items=run_audit(table, features, AuditConfig()).items)
    save_embeddings(features, tmp_path / "emb.npz")
    table.to_csv(tmp_path / "data.csv", index=False)
    args = [str(tmp_path / "data.csv"), "--embeddings", str(tmp_path / "emb.npz"), "--no-figures", "--quiet"]
    assert main(["quantify", *args, "--with-audit", "--out", str(tmp_path / "q")]) == 0
    written = pd.read_csv(tmp_path / "q" / "leaderboard.csv")
    assert AUDIT_PPI in set(written.estimator)
    np.testing.assert_allclose(written[written.estimator == AUDIT_PPI].estimate, audit_rows.estimate, atol=1e-9)
    assert main(["audit", *args, "--out", str(tmp_path / "a")]) == 0
    with pytest.raises(CommandError) as info:  # the plain audit excluded the tie-labelled rows
        main(["quantify", *args, "--audit", str(tmp_path / "a"), "--out", str(tmp_path / "q2")])
    assert info.value.code == 2
