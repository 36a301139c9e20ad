"""The mass path: the partial problem solved for a grid of masses m_1, ..., m_T in one compiled call.

PU learning with partial OT sweeps m (the paper's Table 7; the class prior is unknown), so users
want the whole profile m -> (cost, scores). :func:`solve_mass_path` builds the geometry once and
runs the Sinkhorn solver under ``lax.scan`` over the masses, each solve warm-started from the
previous one's potentials (f, g, fd, gd).

What the path costs, measured (``experiments/benchmarks/ot.py``, cone model, m = 0.1 ... 0.9): almost
all of it is the one or two masses just above the class prior, where plain Sinkhorn crawls
(1,490 of the path's 1,578 iterations at 5000 x 5000, eps 0.01, went to m = 0.8, the prior).
A warm start does not shorten that crawl (1,490 vs 1,493 iterations cold): what it needs is a
faster iteration, so the path over-relaxes by default (:data:`PATH_SOLVER`, ``relaxation="auto"``,
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
from puaudit_jax.ot.problem import PartialProblem, checked_mass, compiles_fast, prepare_on_device, to_device, validate
from puaudit_jax.ot.settings import check_settings, replace_deprecated
from puaudit_jax.ot.sinkhorn import PartialSinkhorn
from puaudit_jax.ot.solve import DEFAULT_SOLVER, SolveOptions, nonfinite_error, prepared_points
from puaudit_runtime.jit import jit

#: ``solve_mass_path``'s solver: ``solve_partial``'s (:class:`PartialSinkhorn`'s defaults, certified),
#: over-relaxed. The path's time goes to the masses just above the class prior, where plain Sinkhorn
#: crawls (1,490 of 1,578 iterations at 5000 x 5000, eps 0.01) and "auto" takes 222 (``results/bench_ot_path.md``);
#: over m = 0.1 ... 0.9 the path ran 304 iterations where nine plain solves ran 1,650 (``results/bench_ot_relaxed.md``).
#: ``solve_partial`` keeps plain Sinkhorn (see ``PartialSinkhorn.relaxation``).
PATH_SOLVER = dataclasses.replace(DEFAULT_SOLVER, relaxation="auto")


@dataclasses.dataclass(frozen=True)
class MassPath:
    """Solutions of the partial problem for T masses, one row per mass (numpy arrays).

    Attributes:
        m: (T,) float64 masses, in the order solved.
        cost: (T,) <C, G> of each entropic plan.
        col_mass: (T, n_U) G^T 1: PUAudit's scores of the U points (the rows of ``y``).
        row_mass: (T, n_P) G 1 (the rows of ``x``).
        iterations: (T,) Sinkhorn iterations per mass.
        converged: (T,) bool.
        upper: with ``certify``, the certificate's (T,) upper bounds on the exact cost (else None).
        lower: with ``certify``, the (T,) lower bounds (else None).
        gap: with ``certify``, the (T,) gaps upper - lower (else None).
    """

    m: np.ndarray
    cost: np.ndarray
    col_mass: np.ndarray
    row_mass: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    upper: np.ndarray | None = None
    lower: np.ndarray | None = None
    gap: np.ndarray | None = None


@functools.partial(
    jit,
    static_argnames=("cost", "warm"),
    when=lambda x, y, a, b, ms, *_, **__: compiles_fast(x.shape[0], y.shape[0], solves=ms.shape[0]),
)
def _path(x, y, a, b, ms, solver: PartialSinkhorn, *, cost, warm: bool):
    geom = Geometry.from_points(x, y, cost, normalised=True)  # rows: solve.prepared_points

    def one(pots, m):
        out = solver(PartialProblem(geom, a, b, m), init=pots if warm else None)
        return (out.f, out.g, out.fd, out.gd), out

    first = solver(PartialProblem(geom, a, b, ms[0]))
    _, rest = jax.lax.scan(one, (first.f, first.g, first.fd, first.gd), ms[1:])
    return jax.tree.map(lambda f, r: jnp.concatenate([f[None], r]), first, rest)


def solve_mass_path(x, y, ms, solver: PartialSinkhorn = PATH_SOLVER, *, a=None, b=None, cost: str = "cosine",
                    dtype: str = SolveOptions.dtype, warm_start: bool = True, prepare: str = SolveOptions.prepare,
                    **deprecated) -> MassPath:  # fmt: skip
    """Solve min <C, G> s.t. G 1 <= a, G^T 1 <= b, 1^T G 1 = m for every m in ``ms``, in one compiled call.

    The masses are solved in the order given (an increasing grid warm-starts best); dense cost only
    (the matrix is built once).

    Args:
        x: (n, d) points (P side).
        y: (k, d) points (U side).
        ms: (T,) masses, each in ``(0, min(|a|, |b|)]``.
        solver: the Sinkhorn settings of every solve (:class:`PartialSinkhorn`; with ``certify`` each
            mass gets ``upper`` / ``lower`` / ``gap``); the default :data:`PATH_SOLVER` certifies and
            over-relaxes.
        a: (n,) nonnegative weights of x (default uniform 1/n).
        b: (k,) nonnegative weights of y (default uniform 1/k).
        cost: "cosine", "sqeuclidean" or a pairwise cost callable (as in :meth:`Geometry.from_points`).
        dtype: "float32" or "float64" (the solve's precision; the default is ``SolveOptions.dtype``).
        warm_start: start each mass from the previous one's potentials; False solves every mass from
            scratch in the same compiled call.
        prepare: where the points are checked and normalised, as ``SolveOptions.prepare`` ("auto": a JAX
            array where it is, never copied to the host).
        **deprecated: ``epsilon=``, ``tol=``, ``max_iter=``, ``certify=``, ``relaxation=`` (the settings
            before ``solver``): mapped onto it with a DeprecationWarning, for one release.

    Returns:
        The :class:`MassPath` of the T solutions.

    Raises:
        ValueError: naming a bad m, point cloud or setting (``settings.check_settings``: dtype "float32" /
            "float64", warm_start a boolean, prepare; cost not a matrix; the solver's when it is built); squared
            distances that overflow ``dtype``; a solve that produced NaN or inf (an epsilon out of range).
    """
    if not isinstance(solver, PartialSinkhorn):
        raise TypeError(f"solve_mass_path: solver must be a PartialSinkhorn, got {type(solver).__name__}")
    solver = replace_deprecated("solve_mass_path", {"solver": solver}, deprecated)["solver"]
    check_settings(dtype=dtype, warm_start=warm_start, prepare=prepare)
    if not (callable(cost) or isinstance(cost, str)):
        raise ValueError(f"cost must be 'cosine', 'sqeuclidean' or a callable (the path builds its cost from x, y); "
                         f"got {type(cost).__name__}")  # fmt: skip
    if any(isinstance(v, (bool, np.bool_, str, bytes)) for v in np.ravel(np.asarray(ms, dtype=object))):
        raise ValueError(f"ms must be masses (numbers), got {ms!r}")
    ms = np.atleast_1d(np.asarray(ms, np.float64))
    if ms.ndim != 1 or len(ms) == 0:
        raise ValueError(f"ms must be a non-empty 1-D grid of masses, got shape {ms.shape}")
    on_device = prepare_on_device(prepare, None, dtype, "sinkhorn", x, y)
    x_, y_, _, a_, b_, _ = validate(x, y, ms[0], a=a, b=b, cost=cost, on_device=on_device)  # once for every mass
    ms = np.array([checked_mass(m, a_, b_) for m in ms])
    x_, y_ = prepared_points(x_, y_, cost, dtype, on_device)
    with jax.enable_x64(dtype == "float64"):
        jd = jnp.dtype(dtype)
        out = _path(*(to_device(v, jd) for v in (x_, y_, a_, b_, ms)), solver, cost=cost, warm=warm_start)
        out = jax.tree.map(np.asarray, out)
    bad = ~(np.isfinite(out.cost) & np.isfinite(out.col_mass).all(axis=1))
    if bad.any():  # no exact fallback on the path: an error, never a NaN row
        raise nonfinite_error(solver.epsilon, dtype, f"or solve_partial (exact fallback); masses {ms[bad].tolist()}")
    cert = out.certificate
    return MassPath(ms, out.cost, out.col_mass, out.row_mass, out.iterations, out.converged,
                    *((cert.upper, cert.lower, cert.gap) if cert is not None else ()))  # fmt: skip
