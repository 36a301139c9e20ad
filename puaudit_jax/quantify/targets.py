"""The quantities an evaluation exists for, each estimated several ways (:mod:`.estimators`, :mod:`.leaderboard`).

Every row of a comparison table with a judge verdict (A, B or tie) takes part: labelled when the
human verdict is A, B or tie, unlabelled when it is missing. Ties count one half.

- ``agreement m``: P(judge verdict == human verdict), the seed's mass; the judge cannot estimate its
  own agreement, so: human only, stratified, and PPI++ with the audit's P(judge right).
- ``share of A wins``: P(response A is better), outcome of the human (Y) and predicted (Yhat).
- ``win rate: <model>``: P(<model>'s response is better) over the comparisons it is in, for tables
  that name the models (``model_a`` / ``model_b`` columns: MT-Bench, LLMFAO, a user's).
- ``elo: <model>``: the Bradley-Terry leaderboard (:mod:`.leaderboard`).

Predictions of the human outcome (the Yhat of PPI++), one per estimator:

- ``ppi++``: the judge's verdict (1 / 0.5 / 0),
- ``ppi++ (audit)``: the audit's expected human verdict, 1 - P(judge wrong) for the judge's side and
  P(judge wrong) for the other (:func:`audit_predictions`; out of fold on labelled rows),
- ``ppi++ (stratified)``: the judge's verdict, PPI++ per question type (:func:`.estimators.stratified_ppi_mean`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from ..datasets.verdicts import MISSING, TIE, A, B, question_types
from .estimators import AUDIT_PPI, PPI, Estimate, check_level, human_only, judge_only, ppi_mean, stratified_ppi_mean
from .leaderboard import bt_leaderboard

MODEL_COLUMNS = ("model_a", "model_b")


@dataclass(frozen=True)
class TargetEstimate:
    """One (target, estimator) row: the target's name and the :class:`Estimate`.

    Attributes:
        target: the target's name ("agreement m", "share of A wins", "win rate: <model>", "elo: <model>").
        estimate: the :class:`~puaudit_jax.quantify.estimators.Estimate` (shares in [0, 1], Elo
            scores in Elo points).
    """

    target: str
    estimate: Estimate

    def to_dict(self) -> dict:
        """Flat JSON-able form: the target, then the estimate's fields."""
        return {"target": self.target, **asdict(self.estimate)}

    @classmethod
    def from_dict(cls, data: dict) -> TargetEstimate:
        """Inverse of :meth:`to_dict` (a null estimate or bound reads as NaN)."""
        fields = {k: (np.nan if v is None and k in ("estimate", "lower", "upper") else v) for k, v in data.items()}
        return cls(fields.pop("target"), Estimate(**fields))


def _score(verdicts: np.ndarray, side) -> np.ndarray:
    """(n,) 1 where the verdict prefers ``side``, 1/2 for a tie, 0 otherwise.

    ``side``: "A" or "B", or an (n,) array of them.
    """
    return np.where(verdicts == side, 1.0, np.where(verdicts == TIE, 0.5, 0.0))


def usable_rows(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(labelled, unlabelled) row masks: a judge verdict and a human one (A/B/tie) or none."""
    judge, human = table["judge"].to_numpy(dtype=object), table["human"].to_numpy(dtype=object)
    has_judge = np.isin(judge, (A, B, TIE))
    return has_judge & np.isin(human, (A, B, TIE)), has_judge & (human == MISSING)


def cluster_labels(table: pd.DataFrame, column: str | None) -> np.ndarray | None:
    """(n,) str cluster of every row from ``column`` (None: no clustering).

    A missing value on a usable row is an error naming it.
    """
    if column is None:
        return None
    if column not in table.columns:
        raise ValueError(f"cluster_by={column!r} is not a column of the comparisons (columns: {list(table.columns)})")
    lab, unl = usable_rows(table)
    missing = table[column].isna().to_numpy() & (lab | unl)
    if missing.any():
        ids = table.loc[missing, "id"].astype(str).tolist()[:3]
        raise ValueError(f"cluster column {column!r} is missing on rows {ids}")
    return table[column].astype(str).to_numpy()


def _p_wrong_column(items: pd.DataFrame) -> str:
    """``p_wrong_cross`` when the audit wrote it, else ``p_wrong`` (items tables of older versions).

    ``p_wrong_cross``: the pool by cross-prediction (:class:`~puaudit_jax.audit.rules.Decision`).
    """
    if "p_wrong_cross" in items.columns and np.isfinite(items["p_wrong_cross"].to_numpy(float)).any():
        return "p_wrong_cross"
    return "p_wrong"


def audit_predictions(table: pd.DataFrame, items: pd.DataFrame) -> np.ndarray:
    """The audit's expected human A-outcome for every row of ``table``.

    1 - p when the judge said A, p when it said B, p = P(judge wrong) (out of fold on labelled rows, by
    cross-prediction on the pool: ``p_wrong_cross``), the judge's own outcome where the audit gave none
    (ties, excluded rows).

    Args:
        table: the comparison table, R rows.
        items: the items table of an audit of the same comparisons with a calibrated rule.

    Returns:
        (R,) float predictions in [0, 1].

    Raises:
        ValueError: the audit has no P(judge wrong), an id does not match, the audit excluded rows for
            their tie label, or its labelled rows are not the same.
    """
    if "p_wrong" not in items.columns or not np.isfinite(items["p_wrong"].to_numpy(float)).any():
        raise ValueError("the audit has no P(judge wrong): run it with a calibrated rule (--rule calibrated)")
    items = items.set_index(items["id"].astype(str))
    ids = table["id"].astype(str)
    unknown = ids[~ids.isin(items.index)]
    if len(unknown):
        raise ValueError(f"{len(unknown)} rows are not in the audit, e.g. id {unknown.iloc[0]!r}: audit the same data")
    items = items.loc[ids]
    labelled_here, _ = usable_rows(table)
    by_label = items["reason"].astype(str).str.contains("human tie|human split vote").to_numpy() & labelled_here
    if by_label.any():
        first = ids.iloc[int(np.flatnonzero(by_label)[0])]
        raise ValueError(f"the audit excluded {int(by_label.sum())} rows for their tie label (e.g. {first!r}): "
                         "their prediction would depend on their own label. Audit with tie labels hidden "
                         "(audit_for_quantify; CLI: puaudit quantify --with-audit)")  # fmt: skip
    differ = (items["status"].to_numpy() == "labelled") & ~labelled_here
    if differ.any():
        row = ids.iloc[int(np.flatnonzero(differ)[0])]
        raise ValueError(f"row {row!r} is labelled in the audit but not here: the audit saw other human labels "
                         "(e.g. --hide-labels); quantify the table it audited")  # fmt: skip
    judge, p_wrong = table["judge"].to_numpy(dtype=object), items[_p_wrong_column(items)].to_numpy(float)
    audit = np.where(judge == A, 1 - p_wrong, np.where(judge == B, p_wrong, np.nan))
    return np.where(np.isfinite(audit), audit, _score(judge, A))


@dataclass(frozen=True)
class Inputs:
    """The per-row arrays every target reads (R rows of the table).

    labelled / unlabelled: masks; y: human A-outcome (NaN where unlabelled); judge: the judge's
    verdicts; predictions: estimator -> predicted A-outcome, the judge's first; clusters / strata:
    labels or None; level: interval coverage.
    """

    labelled: np.ndarray
    unlabelled: np.ndarray
    y: np.ndarray
    judge: np.ndarray
    predictions: dict
    clusters: np.ndarray | None
    strata: np.ndarray | None
    level: float


def inputs(table: pd.DataFrame, level: float, cluster_by: str | None = None, audit_items=None) -> Inputs:
    """:class:`Inputs` of ``table``; ``audit_items`` adds the ``ppi++ (audit)`` predictions."""
    lab, unl = usable_rows(table)
    human, judge = table["human"].to_numpy(dtype=object), table["judge"].to_numpy(dtype=object)
    predictions = {PPI: _score(judge, A)}
    if audit_items is not None:
        predictions[AUDIT_PPI] = audit_predictions(table, audit_items)
    types = question_types(table["question_type"]) if "question_type" in table.columns else None
    strata = types if types is not None and len(set(types[lab | unl])) > 1 else None
    y = np.where(lab, _score(human, A), np.nan)
    return Inputs(lab, unl, y, judge, predictions, cluster_labels(table, cluster_by), strata, check_level(level))


def _means(target: str, inp: Inputs, rows: np.ndarray, flip: np.ndarray, truth: np.ndarray | None = None) -> list:
    """Every estimator of the mean outcome over ``rows`` (mask).

    ``flip``: rows whose outcome is B's (1 - the A-outcome); ``truth``: the human outcome when it is not
    the A-outcome (agreement).
    """
    lab, unl = inp.labelled & rows, inp.unlabelled & rows
    y = np.where(flip, 1 - inp.y, inp.y) if truth is None else truth
    preds = {k: np.where(flip, 1 - v, v) for k, v in inp.predictions.items()}
    cl = None if inp.clusters is None else (inp.clusters[lab], inp.clusters[unl])
    out = [judge_only(preds[PPI][lab], preds[PPI][unl], inp.level, cl)] if truth is None else []
    out.append(human_only(y[lab], inp.level, int(unl.sum()), None if cl is None else cl[0]))
    for name, yhat in preds.items():
        if name == PPI and truth is not None:
            continue  # the judge predicts its own agreement as 1: no information
        est = ppi_mean(y[lab], yhat[lab], yhat[unl], inp.level, clusters=cl)
        out.append(replace(est, estimator=name))
    if inp.strata is not None:
        out.append(stratified_ppi_mean(y[lab], preds[PPI][lab], preds[PPI][unl], inp.strata[lab], inp.strata[unl],
                                       inp.level, cl))  # fmt: skip
    return [TargetEstimate(target, e) for e in out]


def agreement_inputs(inp: Inputs) -> Inputs:
    """``inp`` recast for the agreement m = P(judge == human).

    y is 1 where they agree (NaN where unlabelled); predictions of agreement: 1 (the judge's, constant:
    only the stratified estimator uses it), and the audit's P(judge right) where the judge said A or B
    (elsewhere the mean of those predictions over the unlabelled rows, which no label touches).
    Predictions may be (R,) or (S, R).
    """
    agree = np.where(inp.judge == A, inp.y == 1.0, np.where(inp.judge == B, inp.y == 0.0, inp.y == 0.5))
    preds = {PPI: np.ones(len(agree))}
    if AUDIT_PPI in inp.predictions:
        p_a = inp.predictions[AUDIT_PPI]
        right = np.where(inp.judge == A, p_a, np.where(inp.judge == B, 1 - p_a, np.nan))
        pool = inp.unlabelled & np.isfinite(right)
        count = pool.sum(axis=-1, keepdims=True)
        fill = np.where(count > 0, np.where(pool, right, 0.0).sum(axis=-1, keepdims=True) / np.maximum(count, 1), 0.5)
        preds[AUDIT_PPI] = np.where(np.isfinite(right), right, fill)
    return replace(inp, y=np.where(inp.labelled, agree, np.nan), predictions=preds)


def agreement(inp: Inputs) -> list[TargetEstimate]:
    """P(judge == human) by human only, PPI++ with the audit's P(judge right), stratified."""
    agree = agreement_inputs(inp)
    rows = np.ones(len(agree.y), bool)
    return _means("agreement m", agree, rows, np.zeros(len(rows), bool), truth=agree.y)


def a_share(inp: Inputs) -> list[TargetEstimate]:
    """P(response A is better) by every estimator."""
    return _means("share of A wins", inp, np.ones(len(inp.y), bool), np.zeros(len(inp.y), bool))


def _models(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    missing = [c for c in MODEL_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"per-model targets need the columns {list(MODEL_COLUMNS)}; missing {missing}")
    return table["model_a"].astype(str).to_numpy(), table["model_b"].astype(str).to_numpy()


def win_rates(table: pd.DataFrame, inp: Inputs) -> list[TargetEstimate]:
    """Per model named in ``model_a`` / ``model_b``: its win rate by every estimator (sorted by name)."""
    ma, mb = _models(table)
    used = inp.labelled | inp.unlabelled
    rows = []
    for model in sorted(set(ma[used]) | set(mb[used])):
        rows += _means(f"win rate: {model}", inp, (ma == model) | (mb == model), mb == model)
    return rows


def leaderboard(table: pd.DataFrame, inp: Inputs) -> list[TargetEstimate]:
    """Bradley-Terry scores (Elo scale) of every model by every estimator (:mod:`.leaderboard`)."""
    ma, mb = _models(table)
    rows = bt_leaderboard(ma, mb, inp.y, inp.predictions, inp.labelled, inp.unlabelled, inp.level, inp.clusters)
    return [TargetEstimate(f"elo: {m}", e) for m, e in sorted(rows, key=lambda r: r[0])]


def audit_agreement(items: pd.DataFrame, level: float = 0.9) -> tuple[TargetEstimate, ...]:
    """The agreement m = P(judge == human) on an audit's usable rows (verdicts A/B).

    Human only, and -- when a calibrated rule gave P(judge wrong) -- PPI++ with 1 - P(judge wrong) as the
    prediction: out of fold for the labelled rows, so no labelled item predicts itself, and by
    cross-prediction for the pool (Zrnic & Candes 2024; ``p_wrong_cross``).

    Args:
        items: an audit's items table (columns ``status``, ``role``, ``judge``, ``human``, ``p_wrong``).
        level: the intervals' coverage, in (0, 1).

    Returns:
        One or two :class:`TargetEstimate` rows "agreement m" (human only; PPI++ (audit) when scored).
    """
    level = check_level(level)
    status, role = items["status"].to_numpy(), items["role"].to_numpy()
    lab, pool = status == "labelled", role == "U"
    y = (items["judge"].to_numpy(dtype=object) == items["human"].to_numpy(dtype=object))[lab].astype(float)
    rows = [TargetEstimate("agreement m", human_only(y, level, int(pool.sum())))]
    p_wrong = items[_p_wrong_column(items)].to_numpy(float)
    scored = np.isfinite(p_wrong[lab])
    if scored.any() and np.isfinite(p_wrong[pool]).all():
        est = ppi_mean(y[scored], 1 - p_wrong[lab][scored], 1 - p_wrong[pool], level)
        caveat = "" if scored.all() else f"{int((~scored).sum())} unscored labelled rows left out"
        rows.append(TargetEstimate("agreement m", replace(est, estimator=AUDIT_PPI, caveat=caveat)))
    return tuple(rows)
