"""The judge's bias: its number minus the humans' (judge - human on the labelled rows), with an interval."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.cli import main
from puaudit_jax.datasets import save_comparisons
from puaudit_jax.quantify import JUDGE_BIAS, quantify
from puaudit_jax.quantify.targets import PLAN_CAVEAT, a_share, inputs


def _table(rng, n: int, extra_a: float, labelled: float = 0.5, agree: float = 0.8) -> pd.DataFrame:
    """Humans say A or B at even odds; the judge agrees with them ``agree`` of the time, then says A
    on a further ``extra_a`` share of rows: its A share is too high by extra_a / 2."""
    human = rng.choice(["A", "B"], n)
    judge = np.where(rng.random(n) < agree, human, np.where(human == "A", "B", "A"))
    judge = np.where(rng.random(n) < extra_a, "A", judge)
    seen = rng.random(n) < labelled
    return pd.DataFrame(dict(id=[f"r{i}" for i in range(n)], question=[f"q{i}" for i in range(n)],
                             response_a=["a"] * n, response_b=["b"] * n, judge=judge,
                             human=np.where(seen, human, "missing")))  # fmt: skip


def _a_share_bias(table: pd.DataFrame):
    rows = [r for r in quantify(table).judge_bias if r.target == "judge bias: share of A wins"]
    assert len(rows) == 1 and rows[0].estimate.estimator == JUDGE_BIAS
    return rows[0].estimate


@pytest.mark.parametrize("extra_a", [0.3, 0.0])
def test_the_bias_interval_covers_the_true_bias(extra_a):
    """200 draws at level 0.9: the interval covers the true bias (extra_a / 2) in most; a biased judge's
    excludes 0 in nearly all, an unbiased judge's covers 0."""
    rng = np.random.default_rng(49)
    truth = extra_a / 2
    draws = [_a_share_bias(_table(rng, 600, extra_a)) for _ in range(200)]
    covered = np.mean([e.lower <= truth <= e.upper for e in draws])
    excludes_zero = np.mean([e.lower > 0 or e.upper < 0 for e in draws])
    assert 0.84 <= covered <= 0.96
    assert excludes_zero >= 0.95 if extra_a else excludes_zero <= 0.16
    assert all(e.level == 0.9 and e.n_labelled > 250 for e in draws)


def test_the_bias_is_the_judge_only_share_minus_the_human_only_share_on_labelled_rows():
    table = _table(np.random.default_rng(1), 400, 0.2, labelled=1.0)  # every row labelled: both on the same rows
    frame = quantify(table).to_frame().set_index(["target", "estimator"])
    judge, human = (frame.loc[("share of A wins", e), "estimate"] for e in ("judge only", "human only"))
    assert frame.loc[("judge bias: share of A wins", JUDGE_BIAS), "estimate"] == pytest.approx(judge - human)


def test_win_rates_get_their_bias_and_the_agreement_none():
    rng = np.random.default_rng(2)
    table = _table(rng, 800, 0.0).assign(model_a=rng.choice(["x", "y"], 800))
    table["model_b"] = np.where(table["model_a"] == "x", "y", "x")
    table.loc[table["model_a"] == "x", "judge"] = "A"  # the judge always prefers x
    targets = {r.target for r in quantify(table, style=()).judge_bias}
    assert targets == {"judge bias: share of A wins", "judge bias: win rate: x", "judge bias: win rate: y"}
    bias = {r.target: r.estimate for r in quantify(table, style=()).judge_bias}
    assert bias["judge bias: win rate: x"].lower > 0.1 and bias["judge bias: win rate: y"].upper < -0.1


def test_a_judge_that_always_agrees_has_no_interval_and_says_why():
    table = _table(np.random.default_rng(3), 200, 0.0, agree=1.0)
    est = _a_share_bias(table)
    assert np.isnan(est.estimate) and "is 0 on all" in est.note


def test_under_a_label_plan_the_bias_is_weighted_and_says_so():
    table = _table(np.random.default_rng(4), 300, 0.3)
    inp = inputs(table, 0.9)
    plain = [r for r in a_share(inp) if r.target.startswith("judge bias")][0].estimate
    planned = [r for r in a_share(replace(inp, probability=np.full(len(table), 0.5))) if
               r.target.startswith("judge bias")][0].estimate  # fmt: skip
    assert planned.estimate == pytest.approx(plain.estimate)  # equal weights: the plain mean difference
    assert PLAN_CAVEAT in planned.caveat and planned.lower < plain.estimate < planned.upper


def test_the_cli_prints_the_bias_apart_and_writes_its_rows(tmp_path, capsys):
    table = _table(np.random.default_rng(5), 300, 0.3)
    save_comparisons(table, tmp_path / "cmp.csv")
    assert main(["quantify", str(tmp_path / "cmp.csv"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "judge bias: the judge's number minus the humans'" in out and "judge too high" in out
    written = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    assert (written["estimator"] == JUDGE_BIAS).sum() == 1 and (tmp_path / "out" / "forest.png").is_file()
