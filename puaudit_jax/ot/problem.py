"""The partial optimal transport problem and its validation.

Problem (Chapel, Alaya & Gasso 2020; PUAudit §3.3)::

    min_G <C, G>   s.t.  G >= 0,  G 1 <= a,  G^T 1 <= b,  1^T G 1 = m,

with ``0 < m <= min(|a|, |b|)`` (``|a|`` = sum of a). Every solver here uses the dummy-point
reduction: append one dummy row of mass ``|b| - m`` and one dummy column of mass ``|a| - m``, with
zero cost between a dummy and a real point and the dummy-dummy cell forbidden. The
augmented problem is a balanced OT problem whose real block carries exactly m.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from puaudit_jax.ot.geometry import Geometry
from puaudit_runtime.floats import first_nonfinite, power_of_two_below
from puaudit_runtime.jit import jit

#: Problems of at most this many cost cells (n x k) compile with XLA:CPU's fast-compile options
#: (``puaudit_runtime.jit``): their first call's compilation (about 0.3 s saved) outweighs the 7-18 %
#: the options add to each solve on two cores (``results/bench_compile_options.md``); larger ones
#: compile with jax.jit's defaults.
FAST_COMPILE_CELLS = 2**22


#: ``prepare="auto"`` on an accelerator: numpy points of at least this many elements in all are checked and
#: normalised on the device. Below it the host's two passes and copy (about 30 ms at 2^24 float32 elements)
#: cost less than the first call's compilation of the device pass, which a single solve would pay.
DEVICE_PREPARE_ELEMENTS = 2**24


def compiles_fast(n: int, k: int, solves: int = 1) -> bool:
    """Whether a program of ``solves`` (n, k) problems takes the fast-compile options (:data:`FAST_COMPILE_CELLS`).

    A batch or a mass path runs a solve per problem or mass: its cells count once per solve.

    Args:
        n: rows of each problem.
        k: columns of each problem.
        solves: problems (or masses) the program solves.
    """
    return solves * n * k <= FAST_COMPILE_CELLS


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PartialProblem:
    """A partial OT problem: a geometry (n x m costs), weights a (n,), b (m,), mass m.

    In a sharded solve a, b are this device's blocks (split like the geometry's rows / columns)
    and m is the whole problem's mass.

    Attributes:
        geom: the :class:`Geometry` of the (n, m) costs.
        a: (n,) nonnegative row weights (0 for padding points).
        b: (m,) nonnegative column weights.
        m: scalar mass to transport, ``0 < m <= min(|a|, |b|)``.
    """

    geom: Geometry
    a: jax.Array
    b: jax.Array
    m: jax.Array

    @property
    def shape(self) -> tuple[int, int]:
        """(n, m), the geometry's shape."""
        return self.geom.shape

    @property
    def compiles_fast(self) -> bool:
        """Whether its programs take the fast-compile options (:func:`compiles_fast`)."""
        return compiles_fast(*self.shape)

    @property
    def dummy_masses(self) -> tuple[jax.Array, jax.Array]:
        """(mass of the dummy row = ``|b| - m``, mass of the dummy column = ``|a| - m``), >= 0."""
        split = self.geom.split
        return (
            jnp.maximum(split.sum(jnp.sum(self.b), "cols") - self.m, 0.0),
            jnp.maximum(split.sum(jnp.sum(self.a), "rows") - self.m, 0.0),
        )


def pad_points(z: np.ndarray, w: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad z (n, d), w (n,) to (size, d), (size,): copies of z[0] with weight 0 appended.

    The solvers give zero-weight points potential -inf and no mass, so padding changes no iterate;
    callers pad to a few shapes (one compiled loop for many sizes) or to a multiple of a device count.

    Args:
        z: the points, shape (n, d).
        w: their weights, shape (n,).
        size: the padded number of points (>= n).

    Returns:
        (z (size, d), w (size,)).

    Raises:
        ValueError: ``size`` below n.
    """
    extra = size - len(z)
    if extra < 0:
        raise ValueError(f"cannot pad {len(z)} points down to {size}")
    return np.concatenate([z, np.repeat(z[:1], extra, 0)]), np.concatenate([w, np.zeros(extra, w.dtype)])


def unit_rows(x: np.ndarray, y: np.ndarray, cost, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """For the cosine cost, x (n, d) and y (k, d) with rows scaled to unit norm; other costs: unchanged.

    One pass for the norms, accumulated in float64 (a float32 sum of squares overflows for rows
    scaled by 1e20 and underflows for rows scaled by 1e-30), and one for the scaled copy.
    The solvers then build their geometry with ``normalised=True``.

    Args:
        x: source points, shape (n, d).
        y: target points, shape (k, d).
        cost: the cost ("cosine" scales; any other string, callable or matrix leaves x, y unchanged).
        dtype: the scaled copies' dtype (None: the input's precision, float32 or float64): no float64
            copy of float32 points.

    Returns:
        (x, y), scaled for the cosine cost.

    Raises:
        ValueError: naming the first zero row of x or y (the cosine cost is undefined there).
    """
    if not _is_cosine(cost):
        return x, y
    return _unit("x", x, dtype), _unit("y", y, dtype)


def _is_cosine(cost) -> bool:
    return isinstance(cost, str) and cost == "cosine"


def _row_norms(z: np.ndarray) -> np.ndarray:
    """(n,) float64 norms of the rows of z (n, d), accumulated in float64."""
    return np.sqrt(np.einsum("ij,ij->i", z, z, dtype=np.float64))


def _unit(name: str, z: np.ndarray, dtype) -> np.ndarray:
    z = np.asarray(z)
    out = np.dtype(dtype) if dtype is not None else (z.dtype if z.dtype in (np.float32, np.float64) else np.float64)
    norms = _row_norms(z)
    zero = norms <= np.finfo(np.float64).tiny
    if zero.any():
        raise zero_row_error(name, int(np.argmax(zero)), int(zero.sum()))
    inv = (1.0 / norms)[:, None]
    if out == np.float64 or z.dtype == np.float64:  # the product in float64 (1 / norm may leave float32's range)
        return np.multiply(z, inv, dtype=np.float64).astype(out, copy=False)
    return np.multiply(z, inv.astype(np.float32), dtype=np.float32)


def to_device(value, dtype) -> jax.Array:
    """``value`` (a JAX array, a numpy array or a number) as a device array of ``dtype``.

    A host value is cast on the host and then transferred; only a JAX array of another dtype is cast on its
    device. (``jnp.asarray(host_value, dtype)`` casts after the transfer: a program compiled per shape, two of
    them on a solve's first call, each a fixed cost that an accelerator's compiler makes larger.)

    Args:
        value: the array or scalar.
        dtype: the result's dtype (e.g. "float32").

    Returns:
        The device array (a JAX array of ``dtype`` is returned as it is).
    """
    if isinstance(value, jax.Array):
        return value if value.dtype == dtype else value.astype(dtype)
    return jax.device_put(np.asarray(value, dtype))


def device_points(x, y, device=None) -> tuple[jax.Array, jax.Array]:
    """Points as device arrays: host arrays transferred, as they are, to ``device``; JAX arrays kept where they are.

    Args:
        x: (n, d) source points, numpy or a JAX array.
        y: (k, d) target points.
        device: where host points go (None: JAX's default device).
    """
    return tuple(z if isinstance(z, jax.Array) else jax.device_put(z, device) for z in (x, y))


def float32_points(x, y) -> bool:
    """Whether x and y are both float32 arrays (numpy or JAX): what :func:`checked_on_device` takes."""
    return all(getattr(z, "dtype", None) == np.float32 for z in (x, y))


def prepare_on_device(prepare: str, layout, dtype: str, method: str, x, y) -> bool:
    """Whether the points x, y (as given) are checked and normalised on the device (``SolveOptions.prepare``).

    Never across processes: each process then passes the full inputs, placed from its host (``sharded.place``).

    Args:
        prepare: ``SolveOptions.prepare`` ("auto", "device" or "host").
        layout: None (one device) or the mesh's :class:`~puaudit_jax.ot.sharded.Layout`.
        dtype: the solve's dtype ("float32" or "float64").
        method: ``SolveOptions.method`` (the exact solver's points are float64, on the host).
        x: (n, d) source points as given (numpy or a JAX array).
        y: (k, d) target points as given.
    """
    if prepare == "host" or dtype != "float32" or method == "exact" or not float32_points(x, y):
        return False
    if layout is not None and not all(d.process_index == jax.process_index() for d in layout.mesh.devices.flat):
        return False
    if prepare == "device" or isinstance(x, jax.Array) or isinstance(y, jax.Array):
        return True
    return jax.default_backend() != "cpu" and np.size(x) + np.size(y) >= DEVICE_PREPARE_ELEMENTS


def check_sqeuclidean_range(x: np.ndarray, y: np.ndarray, dtype) -> None:
    """Raise ValueError when the squared distances would all vanish, or overflow, in ``dtype``.

    Vanish: every cost would read 0 and the plan be arbitrary, though the points differ (e.g.
    coordinates of 1e-30 in float32). Overflow: a squared distance would be inf (coordinates of 1e200).

    Args:
        x: source points, shape (n, d).
        y: target points, shape (k, d).
        dtype: the dtype the costs are computed in ("float32" or "float64").

    Raises:
        ValueError: the coordinates' magnitude (saying how to rescale).
    """
    check_sqeuclidean_scale(max(float(np.abs(x).max()), float(np.abs(y).max())), x.shape[1], dtype)


def check_sqeuclidean_scale(scale: float, d: int, dtype) -> None:
    """:func:`check_sqeuclidean_range` for points whose largest ``|coordinate|`` is ``scale``.

    Args:
        scale: the largest ``|coordinate|`` of both clouds.
        d: the points' dimension.
        dtype: the dtype the costs are computed in ("float32" or "float64").

    Raises:
        ValueError: the coordinates' magnitude (saying how to rescale).
    """
    if scale == 0:
        return
    info, digits = np.finfo(dtype), 2 * np.log10(scale)  # the squares' decimal exponent, without computing them
    if digits < np.log10(info.tiny) + 3:
        raise ValueError(
            f"x, y: coordinates of magnitude {scale:.1e} give squared distances below the smallest normal "
            f"{dtype} ({info.tiny:.1e}): every cost would read 0. Rescale the points, pass dtype='float64' "
            "or method='exact'"
        )
    if digits + np.log10(4 * d) > np.log10(info.max):
        raise ValueError(
            f"x, y: coordinates of magnitude {scale:.1e} give squared distances above the largest {dtype} "
            f"({info.max:.1e}): the costs would overflow. Rescale the points"
            + (" or pass dtype='float64'" if np.dtype(dtype) != np.float64 else "")
        )


@dataclasses.dataclass(frozen=True)
class PointFacts:
    """What the check of one point cloud found (:func:`prepared_on_device`, :func:`host_facts`).

    Attributes:
        finite: no NaN or inf anywhere.
        zero_rows: rows that are zero vectors (counted for the cosine cost only, else 0).
        first_zero: the index of the first of them (0 when there is none).
        scale: the largest ``|coordinate|`` (what the squared Euclidean cost's range check needs).
    """

    finite: bool
    zero_rows: int
    first_zero: int
    scale: float


def zero_row_error(name: str, first: int, count: int) -> ValueError:
    """The error of a cloud with zero rows under the cosine cost.

    Args:
        name: the cloud as the caller knows it ("x", "y", "y_local", ...).
        first: the index of its first zero row.
        count: how many rows are zero.
    """
    return ValueError(f"{name} row {first} is a zero vector: the cosine cost is undefined ({count} zero rows)")


def host_facts(z: np.ndarray, cost) -> PointFacts:
    """:class:`PointFacts` of a host cloud (n, d), by :func:`unit_rows`' criterion for a zero row (one pass)."""
    z = np.asarray(z)
    finite = bool(np.isfinite(z).all())
    zero = _row_norms(z) <= np.finfo(np.float64).tiny if _is_cosine(cost) and finite else np.zeros(0, bool)
    scale = float(np.abs(z).max()) if finite and z.size else 0.0
    return PointFacts(finite, int(zero.sum()), int(np.argmax(zero)) if zero.any() else 0, scale)


def prepared_on_device(x, y, cost) -> tuple[jax.Array, jax.Array, tuple[PointFacts, PointFacts]]:
    """float32 points checked on their device, and for the cosine cost scaled to unit rows there; nothing raised.

    The host's O(n d) work (:func:`validate`'s NaN / inf check, :func:`unit_rows`' norms and scaling) as
    one jitted program over both clouds (each row's sum of squares and largest ``|value|``, a NaN or inf
    showing in the latter, and the scaled rows); only a few scalars come back. A JAX array stays on its
    device; a numpy array is transferred once, as it is. Where a row's sum of squares leaves float32's safe
    range (coordinates of 1e20 or 1e-30) the rows are scaled again, each first divided by the power of two of
    its largest ``|value|`` (exact), so that no norm overflows or vanishes. One difference from the host: a
    row whose every coordinate is below float32's smallest normal (1.2e-38) counts as a zero row (devices
    flush subnormals).

    Args:
        x: (n, d) float32 source points (numpy or JAX), n >= 1, shapes checked by :func:`validate`.
        y: (k, d) float32 target points, k >= 1.
        cost: "cosine" scales the rows; any other cost leaves them as they are (checked only).

    Returns:
        (x, y, (facts of x, facts of y)): the points as device arrays (unit rows for the cosine cost, meaningful
        only where the facts show no NaN / inf and no zero row), and what the check found
        (:class:`PointFacts`).
    """
    unit = _is_cosine(cost)
    x, y = jnp.asarray(x), jnp.asarray(y)
    ux, uy, raw = _prepared(x, y, unit=unit, careful=False)
    raw = jax.device_get(raw)  # a few scalars; the points stay where they are
    facts = tuple(PointFacts(bool(f[0]), int(f[1]) if unit else 0, int(f[2]) if unit else 0, float(f[5]))
                  for f in raw)  # fmt: skip
    clean = all(f.finite and not f.zero_rows for f in facts)
    if unit and clean and not all(_SAFE_SQUARES[0] <= f[3] and f[4] <= _SAFE_SQUARES[1] for f in raw):
        ux, uy, _ = _prepared(x, y, unit=True, careful=True)
    return ux, uy, facts


def checked_on_device(x, y, cost) -> tuple[jax.Array, jax.Array, float]:
    """:func:`prepared_on_device`, raising the host's errors (:func:`validate`, :func:`unit_rows`) word for word.

    Args:
        x: (n, d) float32 source points (numpy or JAX), shapes checked by :func:`validate`.
        y: (k, d) float32 target points.
        cost: "cosine" scales the rows; any other cost leaves them as they are (checked only).

    Returns:
        (x, y, scale): the points as device arrays (unit rows for the cosine cost), and the largest
        ``|coordinate|`` of both clouds (what the squared Euclidean cost's range check needs).

    Raises:
        ValueError: naming the cloud and the first index of a NaN / inf, or (cosine) the first zero row.
    """
    x, y = jnp.asarray(x), jnp.asarray(y)
    ux, uy, facts = prepared_on_device(x, y, cost)
    for name, z, f in (("x", x, facts[0]), ("y", y, facts[1])):
        if not f.finite:
            _, row, col, _ = jax.device_get(first_nonfinite(z))
            raise ValueError(f"{name} contains NaN or inf (first at index {[int(row), int(col)]})")
        if f.zero_rows:
            raise zero_row_error(name, f.first_zero, f.zero_rows)
    return ux, uy, max(facts[0].scale, facts[1].scale)


#: Row sums of squares in this range are normal float32 numbers whose reciprocal square root is exact to
#: rounding; outside it every row is first scaled by a power of two.
_SAFE_SQUARES = (2.0**-100, 2.0**100)


@functools.partial(jit, static_argnames=("unit", "careful"))  # one pass: XLA:CPU's fast-compile options always
def _prepared(x: jax.Array, y: jax.Array, *, unit: bool, careful: bool):
    """(x, y, facts): the program of :func:`prepared_on_device`.

    The rows scaled to unit norm (``unit``; ``careful``: by a power of two first), and per cloud: all
    finite, zero rows, the first, the smallest and largest row sum of squares, the largest ``|value|``.
    """

    def one(z):
        top = jnp.max(jnp.abs(z), axis=1)  # (n,); NaN or inf where the row has one
        zero = top == 0
        if careful:
            z = z / power_of_two_below(top)[:, None]  # exact; 1 for a zero row
        squares = jnp.sum(z * z, axis=1, keepdims=True)
        facts = (jnp.all(jnp.isfinite(top)), jnp.sum(zero), jnp.argmax(zero), jnp.min(squares), jnp.max(squares),
                 jnp.max(top))  # fmt: skip
        return (z * jax.lax.rsqrt(squares) if unit else z), facts

    (x, fx), (y, fy) = one(x), one(y)
    return x, y, (fx, fy)


def _finite(name: str, arr: np.ndarray) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = np.argwhere(bad)[0].tolist()
        raise ValueError(f"{name} contains NaN or inf (first at index {idx})")


def _weights(name: str, w, n: int, dtype) -> np.ndarray:
    if w is None:
        if n == 0:
            raise ValueError(f"{name}: empty point cloud")
        return np.full(n, 1.0 / n, dtype=dtype)
    w = np.asarray(w, dtype=dtype)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) to match the points; got {w.shape}")
    if n == 0:
        raise ValueError(f"{name}: empty weights")
    _finite(name, w)
    if (w < 0).any():
        raise ValueError(f"{name} has negative entries (first at index {int(np.argmax(w < 0))})")
    if w.sum() <= 0:
        raise ValueError(f"{name} sums to zero")
    return w


def _float_points(z, dtype) -> np.ndarray:
    """``z`` as a numpy array: float32 and float64 arrays as they are (no copy), anything else as ``dtype``."""
    z = np.asarray(z)
    return z if z.dtype in (np.float32, np.float64) else z.astype(dtype)


def validate(x, y, m, a=None, b=None, cost="cosine", dtype=np.float64, on_device: bool = False):
    """Check and convert concrete inputs; raise ``ValueError`` naming the argument.

    Args:
      x: (n, d) points, or None when ``cost`` is an (n, m) matrix.
      y: (m, d) points, or None when ``cost`` is a matrix.
      m: transported mass, ``0 < m <= min(|a|, |b|)``.
      a: nonnegative (n,) weights (default uniform 1/n).
      b: nonnegative (m,) weights (default uniform 1/m).
      cost: "cosine", "sqeuclidean", a callable, or an (n, m) array.
      dtype: numpy dtype of the returned arrays.
      on_device: float32 points (numpy or JAX arrays) are returned as they are and not checked for NaN / inf
        here: the caller checks them where they will be used (:func:`checked_on_device`).

    Returns:
      (x, y, matrix, a, b, m) as numpy arrays of ``dtype`` (x, y or matrix may be None), except that
      float32 and float64 points keep their precision (no host copy of large clouds), and with ``on_device``
      float32 points are returned as given (JAX arrays stay JAX arrays). Zero rows under the cosine cost
      are found by :func:`unit_rows` (or :func:`checked_on_device`), which every caller applies next.
    """
    matrix = None
    if not (isinstance(cost, str) or callable(cost)):
        matrix = np.asarray(cost, dtype=dtype)
        if matrix.ndim != 2:
            raise ValueError(f"cost matrix must be 2-D; got shape {matrix.shape}")
        _finite("cost", matrix)
        n, k = matrix.shape
        if x is not None or y is not None:
            xs = None if x is None else np.shape(x)[0]
            ys = None if y is None else np.shape(y)[0]
            if (xs is not None and xs != n) or (ys is not None and ys != k):
                raise ValueError(f"cost matrix shape {matrix.shape} does not match x rows {xs} / y rows {ys}")
        x = y = None
    else:
        if isinstance(cost, str) and cost not in ("cosine", "sqeuclidean"):
            raise ValueError(f"cost must be 'cosine', 'sqeuclidean', a callable or a matrix; got {cost!r}")
        if x is None or y is None:
            raise ValueError("x and y are required unless cost is a precomputed matrix")
        deferred = on_device and float32_points(x, y)
        if not deferred:
            x, y = _float_points(x, dtype), _float_points(y, dtype)
        for name, z in (("x", x), ("y", y)):
            if z.ndim != 2:
                raise ValueError(f"{name} must be 2-D (points x dims); got shape {tuple(z.shape)}")
            if z.shape[0] == 0:
                raise ValueError(f"{name}: empty point cloud")
            if not deferred:
                _finite(name, z)
        if x.shape[1] != y.shape[1]:
            raise ValueError(f"dimension mismatch: x has d={x.shape[1]}, y has d={y.shape[1]}")
        n, k = x.shape[0], y.shape[0]
    a = _weights("a", a, n, dtype)
    b = _weights("b", b, k, dtype)
    return x, y, matrix, a, b, checked_mass(m, a, b)


def checked_mass(m, a: np.ndarray, b: np.ndarray) -> float:
    """The mass m as a float in ``(0, min(|a|, |b|)]`` (rounding above the cap clipped to it).

    A bool or a string is not a mass (``float(True)`` and ``float("0.5")`` would read as one).

    Args:
        m: the mass to transport.
        a: source weights, shape (n,).
        b: target weights, shape (k,).

    Returns:
        ``float(m)``, at most ``min(|a|, |b|)``.

    Raises:
        ValueError: m not a number, not finite, <= 0 or above ``min(|a|, |b|)`` (beyond relative 1e-12).
    """
    if isinstance(m, (bool, np.bool_, str, bytes)) or getattr(m, "dtype", None) == np.bool_:
        raise ValueError(f"m must be a number (the mass to transport); got {m!r}")
    try:
        m = float(m)
    except (TypeError, ValueError):
        raise ValueError(f"m must be a number; got {m!r}") from None
    cap = min(a.sum(), b.sum())
    if not np.isfinite(m) or m <= 0 or m > cap * (1 + 1e-12):
        raise ValueError(f"m must lie in (0, min(|a|, |b|)] = (0, {cap:.6g}]; got {m!r}")
    return min(m, cap)
