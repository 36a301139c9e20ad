"""Bradley-Terry leaderboards with confidence intervals from few human labels.

The model: P(model a's response beats model b's) = sigmoid(theta_a - theta_b), a tie counting one
half (the ``ties="half"`` convention of :mod:`puaudit_jax.consensus.bradley_terry`). The strengths
are identified up to a constant; we fix sum theta = 0 by writing theta = C beta with the K x (K-1)
contrast C = [I; -1 ... -1], so each row's covariates are x = (e_a - e_b) C and beta is an ordinary
logistic regression without intercept. Scores are reported on the Elo scale,
``elo = 1000 + 400 / ln(10) * theta`` (the leaderboard averages 1000; 400 points = 10:1 odds),
with the delta-method interval C Sigma C^T, and each model's simultaneous rank-set
(:mod:`.ranks`: the ranks it may hold, for every model together at the same level).

Estimators (each an M-estimate, :mod:`.m_estimation`):

- ``judge only``: the BT fit of the judge's verdicts on every row (biased where the judge is),
- ``human only``: the BT fit of the human verdicts on the labelled rows (classical),
- ``ppi++``: PPI++ with a predictor of the human outcome -- the judge's verdict, or with
  ``ppi++ (audit)`` the audit's expected human verdict (:func:`.targets.audit_predictions`).

Only models with at least :data:`MIN_LABELLED` labelled comparisons get scores from the estimators that
read labels (the scale is theirs; rows naming another model are left out of those fits, counted in the
rows' caveat); the others get "not estimable" rows. The judge-only fit needs no label: it scores every
model the judge compared (all rows), shifted so that the labelled models average 1000 as in the other
fits, its rank-sets among all of them; where the judge's verdicts do not identify every strength (a model
that never lost, say), it falls back to the labelled models and the others' rows say why. The
human-only fit also needs the labelled comparison graph to identify the
strengths (strongly connected, :func:`~puaudit_jax.consensus.bradley_terry.check_identifiable`). Where
the models fall in groups never compared with each other (a disconnected comparison graph), no estimator
scores them: every row is "not estimable" and names the groups.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..consensus.bradley_terry import ELO_PER_NAT, ComparisonGraphError, check_identifiable, count_matrices
from .estimators import HUMAN_ONLY, JUDGE_ONLY, Estimate, check_level, not_estimable, z_value
from .m_estimation import MFit, ppi_logistic, ppi_logistic_active
from .ranks import rank_sets

MIN_LABELLED = 2
ELO_MEAN = 1000.0
FLAT = 1e-6  # a half-width (nats) below this is a variance of 0 up to rounding: no interval


def contrast(k: int) -> np.ndarray:
    """C (k, k-1): theta = C beta has sum 0 for every beta."""
    return np.vstack([np.eye(k - 1), -np.ones((1, k - 1))])


def design(model_a, model_b, models: list[str]) -> np.ndarray:
    """The Bradley-Terry design matrix in the sum-to-zero parametrisation.

    Args:
        model_a: (R,) the A side's model of each comparison.
        model_b: (R,) the B side's model.
        models: the K models, in the order of the strengths.

    Returns:
        X (R, K-1): row i is (e_{a_i} - e_{b_i}) C, C the :func:`contrast` (K, K-1).
    """
    index = {m: k for k, m in enumerate(models)}
    onehot = np.zeros((len(model_a), len(models)))
    rows = np.arange(len(model_a))
    onehot[rows, [index[m] for m in model_a]] += 1.0
    onehot[rows, [index[m] for m in model_b]] -= 1.0
    return onehot @ contrast(len(models))


def scored_models(model_a, model_b, labelled) -> tuple[list[str], list[str]]:
    """The models with enough labelled comparisons to be scored, and the rest.

    Args:
        model_a: (R,) the A side's model of each comparison.
        model_b: (R,) the B side's model.
        labelled: (R,) bool, the comparisons with a human label.

    Returns:
        (models with >= MIN_LABELLED labelled comparisons, the rest), each sorted.
    """
    seen = pd.Series(np.concatenate([model_a, model_b])).value_counts()
    counts = pd.Series(np.concatenate([model_a[labelled], model_b[labelled]])).value_counts()
    counts = counts.reindex(seen.index, fill_value=0)
    return sorted(counts.index[counts >= MIN_LABELLED]), sorted(counts.index[counts < MIN_LABELLED])


_FLAT_NOTE = "zero variance (the outcomes it rests on never vary, or fall in one cluster): no interval"


def _coefficient(fit: MFit, k: int, estimator: str, level: float, fits) -> Estimate:
    """Style coefficient ``k`` of ``fit`` in Elo points, or not estimable where its interval has no width."""
    g, h = fit.theta[k], z_value(level) * np.sqrt(max(fit.cov[k, k], 0.0))
    if h <= FLAT:
        return not_estimable(estimator, level, fits.n, fits.n_unl, _FLAT_NOTE)
    lam = None if estimator in (JUDGE_ONLY, HUMAN_ONLY) else fit.lam
    g, h = ELO_PER_NAT * g, ELO_PER_NAT * h
    return Estimate(estimator, g, g - h, g + h, level, fits.n, fits.n_unl, lam=lam)


def centred(theta: np.ndarray, cov: np.ndarray, anchor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Strengths and their covariance shifted so that the ``anchor`` models average 0.

    Args:
        theta: (K,) strengths, in nats.
        cov: (K, K) their covariance.
        anchor: (K,) weights, 1.0 for an anchor model and 0.0 otherwise.

    Returns:
        (theta (K,), cov (K, K)) after the shift.
    """
    shift = np.eye(len(theta)) - np.outer(np.ones(len(theta)), anchor / anchor.sum())
    return shift @ theta, shift @ cov @ shift.T


def elo_estimates(fit: MFit, models: list[str], estimator: str, level: float, n: int, n_unl: int,
                  anchor: list[str] | None = None) -> list:  # fmt: skip
    """(model, Estimate) on the Elo scale for every model of a converged fit, with its rank-set.

    Args:
        fit: the converged fit (its K-1 coefficients in the :func:`contrast` parametrisation).
        models: the K models of the fit.
        estimator: the estimator's name (e.g. ``human only``).
        level: coverage of the intervals and of the simultaneous rank-sets, in (0, 1).
        n: labelled comparisons, reported.
        n_unl: unlabelled comparisons, reported.
        anchor: the models that average 1000 Elo (None: all of ``models``), so that a fit over more
            models shares the scale of the fits over these.

    Returns:
        [(model, Estimate in Elo points)] for the K models; not estimable where an interval has no width.
    """
    c = contrast(len(models))
    theta, cov = c @ fit.theta, c @ fit.cov @ c.T
    if anchor:
        theta, cov = centred(theta, cov, np.isin(models, anchor).astype(float))
    half = z_value(level) * np.sqrt(np.clip(np.diag(cov), 0, None))
    lam = None if estimator in (JUDGE_ONLY, HUMAN_ONLY) else fit.lam
    ranks = rank_sets(theta, cov, level)

    return [(m, Estimate(estimator, ELO_MEAN + ELO_PER_NAT * t, ELO_MEAN + ELO_PER_NAT * (t - h),
                         ELO_MEAN + ELO_PER_NAT * (t + h), level, n, n_unl, lam=lam, rank_lower=int(lo),
                         rank_upper=int(hi)) if h > FLAT else not_estimable(estimator, level, n, n_unl, _FLAT_NOTE))
            for m, t, h, lo, hi in zip(models, theta, half, ranks.lower, ranks.upper)]  # fmt: skip


def _human_graph_problem(model_a, model_b, y, models: list[str]) -> str:
    """'' when these (labelled) comparisons identify the BT strengths, else why not."""
    index = {m: k for k, m in enumerate(models)}
    outcome = np.select([y == 1.0, y == 0.0], [1, 0], 2)
    codes = np.stack([[index[m] for m in model_a], [index[m] for m in model_b], outcome], axis=1)
    try:
        check_identifiable(*count_matrices(codes.reshape(-1, 3), len(models)), models)
    except ComparisonGraphError as err:
        return str(err).split(";")[0]
    return ""


def components(model_a, model_b, models: list[str]) -> list[list[str]]:
    """The groups of ``models`` linked by comparisons (connected components of the comparison graph), sorted.

    Args:
        model_a: (R,) the A side's model of each comparison.
        model_b: (R,) the B side's model.
        models: the models (every model of ``model_a`` and ``model_b`` among them).

    Returns:
        The groups, each a sorted list of models.
    """
    index = {m: k for k, m in enumerate(models)}
    a, b = [index[m] for m in model_a], [index[m] for m in model_b]
    graph = csr_matrix((np.ones(len(a)), (a, b)), shape=(len(models), len(models)))
    _, labels = connected_components(graph, directed=False)
    return sorted([models[k] for k in np.flatnonzero(labels == g)] for g in np.unique(labels))


def disconnected_note(groups: list[list[str]]) -> str:
    """Why no estimator scores models whose comparisons fall in several ``groups`` ('' for one group)."""
    if len(groups) < 2:
        return ""
    names = " | ".join(", ".join(g[:4]) + (", ..." if len(g) > 4 else "") for g in groups[:4])
    return (
        f"the comparison graph has {len(groups)} groups of models never compared with each other ({names}"
        f"{' | ...' if len(groups) > 4 else ''}): their strengths are not on one scale; quantify each group's rows"
    )


def _fit_or_note(X, y, yhat, lab, unl, lam, clusters, probability=None) -> tuple[MFit | None, str]:
    """The PPI++ fit (weighted by 1 / ``probability`` on labelled rows when given: a label plan), or why not."""
    if probability is None:
        fit = ppi_logistic(X, y, yhat, lab, unl, lam=lam, clusters=clusters)
    else:
        fit = ppi_logistic_active(X, y, yhat, lab, probability, lam=lam, clusters=clusters)
    ok = fit.converged and np.isfinite(fit.cov).all() and np.abs(fit.theta).max() < 30
    return (fit, "") if ok else (None, "the Bradley-Terry fit did not converge (a model never lost or never won)")


@dataclass(frozen=True)
class _Fits:
    """Every estimator's Bradley-Terry fit on the rows whose models are scored.

    models: the scored models (the first K-1 coefficients, :func:`design`); dropped: models with too few
    labelled comparisons; fits: estimator -> (MFit or None, why not); n / n_unl: labelled / unlabelled rows
    used; caveat: the rows left out, or ""; judge: where models were dropped, the judge-only fit over every
    model compared (it needs no label), or why the judge's verdicts do not score them (a str); rows: (R,) bool
    mask of the table's rows the fits read (:mod:`.robustness` drops from them).
    """

    models: list
    dropped: list
    fits: dict
    n: int
    n_unl: int
    caveat: str
    judge: _Fits | str | None = None
    rows: np.ndarray | None = None


def _bt_fits(model_a, model_b, y, predictions: dict, labelled, unlabelled, clusters, covariates,
             probability=None) -> _Fits:  # fmt: skip
    """Fit every estimator; ``covariates`` (R, p) or None are appended to the design's columns.

    ``probability`` (R,): under a label plan, each labelled row's probability of being labelled; the
    human-only and PPI++ fits then weight labels by its inverse (:func:`.m_estimation.ppi_logistic_active`).
    """
    model_a, model_b = np.asarray(model_a).astype(str), np.asarray(model_b).astype(str)
    used = labelled | unlabelled
    models, dropped = scored_models(model_a[used], model_b[used], labelled[used])
    keep = used & np.isin(model_a, models) & np.isin(model_b, models)
    lab, unl = labelled & keep, unlabelled & keep
    left_out = int((used & ~keep).sum())
    caveat = f"{left_out} rows with a model of < {MIN_LABELLED} labelled comparisons left out" if dropped else ""
    out = _Fits(models, dropped, {}, int(lab.sum()), int(unl.sum()), caveat, rows=keep)
    judge = np.asarray(next(iter(predictions.values())), float)
    if dropped:
        out = replace(out, judge=_judge_fits(model_a, model_b, judge, used, labelled, clusters, covariates))
    if len(models) < 2:
        return out
    apart = disconnected_note(components(model_a[keep], model_b[keep], models))
    if apart:
        return replace(out, fits={est: (None, apart) for est in (JUDGE_ONLY, HUMAN_ONLY, *predictions)})
    X = design(model_a[keep], model_b[keep], models)
    if covariates is not None:
        X = np.hstack([X, np.asarray(covariates, float)[keep]])
    clusters = None if clusters is None else clusters[keep]
    y, lab, unl, none = np.asarray(y, float)[keep], lab[keep], unl[keep], np.zeros(int(keep.sum()), bool)
    judge = judge[keep]
    out.fits[JUDGE_ONLY] = _fit_or_note(X, judge, judge, lab | unl, none, 0.0, clusters)
    problem = _human_graph_problem(model_a[keep][lab], model_b[keep][lab], y[lab], models)
    pi = None if probability is None else np.asarray(probability, float)[keep]
    human = (lambda: _fit_or_note(X, y, y, lab, none, 0.0, clusters)) if pi is None else (
        lambda: _fit_or_note(X, y, judge, lab, unl, 0.0, clusters, pi))  # fmt: skip
    out.fits[HUMAN_ONLY] = (None, problem) if problem else human()
    flat = _flat_labels(y[lab])
    for est, yhat in predictions.items():
        out.fits[est] = ((None, flat or "no unlabelled item") if flat or not out.n_unl else
                         _fit_or_note(X, y, np.asarray(yhat, float)[keep], lab, unl, None, clusters, pi))  # fmt: skip
    return out


def _judge_fits(model_a, model_b, judge, used, labelled, clusters, covariates) -> _Fits | str:
    """The judge-only fit on every ``used`` row over every model compared, or why the verdicts do not give one.

    Args:
        model_a: (R,) names of the models whose response is A.
        model_b: (R,) names of the models whose response is B.
        judge: (R,) the judge's A-outcome (1 / 0.5 / 0).
        used: (R,) bool mask of the rows the estimators read.
        labelled: (R,) bool mask of the labelled rows (counted in the rows' ``n``).
        clusters: (R,) cluster labels for cluster-robust intervals, or None.
        covariates: (R, p) style differences appended to the design, or None.
    """
    a, b, y = model_a[used], model_b[used], judge[used]
    models = sorted(map(str, set(a) | set(b)))
    why = disconnected_note(components(a, b, models)) or _human_graph_problem(a, b, y, models)
    if why:
        return why
    X = design(a, b, models)
    if covariates is not None:
        X = np.hstack([X, np.asarray(covariates, float)[used]])
    every, none = np.ones(len(y), bool), np.zeros(len(y), bool)
    fit, why = _fit_or_note(X, y, y, every, none, 0.0, None if clusters is None else clusters[used])
    n = int((labelled & used).sum())
    return why or _Fits(models, [], {JUDGE_ONLY: (fit, "")}, n, len(y) - n, "", rows=used)


def _flat_labels(y) -> str:
    """Why PPI++ gives no interval when the labelled outcomes ``y`` (n,) never vary, else ''.

    Its rectifier (human minus prediction) then has no variance to learn from: lam goes to ~0 and the
    interval to the human-only one, of width ~0 (all ties: 1000.0 [999.99, 1000.01] before, no note).
    """
    y = np.asarray(y, float)
    if len(y) < 2 or np.ptp(y) > 0:
        return ""
    return f"zero variance: all {len(y)} labelled outcomes are {y[0]:g}, so PPI++ has nothing to correct the judge with"


def _score_rows(fits: _Fits, predictions: dict, level: float) -> list[tuple[str, Estimate]]:
    """(model, Elo Estimate) rows of every estimator, not-estimable rows included."""
    few = f"fewer than {MIN_LABELLED} labelled comparisons"
    judged = isinstance(fits.judge, _Fits)
    rows = [(m, not_estimable(est, level, 0, 0, few)) for m in fits.dropped for est in (HUMAN_ONLY, *predictions)]
    if isinstance(fits.judge, str):
        why = f"{few} to score it on the labelled models' scale, and the judge's verdicts do not score it either: "
        rows += [(m, not_estimable(JUDGE_ONLY, level, 0, 0, why + fits.judge)) for m in fits.dropped]
    for est, (fit, why) in fits.fits.items():
        if judged and est == JUDGE_ONLY:
            continue
        rows += (
            [(m, not_estimable(est, level, 0, 0, why)) for m in fits.models]
            if fit is None
            else elo_estimates(fit, fits.models, est, level, fits.n, fits.n_unl)
        )
    rows = [(m, e if e.note or not fits.caveat else replace(e, caveat=fits.caveat)) for m, e in rows]
    return (_judge_rows(fits.judge, fits.models, level) if judged else []) + rows


def _judge_rows(judge: _Fits, anchor: list[str], level: float) -> list[tuple[str, Estimate]]:
    """The judge-only rows of its fit over every model compared, the ``anchor`` models averaging 1000."""
    fit, _ = judge.fits[JUDGE_ONLY]
    return elo_estimates(fit, judge.models, JUDGE_ONLY, level, judge.n, judge.n_unl, anchor=anchor)


def bt_leaderboard(model_a, model_b, y, predictions: dict, labelled, unlabelled, level: float,
                   clusters=None, probability=None) -> list[tuple[str, Estimate]]:  # fmt: skip
    """(model, Estimate) rows of every estimator, the scores on the Elo scale.

    Args:
        model_a: (R,) names of the models whose response is A.
        model_b: (R,) names of the models whose response is B.
        y: (R,) human A-outcome (1 / 0.5 / 0; read on labelled rows).
        predictions: estimator name -> (R,) predicted A-outcome (the first is the judge's: its verdicts
            make the judge-only fit).
        labelled: (R,) bool mask of the labelled rows.
        unlabelled: (R,) bool mask of the unlabelled rows.
        level: coverage of the intervals and the rank-sets, in (0, 1).
        clusters: (R,) cluster labels for cluster-robust intervals, or None.
        probability: (R,) under a label plan, each labelled row's probability of being labelled
            (1 for rows labelled before the plan: :func:`.plan.planned_probabilities`), or None for a random sample.

    Returns:
        (model, Estimate) pairs: Elo scores with their rank-sets, or not-estimable rows saying why.
    """
    level = check_level(level)
    fits = _bt_fits(model_a, model_b, y, predictions, labelled, unlabelled, clusters, None, probability)
    return _score_rows(fits, predictions, level)


def bt_style_leaderboard(model_a, model_b, y, predictions: dict, labelled, unlabelled, level: float,
                         covariates: pd.DataFrame, clusters=None, probability=None) -> tuple[list, list]:  # fmt: skip
    """The style-controlled leaderboard: Bradley-Terry with style covariates, every estimator.

    P(A beats B) = sigmoid(theta_a - theta_b + gamma . s), s the comparison's style differences
    (Chatbot Arena's style control, there fitted on votes only; here by PPI++ M-estimation with the
    human labels and the judge's or the audit's predictions). theta is then each model's strength
    at equal style; gamma how much the style itself wins.

    Args:
        model_a: (R,) names of the models whose response is A.
        model_b: (R,) names of the models whose response is B.
        y: (R,) human A-outcome (1 / 0.5 / 0; read on labelled rows).
        predictions: estimator name -> (R,) predicted A-outcome, the judge's first.
        labelled: (R,) bool mask of the labelled rows.
        unlabelled: (R,) bool mask of the unlabelled rows.
        level: coverage of the intervals and the rank-sets, in (0, 1).
        covariates: (R, p) style differences of each comparison (A minus B, e.g. normalised counts of
            :func:`puaudit_jax.datasets.style.style_differences`), one named column per covariate,
            none constant over the used rows.
        clusters: (R,) cluster labels for cluster-robust intervals, or None.
        probability: (R,) under a label plan, each labelled row's probability of being labelled, or None.

    Returns:
        (scores, coefficients): (model, Elo Estimate) rows as :func:`bt_leaderboard`, and (covariate,
        Estimate) rows: gamma in Elo points per unit of the covariate (400 / ln 10 per nat).
    """
    level = check_level(level)
    covariates = pd.DataFrame(covariates)
    fits = _bt_fits(model_a, model_b, y, predictions, labelled, unlabelled, clusters, covariates.to_numpy(float),
                    probability)  # fmt: skip
    p = covariates.shape[1]
    coefficients = []
    judge = fits.judge.fits[JUDGE_ONLY] if isinstance(fits.judge, _Fits) else None
    for est, (fit, why) in ({**fits.fits, JUDGE_ONLY: judge} if judge else fits.fits).items():
        for j, name in enumerate(covariates.columns):
            if fit is None:
                coefficients.append((name, not_estimable(est, level, 0, 0, why)))
                continue
            coefficients.append((name, _coefficient(fit, len(fit.theta) - p + j, est, level, fits)))
    parts = {e: (None if f is None else _models_part(f, p), why) for e, (f, why) in fits.fits.items()}
    strengths = replace(fits, fits=parts)
    if judge:
        strengths = replace(strengths, judge=replace(fits.judge, fits={JUDGE_ONLY: (_models_part(judge[0], p), "")}))
    return _score_rows(strengths, predictions, level), coefficients


def _models_part(fit: MFit, p: int) -> MFit:
    """The fit restricted to its first d - p coefficients (the models' contrasts)."""
    d = len(fit.theta) - p
    return replace(fit, theta=fit.theta[:d], cov=fit.cov[:d, :d])
