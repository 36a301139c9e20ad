"""Bradley-Terry, online Elo and score matrices (puaudit_jax.consensus)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.stats import spearmanr

from puaudit_jax.consensus import (
    BTConfig,
    ComparisonGraphError,
    EloConfig,
    bootstrap_bt,
    fit_bt,
    online_elo,
    score_matrices,
)
from puaudit_jax.consensus.bradley_terry import ELO_PER_NAT


def tournament(n_models=20, n_games=4000, tie_scale=0.0, seed=0):
    """Simulated games under BT (ties: Davidson-like, probability tie_scale * sqrt(p q) when > 0)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1.0, n_models)
    i, j = rng.integers(0, n_models, n_games), rng.integers(0, n_models, n_games)
    keep = i != j
    i, j = i[keep], j[keep]
    p = 1 / (1 + np.exp(-(theta[i] - theta[j])))
    u = rng.random(len(i))
    tie = u < tie_scale * np.sqrt(p * (1 - p))
    a_wins = rng.random(len(i)) < p
    winner = np.where(tie, "tie", np.where(a_wins, "A", "B"))
    models = [f"m{k:02d}" for k in range(n_models)]
    table = pd.DataFrame({"model_a": [models[k] for k in i], "model_b": [models[k] for k in j], "winner": winner})
    return table, pd.Series(theta, index=models), models


def scipy_bt(table, models):
    """Independent BT maximum likelihood (ties as half wins) with scipy's BFGS."""
    idx = {m: k for k, m in enumerate(models)}
    a = table["model_a"].map(idx).to_numpy()
    b = table["model_b"].map(idx).to_numpy()
    s = table["winner"].map({"A": 1.0, "B": 0.0, "tie": 0.5}).to_numpy()

    def nll(x):
        d = x[a] - x[b]
        return -np.sum(s * -np.logaddexp(0, -d) + (1 - s) * -np.logaddexp(0, d)) + 0.5 * x.sum() ** 2

    def grad(x):
        d = x[a] - x[b]
        r = s - 1 / (1 + np.exp(-d))
        g = -np.bincount(a, r, len(models)) + np.bincount(b, r, len(models))
        return g + x.sum()

    x = minimize(nll, np.zeros(len(models)), jac=grad, method="BFGS", options={"gtol": 1e-10}).x
    return x - x.mean()


def test_bt_recovers_true_strengths_of_a_simulated_tournament():
    table, truth, models = tournament(tie_scale=0.6)
    assert (table["winner"] == "tie").mean() > 0.1
    for ties in ("half", "davidson"):
        res = fit_bt(table, BTConfig(ties=ties), models=models)
        assert res.converged and np.isfinite(res.scores).all()
        rho = spearmanr(res.scores.loc[models], truth.loc[models]).statistic
        assert rho > 0.95, (ties, rho)
    assert res.tie_param is not None and np.isfinite(res.tie_param)


def test_bt_matches_choix_on_the_same_data():
    choix = pytest.importorskip("choix", reason="choix==0.4.1 (dev extra) not installed; see the scipy test")
    table, _, models = tournament(n_models=12, n_games=3000, seed=3)  # no ties: choix has none
    res = fit_bt(table, models=models)
    idx = {m: k for k, m in enumerate(models)}
    data = [
        (idx[a], idx[b]) if w == "A" else (idx[b], idx[a])
        for a, b, w in table[["model_a", "model_b", "winner"]].itertuples(index=False)
    ]
    for params in (
        choix.ilsr_pairwise(len(models), data, alpha=0.0, tol=1e-12),
        choix.opt_pairwise(len(models), data, alpha=0.0, method="Newton-CG", tol=1e-12),
    ):
        np.testing.assert_allclose(res.theta, params - params.mean(), atol=1e-6)
    # MAP estimates agree too: choix's penalty is alpha * sum(theta^2) (its docstring says prior variance
    # 1/alpha; the code's penalty means 1/(2 alpha)), ours ridge/2 * sum(theta^2): ridge = 2 alpha
    reg = fit_bt(table, BTConfig(ridge=10.0), models=models)
    params = choix.opt_pairwise(len(models), data, alpha=5.0, method="Newton-CG", tol=1e-12)
    np.testing.assert_allclose(reg.theta, params - params.mean(), atol=1e-6)


def test_bt_matches_an_independent_scipy_fit_with_ties():
    table, _, models = tournament(n_models=10, n_games=1500, tie_scale=0.8, seed=5)
    res = fit_bt(table, BTConfig(ties="half"), models=models)
    np.testing.assert_allclose(res.theta, scipy_bt(table, models), atol=1e-5)


def test_elo_scale_and_anchor():
    # 10 wins to 1: the MLE odds are 10:1, i.e. exactly 400 Elo points apart
    table = pd.DataFrame({"model_a": ["x"] * 11, "model_b": ["y"] * 11, "winner": ["A"] * 10 + ["B"]})
    res = fit_bt(table)
    assert res.scores["x"] - res.scores["y"] == pytest.approx(400.0, abs=1e-6)
    assert res.scores.mean() == pytest.approx(1000.0)
    pinned = fit_bt(table, BTConfig(anchor="y", anchor_value=1200))
    assert pinned.scores["y"] == pytest.approx(1200.0) and pinned.scores["x"] == pytest.approx(1600.0, abs=1e-6)
    assert ELO_PER_NAT * np.log(10) == pytest.approx(400.0)
    with pytest.raises(ValueError, match="anchor model"):
        fit_bt(table, BTConfig(anchor="z"))


def test_non_identifiable_graphs_raise_clearly_and_ridge_regularises():
    unbeaten = pd.DataFrame(
        {"model_a": ["a", "a", "b", "c"], "model_b": ["b", "c", "c", "b"], "winner": ["A", "A", "A", "A"]}
    )
    with pytest.raises(ComparisonGraphError, match="never lost: \\['a'\\]"):
        fit_bt(unbeaten)
    split = pd.DataFrame(
        {"model_a": ["a", "b", "c", "d"], "model_b": ["b", "a", "d", "c"], "winner": ["A", "A", "A", "A"]}
    )
    with pytest.raises(ComparisonGraphError, match="2 disconnected groups"):
        fit_bt(split)
    with pytest.raises(ComparisonGraphError, match="never compared"):
        fit_bt(split.iloc[:2], models=["a", "b", "e"])
    for table, models in ((unbeaten, None), (split, None), (split.iloc[:2], ["a", "b", "e"])):
        res = fit_bt(table, BTConfig(ridge=1.0), models=models)
        assert np.isfinite(res.scores).all() and res.converged
    assert fit_bt(split.iloc[:2], BTConfig(ridge=1.0), models=["a", "b", "e"]).scores["e"] == pytest.approx(1000.0)
    with pytest.raises(ValueError, match="'winner'"):
        fit_bt(unbeaten.assign(winner=["A", "x", "A", "A"]))
    with pytest.raises(ValueError, match="compared with itself"):
        fit_bt(unbeaten.assign(model_b=["a", "c", "c", "b"]))


def test_bootstrap_intervals_are_deterministic_and_cover_the_estimate():
    table, _, models = tournament(n_models=8, n_games=800, seed=1)
    one = bootstrap_bt(table, n_boot=40, seed=7, models=models)
    two = bootstrap_bt(table, n_boot=40, seed=7, models=models)
    pd.testing.assert_frame_equal(one.table, two.table)
    t = one.table
    assert (t["lo"] <= t["elo"]).all() and (t["elo"] <= t["hi"]).all() and (t["se"] > 0).all()
    assert one.n_degenerate == 0 and one.samples.shape == (40, 8)
    # a sparse graph: degenerate resamples are counted, never NaN
    sparse = bootstrap_bt(table.iloc[:40], BTConfig(), n_boot=30, seed=0) if _identifiable(table.iloc[:40]) else None
    if sparse is not None:
        assert sparse.n_degenerate + len(sparse.samples) == 30 and np.isfinite(sparse.samples).all()


def _identifiable(table):
    try:
        fit_bt(table)
        return True
    except ComparisonGraphError:
        return False


def test_online_elo_orders_a_tournament_and_keeps_mean_1000():
    table, truth, models = tournament(n_models=10, n_games=3000, seed=2)
    res = online_elo(table, EloConfig(k=8, n_orders=20, seed=0), models=models)
    assert res.scores.mean() == pytest.approx(1000.0)
    assert spearmanr(res.scores.loc[models], truth).statistic > 0.9
    again = online_elo(table, EloConfig(k=8, n_orders=20, seed=0), models=models)
    pd.testing.assert_series_equal(res.scores, again.scores)
    assert (res.spread > 0).all() and res.n_games.sum() == 2 * len(table)


def test_score_matrices_by_judge():
    table, _, models = tournament(n_models=6, n_games=600, seed=4)
    verdicts = pd.concat(
        [
            table.assign(judge="j1"),
            table.assign(judge="j2", winner=table["winner"].map({"A": "B", "B": "A", "tie": "tie"})),
        ]
    )
    res = score_matrices(verdicts, models=models)
    assert list(res.scores.index) == ["j1", "j2"] and list(res.scores.columns) == models
    np.testing.assert_allclose(res.scores.loc["j1"] - 1000, -(res.scores.loc["j2"] - 1000), atol=1e-6)
    bad = verdicts[~((verdicts["judge"] == "j2") & ((verdicts["model_a"] == "m05") | (verdicts["model_b"] == "m05")))]
    with pytest.raises(ComparisonGraphError, match="judge 'j2'.*never compared"):
        score_matrices(bad, models=models)


@pytest.mark.parametrize(
    "call, match",
    [
        # n_boot=-1 failed inside numpy ("need at least one array to stack")
        (lambda t: score_matrices(t.assign(judge="j"), n_boot=-1), r"n_boot must be an integer >= 0"),
        (lambda t: score_matrices(t.assign(judge="j"), n_boot=2.5), r"n_boot must be an integer >= 0"),
        (lambda t: score_matrices(t.assign(judge="j"), seed=-1), r"seed must be an integer >= 0"),
        (lambda t: bootstrap_bt(t, n_boot=0), r"n_boot must be an integer >= 1"),
        (lambda t: bootstrap_bt(t, n_boot=5, level=1.5), r"level must be in \(0, 1\)"),
        (lambda t: BTConfig(ridge=float("nan")), r"ridge must be a finite number >= 0"),
        (lambda t: BTConfig(tol=0.0), r"tol must be a finite number > 0"),
        (lambda t: BTConfig(max_iter=0), r"max_iter must be an integer >= 1"),
        (lambda t: EloConfig(k=float("inf")), r"k must be a finite number > 0"),
        (lambda t: EloConfig(k="4"), r"k must be a finite number > 0"),
        (lambda t: EloConfig(n_orders=0), r"n_orders must be an integer >= 1 \(.*--orders\)"),
        (lambda t: EloConfig(seed=-3), r"seed must be an integer >= 0"),
    ],
)
def test_bad_options_are_named_before_any_fit(call, match):
    table, _, _ = tournament(n_models=4, n_games=100, seed=3)
    with pytest.raises(ValueError, match=match):
        call(table)
