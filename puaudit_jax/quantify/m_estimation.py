"""Prediction-powered M-estimation for logistic-type losses: the Bradley-Terry leaderboard's engine.

PPI++ (Angelopoulos, Duchi & Zrnic, arXiv:2311.01453, §3 and Algorithm 1), the engine of
:mod:`.leaderboard`.

Rows i = 1..R carry covariates x_i (d,), a prediction yhat_i in [0, 1] and, on labelled rows, an
outcome y_i in [0, 1] (a tie is 1/2: the logistic loss is then the expected loss of a fair coin).
Two masks say which rows are labelled (n of them) and unlabelled (N); a row in neither is ignored,
which is how the vectorised coverage study draws its splits without reshaping anything. With the
logistic loss l(theta; x, y) = log(1 + exp(x.theta)) - y x.theta, PPI++ minimises

    L_lam(theta) = lam/N sum_unl l(theta; x, yhat) + 1/n sum_lab [l(theta; x, y) - lam l(theta; x, yhat)]

(convex for lam in [0, 1]: its Hessian is lam H_unl + (1 - lam) H_lab), with the covariance

    Sigma = H^-1 (V_lab / n + V_unl / N) H^-1,  V_lab = cov(g - lam ghat) over labelled rows,
    V_unl = cov(lam ghat) over unlabelled rows,  g = x (sigmoid(x.theta) - y), ghat the same with yhat,

H the Hessian of the logistic loss averaged over labelled and unlabelled rows (lam = 0: labelled
rows only), lam chosen to minimise tr Sigma and clipped to [0, 1]. Everything follows
``ppi_py.ppi_logistic_ci`` step by step (lam from the lam = 1 fit, refit, lam again, refit), so the
two agree to 1e-6 (tests/quantify/test_leaderboard.py). ``lam = 0`` with no unlabelled rows is the
classical logistic regression with a sandwich covariance (``ppi_py.classical_logistic_ci``).

With ``clusters`` (an int code per row), V_lab / n + V_unl / N is replaced by the cluster-robust sum
over clusters of (sum of the rows' centred influence terms)^2 (CR0), as :func:`.estimators.clustered_se`
does for means.

All functions are pure JAX in float64 with fixed shapes: :func:`ppi_logistic` vmaps over masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from puaudit_runtime.jit import jit

NEWTON_STEPS = 40
DIVERGED = 30.0  # |theta| in nats: odds of e^30 mean the objective has no finite minimum
MAX_STEP = 4.0  # largest coordinate change of one Newton step: a near-separable start cannot overshoot


def _weights(lab, unl, lam):
    """Per-row weights of the loss on y and on yhat: (w_y, w_yhat), each (R,)."""
    n, big_n = lab.sum(), jnp.maximum(unl.sum(), 1.0)
    return lab / n, lam * unl / big_n - lam * lab / n


def _fit(X, y, yhat, lab, unl, lam):
    """The argmin of L_lam by damped Newton from theta = 0 -> (theta (d,), converged)."""
    return _newton(X, y, yhat, *_weights(lab, unl, lam))


def _newton(X, y, yhat, w_y, w_hat, theta0=None):
    """The argmin of sum_i w_y,i l(theta; x_i, y_i) + w_hat,i l(theta; x_i, yhat_i) -> (theta, converged).

    Damped Newton from theta = 0 (or ``theta0``, a warm start): at most NEWTON_STEPS steps, stopping once
    the largest step is below 1e-10 (max(1, |theta|)) or |theta| passes DIVERGED. The per-row curvature
    w_y + w_hat must be >= 0.
    """
    curvature = w_y + w_hat  # PPI++: lam/N on unlabelled rows, (1 - lam)/n on labelled ones

    def step(state):
        i, theta, _ = state
        mu = jax.nn.sigmoid(X @ theta)
        grad = X.T @ (w_y * (mu - y) + w_hat * (mu - yhat))
        hess = (X.T * (curvature * mu * (1 - mu))) @ X
        delta = jnp.linalg.solve(hess + 1e-12 * jnp.eye(X.shape[1]), grad)
        delta = delta * jnp.minimum(1.0, MAX_STEP / jnp.maximum(jnp.max(jnp.abs(delta)), 1e-300))
        return i + 1, theta - delta, jnp.max(jnp.abs(delta)) / jnp.maximum(1.0, jnp.max(jnp.abs(theta)))

    def going(state):
        i, theta, size = state  # |theta| > DIVERGED: an unbounded objective (a model never lost), give up
        return (i < NEWTON_STEPS) & (size > 1e-10) & (jnp.max(jnp.abs(theta)) < DIVERGED)

    start = jnp.zeros(X.shape[1], X.dtype) if theta0 is None else jnp.asarray(theta0, X.dtype)
    init = (jnp.asarray(0), start, jnp.asarray(jnp.inf, X.dtype))
    _, theta, size = jax.lax.while_loop(going, step, init)
    return theta, (size <= 1e-10) & (jnp.max(jnp.abs(theta)) < DIVERGED)


def _stats(theta, X, y, yhat, lab, unl, pooled):
    """Per-row gradients g (labelled rows' true outcomes) and ghat (predictions), and H^-1."""
    mu = jax.nn.sigmoid(X @ theta)
    g, ghat = X * (mu - y)[:, None], X * (mu - yhat)[:, None]
    rows = jnp.where(pooled, lab + unl, lab)
    hess = (X.T * (rows * mu * (1 - mu))) @ X / rows.sum()
    return g, ghat, jnp.linalg.inv(hess)


def _masked_cov(z, mask):
    """Covariance (ddof 1) of the rows of z (R, d) where mask is 1."""
    count = mask.sum()
    centred = (z - (mask @ z) / count) * mask[:, None]
    return centred.T @ centred / (count - 1)


def _lambda(g, ghat, inv_hess, lab, unl):
    """PPI++'s tr-Sigma-minimising lam, clipped to [0, 1] (ppi_py ``_calc_lam_glm``, clip=True)."""
    n, big_n = lab.sum(), unl.sum()
    gc = (g - (lab @ g) / n) * lab[:, None]
    hc = (ghat - (lab @ ghat) / n) * lab[:, None]
    cov = (gc.T @ hc + hc.T @ gc) / n
    var_hat = _masked_cov(ghat, lab + unl)
    num = jnp.trace(inv_hess @ cov @ inv_hess)
    den = 2 * (1 + n / big_n) * jnp.trace(inv_hess @ var_hat @ inv_hess)
    return jnp.clip(jnp.where(den > 0, num / den, 0.0), 0.0, 1.0)


def _covariance(g, ghat, inv_hess, lab, unl, lam, clusters, n_clusters):
    """Sigma (d, d) of the module docstring (cluster-robust when n_clusters > 0)."""
    n, big_n = lab.sum(), jnp.maximum(unl.sum(), 1.0)
    rect, imputed = g - lam * ghat, lam * ghat
    if n_clusters == 0:
        middle = _masked_cov(rect, lab) / n + jnp.where(unl.sum() > 1, _masked_cov(imputed, unl), 0.0) / big_n
    else:
        terms = (rect - (lab @ rect) / n) * (lab / n)[:, None] + (imputed - (unl @ imputed) / big_n) * (unl / big_n)[
            :, None
        ]
        sums = jax.ops.segment_sum(terms, clusters, num_segments=n_clusters)
        middle = sums.T @ sums
    return inv_hess @ middle @ inv_hess


@dataclass(frozen=True)
class MFit:
    """A PPI++ logistic fit: theta (d,), its covariance (d, d), the lam used and whether it converged.

    Attributes:
        theta: (d,) float64 coefficients (logit scale).
        cov: (d, d) float64 covariance of theta.
        lam: the lam used, in [0, 1].
        converged: whether every Newton solve converged.
    """

    theta: np.ndarray
    cov: np.ndarray
    lam: float
    converged: bool


def _ppi_logistic(X, y, yhat, lab, unl, lam, clusters, n_clusters):
    """The PPI++ fit (theta, cov, lam, converged); lam < 0 means "tune lam" (ppi_py's sequence of fits).

    Where the lam = 1 objective is unbounded (a direction only labelled rows inform, e.g. a model
    compared in labelled rows only: lam = 1 leaves its loss linear), ppi_py's pilot fit diverges;
    we then take the classical fit (lam = 0) as the pilot and clip lam to [0, 0.99].
    """
    tune = lam < 0

    def tuned(theta, top):
        return jnp.minimum(_lambda(*_stats(theta, X, y, yhat, lab, unl, True), lab, unl), top)

    theta1, ok1 = _fit(X, y, yhat, lab, unl, jnp.where(tune, 1.0, lam))
    theta0, _ = _fit(X, y, yhat, lab, unl, 0.0)
    top = jnp.where(ok1, 1.0, 0.99)
    lam1 = jnp.where(tune, tuned(jnp.where(ok1, theta1, theta0), top), lam)
    theta2, ok2 = _fit(X, y, yhat, lab, unl, lam1)
    lam2 = jnp.where(tune, tuned(theta2, top), lam)
    theta, ok3 = _fit(X, y, yhat, lab, unl, lam2)
    g, ghat, inv_hess = _stats(theta, X, y, yhat, lab, unl, lam2 != 0)
    cov = _covariance(g, ghat, inv_hess, lab, unl, lam2, clusters, n_clusters)
    return theta, cov, lam2, jnp.where(tune, ok2, ok1) & ok3


_ppi_logistic_jit = jit(_ppi_logistic, static_argnames="n_clusters")
_newton_jit = jit(_newton)
_ppi_logistic_vmap = jit(
    jax.vmap(_ppi_logistic, in_axes=(None, None, 0, 0, 0, None, None, None)), static_argnames="n_clusters"
)


def _cluster_codes(clusters, rows: int):
    if clusters is None:
        return np.zeros(rows, np.int32), 0
    _, codes = np.unique(np.asarray(clusters).astype(str), return_inverse=True)
    return codes.astype(np.int32), int(codes.max()) + 1


def ppi_logistic(X, y, yhat, labelled, unlabelled, *, lam: float | None = None, clusters=None) -> MFit:
    """PPI++ logistic regression (module docstring) on R rows.

    Args:
        X: (R, d) covariates.
        y: (R,) outcomes in [0, 1] (read on labelled rows only; a tie is 1/2).
        yhat: (R,) predictions in [0, 1].
        labelled: (R,) bool mask of the labelled rows.
        unlabelled: (R,) bool mask of the unlabelled rows (disjoint from ``labelled``).
        lam: None tunes lam; ``lam=0`` is the classical fit on the labelled rows.
        clusters: (R,) cluster labels for a cluster-robust covariance, or None.

    Returns:
        The :class:`MFit` (float64).
    """
    codes, k = _cluster_codes(clusters, len(y))
    with jax.enable_x64(True):
        out = _ppi_logistic_jit(
            *_as_f64(X, y, yhat, labelled, unlabelled), -1.0 if lam is None else float(lam), codes, k
        )
        theta, cov, used, ok = (np.asarray(v) for v in out)
    return MFit(theta, cov, float(used), bool(ok))


def logistic_refit(X, y, yhat, labelled, unlabelled, lam: float, theta0) -> tuple[np.ndarray, bool]:
    """The argmin of L_lam (module docstring) at a fixed ``lam``, by damped Newton from ``theta0``.

    One Newton solve warm-started near the answer (no lam tuning, no covariance): the refits of
    :mod:`.robustness`, which drop a few rows from a fit and ask where its optimum moved (L_lam is convex
    for lam in [0, 1], so the start changes the path, not the answer).

    Args:
        X: (R, d) covariates.
        y: (R,) outcomes in [0, 1] (read on labelled rows).
        yhat: (R,) predictions in [0, 1].
        labelled: (R,) bool mask of the labelled rows.
        unlabelled: (R,) bool mask of the unlabelled rows.
        lam: the lam, in [0, 1] (0 with no unlabelled row: the classical fit).
        theta0: (d,) the start (e.g. the fit on every row).

    Returns:
        (theta (d,) float64, converged).
    """
    with jax.enable_x64(True):
        X, y, yhat, lab, unl = _as_f64(X, y, yhat, labelled, unlabelled)
        theta, ok = _newton_jit(X, y, yhat, *_weights(lab, unl, float(lam)), np.asarray(theta0, np.float64))
        return np.asarray(theta), bool(ok)


def ppi_logistic_splits(X, y, yhat, labelled, unlabelled, *, lam: float | None = None, clusters=None):
    """:func:`ppi_logistic` for S splits at once (one compiled, vmapped call).

    Args:
        X: (R, d) covariates.
        y: (R,) outcomes in [0, 1].
        yhat: (R,) or (S, R) predictions.
        labelled: (S, R) bool masks of the labelled rows.
        unlabelled: (S, R) bool masks of the unlabelled rows.
        lam: None tunes lam per split; a number fixes it.
        clusters: (R,) cluster labels, or None.

    Returns:
        (theta (S, d), cov (S, d, d), lam (S,), converged (S,)) numpy arrays.
    """
    codes, k = _cluster_codes(clusters, len(y))
    yhat = np.broadcast_to(np.asarray(yhat, float), np.shape(labelled))
    with jax.enable_x64(True):
        out = _ppi_logistic_vmap(
            *_as_f64(X, y, yhat, labelled, unlabelled), -1.0 if lam is None else float(lam), codes, k
        )
        return tuple(np.asarray(v) for v in out)


def _as_f64(X, y, yhat, labelled, unlabelled):
    """Float64 arrays; NaN outcomes / predictions (rows outside a mask) become 0: their weight is 0."""
    y, yhat = (np.nan_to_num(np.asarray(a, np.float64)) for a in (y, yhat))
    return np.asarray(X, np.float64), y, yhat, np.asarray(labelled, np.float64), np.asarray(unlabelled, np.float64)


def _active_parts(theta, X, y, yhat, w):
    """Per-row a_i = w_i g_i and b_i = (1 - w_i) ghat_i (psi = a + lam b), and the Hessian's inverse."""
    mu = 1 / (1 + np.exp(-(X @ theta)))
    a = (w * (mu - y))[:, None] * X
    b = ((1 - w) * (mu - yhat))[:, None] * X
    hess = (X.T * (mu * (1 - mu))) @ X / len(X)
    return a, b, np.linalg.inv(hess)


def _active_lambda(a, b, inv_hess) -> float:
    """The lam in [0, 1] minimising tr(H^-1 cov(a + lam b) H^-1)."""
    ac, bc = a - a.mean(0), b - b.mean(0)
    cross = (ac.T @ bc + bc.T @ ac) / (2 * len(a))
    den = np.trace(inv_hess @ (bc.T @ bc / len(b)) @ inv_hess)
    return float(np.clip(-np.trace(inv_hess @ cross @ inv_hess) / den, 0.0, 1.0)) if den > 0 else 0.0


def ppi_logistic_active(X, y, yhat, labelled, probability, *, lam: float | None = None, clusters=None) -> MFit:
    """PPI++ logistic regression when the labels were drawn with known probabilities (active inference).

    Zrnic & Candes 2024 (arXiv:2403.03208, §4) for M-estimators: over the R rows, with w_i = xi_i / pi_i
    (1 / the probability the row was labelled, 0 where it was not),

        L(theta) = 1/R sum_i [lam l(theta; x_i, yhat_i) + w_i (l(theta; x_i, y_i) - lam l(theta; x_i, yhat_i))],

    whose per-row influence H^-1 psi_i, psi_i = w_i g_i + lam (1 - w_i) ghat_i, is i.i.d.: Sigma =
    H^-1 cov(psi) H^-1 / R (cluster-robust with ``clusters``). lam minimises tr Sigma (a pilot fit at
    lam = 0, then once more), clipped to [0, 1]; ``lam=0`` is the inverse-probability-weighted
    classical fit. With uniform probabilities n / R it is :func:`ppi_logistic` with every row unlabelled.

    Args:
        X: (R, d) covariates.
        y: (R,) outcomes in [0, 1] (read on labelled rows).
        yhat: (R,) predictions in [0, 1].
        labelled: (R,) bool mask of the labelled rows.
        probability: (R,) the probability each labelled row was labelled with, in (0, 1] (read on
            labelled rows).
        lam: None tunes lam; a number fixes it.
        clusters: (R,) cluster labels for a cluster-robust covariance, or None.

    Returns:
        The :class:`MFit` (float64).
    """
    lab = np.asarray(labelled, bool)
    w = np.where(lab, 1.0 / np.where(lab, np.asarray(probability, np.float64), 1.0), 0.0)
    X, y, yhat = np.asarray(X, np.float64), np.nan_to_num(np.asarray(y, np.float64)), np.asarray(yhat, np.float64)
    rows = len(X)

    def fit(lam_):
        with jax.enable_x64(True):
            theta, ok = _newton_jit(X, y, yhat, w / rows, lam_ * (1 - w) / rows)
            return np.asarray(theta), bool(ok)

    theta, ok = fit(0.0 if lam is None else float(lam))
    used = 0.0 if lam is None else float(lam)
    for _ in range(2 if lam is None else 0):
        used = _active_lambda(*_active_parts(theta, X, y, yhat, w))
        theta, ok2 = fit(used)
        ok = ok and ok2
    a, b, inv_hess = _active_parts(theta, X, y, yhat, w)
    psi = a + used * b
    if clusters is None:
        middle = np.cov(psi, rowvar=False, bias=True).reshape(X.shape[1], X.shape[1]) / rows
    else:
        codes, k = _cluster_codes(clusters, rows)
        sums = np.zeros((k, X.shape[1]))
        np.add.at(sums, codes, (psi - psi.mean(0)) / rows)
        middle = sums.T @ sums
    return MFit(theta, inv_hess @ middle @ inv_hess, used, ok)
