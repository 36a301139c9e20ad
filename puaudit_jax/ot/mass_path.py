"""The mass path: the partial problem solved for a grid of masses m_1, ..., m_T in one compiled call.

PU learning with partial OT sweeps m (the seed's Table 7; the class prior is unknown), so users
want the whole profile m -> (cost, scores). :func:`solve_mass_path` builds the geometry once and
runs the Sinkhorn solver under ``lax.scan`` over the masses, each solve warm-started from the
previous one's potentials (f, g, fd, gd).

What the path costs, measured (``experiments/bench_ot.py``, cone model, m = 0.1 ... 0.9): almost
all of it is the one or two masses just above the class prior, where plain Sinkhorn crawls
(1,490 of the path's 1,578 iterations at 5000 x 5000, eps 0.01, went to m = 0.8, the prior).
A warm start does not shorten that crawl (1,490 vs 1,493 iterations cold): what it needs is a
faster iteration, so the path over-relaxes by default (``relaxation="auto"``,
``relaxation.py``: 222 iterations there). Warm-started solves skip the cold start's stable
log-domain step, and the data are validated once: 5.9x nine plain solves at 5000 x 5000 and
3.1x at 2000 x 20000, eps 0.01 (README, ``results/bench_ot_path.md``). Each solve stops at the
same tolerance as an independent one, so the results are the same up to ``tol``
(``tests/ot/test_ot_mass_path.py``); with ``certify`` every mass gets its
:class:`~puaudit_jax.ot.certificate.Certificate`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from puaudit_jax.ot.geometry import Geometry
from puaudit_jax.ot.problem import PartialProblem, checked_mass, unit_rows, validate
from puaudit_jax.ot.sinkhorn import PartialSinkhorn


@dataclasses.dataclass(frozen=True)
class MassPath:
    """Solutions for masses ``m`` (T,): ``cost`` (T,) <C, G>, ``col_mass`` (T, n_U) PUAudit's scores,
    ``row_mass`` (T, n_P), ``iterations`` (T,), ``converged`` (T,), and with ``certify`` the
    certificate's ``upper`` / ``lower`` / ``gap`` (T,) bounds on the exact cost (else None)."""

    m: np.ndarray
    cost: np.ndarray
    col_mass: np.ndarray
    row_mass: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    upper: np.ndarray | None = None
    lower: np.ndarray | None = None
    gap: np.ndarray | None = None


@functools.partial(jax.jit, static_argnames=("solver", "cost", "warm"))
def _path(x, y, a, b, ms, *, solver: PartialSinkhorn, cost, warm: bool):
    geom = Geometry.from_points(x, y, cost, normalised=True)  # rows: unit_rows on the host

    def one(pots, m):
        out = solver(PartialProblem(geom, a, b, m), init=pots if warm else None)
        return (out.f, out.g, out.fd, out.gd), out

    first = solver(PartialProblem(geom, a, b, ms[0]))
    _, rest = jax.lax.scan(one, (first.f, first.g, first.fd, first.gd), ms[1:])
    return jax.tree.map(lambda f, r: jnp.concatenate([f[None], r]), first, rest)


def solve_mass_path(x, y, ms, *, a=None, b=None, cost: str = "cosine", epsilon: float = 0.01, tol: float = 1e-4,
                    max_iter: int = 5000, dtype: str = "float32", certify: bool = True,
                    warm_start: bool = True, relaxation: float | str = "auto") -> MassPath:  # fmt: skip
    """Solve min <C, G> s.t. G 1 <= a, G^T 1 <= b, 1^T G 1 = m for every m in ``ms`` (T,), in the order
    given (an increasing grid warm-starts best). x (n, d), y (k, d) points, a, b weights (default
    uniform); dense cost only (the matrix is built once). ``warm_start=False`` solves every mass
    from scratch in the same compiled call. ``relaxation``: see ``PartialSinkhorn`` (1.0 = plain
    Sinkhorn). ValueError names a bad m or setting."""
    ms = np.atleast_1d(np.asarray(ms, np.float64))
    if ms.ndim != 1 or len(ms) == 0:
        raise ValueError(f"ms must be a non-empty 1-D grid of masses, got shape {ms.shape}")
    x_, y_, _, a_, b_, _ = validate(x, y, ms[0], a=a, b=b, cost=cost)  # the data once, then every mass
    ms = np.array([checked_mass(m, a_, b_) for m in ms])
    x_, y_ = unit_rows(x_, y_, cost)
    solver = PartialSinkhorn(epsilon=float(epsilon), tol=float(tol), max_iter=int(max_iter), certify=certify,
                             relaxation=relaxation)  # fmt: skip
    with jax.enable_x64(dtype == "float64"):
        jd = jnp.dtype(dtype)
        out = _path(*(jnp.asarray(v, jd) for v in (x_, y_, a_, b_, ms)), solver=solver, cost=cost, warm=warm_start)
        out = jax.tree.map(np.asarray, out)
    cert = out.certificate
    return MassPath(ms, out.cost, out.col_mass, out.row_mass, out.iterations, out.converged,
                    *((cert.upper, cert.lower, cert.gap) if cert is not None else ()))  # fmt: skip
