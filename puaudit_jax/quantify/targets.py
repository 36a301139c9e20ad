"""The quantities an evaluation exists for, each estimated several ways (:mod:`.estimators`, :mod:`.leaderboard`).

Every row of a comparison table with a judge verdict (A, B or tie) takes part: labelled when the
human verdict is A, B or tie, unlabelled when it is missing. Ties count one half.

- ``agreement m``: P(judge verdict == human verdict), the paper's mass; the judge cannot estimate its
  own agreement, so: human only, stratified, and PPI++ with the audit's P(judge right).
- ``share of A wins``: P(response A is better), outcome of the human (Y) and predicted (Yhat).
- ``win rate: <model>``: P(<model>'s response is better) over the comparisons it is in, for tables
  that name the models (``model_a`` / ``model_b`` columns: MT-Bench, LLMFAO, a user's).
- ``elo: <model>``: the Bradley-Terry leaderboard (:mod:`.leaderboard`).
- ``elo (style-controlled): <model>`` and ``style: <feature>``: the leaderboard at equal style, and
  what each style difference is worth in Elo points (:func:`style_leaderboard`; needs the texts).
- ``judge bias: <target>``: how far off the judge's number is for the share of A wins and each win
  rate, the judge's outcome minus the human's on the labelled rows (estimator ``judge - human``,
  :func:`.estimators.judge_bias`; under a label plan weighted as human only is). The agreement has
  none: the judge's own number for it would be 1, its bias 1 - m.

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

from ..datasets.style import style_differences
from ..datasets.verdicts import MISSING, TIE, A, B, question_types
from .active import active_mean
from .config import BIAS
from .estimators import (
    AUDIT_PPI,
    HUMAN_ONLY,
    JUDGE_BIAS,
    JUDGE_ONLY,
    PPI,
    STRATIFIED,
    Estimate,
    check_level,
    difference_interval,
    human_only,
    judge_bias,
    judge_only,
    not_estimable,
    ppi_mean,
    stratified_ppi_mean,
    unit_interval,
)
from .leaderboard import bt_leaderboard, bt_style_leaderboard

MODEL_COLUMNS = ("model_a", "model_b")
TEXT_COLUMNS = ("response_a", "response_b")
STYLE_CONTROLLED = "elo (style-controlled): "
STYLE_COEFFICIENT = "style: "
# A style feature needs this many labelled rows where the two responses differ in it: one that differs on
# a handful (MT-Bench's markdown headers: 3 of 1,232) separates the outcomes and its coefficient diverges.
STYLE_MIN_ROWS = 20


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


def audit_p_wrong(table: pd.DataFrame, items: pd.DataFrame) -> np.ndarray:
    """The audit's P(judge wrong) for every row of ``table``, checked against it.

    Out of fold on labelled rows, by cross-prediction on the pool (``p_wrong_cross``); NaN where the
    audit gave none (ties, excluded rows).

    Args:
        table: the comparison table, R rows.
        items: the items table of an audit of the same comparisons with a calibrated rule.

    Returns:
        (R,) float P(judge wrong) in [0, 1] or NaN.

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
    return items[_p_wrong_column(items)].to_numpy(float)


def audit_predictions(table: pd.DataFrame, items: pd.DataFrame) -> np.ndarray:
    """The audit's expected human A-outcome for every row of ``table``.

    1 - p when the judge said A, p when it said B, p = P(judge wrong) of :func:`audit_p_wrong`, the
    judge's own outcome where the audit gave none (ties, excluded rows).

    Args:
        table: the comparison table, R rows.
        items: the items table of an audit of the same comparisons with a calibrated rule.

    Returns:
        (R,) float predictions in [0, 1].

    Raises:
        ValueError: as :func:`audit_p_wrong`.
    """
    judge, p_wrong = table["judge"].to_numpy(dtype=object), audit_p_wrong(table, items)
    audit = np.where(judge == A, 1 - p_wrong, np.where(judge == B, p_wrong, np.nan))
    return np.where(np.isfinite(audit), audit, _score(judge, A))


@dataclass(frozen=True)
class Inputs:
    """The per-row arrays every target reads (R rows of the table).

    labelled / unlabelled: masks; y: human A-outcome (NaN where unlabelled); judge: the judge's
    verdicts; predictions: estimator -> predicted A-outcome, the judge's first; clusters / strata:
    labels or None; level: interval coverage; probability: with a label plan, the probability each
    labelled row was sampled with (1 for the random sample before the plan; :mod:`.active`), else None.
    """

    labelled: np.ndarray
    unlabelled: np.ndarray
    y: np.ndarray
    judge: np.ndarray
    predictions: dict
    clusters: np.ndarray | None
    strata: np.ndarray | None
    level: float
    probability: np.ndarray | None = None


def inputs(table: pd.DataFrame, level: float, cluster_by: str | None = None, audit_items=None) -> Inputs:
    """The per-row arrays of ``table`` that every target reads.

    Args:
        table: a validated comparison table, R rows (``id``, ``judge``, ``human``; ``question_type``
            stratifies when it has several values among the usable rows).
        level: coverage of the intervals, in (0, 1).
        cluster_by: the column whose values cluster the rows (cluster-robust intervals), or None.
        audit_items: an audit's items table of the same rows (adds the ``ppi++ (audit)`` predictions),
            or None.

    Returns:
        The :class:`Inputs` (masks and outcomes of shape (R,)).

    Raises:
        ValueError: a bad level, a missing cluster column or value, or audit items that do not match.
    """
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
    if inp.probability is not None:
        return _active_means(target, inp, rows, flip, truth)
    lab, unl = inp.labelled & rows, inp.unlabelled & rows
    y = np.where(flip, 1 - inp.y, inp.y) if truth is None else truth
    preds = {k: np.where(flip, 1 - v, v) for k, v in inp.predictions.items()}
    cl = None if inp.clusters is None else (inp.clusters[lab], inp.clusters[unl])
    judged, judged_cl = preds[PPI][lab | unl], None if inp.clusters is None else inp.clusters[lab | unl]
    out = [unit_interval(judge_only(preds[PPI][lab], preds[PPI][unl], inp.level, cl), judged, judged_cl)
           ] if truth is None else []  # fmt: skip
    labels = lambda est: unit_interval(est, y[lab], None if cl is None else cl[0])  # noqa: E731
    out.append(labels(human_only(y[lab], inp.level, int(unl.sum()), None if cl is None else cl[0])))
    for name, yhat in preds.items():
        if name == PPI and truth is not None:
            continue  # the judge predicts its own agreement as 1: no information
        est = ppi_mean(y[lab], yhat[lab], yhat[unl], inp.level, clusters=cl)
        out.append(labels(replace(est, estimator=name)))
    if inp.strata is not None:
        out.append(labels(stratified_ppi_mean(y[lab], preds[PPI][lab], preds[PPI][unl], inp.strata[lab],
                                              inp.strata[unl], inp.level, cl)))  # fmt: skip
    rows = [TargetEstimate(target, e) for e in out]
    if truth is None:
        bias = judge_bias(y[lab], preds[PPI][lab], inp.level, int(unl.sum()), None if cl is None else cl[0])
        rows.append(TargetEstimate(BIAS + target, bias))
    return rows


def _active_means(target: str, inp: Inputs, rows: np.ndarray, flip: np.ndarray, truth) -> list:
    """:func:`_means` under a label plan: every labelled row weighted by 1 / its sampling probability.

    Human only is the inverse-probability-weighted mean (lam = 0), each PPI++ the active estimator of
    :func:`.active.active_mean`; the stratified estimator assumes random sampling within strata and is
    not estimable here.
    """
    used = (inp.labelled | inp.unlabelled) & rows
    lab = inp.labelled[used]
    y = (np.where(flip, 1 - inp.y, inp.y) if truth is None else truth)[used]
    preds = {k: np.where(flip, 1 - v, v)[used] for k, v in inp.predictions.items()}
    pi, cl = inp.probability[used], None if inp.clusters is None else inp.clusters[used]
    out = [unit_interval(judge_only(preds[PPI][lab], preds[PPI][~lab], inp.level,
                                    None if cl is None else (cl[lab], cl[~lab])), preds[PPI], cl)
           ] if truth is None else []  # fmt: skip
    labels = lambda est: unit_interval(est, y[lab], None if cl is None else cl[lab])  # noqa: E731
    out.append(labels(active_mean(y, preds[PPI], pi, lab, inp.level, lam=0.0, clusters=cl, estimator=HUMAN_ONLY)))
    for name, yhat in preds.items():
        if name != PPI or truth is None:
            out.append(labels(active_mean(y, yhat, pi, lab, inp.level, clusters=cl, estimator=name)))
    if inp.strata is not None:
        out.append(not_estimable(STRATIFIED, inp.level, int(lab.sum()), int((~lab).sum()),
                                 "with a label plan (use ppi++, weighted by the plan)"))  # fmt: skip
    rows = [TargetEstimate(target, e) for e in out]
    if truth is None:
        rows.append(TargetEstimate(BIAS + target, _active_bias(y, preds[PPI], pi, lab, inp.level)))
    return _plan_caveat(rows, inp)


def _active_bias(y: np.ndarray, judged: np.ndarray, pi: np.ndarray, lab: np.ndarray, level: float) -> Estimate:
    """The judge's bias under a label plan: the weighted (human-only) mean of judge - human on the labelled rows."""
    d = np.where(lab, judged - np.nan_to_num(y), 0.0)
    est = active_mean(d, np.zeros_like(d), pi, lab, level, lam=0.0, estimator=JUDGE_BIAS)
    return difference_interval(replace(est, lam=None), d[lab])


PLAN_CAVEAT = "labels weighted by 1 / their sampling probability (label plan)"


def _plan_caveat(rows: list[TargetEstimate], inp: Inputs) -> list[TargetEstimate]:
    """Under a label plan, every estimable row that reads labels says they were weighted."""
    if inp.probability is None:
        return rows
    judge = [r.estimate.estimator == JUDGE_ONLY for r in rows]
    said = iter(_with_caveat([r for r, j in zip(rows, judge) if not j], PLAN_CAVEAT))
    return [r if j else next(said) for r, j in zip(rows, judge)]


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


def _between_models(ma: np.ndarray, mb: np.ndarray, inp: Inputs) -> tuple[Inputs, str]:
    """``inp`` without its self-comparisons (model_a == model_b), and the caveat counting them ("" if none).

    A model compared with itself says nothing about it against the others: such rows are left out of
    the per-model targets (win rates, Elo) and counted in every estimable row's caveat.
    """
    own = (ma == mb) & (inp.labelled | inp.unlabelled)
    if not own.any():
        return inp, ""
    caveat = f"{int(own.sum())} self-comparisons (model_a == model_b) left out"
    return replace(inp, labelled=inp.labelled & ~own, unlabelled=inp.unlabelled & ~own), caveat


def _with_caveat(rows: list[TargetEstimate], caveat: str) -> list[TargetEstimate]:
    """``rows`` whose estimable estimates also carry ``caveat`` (none when it is "")."""
    if not caveat:
        return rows
    said = lambda e: "; ".join(c for c in (e.caveat, caveat) if c)  # noqa: E731
    return [r if r.estimate.note else TargetEstimate(r.target, replace(r.estimate, caveat=said(r.estimate)))
            for r in rows]  # fmt: skip


def win_rates(table: pd.DataFrame, inp: Inputs) -> list[TargetEstimate]:
    """Per model named in ``model_a`` / ``model_b``: its win rate by every estimator (sorted by name).

    Self-comparisons are left out (:func:`_between_models`).
    """
    ma, mb = _models(table)
    inp, caveat = _between_models(ma, mb, inp)
    used = inp.labelled | inp.unlabelled
    rows = []
    for model in sorted(set(ma[used]) | set(mb[used])):
        rows += _means(f"win rate: {model}", inp, (ma == model) | (mb == model), mb == model)
    return _with_caveat(rows, caveat)


def leaderboard(table: pd.DataFrame, inp: Inputs) -> list[TargetEstimate]:
    """Bradley-Terry scores (Elo scale) of every model by every estimator (:mod:`.leaderboard`).

    Self-comparisons are left out (:func:`_between_models`).
    """
    ma, mb = _models(table)
    inp, caveat = _between_models(ma, mb, inp)
    rows = bt_leaderboard(ma, mb, inp.y, inp.predictions, inp.labelled, inp.unlabelled, inp.level, inp.clusters,
                          inp.probability)  # fmt: skip
    rows = [TargetEstimate(f"elo: {m}", e) for m, e in sorted(rows, key=lambda r: r[0])]
    return _with_caveat(_plan_caveat(rows, inp), caveat)


def _no_style(ma, mb, inp: Inputs, why: str) -> list[TargetEstimate]:
    """Not-estimable style-controlled rows for every model and estimator, saying ``why``."""
    used = inp.labelled | inp.unlabelled
    estimators = [JUDGE_ONLY, HUMAN_ONLY, *inp.predictions]
    return [TargetEstimate(f"{STYLE_CONTROLLED}{m}", not_estimable(e, inp.level, 0, 0, why))
            for m in sorted(set(ma[used]) | set(mb[used])) for e in estimators]  # fmt: skip


def style_leaderboard(table: pd.DataFrame, inp: Inputs, features: tuple[str, ...]) -> list[TargetEstimate]:
    """The style-controlled leaderboard and each style feature's coefficient, by every estimator.

    Covariates: the normalised A - B differences of ``features`` (:func:`~puaudit_jax.datasets.style.
    style_differences`); a feature that differs on fewer than :data:`STYLE_MIN_ROWS` labelled rows is
    left out (named in the rows' caveat). Without the response texts every row is "not estimable" and says so.

    Args:
        table: the comparison table (``model_a``, ``model_b``, ``response_a``, ``response_b``).
        inp: its :class:`Inputs`.
        features: names of :data:`~puaudit_jax.datasets.style.STYLE_FEATURES` (empty: no rows).

    Returns:
        Rows "elo (style-controlled): <model>" (Elo points, rank-sets) and "style: <feature>" (Elo
        points for a normalised difference of 1, i.e. only A has it).
    """
    if not features:
        return []
    ma, mb = _models(table)
    inp, own = _between_models(ma, mb, inp)
    missing = [c for c in TEXT_COLUMNS if c not in table.columns]
    if missing:
        return _no_style(ma, mb, inp, f"style control needs the response texts (columns {missing} missing)")
    diffs = style_differences(table)[list(features)]
    rare = [f for f in features if (diffs[f].to_numpy()[inp.labelled] != 0).sum() < STYLE_MIN_ROWS]
    caveat = f"style features differing on < {STYLE_MIN_ROWS} labelled rows left out: {', '.join(rare)}" if rare else ""
    kept = diffs.drop(columns=rare)
    if kept.shape[1] == 0:
        why = (f"no style feature differs on at least {STYLE_MIN_ROWS} of the {int(inp.labelled.sum())} labelled "
               f"rows ({', '.join(features)})")  # fmt: skip
        return _no_style(ma, mb, inp, why)
    scores, coefficients = bt_style_leaderboard(ma, mb, inp.y, inp.predictions, inp.labelled, inp.unlabelled,
                                                inp.level, kept, inp.clusters, inp.probability)  # fmt: skip
    out = _with_caveat([TargetEstimate(f"{STYLE_CONTROLLED}{m}", e) for m, e in sorted(scores, key=lambda r: r[0])],
                       caveat)  # fmt: skip
    out += [TargetEstimate(f"{STYLE_COEFFICIENT}{f}", e) for f, e in coefficients]
    return _with_caveat(_plan_caveat(out, inp), own)


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
    rows = [TargetEstimate("agreement m", unit_interval(human_only(y, level, int(pool.sum())), y))]
    p_wrong = items[_p_wrong_column(items)].to_numpy(float)
    scored = np.isfinite(p_wrong[lab])
    if scored.any() and np.isfinite(p_wrong[pool]).all():
        est = ppi_mean(y[scored], 1 - p_wrong[lab][scored], 1 - p_wrong[pool], level)
        caveat = "" if scored.all() else f"{int((~scored).sum())} unscored labelled rows left out"
        est = unit_interval(replace(est, estimator=AUDIT_PPI, caveat=caveat), y[scored])
        rows.append(TargetEstimate("agreement m", est))
    return tuple(rows)
