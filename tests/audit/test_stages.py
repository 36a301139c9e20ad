"""Each audit stage on its own (puaudit_jax/audit/*.py), on a small cone-model table."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.audit import (
    FORMAT_VERSION,
    POOLED_TYPE,
    ZERO_DIFF,
    AuditConfig,
    AuditReport,
    apply_rule,
    crossfit,
    estimate_m,
    items_table,
    orient,
    prepare,
    references,
    roles,
    run_audit,
    score,
)
from puaudit_jax.audit.embed import PairEmbeddings
from puaudit_jax.audit.pipeline import crossfit_kinds
from puaudit_jax.audit.score import scored
from puaudit_jax.audit.scorers import ScoreResult
from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.datasets.verdicts import A, B


@pytest.fixture(scope="module")
def small():
    return cone_comparisons(n_labelled=120, n_unlabelled=90, d=16, alpha=0.7, seed=4)


@pytest.fixture(scope="module")
def staged(small):
    cfg = AuditConfig(scorer="centroid", rule="two-sided", seed=3)
    data = prepare(small.table, small.embeddings, cfg)
    mass = estimate_m(data, cfg)
    oriented = orient(data, mass)
    refs = references(oriented.positives, data.types, oriented.e_winner, oriented.z, cfg)
    return cfg, data, mass, oriented, refs


def test_prepare_excludes_zero_difference_rows_and_keeps_every_row(small):
    emb = small.embeddings
    a, b = emb.a.copy(), emb.b.copy()
    first_unlabelled = int(np.flatnonzero(small.table["human"].to_numpy() == "missing")[0])
    b[first_unlabelled] = a[first_unlabelled]
    data = prepare(small.table, PairEmbeddings(emb.ids, a, b), AuditConfig())
    assert data.n == len(small.table)
    assert data.status[first_unlabelled] == "excluded" and data.reason[first_unlabelled] == ZERO_DIFF
    assert first_unlabelled not in data.unlabelled
    assert data.ea.dtype == np.float64 and data.ea.shape == (len(small.table), 16)


def test_prepare_names_missing_ids_and_empty_roles(small):
    emb = small.embeddings
    short = PairEmbeddings(emb.ids[1:], emb.a[1:], emb.b[1:])
    with pytest.raises(ValueError, match="no embeddings"):
        prepare(small.table, short, AuditConfig())
    labelled_only = small.table[small.table["human"] != "missing"]
    keep = np.isin(emb.ids, labelled_only["id"].astype(str))
    with pytest.raises(ValueError, match="U is empty"):
        prepare(labelled_only, PairEmbeddings(emb.ids[keep], emb.a[keep], emb.b[keep]), AuditConfig())
    with pytest.raises(ValueError, match="cluster_by='nope'"):
        prepare(small.table, emb, AuditConfig(cluster_by="nope"))


def test_estimate_m_measures_agreement_on_the_holdout_and_clips(staged):
    cfg, data, mass, _, _ = staged
    assert mass.source == "estimated" and mass.n_holdout == len(mass.held) > 0
    assert mass.raw == pytest.approx(np.mean(data.judge[mass.held] == data.human[mass.held]))
    assert set(mass.held) <= set(data.labelled)
    clipped = estimate_m(data, AuditConfig(m_clip=(0.05, 0.5), seed=3))
    assert clipped.value == 0.5 and clipped.clipped and clipped.raw == mass.raw
    given = estimate_m(data, AuditConfig(m=0.8))
    assert (given.value, given.source, given.n_holdout, len(given.held)) == (0.8, "given", 0, 0)


def test_estimate_m_hands_the_seed_stream_on(staged):
    """The cross-fitting stage continues the Generator the holdout drew from (one seed, one stream)."""
    cfg, data, mass, _, _ = staged
    rng = np.random.default_rng(cfg.seed)
    from puaudit_jax.audit.mass import holdout_rows

    holdout_rows(data.labelled, data.types, cfg.holdout, rng)
    assert mass.generator().integers(0, 2**31, 5).tolist() == rng.integers(0, 2**31, 5).tolist()


def test_orient_points_positives_by_the_human_and_the_pool_by_the_judge(staged):
    _, data, mass, oriented, _ = staged
    assert len(np.intersect1d(oriented.positives, mass.held)) == 0
    for rows, verdicts in ((oriented.positives, data.human), (oriented.unlabelled, data.judge)):
        sign = np.where(verdicts[rows] == A, 1.0, -1.0)
        expected = sign[:, None] * data.diff[rows]
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        np.testing.assert_allclose(oriented.z[rows], expected)
    outside = np.setdiff1d(np.arange(data.n), np.r_[oriented.positives, oriented.unlabelled])
    assert not oriented.z[outside].any()


def test_references_pool_small_types(staged):
    cfg, data, _, oriented, _ = staged
    big = AuditConfig(min_group_size=10_000)
    refs = references(oriented.positives, data.types, oriented.e_winner, oriented.z, big)
    assert [g.question_type for g in refs.groups] == [POOLED_TYPE] and refs.own == {}
    assert set(refs.groups[0].types) == set(data.types[oriented.positives])
    own = references(oriented.positives, data.types, oriented.e_winner, oriented.z, cfg)
    assert set(own.own) == set(data.types[oriented.positives])
    assert own.kept.sum() == sum(g.n_kept for g in own.groups) < len(oriented.positives)


def test_score_normalises_per_group_and_rejects_bad_scorer_output(staged):
    cfg, data, mass, oriented, refs = staged
    scores = score(data, oriented, refs, mass.value, cfg)
    pool = oriented.unlabelled
    assert np.isnan(scores.score[np.setdiff1d(np.arange(data.n), pool)]).all()
    for g in scores.groups:
        rows = pool[scores.group[pool] == g.group]
        assert len(rows) == g.n_U and scores.score[rows].max() == pytest.approx(1.0)
        np.testing.assert_allclose(scores.score[rows], scores.score_raw[rows] / scores.score_raw[rows].max())

    def negative(zp, zu, m):
        return ScoreResult(-np.ones(len(zu)), "bad")

    with pytest.raises(ValueError, match="invalid scores for group"):
        scored(negative, oriented.z[:3], oriented.z[3:6], 0.5, cfg, "g")
    with pytest.warns(RuntimeWarning, match="every score is 0"):
        _, norm, _ = scored(
            lambda zp, zu, m: ScoreResult(np.zeros(len(zu)), "zero"), oriented.z[:3], oriented.z[3:6], 0.5, cfg, "g"
        )
    assert not norm.any()


def test_crossfit_features_of_a_labelled_row_ignore_its_own_label(staged):
    """Out of fold: flipping one labelled row's human verdict leaves that row's feature unchanged."""
    cfg, data, mass, oriented, _ = staged
    kinds = crossfit_kinds(cfg)
    cf, summary = crossfit(data, oriented, mass, kinds, cfg)
    assert kinds == ("two-sided",) and summary.features == kinds and summary.folds == cfg.folds
    assert cf.pool["two-sided"].shape == (len(oriented.unlabelled), cfg.folds)
    row = int(np.intersect1d(oriented.positives, data.labelled)[0])
    human = data.human.copy()
    human[row] = B if human[row] == A else A
    from dataclasses import replace

    flipped = replace(data, human=human)
    oriented2 = orient(flipped, mass)
    cf2, _ = crossfit(flipped, oriented2, mass, kinds, cfg)
    k = int(np.flatnonzero(data.labelled == row)[0])
    assert cf2.labelled["two-sided"][k] == pytest.approx(cf.labelled["two-sided"][k])
    assert cf2.correct[k] != cf.correct[k]


def test_decide_seed_rule_flips_below_eta_and_calibrated_rule_needs_crossfit(staged):
    cfg, data, mass, oriented, refs = staged
    scores = score(data, oriented, refs, mass.value, cfg)
    items = items_table(data, roles(data, mass, oriented, refs), scores)
    out, info = apply_rule(items, "paper", crossfit=None, m=mass.value, eta=0.7, seed=0)
    pool = out["role"] == "U"
    assert info is None
    np.testing.assert_array_equal(out.loc[pool, "flipped"], out.loc[pool, "score"] < 0.7)
    flipped = out[out["flipped"]]
    assert (flipped["adjusted"] != flipped["judge"]).all() and not out.loc[~pool, "flipped"].any()
    with pytest.raises(ValueError, match="needs the audit's cross-fitted features"):
        apply_rule(items, "two-sided", crossfit=None, m=mass.value, eta=0.5, seed=0)


def test_report_round_trips_through_json(small):
    result = run_audit(small.table, small.embeddings, AuditConfig(scorer="centroid", seed=1))
    as_json = json.loads(json.dumps(result.report.to_dict()))
    back = AuditReport.from_dict(as_json)
    assert back.to_dict() == as_json
    assert as_json["format_version"] == FORMAT_VERSION and back.decision == result.report.decision
    assert back.counts.input == len(small.table) and back.m.value == result.report.m.value
    with pytest.raises(ValueError, match="newer than this puaudit"):
        AuditReport.from_dict({**as_json, "format_version": FORMAT_VERSION + 1})


def test_counts_account_for_every_row(small):
    result = run_audit(small.table, small.embeddings, AuditConfig(scorer="centroid", rule="paper"))
    c, roles_ = result.report.counts, result.items["role"].value_counts()
    assert c.input == len(result.items) == c.labelled + c.unlabelled + c.excluded
    assert c.labelled == c.P + c.holdout and c.P_denoised == roles_.get("P", 0) and c.U == roles_["U"]
    assert c.flipped == int(result.items["flipped"].sum())
    assert sum(g.n_flipped for g in result.report.groups) == c.flipped


def test_config_round_trips_and_validates():
    cfg = AuditConfig(rule_options={"threshold": 0.6}, crossfit_features=["score"], m_clip=[0.1, 0.9])
    assert AuditConfig.from_dict(cfg.to_dict()) == cfg
    for bad in ({"eta": 2.0}, {"folds": 1}, {"holdout": 1.0}, {"group_by": "model"}, {"scorer": "nope"}):
        with pytest.raises(ValueError):
            AuditConfig(**bad).validate()


def test_stages_chain_to_the_same_result_as_run_audit(small, staged):
    """run_audit is nothing but the chain: the stages called by hand give its items."""
    cfg, data, mass, oriented, refs = staged
    scores = score(data, oriented, refs, mass.value, cfg)
    cf, _ = crossfit(data, oriented, mass, crossfit_kinds(cfg), cfg)
    items, _ = apply_rule(
        items_table(data, roles(data, mass, oriented, refs), scores),
        cfg.rule,
        crossfit=cf,
        m=mass.value,
        eta=cfg.eta,
        seed=cfg.seed,
    )
    pd.testing.assert_frame_equal(items, run_audit(small.table, small.embeddings, cfg).items)
