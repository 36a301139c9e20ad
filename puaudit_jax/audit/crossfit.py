"""Stage 6, ``crossfit``: out-of-fold features of the labelled rows, for calibrated rules.

The labelled rows (positives and holdout) are split into ``folds`` folds, stratified by question
type and grouped by the ``cluster_by`` column when given. For fold k, P'_k is denoised from the
positives outside it; each group's pool rows and fold-k labelled rows (both oriented by the judge)
are scored together against P'_k. Labelled rows thus get out-of-fold features with known judge
correctness; the pool gets one feature per fold. Each fold's problem holds the pool too, so a
labelled row's feature comes from the same kind of problem (same normaliser, same competitors for
mass) as the pool features it calibrates. Labelled human labels enter only through the other
folds' P' orientation and the 0/1 targets, never the pool's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from .calibration import crossfit_folds
from .config import AuditConfig
from .evidence import JudgeEvidence
from .mass import MassEstimate
from .orient import Oriented, judge_oriented
from .prepare import AuditData
from .references import members, reference_for, references, scoring_groups
from .rules import CrossFit
from .score import scored


@dataclass(frozen=True)
class CrossfitSummary:
    """What the cross-fitting did, for the report.

    Attributes:
        folds: number of folds.
        features: the features computed ("score", "two-sided").
        cluster_by: the cluster column, or None.
        n_labelled: labelled rows.
        n_clusters: clusters among the labelled rows (None without a cluster column).
        unscored_labelled: {feature: labelled rows left unscored}.
        folds_without_positives: folds whose complement had no positive.
    """

    folds: int
    features: tuple[str, ...]
    cluster_by: str | None
    n_labelled: int
    n_clusters: int | None
    unscored_labelled: dict
    folds_without_positives: tuple[int, ...]

    def to_dict(self) -> dict:
        """JSON-able form (tuples as lists)."""
        return {
            **asdict(self),
            "features": list(self.features),
            "folds_without_positives": list(self.folds_without_positives),
        }

    @classmethod
    def from_dict(cls, data: dict) -> CrossfitSummary:
        """Inverse of :meth:`to_dict`."""
        return cls(
            **{
                **data,
                "features": tuple(data["features"]),
                "folds_without_positives": tuple(data["folds_without_positives"]),
            }
        )


def features_of(scorer, zp, zu, m, kinds, config: AuditConfig, group) -> dict:
    """Per kind, (k,) features of the rows ``zu`` (larger = the judge's orientation is better aligned).

    "score" = s̄(z_j); "two-sided" = s̄(z_j) - s̄(-z_j), both orientations scored in one problem
    with m = 1/2 (exactly one orientation of each item can be the human's).

    Args:
        scorer: the scorer (``scorer(zp, zu, m)``).
        zp: the reference (positive) rows, shape (n_P, d).
        zu: the rows to score, shape (k, d).
        m: the mass of the "score" feature, in (0, 1].
        kinds: the feature kinds wanted ("score", "two-sided").
        config: the audit's settings (names the scorer in errors).
        group: the group's name, for errors.

    Returns:
        Kind -> features, shape (k,).
    """
    out = {}
    if "score" in kinds:
        out["score"] = scored(scorer, zp, zu, m, config, group, warn=False)[1]
    if "two-sided" in kinds:
        both = scored(scorer, zp, np.concatenate([zu, -zu]), 0.5, config, group, warn=False)[1]
        out["two-sided"] = both[: len(zu)] - both[len(zu) :]
    return out


def _clusters(data: AuditData, labelled: np.ndarray, column: str | None) -> np.ndarray | None:
    """(n_L,) cluster of each labelled row, or None; a missing value on a labelled row is an error."""
    if column is None:
        return None
    col = data.table[column]
    missing = np.flatnonzero(col.isna().to_numpy()[labelled])
    if len(missing):
        raise ValueError(
            f"cluster column {column!r} is missing on labelled rows {[str(data.ids[r]) for r in labelled[missing[:3]]]}"
        )
    return col.astype(str).to_numpy(dtype=object)[labelled]


def _fold_features(data, oriented, zj, in_fold, train, m, scorer, kinds, config) -> dict:
    """{kind: [(rows, feature values)]} of the pool and the fold's labelled rows against P'_k."""
    refs = references(train, data.types, oriented.e_winner, oriented.z, config)
    pool, out = oriented.unlabelled, {k: [] for k in kinds}
    for g in scoring_groups(np.concatenate([pool, in_fold]), data.types, config):
        rows = np.concatenate([members(pool, g, data.types, config), members(in_fold, g, data.types, config)])
        ref, _ = reference_for(g, refs, config)
        for kind, f in features_of(scorer, oriented.z[ref], zj[rows], m, kinds, config, g).items():
            out[kind].append((rows, f))
    return out


def _fill_empty_folds(pool_feat: dict, empty: list[int]) -> None:
    """A fold that held every positive: its pool column is the other folds' mean."""
    for values in pool_feat.values():
        mean = np.nanmean(np.delete(values, empty, axis=1), axis=1)
        values[:, empty] = mean[:, None]


def with_evidence(
    cf: CrossFit, evidence: JudgeEvidence, labelled: np.ndarray, pool: np.ndarray, enabled: tuple[str, ...]
) -> CrossFit:
    """``cf`` with the judge-side evidence of its labelled rows and its pool attached.

    Args:
        cf: the cross-fitted features.
        evidence: the judge-side features of every row of the table (n, p).
        labelled: (n_L,) row indices of the labelled rows, in ``cf``'s labelled order.
        pool: (n_U,) row indices of the pool, in ``cf``'s pool order.
        enabled: the evidence kinds the audit may use (``AuditConfig.evidence``).

    Returns:
        A new :class:`~puaudit_jax.audit.rules.CrossFit`.
    """
    return replace(
        cf,
        evidence_pool=evidence.features[pool],
        evidence_labelled=evidence.features[labelled],
        evidence_names=evidence.names,
        evidence_kinds=evidence.kinds,
        evidence_rows=dict(evidence.rows),
        evidence_skipped=dict(evidence.skipped),
        enabled=tuple(enabled),
    )


def crossfit(
    data: AuditData, oriented: Oriented, mass: MassEstimate, kinds: tuple[str, ...], config: AuditConfig
) -> tuple[CrossFit, CrossfitSummary]:
    """Cross-fitted features ``kinds`` of the labelled rows and the pool (see the module docstring).

    Args:
        data: the prepared audit data.
        oriented: the oriented difference vectors (positives P, pool U).
        mass: the mass m; its generator draws the folds.
        kinds: features to compute, among "score" and "two-sided".
        config: the audit's settings (folds, cluster_by, scorer, denoising).

    Returns:
        (the :class:`~puaudit_jax.audit.rules.CrossFit` features, its :class:`CrossfitSummary`).

    Raises:
        ValueError: the cluster column is missing on a labelled row.
    """
    scorer = config.make_scorer()
    labelled, pool = data.labelled, oriented.unlabelled
    clusters = _clusters(data, labelled, config.cluster_by)
    fold = crossfit_folds(data.types[labelled], clusters, config.folds, mass.generator())
    n_folds = int(fold.max()) + 1
    fold_of = np.full(data.n, -1)
    fold_of[labelled] = fold
    zj = np.zeros_like(oriented.z)
    zj[labelled], zj[pool] = judge_oriented(data, labelled), oriented.z[pool]
    pool_feat = {k: np.full((len(pool), n_folds), np.nan) for k in kinds}
    lab_feat = {k: np.full(data.n, np.nan) for k in kinds}
    pool_pos = np.full(data.n, -1)
    pool_pos[pool] = np.arange(len(pool))
    empty = []
    for k in range(n_folds):
        train = oriented.positives[fold_of[oriented.positives] != k]
        if len(train) == 0:
            empty.append(k)
            continue
        parts = _fold_features(data, oriented, zj, labelled[fold == k], train, mass.value, scorer, kinds, config)
        for kind, pieces in parts.items():
            for rows, f in pieces:
                in_pool = pool_pos[rows] >= 0
                pool_feat[kind][pool_pos[rows[in_pool]], k] = f[in_pool]
                lab_feat[kind][rows[~in_pool]] = f[~in_pool]
    if empty:
        _fill_empty_folds(pool_feat, empty)
    cf = CrossFit(
        pool=pool_feat,
        labelled={k: v[labelled] for k, v in lab_feat.items()},
        correct=(data.judge[labelled] == data.human[labelled]),
        fold=fold,
        pool_group=np.asarray(data.types[pool], dtype=object),
        labelled_group=np.asarray(data.types[labelled], dtype=object),
        labelled_ids=np.asarray(data.ids[labelled], dtype=object),
        cluster=clusters,
    )
    summary = CrossfitSummary(
        n_folds,
        tuple(kinds),
        config.cluster_by,
        int(len(labelled)),
        None if clusters is None else int(len(set(clusters))),
        {k: int(np.isnan(v).sum()) for k, v in cf.labelled.items()},
        tuple(empty),
    )
    return cf, summary
