"""Agreement statistics and variance reduction for BoRP (BoRP, §4 and §5.3).

Functions::

    krippendorff_alpha(ratings (raters, units), level="interval"|"ordinal"|"nominal") -> float
        NaN = missing; equals the `krippendorff` package (its test reference) to 1e-12.
    pearson(x, y, confidence=0.95) -> Pearson(r, low, high, p_value, n)      Fisher-z interval
    cuped(y, x) -> Cuped(theta, rho, variance_reduction, adjusted)            theta = cov / var
    required_sample_size(std, delta, alpha=0.05, power=0.8) -> n per arm     two-sided z-test
    cuped_sample_size(std, delta, rho, ...) -> (n without, n with CUPED)

Krippendorff's alpha = 1 - D_o / D_e over the pairable values (units with >= 2 ratings):
D_o = (1/n) sum_u sum_{i != j in u} delta(x_i, x_j) / (m_u - 1), D_e = 1/(n(n-1)) sum over all
pairs of pairable values. Interval: delta = (c - k)^2, computed in O(N) from per-unit sums;
ordinal: delta(c, k) = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2 with n_g the pairable frequency of
value g (continuous values are their own categories); nominal: delta = [c != k].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = ["krippendorff_alpha", "pearson", "Pearson", "cuped", "Cuped", "required_sample_size", "cuped_sample_size"]


# ---------------------------------------------------------------------------------------------
# Krippendorff's alpha


def _pairable(ratings) -> tuple[np.ndarray, np.ndarray]:
    """(raters, units) with NaN -> (values (N,), unit index (N,)) of units with >= 2 ratings."""
    r = np.asarray(ratings, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"ratings must be (raters, units), got shape {r.shape}")
    if np.isinf(r).any():
        raise ValueError("ratings contain infinity (use NaN for missing)")
    ok = ~np.isnan(r)
    keep = ok.sum(axis=0) >= 2
    rr, uu = np.nonzero(ok[:, keep])
    return r[:, keep][rr, uu], uu


def krippendorff_alpha(ratings, level: str = "interval") -> float:
    """Krippendorff's alpha of a (raters, units) matrix, NaN = missing.

    level: "interval", "ordinal" or "nominal". Raises ValueError when fewer than two distinct
    pairable values exist (alpha undefined; the `krippendorff` package raises too).
    """
    x, unit = _pairable(ratings)
    if len(np.unique(x)) < 2:
        raise ValueError("krippendorff_alpha: fewer than two distinct values among units with >= 2 ratings")
    n = len(x)
    m = np.bincount(unit).astype(float)  # ratings per unit (all >= 2)
    if level == "interval":
        s1 = np.bincount(unit, weights=x)
        s2 = np.bincount(unit, weights=x * x)
        d_o = np.sum((2 * m * s2 - 2 * s1**2) / (m - 1)) / n
        d_e = (2 * n * np.sum(x * x) - 2 * np.sum(x) ** 2) / (n * (n - 1))
        return float(1 - d_o / d_e)
    if level not in ("ordinal", "nominal"):
        raise ValueError(f"level must be 'interval', 'ordinal' or 'nominal', not {level!r}")
    values, code = np.unique(x, return_inverse=True)
    v = len(values)
    counts = np.zeros((len(m), v))
    np.add.at(counts, (unit, code), 1.0)
    # coincidence matrix o_ck = sum_u (counts_uc counts_uk - [c = k] counts_uc) / (m_u - 1)
    scaled = counts / (m - 1)[:, None]
    o = scaled.T @ counts - np.diag(scaled.sum(axis=0))
    n_c = o.sum(axis=1)
    if level == "nominal":
        delta = 1.0 - np.eye(v)
    else:
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        lo, hi = np.minimum.outer(np.arange(v), np.arange(v)), np.maximum.outer(np.arange(v), np.arange(v))
        delta = (cum[hi + 1] - cum[lo] - (n_c[lo] + n_c[hi]) / 2) ** 2
    d_o = np.sum(o * delta)
    d_e = np.sum(np.outer(n_c, n_c) * delta) / (n - 1)
    return float(1 - d_o / d_e)


# ---------------------------------------------------------------------------------------------
# Pearson with a confidence interval


@dataclass(frozen=True)
class Pearson:
    """Pearson's r with a Fisher-z confidence interval [low, high] and the two-sided p-value."""

    r: float
    low: float
    high: float
    p_value: float
    n: int
    confidence: float


def pearson(x, y, confidence: float = 0.95) -> Pearson:
    """Pearson correlation of two arrays (NaN pairs dropped); CI from z = atanh(r) +- q / sqrt(n - 3).

    Args:
        x: the first variable, shape (n,) (raveled).
        y: the second variable, shape (n,).
        confidence: coverage of the interval, in (0, 1).

    Returns:
        The :class:`Pearson` (r, interval, two-sided p value, pairs used); the interval is [-1, 1]
        with 3 pairs.

    Raises:
        ValueError: x and y of different lengths, fewer than 3 pairs, or a constant input.
    """
    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.shape} vs {y.shape}")
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    n = len(x)
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        raise ValueError(f"pearson needs >= 3 pairs and non-constant inputs (n = {n})")
    res = sps.pearsonr(x, y)
    r = float(res.statistic)
    if n > 3:
        z, q = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15)), sps.norm.ppf(0.5 + confidence / 2)
        low, high = float(np.tanh(z - q / np.sqrt(n - 3))), float(np.tanh(z + q / np.sqrt(n - 3)))
    else:
        low, high = -1.0, 1.0
    return Pearson(r=r, low=low, high=high, p_value=float(res.pvalue), n=n, confidence=confidence)


# ---------------------------------------------------------------------------------------------
# CUPED (Deng et al. 2013), PUAudit §5.3


@dataclass(frozen=True)
class Cuped:
    """CUPED adjustment of a metric y by a pre-experiment covariate x.

    theta = cov(x, y) / var(x); adjusted = y - theta (x - mean x) (same mean as y);
    variance_reduction = 1 - var(adjusted) / var(y) (= rho^2 in sample terms).
    """

    theta: float
    rho: float
    variance_reduction: float
    adjusted: np.ndarray


def cuped(y, x) -> Cuped:
    """y, x: (n,) metric and covariate of the same units (pool both arms of an A/B test)."""
    y, x = np.asarray(y, float).ravel(), np.asarray(x, float).ravel()
    if y.shape != x.shape or len(y) < 2:
        raise ValueError(f"cuped needs two equal-length arrays with >= 2 units: {y.shape}, {x.shape}")
    if np.isnan(y).any() or np.isnan(x).any():
        raise ValueError("cuped: NaN in y or x")
    vx = np.var(x, ddof=1)
    if vx == 0:
        raise ValueError("cuped: the covariate is constant")
    cov = np.cov(x, y, ddof=1)[0, 1]
    theta = cov / vx
    adjusted = y - theta * (x - x.mean())
    vy = np.var(y, ddof=1)
    rho = cov / np.sqrt(vx * vy) if vy > 0 else 0.0
    vr = 1 - np.var(adjusted, ddof=1) / vy if vy > 0 else 0.0
    return Cuped(theta=float(theta), rho=float(rho), variance_reduction=float(vr), adjusted=adjusted)


def required_sample_size(std: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Units per arm for a two-sided two-sample z-test to detect an absolute difference ``delta``.

    n = 2 (z_{1-alpha/2} + z_{power})^2 std^2 / delta^2, rounded up.

    Args:
        std: the metric's standard deviation (> 0), in its units.
        delta: the difference to detect (!= 0), in the metric's units.
        alpha: the test's two-sided level, in (0, 1).
        power: the probability of detecting ``delta``, in (0, 1).

    Returns:
        Units per arm.

    Raises:
        ValueError: ``std`` <= 0 or ``delta`` == 0.
    """
    if std <= 0 or delta == 0:
        raise ValueError("std must be > 0 and delta != 0")
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return int(np.ceil(2 * z**2 * std**2 / delta**2))


def cuped_sample_size(std: float, delta: float, rho: float, alpha: float = 0.05, power: float = 0.8) -> tuple[int, int]:
    """(units per arm without, with CUPED): CUPED shrinks the variance by the factor 1 - rho^2.

    Args:
        std: the metric's standard deviation (> 0), in its units.
        delta: the difference to detect (!= 0), in the metric's units.
        rho: the correlation of the metric with its pre-period covariate, in [-1, 1].
        alpha: the test's two-sided level, in (0, 1).
        power: the probability of detecting ``delta``, in (0, 1).

    Returns:
        (units per arm without CUPED, with CUPED), as :func:`required_sample_size`.
    """
    return (
        required_sample_size(std, delta, alpha, power),
        required_sample_size(std * np.sqrt(1 - rho**2), delta, alpha, power),
    )
