"""Partial least squares regression (NIPALS PLS2, PLS1 as its special case) in JAX.

    PLSRegression(n_components=2, scale=True, max_iter=500, tol=1e-6, dtype=None)
        .fit(X (n, d), y (n,) or (n, q)) -> self
        .predict(X (m, d)) -> (m,) or (m, q)          on y's scale
        .transform(X (m, d)[, y]) -> x scores (m, n_components) [, y scores]
        .fit_transform, .score (R^2), .get_params / .set_params (sklearn.clone works)

Semantics are scikit-learn's `PLSRegression` (deflation_mode="regression", mode "A", algorithm
"nipals"): X and y are centred and, with `scale=True`, divided by their ddof=1 standard deviations;
each component takes the first singular vector pair of the residual cross-covariance X_k^T Y_k by
sklearn's power method (same start, the first non-zero y column; same stopping rule
|w_i - w_{i-1}|^2 < tol; one step for a single target), the same sign convention (largest |x weight|
positive), X and Y deflated on the x scores. Fitted attributes have sklearn's names and shapes:
x_weights_ (d, k), y_weights_ (q, k), x_loadings_ (d, k), y_loadings_ (q, k), x_scores_ (n, k),
y_scores_ (n, k), x_rotations_ (d, k), y_rotations_ (q, k), coef_ (q, d), intercept_ (q,), n_iter_.
On well-posed problems the results equal sklearn's to ~1e-10 in float64.

How it is fast. Deflation is implicit: the standardised X (written once) is never modified.
With T, P the scores and loadings found so far, X_k = X - T P^T, so
    X_k w = X w - T (P^T w)   and   X_k^T t = X^T t - P (T^T t),
and the residual cross-covariance M_k = X_k^T Y_k (d, q) is updated as M_{k+1} = M_k - (X_k^T t) c^T.
The power method then needs only M_k (its iterate is w <- normalise(M_k M_k^T w), which is exactly
sklearn's iterate up to positive scalars). Since t = X_k w is row-wise, X^T t is accumulated block
by block while each row block of X is still in cache: every component costs one pass over X
(memory-bound), against about eight for sklearn's explicit deflation. The whole fit is one `jax.jit` with a
`lax.fori_loop` over components and a `lax.while_loop` for the power method; the component
arrays have a static capacity (a multiple of 8), so one compilation serves n_components 1..8 for a
given (n, d, q). Rotations, predict and transform are small or single matmuls, done in numpy.

Precision: float64 when JAX's x64 mode is on (`jax.enable_x64(True)`), else float32; `dtype`
overrides (float64 needs x64).

Bad input and degenerate cases (documented behaviour):
* NaN / inf in X or y, n < 2, mismatched lengths, n_components < 1 or > min(n, d): ValueError
  (the last with sklearn's message "`n_components` upper bound is ...").
* Constant X columns: standard deviation taken as 1 (sklearn), and the centred column is set to
  exactly 0, so the column gets weight, loading and coefficient 0. (sklearn computes the centred
  column as x - mean(x), which can be a few ulps instead of 0; then its weights are ~1e-30.)
  Constant y columns: the same; their coefficients are 0 and predictions equal the mean.
* The y residual becomes constant (all |entries| < eps, e.g. y constant or perfectly fitted):
  the remaining components are zero and a UserWarning says at which component (as sklearn).
* n_components above the numerical rank of the residual (||X_k w|| <= 100 eps ||X||_F, or
  ||M_k|| <= 100 eps ||M_0||): the remaining components are zero and a UserWarning names the
  component. sklearn instead fits noise directions there and its coef_ blows up (~1e13); here the
  predictions equal those of the model with the rank's number of components.
* The power method hits max_iter: warning (sklearn's ConvergenceWarning text).
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from puaudit_runtime.mesh import data_axes, pad_to_multiple

__all__ = ["PLSRegression", "pls_fit"]


# ---------------------------------------------------------------------------------------------
# The jitted fit

_OUTPUTS = (
    "x_mean",
    "x_std",
    "y_mean",
    "y_std",
    "x_weights",
    "y_weights",
    "x_loadings",
    "y_loadings",
    "x_scores",
    "y_scores",
    "n_iter",
    "stop",
    "stop_reason",
)
_ROW_OUTPUTS = ("x_scores", "y_scores")


def _across(op, axes):
    """The map ``x -> op(x, axes)`` for a collective over the mesh axes that split the rows.

    ``op`` is lax.psum / pmax / pmin; the identity for axes=None (one device holds every row). Works on pytrees.
    """
    return (lambda x: x) if axes is None else functools.partial(op, axis_name=axes)


def _column_stats(A, mask=None, axes=None):
    """Row count n, column means (p,) and exactly-constant columns (p,) bool of A (m, p).

    Over all its rows (mask None), or the rows marked by mask (m,) of every shard over the mesh axes `axes`.
    """
    if mask is None:
        return A.shape[0], A.mean(axis=0), A.max(axis=0) == A.min(axis=0)
    real = mask[:, None]
    n = lax.psum(jnp.sum(mask), axes)
    mean = lax.psum(jnp.where(real, A, 0.0).sum(axis=0), axes) / n
    hi = lax.pmax(jnp.where(real, A, -jnp.inf).max(axis=0), axes)
    lo = lax.pmin(jnp.where(real, A, jnp.inf).min(axis=0), axes)
    return n, mean, hi == lo


def _standardize(A, scale: bool, pad: int = 0, mask=None, axes=None):
    """Centre (and scale) the columns of A (m, p), then append `pad` zero rows.

    Exactly-constant columns become exactly 0 with std 1. Row-sharded (see `_nipals`): the statistics are
    those of the real rows of all shards, and the padding rows (mask False) become exactly 0.
    Returns (A_std (m + pad, p), mean (p,), std (p,), squared norm of A_std over all rows).
    """
    n, mean, constant = _column_stats(A, mask, axes)
    zero = constant[None, :] if mask is None else constant[None, :] | ~mask[:, None]
    Ac = jnp.where(zero, 0.0, A - mean)
    ss = _across(lax.psum, axes)(jnp.sum(Ac * Ac, axis=0))
    if scale:
        std = jnp.sqrt(ss / (n - 1))
        std = jnp.where((std == 0) | constant, 1.0, std)
        Ac = Ac / std
    else:
        std = jnp.ones_like(mean)
    if pad:
        Ac = jnp.pad(Ac, ((0, pad), (0, 0)))
    return Ac, mean, std, jnp.sum(ss / std**2)


def _capacity(n_components: int) -> int:
    """Static component capacity (multiple of 8): one compilation serves n_components 1..8, 9..16, ..."""
    return 8 * ((int(n_components) + 7) // 8)


def _block_rows(n: int, d: int, itemsize: int, target_bytes: int = 1 << 19) -> int:
    """Rows per block of the fused pass: about `target_bytes` (cache-sized), a power of two <= n."""
    rows = max(1, target_bytes // max(1, d * itemsize))
    rows = 1 << (rows.bit_length() - 1)
    return int(max(1, min(rows, 1 << max(0, (n - 1).bit_length()))))


def _fused_pass(Xb, w, Pw, T):
    """One pass over the local rows of X, stored as blocks Xb (nb, B, d).

    Computes t = X w - T (P^T w) block by block, and X^T t accumulated while each block is in cache.
    w (d,), Pw = P^T w (c,), T (nb B, c) the scores so far. Returns (t (nb B,), local X^T t (d,)).
    """
    nb, B, d = Xb.shape

    def body(acc, blk):
        xb, tb = blk
        t = xb @ w - tb @ Pw
        return acc + t @ xb, t

    acc, t = lax.scan(body, jnp.zeros(d, Xb.dtype), (Xb, T.reshape(nb, B, T.shape[1])))
    return t.reshape(nb * B), acc


def _power_method(M, j0, *, tol, max_iter: int, eps):
    """The NIPALS power method of sklearn on the residual cross-covariance M (d, q).

    Started from the y column j0. Iterate w <- normalise(M M^T w) until the squared change is below `tol` or
    `max_iter` iterations (PLS1, q == 1: one step, exact). Returns (w (d,), n_iter int32).
    """

    def normalise(v):
        return v / (jnp.sqrt(v @ v) + eps)

    w0 = normalise(M[:, j0])
    if M.shape[1] == 1:  # PLS1: one step, exact
        return w0, jnp.int32(1)

    def cond(s):
        _, _, i, done = s
        return (~done) & (i < max_iter)

    def body(s):
        w, _, i, _ = s
        w_new = normalise(M @ (M.T @ w))
        diff = w_new - w
        return w_new, w, i + 1, diff @ diff < tol

    w, _, i, _ = lax.while_loop(cond, body, (w0, w0, jnp.int32(1), jnp.bool_(False)))
    return w, i


# long: jitted fit whose fori_loop body `component` shares the 11-array carry and the norms/blocks
def _nipals(
    X, Y, n_components, tol, mask=None, *, capacity: int, scale: bool, max_iter: int, block: int | None, axes=None
):
    """The fit of `pls_fit` on X (m, d), Y (m, q).

    Single device: mask and axes None, all rows here.
    Row-sharded (inside shard_map): X, Y are this device's m rows, mask (m,) bool marks the real
    ones, and every sum over rows is a psum over the mesh axes `axes`; the rest (power method,
    weights, loadings) is computed identically on every device from the reduced (replicated) values.
    Returns pls_fit's dict, the scores with this device's m rows.
    """
    psum = _across(lax.psum, axes)
    m, d = X.shape
    q = Y.shape[1]
    k_tot = jnp.asarray(n_components, jnp.int32)
    dt = X.dtype
    eps = jnp.finfo(dt).eps
    B = block or _block_rows(m, d, jnp.dtype(dt).itemsize)
    nb = -(-m // B)
    pad = nb * B - m

    # standardised X with zero rows appended up to nb * B (zero rows change no sum below)
    Xs, x_mean, x_std, x_ss = _standardize(X, scale, pad, mask, axes)
    Ys, y_mean, y_std, _ = _standardize(Y, scale, pad, mask, axes)
    Xb = Xs.reshape(nb, B, d)
    M0 = psum((Ys.T @ Xs).T)  # (d, q) cross-covariance X^T Y
    x_norm = jnp.sqrt(x_ss)
    m0_norm = jnp.sqrt(jnp.sum(M0 * M0))

    def component(k, s):
        Yk, Mk, W, C, T, U, P, Q, n_iter, stop, reason = s
        # sklearn zeroes y columns whose residual is all below 10 eps
        zero_cols = _across(lax.pmax, axes)(jnp.max(jnp.abs(Yk), axis=0)) < 10 * eps
        Yk = jnp.where(zero_cols[None, :], 0.0, Yk)
        Mk = jnp.where(zero_cols[None, :], 0.0, Mk)
        y_constant = jnp.all(zero_cols)
        j0 = jnp.argmax(~zero_cols)

        w, it = _power_method(Mk, j0, tol=tol, max_iter=max_iter, eps=eps)
        t, xt = _fused_pass(Xb, w, P.T @ w, T)  # X_k w (implicit deflation) and X^T of it
        # with the max over Y's columns above, the component's communication: X^T t, T^T t, Y_k^T t, t't
        xt, tT, tY, tt = psum((xt, t @ T, t @ Yk, t @ t))
        rank_out = (jnp.sqrt(tt) <= 100 * eps * x_norm) | (jnp.sqrt(jnp.sum(Mk * Mk)) <= 100 * eps * m0_norm)
        active = stop == k_tot
        halt = active & (y_constant | rank_out)
        reason = jnp.where(halt, jnp.where(y_constant, 1, 2), reason)
        stop = jnp.where(halt, k, stop)
        live = active & ~halt
        tt_safe = jnp.where(live, tt, 1.0)

        c = (Mk.T @ w) / tt_safe  # y weights = Y_k^T t / t't
        # sign convention: the largest |x weight| is positive
        sign = jnp.sign(w[jnp.argmax(jnp.abs(w))])
        w, c, t = w * sign, c * sign, t * sign
        u = (Yk @ c) / jnp.where(live, c @ c, 1.0)  # y scores
        a = sign * (xt - P @ tT)  # X_k^T t
        p = a / tt_safe  # x loadings
        yl = sign * tY / tt_safe  # y loadings (regression deflation)

        z = jnp.where(live, 1.0, 0.0).astype(dt)
        w, c, t, u, p, yl = w * z, c * z, t * z, u * z, p * z, yl * z
        Yk = Yk - jnp.outer(t, yl)
        Mk = Mk - jnp.outer(a * z, yl)
        W, C = W.at[:, k].set(w), C.at[:, k].set(c)
        T, U = T.at[:, k].set(t), U.at[:, k].set(u)
        P, Q = P.at[:, k].set(p), Q.at[:, k].set(yl)
        n_iter = n_iter.at[k].set(jnp.where(live, it, 0))
        return Yk, Mk, W, C, T, U, P, Q, n_iter, stop, reason

    zeros = lambda r: jnp.zeros((r, capacity), dt)  # noqa: E731
    init = (
        Ys,
        M0,
        zeros(d),
        zeros(q),
        zeros(nb * B),
        zeros(nb * B),
        zeros(d),
        zeros(q),
        jnp.zeros(capacity, jnp.int32),
        k_tot,
        jnp.int32(0),
    )
    _, _, W, C, T, U, P, Q, n_iter, stop, reason = lax.fori_loop(0, k_tot, component, init)
    return dict(zip(_OUTPUTS, (x_mean, x_std, y_mean, y_std, W, C, P, Q, T[:m], U[:m], n_iter, stop, reason)))


def _check_mesh(mesh):
    """mesh: None or a jax.sharding.Mesh (returned as is); anything else is a ValueError."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ValueError(
            "mesh must be a jax.sharding.Mesh (puaudit_runtime.mesh.make_mesh) or None, got "
            f"{type(mesh).__name__}: {mesh!r}"
        )
    return mesh


def _fit_sharded(fit, X, Y, n_components, tol, mesh: Mesh, n_rows: int):
    """Run `fit` (a partial `_nipals`) under shard_map with the rows of X (N, d), Y (N, q) split over `mesh`.

    The rows go to every device of `mesh`, after zero rows are appended up to a multiple of mesh.size; the
    first n_rows rows are the samples. Returns pls_fit's dict, scores (n_rows, c).
    """
    axes = data_axes(mesh)
    N = pad_to_multiple(X.shape[0], mesh.size)
    X, Y = (jnp.pad(A, ((0, N - A.shape[0]), (0, 0))) for A in (X, Y))
    rows, rep = PartitionSpec(axes), PartitionSpec()
    out_specs = {k: rows if k in _ROW_OUTPUTS else rep for k in _OUTPUTS}
    sharded = jax.shard_map(
        functools.partial(fit, axes=axes),
        mesh=mesh,
        in_specs=(rows, rows, rep, rep, rows),
        out_specs=out_specs,
        check_vma=False,
    )
    r = sharded(X, Y, n_components, tol, jnp.arange(N) < n_rows)
    return {k: v[:n_rows] if k in _ROW_OUTPUTS else v for k, v in r.items()}


@functools.partial(jax.jit, static_argnames=("capacity", "scale", "max_iter", "block", "mesh", "n_rows"))
def pls_fit(
    X,
    Y,
    n_components,
    *,
    capacity: int,
    scale: bool = True,
    max_iter: int = 500,
    tol: float = 1e-6,
    block: int | None = None,
    mesh: Mesh | None = None,
    n_rows: int | None = None,
):
    """NIPALS PLS2 regression fit (jitted; the semantics of the module docstring).

    Args:
        X: (N, d) float array, the inputs; the same dtype as ``Y``.
        Y: (N, q) float array, the targets.
        n_components: number of components computed (a traced int <= ``capacity``).
        capacity: static number of columns of the component arrays (c); the columns past
            ``n_components`` are 0.
        scale: divide the centred columns of X and Y by their ddof=1 standard deviations.
        max_iter: iteration cap of the power method (PLS2 only).
        tol: the power method stops when the squared change of the x weights is below ``tol``.
        block: rows per block of the fused pass (default: ~512 KiB of a device's rows of X).
        mesh: None (one device) or a jax.sharding.Mesh: the rows are split over all its devices
            (zero rows appended up to a multiple of mesh.size).
        n_rows: the samples are the first n_rows rows (default N); rows past them are padding,
            ignored (only with a mesh).

    Returns:
        A dict of arrays: x_mean (d,), x_std (d,), y_mean (q,), y_std (q,), x_weights (d, c),
        y_weights (q, c), x_loadings (d, c), y_loadings (q, c), x_scores (n, c), y_scores (n, c),
        n_iter (c,) int, stop (int: the first component that is zero, n_components if none),
        stop_reason (0 none, 1 y residual constant, 2 rank exhausted).

    Raises:
        ValueError: n_rows outside [1, N], or n_rows != N without a mesh; a mesh that is not a
            jax.sharding.Mesh.
    """
    n_rows = X.shape[0] if n_rows is None else n_rows
    if not (0 < n_rows <= X.shape[0]) or (mesh is None and n_rows != X.shape[0]):
        raise ValueError(f"n_rows={n_rows} must lie in [1, {X.shape[0]}] and be {X.shape[0]} without a mesh")
    fit = functools.partial(_nipals, capacity=capacity, scale=scale, max_iter=max_iter, block=block)
    if _check_mesh(mesh) is None:
        return fit(X, Y, n_components, tol)
    return _fit_sharded(fit, X, Y, n_components, tol, mesh, n_rows)


def _rotations(W, P, C, Q, x_std, y_std):
    """x_rotations = W pinv(P^T W), y_rotations = C pinv(Q^T C), coef (q, d) on the raw scale.

    Small (k x k) problems: numpy, with scipy.linalg.pinv's cutoff max(shape) * eps * s_max.
    """

    def pinv(a):
        return np.linalg.pinv(a, rcond=max(a.shape) * np.finfo(a.dtype).eps)

    x_rot = W @ pinv(P.T @ W)
    y_rot = C @ pinv(Q.T @ C)
    coef = ((x_rot @ Q.T) * y_std).T / x_std
    return x_rot, y_rot, coef


# ---------------------------------------------------------------------------------------------
# Input checks


def _dtype(dtype):
    if dtype is None:
        return np.float64 if jax.config.jax_enable_x64 else np.float32
    dtype = np.dtype(dtype)
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype float64 needs JAX's x64 mode (jax.enable_x64(True) or JAX_ENABLE_X64=1)")
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, not {dtype}")
    return dtype.type


def _local_mesh(mesh):
    """The estimator's mesh: None or a Mesh of this process's devices, else ValueError.

    Only this process's devices, because the scores come back as numpy arrays.
    """
    if _check_mesh(mesh) is not None and mesh.is_multi_process:
        raise ValueError(
            "mesh spans the devices of several processes; PLSRegression(mesh=...) needs a mesh of "
            "this process's devices (jax.local_devices())"
        )
    return mesh


def _on_devices(A, mesh):
    """A (n, p) numpy -> jax array, on the default device (mesh None) or split by rows over the mesh.

    With a mesh, zero rows are appended up to a multiple of mesh.size and each device gets only its rows.
    """
    if mesh is None:
        return jnp.asarray(A)
    A = np.pad(A, ((0, pad_to_multiple(len(A), mesh.size) - len(A)), (0, 0)))
    return jax.device_put(A, NamedSharding(mesh, PartitionSpec(data_axes(mesh), None)))


def _check_array(A, name: str, dtype, ndim=(2,)) -> np.ndarray:
    A = np.asarray(A)
    if A.dtype == object or not (np.issubdtype(A.dtype, np.number) or A.dtype == bool):
        raise ValueError(f"{name} must be numeric, got dtype {A.dtype}")
    A = A.astype(dtype, copy=False)
    if A.ndim not in ndim:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndim))} dimensions, got shape {A.shape}")
    bad = ~np.isfinite(A)
    if bad.any():
        idx = np.argwhere(bad)[0]
        what = "NaN" if np.isnan(A[tuple(idx)]) else "infinity"
        raise ValueError(
            f"{name} contains {what} (first at index {tuple(int(i) for i in idx)}); "
            f"{int(bad.sum())} non-finite entries in total"
        )
    return A


def _power_of_two_scale(A) -> float:
    """2**k that brings max |A| (finite entries) near 1 when it lies outside [2**-40, 2**40], else 1.

    float32 moments of such columns overflow (1e20**2) or vanish (1e-30**2): the fit would see
    constant columns. Dividing by a power of two is exact, and the fit undoes it on the raw scale.
    """
    A = np.asarray(A)
    if A.size == 0 or not np.issubdtype(A.dtype, np.number):  # bad types are _check_array's to report
        return 1.0
    A = A.astype(np.float64)
    finite = np.abs(A[np.isfinite(A)])
    top = float(finite.max()) if finite.size else 0.0
    if top == 0.0 or 2.0**-40 <= top <= 2.0**40:
        return 1.0
    return float(2.0 ** np.round(np.log2(top)))


# ---------------------------------------------------------------------------------------------
# The estimator


class PLSRegression:
    """Scikit-learn-compatible PLS regression in JAX (see the module docstring).

    Args:
        n_components: number of components k.
        scale: divide X and y by their (ddof=1) std.
        max_iter: iteration cap of the power method (PLS2 only).
        tol: stopping tolerance of the power method (PLS2 only).
        dtype: None: float64 under x64 else float32; float32 or float64 overrides.
        mesh: None, or a jax.sharding.Mesh of this process's devices, e.g.
            puaudit_runtime.mesh.make_mesh("all"): the samples are split over its devices; same
            results up to rounding; a Mesh does not pickle, so set mesh=None (``set_params``)
            before pickling a fitted model.

    Attributes:
        x_weights_: (d, k) x weights; y_weights_ (q, k) likewise.
        x_loadings_: (d, k) x loadings; y_loadings_ (q, k) likewise.
        x_scores_: (n, k) training x scores; y_scores_ (n, k) likewise.
        x_rotations_: (d, k) x rotations; y_rotations_ (q, k) likewise.
        coef_: (q, d) coefficients on the raw scale of X and y.
        intercept_: (q,) intercept (the mean of y).
        n_iter_: list of power-method iterations per fitted component.
        n_features_in_: d.
        n_components_fitted_: the first zero component (k when none is zero).
    """

    _param_names = ("n_components", "scale", "max_iter", "tol", "dtype", "mesh")

    def __init__(
        self,
        n_components: int = 2,
        *,
        scale: bool = True,
        max_iter: int = 500,
        tol: float = 1e-6,
        dtype=None,
        mesh: Mesh | None = None,
    ):
        self.n_components = n_components
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol
        self.dtype = dtype
        self.mesh = mesh

    # sklearn estimator protocol ---------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments ``{name: value}`` (``deep`` is accepted for sklearn and ignored)."""
        return {k: getattr(self, k) for k in self._param_names}

    def set_params(self, **params):
        """Set constructor arguments by name and return self; an unknown name is a ValueError."""
        for k, v in params.items():
            if k not in self._param_names:
                raise ValueError(f"invalid parameter {k!r} for PLSRegression")
            setattr(self, k, v)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._param_names)
        return f"PLSRegression({args})"

    def __sklearn_tags__(self):  # lets sklearn's model selection treat it as a regressor
        from sklearn.base import BaseEstimator, RegressorMixin

        class _Tmp(RegressorMixin, BaseEstimator):
            pass

        return _Tmp().__sklearn_tags__()

    # fit / predict ----------------------------------------------------------------------------
    def fit(self, X, y):
        """Fit the model.

        Args:
            X: (n, d) inputs.
            y: (n,) or (n, q) targets.

        Returns:
            self, fitted.

        Raises:
            ValueError: NaN / inf or non-numeric input, n < 2, mismatched lengths, n_components < 1
                or > min(n, d), or a bad dtype / mesh.
        """
        dt = _dtype(self.dtype)
        sx, sy = _power_of_two_scale(X), _power_of_two_scale(y)
        X = _check_array(np.asarray(X, np.float64) / sx if sx != 1 else X, "X", dt)
        y = _check_array(np.asarray(y, np.float64) / sy if sy != 1 else y, "y", dt, ndim=(1, 2))
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} samples but y has {len(y)}")
        n, d = X.shape
        if n < 2:
            raise ValueError(f"PLSRegression needs at least 2 samples, got {n}")
        k = int(self.n_components)
        if k < 1:
            raise ValueError(f"n_components must be >= 1, got {self.n_components}")
        if k > min(n, d):
            raise ValueError(f"`n_components` upper bound is {min(n, d)}. Got {k} instead. Reduce `n_components`.")
        self._predict_1d = y.ndim == 1
        Y = y.reshape(n, -1)
        mesh = _local_mesh(self.mesh)
        r = pls_fit(
            _on_devices(X, mesh),
            _on_devices(Y, mesh),
            k,
            capacity=_capacity(k),
            scale=bool(self.scale),
            max_iter=int(self.max_iter),
            tol=float(self.tol),
            mesh=mesh,
            n_rows=n,
        )
        r = {name: np.asarray(v) for name, v in r.items()}
        stop, reason = int(r["stop"]), int(r["stop_reason"])
        if reason == 1:
            warnings.warn(f"y residual is constant at iteration {stop}", UserWarning, stacklevel=2)
        elif reason == 2:
            warnings.warn(
                f"PLSRegression: the residual of X (or its covariance with y) is exhausted at component "
                f"{stop}: n_components={k} exceeds the numerical rank; components {stop}..{k - 1} are "
                "zero",
                UserWarning,
                stacklevel=2,
            )
        n_iter = r["n_iter"][:stop]
        if Y.shape[1] > 1 and np.any(n_iter >= self.max_iter):
            warnings.warn("Maximum number of iterations reached", UserWarning, stacklevel=2)
        self.n_iter_ = n_iter.tolist()
        # back to the raw scale of X and y (sx = sy = 1 unless their magnitudes were extreme)
        self._x_mean, self._x_std = (r["x_mean"] * sx).astype(dt), (r["x_std"] * sx).astype(dt)
        self._y_mean, self._y_std = (r["y_mean"] * sy).astype(dt), (r["y_std"] * sy).astype(dt)
        for name in ("x_weights", "y_weights", "x_loadings", "y_loadings", "x_scores", "y_scores"):
            setattr(self, name + "_", r[name][:, :k])
        self.x_rotations_, self.y_rotations_, self.coef_ = _rotations(
            self.x_weights_, self.x_loadings_, self.y_weights_, self.y_loadings_, self._x_std, self._y_std
        )
        self.intercept_ = self._y_mean
        self.n_features_in_ = d
        self.n_components_fitted_ = stop
        return self

    def _check_fitted(self, X):
        if not hasattr(self, "coef_"):
            raise RuntimeError("this PLSRegression is not fitted yet; call fit(X, y) first")
        X = _check_array(X, "X", self._x_mean.dtype.type)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted with {self.n_features_in_}")
        return X

    def predict(self, X) -> np.ndarray:
        """Predictions on y's scale.

        Args:
            X: (m, d) inputs.

        Returns:
            (m,) for a 1-d training y, else (m, q).

        Raises:
            RuntimeError: the model is not fitted.
            ValueError: bad X (non-finite, or another number of features than in fit).
        """
        X = self._check_fitted(X)
        out = (X - self._x_mean) @ self.coef_.T + self.intercept_
        return out.ravel() if self._predict_1d else out

    def transform(self, X, y=None):
        """The x scores of X, and with y also the y scores (sklearn's y_rotations_ projection).

        Args:
            X: (m, d) inputs.
            y: None, or (m,) / (m, q) targets.

        Returns:
            x scores (m, k); with y the pair (x scores (m, k), y scores (m, k)).
        """
        X = self._check_fitted(X)
        xs = ((X - self._x_mean) / self._x_std) @ self.x_rotations_
        if y is None:
            return xs
        y = _check_array(y, "y", self._x_mean.dtype.type, ndim=(1, 2)).reshape(len(y), -1)
        return xs, ((y - self._y_mean) / self._y_std) @ self.y_rotations_

    def fit_transform(self, X, y):
        """``fit(X, y)``, then ``transform(X, y)``: the pair (x scores (n, k), y scores (n, k))."""
        return self.fit(X, y).transform(X, y)

    def score(self, X, y) -> float:
        """Coefficient of determination R^2 (uniform average over targets), as sklearn's.

        Args:
            X: (m, d) inputs.
            y: (m,) or (m, q) true targets.

        Returns:
            R^2, a float (1 is a perfect fit).
        """
        y = np.asarray(y, float).reshape(len(y), -1)
        pred = np.asarray(self.predict(X), float).reshape(len(y), -1)
        ss_res = ((y - pred) ** 2).sum(0)
        ss_tot = ((y - y.mean(0)) ** 2).sum(0)
        r2 = np.where(ss_tot > 0, 1 - ss_res / np.where(ss_tot > 0, ss_tot, 1), np.where(ss_res == 0, 1.0, 0.0))
        return float(r2.mean())
