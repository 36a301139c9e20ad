"""Penalised (ridge) weighted logistic regression by Newton's method: the one such solver of the package.

Used by the Platt calibration map (:func:`puaudit_jax.audit.calibration.fit_platt`: intercept, slope and
ridge-shrunk group offsets) and by the Elkan-Noto PU scorer (:class:`puaudit_jax.audit.scorers.PULogisticScorer`).

Objective, for X (n, p), y (n,) in [0, 1], weights v (n,) >= 0 and ridge weights r (p,) >= 0::

    L(w) = sum_i v_i [log(1 + exp(x_i . w)) - y_i x_i . w] + 0.5 sum_j r_j w_j^2

Newton step: w <- w - H^{-1} g with g = X' (v * (p - y)) + r * w, p = sigmoid(X w), and
H = X' diag(v p (1 - p)) X + diag(r + jitter); ``jitter`` only keeps H invertible (a constant column,
separated data), it does not move the optimum. The loop stops after ``max_iter`` steps or when the
largest ``|step|`` is <= ``tol`` (Newton converges quadratically: typically 6-9 steps).

In numpy, float64. The problems are small (a warm MT-Bench audit's decision rule makes 212 fits of
604-755 rows x 46 columns) and need no compilation: against the same Newton as one jit-compiled
``lax.while_loop`` (the implementation until it was replaced) numpy is 1.3-1.5x faster per fit at
those sizes and saves each padded shape's compilation (0.3-0.6 s, 14 in an audit's first run); at
3,000 x 385 both take the same time. The coefficients agree with scikit-learn's newton-cholesky
to 4e-9 (``python -m experiments.benchmarks.logistic``, results/bench_logistic.json).

Not for Bradley-Terry: :mod:`puaudit_jax.consensus.bradley_terry` keeps its own Levenberg-damped
Newton on an autodiff objective (Davidson ties are not a logistic likelihood; the sum-to-zero gauge
is a non-diagonal penalty; steps are accepted only when the objective falls; it is vmapped over
bootstrap count matrices).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["penalised_logistic"]


def penalised_logistic(
    X, y, penalty, *, weight=None, jitter: float = 1e-9, tol: float = 1e-10, max_iter: int = 50
) -> np.ndarray:
    """Coefficients w (p,) float64 minimising the module's L(w), by Newton's method from w = 0.

    Args:
        X: the design, shape (n, p) (include a column of ones for an intercept).
        y: the targets, shape (n,), in [0, 1].
        penalty: ridge weights, shape (p,) (0 = unpenalised).
        weight: row weights, shape (n,) (None: 1, a sum, not a mean, of the log-losses; pass 1/n for a
            mean).
        jitter: added to the Hessian's diagonal (keeps it invertible).
        tol: stop when no coefficient moves more than this.
        max_iter: the most Newton steps.
    """
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    weight = np.ones(X.shape[0]) if weight is None else np.asarray(weight, np.float64)
    penalty = np.asarray(penalty, np.float64)
    ridge = np.diag(penalty + jitter)
    w = np.zeros(X.shape[1])
    for _ in range(max_iter):
        p = expit(X @ w)
        grad = X.T @ (weight * (p - y)) + penalty * w
        hess = (X.T * (weight * p * (1 - p))) @ X + ridge
        delta = np.linalg.solve(hess, grad)
        w = w - delta
        if np.max(np.abs(delta), initial=0.0) <= tol:
            break
    return w
