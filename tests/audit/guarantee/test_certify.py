"""The seam ``certify(stages, roles, human, settings)``: one judge, or a cascade of judges, cheapest first.

The cascade keeps its guarantee over simulated splits and certifies more than its first judge; a row
goes to the first judge certified for it and never past it; one judge is the plain choice at the full
delta; rows whose fitted confidence an earlier judge never had calibrate no later judge.
"""

from __future__ import annotations

import numpy as np

from puaudit_jax.audit.guarantee import RowRoles, Settings, Stage, certify, choose, fitted, label_free

FLIP = {"A": "B", "B": "A"}
N_CAL, N = 300, 1300


def _two_judges(rng, n=N):
    """Two judges with calibrated P(wrong): right with probability q_1 ~ U(0.5, 1) and q_2 ~ U(0.7, 1)."""
    q1, q2 = rng.uniform(0.5, 1.0, n), rng.uniform(0.7, 1.0, n)
    human = np.where(rng.random(n) < 0.5, "A", "B").astype(object)
    judges = [np.where(rng.random(n) < q, human, [FLIP[h] for h in human]).astype(object) for q in (q1, q2)]
    p_wrong = [np.where(rng.random(n) < 0.5, 1 - q, q) for q in (q1, q2)]  # either side of 1/2: flips happen
    judges = [np.where(p > 0.5, [FLIP[v] for v in j], j).astype(object) for p, j in zip(p_wrong, judges)]
    return list(zip(p_wrong, judges)), human


def _roles(n=N, n_cal=N_CAL) -> RowRoles:
    cal = np.arange(n_cal)
    return RowRoles(hidden=cal, labelled=cal, pool=np.arange(n_cal, n), fit=np.zeros(0, int), ties=np.zeros(0, int))


def _stages(judges, roles):
    return [Stage("judge" if k == 0 else f"j{k}", j, (fitted(p, j, roles.hidden, roles.pool),), p)
            for k, (p, j) in enumerate(judges)]  # fmt: skip


def test_the_cascade_keeps_its_guarantee_over_simulated_splits_and_certifies_more_than_its_first_judge():
    rng, splits, a, d = np.random.default_rng(6), 1000, 0.85, 0.1
    violations, coverage, first_only = [], [], []
    roles = _roles()
    for _ in range(splits):
        judges, human = _two_judges(rng)
        out = certify(_stages(judges, roles), roles, human, Settings(a, d))
        kept = roles.pool[out.certified(roles.pool)]
        violations.append(len(kept) > 0 and np.mean(out.final[kept] == human[kept]) < a)
        coverage.append(len(kept) / len(roles.pool))
        first_only.append(np.mean(out.stage[roles.pool] == 0))
    assert np.mean(violations) <= d + 3 * np.sqrt(d * (1 - d) / splits)
    assert np.mean(coverage) > np.mean(first_only) + 0.1  # the second judge certifies rows the first could not


def test_the_cascade_never_sends_a_row_past_a_judge_certified_for_it_and_one_judge_is_the_plain_choice():
    judges, human = _two_judges(np.random.default_rng(12))
    roles = _roles()
    stages = _stages(judges, roles)
    out = certify(stages, roles, human, Settings(0.8, 0.1))
    assert all(c.kept is not None for c in out.choices) and (out.stage[roles.pool] == -1).any()
    for k, (stage, choice) in enumerate(zip(stages, out.choices)):
        q, t = stage.candidates[0].q, choice.selection.threshold
        later = (out.stage == -1) | (out.stage > k)  # pool rows that went past judge k
        assert (q[roles.pool][later[roles.pool]] < t).all() and (q[out.stage == k] >= t).all()
        assert choice.selection.level == 0.05  # delta split over the two judges
    assert out.reached == (len(roles.pool), int((out.stage[roles.pool] != 0).sum()))
    one = certify(stages[:1], roles, human, Settings(0.8, 0.1))
    plain = choose(list(stages[0].candidates), roles.pool, human, 0.8, 0.1)
    assert one.choices[0].selection.threshold == plain.selection.threshold


def test_rows_whose_fitted_confidence_an_earlier_judge_never_had_calibrate_no_later_judge():
    """The first judge's fitted candidate knows nothing of the rows its audit fitted on: once it is kept, a
    later judge's label-free candidate must not calibrate on them (whether they would reach it is unknown)."""
    judges, human = _two_judges(np.random.default_rng(7))
    fit, hidden, pool = np.arange(0, 300), np.arange(300, 600), np.arange(600, N)
    roles = RowRoles(hidden=hidden, labelled=np.arange(600), pool=pool, fit=fit, ties=np.zeros(0, int))
    (p1, j1), (_, j2) = judges
    p1 = np.where(np.isin(np.arange(N), fit), np.nan, p1)  # no P(wrong) where the audit fitted
    stages = [Stage("judge", j1, (fitted(p1, j1, hidden, pool),), p1),
              Stage("second", j2, (label_free(np.zeros(N), j2, roles.labelled),), None)]  # fmt: skip
    out = certify(stages, roles, human, Settings(0.8, 0.1))
    assert out.choices[0].kept == "fitted"
    reached = out.choices[1].n_calibration["label-free"]
    not_taken = int((stages[0].candidates[0].q[hidden] < out.choices[0].selection.threshold).sum())
    assert reached == not_taken  # the 300 fit rows left out, the hidden rows the first judge took too


def test_the_advice_when_nothing_certifies_does_not_contradict_itself():
    from puaudit_jax.audit.guarantee.report import notes_for

    hopeless = notes_for(False, None, 0.65, 0.6, [], pool=40, other_judges=True)
    assert "more labels will not help" in hopeless[0] and "--other-judges" not in hopeless[0]
    assert "even with every pool row labelled" in hopeless[1] and "too few rows calibrate" not in hopeless[1]
    assert "--other-judges" in notes_for(False, None, 0.5, 0.6, [], pool=40)[0]
