"""The coverage study on real data: 500 random splits keeping 20 % of the human labels;
the truth is the all-label estimate. Valid estimators cover at the nominal level within Monte-Carlo
error wherever a split holds enough labels for the CLT; the judge alone does not where it is biased.
Deterministic (fixed seeds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit.predictions import audit_split_predictions
from puaudit_jax.datasets import load_bundled
from puaudit_jax.quantify import AUDIT_PPI, HUMAN_ONLY, JUDGE_ONLY, PPI, STRATIFIED
from puaudit_jax.quantify.coverage import CoverageConfig, coverage_study, population, split_masks

VALID = (HUMAN_ONLY, PPI, STRATIFIED, AUDIT_PPI)
ENOUGH = 40  # labelled items a target gets per split (in expectation) before the CLT is asked to hold


def _labels_per_split(table: pd.DataFrame, rows: pd.DataFrame, fraction: float) -> pd.Series:
    pop = population(table)
    counts = pd.concat([pop.model_a, pop.model_b]).value_counts() if "model_a" in pop else pd.Series(dtype=float)
    model = rows.target.str.split(": ", n=1).str[1]
    return np.where(model.isna(), len(pop), model.map(counts).fillna(0)) * fraction


def _check(table, study, fraction):
    rows = study.rows.assign(labels=_labels_per_split(table, study.rows, fraction))
    valid = rows[rows.estimator.isin(VALID) & (rows.labels >= ENOUGH) & (rows.estimable >= 100)]
    low = valid[valid.coverage < valid.bound]
    assert low.empty, low[["target", "estimator", "coverage", "bound", "estimable"]]
    judge = rows[rows.estimator == JUDGE_ONLY]
    assert (judge.coverage < judge.bound).any()  # the biased judge's interval misses somewhere
    assert set(valid.estimator) >= {HUMAN_ONLY, PPI}
    return rows


def test_mtbench_intervals_cover_and_the_judge_alone_does_not():
    table = load_bundled("mtbench")
    study = coverage_study(table, CoverageConfig(fraction=0.2, splits=500, level=0.9, seed=0))
    rows = _check(table, study, 0.2)
    # every target of MT-Bench's 6 models has >= 40 labels per split: all of them were checked
    assert (rows.labels >= ENOUGH).all() and rows.target.str.startswith("elo: ").sum() == 6 * 3
    share = rows[(rows.target == "share of A wins")].set_index("estimator")
    assert share.loc[JUDGE_ONLY, "coverage"] == 0.0  # GPT-4 as judge under-calls A (position bias)
    assert share.loc[PPI, "mean_width"] < share.loc[HUMAN_ONLY, "mean_width"]
    assert set(study.ranks.estimator) == {JUDGE_ONLY, HUMAN_ONLY, PPI}


# slow (28 s; CI runs it): 500 splits of LLMFAO; the default set keeps the same check on MT-Bench (above)
@pytest.mark.slow
def test_llmfao_mean_targets_cover_where_there_are_enough_labels():
    table = load_bundled("llmfao-gpt4")
    study = coverage_study(table, CoverageConfig(fraction=0.2, splits=500), leaderboard=False)
    rows = _check(table, study, 0.2)
    assert (rows.labels >= ENOUGH).sum() >= 4 * 3  # agreement, A share and the two most compared models


# slow (65 s; CI runs it): 100 audits. The default set keeps the audit-powered rows on a real audit
# (tests/quantify/test_leaderboard.py::test_quantify_with_a_real_audit_adds_audit_powered_rows) and the
# coverage of the other estimators on the same splits (test_mtbench_intervals_cover_and_the_judge_alone_does_not)
@pytest.mark.slow
def test_audit_powered_ppi_covers_on_mtbench():
    """The default audit (hashed features here, no model) re-run on each split's labels alone."""
    from tests.data.golden.record import hashed_embeddings

    table = population(load_bundled("mtbench"))
    config = CoverageConfig(fraction=0.2, splits=100, seed=1)
    masks = split_masks(len(table), config.fraction, config.splits, config.seed)
    features = hashed_embeddings(table.assign(human="missing"))
    predictions = audit_split_predictions(table, features, masks, progress=False)
    assert predictions.shape == masks.shape and np.isfinite(predictions).all()
    study = coverage_study(table, config, predictions={AUDIT_PPI: predictions}, leaderboard=False)
    rows = _check(table, study, 0.2)
    assert (rows[rows.estimator == AUDIT_PPI].estimable == 100).all()


def test_split_masks_and_config_are_checked():
    masks = split_masks(10, 0.3, 4, 0)
    assert masks.shape == (4, 10) and (masks.sum(1) == 3).all()
    assert not (split_masks(10, 0.3, 4, 0) ^ masks).any() and (split_masks(10, 0.3, 4, 1) ^ masks).any()
    for bad in (CoverageConfig(fraction=0.0), CoverageConfig(splits=0), CoverageConfig(level=1.0)):
        with pytest.raises(ValueError):
            bad.validate()
