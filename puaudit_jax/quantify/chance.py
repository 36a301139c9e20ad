"""Agreement beyond chance: Cohen's kappa and Krippendorff's alpha (nominal), with three kinds of interval.

Raw agreement rewards a judge that always picks the majority side; kappa and alpha subtract the
agreement two raters would reach by chance with their marginals.

**Cohen's kappa** (Cohen 1960), judge J vs human H over the categories the data has (A, B, tie):
kappa = (p_o - p_e) / (1 - p_e), p_o = P(J = H), p_e = sum_c pJ_c pH_c. The point estimate on the
labelled rows is scikit-learn's ``cohen_kappa_score``. Undefined when p_e = 1 (one category only).

**Krippendorff's alpha** (nominal; Krippendorff 2011, "Computing Krippendorff's alpha-reliability"):
any number of raters, missing ratings allowed. Units with >= 2 ratings are *pairable*; unit u with
m_u ratings adds the coincidences o^u_ck = (#c #k - [c = k] #c) / (m_u - 1); with o = sum_u o^u,
n_c = sum_k o_ck and n = sum_c n_c, alpha = 1 - (n - 1)(n - tr o) / (n^2 - sum_c n_c^2). Equals the
``krippendorff`` package's ``alpha(..., level_of_measurement="nominal")``. Undefined when the pairable
values hold one category (D_e = 0).

Intervals, each a separate estimator:

- ``delta method``: a smooth function of means (kappa of (p_o, pJ, pH) over labelled rows; alpha of the
  mean coincidences over pairable units, alpha = 1 - (s - 1/U)(s - t)/(s^2 - q) with s = sum ō, t = tr ō,
  q = sum_c (sum_k ō_ck)^2, U units), linearised: se = sqrt(sum_i IF_i^2) / n with IF_i = grad . (x_i -
  x̄), cluster-robust (CR0) when clusters are given (:func:`.estimators.clustered_se`). The kappa
  variance is the large-sample one of Fleiss, Cohen & Everitt (1969) in influence-function form.
- ``bootstrap``: the percentile interval of the statistic over resamples of whole clusters (units of
  one question move together; Field & Welsh 2007), from a seeded numpy Generator.
- ``ppi++ (delta method)`` (kappa only; :func:`kappa_ppi`): the judge rates the unlabelled pool too.

Two-sided intervals at ``level``; bounds are clipped to [-1, 1]; a zero-width interval is not an
interval (not estimable, with why).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .estimators import FLAT, Estimate, clustered_se, few_clusters, not_estimable, ppi_mean, z_value

DELTA, BOOTSTRAP, PPI_DELTA = "delta method", "bootstrap", "ppi++ (delta method)"
CHUNK = 200  # bootstrap resamples drawn at once (memory: CHUNK x clusters)


def one_hot(values, categories) -> np.ndarray:
    """(n, C) float 1 where ``values`` (n,) equals ``categories[c]``."""
    return (np.asarray(values, dtype=object)[:, None] == np.asarray(categories, dtype=object)[None, :]).astype(float)


def _bounded(est: Estimate, what: str) -> Estimate:
    """``est`` with its bounds clipped to [-1, 1] (said), or not estimable when its width is 0."""
    if not est.upper - est.lower > FLAT:
        return not_estimable(est.estimator, est.level, est.n_labelled, est.n_unlabelled,
                             f"{what}: a zero-width interval is not an interval")  # fmt: skip
    lower, upper = max(est.lower, -1.0), min(est.upper, 1.0)
    notes = [c for c in (est.caveat, "interval clipped to [-1, 1]" if (lower, upper) != (est.lower, est.upper) else "")
             if c]  # fmt: skip
    return replace(est, lower=float(lower), upper=float(upper), caveat="; ".join(notes))


def _interval(name, estimate, se, level, n, n_unl, what: str, caveat: str = "") -> Estimate:
    half = z_value(level) * se
    est = Estimate(name, float(estimate), float(estimate - half), float(estimate + half), level, n, n_unl,
                   caveat=caveat)  # fmt: skip
    return _bounded(est, what)


def kappa_parts(judge_1h: np.ndarray, human_1h: np.ndarray, weights=None):
    """Observed agreement and the two marginals of one-hot verdicts, weighted (bootstrap) or not.

    Args:
        judge_1h: (n, C) the judge's one-hot verdicts over C categories.
        human_1h: (n, C) the human's.
        weights: (n,) or (B, n) row weights (B resamples), or None for equal weights.

    Returns:
        (p_o, pJ, pH): p_o of shape () or (B,), pJ and pH of shape (C,) or (B, C).
    """
    w = np.ones(len(judge_1h)) if weights is None else np.asarray(weights, float)
    total = w.sum(-1)
    agree = (judge_1h * human_1h).sum(1)
    return w @ agree / total, (w @ judge_1h) / total[..., None], (w @ human_1h) / total[..., None]


def kappa_of(p_o, p_j, p_h):
    """Cohen's kappa (p_o - p_e)/(1 - p_e), p_e = pJ . pH (NaN where p_e = 1).

    Args:
        p_o: observed agreement, () or (B,).
        p_j: the judge's marginal, (C,) or (B, C).
        p_h: the human's marginal, (C,) or (B, C).

    Returns:
        Kappa, () or (B,), in [-1, 1].
    """
    p_e = (p_j * p_h).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p_e < 1 - 1e-12, (p_o - p_e) / (1 - p_e), np.nan)


def cohen_kappa(judge, human) -> float:
    """Cohen's kappa of two (n,) verdict arrays over the categories they hold (scikit-learn's value).

    Returns NaN when p_e = 1 (both always say the same single category).
    """
    categories = sorted(set(np.asarray(judge, dtype=object).tolist()) | set(np.asarray(human, dtype=object).tolist()))
    return float(kappa_of(*kappa_parts(one_hot(judge, categories), one_hot(human, categories))))


def _kappa_check(judge, human, n_unl: int, level: float, name: str):
    """(categories, not-estimable Estimate or None) of the labelled verdicts."""
    n = len(judge)
    if n < 2:
        return None, not_estimable(name, level, n, n_unl, f"{n} labelled rows (need 2)")
    categories = sorted(set(np.asarray(judge, dtype=object).tolist()) | set(np.asarray(human, dtype=object).tolist()))
    if len(categories) < 2:
        why = f"judge and human say {categories[0]!r} on all {n} labelled rows: p_e = 1, kappa undefined"
        return None, not_estimable(name, level, n, n_unl, why)
    return categories, None


def kappa_delta(judge, human, level: float, n_unlabelled: int = 0, clusters=None) -> Estimate:
    """Cohen's kappa of the labelled rows with a delta-method interval.

    IF_i = g_o (a_i - p_o) + g_e [pH . (J_i - pJ) + pJ . (H_i - pH)], a_i = [J_i = H_i],
    g_o = 1/(1 - p_e), g_e = (p_o - 1)/(1 - p_e)^2 (the gradient of kappa in p_o and p_e); se =
    sqrt(sum IF_i^2)/n, CR0 over ``clusters``.

    Args:
        judge: (n,) the judge's verdicts (A / B / tie) of the labelled rows.
        human: (n,) the human verdicts of the same rows.
        level: the interval's coverage, in (0, 1).
        n_unlabelled: unlabelled rows, only reported.
        clusters: (n,) cluster labels, or None.

    Returns:
        The :class:`Estimate` named :data:`DELTA` (kappa in [-1, 1]), or not estimable with why.
    """
    categories, bad = _kappa_check(judge, human, n_unlabelled, level, DELTA)
    if bad is not None:
        return bad
    if few := few_clusters(clusters):
        return not_estimable(DELTA, level, len(judge), n_unlabelled, few)
    j1, h1 = one_hot(judge, categories), one_hot(human, categories)
    p_o, p_j, p_h = kappa_parts(j1, h1)
    p_e = float(p_j @ p_h)
    if p_e >= 1 - 1e-12:
        return not_estimable(DELTA, level, len(j1), n_unlabelled, "p_e = 1, kappa undefined")
    g_o, g_e = 1 / (1 - p_e), (p_o - 1) / (1 - p_e) ** 2
    influence = g_o * ((j1 * h1).sum(1) - p_o) + g_e * ((j1 - p_j) @ p_h + (h1 - p_h) @ p_j)
    n = len(j1)
    se = np.sqrt((influence**2).sum()) / n if clusters is None else clustered_se([influence / n], [clusters])
    return _interval(DELTA, kappa_of(p_o, p_j, p_h), se, level, n, n_unlabelled, "its variance estimate is 0")


def cluster_weights(codes: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    """How often each cluster is drawn in each of ``size`` cluster-bootstrap resamples.

    Args:
        codes: (K,) the clusters' integer codes.
        rng: the numpy Generator that draws them.
        size: B, the resamples.

    Returns:
        (B, K) counts, each row summing to K.
    """
    k = int(codes.max()) + 1
    return rng.multinomial(k, np.full(k, 1.0 / k), size=size).astype(float)


def bootstrap_interval(stat, per_cluster: np.ndarray, level: float, resamples: int, seed: int) -> tuple:
    """(lower, upper, failed) percentile interval of ``stat`` over cluster resamples.

    Args:
        stat: (B, D) weighted cluster sums -> (B,) statistic (NaN where undefined).
        per_cluster: (K, D) the sums of each cluster's rows.
        level: the interval's coverage, in (0, 1).
        resamples: B, the number of resamples.
        seed: the numpy Generator's seed.

    Returns:
        The interval's bounds and the number of resamples where the statistic was undefined (left out).
    """
    rng, values = np.random.default_rng(seed), []
    codes = np.arange(len(per_cluster))
    for start in range(0, resamples, CHUNK):
        weights = cluster_weights(codes, rng, min(CHUNK, resamples - start))
        values.append(stat(weights @ per_cluster))
    values = np.concatenate(values)
    ok = values[np.isfinite(values)]
    if len(ok) < 2:
        return np.nan, np.nan, len(values) - len(ok)
    tail = (1 - level) / 2
    return float(np.quantile(ok, tail)), float(np.quantile(ok, 1 - tail)), len(values) - len(ok)


def _codes(clusters, n: int) -> np.ndarray:
    """(n,) integer cluster codes (one cluster per row when ``clusters`` is None)."""
    if clusters is None:
        return np.arange(n)
    return np.unique(np.asarray(clusters).astype(str), return_inverse=True)[1].ravel()


def _cluster_sums(rows: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """(K, D) sums of the (n, D) ``rows`` within each cluster code."""
    out = np.zeros((int(codes.max()) + 1, rows.shape[1]))
    np.add.at(out, codes, rows)
    return out


def _bootstrap_estimate(point, stat, per_cluster, level, resamples, seed, n, n_unl) -> Estimate:
    """The :data:`BOOTSTRAP` estimate of ``point``, or not estimable (fewer than 2 clusters, no interval)."""
    if len(per_cluster) < 2:
        return not_estimable(BOOTSTRAP, level, n, n_unl, f"its rows fall in {len(per_cluster)} cluster (need 2)")
    lower, upper, failed = bootstrap_interval(stat, per_cluster, level, resamples, seed)
    if not np.isfinite(lower):
        return not_estimable(BOOTSTRAP, level, n, n_unl, f"undefined in {failed} of {resamples} resamples")
    caveat = f"undefined in {failed} of {resamples} resamples (left out)" if failed else ""
    est = Estimate(BOOTSTRAP, float(point), lower, upper, level, n, n_unl, caveat=caveat)
    return _bounded(est, "every resample gives the same value")


def kappa_bootstrap(judge, human, level: float, clusters=None, *, resamples: int = 1000, seed: int = 0,
                    n_unlabelled: int = 0) -> Estimate:  # fmt: skip
    """Cohen's kappa of the labelled rows with a cluster-bootstrap percentile interval.

    Args:
        judge: (n,) the judge's verdicts of the labelled rows.
        human: (n,) the human verdicts.
        level: the interval's coverage, in (0, 1).
        clusters: (n,) cluster labels (whole clusters are resampled), or None (rows).
        resamples: the number of bootstrap resamples.
        seed: the numpy Generator's seed.
        n_unlabelled: unlabelled rows, only reported.

    Returns:
        The :class:`Estimate` named :data:`BOOTSTRAP`, or not estimable with why.
    """
    categories, bad = _kappa_check(judge, human, n_unlabelled, level, BOOTSTRAP)
    if bad is not None:
        return bad
    j1, h1 = one_hot(judge, categories), one_hot(human, categories)
    c = len(categories)
    rows = np.column_stack([np.ones(len(j1)), (j1 * h1).sum(1), j1, h1])
    per_cluster = _cluster_sums(rows, _codes(clusters, len(j1)))

    def stat(sums):
        total = sums[:, :1]
        return kappa_of(sums[:, 1] / total[:, 0], sums[:, 2 : 2 + c] / total, sums[:, 2 + c :] / total)

    point = cohen_kappa(judge, human)
    if not np.isfinite(point):
        return not_estimable(BOOTSTRAP, level, len(j1), n_unlabelled, "p_e = 1, kappa undefined")
    return _bootstrap_estimate(point, stat, per_cluster, level, resamples, seed, len(j1), n_unlabelled)


def kappa_ppi(judge, human, judge_unlabelled, level: float, clusters=None) -> Estimate:
    """Cohen's kappa with the judge rating the pool: its marginal from every row, the human's by PPI++.

    Estimand: the population kappa of judge and human, kappa = (p_o - p_e)/(1 - p_e), p_e = qJ . qH,
    under the assumption that the labelled rows are a random sample of all rows. Three estimated parts:

    - p_o = mean over labelled rows of [J = H] (labelled only: the judge cannot predict its own
      agreement, its prediction would be 1);
    - qJ = the judge's marginal over *every* row, labelled and pool (the pool is used here);
    - qH_c = PPI++ mean of [H = c] with the judge's [J = c] as prediction (Angelopoulos et al. 2023,
      Eq. 3; :func:`.estimators.ppi_mean`): lam mean_pool [J = c] + mean_lab([H = c] - lam [J = c]),
      one lam for all c so qH sums to 1 (the pool is used here too).

    Delta method over the joint: with the gradient g_o = 1/(1 - p_e), g_J = g_e qH, g_H = g_e qJ, g_e =
    (p_o - 1)/(1 - p_e)^2, each labelled row i and pool row j contribute (independent samples, each
    centred at its own mean)

        phi_i = [g_o (a_i - ā) + g_H . (r_i - r̄)] / n + g_J . (J_i - J̄_lab) / (n + N),  r_i = H_i - lam J_i,
        psi_j = [lam g_H / N + g_J / (n + N)] . (J_j - J̄_pool),

    se^2 = sum phi_i^2 + sum psi_j^2 (CR0 over clusters that may hold rows of both). Writing phi = u - lam v
    and psi = s + lam t, the variance is quadratic in lam and least at lam* = (u.v - s.t) / (v.v + t.t),
    clipped to [0, 1] (PPI++'s power tuning for this functional, arXiv:2311.01453 §6; gradient at the
    classical lam = 0 point): lam = 0 is the labelled-only human marginal.

    Args:
        judge: (n,) the judge's verdicts of the labelled rows.
        human: (n,) the human verdicts of the same rows.
        judge_unlabelled: (N,) the judge's verdicts of the pool.
        level: the interval's coverage, in (0, 1).
        clusters: (labelled (n,), pool (N,)) cluster labels, or None.

    Returns:
        The :class:`Estimate` named :data:`PPI_DELTA` (lam recorded), or not estimable with why.
    """
    n, big_n = len(judge), len(judge_unlabelled)
    categories, bad = _kappa_check(judge, human, big_n, level, PPI_DELTA)
    if bad is not None:
        return bad
    if big_n < 1:
        return not_estimable(PPI_DELTA, level, n, big_n, "no unlabelled row (the judge's pool verdicts are its input)")
    if few := few_clusters(None if clusters is None else np.concatenate([np.asarray(c) for c in clusters])):
        return not_estimable(PPI_DELTA, level, n, big_n, few)
    categories = sorted(set(categories) | set(np.asarray(judge_unlabelled, dtype=object).tolist()))
    j1, h1, ju = one_hot(judge, categories), one_hot(human, categories), one_hot(judge_unlabelled, categories)
    p_o, q_j = (j1 * h1).sum(1).mean(), np.concatenate([j1, ju]).mean(0)
    parts = _ppi_kappa_terms(j1, h1, ju, p_o, q_j, h1.mean(0))
    if parts is None:
        return not_estimable(PPI_DELTA, level, n, big_n, "p_e = 1, kappa undefined")
    u, v, s, t = parts
    lam = float(np.clip((u @ v - s @ t) / (v @ v + t @ t), 0.0, 1.0)) if (v @ v + t @ t) > 0 else 0.0
    q_h = np.array([ppi_mean(h1[:, c], j1[:, c], ju[:, c], level, lam=lam).estimate for c in range(len(categories))])
    parts = _ppi_kappa_terms(j1, h1, ju, p_o, q_j, q_h)
    if parts is None:
        return not_estimable(PPI_DELTA, level, n, big_n, "p_e = 1 at the PPI++ marginals, kappa undefined")
    u, v, s, t = parts
    phi, psi = u - lam * v, s + lam * t
    se = np.sqrt(phi @ phi + psi @ psi) if clusters is None else clustered_se([phi, psi], list(clusters))
    est = _interval(PPI_DELTA, kappa_of(p_o, q_j, q_h), se, level, n, big_n, "its variance estimate is 0")
    return replace(est, lam=lam) if est.estimable else est


def _ppi_kappa_terms(j1, h1, ju, p_o, q_j, q_h):
    """(u, v, s, t) of :func:`kappa_ppi`'s influence terms at (p_o, qJ, qH), or None where p_e = 1."""
    n, big_n = len(j1), len(ju)
    p_e = float(q_j @ q_h)
    if p_e >= 1 - 1e-12:
        return None
    g_o, g_e = 1 / (1 - p_e), (p_o - 1) / (1 - p_e) ** 2
    g_j, g_h = g_e * q_h, g_e * q_j
    agree = (j1 * h1).sum(1)
    u = (g_o * (agree - agree.mean()) + (h1 - h1.mean(0)) @ g_h) / n + (j1 - j1.mean(0)) @ g_j / (n + big_n)
    v = (j1 - j1.mean(0)) @ g_h / n
    s = (ju - ju.mean(0)) @ g_j / (n + big_n)
    t = (ju - ju.mean(0)) @ g_h / big_n
    return u, v, s, t


def coincidences(counts: np.ndarray) -> np.ndarray:
    """(U, C, C) each unit's coincidences o^u_ck = (#c #k - [c = k] #c)/(m_u - 1) from (U, C) value counts.

    Units with fewer than 2 values (not pairable) give 0.
    """
    counts = np.asarray(counts, float)
    m = counts.sum(1)
    scale = np.where(m >= 2, 1 / np.maximum(m - 1, 1), 0.0)
    outer = counts[:, :, None] * counts[:, None, :] - np.einsum("uc,ck->uck", counts, np.eye(counts.shape[1]))
    return outer * scale[:, None, None]


def alpha_of(o: np.ndarray) -> np.ndarray:
    """Nominal alpha = 1 - (n - 1)(n - tr o)/(n^2 - sum_c n_c^2) of coincidence matrices (..., C, C); NaN if D_e = 0."""
    n_c = o.sum(-1)
    n = n_c.sum(-1)
    expected = n**2 - (n_c**2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 1e-12, 1 - (n - 1) * (n - np.trace(o, axis1=-2, axis2=-1)) / expected, np.nan)


def krippendorff_alpha(counts) -> float:
    """Nominal Krippendorff's alpha of (U, C) value counts (NaN when the pairable values hold one category)."""
    return float(alpha_of(coincidences(counts).sum(0)))


def _alpha_check(counts, level: float, name: str):
    """(pairable mask, not-estimable Estimate or None) of (U, C) value counts."""
    counts = np.asarray(counts, float)
    pairable = counts.sum(1) >= 2
    n_pair, n_other = int(pairable.sum()), int((counts.sum(1) == 1).sum())
    if counts.shape[1] == 0 or n_pair == 0:
        return pairable, not_estimable(name, level, 0, n_other, "no pairable unit (no row has 2 ratings)")
    if n_pair < 2:
        return pairable, not_estimable(name, level, n_pair, n_other, f"{n_pair} pairable unit (need 2)")
    held = counts[pairable].sum(0) > 0
    if held.sum() < 2:
        why = "the pairable ratings hold one category only: D_e = 0, alpha undefined"
        return pairable, not_estimable(name, level, n_pair, n_other, why)
    return pairable, None


def alpha_delta(counts, level: float, clusters=None) -> Estimate:
    """Nominal alpha with a delta-method interval over the pairable units.

    alpha = 1 - (s - 1/U)(s - t)/(s^2 - q) as a function of the mean coincidences ō (module docstring);
    gradient dalpha/dō_ck = -[(s - t + (s - 1/U)(1 - [c = k])) Den - Nu (2 s - 2 n̄_c)] / Den^2 with
    Nu = (s - 1/U)(s - t), Den = s^2 - q, n̄_c = sum_k ō_ck; IF_u = grad . (o^u - ō), se = sqrt(sum IF^2)/U.

    Args:
        counts: (U, C) how many ratings of each category each unit has (units with < 2 are not pairable).
        level: the interval's coverage, in (0, 1).
        clusters: (U,) cluster labels, or None.

    Returns:
        The :class:`Estimate` named :data:`DELTA`; n_labelled = pairable units, n_unlabelled = units with 1 rating.
    """
    pairable, bad = _alpha_check(counts, level, DELTA)
    if bad is not None:
        return bad
    if few := few_clusters(None if clusters is None else np.asarray(clusters)[pairable]):
        return not_estimable(DELTA, level, int(pairable.sum()), int((np.asarray(counts).sum(1) == 1).sum()), few)
    o_u = coincidences(np.asarray(counts, float)[pairable])
    big_u, c = len(o_u), o_u.shape[1]
    o_bar = o_u.mean(0)
    n_bar = o_bar.sum(1)
    s, t, q, eps = o_bar.sum(), np.trace(o_bar), (n_bar**2).sum(), 1 / big_u
    nu, den = (s - eps) * (s - t), s**2 - q
    d_nu = (s - t) + (s - eps) * (1 - np.eye(c))
    d_den = 2 * s - 2 * n_bar[:, None] * np.ones((1, c))
    grad = -(d_nu * den - nu * d_den) / den**2
    influence = ((o_u - o_bar) * grad).sum((1, 2))
    n_other = int((np.asarray(counts).sum(1) == 1).sum())
    se = (np.sqrt((influence**2).sum()) / big_u if clusters is None else
          clustered_se([influence / big_u], [np.asarray(clusters)[pairable]]))  # fmt: skip
    point = alpha_of(o_u.sum(0))
    return _interval(DELTA, point, se, level, big_u, n_other, "its variance estimate is 0")


def alpha_bootstrap(counts, level: float, clusters=None, *, resamples: int = 1000, seed: int = 0) -> Estimate:
    """Nominal alpha with a cluster-bootstrap percentile interval over the pairable units.

    Args:
        counts: (U, C) ratings of each category per unit.
        level: the interval's coverage, in (0, 1).
        clusters: (U,) cluster labels (whole clusters resampled), or None (units).
        resamples: the number of bootstrap resamples.
        seed: the numpy Generator's seed.

    Returns:
        The :class:`Estimate` named :data:`BOOTSTRAP`, or not estimable with why.
    """
    pairable, bad = _alpha_check(counts, level, BOOTSTRAP)
    if bad is not None:
        return bad
    o_u = coincidences(np.asarray(counts, float)[pairable])
    c, n_other = o_u.shape[1], int((np.asarray(counts).sum(1) == 1).sum())
    codes = _codes(None if clusters is None else np.asarray(clusters)[pairable], len(o_u))
    per_cluster = _cluster_sums(o_u.reshape(len(o_u), c * c), codes)
    stat = lambda sums: alpha_of(sums.reshape(-1, c, c))  # noqa: E731
    point = alpha_of(o_u.sum(0))
    return _bootstrap_estimate(point, stat, per_cluster, level, resamples, seed, len(o_u), n_other)


# Why: alpha's expected disagreement pools the values of the pairable units, each rater weighted by the
# ratings it gives there; a pool row holds one rating (the judge's) and is no pairable unit, so using it
# would change what alpha measures, not only its precision (docs/guide/quantify.md says it at length).
ALPHA_NO_PPI = "alpha has no PPI form (a pool row, one rating, pairs with none; see kappa's)"
