"""Penalised (ridge) weighted logistic regression by Newton's method: the one such solver of the package.

Used by the Platt calibration map (:func:`puaudit_jax.audit.calibration.fit_platt`: intercept, slope and
ridge-shrunk group offsets) and by the Elkan-Noto PU scorer (:class:`puaudit_jax.audit.scorers.PULogisticScorer`).

Objective, for X (n, p), y (n,) in [0, 1], weights v (n,) >= 0 and ridge weights r (p,) >= 0::

    L(w) = sum_i v_i [log(1 + exp(x_i . w)) - y_i x_i . w] + 0.5 sum_j r_j w_j^2

Newton step: w <- w - H^{-1} g with g = X' (v * (p - y)) + r * w, p = sigmoid(X w), and
H = X' diag(v p (1 - p)) X + diag(r + jitter); ``jitter`` only keeps H invertible (a constant column,
separated data), it does not move the optimum. The loop stops after ``max_iter`` steps or when the
largest ``|step|`` is <= ``tol`` (Newton converges quadratically: typically 6-9 steps).

One jit-compiled ``lax.while_loop`` in float64. Rows are padded with zero rows of weight 0 to a power
of two (at least 64), so callers with many problem sizes share a handful of compiled shapes.

Not for Bradley-Terry: :mod:`puaudit_jax.consensus.bradley_terry` keeps its own Levenberg-damped
Newton on an autodiff objective (Davidson ties are not a logistic likelihood; the sum-to-zero gauge
is a non-diagonal penalty; steps are accepted only when the objective falls; it is vmapped over
bootstrap count matrices).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["penalised_logistic"]


@jax.jit
def _newton(X, y, weight, penalty, jitter, tol, max_iter):
    """Newton iterations from w = 0: X (n, p), y / weight (n,), penalty (p,) -> w (p,)."""

    def step(state):
        i, w, _ = state
        p = jax.nn.sigmoid(X @ w)
        grad = X.T @ (weight * (p - y)) + penalty * w
        hess = (X.T * (weight * p * (1 - p))) @ X + jnp.diag(penalty + jitter)
        delta = jnp.linalg.solve(hess, grad)
        return i + 1, w - delta, jnp.max(jnp.abs(delta))

    def going(state):
        i, _, size = state
        return (i < max_iter) & (size > tol)

    init = (jnp.asarray(0), jnp.zeros(X.shape[1], X.dtype), jnp.asarray(jnp.inf, X.dtype))
    return jax.lax.while_loop(going, step, init)[1]


def penalised_logistic(
    X, y, penalty, *, weight=None, jitter: float = 1e-9, tol: float = 1e-10, max_iter: int = 50
) -> np.ndarray:
    """Coefficients w (p,) float64 minimising the module's L(w).

    X (n, p) (include a column of ones for an intercept), y (n,) targets in [0, 1], penalty (p,)
    ridge weights (0 = unpenalised), weight (n,) row weights (default 1: a sum, not a mean, of the
    log-losses; pass 1/n for a mean).
    """
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    n = X.shape[0]
    weight = np.ones(n) if weight is None else np.asarray(weight, np.float64)
    # the next power of two >= n, at least 64 (probes.models.batching.bucket_length's rule; not imported
    # from there: that package imports flax, which the calibration maps do not need)
    pad = max(64, 1 << max(0, n - 1).bit_length()) - n
    X, y, weight = np.pad(X, ((0, pad), (0, 0))), np.pad(y, (0, pad)), np.pad(weight, (0, pad))
    with jax.enable_x64(True):  # numpy arrays and Python scalars straight in: the cheapest dispatch
        w = _newton(X, y, weight, np.asarray(penalty, np.float64), float(jitter), float(tol), int(max_iter))
        return np.asarray(w, np.float64)
