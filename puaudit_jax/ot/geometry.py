"""Ground costs between two point clouds, dense or computed block by block.

A :class:`Geometry` holds what is needed to produce the cost matrix C (n x m) between the
rows of ``x`` (n x d) and ``y`` (m x d), and the one operation every Sinkhorn half-step
needs: for potentials u (n,) and v (m,) and a temperature eps::

    log sum_j exp((u_i + v_j - C_ij) / eps)     (a row reduction, shape (n,))
    log sum_i exp((u_i + v_j - C_ij) / eps)     (a column reduction, shape (m,))

When ``block_size`` is None the matrix is materialised once (O(n m) memory, two passes over
it per Sinkhorn iteration). Otherwise C is never built: blocks of ``block_size`` rows (or
columns) are recomputed from the point clouds inside the reduction, so memory stays
O((n + m) d + block_size * max(n, m)). The cosine cost is low rank (C = 1 - Zx Zy^T after
normalisation), so a block is one matrix product.

Costs: ``"cosine"`` (``1 - <x/|x|, y/|y|>``, in [0, 2]), ``"sqeuclidean"`` (``|x - y|^2``), a callable
``fn(x_block, y_block) -> (bx, by)`` array of pairwise costs, or a precomputed matrix.

Inside a sharded solve (``puaudit_jax.ot.sharded``) a geometry is one device's block of the
problem and ``split`` names the mesh axes its rows and columns are split over: the reductions
below then return the whole problem's sums (see ``split.py``), so the solver is the same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from puaudit_jax.ot.settings import COST_PRECISIONS
from puaudit_jax.ot.split import Split

CostFn = Callable[[jax.Array, jax.Array], jax.Array]

COST_KINDS = ("cosine", "sqeuclidean", "callable", "matrix")

# COST_PRECISIONS (settings.py, where every setting's range lives): the precision of the products x y^T
# behind the cosine and squared Euclidean costs during a solve. "default" is the backend's own for float32
# (TF32 on recent NVIDIA GPUs, bf16 passes on TPUs, float32 on the CPU), "highest" full float32, "bfloat16"
# inputs rounded to bfloat16 with float32 accumulation (the accelerators' fast units; the same numbers on
# the CPU). A certificate evaluates its costs at a precision whose error :meth:`Geometry.cost_error`
# bounds (:meth:`Geometry.certified`): "highest", or off the CPU "bfloat16x3", three bfloat16 products
# whose sum is float32's product to ~2e-4 at a third of the bf16 units' rate (about 6x "highest"'s on an
# H200 by its rates; not measured yet).

#: The precisions a geometry's products run at: the solve's (:data:`COST_PRECISIONS`) and the certificate's.
PRECISIONS = (*COST_PRECISIONS, "bfloat16x3")
#: The relative error of rounding to bfloat16 (8 significant bits), float64 -> float32 -> bfloat16 included.
BFLOAT16_UNIT = 2.0**-8 * (1.0 + 2.0**-15)


def _normalise_rows(z: jax.Array) -> jax.Array:
    return z / jnp.linalg.norm(z, axis=-1, keepdims=True)


def _on_fast_units() -> bool:
    """Whether products run on an accelerator's bf16 units (XLA:CPU has none: its float32 product, same numbers)."""
    return jax.default_backend() != "cpu"


def _bfloat16_values(z: jax.Array) -> jax.Array:
    """``z`` rounded to the nearest bfloat16 (ties to even), in z's dtype.

    On the bits: XLA may drop a float32 -> bfloat16 -> float32 round trip (excess precision), and did in
    one of the blocked passes, which then disagreed with the other by the rounding itself.
    """
    bits = jax.lax.bitcast_convert_type(z.astype(jnp.float32), jnp.uint32)
    bits = (bits + jnp.uint32(0x7FFF) + ((bits >> 16) & jnp.uint32(1))) & jnp.uint32(0xFFFF0000)
    return jax.lax.bitcast_convert_type(bits, jnp.float32).astype(z.dtype)


def _operand(z: jax.Array, precision: str, side: str) -> jax.Array:
    """Points ``z`` (b, d) as the products at ``precision`` take them (prepared once per pass, not per block).

    "bfloat16": rounded to bfloat16. "bfloat16x3": split as z = hi + lo + rest, hi and lo bfloat16 and
    ``|rest| <= 2^-16 |z|`` (z - hi is exact in float32), laid out as [hi | hi | lo] for the rows and
    [hi | lo | hi] for the columns (``side``), so one product of width 3 d is hi hi' + hi lo' + lo hi'.
    Both as bfloat16 arrays on the accelerators, as float32 values on the CPU. Other precisions: z.
    """
    if precision not in ("bfloat16", "bfloat16x3"):
        return z
    hi = _bfloat16_values(z)
    if precision == "bfloat16x3":
        lo = _bfloat16_values(z - hi)
        hi = jnp.concatenate((hi, hi, lo) if side == "rows" else (hi, lo, hi), axis=-1)
    return hi.astype(jnp.bfloat16) if _on_fast_units() else hi


def _product(xo: jax.Array, yo: jax.Array, precision: str, dtype) -> jax.Array:
    """(bx, by) inner products of :func:`_operand`'s operands, in ``dtype``.

    bfloat16 operands run on the bf16 units, accumulating in ``dtype``: their products are exact, only the
    sums round. Others at ``precision`` ("highest" or the backend's default).
    """
    if xo.dtype == jnp.bfloat16:
        return jnp.dot(xo, yo.T, preferred_element_type=dtype)
    return jnp.dot(xo, yo.T, precision=jax.lax.Precision.HIGHEST if precision == "highest" else None)


def _gamma(k: int, dtype) -> float:
    """Higham's gamma(k) = k u / (1 - k u), u the unit roundoff of ``dtype``."""
    u = float(jnp.finfo(dtype).eps) / 2
    return k * u / (1.0 - k * u)


def _product_error(precision: str, d: int, dtype) -> tuple[float, float]:
    """(inputs, sums): bounds on a product x.y's error from rounding its inputs and from its float sums, per X Y.

    :func:`cost_error_bound` has the terms; ``d`` the dimension, ``dtype`` the accumulation's.
    """
    e = BFLOAT16_UNIT
    if precision == "bfloat16":
        return e * (2 + e), _gamma(d, dtype) * (1 + e) ** 2
    if precision == "bfloat16x3":
        return e * e * (3 + 4 * e + 2 * e * e), _gamma(3 * d, dtype) * (1 + e) ** 2 * (1 + 2 * e)
    return 0.0, _gamma(d, dtype)


def cost_error_bound(kind: str, precision: str, d: int, norm_x, norm_y, dtype) -> jax.Array:
    """A bound on ``|C_ij - C*_ij|``: the cost as computed at ``precision`` against exact arithmetic.

    For points of at most the norms given (scalars). With u the unit roundoff of ``dtype``, e that of
    bfloat16 (:data:`BFLOAT16_UNIT`) and ``gamma(k) = k u / (1 - k u)`` (the float sum of k terms is off by at
    most gamma(k - 1) times the sum of their magnitudes, in any order: Higham, Accuracy and Stability of
    Numerical Algorithms, 2002, Lemma 3.4 and Sec. 3.1), a product x.y of norms X, Y is off by at most

    - "highest" (and "default" on the CPU, whose float32 product is float32's): gamma(d) X Y;
    - "bfloat16": the rounding of both inputs, e (2 + e) X Y, and the sum, gamma(d) (1 + e)^2 X Y;
    - "bfloat16x3": the dropped terms hi rest' + lo lo' + lo rest' + rest y, e^2 (3 + 4 e + 2 e^2) X Y, and
      the sum of 3 d terms, gamma(3 d) (1 + e)^2 (1 + 2 e) X Y;

    plus ``4 d tiny (1 + X) (1 + Y)`` for parts and products flushed to zero below float32's smallest normal.
    The cosine cost adds the rounding of ``1 - x.y``; the squared Euclidean cost doubles the product's
    and adds the norms' sums and the two additions, ``gamma(d + 2) (X + Y)^2``. The norms themselves are
    divided by ``1 - gamma(d + 2)`` (float sums of squares and a square root: they may be that much short).

    Args:
        kind: "cosine" or "sqeuclidean".
        precision: one of :data:`PRECISIONS`; "default" only on the CPU.
        d: the points' dimension.
        norm_x: the largest row norm of x (a scalar, as computed in ``dtype``).
        norm_y: the largest row norm of y.
        dtype: the costs' float dtype.

    Returns:
        The bound, a scalar in cost units.

    Raises:
        ValueError: "default" off the CPU (the backend's default precision has no known error).
    """
    if precision == "default" and _on_fast_units():
        raise ValueError(f"the {jax.default_backend()} backend's default precision has no known error bound: "
                         "certify at 'highest' or 'bfloat16x3' (Geometry.certified)")  # fmt: skip
    x, y = (norm / (1 - _gamma(d + 2, dtype)) for norm in (norm_x, norm_y))
    flushed = 4 * d * float(jnp.finfo(jnp.float32).tiny) * (1 + x) * (1 + y)
    product = sum(_product_error(precision, d, dtype)) * x * y + flushed
    if kind == "cosine":
        return product + _gamma(1, dtype) * (1 + x * y + product)
    return 2 * product * (1 + _gamma(2, dtype)) + _gamma(d + 2, dtype) * (x + y) ** 2


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Geometry:
    """Cost between two point clouds (or a precomputed cost matrix).

    Attributes:
      x: (n, d) source points (rows normalised already when ``kind == "cosine"``), or None
        for a precomputed matrix.
      y: (m, d) target points, or None.
      matrix: (n, m) precomputed or materialised cost matrix, or None (blocked mode).
      kind: one of ``COST_KINDS``.
      fn: pairwise cost callable for ``kind == "callable"``.
      block_size: rows/columns per block when the matrix is not materialised.
      split: mesh axes splitting the rows / columns (inside ``shard_map``); default: none.
      precision: one of :data:`PRECISIONS`, the products behind the point costs.
    """

    x: jax.Array | None
    y: jax.Array | None
    matrix: jax.Array | None
    kind: str = dataclasses.field(metadata=dict(static=True), default="cosine")
    fn: CostFn | None = dataclasses.field(metadata=dict(static=True), default=None)
    block_size: int | None = dataclasses.field(metadata=dict(static=True), default=None)
    split: Split = dataclasses.field(metadata=dict(static=True), default=Split())
    precision: str = dataclasses.field(metadata=dict(static=True), default="default")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_points(
        cls,
        x: jax.Array,
        y: jax.Array,
        cost: str | CostFn = "cosine",
        *,
        block_size: int | None = None,
        split: Split = Split(),
        normalised: bool = False,
        precision: str = "default",
    ) -> Geometry:
        """Build a geometry; materialises C unless ``block_size`` is given.

        The cosine cost normalises the rows here (differentiably), so callers may pass raw
        embeddings; zero rows must be rejected before (see ``problem.validate``). Callers whose
        rows are unit vectors already (``problem.unit_rows``, on the host) pass
        ``normalised=True``: XLA:CPU fuses the in-graph normalisation into the cost matrix
        product, which then ran 2-7x slower for n >= 4096 (``experiments/benchmarks/ot.py``).

        Args:
            x: (n, d) float source points.
            y: (m, d) float target points, same d and dtype.
            cost: "cosine", "sqeuclidean" or a callable ``fn(x_block, y_block) -> (bx, by)``.
            block_size: rows/columns per block; None materialises the (n, m) matrix.
            split: mesh axes splitting the rows / columns (inside ``shard_map``).
            normalised: the rows are unit vectors already (cosine cost only).
            precision: one of :data:`PRECISIONS`: the products behind the cosine and squared Euclidean
                costs (a callable cost computes its own).

        Returns:
            The :class:`Geometry`.

        Raises:
            ValueError: an unknown cost name or precision.
        """
        if precision not in PRECISIONS:
            raise ValueError(f"cost precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
        if callable(cost):
            kind, fn = "callable", cost
        elif cost in ("cosine", "sqeuclidean"):
            kind, fn = cost, None
        else:
            raise ValueError(f"cost must be 'cosine', 'sqeuclidean', a callable or a matrix; got {cost!r}")
        if kind == "cosine" and not normalised:
            x, y = _normalise_rows(x), _normalise_rows(y)
        geom = cls(x=x, y=y, matrix=None, kind=kind, fn=fn, block_size=block_size, split=split, precision=precision)
        if block_size is None:
            geom = dataclasses.replace(geom, matrix=geom.cost_block(x, y))
        return geom

    @classmethod
    def from_matrix(cls, matrix: jax.Array, split: Split = Split()) -> Geometry:
        """A geometry of a precomputed (n, m) cost matrix (``split``: as in :meth:`from_points`)."""
        return cls(x=None, y=None, matrix=matrix, kind="matrix", split=split)

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, int]:
        """The rows and columns (n, m) of the cost matrix (this device's block when split)."""
        if self.matrix is not None:
            return tuple(self.matrix.shape)  # type: ignore[return-value]
        return (self.x.shape[0], self.y.shape[0])

    @property
    def dtype(self):
        """The dtype of the costs (of the matrix, or of the points in blocked mode)."""
        return (self.matrix if self.matrix is not None else self.x).dtype

    @property
    def is_blocked(self) -> bool:
        """Whether C is computed block by block (no materialised matrix)."""
        return self.matrix is None

    def certified(self, precision: str = "auto") -> Geometry:
        """This geometry with its point costs at a precision a certificate evaluates (:meth:`cost_error`).

        A certificate's bounds then hold for the exact costs of the points, not for the rounded ones a
        faster precision solved with. A materialised matrix is computed again; a given matrix or a
        callable cost is the problem itself (returned as it is).

        Args:
            precision: "highest", "bfloat16x3", or "auto": "bfloat16x3" for float32 points off the CPU
                (the bf16 units: about 6x "highest" on an H200 by its rates, 2x on TPUs), else "highest".

        Returns:
            The :class:`Geometry` at that precision (itself when it is already).

        Raises:
            ValueError: another precision.
        """
        if precision == "auto":
            float32 = self.x is not None and self.x.dtype == jnp.float32
            precision = "bfloat16x3" if float32 and _on_fast_units() else "highest"
        if precision not in ("highest", "bfloat16x3"):
            raise ValueError(f"a certificate's precision is 'highest', 'bfloat16x3' or 'auto'; got {precision!r}")
        cpu_default = self.precision == "default" and not _on_fast_units()  # XLA:CPU's float32 product is float32's
        same = self.precision == precision or (cpu_default and precision == "highest")
        if same or self.kind in ("matrix", "callable"):
            return self
        geom = dataclasses.replace(self, precision=precision, matrix=None)
        return geom if self.is_blocked else dataclasses.replace(geom, matrix=geom.cost_block(self.x, self.y))

    def cost_error(self) -> jax.Array:
        """A bound on ``|C_ij - C*_ij|`` over all entries: the costs as computed, against exact arithmetic.

        On the geometry's points (normalised for the cosine cost), at its :attr:`precision`
        (:func:`cost_error_bound`; one pass over the points for their norms). 0 for a given matrix or a
        callable cost: those costs are the problem.

        Returns:
            The bound, a scalar in cost units (of the whole problem when split).

        Raises:
            ValueError: precision "default" off the CPU.
        """
        if self.kind in ("matrix", "callable"):
            return jnp.zeros((), self.dtype)
        norm_x, norm_y = (jnp.sqrt(self.split.max(jnp.max(jnp.sum(z * z, axis=-1)), side))
                          for z, side in ((self.x, "rows"), (self.y, "cols")))  # fmt: skip
        return cost_error_bound(self.kind, self.precision, self.x.shape[1], norm_x, norm_y, self.dtype)

    def _operands(self, xb: jax.Array, yb: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Row blocks of x and y as the products at :attr:`precision` take them (:func:`_operand`)."""
        return _operand(xb, self.precision, "rows"), _operand(yb, self.precision, "cols")

    def _costs(self, xb: jax.Array, yb: jax.Array, xo: jax.Array, yo: jax.Array) -> jax.Array:
        """(bx, by) costs between row blocks xb, yb of x and y, from their operands xo, yo (:meth:`_operands`)."""
        if self.kind == "cosine":
            return 1.0 - _product(xo, yo, self.precision, self.dtype)
        if self.kind == "sqeuclidean":
            norms = jnp.sum(xb * xb, axis=-1)[:, None] + jnp.sum(yb * yb, axis=-1)[None, :]
            return jnp.maximum(norms - 2.0 * _product(xo, yo, self.precision, self.dtype), 0.0)
        if self.kind == "callable":
            return self.fn(xb, yb)
        raise ValueError("a precomputed-matrix geometry has no point clouds")

    def cost_block(self, xb: jax.Array, yb: jax.Array) -> jax.Array:
        """(bx, by) costs between row blocks of x and y (their products at :attr:`precision`)."""
        return self._costs(xb, yb, *self._operands(xb, yb))

    def cost_matrix(self) -> jax.Array:
        """The dense (n, m) cost matrix (builds it in blocked mode: O(n m) memory)."""
        return self.matrix if self.matrix is not None else self.cost_block(self.x, self.y)

    # ------------------------------------------------------------------ reductions
    def _blocks(self, axis: int, body: Callable[[jax.Array, jax.Array], jax.Array], u: jax.Array) -> jax.Array:
        """Apply ``body(cost_block, u_block) -> (block, ...)`` over blocks and concatenate.

        Blocks of rows (axis=1 reductions) or columns (axis=0 reductions); ``u`` is sliced alongside.
        Each cost block has the reduced axis last.

        Blocks are read with dynamic slices inside a ``fori_loop``: slicing and reshaping the
        point cloud into (blocks, block_size, d) would copy it at every call site. The other cloud's
        operands (:func:`_operand`) are prepared once, before the loop.
        """
        pts, other = (self.x, self.y) if axis == 1 else (self.y, self.x)
        n, bs = pts.shape[0], self.block_size
        nb, rem = divmod(n, bs)
        side, other_side = ("rows", "cols") if axis == 1 else ("cols", "rows")
        other_op = _operand(other, self.precision, other_side)

        def one(p, ub):
            po = _operand(p, self.precision, side)
            c = self._costs(p, other, po, other_op) if axis == 1 else self._costs(other, p, other_op, po).T
            return body(c, ub)

        out = []
        if nb:
            shape = jax.eval_shape(one, pts[:bs], u[:bs])

            def step(i, acc):
                p = jax.lax.dynamic_slice_in_dim(pts, i * bs, bs)
                ub = jax.lax.dynamic_slice_in_dim(u, i * bs, bs)
                return jax.lax.dynamic_update_slice_in_dim(acc, one(p, ub), i * bs, axis=0)

            # a block depends on both point clouds: it varies over every axis that splits them
            init = self.split.vary(jnp.zeros((nb * bs,) + shape.shape[1:], shape.dtype), "all")
            out.append(jax.lax.fori_loop(0, nb, step, init))
        if rem:
            out.append(one(pts[nb * bs :], u[nb * bs :]))
        return out[0] if len(out) == 1 else jnp.concatenate(out)

    def log_sum_exp(self, u: jax.Array, v: jax.Array, eps, axis: int, stable: bool) -> jax.Array:
        """Log of the sum over ``axis`` of exp((u_i + v_j - C_ij) / eps): one Sinkhorn half-step's reduction.

        ``stable=False`` is a single pass with no max-subtraction: exact when the summands
        are plan entries of a nearly feasible plan (all <= 1, so no overflow); the caller
        checks for underflow and redoes the step with ``stable=True`` (two passes) if needed.
        Split geometries combine the devices' partial results (one collective of the result's
        size for the one-pass form, two for the stable one).

        Args:
            u: (n,) row potentials.
            v: (m,) column potentials.
            eps: entropic temperature (the cost's units).
            axis: 1 reduces over columns, 0 over rows.
            stable: max-subtracted two-pass form (else one pass).

        Returns:
            (n,) for axis=1, (m,) for axis=0.
        """
        # Orient so that the reduction always runs over the last axis of the block.
        keep, red = (u, v) if axis == 1 else (v, u)

        def body(c, kb):  # c: (block, other) costs, kb: (block,) kept potentials
            z = (kb[:, None] + red[None, :] - c) / eps
            if stable:
                return jax.nn.logsumexp(z, axis=1)
            return jnp.sum(jnp.exp(z), axis=1)

        if not self.is_blocked:
            c = self.matrix if axis == 1 else self.matrix.T
            local = body(c, keep)
        else:
            local = self._blocks(axis, body, keep)
        over = "cols" if axis == 1 else "rows"
        if stable:
            return self.split.logsumexp(local, over)
        return jnp.log(self.split.sum(local, over))

    def plan_sums(self, u: jax.Array, v: jax.Array, eps) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Row sums, column sums and cost of the plan P = exp((u + v - C) / eps).

        Args:
            u: (n,) row potentials.
            v: (m,) column potentials.
            eps: entropic temperature.

        Returns:
            (row sums (n,), column sums (m,), <C, P> scalar).
        """
        s = self.split
        if not self.is_blocked:
            p = jnp.exp((u[:, None] + v[None, :] - self.matrix) / eps)
            return s.sum(p.sum(1), "cols"), s.sum(p.sum(0), "rows"), s.sum(jnp.sum(p * self.matrix), "all")

        def rows(c, ub):  # row sums and row costs from one block of the plan
            p = jnp.exp((ub[:, None] + v[None, :] - c) / eps)
            return jnp.stack([p.sum(1), (p * c).sum(1)], axis=1)

        row = self._blocks(1, rows, u)
        col_sums = jnp.exp(self.log_sum_exp(u, v, eps, axis=0, stable=True))
        return s.sum(row[:, 0], "cols"), col_sums, s.sum(jnp.sum(row[:, 1]), "all")

    def max_plus(self, u: jax.Array, v: jax.Array, axis: int) -> jax.Array:
        """Maximum over ``axis`` of u_i + v_j - C_ij: the hard c-transform of the certificate's dual bound.

        One pass; -inf entries of u, v take no part.

        Args:
            u: (n,) row potentials.
            v: (m,) column potentials.
            axis: 1 maximises over columns, 0 over rows.

        Returns:
            (n,) for axis=1, (m,) for axis=0.
        """
        keep, red = (u, v) if axis == 1 else (v, u)

        def body(c, kb):  # c: (block, other) costs, kb: (block,) kept potentials
            return jnp.max(kb[:, None] + red[None, :] - c, axis=1)

        if not self.is_blocked:
            local = body(self.matrix if axis == 1 else self.matrix.T, keep)
        else:
            local = self._blocks(axis, body, keep)
        return self.split.max(local, "cols" if axis == 1 else "rows")

    def cost_matvec(self, v: jax.Array) -> jax.Array:
        """The product C v, shape (n,), for v (m,) (summed over split columns).

        Dense: one pass over the matrix. Blocked cosine: ``C v = sum(v) - x (y^T v)``, two matrix-vector
        products at full precision of the products' operands at :attr:`precision` (:meth:`_operands`: the
        same bilinear form as the blocks'), no pass over C. Other blocked costs: one pass.
        """
        if not self.is_blocked:
            local = self.matrix @ v
        elif self.kind == "cosine":
            x, y = (z.astype(self.dtype) for z in self._operands(self.x, self.y))
            highest = jax.lax.Precision.HIGHEST
            local = jnp.sum(v) - jnp.dot(x, jnp.dot(v, y, precision=highest), precision=highest)
        else:
            local = self._blocks(1, lambda c, ub: c @ v, jnp.zeros(self.shape[0], self.dtype))
        return self.split.sum(local, "cols")

    def plan(self, u: jax.Array, v: jax.Array, eps) -> jax.Array:
        """The dense (n, m) plan exp((u_i + v_j - C_ij) / eps) (this device's block when split).

        Args:
            u: (n,) row potentials.
            v: (m,) column potentials.
            eps: entropic temperature.

        Returns:
            (n, m) plan in the costs' dtype.
        """
        return jnp.exp((u[:, None] + v[None, :] - self.cost_matrix()) / eps)

    def max_abs_cost(self) -> jax.Array:
        """Largest ``|C_ij|``, a scalar (one pass in blocked mode; 2 for the cosine cost without a pass)."""
        if self.kind == "cosine":
            return jnp.asarray(2.0, self.dtype)
        if not self.is_blocked:
            return self.split.max(jnp.max(jnp.abs(self.matrix)), "all")
        zero = jnp.zeros(self.shape[0], self.dtype)
        return self.split.max(jnp.max(self._blocks(1, lambda c, ub: jnp.max(jnp.abs(c), axis=1), zero)), "all")
