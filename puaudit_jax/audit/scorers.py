"""Scorers: how strongly each unlabelled comparison aligns with the denoised positives P'.

One interface for every scorer (so a new objective is one small class)::

    scorer(zp, zu, m) -> ScoreResult(scores, method, info)

- ``zp``: (n_P', d) unit difference vectors of the denoised positives (oriented by the human).
- ``zu``: (n_U, d) unit difference vectors of the unlabelled pool (oriented by the judge).
- ``m``: the transported mass / estimated share of human-consistent judge verdicts in (0, 1].
- ``scores``: (n_U,) float64, >= 0, larger = more aligned with P'. The pipeline divides by the
  maximum (PUAudit §3.3, s̄_j = s_j / max_k s_k) and a decision rule (:mod:`puaudit_jax.audit.rules`) turns
  normalised scores into flips, identically for every scorer.

Scorers (registry :data:`SCORERS`; build with :func:`get_scorer`):

=================  ==========================================================================
``pot``            entropic partial OT (:func:`puaudit_jax.ot.solve_partial`, ``method="auto"``:
                   Sinkhorn, exact fallback when it does not converge); s_j = received mass
                   (PUAudit §3.3 / Algorithm 1 line 11)
``pot-exact``      the same problem solved exactly (network simplex); a vertex solution, so
                   s_j is (almost) 0 or b_j
``ot-balanced``    balanced entropic OT (ott-jax). Every U item receives exactly b_j, so the
                   mass says nothing; s_j = max(0, 1 - mean cost at which j is served) = the
                   plan-weighted cosine similarity of z_j to its P' partners, clipped at 0
``ot-unbalanced``  KL-unbalanced entropic OT (ott-jax): P' ships all its mass (tau_a = 1), U's
                   marginal is a KL penalty of strength ``rho`` (0.5); s_j = received mass / b_j
``centroid``       max(0, cos(z_j, mean of P'))
``knn``            max(0, mean cosine of z_j to its k nearest P' items)
``pu-logistic``    Elkan & Noto (2008): logistic regression P' (s = 1) vs U (s = 0), L2, Newton's
                   method (:mod:`puaudit_jax.audit.logistic`); c = mean out-of-fold g over P';
                   s_j = min(1, g(z_j)/c)
=================  ==========================================================================
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Protocol

import jax.numpy as jnp
import numpy as np

from puaudit_runtime.jit import jit

from ..ot.settings import UNSET, replace_deprecated
from ..ot.sinkhorn import PartialSinkhorn
from ..ot.solve import SolveOptions, solve_partial
from .logistic import penalised_logistic


@dataclass(frozen=True)
class ScoreResult:
    """scores (n_U,) >= 0; method: what produced them; info: solver diagnostics (JSON-able)."""

    scores: np.ndarray
    method: str
    info: dict = field(default_factory=dict)


class Scorer(Protocol):
    """What a scorer is: a named callable (P' vectors, pool vectors, mass) -> :class:`ScoreResult`."""

    name: str

    def __call__(self, zp: np.ndarray, zu: np.ndarray, m: float) -> ScoreResult:
        """Scores (n_U,) >= 0 of the pool zu (n_U, d) against the reference zp (n_P', d) at mass m."""
        ...


def unit_rows(z: np.ndarray) -> np.ndarray:
    """(k, d) float64 rows scaled to unit Euclidean norm."""
    z = np.asarray(z, np.float64)
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def _bucket(n: int, minimum: int = 64) -> int:
    """A padded size: the next power of two, at least ``minimum``."""
    return max(minimum, 1 << int(np.ceil(np.log2(max(n, 1)))))


def _padded(z: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad z to ``size`` rows with copies of its first row; weights 1/n (real) / 0 (padding)."""
    from ..ot.problem import pad_points

    return pad_points(z, np.full(len(z), 1.0 / len(z)), size)


def _settle(scorer, names: tuple[str, ...], legacy: dict, renamed: dict | None = None) -> None:
    """Set a scorer's configs ``names``: dicts (a JSON config's) built into their classes, old keywords mapped on."""
    configs = {}
    for name in names:
        value, default = getattr(scorer, name), scorer.__dataclass_fields__[name].default
        configs[name] = type(default)(**value) if isinstance(value, dict) else value
    for name, value in replace_deprecated(type(scorer).__name__, configs, legacy, renamed, stacklevel=5).items():
        object.__setattr__(scorer, name, value)


@dataclass(frozen=True)
class POTScorer:
    """Partial OT from P' (weights 1/n_P') to U (weights 1/n_U), cosine cost, mass m (PUAudit §3.3).

    ``solver``: the Sinkhorn settings (:class:`~puaudit_jax.ot.PartialSinkhorn`, or a dict of its
    fields as a JSON config gives them); the scores need the plan's masses, not bounds on its cost,
    so the scorer never certifies. ``options``: method and dtype of the solve
    (:class:`~puaudit_jax.ot.SolveOptions`, or a dict); the plan is never returned.

    ``bucket``: pad both point sets with zero-weight points to the next power of two (up to
    ``bucket_max`` points; the solution of the real points is unchanged, see
    tests/ot/test_ot_sinkhorn.py) so that an audit's many problem sizes -- per question type, per
    cross-fitting fold -- share a handful of compiled Sinkhorn loops (each new shape costs seconds
    of XLA compilation, the solve itself milliseconds).

    ``mesh``: None (one device), or a ``jax.sharding.Mesh`` / device count / "all" that the
    Sinkhorn solve is split over (U across the devices; ``puaudit_jax.ot.sharded``); the exact
    solver runs on the host either way.

    ``method``, ``epsilon``, ``tol``, ``max_iter``, ``eps_decay``, ``dtype``: deprecated keywords (for
    one release), mapped onto ``solver`` / ``options`` with a DeprecationWarning.
    """

    solver: PartialSinkhorn = PartialSinkhorn()
    options: SolveOptions = SolveOptions()
    bucket: bool = True
    bucket_max: int = 4096
    mesh: object = None
    name: str = "pot"
    method: InitVar[str] = UNSET
    epsilon: InitVar[float] = UNSET
    tol: InitVar[float] = UNSET
    max_iter: InitVar[int] = UNSET
    eps_decay: InitVar[float | None] = UNSET
    dtype: InitVar[str] = UNSET

    def __post_init__(self, method, epsilon, tol, max_iter, eps_decay, dtype):
        legacy = dict(method=method, epsilon=epsilon, tol=tol, max_iter=max_iter, eps_decay=eps_decay, dtype=dtype)
        _settle(self, ("solver", "options"), legacy)

    def __call__(self, zp, zu, m):
        """Scores (n_U,): the mass s_j each pool item receives (:func:`~puaudit_jax.ot.solve_partial`), clipped at 0."""
        n, k = len(zp), len(zu)
        a = b = None
        if self.bucket and self.options.method != "exact" and max(n, k) <= self.bucket_max:
            (zp, a), (zu, b) = _padded(np.asarray(zp), _bucket(n, 16)), _padded(np.asarray(zu), _bucket(k, 16))
        solver = dataclasses.replace(self.solver, certify=False)
        options = dataclasses.replace(self.options, return_plan=False)
        res = solve_partial(zp, zu, float(m), solver, options, a=a, b=b, cost="cosine", mesh=self.mesh)
        scores = np.clip(np.asarray(res.col_mass, np.float64)[:k], 0.0, None)
        info = {
            "method": res.method,
            "iterations": int(res.iterations),
            "converged": bool(res.converged),
            "fallback_reason": res.fallback_reason,
            "epsilon": res.epsilon,
            "cost": float(res.cost),
            "mass": float(res.mass),
            "marginal_error": float(res.marginal_error),
            "blocked": bool(res.blocked),
        }
        return ScoreResult(scores, f"pot:{res.method}", info)


@functools.partial(jit, static_argnames=("epsilon", "tau_b", "max_iterations", "threshold"))
def _ott_jit(x, y, *, epsilon, tau_b, max_iterations, threshold):
    """ott-jax Sinkhorn, cosine cost: (plan (n, k), cost matrix (n, k), iterations, converged)."""
    from ott.geometry import costs, pointcloud
    from ott.problems.linear import linear_problem
    from ott.solvers.linear import sinkhorn

    geom = pointcloud.PointCloud(x, y, cost_fn=costs.Cosine(), epsilon=epsilon)
    prob = linear_problem.LinearProblem(geom, tau_a=1.0, tau_b=tau_b)
    out = sinkhorn.Sinkhorn(max_iterations=max_iterations, threshold=threshold)(prob)
    return out.matrix, geom.cost_matrix, out.n_iters, out.converged


def _ott_solve(zp, zu, epsilon, tau_b, max_iterations, threshold):
    plan, cost, iters, converged = _ott_jit(
        jnp.asarray(zp, jnp.float32),
        jnp.asarray(zu, jnp.float32),
        epsilon=float(epsilon),
        tau_b=float(tau_b),
        max_iterations=int(max_iterations),
        threshold=float(threshold),
    )
    return np.asarray(plan, np.float64), np.asarray(cost, np.float64), int(iters), bool(converged)


#: ott-jax's names of the deprecated keywords of the ott-jax scorers -> the PartialSinkhorn fields they set.
_OTT_NAMES = {"max_iterations": "max_iter", "threshold": "tol"}


@dataclass(frozen=True)
class _OttKeywords:
    """The ott-jax scorers' deprecated keywords (one release), mapped onto their ``solver`` with a warning.

    Keyword-only, so a subclass's own fields keep their positions.
    """

    _: KW_ONLY
    epsilon: InitVar[float] = UNSET
    max_iterations: InitVar[int] = UNSET
    threshold: InitVar[float] = UNSET

    def __post_init__(self, epsilon, max_iterations, threshold):
        legacy = dict(epsilon=epsilon, max_iterations=max_iterations, threshold=threshold)
        _settle(self, ("solver",), legacy, _OTT_NAMES)


@dataclass(frozen=True)
class BalancedOTScorer(_OttKeywords):
    """Balanced entropic OT (ott-jax). Scores: plan-weighted cosine similarity to P', clipped at 0.

    ``solver``: epsilon, tol (ott-jax's ``threshold``) and max_iter (its ``max_iterations``) of the
    ott-jax solve, :class:`~puaudit_jax.ot.PartialSinkhorn`'s as for the pot scorer (its other fields
    do not apply); a dict of them in a JSON config. ``epsilon``, ``max_iterations``, ``threshold``:
    deprecated keywords (for one release), mapped onto ``solver`` with a DeprecationWarning.
    """

    solver: PartialSinkhorn = PartialSinkhorn()
    name: str = "ot-balanced"

    def __call__(self, zp, zu, m):
        """Scores (n_U,): 1 - the plan-weighted mean cost of each pool item, clipped at 0 (m unused)."""
        eps = self.solver.epsilon
        plan, cost, iters, converged = _ott_solve(zp, zu, eps, 1.0, self.solver.max_iter, self.solver.tol)
        col = plan.sum(0)
        mean_cost = (plan * cost).sum(0) / np.maximum(col, 1e-300)
        scores = np.clip(1.0 - mean_cost, 0.0, None)
        info = {"method": "ott-sinkhorn-balanced", "iterations": iters, "converged": converged, "epsilon": eps}
        return ScoreResult(scores, "ot-balanced", info)


@dataclass(frozen=True)
class UnbalancedOTScorer(_OttKeywords):
    """KL-unbalanced entropic OT (ott-jax): tau_a = 1, tau_b = rho / (rho + epsilon). s_j = mass_j / b_j.

    The paper defines no unbalanced baseline; rho = 0.5, epsilon = 0.05 were picked on the cone
    model (rho = 0.1 flips ~70% of the pool, rho >= 1 nothing): treat it as a sensitive baseline.
    ``solver``: as for :class:`BalancedOTScorer`, with that epsilon (tol and max_iter
    :class:`~puaudit_jax.ot.PartialSinkhorn`'s); ``epsilon``, ``max_iterations``, ``threshold``:
    deprecated keywords, likewise.
    """

    solver: PartialSinkhorn = PartialSinkhorn(epsilon=0.05)
    rho: float = 0.5
    name: str = "ot-unbalanced"

    def __call__(self, zp, zu, m):
        """Scores (n_U,): the mass each pool item receives divided by its weight 1/n_U (m unused)."""
        eps = self.solver.epsilon
        tau_b = self.rho / (self.rho + eps)
        plan, _, iters, converged = _ott_solve(zp, zu, eps, tau_b, self.solver.max_iter, self.solver.tol)
        col = plan.sum(0)
        scores = np.clip(col * zu.shape[0], 0.0, None)
        info = {
            "method": "ott-sinkhorn-unbalanced",
            "iterations": iters,
            "converged": converged,
            "epsilon": eps,
            "rho": self.rho,
            "tau_b": tau_b,
        }
        return ScoreResult(scores, "ot-unbalanced", info)


@dataclass(frozen=True)
class CentroidScorer:
    """max(0, cos(z_j, z̄)) with z̄ the mean of P' (the paper's consensus direction, §4.1)."""

    name: str = "centroid"

    def __call__(self, zp, zu, m):
        """Scores (n_U,) of the pool zu (m unused); ValueError when the mean of P' is zero."""
        centre = np.asarray(zp, np.float64).mean(0)
        norm = np.linalg.norm(centre)
        if norm == 0:
            raise ValueError("centroid scorer: the mean of P' is the zero vector")
        scores = np.clip(unit_rows(zu) @ (centre / norm), 0.0, None)
        return ScoreResult(scores, "centroid", {})


@dataclass(frozen=True)
class KNNScorer:
    """max(0, mean cosine similarity of z_j to its k nearest P' items), k = min(k, n_P')."""

    k: int = 5
    name: str = "knn"

    def __call__(self, zp, zu, m):
        """Scores (n_U,) of the pool zu (m unused); ValueError when k < 1."""
        if self.k < 1:
            raise ValueError(f"knn scorer: k must be >= 1, got {self.k}")
        sim = unit_rows(zu) @ unit_rows(zp).T  # (n_U, n_P')
        k = min(self.k, sim.shape[1])
        top = -np.sort(-sim, axis=1)[:, :k]
        return ScoreResult(np.clip(top.mean(1), 0.0, None), "knn", {"k": k})


@dataclass(frozen=True)
class PULogisticScorer:
    """Elkan-Noto PU classifier: g = P(labelled | z) by logistic regression of P' vs U; s_j = min(1, g(z_j) / c).

    c = E[g | P] is estimated out of fold (``folds``-fold over P' when n_P' >= 2 * folds, else in sample).
    """

    lam: float = 1e-2
    iters: int = 25
    folds: int = 3
    seed: int = 0
    name: str = "pu-logistic"

    def _fit(self, xp, xu):
        X = np.concatenate([xp, xu]).astype(np.float64)
        X = np.concatenate([X, np.ones((len(X), 1))], axis=1)
        s = np.concatenate([np.ones(len(xp)), np.zeros(len(xu))])
        penalty = np.r_[np.full(X.shape[1] - 1, self.lam), 0.0]  # mean log-loss + lam/2 |w|^2, bias free
        return penalised_logistic(
            X, s, penalty, weight=np.full(len(X), 1.0 / len(X)), jitter=1e-8, tol=1e-8, max_iter=self.iters
        )

    @staticmethod
    def _g(w, x):
        return 1.0 / (1.0 + np.exp(-(np.asarray(x, np.float64) @ w[:-1] + w[-1])))

    def __call__(self, zp, zu, m):
        """Scores (n_U,) in [0, 1] of the pool zu (m unused)."""
        zp, zu = unit_rows(zp), unit_rows(zu)
        w = self._fit(zp, zu)
        if len(zp) >= 2 * self.folds:
            order = np.random.default_rng(self.seed).permutation(len(zp))
            held = []
            for f in range(self.folds):
                test = order[f :: self.folds]
                train = np.setdiff1d(order, test)
                held.append(self._g(self._fit(zp[train], zu), zp[test]))
            c, how = float(np.concatenate(held).mean()), f"{self.folds}-fold"
        else:
            c, how = float(self._g(w, zp).mean()), "in-sample"
        g = self._g(w, zu)
        scores = np.minimum(1.0, g / max(c, 1e-12))
        return ScoreResult(scores, "pu-logistic", {"c": c, "c_estimate": how, "lam": self.lam})


def _exact(scorer: POTScorer) -> POTScorer:
    """The pot scorer solving its problems exactly (network simplex), whatever else its options say."""
    return dataclasses.replace(scorer, options=dataclasses.replace(scorer.options, method="exact"))


SCORERS: dict[str, Callable[..., Scorer]] = {
    "pot": POTScorer,
    "pot-exact": lambda **kw: _exact(POTScorer(**{"name": "pot-exact", **kw})),
    "ot-balanced": BalancedOTScorer,
    "ot-unbalanced": UnbalancedOTScorer,
    "centroid": CentroidScorer,
    "knn": KNNScorer,
    "pu-logistic": PULogisticScorer,
}


def get_scorer(scorer: str | Callable, **options) -> Callable:
    """A scorer by name from :data:`SCORERS` (``options`` go to its constructor) or a callable as is."""
    if callable(scorer):
        if options:
            raise ValueError("scorer options can only be given with a scorer name")
        return scorer
    if scorer not in SCORERS:
        raise ValueError(f"unknown scorer {scorer!r}; use one of {sorted(SCORERS)} or a callable")
    return SCORERS[scorer](**options)


def scorer_name(scorer) -> str:
    """A scorer's name: the string itself, else its ``name`` / ``__name__`` ("custom" without one)."""
    return scorer if isinstance(scorer, str) else getattr(scorer, "name", getattr(scorer, "__name__", "custom"))
