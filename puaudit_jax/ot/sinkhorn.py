"""Entropic partial OT: log-domain Sinkhorn on the dummy-augmented problem.

The augmented balanced problem (see ``problem.py``) has marginals::

    a~ = [a, |b| - m]  (n + 1,)        b~ = [b, |a| - m]  (m + 1,)

and cost [[C, 0], [0, +inf]]. Its entropic version, solved here, is::

    min_{G~ in U(a~, b~)}  <C~, G~> + eps * sum_ij G~_ij (log G~_ij - 1),

i.e. the partial problem with the entropy of the plan *and* of the slacks a - G 1 and
b - G^T 1 (the dummy column / row entries). The dummy-dummy cell is forbidden (its kernel
entry is exactly 0), so the real block carries exactly m at convergence. As eps -> 0 the
solution tends to the exact partial plan; ``tests/ot/test_ot_sinkhorn.py`` shows the gap.

Potentials: f (n,), g (m,) for the real rows/columns, fd, gd for the dummies; the plan is
G_ij = exp((f_i + g_j - C_ij) / eps), slack of row i = exp((f_i + gd) / eps), of column j
= exp((fd + g_j) / eps).

Each iteration is a row update, a column update and a *mass step*: an exact dual ascent
along (f + t, g + t, fd - t, gd - t), which rescales the real block (and only it) so that it
carries m. The dummy-dummy zero in the kernel leaves plain Sinkhorn with no contraction on
that direction; without the mass step the real mass drifts for thousands of iterations
when m or eps is small (POT's entropic solver has the same step: K <- K m / sum K).

Two ways to run the same iteration (``mode``):

- ``"scaling"`` (dense geometries): stabilised scaling (Schmitzer 2019). The kernel
  K~ = exp((F_i + G_j - C_ij) / eps) is built once for absorbed potentials F, G, and the
  iterations update scalings u, v with two matrix-vector products: no exp in the loop,
  so an iteration costs two memory passes over K~ (the bandwidth bound). Scalings are
  absorbed into F, G (one exp pass) when they leave [1/T, T], when eps changes, and a
  stable log-domain step rescues any non-finite update.
- ``"log"`` (blocked geometries, vmap): log-domain updates. After a column update each
  real entry is at most b_j, so the next row reduction cannot overflow and needs no
  max-subtraction: one pass, redone with the two-pass stable log-sum-exp only when a row
  sum underflows. The row marginal error is read off the same reduction.

Zero weights are allowed (a point with a_i = 0 carries no mass; its potential is -inf and its
scaling is pinned to 1): callers pad problems to a few bucket shapes with zero-weight points so
that one compiled loop serves many problem sizes (``puaudit_jax.audit.scorers.POTScorer``).

Over-relaxation (optional, ``relaxation``): every scaling step, in both modes, raised to a power
omega in [1, 2) set from the measured convergence rate (``relaxation.py``); same fixed point.

Epsilon scaling (optional): eps_k = max(eps, eps_init * decay^(k // eps_steps));
convergence is declared only at eps_k == eps. The loop is one ``lax.while_loop``; the
solver is a frozen dataclass, so it is hashable and can be closed over by ``jax.jit`` /
``jax.vmap``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from puaudit_jax.ot import relaxation as rx
from puaudit_jax.ot.certificate import Certificate, certify
from puaudit_jax.ot.problem import PartialProblem
from puaudit_jax.ot.settings import check_fields
from puaudit_jax.ot.split import Split
from puaudit_runtime.jit import jit

_PRECISIONS = ("highest", "high", "default")
#: The fields checked by ``settings.RULES`` (the rest by ``PartialSinkhorn.__post_init__`` itself).
_CHECKED = ("epsilon", "tol", "max_iter", "eps_init", "eps_decay", "eps_steps", "absorb_threshold", "certify",
            "relaxation")  # fmt: skip


class _LogState(NamedTuple):
    f: jax.Array
    g: jax.Array
    fd: jax.Array
    gd: jax.Array
    it: jax.Array
    err: jax.Array
    eps: jax.Array
    stable_steps: jax.Array
    relax: rx.Relaxation | None = None  # over-relaxation controller (None: plan entropy)


class _ScalingState(NamedTuple):
    """Between epochs of the scaling mode: scalings are absorbed, the kernel is rebuilt."""

    pots: tuple  # absorbed potentials (F (n,), G (m,), Fd (), Gd ())
    it: jax.Array
    err: jax.Array
    eps: jax.Array  # epsilon the kernel was built with
    stable_steps: jax.Array
    relax: rx.Relaxation
    stable_first: jax.Array  # bool: the next epoch starts with a stable log-domain iteration


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SinkhornOutput:
    """Result of :class:`PartialSinkhorn` (a pytree: vmap-able).

    Shapes for a problem of size (n, m); the rest are scalars (batched under vmap). The plan is
    G = exp((f + g - C) / eps).

    Attributes:
        f: (n,) row potentials (-inf for zero-weight rows).
        g: (m,) column potentials.
        fd: potential of the dummy row (-inf when it is empty, and with entropy="plan").
        gd: potential of the dummy column (likewise).
        row_mass: (n,) G 1.
        col_mass: (m,) G^T 1.
        cost: <C, G>, the transport cost of the entropic plan (no entropy term).
        reg_cost: the dual objective of the augmented entropic problem, differentiable w.r.t. the
            point clouds (its gradient w.r.t. C is G by the envelope theorem).
        mass: 1^T G 1, the mass the plan carries.
        marginal_error: L1 violation of both augmented marginals.
        iterations: iterations run (int32).
        converged: bool, the error met ``tol`` at eps = epsilon (and the final marginals are within
            10 tol).
        stable_steps: how many half-steps needed the stable (two-pass or log-domain) path.
        epsilon: the entropic regularisation of the returned plan.
        certificate: bounds on the exact partial cost from a rounded feasible plan and a
            dual-feasible point (:mod:`puaudit_jax.ot.certificate`), None unless the solver certifies.
    """

    f: jax.Array
    g: jax.Array
    fd: jax.Array
    gd: jax.Array
    row_mass: jax.Array
    col_mass: jax.Array
    cost: jax.Array
    reg_cost: jax.Array
    mass: jax.Array
    marginal_error: jax.Array
    iterations: jax.Array
    converged: jax.Array
    stable_steps: jax.Array
    epsilon: jax.Array
    certificate: Certificate | None = None


def _log_mass(mass: jax.Array) -> jax.Array:
    """Log of a dummy mass, -inf when it is zero (m equal to the full mass)."""
    return jnp.where(mass > 0, jnp.log(jnp.where(mass > 0, mass, 1.0)), -jnp.inf)


def _step(pot, log_target, log_sum, eps, omega=None):
    """Scaling update pot + omega eps (log target - log current), kept at -inf for empty dummies.

    omega None is plain Sinkhorn (omega = 1), see ``relaxation.py``.
    """
    step = eps * (log_target - log_sum) if omega is None else omega * eps * (log_target - log_sum)
    return jnp.where(jnp.isfinite(log_target), pot + step, -jnp.inf)


def _finite_mean(x, split: Split, over: str):
    """Mean over the finite entries (zero-weight points have potential -inf); 0 if none."""
    ok = jnp.isfinite(x)
    total = split.sum(jnp.sum(jnp.where(ok, x, 0.0)), over)
    return total / jnp.maximum(split.sum(jnp.sum(ok), over), 1)


def _recentre(pots, split: Split):
    """Fix the gauge so that f and g have equal means (f + c, g - c, fd + c, gd - c leaves the plan unchanged).

    Large offsets would cost float32 precision in (f + g - C) / eps.
    """
    f, g, fd, gd = pots
    c = 0.5 * (_finite_mean(g, split, "cols") - _finite_mean(f, split, "rows"))
    return f + c, g - c, fd + c, gd - c


def _lse(split: Split, x, over: str):
    """Log-sum-exp of a vector indexed by ``over`` (rows or columns), over the whole problem."""
    return split.logsumexp(jax.nn.logsumexp(x), over)


def _initial_potentials(a, b, split: Split, dtype):
    """Starting potentials f (n,), g (m,): 0, and -inf for zero-weight points, where they stay.

    So zero-weight padding changes no iterate.
    """
    f = jnp.where(a > 0, 0.0, -jnp.inf).astype(dtype)
    g = jnp.where(b > 0, 0.0, -jnp.inf).astype(dtype)
    return split.vary(f, "rows"), split.vary(g, "cols")


def _safe_log(x):
    return jnp.where(x > 0, jnp.log(jnp.where(x > 0, x, 1.0)), -jnp.inf)


class _Marginals(NamedTuple):
    """Targets of the augmented problem, as values and logs."""

    a: jax.Array
    b: jax.Array
    m: jax.Array
    mass_row_d: jax.Array  # |b| - m, mass of the dummy row
    mass_col_d: jax.Array  # |a| - m, mass of the dummy column
    log_a: jax.Array
    log_b: jax.Array
    log_rd: jax.Array
    log_cd: jax.Array


def _static(default):
    """A setting that shapes the compiled program (a branch, a precision): part of the pytree's structure."""
    return dataclasses.field(metadata=dict(static=True), default=default)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PartialSinkhorn:
    """Sinkhorn for entropic partial OT on the dummy-augmented problem.

    The one place the solver's settings and their defaults are written: the entry points take an
    instance (``solve_partial(x, y, m, PartialSinkhorn(epsilon=0.05))``, ``solve_mass_path``, the
    ``pot`` scorer), as ott-jax's ``Sinkhorn(**kwargs)``. Out-of-range settings raise a ValueError
    naming the field when the instance is built (``settings.RULES``).

    Attributes:
      epsilon: target entropic regularisation, in cost units (cosine costs lie in [0, 2]).
      tol: stop when the L1 row-marginal error (augmented) is below ``tol`` at eps = epsilon.
      max_iter: maximum number of iterations (one row, one column and one mass update each).
      eps_init: first epsilon of the scaling schedule; None = ``max |C|`` (2 for cosine).
      eps_decay: decay factor per epsilon level; None (default) disables epsilon scaling.
      eps_steps: iterations per epsilon level.
      mode: "scaling", "log", or "auto" (scaling for dense geometries, log when blocked).
      one_pass: log mode: one-pass reductions with stable fallback (False = always stable).
      absorb_threshold: scaling mode: absorb when a scaling leaves [1/T, T].
      matmul_precision: precision of the scaling mode's K v and K^T u products ("highest",
        the default, "high" or "default": ``jax.lax.Precision``). A device-dependent choice:
        XLA:CPU runs an f32 product at "default" several times slower than at "highest"
        (measured 53 vs 9 ms per K v + K^T u pair at 5000 x 5000; "highest" streams at memory
        bandwidth); on GPU "highest" rules out TF32, on TPU it costs several bf16 passes where
        "default" is one (faster, fewer significant digits in the marginals; not measured here).
      certify: also compute the :class:`~puaudit_jax.ot.certificate.Certificate` (a feasible
        rounded plan's cost, a dual lower bound and their gap; ~25 passes over C, most of them
        in the dual bound's search over the mass multiplier). Off by default for this jittable
        building block (a program of its own, about the cost of a fast solve: 0.84 s beside 3.9 s
        at 5000 x 5000, ``results/bench_ot_relaxed.md``); ``solve_partial`` and ``solve_mass_path``
        certify by default (their ``DEFAULT_SOLVER`` / ``PATH_SOLVER``).
      entropy: "augmented" (default, the problem in the module docstring) or "plan":
        min <C, G> + eps sum G (log G - 1) s.t. G 1 <= a, G^T 1 <= b, 1^T G 1 = m, the
        objective of POT's ``entropic_partial_wasserstein`` (entropy of the plan only, no
        slack terms). Solved by exact block-coordinate ascent on its dual,
        max_{f <= 0, g <= 0, lam} <f, a> + <g, b> + lam m - eps sum exp((f + g + lam - C) / eps),
        in the log domain (the clamps f, g <= 0 are the inequality multipliers). The output
        potentials then satisfy G = exp((f + g - C) / eps) with lam split between f and g,
        and fd = gd = -inf (no slack entries).
      relaxation: 1.0 (default, plain Sinkhorn), a fixed omega in (1, 2), or "auto": over-relaxed
        scaling steps u <- u^(1 - omega) (a / K v)^omega, omega set from the measured rate
        (Young's SOR relation) and halved when the error blows up (``relaxation.py``). Same fixed point;
        far fewer iterations where plain Sinkhorn is slow (small eps, a mass near the class
        prior). Not with entropy="plan". 1.0 stays the default: where plain Sinkhorn is fast
        (5000 x 5000, eps 0.01: 17 iterations either way) "auto" gains nothing, and the solution differs
        from the plain one within ``tol``, so the audits' recorded results (``tests/data/golden``) would
        move; the mass path, whose time goes to the slow masses near the prior, over-relaxes by default
        (``mass_path.PATH_SOLVER``).
    """

    epsilon: float = 0.01
    tol: float = 1e-4
    max_iter: int = 5000
    eps_init: float | None = None
    eps_decay: float | None = None
    eps_steps: int = 10
    mode: str = _static("auto")
    one_pass: bool = _static(True)
    absorb_threshold: float = 1e6
    entropy: str = _static("augmented")
    matmul_precision: str = _static("highest")
    certify: bool = _static(False)
    relaxation: float | str = _static(1.0)

    def __post_init__(self):
        check_fields(self, _CHECKED)
        if self.mode not in ("auto", "scaling", "log"):
            raise ValueError(f"mode must be 'auto', 'scaling' or 'log'; got {self.mode!r}")
        if self.entropy not in ("augmented", "plan"):
            raise ValueError(f"entropy must be 'augmented' or 'plan'; got {self.entropy!r}")
        if self.matmul_precision not in _PRECISIONS:
            raise ValueError(f"matmul_precision must be one of {_PRECISIONS}; got {self.matmul_precision!r}")
        if self.entropy == "plan" and self.relaxation != 1.0:
            raise ValueError("relaxation applies to the augmented problem's scaling steps, not to entropy='plan'")

    @property
    def _relaxed(self) -> bool:
        return self.relaxation != 1.0

    def _relax_after(self, relax: rx.Relaxation, it, err) -> rx.Relaxation:
        """The controller after iteration ``it`` (unchanged for plain Sinkhorn)."""
        return rx.update(relax, it, err) if self._relaxed else relax

    def _relax_reset(self, relax: rx.Relaxation, changed, dtype) -> rx.Relaxation:
        """A new epsilon level has its own rate: the controller starts over when ``changed``."""
        if not self._relaxed:
            return relax
        return jax.tree.map(lambda f, o: jnp.where(changed, f, o), rx.start(self.relaxation, dtype), relax)

    def _epsilon_at(self, it, eps0):
        if self.eps_decay is None:
            return jnp.asarray(self.epsilon, eps0.dtype)
        level = (it // self.eps_steps).astype(eps0.dtype)
        return jnp.maximum(self.epsilon, eps0 * self.eps_decay**level)

    def __call__(self, prob: PartialProblem, init: tuple | None = None) -> SinkhornOutput:
        """Solve ``prob``; ``init`` = optional (f, g, fd, gd) warm start.

        Compiled once per problem shape and static setting: the numbers (epsilon, tol, max_iter, the
        schedule, the absorb threshold) are arguments of the program, so changing them reuses it, and
        the certificate is a program of its own, so ``certify`` True and False share the solve's.

        Args:
            prob: the partial problem (geometry of size (n, m), weights, mass).
            init: None (cold start), or potentials (f (n,), g (m,), fd, gd) of a solved problem
                of the same shape (e.g. another mass or a larger epsilon).

        Returns:
            The :class:`SinkhornOutput`; the certificate is set when ``certify``.
        """
        out = _solve(dataclasses.replace(self, certify=False), prob, init)
        return with_certificate(prob, out) if self.certify else out

    def _solve(self, prob: PartialProblem, init: tuple | None) -> SinkhornOutput:
        """The body of :meth:`__call__`, traced by ``_solve`` (no certificate)."""
        geom = jax.tree.map(jax.lax.stop_gradient, prob.geom)
        a, b = jax.lax.stop_gradient(prob.a), jax.lax.stop_gradient(prob.b)
        m = jax.lax.stop_gradient(prob.m)
        dtype = geom.dtype
        n, k = geom.shape
        mass_row_d, mass_col_d = jax.lax.stop_gradient(prob.dummy_masses)
        tg = _Marginals(
            a, b, m, mass_row_d, mass_col_d, jnp.log(a), jnp.log(b), _log_mass(mass_row_d), _log_mass(mass_col_d)
        )
        if self.eps_decay is None:  # no schedule: skip the pass over C for max |C|
            eps0 = jnp.asarray(self.epsilon, dtype)
        else:
            start = self.eps_init if self.eps_init is not None else geom.max_abs_cost()
            eps0 = jnp.maximum(jnp.asarray(start, dtype), self.epsilon)
        if self.entropy == "plan":
            return self._checked(self._run_plan_entropy(prob, geom, tg, eps0))
        if init is None:
            f, g = _initial_potentials(a, b, geom.split, dtype)
            fd = jnp.where(jnp.isfinite(tg.log_rd), 0.0, -jnp.inf).astype(dtype)
            gd = jnp.where(jnp.isfinite(tg.log_cd), 0.0, -jnp.inf).astype(dtype)
        else:
            f, g, fd, gd = (jnp.asarray(t, dtype) for t in init)
            # a start from a problem whose dummy had no mass (m = |a| or |b|) has -inf there: a dummy that
            # carries mass now needs a finite potential (0, as a cold start's)
            fd = jnp.where(jnp.isfinite(tg.log_rd) & ~jnp.isfinite(fd), 0.0, fd).astype(dtype)
            gd = jnp.where(jnp.isfinite(tg.log_cd) & ~jnp.isfinite(gd), 0.0, gd).astype(dtype)
        mode = self.mode if self.mode != "auto" else ("log" if geom.is_blocked else "scaling")
        if mode == "scaling":
            run = functools.partial(self._run_scaling, warm=init is not None)
        else:
            run = self._run_log
        f, g, fd, gd, it, err, eps_last, stable_steps = run(geom, tg, (f, g, fd, gd), eps0)
        converged = (eps_last <= self.epsilon) & (err < self.tol)
        eps = jnp.asarray(self.epsilon, dtype)
        return self._checked(_finalise(prob, f, g, fd, gd, eps, it, converged, stable_steps))

    def _checked(self, out: SinkhornOutput) -> SinkhornOutput:
        """Converged also means the constraints hold at the returned plan.

        The loop's criterion is an error at the last iterate, this is a safety net (L1 error of all
        marginals <= 10 tol).
        """
        return dataclasses.replace(out, converged=out.converged & (out.marginal_error <= 10 * self.tol))

    def _done(self, it, eps, err):
        return (it >= self.max_iter) | ((eps <= self.epsilon) & (err < self.tol))

    # ------------------------------------------------------------------ log domain
    def _reduce(self, geom, u, v, eps, axis, log_other, active, stable_only=False):
        """Logs of the real-block sums and of the augmented marginal (real + dummy entry).

        ``active``: the entries with a positive target (zero-weight points sum to 0 by design).
        """
        tiny = jnp.log(jnp.finfo(u.dtype).tiny) + 10.0

        def stable(_):
            real = geom.log_sum_exp(u, v, eps, axis, stable=True)
            return real, jnp.logaddexp(real, log_other)

        if stable_only or not self.one_pass:
            return *stable(None), jnp.array(1, jnp.int32)
        real = geom.log_sum_exp(u, v, eps, axis, stable=False)
        total = jnp.logaddexp(real, log_other)
        # Redo stably when a marginal underflows, or when the whole real block does (the
        # mass step then has nothing to rescale: typical of the first step at small eps).
        split = geom.split
        bad = split.any(~jnp.all(~active | (jnp.isfinite(total) & (total > tiny) & (real < jnp.inf))))
        bad = bad | split.all(jnp.all(real == -jnp.inf))
        real, total = jax.lax.cond(bad, stable, lambda _: (real, total), None)
        return real, total, bad.astype(jnp.int32)

    def _log_iteration(self, geom, tg: _Marginals, pots, eps, stable_only=False, omega=None, measured=True):
        """One row update, column update and mass step in the log domain.

        Over-relaxed by ``omega`` when given; the mass step is exact either way. ``measured`` False
        skips the error (inf) and the recentring (a gauge shift, which no kernel sees): the scaling
        mode's stable step, after which the epoch's scaling iterations measure the error (at least one
        runs) and its absorption recentres.

        Returns the new potentials, the row-marginal error before the update and the number
        of half-steps that took the stable path.
        """
        f, g, fd, gd = pots
        split = geom.split
        _, log_r, st1 = self._reduce(geom, f, g, eps, 1, (f + gd) / eps, jnp.isfinite(tg.log_a), stable_only)
        log_r_d = _lse(split, (fd + g) / eps, "cols")
        if measured:
            err = split.sum(jnp.sum(jnp.abs(jnp.exp(log_r) - tg.a)), "rows") + jnp.abs(jnp.exp(log_r_d) - tg.mass_row_d)
        else:
            err = jnp.asarray(jnp.inf, f.dtype)
        f = _step(f, tg.log_a, log_r, eps, omega)
        fd = _step(fd, tg.log_rd, log_r_d, eps, omega)
        log_c_real, log_c, st2 = self._reduce(geom, f, g, eps, 0, (fd + g) / eps, jnp.isfinite(tg.log_b), stable_only)
        log_c_d = _lse(split, (f + gd) / eps, "rows")
        g_new = _step(g, tg.log_b, log_c, eps, omega)
        gd = _step(gd, tg.log_cd, log_c_d, eps, omega)
        # Mass step: real block sums after the column update are exp(log_c_real) b / c. In
        # logs: early on (small eps, far from feasible) the real mass can be e^-200.
        # (zero-weight columns are left out: their -inf - -inf would be NaN)
        share = jnp.where(jnp.isfinite(tg.log_b), log_c_real + tg.log_b - log_c, -jnp.inf)
        log_real_mass = _lse(split, share, "cols")
        t = jnp.where(jnp.isfinite(log_real_mass), 0.5 * eps * (jnp.log(tg.m) - log_real_mass), 0.0)
        new = (f + t, g_new + t, fd - t, gd - t)
        return (_recentre(new, split) if measured else new), err, st1 + st2

    def _run_log(self, geom, tg, pots, eps0):
        def body(s: _LogState) -> _LogState:
            eps = self._epsilon_at(s.it, eps0)
            relax = self._relax_reset(s.relax, eps != s.eps, eps0.dtype)
            omega = relax.omega if self._relaxed else None
            new, err, st = self._log_iteration(geom, tg, (s.f, s.g, s.fd, s.gd), eps, omega=omega)
            return _LogState(*new, s.it + 1, err, eps, s.stable_steps + st, self._relax_after(relax, s.it + 1, err))

        inf = jnp.asarray(jnp.inf, eps0.dtype)
        zero = jnp.array(0, jnp.int32)
        s = _LogState(*pots, zero, inf, self._epsilon_at(zero, eps0), zero, rx.start(self.relaxation, eps0.dtype))
        s = jax.lax.while_loop(lambda s: ~self._done(s.it, s.eps, s.err), body, s)
        return s.f, s.g, s.fd, s.gd, s.it, s.err, s.eps, s.stable_steps

    # ------------------------------------------------------------------ plan entropy
    def _run_plan_entropy(self, prob, geom, tg, eps0):
        dtype = eps0.dtype
        n, k = geom.shape
        split = geom.split
        ninf = jnp.asarray(-jnp.inf, dtype)

        def side(pot, other, lam, log_cap, axis, eps):
            """Clamped update of one side, then the exact lam update; returns the KKT error."""
            u, v = (pot + lam, other) if axis == 1 else (other, pot + lam)
            over = "rows" if axis == 1 else "cols"
            active = jnp.isfinite(log_cap)
            log_s, _, _ = self._reduce(geom, u, v, eps, axis, ninf, active)
            err = split.sum(_kkt_caps(pot, jnp.exp(log_s), jnp.exp(log_cap)), over)
            new = jnp.where(active, jnp.minimum(0.0, pot + eps * (log_cap - log_s)), -jnp.inf)
            log_mass = _lse(split, jnp.where(active, log_s + (new - pot) / eps, -jnp.inf), over)
            return new, lam + eps * (jnp.log(tg.m) - log_mass), err, log_mass

        def body(s: _LogState) -> _LogState:
            eps = self._epsilon_at(s.it, eps0)
            f, lam, err_r, log_mass = side(s.f, s.g, s.fd, tg.log_a, 1, eps)
            g, lam, err_c, _ = side(s.g, f, lam, tg.log_b, 0, eps)
            # both sides' KKT errors: with the row side's alone the loop stopped while column caps were violated
            err = err_r + err_c + jnp.abs(jnp.exp(log_mass) - tg.m)
            return _LogState(f, g, lam, s.gd, s.it + 1, err, eps, s.stable_steps)

        zero = jnp.array(0, jnp.int32)
        f, g = _initial_potentials(prob.a, prob.b, split, dtype)
        s = _LogState(
            f,
            g,
            jnp.zeros((), dtype),
            jnp.zeros((), dtype),
            zero,
            jnp.asarray(jnp.inf, dtype),
            self._epsilon_at(zero, eps0),
            zero,
        )
        s = jax.lax.while_loop(lambda s: ~self._done(s.it, s.eps, s.err), body, s)
        converged = (s.eps <= self.epsilon) & (s.err < self.tol)
        return _plan_entropy_finalise(prob, s.f, s.g, s.fd, jnp.asarray(self.epsilon, dtype), s.it, converged)

    # ------------------------------------------------------------------ scaling domain
    @staticmethod
    def _kernel(geom, pots, eps):
        F, G, Fd, Gd = pots
        C = geom.matrix
        return (jnp.exp((F[:, None] + G[None, :] - C) / eps), jnp.exp((F + Gd) / eps), jnp.exp((Fd + G) / eps))

    @staticmethod
    def _absorbed(pots, scal, eps, split):
        return _recentre(tuple(p + eps * _safe_log(s) for p, s in zip(pots, scal)), split)

    def _run_scaling(self, geom, tg, pots, eps0, warm=False):
        """The scaling mode's loops: absorb scalings and rebuild the kernel, then iterate against it.

        Outer loop: absorb scalings, rebuild the kernel (one exp pass). Inner loop:
        scaling iterations against that fixed kernel until convergence, a change of eps,
        a scaling outside [1/T, T], or a non-finite update (then the last good scalings
        are absorbed and one stable log-domain iteration is taken).

        A cold start (``warm`` False) first takes one stable log-domain iteration (four passes
        over C): the plan it gives is nearly feasible, so the kernel built from it neither
        overflows nor underflows whole rows, whatever eps. A warm start (potentials of a solved
        problem: another mass on the mass path, a larger epsilon in ``gap_tol`` rounds) builds its
        kernel at once: the plan they give is nearly feasible, and where a row of that kernel
        underflows all the same, the non-finite update is rescued by the same stable step. The
        step is compiled once: an epoch starts with it when the state asks for it.
        """
        dtype = eps0.dtype
        split = geom.split
        log_t = jnp.log(jnp.asarray(self.absorb_threshold, dtype))
        ones = (
            split.vary(jnp.ones(pots[0].shape, dtype), "rows"),
            split.vary(jnp.ones(pots[1].shape, dtype), "cols"),
            jnp.ones((), dtype),
            jnp.ones((), dtype),
        )

        def epoch(s: _ScalingState) -> _ScalingState:
            return self._scaling_epoch(geom, tg, s, eps0, log_t, ones)

        zero = jnp.array(0, jnp.int32)
        inf = jnp.asarray(jnp.inf, dtype)
        relax = rx.start(self.relaxation, dtype)
        s = _ScalingState(pots, zero, inf, self._epsilon_at(zero, eps0), zero, relax, jnp.array(not warm))
        s = jax.lax.while_loop(lambda s: ~self._done(s.it, s.eps, s.err), epoch, s)
        f, g, fd, gd = s.pots
        return f, g, fd, gd, s.it, s.err, s.eps, s.stable_steps

    def _stable_step(self, geom, tg, s: _ScalingState, eps0) -> _ScalingState:
        """One stable log-domain iteration from ``s.pots``: a cold start, or the rescue of a non-finite update."""
        eps = self._epsilon_at(s.it, eps0)
        pots, err, _ = self._log_iteration(geom, tg, s.pots, eps, stable_only=True, measured=False)
        one = jnp.array(1, jnp.int32)
        return s._replace(pots=pots, it=s.it + one, err=err, eps=eps, stable_steps=s.stable_steps + one)

    def _scaling_epoch(self, geom, tg, s: _ScalingState, eps0, log_t, ones) -> _ScalingState:
        """One outer iteration of `_run_scaling`.

        The stable step first when ``s.stable_first``; then build the kernel for s.pots at the current
        eps, run the scaling iterations (`_scaling_inner`) and absorb the scalings into the potentials
        (f (n,), g (k,), fd, gd). After a non-finite update the next epoch starts with the stable step.
        log_t: log of the absorb threshold T; ones: unit scalings (u (n,), v (k,), ud, vd).
        """
        split = geom.split
        s = jax.lax.cond(s.stable_first, lambda s: self._stable_step(geom, tg, s, eps0), lambda s: s, s)
        eps = self._epsilon_at(s.it, eps0)
        kernel = self._kernel(geom, s.pots, eps)
        # an error measured at another epsilon says nothing about this one
        err0 = jnp.where(eps == s.eps, s.err, jnp.inf)
        relax = self._relax_reset(s.relax, eps != s.eps, eps0.dtype)
        scal, it, err, ok, relax = self._scaling_inner(kernel, tg, split, eps, eps0, log_t, ones, s.it, err0, relax)
        pots = self._absorbed(s.pots, scal, eps, split)
        # a non-finite update under over-relaxation: go on with half the overrelaxation
        relax = relax._replace(omega=jnp.where(ok, relax.omega, rx.halved(relax.omega)))
        return _ScalingState(pots, it, err, eps, s.stable_steps, relax, ~ok)

    def _scaling_inner(self, kernel, tg, split: Split, eps, eps0, log_t, ones, it, err, relax):
        """Scaling iterations against the fixed kernel (K (n, k), srow (n,), scol (k,)) built at `eps`.

        Starts from the unit scalings ones = (u (n,), v (k,), ud, vd) at iteration `it` with error
        `err` (scalar) and the over-relaxation controller `relax`, and iterates until convergence,
        a change of eps, a scaling outside [1/T, T] (|log| > log_t), or a non-finite update (the
        last good scalings are kept). Returns (scal, it, err, ok, relax); ok is False after a
        non-finite update.
        """
        precision = jax.lax.Precision[self.matmul_precision.upper()]

        def cond(c):
            scal, _, it, err, ok, _ = c
            u, v = scal[0], scal[1]
            in_range = (
                split.max(jnp.maximum(jnp.max(jnp.abs(jnp.log(u))), jnp.max(jnp.abs(jnp.log(v)))), "all") <= log_t
            )
            same_eps = self._epsilon_at(it, eps0) == eps
            return ok & in_range & same_eps & ~self._done(it, eps, err)

        def body(c):
            scal, _, it, err, _, relax = c
            omega = relax.omega if self._relaxed else None
            new, new_err = _scaling_iteration(kernel, scal, tg, split, precision, omega)
            ok = _scalings_healthy(new, new_err, split)
            # On a bad update keep the last good scalings (the outer loop rescues).
            return (
                jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, scal),
                scal,
                it + ok.astype(jnp.int32),
                jnp.where(ok, new_err, err),
                ok,
                jax.tree.map(lambda a, b: jnp.where(ok, a, b), self._relax_after(relax, it + 1, new_err), relax),
            )

        scal, _, it, err, ok, relax = jax.lax.while_loop(cond, body, (ones, ones, it, err, jnp.array(True), relax))
        return scal, it, err, ok, relax


@functools.partial(jit, when=lambda solver, prob, init: prob.compiles_fast)
def _solve(solver: PartialSinkhorn, prob: PartialProblem, init: tuple | None) -> SinkhornOutput:
    """``solver._solve`` compiled: the solver is an argument, its static settings key the program."""
    return solver._solve(prob, init)


@functools.partial(jit, when=lambda prob, out: prob.compiles_fast)
def with_certificate(prob: PartialProblem, out: SinkhornOutput) -> SinkhornOutput:
    """``out`` with the :class:`~puaudit_jax.ot.certificate.Certificate` of its potentials for ``prob``.

    Its own program: a solve without a certificate and one with it share the solve's. The certificate
    evaluates the costs at a precision whose error it bounds ("highest", or "bfloat16x3" off the CPU:
    :meth:`~puaudit_jax.ot.geometry.Geometry.certified`): its bounds hold for the exact costs whatever
    precision the solve's products ran at.
    """
    prob = dataclasses.replace(prob, geom=prob.geom.certified())
    cert = certify(prob, *(jax.lax.stop_gradient(p) for p in (out.f, out.g, out.fd, out.gd)), out.epsilon)
    return dataclasses.replace(out, certificate=cert)


def _scaling_iteration(kernel, scal, tg: _Marginals, split: Split, precision, omega=None):
    """One scaling-mode Sinkhorn iteration against a fixed kernel.

    kernel = (K (n, k), srow (n,), scol (k,)): exp((F + G - C) / eps) and the dummy column / row;
    scal = (u (n,), v (k,), ud, vd): the scalings (ud, vd scalars). Updates u, ud from v, vd, then
    v, vd from u, ud (over-relaxed by ``omega`` unless None), then rescales to the target mass m
    (the mass step, see the module docstring).
    Returns (new scalings, err = L1 row-marginal violation before the update, dummy row included).
    """
    (K, srow, scol), (u0, v0, ud0, vd0) = kernel, scal

    def relaxed(old, plain):
        return plain if omega is None else rx.scaled(old, plain, omega)

    Kv = split.sum(jnp.dot(K, v0, precision=precision), "cols")
    rows = Kv + srow * vd0
    dummy_row = split.sum(jnp.dot(scol, v0), "cols")
    err = split.sum(jnp.sum(jnp.abs(u0 * rows - tg.a)), "rows") + jnp.abs(ud0 * dummy_row - tg.mass_row_d)
    u = jnp.where(tg.a > 0, relaxed(u0, tg.a / rows), 1.0)  # zero-weight rows: K row is 0, pin u = 1
    ud = jnp.where(tg.mass_row_d > 0, relaxed(ud0, tg.mass_row_d / dummy_row), 0.0)
    KTu = split.sum(jnp.dot(u, K, precision=precision), "rows")
    v = jnp.where(tg.b > 0, relaxed(v0, tg.b / (KTu + scol * ud)), 1.0)
    vd = jnp.where(tg.mass_col_d > 0, relaxed(vd0, tg.mass_col_d / split.sum(jnp.dot(srow, u), "rows")), 0.0)
    c = jnp.sqrt(tg.m / split.sum(jnp.dot(v, KTu), "cols"))  # mass step, see the module docstring
    return (u * c, v * c, ud / c, vd / c), err


def _scalings_healthy(scal, err, split: Split):
    """Whether an update is usable: u, v finite and positive on every shard, ud, vd, err finite.

    A bool scalar, the same on every device.
    """
    u, v, ud, vd = scal
    local = jnp.all(jnp.isfinite(u) & (u > 0)) & jnp.all(jnp.isfinite(v) & (v > 0))
    return split.all(local) & jnp.isfinite(ud) & jnp.isfinite(vd) & jnp.isfinite(err)


def _plan_entropy_finalise(prob, f, g, lam, eps, iterations, converged) -> SinkhornOutput:
    """Outputs for entropy="plan": G = exp((f + g + lam - C) / eps), no slack entries."""
    f, g, lam = (jax.lax.stop_gradient(t) for t in (f, g, lam))
    geom = prob.geom
    sp = geom.split
    fo, go = f + 0.5 * lam, g + 0.5 * lam
    row_mass, col_mass, cost = geom.plan_sums(fo, go, eps)
    mass = sp.sum(jnp.sum(row_mass), "rows")
    err = (
        sp.sum(_kkt_caps(f, row_mass, prob.a), "rows")
        + sp.sum(_kkt_caps(g, col_mass, prob.b), "cols")
        + jnp.abs(mass - prob.m)
    )
    reg_cost = sp.sum(_lin(f, prob.a), "rows") + sp.sum(_lin(g, prob.b), "cols") + lam * prob.m - eps * mass
    ninf = jnp.asarray(-jnp.inf, f.dtype)
    return SinkhornOutput(
        f=fo,
        g=go,
        fd=ninf,
        gd=ninf,
        row_mass=row_mass,
        col_mass=col_mass,
        cost=cost,
        reg_cost=reg_cost,
        mass=mass,
        marginal_error=err,
        iterations=iterations,
        converged=converged,
        stable_steps=jnp.array(0, jnp.int32),
        epsilon=eps,
    )


def _lin(pot, w):
    """<pot, w> with 0 * -inf = 0 (empty dummies, zero-weight points); this device's entries."""
    return jnp.sum(jnp.where(w > 0, pot * w, 0.0))


def _kkt_caps(pot, sums, cap):
    """KKT residual of the caps sums <= cap with multiplier -pot >= 0: tight where pot < 0."""
    return jnp.sum(jnp.where(pot < 0, jnp.abs(sums - cap), jnp.maximum(sums - cap, 0.0)))


def _finalise(prob, f, g, fd, gd, eps, iterations, converged, stable_steps) -> SinkhornOutput:
    """Plan marginals, costs and marginal errors at fixed potentials.

    Gradients flow only through the cost (potentials are constants here), which is the
    envelope-theorem gradient of the regularised cost.
    """
    f, g, fd, gd = (jax.lax.stop_gradient(t) for t in (f, g, fd, gd))
    geom = prob.geom
    sp = geom.split

    def rows_sum(x):
        return sp.sum(jnp.sum(x), "rows")

    def cols_sum(x):
        return sp.sum(jnp.sum(x), "cols")

    a, b = prob.a, prob.b
    mass_row_d, mass_col_d = prob.dummy_masses
    row_mass, col_mass, cost = geom.plan_sums(f, g, eps)
    slack_rows = jnp.exp((f + gd) / eps)  # dummy column entries, (n,)
    slack_cols = jnp.exp((fd + g) / eps)  # dummy row entries, (m,)
    mass = rows_sum(row_mass)
    err = (
        rows_sum(jnp.abs(row_mass + slack_rows - a))
        + jnp.abs(cols_sum(slack_cols) - mass_row_d)
        + cols_sum(jnp.abs(col_mass + slack_cols - b))
        + jnp.abs(rows_sum(slack_rows) - mass_col_d)
    )
    total = mass + rows_sum(slack_rows) + cols_sum(slack_cols)
    reg_cost = (
        sp.sum(_lin(f, a), "rows")
        + sp.sum(_lin(g, b), "cols")
        + _lin(fd, mass_row_d)
        + _lin(gd, mass_col_d)
        - eps * total
    )
    return SinkhornOutput(
        f=f,
        g=g,
        fd=fd,
        gd=gd,
        row_mass=row_mass,
        col_mass=col_mass,
        cost=cost,
        reg_cost=reg_cost,
        mass=mass,
        marginal_error=err,
        iterations=iterations,
        converged=converged,
        stable_steps=stable_steps,
        epsilon=eps,
    )
