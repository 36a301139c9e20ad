"""Prediction-powered p-values: the pool's predictions tighten the test of each threshold.

Semi-supervised risk control (Einbinder, Ringel & Romano, "Semi-Supervised Risk Control via
Prediction-Powered Inference", arXiv 2412.11174): the error rate of the rows with q >= t is estimated
by PPI++ (Angelopoulos, Duchi & Zrnic 2023) from the pool's predicted errors f = 1 - q (N rows, no
label) and the calibration rows' observed errors l (n rows):

    r = lam mean_pool(f) + mean_cal(l - lam f),   se^2 = lam^2 var_pool(f) / N + var_cal(l - lam f) / n,

lam = cov(l, f) / ((1 + n / N) var(f)) clipped to [0, 1] (0: the calibration rows' error rate alone).
H_t (agreement below A, i.e. error rate above 1 - A) gets the one-sided normal p-value
Phi((r - (1 - A)) / se). When the calibrated confidence q predicts the errors well, var(l - lam f) is
far below var(l) and the large pool pins down the rest: thresholds with few calibration rows become
testable. The p-value is asymptotic (a central limit theorem), so a threshold with fewer than
``MIN_CLT`` calibration rows, or with no error among them, keeps the exact binomial p-value; validity is
measured by simulation and on real splits (``experiments/reproductions/guarantee.py``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from .testing import Curve, binomial_curve

MIN_CLT = 30  # fewer calibration rows above a threshold: the exact binomial p-value


def _sums(q: np.ndarray, weights: dict, grid: np.ndarray) -> dict:
    """Per threshold of ``grid``, the sums over rows with q >= t of each array of ``weights``."""
    order = np.argsort(-q, kind="stable")
    above = np.searchsorted(-q[order], -grid, side="right")
    return {k: np.concatenate([[0.0], np.cumsum(np.asarray(v, float)[order])])[above] for k, v in weights.items()}


def ppi_curve(q_cal: np.ndarray, correct: np.ndarray, q_pool: np.ndarray, agreement: float) -> Curve:
    """The :class:`~.testing.Curve` with prediction-powered p-values (module docstring).

    Args:
        q_cal: (n_cal,) calibrated confidence of the calibration rows' final verdicts (-inf: never selected).
        correct: (n_cal,) bool, the final verdict agrees with the human one.
        q_pool: (n_U,) calibrated confidence of the pool rows' final verdicts.
        agreement: A in (0, 1).
    """
    exact = binomial_curve(q_cal, correct, q_pool, agreement)
    q_cal, q_pool = np.asarray(q_cal, float), np.asarray(q_pool, float)
    err = (~np.asarray(correct, bool)).astype(float)
    f_cal, f_pool = np.where(np.isfinite(q_cal), 1 - q_cal, 0.0), np.where(np.isfinite(q_pool), 1 - q_pool, 0.0)
    c = _sums(q_cal, {"n": np.ones(len(q_cal)), "l": err, "f": f_cal, "ff": f_cal**2, "lf": err * f_cal}, exact.grid)
    u = _sums(q_pool, {"n": np.ones(len(q_pool)), "f": f_pool, "ff": f_pool**2}, exact.grid)
    n, big_n = np.maximum(c["n"], 1), np.maximum(u["n"], 1)
    mean_l, mean_fc, mean_fu = c["l"] / n, c["f"] / n, u["f"] / big_n
    var_l, var_fc = mean_l - mean_l**2, c["ff"] / n - mean_fc**2
    var_fu, cov = u["ff"] / big_n - mean_fu**2, c["lf"] / n - mean_l * mean_fc
    var_f = (c["ff"] + u["ff"]) / (n + big_n) - ((c["f"] + u["f"]) / (n + big_n)) ** 2
    lam = np.clip(np.divide(cov, (1 + n / big_n) * var_f, out=np.zeros_like(cov), where=var_f > 0), 0.0, 1.0)
    estimate = lam * mean_fu + mean_l - lam * mean_fc
    var_rect = np.maximum(var_l - 2 * lam * cov + lam**2 * var_fc, 0.0)
    se = np.sqrt(lam**2 * np.maximum(var_fu, 0.0) / big_n + var_rect / n)
    z = np.divide(estimate - (1 - agreement), se, out=np.full_like(se, np.inf), where=se > 0)
    asymptotic = (exact.n >= MIN_CLT) & (exact.errors > 0) & (se > 0)
    return Curve(exact.grid, exact.coverage, exact.n, exact.errors, np.where(asymptotic, ndtr(z), exact.p_value))
