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
max a.p + b.q + m lam s.t. p <= 0, q <= 0, p_i + q_j + lam <= C_ij. It is found by block coordinate
ascent from the augmented potentials (f, g, fd, gd): the start is p = min(f + gd, 0) (the dummy
column's constraint f_i + gd <= 0 made exact). With p fixed, the best (q, lam) is in closed form: with
h_j = min_i (C_ij - p_i) (a hard c-transform, one max-plus pass over C), q_j = min(0, h_j - lam), and
the objective b.q + m lam is concave and piecewise linear in lam with slope m - sum_{h_j < lam} b_j,
so its maximum is at the b-weighted m-quantile of h (found by bisection: no sort, and the same code
when the columns are split over devices). Then p given q likewise, then q again (``DUAL_PASSES``
passes); each step can only raise the objective and every step's point is dual-feasible, so the
largest value is a valid bound. The same ascent runs from the columns' side too (q = min(g + fd, 0)
first), and the larger bound is kept: one side's clip at 0 can stall the ascent (with ``m = |a|`` the
row potentials may shift freely). When ``|b| = m`` the quantile is the largest h_j and q = h - max h.
Points of zero weight take no part. The magnitudes stay of order ``M = max |C_ij|`` (the starts are
clipped to [-2 M, 0]; h, lam and the next side follow), so float32 does not cancel the terms even
where the potentials are huge (eps = 1e6).

Rounding. The costs are computed, not exact: with ``delta`` the geometry's bound on ``|C_ij - C*_ij|``
(:meth:`~puaudit_jax.ot.geometry.Geometry.cost_error`; the float32 product's at "highest", or the
bf16 units' three-product split), the plan's exact cost is at most ``upper + s delta`` (s its mass) and
the dual point with lam - delta is feasible for C*, so the bounds are widened by ``m delta`` each
(~2e-4 m at "bfloat16x3" and d 768, ~5e-5 m at "highest"). The rest, the sums of the plan's entries
and the dual's terms, is computed in the solver's dtype: in float32 exact up to ~1e-7 relative.

Pure ``jax.numpy`` on the geometry's reductions: the same code runs dense, blocked, inside
``shard_map`` (split geometries) and under ``vmap``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from puaudit_jax.ot.problem import PartialProblem

DUAL_PASSES = 3  # c-transforms of the dual bound (columns, rows, columns), each with its best lam
BISECTION_STEPS = 48  # halvings of the bracket of the best lam: below float64's resolution of [-M, 3 M]


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


def _best_multiplier(h, w, m, split, over: str):
    """(value, lam) maximising ``sum_j w_j min(0, h_j - lam) + m lam`` over lam; entries with w_j = 0 left out.

    Concave and piecewise linear in lam, slope ``m - sum_{h_j < lam} w_j``: the maximum is at the
    w-weighted m-quantile of h, bracketed in [min h, max h] and halved ``BISECTION_STEPS`` times (each
    step one pass over h and, when split, a collective of a scalar). Both ends of the last bracket are
    evaluated and the larger kept (any lam gives a dual-feasible point).

    Args:
        h: (k,) hard c-transform values (this device's block when split).
        w: (k,) the weights of h's points (b for columns, a for rows).
        m: the mass (scalar).
        split: the geometry's :class:`~puaudit_jax.ot.split.Split`.
        over: the split axis of h, "rows" or "cols".

    Returns:
        (value, lam), scalars in cost units.
    """
    live = w > 0
    lo = -split.max(jnp.max(jnp.where(live, -h, -jnp.inf)), over)
    hi = split.max(jnp.max(jnp.where(live, h, -jnp.inf)), over)

    def value(lam):
        return split.sum(jnp.sum(jnp.where(live, w * jnp.minimum(h - lam, 0.0), 0.0)), over) + m * lam

    def halve(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        rising = split.sum(jnp.sum(jnp.where(live & (h < mid), w, 0.0)), over) <= m  # slope at mid >= 0
        return jnp.where(rising, mid, lo), jnp.where(rising, hi, mid)

    lo, hi = jax.lax.fori_loop(0, BISECTION_STEPS, halve, (lo, hi))
    v_lo, v_hi = value(lo), value(hi)
    return jnp.maximum(v_lo, v_hi), jnp.where(v_lo >= v_hi, lo, hi)


def _step(prob: PartialProblem, held, side: str):
    """One coordinate step with the ``side`` ("rows": p, "cols": q) potentials ``held``: (the other side's, value).

    The c-transform of the held side (one max-plus pass over C), the best multiplier lam for it
    (:func:`_best_multiplier`), and from them the other side's potentials and the dual value of the point.
    """
    geom, a, b, m = prob.geom, prob.a, prob.b, prob.m
    w_held, w_free, free = (a, b, "cols") if side == "rows" else (b, a, "rows")
    if side == "rows":  # h = min over the held side of (C - held)
        h = -geom.max_plus(held, jnp.zeros(geom.shape[1], held.dtype), axis=0)
    else:
        h = -geom.max_plus(jnp.zeros(geom.shape[0], held.dtype), held, axis=1)
    value, lam = _best_multiplier(h, w_free, m, geom.split, free)
    value = value + geom.split.sum(jnp.sum(jnp.where(w_held > 0, w_held * held, 0.0)), side)
    return jnp.where(w_free > 0, jnp.minimum(h - lam, 0.0), -jnp.inf), value


def dual_bound(prob: PartialProblem, p0, q0, passes: int = DUAL_PASSES) -> jax.Array:
    """A lower bound on OPT by coordinate ascent on the dual, from the rows' and from the columns' side.

    The module docstring has the steps. Two starts, because one side's clip at 0 can stall the ascent
    (with ``m = |a|`` the row potentials are free to shift and a start at the clip stopped 10-17 % short of
    OPT where the columns' start reached 1 %). The ``2 passes`` steps are one loop whose body picks the
    side with a ``lax.cond`` on the step's index (not on data: it stays a branch under vmap and in
    ``shard_map``), so each side's step is compiled once.

    Args:
        prob: the partial problem (geometry, weights a (n,), b (k,), mass m).
        p0: (n,) starting row potentials of the dual (from Sinkhorn's: f + gd), in cost units; clipped
            to [-2 M, 0], ``M = max |C_ij|``.
        q0: (k,) starting column potentials (g + fd), likewise.
        passes: c-transforms from each start (one pass over C each).

    Returns:
        The lower bound on the optimal cost (scalar, cost units): the largest dual value met.
    """
    top = 2.0 * prob.geom.max_abs_cost()
    p0 = jnp.where(prob.a > 0, jnp.clip(p0, -top, 0.0), -jnp.inf)
    q0 = jnp.where(prob.b > 0, jnp.clip(q0, -top, 0.0), -jnp.inf)

    def columns_from_rows(state):  # p held: sets q
        p, _, best = state
        q, value = _step(prob, p, "rows")
        return p, q, jnp.maximum(best, value)

    def rows_from_columns(state):  # q held: sets p
        _, q, best = state
        p, value = _step(prob, q, "cols")
        return p, q, jnp.maximum(best, value)

    def body(i, state):
        second = i >= passes  # the columns' start: its q is q0, and its first step holds q
        p, q, best = state
        state = (p, jnp.where(i == passes, q0, q), best)
        j = jnp.where(second, i - passes, i)
        return jax.lax.cond((j % 2 == 0) != second, columns_from_rows, rows_from_columns, state)

    state = (p0, q0, jnp.asarray(-jnp.inf, p0.dtype))
    return jax.lax.fori_loop(0, 2 * passes, body, state)[2]


def certify(prob: PartialProblem, f, g, fd, gd, eps, passes: int = DUAL_PASSES) -> Certificate:
    """:class:`Certificate` of the entropic solution with potentials (f, g, fd, gd) at ``eps``.

    For the exact costs of ``prob``'s points: its geometry's computed costs, widened by their
    :meth:`~puaudit_jax.ot.geometry.Geometry.cost_error` (module docstring).

    Args:
        prob: the partial problem (geometry, weights a (n,), b (k,), mass m); no gradient flows through it.
        f: row potentials, shape (n,), in cost units.
        g: column potentials, shape (k,), in cost units.
        fd: the dummy row's potential (scalar).
        gd: the dummy column's potential (scalar).
        eps: the entropic regularisation, in cost units.
        passes: c-transforms of the dual bound from each side (one pass over C each).

    Returns:
        The rounded plan's cost (upper), the dual bound (lower), their gap, and the rounded plan's
        largest violation of the caps or the mass (float rounding only).
    """
    prob = jax.tree.map(jax.lax.stop_gradient, prob)
    rounding = round_plan(prob, f, g, eps)
    fd0, gd0 = (jnp.where(jnp.isfinite(d), d, 0.0) for d in (fd, gd))
    lower = dual_bound(prob, f + gd0, g + fd0, passes)
    split = prob.geom.split
    violation = jnp.maximum(
        jnp.maximum(split.max(jnp.max(rounding.row_mass - prob.a), "rows"), 0.0),
        jnp.maximum(split.max(jnp.max(rounding.col_mass - prob.b), "cols"), 0.0),
    )
    mass = split.sum(jnp.sum(rounding.row_mass), "rows")
    violation = jnp.maximum(violation, jnp.abs(mass - prob.m))
    delta = prob.geom.cost_error()
    upper, lower = rounding.upper + jnp.maximum(mass, prob.m) * delta, lower - prob.m * delta
    return Certificate(upper, lower, upper - lower, violation)


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
