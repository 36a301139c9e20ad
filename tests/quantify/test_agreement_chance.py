"""Agreement beyond chance: Cohen's kappa and Krippendorff's alpha, their intervals and the quantify rows."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from puaudit_jax.quantify import quantify
from puaudit_jax.quantify.chance import (
    BOOTSTRAP,
    DELTA,
    PPI_DELTA,
    alpha_bootstrap,
    alpha_delta,
    cohen_kappa,
    kappa_bootstrap,
    kappa_delta,
    kappa_ppi,
    krippendorff_alpha,
)
from puaudit_jax.quantify.raters import KAPPA, rating_counts

CATS = np.array(["A", "B", "tie"], dtype=object)


def _verdict_pairs(rng, n, agree=0.6, p=(0.5, 0.3, 0.2)):
    judge = rng.choice(CATS, n, p=p)
    return judge, np.where(rng.random(n) < agree, judge, rng.choice(CATS, n))


def _slots(table: pd.DataFrame, columns) -> np.ndarray:
    """(raters, units) reliability data for the krippendorff package: one row per vote slot, NaN = missing."""
    code = {"A": 0.0, "B": 1.0, "tie": 2.0}
    cells = [[[code[v] for v in str(c).split(",") if v in code] if isinstance(c, str) else [] for c in table[col]]
             for col in columns]  # fmt: skip
    width = [max(len(c) for c in col) for col in cells]
    out = np.full((sum(width), len(table)), np.nan)
    row = 0
    for col, w in zip(cells, width):
        for u, votes in enumerate(col):
            out[row : row + len(votes), u] = votes
        row += w
    return out


def _counts(reliability: np.ndarray) -> np.ndarray:
    return np.stack([(reliability == c).sum(0) for c in range(3)], 1).astype(float)


@pytest.mark.parametrize("n", [5, 40, 300])
def test_kappa_equals_scikit_learn_on_random_data(rng, n):
    for p in ((0.5, 0.3, 0.2), (0.5, 0.5, 0.0)):
        judge, human = _verdict_pairs(rng, n, p=p)
        expected = cohen_kappa_score(judge, human)
        assert cohen_kappa(judge, human) == pytest.approx(expected, abs=1e-9)
        if (judge == human).all():  # kappa 1 with a variance of 0: no interval, said
            assert "zero-width" in kappa_delta(judge, human, 0.9).note
            continue
        assert kappa_delta(judge, human, 0.9).estimate == pytest.approx(expected, abs=1e-9)
        assert kappa_bootstrap(judge, human, 0.9, resamples=50).estimate == pytest.approx(expected, abs=1e-9)


def test_kappa_and_alpha_equal_the_references_on_real_data(mtbench, llmfao4):
    for table in (mtbench, llmfao4):
        lab = table[table["human"] != "missing"]
        expected = cohen_kappa_score(lab["judge"], lab["human"])
        assert cohen_kappa(lab["judge"].to_numpy(object), lab["human"].to_numpy(object)) == pytest.approx(
            expected, abs=1e-9)  # fmt: skip
        for columns in (("judge", "votes"), ("votes",)):
            reference = krippendorff.alpha(_slots(table, columns), level_of_measurement="nominal")
            counts = rating_counts(table, columns)
            assert krippendorff_alpha(counts) == pytest.approx(reference, abs=1e-9)
            assert alpha_delta(counts, 0.9).estimate == pytest.approx(reference, abs=1e-9)


@pytest.mark.parametrize("raters", [2, 3, 7])
def test_alpha_equals_krippendorff_with_missing_ratings(rng, raters):
    data = rng.choice([0.0, 1.0, 2.0], size=(raters, 60), p=[0.5, 0.3, 0.2])
    data[rng.random(data.shape) < 0.3] = np.nan
    data[:, 0] = [0.0] + [np.nan] * (raters - 1)  # a unit with one rating: not pairable
    reference = krippendorff.alpha(data, level_of_measurement="nominal")
    counts = _counts(data)
    assert krippendorff_alpha(counts) == pytest.approx(reference, abs=1e-9)
    assert alpha_bootstrap(counts, 0.9, resamples=30).estimate == pytest.approx(reference, abs=1e-9)
    assert alpha_delta(counts, 0.9).n_unlabelled >= 1  # the one-rating unit is counted, not used


def test_a_cell_of_several_votes_is_several_raters():
    table = pd.DataFrame({"id": ["r0", "r1", "r2"], "judge": ["A", "B", "tie"], "votes": ["A,tie,A", None, "B"]})
    counts = rating_counts(table, ("judge", "votes"))
    assert counts.tolist() == [[3, 0, 1], [0, 1, 0], [0, 1, 1]]
    with pytest.raises(ValueError, match="row 'r1', column 'votes'"):
        rating_counts(table.assign(votes=["A", "maybe", "B"]), ("judge", "votes"))
    with pytest.raises(ValueError, match="not columns"):
        rating_counts(table, ("judge", "crowd"))
    with pytest.raises(ValueError, match="more than once"):
        rating_counts(table, ("judge", "judge"))


def test_the_bootstrap_is_seeded_and_clustered(rng):
    judge, human = _verdict_pairs(rng, 200)
    clusters = np.repeat(np.arange(20), 10)
    first = kappa_bootstrap(judge, human, 0.9, clusters, resamples=200, seed=3)
    assert kappa_bootstrap(judge, human, 0.9, clusters, resamples=200, seed=3) == first
    assert kappa_bootstrap(judge, human, 0.9, clusters, resamples=200, seed=4) != first
    alone = kappa_bootstrap(judge, human, 0.9, np.zeros(200), resamples=50)
    assert not alone.estimable and "1 cluster" in alone.note


def test_not_estimable_inputs_say_why():
    one = np.array(["A"] * 10, dtype=object)
    for est in (kappa_delta(one, one, 0.9), kappa_bootstrap(one, one, 0.9), kappa_ppi(one, one, one, 0.9)):
        assert not est.estimable and "p_e = 1" in est.note and np.isnan(est.estimate)
    few = kappa_delta(one[:1], one[:1], 0.9)
    assert not few.estimable and "1 labelled rows (need 2)" in few.note
    mixed = np.array(["A", "B"] * 5, dtype=object)
    assert "no unlabelled row" in kappa_ppi(mixed, mixed[::-1], mixed[:0], 0.9).note
    single = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    assert "no pairable unit" in alpha_delta(single, 0.9).note
    assert "1 pairable unit (need 2)" in alpha_bootstrap(np.array([[2.0, 0, 0], [1, 0, 0]]), 0.9).note
    assert "one category" in alpha_delta(np.array([[2.0, 0, 0], [3.0, 0, 0]]), 0.9).note
    cells = {"id": ["a", "b", "c"], "question": ["q"] * 3, "response_a": ["x"] * 3, "response_b": ["y"] * 3}
    table = pd.DataFrame({**cells, "judge": ["A", "B", "A"], "human": ["A", "B", "missing"]})
    rows = [r for r in quantify(table, raters=("judge",), resamples=10, style=()).rows if "alpha" in r.target]
    assert len(rows) == 3 and all("alpha needs 2 raters" in r.estimate.note for r in rows)


def test_quantify_gives_three_kappa_and_three_alpha_rows(mtbench):
    frame = quantify(mtbench.drop(columns=["model_a", "model_b"]), resamples=50, style=()).to_frame()
    chance = frame[frame["target"].str.startswith("beyond chance")]
    assert chance["target"].tolist() == [KAPPA] * 3 + ["beyond chance: alpha (judge, votes)"] * 3
    assert chance["estimator"].tolist() == [DELTA, BOOTSTRAP, PPI_DELTA] * 2
    assert (chance["note"].iloc[:5] == "").all() and "no PPI form" in chance["note"].iloc[5]
    lab = mtbench[mtbench["human"] != "missing"]
    assert chance["estimate"].iloc[0] == pytest.approx(cohen_kappa_score(lab["judge"], lab["human"]), abs=1e-9)
    reference = krippendorff.alpha(_slots(mtbench, ("judge", "votes")), level_of_measurement="nominal")
    assert chance["estimate"].iloc[3] == pytest.approx(reference, abs=1e-9)
    lower, upper, est = (chance[c].to_numpy(float)[:5] for c in ("lower", "upper", "estimate"))
    assert ((lower < est) & (est < upper)).all() and (upper - lower < 0.2).all()
    with pytest.raises(ValueError, match="not columns"):
        quantify(mtbench, raters=("judge", "nope"), resamples=10, style=())


def test_ppi_kappa_uses_the_pool_and_narrows_the_interval(rng):
    """A judge that agrees with the human narrows the interval well below the labelled-only delta method's
    (lam near 1); a judge of pure noise does not widen it (lam is tuned, the judge marginal still comes from
    every row)."""
    judge, human = _verdict_pairs(rng, 3000, agree=0.9)
    lab = np.arange(3000) < 150
    ppi = kappa_ppi(judge[lab], human[lab], judge[~lab], 0.9)
    delta = kappa_delta(judge[lab], human[lab], 0.9)
    assert ppi.lam > 0.5 and ppi.upper - ppi.lower < delta.upper - delta.lower
    noise = rng.choice(CATS, 3000)
    ppi0, delta0 = kappa_ppi(noise[lab], human[lab], noise[~lab], 0.9), kappa_delta(noise[lab], human[lab], 0.9)
    assert ppi0.upper - ppi0.lower <= 1.02 * (delta0.upper - delta0.lower)


def test_small_simulation_covers_and_a_halved_interval_does_not():
    """200 synthetic samples (n = 100 labelled, a pool of 1,000): delta and PPI++ cover the true kappa / alpha
    within 3 Monte-Carlo errors of 0.9; the same intervals at half their width fall clearly short (the test
    would catch an SE off by a factor of 2)."""
    from experiments.reproductions.agreement_chance import (
        JOINTS,
        alpha_limit,
        intervals,
        synthetic_sample,
        synthetic_units,
        true_kappa,
    )

    rng, reps = np.random.default_rng(7), 200
    cj, cv = synthetic_units(np.random.default_rng(1), 100_000)
    truth = {"kappa": true_kappa(JOINTS["balanced"]), "alpha (judge, votes)": alpha_limit(cj + cv)}
    hits = {}
    for r in range(reps):
        for stat, name, est, lo, hi in intervals(synthetic_sample(rng, JOINTS["balanced"], 100), 0.9, 20, r):
            if stat in truth and name in (DELTA, PPI_DELTA):
                half = (lo, hi, est - (est - lo) / 2, est + (hi - est) / 2)
                hits.setdefault((stat, name), []).append([half[0] <= truth[stat] <= half[1],
                                                          half[2] <= truth[stat] <= half[3]])  # fmt: skip
    bound = 3 * np.sqrt(0.9 * 0.1 / reps)
    for key, h in hits.items():
        full, halved = np.mean(h, 0)
        assert full >= 0.9 - bound, (key, full)
        assert halved < 0.9 - bound, (key, halved)
