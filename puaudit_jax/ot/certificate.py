"""A certificate for an entropic partial plan: a feasible plan, its cost, a lower bound, the gap.

Sinkhorn on the dummy-augmented problem (``sinkhorn.py``) returns a plan G = exp((f + g - C) / eps)
that meets the constraints only up to ``tol`` (Nguyen et al., AAAI 2024, "Revising the infeasibility
of Sinkhorn for partial OT"). This module turns any such output into

- an **upper bound**: the cost of a *feasible* partial plan obtained by rounding G,
- a **lower bound**: the value of a dual-feasible point built from the potentials,

so ``gap = upper - lower`` bounds how far the rounded plan's cost is from the optimum:
``upper - OPT <= gap`` and ``OPT - lower <= gap``, whatever eps, tol or the iteration count were.

Rounding (in the spirit of Altschuler, Weed & Rigollet 2017, Alg. 2, adapted to inequality caps and
the mass constraint): scale rows down to a (alpha_i = min(1, a_i / (G 1)_i)), then columns down to b
(beta_j = min(1, b_j / (G' ^T 1)_j)): the plan G' = diag(alpha) G diag(beta) meets both caps with
mass s. If s > m it is scaled by m / s; if s < m the missing mass goes to the residual capacities
r = a - G' 1 >= 0, c = b - G'^T 1 >= 0 as the rank-one ``(m - s) r c^T / (|r| |c|)``, which respects
both caps because ``m - s <= |r|`` and ``m - s <= |c|``. The result carries exactly m (to float rounding).
Its cost needs one product C c beyond the plan's sums, so nothing n x m is stored in blocked mode.

Dual bound. The LP dual of min <C, G> s.t. G >= 0, G 1 <= a, G^T 1 <= b, 1^T G 1 = m is
max a.p + b.q + m lam s.t. p <= 0, q <= 0, p_i + q_j + lam <= C_ij. From the augmented potentials
(f, g, fd, gd): lam = -(fd + gd), p = min(f + gd, 0) (the dummy column's constraint f_i + gd <= 0
made exact), and q the best column potential for them, q_j = min(0, min_i (C_ij - p_i - lam)) (a
hard c-transform: one max-plus pass over C). When ``|b| = m`` the column caps bind together and the
clip of q at 0 is replaced by a shift of lam (whichever bound is larger is kept). Points of zero
weight take no part. The certificate is computed in the solver's dtype: in float32 the bounds are
exact up to ~1e-7 relative rounding.

Pure ``jax.numpy`` on the geometry's reductions: the same code runs dense, blocked, inside
``shard_map`` (split geometries) and under ``vmap``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from puaudit_jax.ot.problem import PartialProblem

SEARCH_STEPS = 8  # golden-section steps of the dual bound's search over lam (~0.6x shrink each)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Certificate:
    """Bounds on the optimal partial cost OPT (scalars, a pytree: vmap-able).

    All four are scalars in the cost's units (batched: one per problem under vmap).

    Attributes:
        upper: <C, G_round>, the cost of the rounded plan (feasible: G_round 1 <= a, G_round^T 1 <= b,
            1^T G_round 1 = m up to ``violation``), so OPT <= upper.
        lower: a.p + b.q + m lam of a dual-feasible point, so lower <= OPT.
        gap: upper - lower (>= upper - OPT).
        violation: largest constraint violation of the rounded plan (float rounding only), in mass units.
    """

    upper: jax.Array
    lower: jax.Array
    gap: jax.Array
    violation: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Rounding:
    """The rounded plan in factored form: G_round = t exp((u + v - C) / eps) + w r c^T.

    With u = f + eps log alpha, v = g + eps log beta; t in (0, 1], w >= 0 (one of them trivial).
    """

    u: jax.Array
    v: jax.Array
    t: jax.Array
    w: jax.Array
    r: jax.Array
    c: jax.Array
    row_mass: jax.Array
    col_mass: jax.Array
    upper: jax.Array


def _cap(weights, mass):
    """min(1, weights / mass) with 1 where the mass is 0 (nothing to scale)."""
    return jnp.where(mass > weights, weights / jnp.where(mass > 0, mass, 1.0), 1.0)


def _log(x):
    return jnp.log(jnp.where(x > 0, x, 1.0)) + jnp.where(x > 0, 0.0, -jnp.inf)


def round_plan(prob: PartialProblem, f, g, eps) -> Rounding:
    """The rounding of the module docstring for the plan exp((f + g - C) / eps).

    Inside ``shard_map``, of this device's block.

    Args:
        prob: the partial problem (geometry, weights a (n,), b (k,), mass m).
        f: row potentials, shape (n,), in cost units.
        g: column potentials, shape (k,), in cost units.
        eps: the entropic regularisation, in cost units.

    Returns:
        The :class:`Rounding`: the feasible plan in factored form, its row (n,) and column (k,) masses
        and its cost (the upper bound).
    """
    geom, a, b, m = prob.geom, prob.a, prob.b, prob.m
    split = geom.split
    row0 = jnp.exp(geom.log_sum_exp(f, g, eps, axis=1, stable=True))
    u = jnp.where(a > 0, f + eps * _log(_cap(a, row0)), -jnp.inf)
    col1 = jnp.exp(geom.log_sum_exp(u, g, eps, axis=0, stable=True))
    v = jnp.where(b > 0, g + eps * _log(_cap(b, col1)), -jnp.inf)
    row, col, cost = geom.plan_sums(u, v, eps)
    s = split.sum(jnp.sum(row), "rows")
    r, c = jnp.maximum(a - row, 0.0), jnp.maximum(b - col, 0.0)
    r_tot, c_tot = split.sum(jnp.sum(r), "rows"), split.sum(jnp.sum(c), "cols")
    t = jnp.where(s > m, m / s, 1.0)
    w = jnp.where(s < m, (m - s) / jnp.maximum(r_tot * c_tot, jnp.finfo(r.dtype).tiny), 0.0)
    rcc = split.sum(jnp.sum(r * geom.cost_matvec(c)), "rows")
    return Rounding(u, v, t, w, r, c, t * row + w * c_tot * r, t * col + w * r_tot * c, t * cost + w * rcc)


def _dual_value(prob: PartialProblem, p0, lam):
    """The dual objective a.p + b.q + m lam after three hard c-transforms from row potentials p0.

    The transforms are q from p, p from q, q from p (each step can only raise the objective); the last q
    is either clipped at 0 or shifted into lam (valid when the caps bind, ``|b| = m``), whichever is larger.
    """
    geom, a, b, m = prob.geom, prob.a, prob.b, prob.m
    split = geom.split
    zero_g, zero_f = jnp.zeros(geom.shape[1], p0.dtype), jnp.zeros(geom.shape[0], p0.dtype)

    def columns(p):  # q_j = min_i (C_ij - p_i - lam); zero-weight columns: no constraint
        return jnp.where(b > 0, -(lam + geom.max_plus(p, zero_g, axis=0)), -jnp.inf)

    def rows(q):
        return jnp.where(a > 0, jnp.minimum(-(lam + geom.max_plus(zero_f, q, axis=1)), 0.0), -jnp.inf)

    p = rows(jnp.minimum(columns(jnp.where(a > 0, jnp.minimum(p0, 0.0), -jnp.inf)), 0.0))
    q_free = columns(p)
    a_p = split.sum(jnp.sum(jnp.where(a > 0, a * p, 0.0)), "rows")

    def value(q, lam_):
        return a_p + split.sum(jnp.sum(jnp.where(b > 0, b * q, 0.0)), "cols") + m * lam_

    top = jnp.maximum(split.max(jnp.max(jnp.where(b > 0, q_free, -jnp.inf)), "cols"), 0.0)
    return jnp.maximum(value(jnp.minimum(q_free, 0.0), lam), value(q_free - top, lam + top))


def dual_bound(prob: PartialProblem, f, g, fd, gd, eps, steps: int = SEARCH_STEPS) -> jax.Array:
    """A lower bound on OPT from augmented potentials (module docstring).

    lam = -(fd + gd) and p = f + gd, moved together by a golden-section search over lam + d, d in
    +-2 eps log(n m) (n, m the points of positive weight), each point made dual-feasible by
    c-transforms; the best is returned (every evaluated point is a valid bound).

    The start is clipped to where the dual optimum lies, lam in [-M, M] and p in [-2 M, 0] with
    ``M = max |C_ij|`` (a larger lam loses ``|a| - m`` per unit, a smaller one gains nothing over p = q = 0),
    and so is the search: at a large eps (potentials of order eps) the dual's terms would otherwise
    cancel far beyond float32's precision, and a "lower bound" above OPT was seen at eps = 1e6.

    Args:
        prob: the partial problem (geometry, weights a (n,), b (k,), mass m).
        f: row potentials, shape (n,), in cost units.
        g: column potentials, shape (k,), in cost units.
        fd: the dummy row's potential (scalar; -inf when empty).
        gd: the dummy column's potential (scalar; -inf when empty).
        eps: the entropic regularisation, in cost units.
        steps: evaluations of the golden-section search.

    Returns:
        The lower bound on the optimal cost (scalar, cost units).
    """
    fd0, gd0 = (jnp.where(jnp.isfinite(d), d, 0.0) for d in (fd, gd))
    big = prob.geom.max_abs_cost()
    lam0, p0 = jnp.clip(-(fd0 + gd0), -big, big), jnp.clip(f + gd0, -2.0 * big, 0.0)
    split = prob.geom.split  # the support sizes, not the (padded, per-device) shapes: same in every mode
    n = split.sum(jnp.sum(prob.a > 0).astype(f.dtype), "rows")
    k = split.sum(jnp.sum(prob.b > 0).astype(f.dtype), "cols")
    width = jnp.minimum(2.0 * eps * jnp.log(n * k + 2.0), 2.0 * big)

    def at(d):
        return _dual_value(prob, p0 - d / 2, jnp.clip(lam0 + d, -big, big))

    ratio = (jnp.sqrt(5.0) - 1) / 2
    lo, hi = -width, width
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    v1, v2, best = jax.lax.map(at, jnp.stack([x1, x2, jnp.zeros_like(width)]))  # one traced copy of ``at``

    def step(_, state):
        lo, hi, x1, x2, v1, v2, best = state
        left = v1 >= v2  # the maximum lies in [lo, x2]
        lo, hi = jnp.where(left, lo, x1), jnp.where(left, x2, hi)
        new = jnp.where(left, hi - ratio * (hi - lo), lo + ratio * (hi - lo))
        value = at(new)
        x1, x2 = jnp.where(left, new, x2), jnp.where(left, x1, new)
        v1, v2 = jnp.where(left, value, v2), jnp.where(left, v1, value)
        return lo, hi, x1, x2, v1, v2, jnp.maximum(best, value)

    state = jax.lax.fori_loop(0, steps, step, (lo, hi, x1, x2, v1, v2, jnp.maximum(best, jnp.maximum(v1, v2))))
    return state[-1]


def certify(prob: PartialProblem, f, g, fd, gd, eps, steps: int = SEARCH_STEPS) -> Certificate:
    """:class:`Certificate` of the entropic solution with potentials (f, g, fd, gd) at ``eps``.

    Args:
        prob: the partial problem (geometry, weights a (n,), b (k,), mass m); no gradient flows through it.
        f: row potentials, shape (n,), in cost units.
        g: column potentials, shape (k,), in cost units.
        fd: the dummy row's potential (scalar).
        gd: the dummy column's potential (scalar).
        eps: the entropic regularisation, in cost units.
        steps: evaluations of the dual bound's search over lam (3 passes over C each).

    Returns:
        The rounded plan's cost (upper), the dual bound (lower), their gap, and the rounded plan's
        largest violation of the caps or the mass (float rounding only).
    """
    prob = jax.tree.map(jax.lax.stop_gradient, prob)
    rounding = round_plan(prob, f, g, eps)
    lower = dual_bound(prob, f, g, fd, gd, eps, steps)
    split = prob.geom.split
    violation = jnp.maximum(
        jnp.maximum(split.max(jnp.max(rounding.row_mass - prob.a), "rows"), 0.0),
        jnp.maximum(split.max(jnp.max(rounding.col_mass - prob.b), "cols"), 0.0),
    )
    violation = jnp.maximum(violation, jnp.abs(split.sum(jnp.sum(rounding.row_mass), "rows") - prob.m))
    return Certificate(rounding.upper, lower, rounding.upper - lower, violation)


def rounded_plan(prob: PartialProblem, rounding: Rounding, eps) -> jax.Array:
    """The dense (n, k) rounded plan (this device's block when split).

    Args:
        prob: the partial problem the rounding is of.
        rounding: :func:`round_plan`'s output.
        eps: the entropic regularisation, in cost units.

    Returns:
        The plan, shape (n, k).
    """
    plan = rounding.t * prob.geom.plan(rounding.u, rounding.v, eps)
    return plan + rounding.w * rounding.r[:, None] * rounding.c[None, :]


def round_dense(plan, a, b, m):
    """The rounding of the module docstring applied to any dense (n, k) plan (numpy, float64).

    E.g. a plan from POT's entropic partial solvers.

    Args:
        plan: a nonnegative plan, shape (n, k).
        a: row caps, shape (n,).
        b: column caps, shape (k,).
        m: the mass to transport, ``0 < m <= min(|a|, |b|)``.

    Returns:
        The feasible plan, shape (n, k), float64: row sums <= a, column sums <= b, total m.
    """
    import numpy as np

    plan, a, b = (np.asarray(v, np.float64) for v in (plan, a, b))
    plan = plan * np.minimum(1.0, a / np.where(plan.sum(1) > 0, plan.sum(1), 1.0))[:, None]
    plan = plan * np.minimum(1.0, b / np.where(plan.sum(0) > 0, plan.sum(0), 1.0))[None, :]
    s = plan.sum()
    if s >= m:
        return plan * (m / s)
    r, c = np.maximum(a - plan.sum(1), 0.0), np.maximum(b - plan.sum(0), 0.0)
    return plan + (m - s) * np.outer(r, c) / (r.sum() * c.sum())
