"""Partial least squares regression (NIPALS PLS2, PLS1 as its special case) in JAX.

The estimator::

    PLSRegression(n_components=2, scale=True, max_iter=500, tol=1e-6, dtype=None, mesh=None)
        .fit(X (n, d), y (n,) or (n, q)) -> self
        .predict(X (m, d)) -> (m,) or (m, q)          on y's scale
        .transform(X (m, d)[, y]) -> x scores (m, n_components) [, y scores]
        .fit_transform, .score (R^2), .get_params / .set_params, .get_feature_names_out

A scikit-learn estimator (ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin,
MultiOutputMixin, BaseEstimator, as sklearn's own PLSRegression): inputs go through sklearn's
``validate_data`` / ``check_is_fitted``, so it passes ``sklearn.utils.estimator_checks.check_estimator``
(every check) and works with clone, Pipeline and GridSearchCV.

Semantics are scikit-learn's `PLSRegression` (deflation_mode="regression", mode "A", algorithm
"nipals"): X and y are centred and, with `scale=True`, divided by their ddof=1 standard deviations;
each component takes the first singular vector pair of the residual cross-covariance X_k^T Y_k by
sklearn's power method (same start, the first non-zero y column; same stopping rule
``|w_i - w_{i-1}|^2 < tol``; one step for a single target), the same sign convention (largest ``|x weight|``
positive), X and Y deflated on the x scores. Fitted attributes have sklearn's names and shapes:
``x_weights_`` (d, k), ``y_weights_`` (q, k), ``x_loadings_`` (d, k), ``y_loadings_`` (q, k),
``x_scores_`` (n, k), ``y_scores_`` (n, k), ``x_rotations_`` (d, k), ``y_rotations_`` (q, k), ``coef_`` (q, d),
``intercept_`` (q,), ``n_iter_``.
On well-posed problems the results equal sklearn's to ~1e-10 in float64.

How it is fast. Deflation is implicit: the standardised X (written once) is never modified.
With T, P the scores and loadings found so far, X_k = X - T P^T, so::

    X_k w = X w - T (P^T w)   and   X_k^T t = X^T t - P (T^T t),

and the residual cross-covariance M_k = X_k^T Y_k (d, q) is updated as M_{k+1} = M_k - (X_k^T t) c^T.
The power method then needs only M_k (its iterate is w <- normalise(M_k M_k^T w), which is exactly
sklearn's iterate up to positive scalars). Since t = X_k w is row-wise, X^T t is accumulated block
by block while each row block of X is still in cache: every component costs one pass over X
(memory-bound), against about eight for sklearn's explicit deflation. The whole fit is one `jax.jit` with a
`lax.fori_loop` over components and a `lax.while_loop` for the power method; the component
arrays have a static capacity (a multiple of 8), so one compilation serves n_components 1..8 for a
given (n, d, q). Rotations, predict and transform are small or single matmuls, done in numpy.

Precision: the fit computes in float64 when JAX's x64 mode is on (`jax.enable_x64(True)`), else
float32; `dtype` overrides (float64 needs x64). The centring and scaling are done first, each column
divided by a power of two near its largest ``|value|`` while its moments are taken, so a column of
1e20 or 1e-20 among columns of 1 loses nothing in float32 and values of 1e300 or 1e-300 (whose
squares over- or underflow) fit like the unscaled data (sklearn itself fails there). Without
`scale`, X (and y) far outside [2**-40, 2**40] is divided by one power of two (the fit is
equivariant under it). Where that happens:

* float32 X (numpy, or a JAX array, which stays on its device) with the float32 compute dtype: on
  the device, in float32, in one jitted program before the fit (`_device_standardize`): the NaN /
  inf check (max ``|value|`` per column; the first bad index is then found on the device), the
  power-of-two prescaling, the mean (blocked sums with a correction pass: the corrected two-pass
  algorithm) and the ddof=1 std. No float64 copy of X is made; the means and stds are returned in
  float64 (mean = the float32 mean plus its float32 correction, added in float64). A float32 column
  is within float32's range by definition, and the prescaling keeps its squares in range.
* any other X (float64, integers, a float64 compute dtype): on the host in float64 (as sklearn),
  the results to ~1e-10 of sklearn's.
* y (n, q) always on the host in float64 (q / d of X's cost).

The standardised arrays are zero-padded to shape buckets (zero rows and columns change nothing), on
the device for the float32 path, so nearby shapes share one compilation. Fitted attributes are
float64; predict / transform return their input's float dtype (float64 for integer input).

Bad input and degenerate cases (documented behaviour):

* NaN / inf in X or y (the first index named), n < 2, empty, complex or non-numeric data,
  mismatched lengths, a bad constructor argument, n_components > min(n, d): ValueError (the last
  with sklearn's message "`n_components` upper bound is ..."); sparse X: TypeError (sklearn's);
  predict / transform before fit: sklearn's NotFittedError; another feature count: ValueError.
* A column whose standard deviation is not representable in float64 (``|values|`` near 1.8e308):
  ValueError naming the column.
* Constant X columns: standard deviation taken as 1 (sklearn), and the centred column is set to
  exactly 0, so the column gets weight, loading and coefficient 0. (sklearn computes the centred
  column as x - mean(x), which can be a few ulps instead of 0; then its weights are ~1e-30.)
  Constant y columns: the same; their coefficients are 0 and predictions equal the mean.
* The y residual becomes constant (all ``|entries|`` < eps, e.g. y constant or perfectly fitted):
  the remaining components are zero and a UserWarning says at which component (as sklearn).
* n_components above the numerical rank of the residual (||X_k w|| <= 100 eps ||X||_F, or
  ||M_k|| <= 100 eps ||M_0||): the remaining components are zero and a UserWarning names the
  component. sklearn instead fits noise directions there and its ``coef_`` blows up (~1e13); here the
  predictions equal those of the model with the rank's number of components.
* The power method hits max_iter: sklearn's ConvergenceWarning (its text).
"""

from __future__ import annotations

import functools
import numbers
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    MultiOutputMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_consistent_length
from sklearn.utils.validation import FLOAT_DTYPES, check_array, check_is_fitted, validate_data

from puaudit_runtime.floats import first_nonfinite, power_of_two_below
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


def _standardize(A, scale: bool, pad: int = 0, mask=None, axes=None, given: bool = False):
    """Centre (and scale) the columns of A (m, p), then append `pad` zero rows.

    Exactly-constant columns become exactly 0 with std 1. Row-sharded (see `_nipals`): the statistics are
    those of the real rows of all shards, and the padding rows (mask False) become exactly 0.
    given=True: A is already standardised (on the host, in float64); only the padding is done, and the
    mean / std returned are 0 / 1.
    Returns (A_std (m + pad, p), mean (p,), std (p,), squared norm of A_std over all rows).
    """
    if given:
        Ac = A if mask is None else jnp.where(mask[:, None], A, 0.0)
        ss = _across(lax.psum, axes)(jnp.sum(Ac * Ac, axis=0))
        Ac = jnp.pad(Ac, ((0, pad), (0, 0))) if pad else Ac
        return Ac, jnp.zeros(A.shape[1], A.dtype), jnp.ones(A.shape[1], A.dtype), jnp.sum(ss)
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
    X,
    Y,
    n_components,
    tol,
    mask=None,
    *,
    capacity: int,
    scale: bool,
    max_iter: int,
    block: int | None,
    standardized: bool = False,
    axes=None,
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
    Xs, x_mean, x_std, x_ss = _standardize(X, scale, pad, mask, axes, standardized)
    Ys, y_mean, y_std, _ = _standardize(Y, scale, pad, mask, axes, standardized)
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


@functools.partial(
    jax.jit, static_argnames=("capacity", "scale", "max_iter", "block", "mesh", "n_rows", "standardized")
)
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
    standardized: bool = False,
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
        standardized: X and Y are already centred (and scaled), by the host in float64 or by
            `_device_standardize` in float32, with
            padding rows exactly 0; then ``scale`` is ignored and the returned means / stds are 0 / 1.

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
    fit = functools.partial(
        _nipals, capacity=capacity, scale=scale, max_iter=max_iter, block=block, standardized=standardized
    )
    if _check_mesh(mesh) is None:
        return fit(X, Y, n_components, tol)
    return _fit_sharded(fit, X, Y, n_components, tol, mesh, n_rows)


def _rotations(W, P, C, Q, x_std, y_std, eps: float):
    """x_rotations = W pinv(P^T W), y_rotations = C pinv(Q^T C), coef (q, d) on the raw scale.

    Small (k x k) problems: numpy, with scipy.linalg.pinv's cutoff max(shape) * eps * s_max, eps that of
    the dtype the fit was computed in.
    """

    def pinv(a):
        return np.linalg.pinv(a, rcond=max(a.shape) * eps)

    x_rot = W @ pinv(P.T @ W)
    y_rot = C @ pinv(Q.T @ C)
    coef = ((x_rot @ Q.T) * y_std).T / x_std
    return x_rot, y_rot, coef


# ---------------------------------------------------------------------------------------------
# Input checks and host-side standardisation (float64; float32 X: on the device, below)


def _dtype(dtype):
    """The compute dtype (a numpy scalar type): float64 under JAX's x64 mode, else float32; `dtype` overrides."""
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


def _check_finite(A: np.ndarray, name: str) -> np.ndarray:
    """A itself; NaN / inf in it is a ValueError naming the first bad index and the count."""
    bad = ~np.isfinite(A)
    if bad.any():
        idx = np.argwhere(bad)[0]
        _raise_nonfinite(name, bool(np.isnan(A[tuple(idx)])), idx, int(bad.sum()))
    return A


def _raise_nonfinite(name: str, nan: bool, idx, count: int):
    """The ValueError of non-finite input: `name`, NaN or infinity at index `idx` first, `count` in total."""
    raise ValueError(
        f"{name} contains {'NaN' if nan else 'infinity'} (first at index {tuple(int(i) for i in idx)}); "
        f"{count} non-finite entries in total"
    )


def _power_of_two(top):
    """2**floor(log2(top)) elementwise for top > 0 (so top / it lies in [1, 2): exact scaling), 1 for top == 0."""
    top = np.asarray(top, np.float64)
    positive = top > 0
    return np.where(positive, np.exp2(np.floor(np.log2(np.where(positive, top, 1.0)))), 1.0)


def _host_standardize(A: np.ndarray, scale: bool, name: str):
    """Centre (and with `scale` divide by the ddof=1 std) the columns of A (n, p) float64, in float64.

    As sklearn, done before the cast to the compute dtype, so a column of 1e20 or 1e-20 next to
    columns of 1 keeps its information in float32. Each column is first divided by a power of two
    near its largest |value| (exact), so squares neither overflow (1e300) nor vanish (1e-300).
    Exactly-constant columns become exactly 0 with std 1. Without `scale`, all of A is divided by one
    power of two when its largest |value| lies outside [2**-40, 2**40] (float32 moments), returned as
    a uniform "std" (the fit is equivariant under that).

    Returns:
        (Z (n, p) standardised, mean (p,), std (p,)), so that A = Z * std + mean.

    Raises:
        ValueError: a column whose standard deviation overflows float64 (named).
    """
    top = np.abs(A).max(axis=0)
    p = _power_of_two(top)
    B = A / p
    mean_b = B.mean(axis=0)
    constant = A.max(axis=0) == A.min(axis=0)
    Bc = np.where(constant, 0.0, B - mean_b)
    if scale:
        std_b = Bc.std(axis=0, ddof=1)
        std_b = np.where(constant | (std_b == 0), 1.0, std_b)
        Z = Bc / std_b
        with np.errstate(over="ignore"):
            std = np.where(constant, 1.0, std_b * p)
    else:
        big = float(top.max())
        s = float(_power_of_two(big)) if big > 0 and not (2.0**-40 <= big <= 2.0**40) else 1.0
        Z = Bc * (p / s)
        std = np.full(A.shape[1], s)
    if not np.all(np.isfinite(std)):
        j = int(np.flatnonzero(~np.isfinite(std))[0])
        raise ValueError(f"{name} column {j}: its standard deviation overflows float64; rescale it")
    return Z, mean_b * p, std


def _bucket(m: int) -> int:
    """The shape bucket of m: 32 for m <= 32, else m rounded up to a multiple of 2**(bit_length - 4) (< 1/8 more).

    The fit compiles once per (rows, columns) shape; zero rows and columns of standardised data change
    nothing, so padding to buckets lets one compilation serve nearby shapes (cross-validation folds).
    """
    if m <= 32:
        return 32
    step = 1 << (m.bit_length() - 4)
    return -(-m // step) * step


def _to_compute(Z: np.ndarray, dtype, name: str, pad_columns: bool = True) -> np.ndarray:
    """Z (n, p) standardised float64, cast to the compute dtype and padded with zeros to bucket shapes.

    Rows go to `_bucket(n)`, columns to `_bucket(p)` when `pad_columns`. A value the compute dtype
    cannot hold is a ValueError.
    """
    n, p = Z.shape
    out = np.zeros((_bucket(n), _bucket(p) if pad_columns else p), dtype)
    out[:n, :p] = Z
    if not np.all(np.isfinite(out)):
        raise ValueError(
            f"{name}: values too large for the compute dtype {np.dtype(dtype).name} after centring "
            f"(max |value| {np.abs(Z).max():.3g}); use scale=True or rescale {name}"
        )
    return out


# ---------------------------------------------------------------------------------------------
# Device-side standardisation (float32 input, float32 compute)


def _column_sum(A, blocked: bool):
    """Column sums (p,) of A (m, p); `blocked`: in two levels, blocks of ~sqrt(m) rows, then the block sums.

    The blocks bound float32 rounding by ~2 sqrt(m) ulps instead of m when the backend sums rows in order.
    """
    m = A.shape[0]
    b = min(1 << (max(0, (m - 1).bit_length()) + 1) // 2, m & -m) if blocked and m > 0 else 1
    if b <= 1:
        return A.sum(axis=0)
    return A.reshape(m // b, b, A.shape[1]).sum(axis=1).sum(axis=0)


@functools.partial(jax.jit, static_argnames=("scale", "rows", "cols", "sharding"))
def _device_standardize(X, *, scale: bool, rows: int, cols: int, sharding=None):
    """`_host_standardize` and `_to_compute` for float32 X (n, d), in one float32 program on X's device.

    Each column is divided by the power of two p below its largest ``|value|`` (exact), so its squares
    neither overflow nor vanish. The mean is a blocked sum, corrected by the mean of the centred column
    (its sum and sum of squares in one pass: the corrected two-pass algorithm of Chan, Golub and
    LeVeque), the std ddof=1. Exactly-constant columns become exactly 0 with std 1 and their value as
    mean. Without `scale`, X far outside [2**-40, 2**40] is divided by one power of two s. The result
    is padded with zeros to (rows, cols), row-sharded by `sharding` (a NamedSharding; None: one device).

    Args:
        X: (n, d) float32, finite (checked: ``finite``).
        scale: divide by the std.
        rows: the padded number of rows, >= n (zero rows appended).
        cols: the padded number of columns, >= d (zero columns appended).
        sharding: None, or the NamedSharding of the result's rows over a mesh.

    Returns:
        dict: z (rows, cols) float32 standardised; mean_b, corr, std_b, p (d,) float32, constant (d,)
        bool; so that (in float64, on the host) mean = (mean_b + corr) p and, with `scale`, std = std_b p
        (1 for constant columns), without it std = std_b (all s); finite (bool: X has no NaN / inf;
        else the rest is meaningless).
    """
    n, d = X.shape
    top = jnp.max(jnp.abs(X), axis=0)  # NaN / inf propagate: the finite check
    constant = jnp.max(X, axis=0) == jnp.min(X, axis=0)
    p = power_of_two_below(top)
    real = (jnp.arange(rows) < n)[:, None]
    B = jnp.pad(X / p, ((0, rows - n), (0, 0)))  # zero rows add nothing to the sums
    blocked = sharding is None
    mean_b = jnp.where(constant, B[0], _column_sum(B, blocked) / n)  # a constant column's mean: its value
    Bc = jnp.where(real & ~constant, B - mean_b, 0.0)
    corr_sum, ss = _column_sum(Bc, blocked), _column_sum(Bc * Bc, blocked)  # one pass
    corr = corr_sum / n
    Bc = jnp.where(real & ~constant, Bc - corr, 0.0)
    if scale:
        std_b = jnp.sqrt(jnp.maximum(ss - corr_sum * corr, 0.0) / (n - 1))  # Chan, Golub and LeVeque's correction
        std_b = jnp.where(constant | (std_b == 0), jnp.float32(1), std_b)
        Z = Bc / std_b
    else:
        big = jnp.max(top)
        s = jnp.where((big > 0) & ((big < 2.0**-40) | (big > 2.0**40)), power_of_two_below(big), jnp.float32(1))
        std_b = jnp.full(d, s)
        Z = Bc * (p / s)
    Z = jnp.pad(Z, ((0, 0), (0, cols - d)))
    if sharding is not None:
        Z = lax.with_sharding_constraint(Z, sharding)
    return dict(z=Z, mean_b=mean_b, corr=corr, std_b=std_b, p=p, constant=constant, finite=jnp.all(jnp.isfinite(top)))


def _standardize_on_device(X, scale: bool, mesh, name: str = "X"):
    """float32 X (n, d) (numpy or a JAX array) standardised on the device: the float32 path of `fit`.

    Returns:
        (Z (bucket rows, bucket columns) float32 on the device(s), mean (d,) float64, std (d,) float64),
        as `_host_standardize` followed by `_to_compute` and `_on_devices`, so that X = Z * std + mean.

    Raises:
        ValueError: NaN / inf in X, the first index and the count named (as `_check_finite`).
    """
    n, d = X.shape
    rows = _bucket(n) if mesh is None else pad_to_multiple(_bucket(n), mesh.size)
    sharding = None if mesh is None else NamedSharding(mesh, PartitionSpec(data_axes(mesh), None))
    X = jax.device_put(X) if isinstance(X, np.ndarray) else X  # (faster than jit's own transfer on CPU)
    r = _device_standardize(X, scale=bool(scale), rows=rows, cols=_bucket(d), sharding=sharding)
    if not bool(r["finite"]):
        count, row, col, nan = jax.device_get(first_nonfinite(X))
        _raise_nonfinite(name, bool(nan), (row, col), int(count))
    p = np.asarray(r["p"], np.float64)
    mean = (np.asarray(r["mean_b"], np.float64) + np.asarray(r["corr"], np.float64)) * p
    std = np.asarray(r["std_b"], np.float64)
    if scale:
        std = np.where(np.asarray(r["constant"]), 1.0, std * p)
    return r["z"], mean, std


def _check_params(est) -> None:
    """ValueError naming the first bad constructor argument of `est` (a PLSRegression)."""
    k = est.n_components
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"n_components must be >= 1 (an integer), got {k!r}")
    if not isinstance(est.scale, (bool, np.bool_)):
        raise ValueError(f"scale must be True or False, got {est.scale!r}")
    if isinstance(est.max_iter, bool) or not isinstance(est.max_iter, numbers.Integral) or est.max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {est.max_iter!r}")
    if isinstance(est.tol, bool) or not isinstance(est.tol, numbers.Real) or not est.tol >= 0:
        raise ValueError(f"tol must be a real number >= 0, got {est.tol!r}")


def _warn_stops(stop: int, reason: int, k: int, n_iter: np.ndarray, q: int, max_iter: int) -> None:
    """The fit's warnings: a constant y residual, an exhausted rank, the power method's iteration cap."""
    if reason == 1:
        warnings.warn(f"y residual is constant at iteration {stop}", UserWarning, stacklevel=3)
    elif reason == 2:
        warnings.warn(
            f"PLSRegression: the residual of X (or its covariance with y) is exhausted at component "
            f"{stop}: n_components={k} exceeds the numerical rank; components {stop}..{k - 1} are "
            "zero",
            UserWarning,
            stacklevel=3,
        )
    if q > 1 and np.any(n_iter >= max_iter):
        warnings.warn("Maximum number of iterations reached", ConvergenceWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------------
# The estimator


class PLSRegression(ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, MultiOutputMixin, BaseEstimator):
    """Scikit-learn PLS regression estimator computed in JAX (see the module docstring).

    A real scikit-learn estimator (the base classes of sklearn's own PLSRegression): it passes
    ``sklearn.utils.estimator_checks.check_estimator`` and works with ``clone``, ``Pipeline`` and
    ``GridSearchCV``. Inputs are validated by sklearn (``validate_data``): sparse, complex and
    non-numeric data are refused, ``predict`` / ``transform`` check the number of features and raise
    ``NotFittedError`` before ``fit``. Centring and scaling of X are done on the device in float32 (one
    jitted program, no float64 copy) when X is float32 (numpy or a JAX array) and the compute dtype is
    float32; otherwise on the host in float64 (y always on the host in float64). Then the NIPALS fit
    runs in the compute dtype; the fitted attributes are float64 and ``predict`` / ``transform``
    return the float dtype of their input (float64 for integer input).

    Args:
        n_components: number of components k, 1 <= k <= min(n_samples, n_features) (else ValueError,
            with sklearn's message).
        scale: divide X and y by their (ddof=1) std.
        max_iter: iteration cap of the power method (PLS2 only).
        tol: stopping tolerance of the power method (PLS2 only).
        dtype: compute dtype of the fit. None: float64 under x64 else float32; float32 or float64 overrides.
        mesh: None, or a jax.sharding.Mesh of this process's devices, e.g.
            puaudit_runtime.mesh.make_mesh("all"): the samples are split over its devices; same
            results up to rounding; a Mesh does not pickle, so set mesh=None (``set_params``)
            before pickling a fitted model.

    Attributes:
        ``x_weights_``: (d, k) x weights; ``y_weights_`` (q, k) likewise.
        ``x_loadings_``: (d, k) x loadings; ``y_loadings_`` (q, k) likewise.
        ``x_scores_``: (n, k) training x scores; ``y_scores_`` (n, k) likewise.
        ``x_rotations_``: (d, k) x rotations; ``y_rotations_`` (q, k) likewise.
        ``coef_``: (q, d) coefficients on the raw scale of X and y.
        ``intercept_``: (q,) intercept (the mean of y).
        ``n_iter_``: list of power-method iterations per fitted component (as sklearn).
        ``n_features_in_``: d; ``feature_names_in_`` (d,) when X had string column names.
        ``n_components_fitted_``: the first zero component (k when none is zero).
        ``compute_dtype_``: the numpy dtype the fit was computed in.
    """

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

    def __sklearn_tags__(self):
        """The tags of sklearn's PLS; predict / transform keep float32 and float64 inputs' dtype; y is required."""
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        tags.target_tags.required = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    # fit --------------------------------------------------------------------------------------
    def _validate_fit_data(self, X, y, dt):
        """(X (n, d), y (n,) or (n, q)) validated; ValueError / TypeError as sklearn's.

        X is float64 numpy, except with the float32 compute dtype `dt`: then float32 X (numpy, or a
        2-d float32 JAX array, left on its device) stays float32, and its NaN / inf check is left
        to `_standardize_on_device`. y is numpy, checked here.
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        check_consistent_length(X, y)
        on_device = dt == np.float32 and isinstance(X, jax.Array) and X.dtype == jnp.float32 and X.ndim == 2
        # a JAX array is validated as a zero-stride stand-in of its shape: no copy to the host
        stand_in = np.broadcast_to(np.float32(0), X.shape) if on_device else X
        dtypes = [np.float64, np.float32] if dt == np.float32 else np.float64
        Xv, y = validate_data(
            self, stand_in, y, dtype=dtypes, multi_output=True, y_numeric=True, ensure_min_samples=2,
            ensure_all_finite=False,
        )  # fmt: skip
        X = X if on_device else Xv
        return (X if X.dtype == np.float32 else _check_finite(X, "X")), _check_finite(y, "y")

    def fit(self, X, y):
        """Fit the model.

        Args:
            X: (n, d) inputs (array-like, dense, real numbers); float32 X (numpy, or a JAX array, which
                stays on its device) with the float32 compute dtype is standardised on the device.
            y: (n,) or (n, q) targets.

        Returns:
            self, fitted.

        Raises:
            ValueError: NaN / inf, complex or non-numeric input, n < 2, mismatched lengths, a bad
                constructor argument, n_components > min(n, d), or a bad dtype / mesh.
            TypeError: sparse X.
        """
        _check_params(self)
        dt = _dtype(self.dtype)
        mesh = _local_mesh(self.mesh)
        X, y = self._validate_fit_data(X, y, dt)
        n, d = X.shape
        k = int(self.n_components)
        if k > min(n, d):
            raise ValueError(f"`n_components` upper bound is {min(n, d)}. Got {k} instead. Reduce `n_components`.")
        self._predict_1d = y.ndim == 1
        Y = y.reshape(n, -1)
        if X.dtype == np.float32:  # float32 input and compute: X is standardised on the device
            Zx, self._x_mean, self._x_std = _standardize_on_device(X, bool(self.scale), mesh)
        else:
            Zx, self._x_mean, self._x_std = _host_standardize(X, bool(self.scale), "X")
            Zx = _on_devices(_to_compute(Zx, dt, "X"), mesh)
        Zy, self._y_mean, self._y_std = _host_standardize(Y.astype(np.float64), bool(self.scale), "y")
        r = pls_fit(
            Zx,
            _on_devices(_to_compute(Zy, dt, "y", pad_columns=False), mesh),
            k,
            capacity=_capacity(k),
            max_iter=int(self.max_iter),
            tol=float(self.tol),
            mesh=mesh,
            n_rows=_bucket(n),
            standardized=True,
        )
        r = {name: np.asarray(v) for name, v in r.items()}
        for name in ("x_scores", "y_scores"):
            r[name] = r[name][:n]  # the bucket's zero rows and columns are not samples and features
        for name in ("x_weights", "x_loadings"):
            r[name] = r[name][:d]
        stop, reason = int(r["stop"]), int(r["stop_reason"])
        n_iter = r["n_iter"][:stop]
        _warn_stops(stop, reason, k, n_iter, Y.shape[1], int(self.max_iter))
        self._set_fitted(r, k, stop, n_iter, dt)
        return self

    def _set_fitted(self, r: dict, k: int, stop: int, n_iter: np.ndarray, dt) -> None:
        """The fitted attributes (float64) from pls_fit's numpy results `r`."""
        self.n_iter_ = [int(i) for i in n_iter]
        for name in ("x_weights", "y_weights", "x_loadings", "y_loadings", "x_scores", "y_scores"):
            setattr(self, name + "_", r[name][:, :k].astype(np.float64))
        self.x_rotations_, self.y_rotations_, self.coef_ = _rotations(
            self.x_weights_,
            self.x_loadings_,
            self.y_weights_,
            self.y_loadings_,
            self._x_std,
            self._y_std,
            float(np.finfo(dt).eps),
        )
        # standardised X -> y (d, q); predict uses it, so 1e300 / 1e-300 scales never meet in one product
        self._coef_std = (self.x_rotations_ @ self.y_loadings_.T) * self._y_std
        self.intercept_ = self._y_mean
        self.n_components_fitted_ = stop
        self.compute_dtype_ = np.dtype(dt)
        self._n_features_out = k

    def __setstate__(self, state):
        """Unpickle; a model pickled before this class was a sklearn estimator gets its derived attributes."""
        super().__setstate__(state)
        if "coef_" in state and "_coef_std" not in state:
            self._coef_std = (self.x_rotations_ @ self.y_loadings_.T).astype(np.float64) * self._y_std
            self.compute_dtype_ = np.dtype(self._x_mean.dtype)
            self._n_features_out = self.x_rotations_.shape[1]

    # predict / transform ----------------------------------------------------------------------
    def _standardized(self, X):
        """X (m, d) validated against the fit (NotFittedError, feature count / names) and standardised.

        Returns (Z (m, d) float64, the output dtype: X's float dtype, float64 for other input).
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=FLOAT_DTYPES, reset=False, ensure_all_finite=False)
        _check_finite(X, "X")
        return (X.astype(np.float64) - self._x_mean) / self._x_std, X.dtype

    def predict(self, X) -> np.ndarray:
        """Predictions on y's scale.

        Args:
            X: (m, d) inputs.

        Returns:
            (m,) for a 1-d training y, else (m, q); X's float dtype (float64 for integer X).

        Raises:
            sklearn.exceptions.NotFittedError: the model is not fitted.
            ValueError: bad X (non-finite, or another number of features than in fit).
        """
        Z, out_dtype = self._standardized(X)
        out = (Z @ self._coef_std + self.intercept_).astype(out_dtype)
        return out.ravel() if self._predict_1d else out

    def transform(self, X, y=None):
        """The x scores of X, and with y also the y scores (sklearn's ``y_rotations_`` projection).

        Args:
            X: (m, d) inputs.
            y: None, or (m,) / (m, q) targets.

        Returns:
            x scores (m, k); with y the pair (x scores (m, k), y scores (m, k)); in the inputs' float dtypes.

        Raises:
            sklearn.exceptions.NotFittedError: the model is not fitted.
            ValueError: bad X or y, or X and y of different lengths.
        """
        Z, out_dtype = self._standardized(X)
        xs = (Z @ self.x_rotations_).astype(out_dtype)
        if y is None:
            return xs
        check_consistent_length(Z, y)
        y = _check_finite(check_array(y, input_name="y", ensure_2d=False, dtype=FLOAT_DTYPES), "y")
        Zy = (y.reshape(len(y), -1).astype(np.float64) - self._y_mean) / self._y_std
        return xs, (Zy @ self.y_rotations_).astype(y.dtype)

    def fit_transform(self, X, y=None):
        """``fit(X, y)``, then ``transform(X, y)``: the pair (x scores (n, k), y scores (n, k))."""
        return self.fit(X, y).transform(X, y)
