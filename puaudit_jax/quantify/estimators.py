"""Means with confidence intervals from few human labels and many judge verdicts.

Three estimators of the mean of a human-defined outcome Y over a pool of comparisons:

=================  =====================================================================
``judge only``     mean of the judge's outcome Yhat over every item, labelled or not: biased
                   whenever the judge is (shown for contrast), its interval says nothing about it
``human only``     the classical mean of Y over the n labelled items (CLT interval)
``ppi++``          prediction-powered inference with power tuning (Angelopoulos, Duchi & Zrnic,
                   "PPI++", arXiv:2311.01453, §2 and Eq. 3): theta = lam mean(Yhat_unlabelled) +
                   mean(Y - lam Yhat_labelled), lam chosen to minimise the variance (clipped to
                   [0, 1]; lam = 0 is the classical estimate, lam = 1 plain PPI). Valid whatever
                   the judge, provided the labelled items are a random sample of the pool.
=================  =====================================================================

And how far off the judge's own number is, ``judge - human`` (:func:`judge_bias`): E[Yhat - Y], the
judge-only estimand minus the human one, estimated by the mean of Yhat - Y over the labelled items
(plain PPI's rectifier, sign flipped), with the human-only interval of that mean.

Intervals are two-sided normal (z) intervals at ``level``, as ``ppi_py.ppi_mean_ci`` and
``ppi_py.classical_mean_ci`` compute them (standard deviations with ddof = 0); ``ppi-python`` is
the test reference (equal to 1e-6). A target that cannot be estimated (fewer than 2 labelled items,
no unlabelled item for PPI) gives NaNs and a ``note`` saying why, never a silent number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtri  # norm.ppf without scipy.stats' 0.6 s import

from .config import check_level  # light, for the configs the CLI reads

JUDGE_ONLY, HUMAN_ONLY, PPI = "judge only", "human only", "ppi++"
JUDGE_BIAS = "judge - human"  # the judge's outcome minus the human's, on the labelled items


@dataclass(frozen=True)
class Estimate:
    """One estimator's answer: a point estimate and its interval [lower, upper] at ``level``.

    Estimate and bounds are in the outcome's units (a share in [0, 1] for 0/1 outcomes).

    Attributes:
        estimator: the estimator's name (:data:`ESTIMATORS`).
        estimate: the point estimate (NaN when not estimable).
        lower: lower end of the interval.
        upper: upper end of the interval.
        level: the interval's coverage, in (0, 1).
        n_labelled: labelled items used.
        n_unlabelled: unlabelled items used.
        lam: PPI++'s lam (None for the other estimators).
        note: why it is not estimable ("" when it is; its numbers are then NaN).
        caveat: a caveat about an estimable one (rows left out).
        rank_lower / rank_upper: for a leaderboard score, the best and worst rank the model may hold
            (1 = strongest), simultaneously for every model at ``level`` (:mod:`.ranks`); else None.
    """

    estimator: str
    estimate: float
    lower: float
    upper: float
    level: float
    n_labelled: int
    n_unlabelled: int
    lam: float | None = None
    note: str = ""
    caveat: str = ""
    rank_lower: int | None = None
    rank_upper: int | None = None

    @property
    def estimable(self) -> bool:
        """Whether the estimate is a number (no ``note``)."""
        return not self.note


def z_value(level: float) -> float:
    """The two-sided normal quantile of a ``level`` interval (1.645 at 0.9)."""
    return float(ndtri(1 - (1 - level) / 2))


def _interval(estimate: float, se: float, level: float) -> tuple[float, float]:
    half = z_value(level) * se
    return estimate - half, estimate + half


def not_estimable(estimator: str, level: float, n: int, n_unl: int, why: str) -> Estimate:
    """An :class:`Estimate` with NaN numbers and the note "not estimable: ``why``".

    Args:
        estimator: the estimator's name (e.g. :data:`HUMAN_ONLY`).
        level: the coverage the interval would have had, in (0, 1).
        n: labelled items.
        n_unl: unlabelled items.
        why: the reason, said in the note.

    Returns:
        The not-estimable :class:`Estimate`.
    """
    return Estimate(estimator, np.nan, np.nan, np.nan, level, n, n_unl, note=f"not estimable: {why}")


FLAT = 1e-9  # an interval narrower than this is a variance of 0 up to rounding


def wilson_interval(successes: float, n: int, level: float) -> tuple[float, float]:
    """The Wilson score interval of a share from ``successes`` of ``n`` trials at ``level`` (inside [0, 1]).

    Unlike the normal interval it keeps a positive width at 0 and n successes (Wilson 1927).

    Args:
        successes: the count of successes (may be fractional: a sum of shares).
        n: the trials, >= 1.
        level: coverage, in (0, 1).

    Returns:
        (lower, upper) in [0, 1].
    """
    z2, p = z_value(level) ** 2, successes / n
    centre, half = (p + z2 / (2 * n)) / (1 + z2 / n), np.sqrt(p * (1 - p) / n + z2 / (4 * n**2)) / (1 + z2 / n)
    z = np.sqrt(z2)
    return float(max(centre - z * half, 0.0)), float(min(centre + z * half, 1.0))


def few_clusters(clusters) -> str:
    """Why a cluster-robust interval of items in ``clusters`` ((n,) labels or None) is not estimable, or ""."""
    if clusters is None:
        return ""
    labels = np.asarray(clusters).astype(str)
    count = len(set(labels.tolist()))
    return f"its {len(labels)} items fall in {count} cluster (a cluster-robust interval needs 2)" if count < 2 else ""


def unit_interval(est: Estimate, outcomes, clusters=None) -> Estimate:
    """``est`` of a share (a mean of outcomes in [0, 1]) made valid at the boundaries of [0, 1].

    - labelled items in fewer than 2 clusters: not estimable (the cluster-robust variance is 0);
    - a zero-width interval (the outcomes never vary): the Wilson score interval when they are 0/1,
      else not estimable (all ties: no interval follows from data without variance);
    - bounds beyond [0, 1] are clipped to it (the share lies in it, so coverage is kept), and said;
      an interval wholly outside [0, 1] is not estimable.

    Args:
        est: the estimate, from any estimator of this module or :mod:`.active`.
        outcomes: (n,) the outcomes its interval rests on (the labelled ones; the judge's for judge only).
        clusters: (n,) their cluster labels, or None.

    Returns:
        The :class:`Estimate`, estimable with 0 <= lower < upper <= 1, or not estimable with its reason.
    """
    if not est.estimable:
        return est
    why = few_clusters(clusters)
    if why:
        return not_estimable(est.estimator, est.level, est.n_labelled, est.n_unlabelled, why)
    notes = [est.caveat] if est.caveat else []
    lower, upper, estimate = est.lower, est.upper, est.estimate
    if not upper - lower > FLAT:
        y = np.asarray(outcomes, np.float64)
        if not np.isin(y, (0.0, 1.0)).all():
            why = f"all {len(y)} outcomes are {y[0]:g}" if (y == y[0]).all() else "its variance estimate is 0"
            return not_estimable(est.estimator, est.level, est.n_labelled, est.n_unlabelled,
                                 f"{why}: a zero-width interval is not an interval")  # fmt: skip
        lower, upper = wilson_interval(float(y.sum()), len(y), est.level)
        notes.append(f"zero variance ({y.sum():g} of {len(y)} outcomes are 1): Wilson score interval")
    elif lower < 0 or upper > 1:
        if upper <= 0 or lower >= 1:
            return not_estimable(est.estimator, est.level, est.n_labelled, est.n_unlabelled,
                                 f"its interval [{lower:.3g}, {upper:.3g}] lies outside [0, 1]")  # fmt: skip
        lower, upper = max(lower, 0.0), min(upper, 1.0)
        notes.append("interval clipped to [0, 1]")
    estimate = float(np.clip(estimate, lower, upper))
    return replace(est, estimate=estimate, lower=float(lower), upper=float(upper), caveat="; ".join(notes))


def clustered_se(terms: list[np.ndarray], clusters: list[np.ndarray]) -> float:
    """Cluster-robust (CR0) standard error sqrt(sum_c (sum_{i in c} term_i)^2) of a sum of influence terms.

    ``terms``: arrays, one value per item, whose sum is the estimator's deviation; ``clusters`` the
    items' cluster labels (same shapes). One cluster per item gives the usual sqrt(sum term_i^2);
    items of one prompt (LLMFAO reuses a prompt's responses) share a cluster.
    """
    _, codes = np.unique(np.concatenate([np.asarray(c).astype(str) for c in clusters]), return_inverse=True)
    sums = np.bincount(codes, weights=np.concatenate(terms))
    return float(np.sqrt((sums**2).sum()))


def _outcomes(name: str, values) -> np.ndarray:
    """``values`` as a float64 (n,) array, or ValueError naming ``name`` and its first non-finite entry."""
    values = np.asarray(values, np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        raise ValueError(f"{name} must be finite: {len(bad)} entries are not, the first at index {bad[0]} "
                         f"({float(values.flat[bad[0]])})")  # fmt: skip
    return values


def human_only(y, level: float, n_unlabelled: int = 0, clusters=None) -> Estimate:
    """Classical mean of the labelled outcomes ``y`` with a CLT interval.

    Args:
        y: (n,) labelled outcomes.
        level: the interval's coverage, in (0, 1).
        n_unlabelled: unlabelled items, only reported in the result.
        clusters: (n,) cluster labels for a cluster-robust interval, or None.

    Returns:
        The :class:`Estimate` (not estimable with n < 2).

    Raises:
        ValueError: ``level`` outside (0, 1), or a non-finite ``y``.
    """
    y, level = _outcomes("y", y), check_level(level)
    if len(y) < 2:
        return not_estimable(HUMAN_ONLY, level, len(y), n_unlabelled, f"{len(y)} labelled items (need 2)")
    se = y.std() / np.sqrt(len(y)) if clusters is None else clustered_se([(y - y.mean()) / len(y)], [clusters])
    lo, hi = _interval(y.mean(), se, level)
    return Estimate(HUMAN_ONLY, float(y.mean()), lo, hi, level, len(y), n_unlabelled)


def judge_bias(y, yhat, level: float, n_unlabelled: int = 0, clusters=None) -> Estimate:
    """How far off the judge's number is: the mean over labelled items of Yhat - Y, with a CLT interval.

    The judge-only estimand minus the human one, E[Yhat - Y], estimated where both are known (plain
    PPI's rectifier with its sign flipped); its interval is :func:`human_only`'s on the differences.

    Args:
        y: (n,) labelled outcomes (the humans').
        yhat: (n,) the judge's outcomes of the same items.
        level: the interval's coverage, in (0, 1).
        n_unlabelled: unlabelled items, only reported in the result.
        clusters: (n,) cluster labels for a cluster-robust interval, or None.

    Returns:
        The :class:`Estimate` named :data:`JUDGE_BIAS`, in the outcome's units (a share difference in
        [-1, 1]); not estimable with n < 2, labelled items in one cluster, or differences that never vary.

    Raises:
        ValueError: ``y`` and ``yhat`` differ in length, ``level`` is outside (0, 1), or an input is not finite.
    """
    y, yhat = _outcomes("y", y), _outcomes("yhat", yhat)
    if len(y) != len(yhat):
        raise ValueError(f"y has {len(y)} labelled outcomes but yhat {len(yhat)} judge outcomes")
    est = replace(human_only(yhat - y, level, n_unlabelled, clusters), estimator=JUDGE_BIAS)
    return difference_interval(est, yhat - y, clusters)


def difference_interval(est: Estimate, differences, clusters=None) -> Estimate:
    """``est`` of a mean difference, not estimable when its interval cannot be one.

    Labelled items in fewer than 2 clusters (the cluster-robust variance is 0), or a zero-width interval
    (the differences never vary: a judge that agrees on every labelled item) are not estimable, with why.

    Args:
        est: the estimate of the mean of ``differences``.
        differences: (n,) the differences its interval rests on.
        clusters: (n,) their cluster labels, or None.
    """
    if not est.estimable:
        return est
    d = np.asarray(differences, np.float64)
    why = few_clusters(clusters)
    if not why and not est.upper - est.lower > FLAT:
        why = f"the judge's outcome minus the human's is {d[0]:g} on all {len(d)} labelled items" if (
            d == d[0]).all() else "its variance estimate is 0"  # fmt: skip
        why += ": a zero-width interval is not an interval"
    if why:
        return not_estimable(est.estimator, est.level, est.n_labelled, est.n_unlabelled, why)
    return replace(est, estimate=float(est.estimate), lower=float(est.lower), upper=float(est.upper))


def judge_only(yhat_labelled, yhat_unlabelled, level: float, clusters=None) -> Estimate:
    """Mean of the judge's outcomes over all items (biased where the judge is), with a CLT interval.

    Args:
        yhat_labelled: (n,) judge outcomes of the labelled items.
        yhat_unlabelled: (N,) judge outcomes of the unlabelled items.
        level: the interval's coverage, in (0, 1).
        clusters: (labelled (n,), unlabelled (N,)) cluster labels for a cluster-robust interval, or None.

    Returns:
        The :class:`Estimate` (not estimable with fewer than 2 items).

    Raises:
        ValueError: ``level`` outside (0, 1), or a non-finite outcome.
    """
    both = np.concatenate([_outcomes("yhat_labelled", yhat_labelled), _outcomes("yhat_unlabelled", yhat_unlabelled)])
    level, n, n_unl = check_level(level), len(yhat_labelled), len(yhat_unlabelled)
    if len(both) < 2:
        return not_estimable(JUDGE_ONLY, level, n, n_unl, f"{len(both)} items (need 2)")
    se = (both.std() / np.sqrt(len(both)) if clusters is None else
          clustered_se([(both - both.mean()) / len(both)], [np.concatenate(clusters)]))  # fmt: skip
    lo, hi = _interval(both.mean(), se, level)
    return Estimate(JUDGE_ONLY, float(both.mean()), lo, hi, level, n, n_unl)


def ppi_lambda(y, yhat, yhat_unlabelled) -> float:
    """PPI++'s variance-minimising lam for a mean (ppi_py ``_calc_lam_glm``, clipped to [0, 1]).

    lam = cov(Y, Yhat) / ((1 + n/N) var(Yhat over all items)), biased covariance, ddof = 1 variance.

    Args:
        y: (n,) float labelled outcomes.
        yhat: (n,) float predictions of the labelled items.
        yhat_unlabelled: (N,) float predictions of the unlabelled items.

    Returns:
        lam in [0, 1] (0 when the predictions are constant).
    """
    n, big_n = len(y), len(yhat_unlabelled)
    first = yhat_unlabelled.mean() + (y - yhat).mean()  # plain PPI (lam = 1): the centring point
    g, gh = y - first, yhat - first
    cov = ((g - g.mean()) * (gh - gh.mean())).mean()
    var = np.var(np.concatenate([yhat, yhat_unlabelled]) - first, ddof=1)
    if not var > 0:
        return 0.0  # constant predictions carry no information: the classical estimate
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(y, yhat, yhat_unlabelled, level: float, lam: float | None = None, clusters=None) -> Estimate:
    """PPI++ mean of Y from labelled (y, yhat) and unlabelled predictions (module docstring).

    Args:
        y: (n,) labelled outcomes.
        yhat: (n,) predictions of the labelled items.
        yhat_unlabelled: (N,) predictions of the unlabelled items.
        level: the interval's coverage, in (0, 1).
        lam: a fixed lam (1 = plain PPI), or None for :func:`ppi_lambda`.
        clusters: (labelled (n,), unlabelled (N,)) cluster labels for a cluster-robust interval (a
            cluster may hold labelled and unlabelled items: their terms are summed together), or None.

    Returns:
        The :class:`Estimate` (not estimable with n < 2 or N = 0).

    Raises:
        ValueError: ``y`` and ``yhat`` differ in length, ``level`` is outside (0, 1), or an input is not finite.
    """
    y, yhat = _outcomes("y", y), _outcomes("yhat", yhat)
    yhat_unlabelled, level = _outcomes("yhat_unlabelled", yhat_unlabelled), check_level(level)
    n, big_n = len(y), len(yhat_unlabelled)
    if len(yhat) != n:
        raise ValueError(f"y has {n} labelled outcomes but yhat {len(yhat)} predictions")
    if n < 2 or big_n < 1:
        why = f"{n} labelled items (need 2)" if n < 2 else "no unlabelled item"
        return not_estimable(PPI, level, n, big_n, why)
    lam = ppi_lambda(y, yhat, yhat_unlabelled) if lam is None else float(lam)
    imputed, rectifier = lam * yhat_unlabelled, y - lam * yhat
    estimate = imputed.mean() + rectifier.mean()
    if clusters is None:
        se = np.sqrt((imputed.std() / np.sqrt(big_n)) ** 2 + (rectifier.std() / np.sqrt(n)) ** 2)
    else:
        terms = [(rectifier - rectifier.mean()) / n, (imputed - imputed.mean()) / big_n]
        se = clustered_se(terms, list(clusters))
    lo, hi = _interval(float(estimate), float(se), level)
    return Estimate(PPI, float(estimate), lo, hi, level, n, big_n, lam=lam)


STRATIFIED = "ppi++ (stratified)"
AUDIT_PPI = "ppi++ (audit)"  # PPI++ with an audit's expected human verdicts as predictions
#: Every estimator, in the order tables and figures show them; the last, the judge's bias, of "judge bias: " targets.
ESTIMATORS = (JUDGE_ONLY, HUMAN_ONLY, PPI, AUDIT_PPI, STRATIFIED, JUDGE_BIAS)
MIN_PER_STRATUM = 10  # labelled items per stratum: below it the per-stratum lam and variance under-cover
# Strata are pooled until each pool has this many labelled items: with pools of 10-29 the MT-Bench win
# rates at 10 % labels covered 0.84 on average (min 0.77) at level 0.9, with 30 as plain PPI++ (0.87);
# `python -m experiments.reproductions.quantify_coverage`, README "Small question types are pooled".
POOL_MIN = 30


def collapse_strata(counts: dict, minimum: int = POOL_MIN) -> dict:
    """Pool strata with fewer than ``minimum`` labelled items into their smallest neighbours.

    Survey statistics' collapsed strata: the stratum with the fewest labelled items is merged with
    the next smallest (by labelled items, then name), again and again, until every pooled stratum has
    ``minimum`` or only one is left.

    Args:
        counts: stratum -> its labelled items.
        minimum: labelled items a stratum needs to stand alone.

    Returns:
        stratum -> the name of its pooled stratum ("a + b + c" for merged ones; its own otherwise).
    """
    groups = [[t] for t in sorted(counts, key=str)]
    size = lambda g: sum(counts[t] for t in g)
    while len(groups) > 1:
        groups.sort(key=lambda g: (size(g), str(g)))
        if size(groups[0]) >= minimum:
            break
        groups = [groups[0] + groups[1], *groups[2:]]
    return {t: " + ".join(str(u) for u in sorted(g, key=str)) for g in groups for t in g}


def stratified_ppi_mean(y, yhat, yhat_unlabelled, strata, strata_unlabelled, level: float, clusters=None) -> Estimate:
    """PPI++ within each stratum (question type), combined with the strata's shares of all items.

    theta = sum_t w_t theta_t, se^2 = sum_t w_t^2 se_t^2, w_t = (n_t + N_t) / (n + N). Valid when the
    labelled items are a random sample *within* each stratum, a weaker assumption than a random sample
    of the pool (LLMFAO's labelled share differs across types). A stratum without unlabelled items
    contributes its classical mean. Strata with < POOL_MIN labelled items (small strata under-cover:
    the per-stratum lam and variance rest on a few labels) are pooled with their smallest neighbours
    (:func:`collapse_strata`; the caveat names them); when all strata together have fewer than
    MIN_PER_STRATUM, the target is not estimable.

    Args:
        y: (n,) labelled outcomes.
        yhat: (n,) predictions of the labelled items.
        yhat_unlabelled: (N,) predictions of the unlabelled items.
        strata: (n,) stratum of each labelled item.
        strata_unlabelled: (N,) stratum of each unlabelled item.
        level: the interval's coverage, in (0, 1).
        clusters: (labelled (n,), unlabelled (N,)) labels, assumed nested in the strata, or None.

    Returns:
        The :class:`Estimate` of the combined mean.
    """
    y, yhat, yhat_unlabelled = (np.asarray(a, np.float64) for a in (y, yhat, yhat_unlabelled))
    strata, strata_unlabelled, level = np.asarray(strata), np.asarray(strata_unlabelled), check_level(level)
    n, big_n = len(y), len(yhat_unlabelled)
    names = sorted(set(strata.tolist()) | set(strata_unlabelled.tolist()), key=str)
    pooled = collapse_strata({t: int((strata == t).sum()) for t in names})
    strata = np.array([pooled[t] for t in strata.tolist()], dtype=object)
    strata_unlabelled = np.array([pooled[t] for t in strata_unlabelled.tolist()], dtype=object)
    merged = sorted({g for g in pooled.values() if " + " in g})
    total, var = 0.0, 0.0
    for t in sorted(set(pooled.values())):
        lab, unl = strata == t, strata_unlabelled == t
        sub = None if clusters is None else (clusters[0][lab], clusters[1][unl])
        if lab.sum() < MIN_PER_STRATUM:
            return not_estimable(STRATIFIED, level, n, big_n, f"stratum {t!r} has {int(lab.sum())} labelled items "
                                  f"(need {MIN_PER_STRATUM})")  # fmt: skip
        if unl.any():
            est = ppi_mean(y[lab], yhat[lab], yhat_unlabelled[unl], level, clusters=sub)
        else:
            est = human_only(y[lab], level, 0, None if sub is None else sub[0])
        if not est.estimable:
            return not_estimable(
                STRATIFIED, level, n, big_n, f"stratum {t!r}: {est.note.removeprefix('not estimable: ')}"
            )
        w = (lab.sum() + unl.sum()) / (n + big_n)
        total, var = total + w * est.estimate, var + (w * (est.upper - est.lower) / (2 * z_value(level))) ** 2
    lo, hi = _interval(total, float(np.sqrt(var)), level)
    caveat = f"strata with < {POOL_MIN} labelled items pooled: {'; '.join(merged)}" if merged else ""
    return Estimate(STRATIFIED, float(total), lo, hi, level, n, big_n, caveat=caveat)


def mean_splits(y, yhat, labelled, unlabelled, level: float) -> dict:
    """Human-only and PPI++ means for S splits at once (the coverage study).

    Equal split by split to :func:`human_only` and :func:`ppi_mean` (tests check it); NaN where a split
    has < 2 labelled or no unlabelled item.

    Args:
        y: (R,) human outcomes in [0, 1] (NaN where unknown: only read on labelled rows).
        yhat: (R,) predicted outcomes in [0, 1].
        labelled: (S, R) masks of each split's labelled rows.
        unlabelled: (S, R) masks of each split's unlabelled rows.
        level: coverage, in (0, 1).

    Returns:
        {HUMAN_ONLY: (estimate, lower, upper), PPI: (...)}, each an (S,) array.
    """
    y, yhat = np.nan_to_num(np.asarray(y, np.float64)), np.asarray(yhat, np.float64)
    lab, unl = np.asarray(labelled, np.float64), np.asarray(unlabelled, np.float64)
    n, big_n = lab.sum(1), unl.sum(1)
    z = z_value(check_level(level))

    def mean(v, m, count):
        return (m * v).sum(1) / count

    def var(v, m, count, ddof=0):  # per split, of the values v (R,) or (S, R) where m is 1
        centre = mean(v, m, count)[:, None]
        return (m * (v - centre) ** 2).sum(1) / (count - ddof)

    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        human = mean(y, lab, n)
        out[HUMAN_ONLY] = _bounds(np.where(n >= 2, human, np.nan), np.sqrt(var(y, lab, n) / n), z)
        first = mean(yhat, unl, big_n) + mean(y - yhat, lab, n)  # ppi_lambda's centring point
        g, gh = y - first[:, None], yhat - first[:, None]
        cov = mean((g - mean(g, lab, n)[:, None]) * (gh - mean(gh, lab, n)[:, None]), lab, n)
        spread = var(gh, lab + unl, n + big_n, ddof=1)
        lam = np.clip(np.where(spread > 0, cov / ((1 + n / big_n) * spread), 0.0), 0.0, 1.0)
        imputed, rect = lam[:, None] * yhat, y - lam[:, None] * yhat
        est = mean(imputed, unl, big_n) + mean(rect, lab, n)
        se = np.sqrt(var(imputed, unl, big_n) / big_n + var(rect, lab, n) / n)
        out[PPI] = _bounds(np.where((n >= 2) & (big_n >= 1), est, np.nan), se, z)
    return out


def _bounds(estimate, se, z):
    return estimate, estimate - z * se, estimate + z * se
