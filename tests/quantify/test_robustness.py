"""How many comparisons must be dropped to change the #1 (AMIP confirmed by refit), against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from experiments.reproductions.robustness import linked  # every model still linked: the brute forces share it
from puaudit_jax.cli.main import main
from puaudit_jax.quantify import HUMAN_ONLY, JUDGE_ONLY, PPI, quantify

OUTCOME = {"A": 1.0, "B": 0.0, "tie": 0.5}


def _table(rng, strengths, n, hidden=0.0, tie=0.1):
    """n comparisons of models m0.. with BT ``strengths``; the judge agrees with the human 80 % of the time."""
    k = len(strengths)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1 / (1 + np.exp(-(np.asarray(strengths)[a] - np.asarray(strengths)[b])))
    human = np.where(rng.random(n) < p, "A", "B")
    human = np.where(rng.random(n) < tie, "tie", human)
    judge = np.where(rng.random(n) < 0.8, human, np.where(rng.random(n) < 0.5, "A", "B"))
    shown = np.where(rng.random(n) < hidden, "missing", human)
    names = np.array([f"m{j}" for j in range(k)])
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "judge": judge, "human": shown,
                         "model_a": names[a], "model_b": names[b]})  # fmt: skip


def _bt_batch(a, b, y, keep, k, steps=30):
    """Independent Bradley-Terry MLE (theta_0 = 0) for each row of ``keep`` (S, n): (theta (S, k), ok (S,)).

    ok: Newton converged with |theta| < 30 and the kept comparisons link every model (else no leaderboard).
    """
    s = keep.shape[0]
    X = np.zeros((len(a), k))
    X[np.arange(len(a)), a] += 1
    X[np.arange(len(a)), b] -= 1
    X = X[:, 1:]
    beta = np.zeros((s, k - 1))
    step = np.full(s, np.inf)
    for _ in range(steps):
        mu = 1 / (1 + np.exp(-(beta @ X.T)))  # (S, n)
        grad = ((mu - y) * keep) @ X
        hess = np.einsum("sn,ni,nj->sij", keep * mu * (1 - mu), X, X) + 1e-12 * np.eye(k - 1)
        delta = np.linalg.solve(hess, grad[..., None])[..., 0]
        delta *= np.minimum(1, 4 / np.maximum(np.abs(delta).max(1), 1e-300))[:, None]
        beta = np.clip(beta - delta, -60, 60)
        step = np.abs(delta).max(1)
    theta = np.hstack([np.zeros((s, 1)), beta])
    return theta, (step < 1e-8) & (np.abs(theta - theta.mean(1, keepdims=True)).max(1) < 30) & linked(a, b, keep, k)


def _human_arrays(table):
    lab = table["human"] != "missing"
    t = table[lab]
    a = t["model_a"].str[1:].astype(int).to_numpy()
    b = t["model_b"].str[1:].astype(int).to_numpy()
    return t["id"].to_numpy(), a, b, t["human"].map(OUTCOME).to_numpy()


def _top_changes(theta, ok, leader):
    """(S,) whether a valid refit no longer has ``leader`` strictly ahead of every other model."""
    others = np.delete(theta, leader, axis=1)
    return ok & (others.max(1) >= theta[:, leader] - 1e-9)


def _fewest_by_brute_force(table, upto):
    """The fewest labelled comparisons whose removal changes the human-only #1, searching sizes 1..upto (None: more)."""
    ids, a, b, y = _human_arrays(table)
    k = int(max(a.max(), b.max())) + 1
    theta, _ = _bt_batch(a, b, y, np.ones((1, len(y))), k)
    leader = int(np.argmax(theta[0]))
    for size in range(1, upto + 1):
        subsets = np.array(list(itertools.combinations(range(len(y)), size)), int).reshape(-1, size)
        keep = np.ones((len(subsets), len(y)))
        keep[np.arange(len(subsets))[:, None], subsets] = 0
        if _top_changes(*_bt_batch(a, b, y, keep, k), leader).any():
            return size
    return None


def _row(result, estimator, target="#1"):
    return next(r for r in result.robustness.rows if r.estimator == estimator and r.target.startswith(target))


@pytest.mark.parametrize("seed", range(6))
def test_the_count_is_within_one_of_brute_force_and_its_ids_really_change_the_top(seed):
    rng = np.random.default_rng(seed)
    table = _table(rng, (0.3, 0.1, 0.0, -0.3), 36)
    row = _row(quantify(table, robustness=True, style=()), HUMAN_ONLY)
    assert row.verified and row.dropped == len(row.ids) >= 1
    ids, a, b, y = _human_arrays(table)
    keep = ~np.isin(ids, row.ids)[None, :]
    theta, ok = _bt_batch(a, b, y, np.vstack([np.ones(len(y)), keep]).astype(float), 4)
    leader = int(np.argmax(theta[0]))
    assert f"m{leader}" == row.target.removeprefix("#1: ")
    assert _top_changes(theta[1:], ok[1:], leader).all()  # the ids, removed, change the #1 (independent refit)
    fewest = _fewest_by_brute_force(table, min(row.dropped - 1, 3))  # None: none of up to 3 (or dropped - 1)
    assert fewest is None or row.dropped <= fewest + 1, (row.dropped, fewest)


def test_a_dominant_leader_needs_more_drops_than_a_near_tie():
    dominant = _table(np.random.default_rng(1), (2.0, 0.0, -0.2, -0.4), 300, tie=0.0)
    near = _table(np.random.default_rng(1), (0.05, 0.0, -0.2, -0.4), 300, tie=0.0)
    rows = [_row(quantify(t, robustness=True, style=()), HUMAN_ONLY) for t in (dominant, near)]
    assert all(r.verified for r in rows)
    assert rows[0].dropped > 3 * rows[1].dropped


def test_every_estimator_gets_rows_and_ppi_counts_labelled_and_unlabelled_comparisons():
    table = _table(np.random.default_rng(2), (0.8, 0.3, 0.0, -0.5), 600, hidden=0.7)
    result = quantify(table, robustness=True, style=())
    frame = result.robustness.to_frame()
    assert set(frame["estimator"]) == {JUDGE_ONLY, HUMAN_ONLY, PPI}
    assert (frame.groupby("estimator")["target"].count() == 4).all()  # #1 and 3 adjacent pairs each
    used = {JUDGE_ONLY: 600, PPI: 600, HUMAN_ONLY: int((table["human"] != "missing").sum())}
    assert all(frame.loc[frame["estimator"] == e, "comparisons"].eq(n).all() for e, n in used.items())
    ppi = _row(result, PPI)
    assert set(ppi.ids) <= set(table["id"]) and ppi.share == pytest.approx(ppi.dropped / 600)


def test_bad_input_gives_not_estimable_rows_with_reasons():
    rng = np.random.default_rng(3)
    one = _table(rng, (0.0, 0.0), 40).assign(model_b="m0", model_a="m0")
    apart = pd.concat([_table(rng, (0.0, 0.5), 40), _table(rng, (0.0, 0.5), 40).replace({"m0": "m2", "m1": "m3"})])
    apart["id"] = [f"r{i}" for i in range(len(apart))]
    no_models = _table(rng, (0.0, 0.5), 40).drop(columns=["model_a", "model_b"])
    for table, why in ((one, "fewer than two models"), (apart, "never compared"), (no_models, "names no models")):
        rows = quantify(table, robustness=True, style=()).robustness.rows
        assert rows and all(r.dropped is None and why in r.note and not r.verified for r in rows), why
        assert all(np.isnan(r.share) for r in rows)


def test_the_cli_writes_robustness_csv_and_the_summary_line(tmp_path, capsys):
    data = tmp_path / "t.csv"
    table = _table(np.random.default_rng(4), (0.4, 0.1, 0.0, -0.3), 200, hidden=0.5)
    table.assign(question="q", response_a="a", response_b="b").to_csv(data, index=False)
    out = tmp_path / "q"
    assert main(["quantify", str(data), "--robustness", "--style", "", "--out", str(out), "--no-figures"]) == 0
    frame = pd.read_csv(out / "robustness.csv", keep_default_na=False)
    assert list(frame.columns[:6]) == ["estimator", "target", "dropped", "share", "ids", "verified"]
    top = frame[frame["target"].str.startswith("#1: ") & (frame["estimator"] == HUMAN_ONLY)].iloc[0]
    assert len(top["ids"].split(";")) == top["dropped"]
    printed = capsys.readouterr().out
    assert f"#1 (human only): {top['target'][4:]} survives until {top['dropped']} of" in printed


def test_the_influences_match_leave_one_out_refits_of_each_estimators_own_loss():
    """PPI++'s first-order effects of dropping a labelled (both terms) or an unlabelled (its judge term)
    comparison match refits of its loss at the same lam; so do judge only's and human only's."""
    from puaudit_jax.quantify.leaderboard import _bt_fits
    from puaudit_jax.quantify.m_estimation import logistic_refit
    from puaudit_jax.quantify.robustness import _problem, influences
    from puaudit_jax.quantify.targets import inputs

    table = _table(np.random.default_rng(5), (0.8, 0.3, 0.0, -0.5), 800, hidden=0.6)
    inp = inputs(table, 0.9)
    ma, mb = table["model_a"].to_numpy(), table["model_b"].to_numpy()
    fits = _bt_fits(ma, mb, inp.y, inp.predictions, inp.labelled, inp.unlabelled, None, None)
    for est in (JUDGE_ONLY, HUMAN_ONLY, PPI):
        p = _problem(est, fits, fits.fits[est][0], ma, mb, inp, table["id"].to_numpy())
        effect = influences(p, p.beta, np.ones(len(p.ids), bool), np.eye(len(p.beta)))
        rows = [*np.flatnonzero(p.lab)[:4], *np.flatnonzero(p.unl)[:4]]
        for i in rows:
            lab, unl = p.lab.copy(), p.unl.copy()
            lab[i] = unl[i] = False
            beta, ok = logistic_refit(p.X, p.y, p.yhat, lab, unl, p.lam, p.beta)
            assert ok
            exact = beta - p.beta
            assert np.abs(effect[i] - exact).max() < 0.02 * np.abs(exact).max() + 1e-7, (est, i)


def test_a_fit_that_is_not_estimable_and_a_level_top_say_so():
    table = _table(np.random.default_rng(6), (0.5, 0.0, -0.5), 120)  # every row labelled: PPI++ has no pool
    rows = {r.estimator: r for r in quantify(table, robustness=True, style=()).robustness.rows}
    assert rows[PPI].dropped is None and "no unlabelled item" in rows[PPI].note
    level = pd.DataFrame({"id": [f"r{i}" for i in range(8)], "judge": ["A"] * 8, "human": ["A", "A", "B", "B"] * 2,
                          "model_a": ["m0", "m1"] * 4, "model_b": ["m1", "m0"] * 4})  # fmt: skip
    top = _row(quantify(level, robustness=True, style=()), HUMAN_ONLY)
    assert top.dropped == 0 and top.verified and top.note == "level already"
