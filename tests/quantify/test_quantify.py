"""puaudit_jax.quantify: PPI++ means equal to ppi-python's, targets, not-estimable rows, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.cli import main
from puaudit_jax.quantify import HUMAN_ONLY, JUDGE_BIAS, JUDGE_ONLY, PPI, STRATIFIED, human_only, ppi_mean, quantify
from puaudit_jax.quantify.targets import inputs, win_rates

ppi_py = pytest.importorskip("ppi_py")


@pytest.mark.parametrize("n, big_n", [(30, 300), (200, 50), (8, 1000)])
@pytest.mark.parametrize("lam", [None, 0.0, 0.5, 1.0])
def test_ppi_mean_equals_ppi_python(n, big_n, lam):
    rng = np.random.default_rng(n + big_n)
    y = rng.binomial(1, 0.6, n).astype(float)
    yhat = np.clip(y + rng.normal(0, 0.4, n), 0, 1)
    yhat_unl = np.clip(rng.binomial(1, 0.6, big_n) + rng.normal(0, 0.4, big_n), 0, 1)
    ours = ppi_mean(y, yhat, yhat_unl, 0.9, lam=lam)
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, yhat_unl, alpha=0.1, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_unl, lam=lam)
    np.testing.assert_allclose([ours.estimate, ours.lower, ours.upper], np.ravel([point, lo, hi]), atol=1e-6)
    c_lo, c_hi = ppi_py.classical_mean_ci(y, alpha=0.2)
    classical = human_only(y, 0.8)
    np.testing.assert_allclose([classical.lower, classical.upper], [c_lo, c_hi], atol=1e-6)


def test_ppi_uses_a_good_judge_and_ignores_a_useless_one():
    rng = np.random.default_rng(0)
    truth = rng.binomial(1, 0.3, 2200).astype(float)
    y, unl = truth[:200], truth[200:]
    good = ppi_mean(y, y, unl, 0.9)  # predictions equal to the outcome: all the information
    useless = ppi_mean(y, rng.random(200), rng.random(2000), 0.9)
    classical = human_only(y, 0.9)
    assert good.lam > 0.9 and (good.upper - good.lower) < 0.5 * (classical.upper - classical.lower)
    assert useless.lam < 0.2 and (useless.upper - useless.lower) <= 1.05 * (classical.upper - classical.lower)


def _table(rows):
    return pd.DataFrame(rows, columns=["id", "judge", "human", "model_a", "model_b"])


def test_targets_and_not_estimable_rows():
    rows = [(f"{i}", "A", "A" if i % 3 else "B", "x", "y") for i in range(12)]
    rows += [("u1", "B", "missing", "x", "z"), ("u2", "A", "missing", "z", "y"), ("t", "tie", "tie", "y", "x")]
    frame = quantify(_table(rows), level=0.8).to_frame().set_index(["target", "estimator"])
    assert frame.loc[("agreement m", HUMAN_ONLY), "estimate"] == pytest.approx(9 / 13)
    assert frame.loc[("win rate: x", HUMAN_ONLY), "estimate"] == pytest.approx((8 + 0.5) / 13)
    z_human = frame.loc[("win rate: z", HUMAN_ONLY)]
    assert np.isnan(z_human["estimate"]) and z_human["note"].startswith("not estimable: 0 labelled")
    assert frame.loc[("win rate: z", JUDGE_ONLY), "estimate"] == pytest.approx(1.0)  # z won both its judged pairs
    assert frame.loc[("win rate: z", PPI), "note"].startswith("not estimable")
    assert set(frame["level"]) == {0.8}


def test_bad_levels_and_missing_model_columns_are_errors():
    table = _table([("1", "A", "A", "x", "y"), ("2", "B", "A", "x", "y")])
    for level in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match="level must be in"):
            quantify(table, level=level)
    with pytest.raises(ValueError, match="need the columns"):
        win_rates(table.drop(columns="model_b"), inputs(table, 0.9))
    targets = set(quantify(table.drop(columns="model_b")).to_frame()["target"])
    assert targets == {"agreement m", "share of A wins", "judge bias: share of A wins",
                       "beyond chance: kappa (judge vs human)", "beyond chance: alpha (judge, human)"}  # fmt: skip


def test_non_finite_outcomes_are_errors_that_name_the_argument():
    """Before: a NaN outcome gave an "estimable" estimate whose numbers were all NaN, with no note."""
    ok = np.array([0.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"^y must be finite: 1 entries are not, the first at index 2 \(nan\)"):
        human_only(np.array([0, 1, np.nan, 1.0]), 0.9)
    with pytest.raises(ValueError, match=r"^yhat_unlabelled must be finite: .* index 1 \(nan\)"):
        ppi_mean(ok, ok, np.array([1.0, np.nan]), 0.9)
    with pytest.raises(ValueError, match=r"^y must be finite: .* index 0 \(inf\)"):
        ppi_mean(np.array([np.inf, 1, 1, 1.0]), ok, np.array([1.0, 0.0]), 0.9)


def test_the_cli_writes_the_leaderboard_of_a_bundled_set(tmp_path):
    out = tmp_path / "q"
    assert main(["quantify", "llmfao-gpt4", "--include-unlabelled", "--level", "0.8", "--out", str(out)]) == 0
    frame = pd.read_csv(out / "leaderboard.csv", keep_default_na=False, na_values=[""])
    chance = {"delta method", "bootstrap", "ppi++ (delta method)"}  # kappa and alpha
    assert set(frame["estimator"]) == {JUDGE_ONLY, HUMAN_ONLY, PPI, STRATIFIED, JUDGE_BIAS} | chance
    assert (frame["level"] == 0.8).all()
    assert frame["target"].str.startswith("elo: ").any()
    ok = frame[frame["note"].isna()]
    assert ((ok["lower"] <= ok["estimate"]) & (ok["estimate"] <= ok["upper"])).all()
    assert json.loads((out / "leaderboard.json").read_text())["level"] == 0.8
    assert (out / "forest.png").stat().st_size > 0


def test_the_audit_reports_m_with_intervals_and_its_cross_fitted_ppi(cone_model):
    """report.agreement: m by the labelled rows alone and by PPI++ with the audit's out-of-fold
    1 - P(judge wrong); equal to calling the estimators on the items by hand."""
    from puaudit_jax.audit import AuditConfig, AuditReport, run_audit
    from puaudit_jax.quantify import AUDIT_PPI

    result = run_audit(cone_model.table, cone_model.embeddings, AuditConfig(scorer="centroid", rule="two-sided"))
    human, audit_ppi = result.report.agreement
    assert (human.estimate.estimator, audit_ppi.estimate.estimator) == (HUMAN_ONLY, AUDIT_PPI)
    items = result.items
    lab, pool = items[items.status == "labelled"], items[items.role == "U"]
    y = (lab.judge == lab.human).to_numpy(float)
    assert human.estimate.estimate == pytest.approx(y.mean())
    by_hand = ppi_mean(y, 1 - lab.p_wrong.to_numpy(), 1 - pool.p_wrong_cross.to_numpy(), 0.9)
    assert audit_ppi.estimate.estimate == pytest.approx(by_hand.estimate) and audit_ppi.estimate.lam == by_hand.lam
    back = AuditReport.from_dict(json.loads(json.dumps(result.report.to_dict())))
    assert back.agreement == result.report.agreement
    paper_rule = run_audit(cone_model.table, cone_model.embeddings, AuditConfig(scorer="centroid", rule="paper"))
    assert [r.estimate.estimator for r in paper_rule.report.agreement] == [HUMAN_ONLY]  # no P(judge wrong)


def test_the_random_sample_check_flags_a_type_without_labels():
    from puaudit_jax.quantify.sample_check import sample_check
    from puaudit_jax.quantify.targets import usable_rows

    rng = np.random.default_rng(0)
    n = 600
    types = np.array(["t1", "t2", "t3"])[rng.integers(0, 3, n)]
    random_split = np.where(rng.random(n) < 0.5, "A", "missing")
    table = pd.DataFrame({"id": np.arange(n).astype(str), "judge": "A", "human": random_split,
                          "question_type": types})  # fmt: skip
    check = sample_check(types, *usable_rows(table), "question_type")
    assert check.warning == "" and check.p_value > 0.01
    skewed = table.assign(human=np.where(types == "t3", "missing", random_split))
    check = sample_check(types, *usable_rows(skewed), "question_type")
    assert check.p_value < 1e-6 and "not a random sample" in check.warning and check.shares["t3"][1] == 0.0
    assert quantify(skewed).warnings == [check.warning]
    clustered = quantify(skewed.assign(prompt=types), cluster_by="prompt")
    assert [c.by for c in clustered.checks] == ["question_type", "prompt"] and len(clustered.warnings) == 2


def test_cluster_robust_intervals():
    """One cluster per item: the plain intervals. Every item copied three times into one cluster:
    the intervals of the original data (copies add no information), where the plain ones shrink."""
    from puaudit_jax.quantify import judge_only

    rng = np.random.default_rng(3)
    y = rng.binomial(1, 0.6, 60).astype(float)
    yhat = np.clip(y + rng.normal(0, 0.4, 60), 0, 1)
    yhat_unl = np.clip(rng.binomial(1, 0.6, 200) + rng.normal(0, 0.4, 200), 0, 1)
    own = (np.arange(60), np.arange(60, 260))
    for plain, clustered in (
        (ppi_mean(y, yhat, yhat_unl, 0.9), ppi_mean(y, yhat, yhat_unl, 0.9, clusters=own)),
        (human_only(y, 0.9), human_only(y, 0.9, clusters=own[0])),
        (judge_only(yhat, yhat_unl, 0.9), judge_only(yhat, yhat_unl, 0.9, clusters=own)),
    ):
        assert (clustered.lower, clustered.upper) == pytest.approx((plain.lower, plain.upper), abs=1e-12)
    rep = lambda a: np.repeat(a, 3)  # noqa: E731
    tripled = ppi_mean(rep(y), rep(yhat), rep(yhat_unl), 0.9, lam=0.5, clusters=(rep(own[0]), rep(own[1])))
    original = ppi_mean(y, yhat, yhat_unl, 0.9, lam=0.5)
    naive = ppi_mean(rep(y), rep(yhat), rep(yhat_unl), 0.9, lam=0.5)
    assert tripled.upper - tripled.lower == pytest.approx(original.upper - original.lower, rel=1e-9)
    assert naive.upper - naive.lower == pytest.approx((original.upper - original.lower) / np.sqrt(3), rel=1e-9)


def test_quantify_by_prompt_widens_llmfao_intervals_and_names_bad_columns():
    from puaudit_jax.datasets import load_bundled

    table = load_bundled("llmfao-gpt4", include_unlabelled=True)
    plain = quantify(table).to_frame().set_index(["target", "estimator"])
    by_prompt = quantify(table, cluster_by="prompt").to_frame().set_index(["target", "estimator"])
    key = ("share of A wins", HUMAN_ONLY)
    assert by_prompt.loc[key, "estimate"] == plain.loc[key, "estimate"]
    width = lambda f: f.loc[key, "upper"] - f.loc[key, "lower"]  # noqa: E731
    assert width(by_prompt) > width(plain)
    with pytest.raises(ValueError, match="cluster_by='nope'"):
        quantify(table, cluster_by="nope")


def test_the_forest_plots_legends_sit_outside_their_panels():
    """The legend sat at loc="best" inside a panel, over the judge-only point of a target; now it is beside the
    panel, inside the figure."""
    from puaudit_jax.quantify.plots import forest_plot

    rows = [{"target": t, "estimator": e, "estimate": 0.5 + d, "lower": 0.4 + d, "upper": 0.6 + d, "level": 0.9,
             "note": ""} for t in ("share of A wins", "agreement m") for e, d in ((JUDGE_ONLY, 0.3), (HUMAN_ONLY, 0.0),
                                                                                (PPI, 0.1))]  # fmt: skip
    fig = forest_plot(pd.DataFrame(rows))
    fig.canvas.draw()
    renderer, whole = fig.canvas.get_renderer(), fig.bbox
    for ax in fig.axes:
        legend, panel = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
        assert not legend.overlaps(panel)
        assert whole.x0 <= legend.x0 and legend.x1 <= whole.x1 and whole.y0 <= legend.y0 and legend.y1 <= whole.y1
