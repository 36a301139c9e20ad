"""Do the intervals cover? A coverage study on real data.

The population is the table's human-labelled rows (R of them). A split keeps ``fraction`` of them
(exactly round(fraction R), uniformly without replacement) as labelled and hides the rest, which
become the unlabelled pool; the "truth" of a target is its human-only estimate from all R labels.
Over ``splits`` splits we count how often each estimator's interval covers the truth and its mean
width. A valid estimator covers at least ``level`` up to Monte-Carlo error: the binomial bound
``level - 3 sqrt(level (1 - level) / estimable splits)`` (finite-population sampling of 20 % makes
the CLT intervals slightly conservative). The judge-only interval does not depend on the split: it
covers always or never.

Vectorised: the means of every split at once (:func:`.estimators.mean_splits`), the Bradley-Terry
fits vmapped over splits in chunks (:func:`.m_estimation.ppi_logistic_splits`). Items are sampled
independently, so the intervals here are the item-level ones (no clustering): the study measures
exactly the sampling it simulates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from puaudit_runtime.checks import check_fraction

from ..consensus.bradley_terry import ELO_PER_NAT
from .estimators import (
    HUMAN_ONLY,
    JUDGE_ONLY,
    MIN_PER_STRATUM,
    PPI,
    STRATIFIED,
    check_level,
    collapse_strata,
    mean_splits,
    z_value,
)
from .leaderboard import ELO_MEAN, MIN_LABELLED, contrast, design, scored_models
from .m_estimation import ppi_logistic, ppi_logistic_splits
from .ranks import rank_sets_splits, true_ranks
from .targets import Inputs, agreement_inputs, inputs

CHUNK = 50  # splits per vmapped Bradley-Terry call (memory: CHUNK x rows x models floats)


@dataclass(frozen=True)
class CoverageConfig:
    """Settings of :func:`coverage_study`.

    Attributes:
        fraction: share of the human-labelled rows kept as labels in each split, in (0, 1)
        splits: number of random splits
        level: coverage of the intervals, in (0, 1)
        seed: seed of the splits
    """

    fraction: float = 0.2
    splits: int = 500
    level: float = 0.9
    seed: int = 0

    def validate(self) -> CoverageConfig:
        """Return self; raise ValueError naming the first field out of its range."""
        check_fraction("fraction", self.fraction)
        if self.splits < 1:
            raise ValueError(f"splits must be >= 1, got {self.splits!r}")
        check_level(self.level)
        return self


@dataclass(frozen=True)
class CoverageRow:
    """One (target, estimator) of the coverage study.

    Attributes:
        target: the target's name.
        estimator: the estimator's name.
        truth: the target's human-only estimate from all R labels.
        coverage: share of the estimable splits whose interval covers the truth.
        mean_width: mean interval width over those splits.
        mean_estimate: mean estimate over those splits.
        estimable: how many splits were estimable.
        splits: splits run.
        fraction: share of the rows kept as labels.
        level: the intervals' coverage.
    """

    target: str
    estimator: str
    truth: float
    coverage: float
    mean_width: float
    mean_estimate: float
    estimable: int
    splits: int
    fraction: float
    level: float

    @property
    def bound(self) -> float:
        """The lowest coverage a valid estimator reaches, 3 binomial standard errors below level."""
        if self.estimable == 0:
            return np.nan
        return self.level - 3 * np.sqrt(self.level * (1 - self.level) / self.estimable)


def split_masks(rows: int, fraction: float, splits: int, seed: int) -> np.ndarray:
    """Random label masks of the coverage study: which rows keep their human label in each split.

    Args:
        rows: R, the rows of the population.
        fraction: share of the rows kept as labelled in each split, in (0, 1).
        splits: S, the number of splits.
        seed: seed of the numpy Generator that draws them.

    Returns:
        (S, R) bool: each split keeps exactly ``max(1, round(fraction R))`` rows True.
    """
    keep = max(1, int(round(fraction * rows)))
    order = np.argsort(np.random.default_rng(seed).random((splits, rows)), axis=1)
    return order < keep


def _row(target, estimator, truth, est, lo, hi, config) -> CoverageRow:
    ok = np.isfinite(est) & np.isfinite(lo) & np.isfinite(hi)
    covered = (lo[ok] <= truth) & (truth <= hi[ok])
    stats = (covered.mean(), (hi - lo)[ok].mean(), est[ok].mean()) if ok.any() else (np.nan,) * 3
    return CoverageRow(target, estimator, float(truth), *map(float, stats), int(ok.sum()), len(est), config.fraction,
                       config.level)  # fmt: skip


def _stratified(y, yhat, lab, unl, strata, level):
    """Stratified PPI++ (:func:`.estimators.stratified_ppi_mean`) per split: (estimate, lower, upper).

    Strata too small in a split are pooled as that split's estimate pools them (:func:`.estimators.collapse_strata`).
    """
    z, rows = z_value(level), (lab | unl)[0]
    names = sorted(set(strata[rows].tolist()), key=str)
    out = np.full((3, len(lab)), np.nan)
    for s in range(len(lab)):
        pooled = collapse_strata({t: int((lab[s] & (strata == t)).sum()) for t in names})
        groups = np.array([pooled.get(t, t) for t in strata.tolist()], dtype=object)
        total, var = 0.0, 0.0
        for g in sorted(set(pooled.values())):
            inside = groups == g
            est, lo, hi = (
                v[0] for v in mean_splits(y, yhat, (lab[s] & inside)[None], (unl[s] & inside)[None], level)[PPI]
            )
            if (lab[s] & inside).sum() < MIN_PER_STRATUM:
                est = np.nan
            w = (rows & inside).sum() / rows.sum()
            total, var = total + w * est, var + (w * (hi - lo) / (2 * z)) ** 2
        out[:, s] = total, total - z * np.sqrt(var), total + z * np.sqrt(var)
    return out[0], out[1], out[2]


def _mean_rows(target, y, preds, rows, masks, inp: Inputs, config, judge: bool = True) -> list[CoverageRow]:
    """Coverage rows of one mean target over ``rows`` (R,) mask.

    preds: estimator -> (R,) or (S, R), the judge's first; ``judge=False``: the judge's prediction is
    not informative (agreement), only the human-only, stratified and other-prediction estimators are run.
    """
    lab, unl = masks & rows, ~masks & rows
    truth, level = y[rows].mean(), config.level
    out = [_row(target, HUMAN_ONLY, truth, *mean_splits(y, preds[PPI], lab, unl, level)[HUMAN_ONLY], config)]
    if judge:
        own = np.asarray(preds[PPI])[rows]
        half = z_value(level) * own.std() / np.sqrt(len(own))
        fixed = (np.full(len(masks), v) for v in (own.mean(), own.mean() - half, own.mean() + half))
        out.insert(0, _row(target, JUDGE_ONLY, truth, *fixed, config))
    for name, yhat in preds.items():
        if judge or name != PPI:
            out.append(_row(target, name, truth, *mean_splits(y, yhat, lab, unl, level)[PPI], config))
    if inp.strata is not None:
        out.append(_row(target, STRATIFIED, truth, *_stratified(y, preds[PPI], lab, unl, inp.strata, level), config))
    return out


def _mean_targets(table, inp: Inputs, masks, config) -> list[CoverageRow]:
    """Agreement m, the share of A wins and (with model columns) per-model win rates."""
    everyone = np.ones(len(inp.y), bool)
    agreement = agreement_inputs(inp)
    out = _mean_rows("agreement m", agreement.y, agreement.predictions, everyone, masks, agreement, config, judge=False)
    out += _mean_rows("share of A wins", inp.y, inp.predictions, everyone, masks, inp, config)
    if "model_a" not in table.columns:
        return out
    ma, mb = table["model_a"].astype(str).to_numpy(), table["model_b"].astype(str).to_numpy()
    for model in sorted(set(ma) | set(mb)):
        flip = mb == model
        y = np.where(flip, 1 - inp.y, inp.y)
        preds = {k: np.where(flip, 1 - v, v) for k, v in inp.predictions.items()}
        out += _mean_rows(f"win rate: {model}", y, preds, (ma == model) | flip, masks, inp, config)
    return out


def _elo(theta_beta, cov_beta, c, z, level):
    """(S, K) Elo estimates, lower and upper bounds, and rank-set ends from beta (S, K-1) and its covariance."""
    theta = theta_beta @ c.T
    cov = np.einsum("kd,sde,le->skl", c, cov_beta, c)
    se = np.sqrt(np.clip(np.diagonal(cov, axis1=1, axis2=2), 0, None))
    rank_lo, rank_hi = rank_sets_splits(theta, cov, level)
    return (
        ELO_MEAN + ELO_PER_NAT * theta,
        ELO_MEAN + ELO_PER_NAT * (theta - z * se),
        ELO_MEAN + ELO_PER_NAT * (theta + z * se),
        rank_lo,
        rank_hi,
    )


def _bt_targets(table, inp: Inputs, masks, config) -> list[CoverageRow]:
    """Bradley-Terry coverage rows and rank rows.

    A split is estimable when every model keeps >= MIN_LABELLED labelled comparisons and the fit converges.
    """
    ma, mb = table["model_a"].astype(str).to_numpy(), table["model_b"].astype(str).to_numpy()
    models, _ = scored_models(ma, mb, np.ones(len(ma), bool))
    keep = np.isin(ma, models) & np.isin(mb, models)
    X, y, masks = design(ma[keep], mb[keep], models), inp.y[keep], masks[:, keep]
    c, z, everyone = contrast(len(models)), z_value(config.level), np.ones(len(y), bool)
    truth_fit = ppi_logistic(X, y, y, everyone, ~everyone, lam=0.0)
    truth = ELO_MEAN + ELO_PER_NAT * (c @ truth_fit.theta)
    judge = np.broadcast_to(inp.predictions[PPI], (len(masks), len(inp.y)))[0][keep]
    judge_fit = ppi_logistic(X, judge, judge, everyone, ~everyone, lam=0.0)
    judge_elo = [
        np.repeat(v, len(masks), 0) for v in _elo(judge_fit.theta[None], judge_fit.cov[None], c, z, config.level)
    ]
    onehot = np.stack([(ma[keep] == m) | (mb[keep] == m) for m in models], 1).astype(float)
    enough = (masks.astype(float) @ onehot >= MIN_LABELLED).all(1)
    results = {JUDGE_ONLY: judge_elo}
    runs = {HUMAN_ONLY: (y, 0.0, np.zeros_like(masks))}
    runs.update({k: (np.broadcast_to(v, (len(masks), len(inp.y)))[:, keep], None, ~masks)
                 for k, v in inp.predictions.items()})  # fmt: skip
    for name, (yhat, lam, unl) in runs.items():
        parts = []
        for start in range(0, len(masks), CHUNK):
            sl = slice(start, start + CHUNK)
            yh = np.broadcast_to(yhat, masks.shape)[sl]
            beta, cov, _, ok = ppi_logistic_splits(X, y, yh, masks[sl], unl[sl], lam=lam)
            good = ok & enough[sl] & np.isfinite(cov).all((1, 2)) & (np.abs(beta).max(1) < 30)
            parts.append([np.where(good[:, None], v, np.nan) for v in _elo(beta, cov, c, z, config.level)])
        results[name] = [np.concatenate(p) for p in zip(*parts)]
    rows = [_row(f"elo: {m}", name, truth[k], *(v[:, k] for v in arrays[:3]), config)
            for name, arrays in results.items() for k, m in enumerate(models)]  # fmt: skip
    return rows, [_rank_row(name, arrays, truth, config) for name, arrays in results.items()]


def _rank_row(estimator: str, arrays: list, truth: np.ndarray, config) -> dict:
    """One estimator's rank summary over the estimable splits.

    Kendall's tau of each split's scores (S, K) with the full-label ones (K,), and how often every
    model's full-label rank lies in its rank-set (simultaneous coverage).
    """
    from scipy.stats import kendalltau

    estimates, rank_lo, rank_hi = arrays[0], arrays[3], arrays[4]
    ok = np.isfinite(estimates).all(1)
    taus = [kendalltau(e, truth).statistic for e in estimates[ok]]
    ranks = true_ranks(truth)
    covered = ((rank_lo[ok] <= ranks) & (ranks <= rank_hi[ok])).all(1)
    n = int(ok.sum())
    return {"estimator": estimator, "kendall_tau": float(np.mean(taus)) if taus else np.nan,
            "rank_set_coverage": float(covered.mean()) if n else np.nan,
            "rank_set_mean_size": float((rank_hi[ok] - rank_lo[ok] + 1).mean()) if n else np.nan,
            "rank_set_bound": config.level - 3 * np.sqrt(config.level * (1 - config.level) / n) if n else np.nan,
            "estimable": n, "splits": len(estimates), "fraction": config.fraction, "level": config.level}  # fmt: skip


@dataclass(frozen=True)
class CoverageStudy:
    """The coverage study's result.

    Attributes:
        rows: one :class:`CoverageRow` per (target, estimator) as a DataFrame, plus its ``bound``.
        ranks: per estimator, the mean Kendall tau of the split leaderboards with the full-label one,
            and the rank-sets' simultaneous coverage of the full-label ranks, their mean size and the
            coverage a valid estimator reaches up to Monte-Carlo error (empty without model columns).
        config: the study's settings.
    """

    rows: pd.DataFrame
    ranks: pd.DataFrame
    config: CoverageConfig


def coverage_study(table: pd.DataFrame, config: CoverageConfig = CoverageConfig(), *, predictions: dict | None = None,
                   leaderboard: bool = True) -> CoverageStudy:  # fmt: skip
    """The coverage study of the module docstring on ``table``.

    Args:
        table: comparisons; only the R rows with a judge and a human verdict take part (:func:`population`).
        config: the study's settings (level, fraction kept, splits, seed).
        predictions: extra estimator -> (S, R) predicted A-outcomes in [0, 1] per split (e.g.
            :func:`audit_split_predictions` on :func:`split_masks`), or None.
        leaderboard: include the Bradley-Terry targets (when the table names the models).

    Returns:
        The :class:`CoverageStudy`: coverage, mean width and mean estimate per (target, estimator).
    """
    config = config.validate()
    pop = population(table)
    inp = inputs(pop, config.level)
    masks = split_masks(len(pop), config.fraction, config.splits, config.seed)
    if predictions:
        inp = replace(inp, predictions={**inp.predictions, **predictions})
    rows, ranks = _mean_targets(pop, inp, masks, config), []
    if leaderboard and "model_a" in pop.columns:
        bt_rows, ranks = _bt_targets(pop, inp, masks, config)
        rows += bt_rows
    frame = pd.DataFrame([asdict(r) for r in rows])
    frame["bound"] = [r.bound for r in rows]
    return CoverageStudy(frame, pd.DataFrame(ranks), config)


def population(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` with a judge and a human verdict, re-indexed: the coverage study's R rows."""
    return table[inputs(table, 0.9).labelled].reset_index(drop=True)
