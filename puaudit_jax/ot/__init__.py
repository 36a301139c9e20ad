"""Partial optimal transport (Chapel, Alaya & Gasso 2020) in JAX.

Geometry (costs) -> problem -> solver, as in ott-jax:

- :class:`Geometry` (``geometry.py``): cosine / squared-Euclidean / callable / matrix costs,
  dense or block-by-block.
- :class:`PartialProblem` (``problem.py``): weights, mass, the dummy-point reduction.
- :class:`PartialSinkhorn` (``sinkhorn.py``): entropic solver, jitted whole loop; its frozen fields
  are the solver's settings, each with its one default (epsilon, tol, max_iter, ...).
- ``exact.py``: network simplex (POT ``ot.emd``) / HiGHS on the same reduction.
- :func:`solve_partial` (``solve.py``): the validated entry point with exact fallback,
  ``solve_partial(x, y, m, PartialSinkhorn(epsilon=0.05), SolveOptions(dtype="float64"))``;
  :class:`SolveOptions` holds how it solves (method, dtype, memory budget, plan, gap_tol).
- ``sharded.py``: the same solver split over the devices of a mesh / the processes of a
  cluster (``mesh=`` on the functions below, :class:`Layout`).
- ``certificate.py``: a feasible rounded plan, a dual lower bound and their gap for any
  entropic solution (``PartialSinkhorn(certify=True)``, ``SolveOptions(gap_tol=)``).
- ``mass_path.py``: :func:`solve_mass_path`, a grid of masses in one warm-started call.
- ``relaxation.py``: over-relaxed Sinkhorn steps and their controller (``PartialSinkhorn(relaxation="auto")``).
- ``settings.py``: the range checks of both configs, and the mapping of the old keywords (deprecated).
"""

from puaudit_jax.ot.certificate import Certificate
from puaudit_jax.ot.geometry import Geometry
from puaudit_jax.ot.mass_path import MassPath, solve_mass_path
from puaudit_jax.ot.problem import PartialProblem
from puaudit_jax.ot.sharded import Layout
from puaudit_jax.ot.sinkhorn import PartialSinkhorn, SinkhornOutput
from puaudit_jax.ot.solve import (
    PartialOTResult,
    SolveOptions,
    entropic_partial_cost,
    solve_partial,
    solve_partial_batch,
)

__all__ = [
    "Certificate",
    "MassPath",
    "solve_mass_path",
    "Geometry",
    "PartialProblem",
    "Layout",
    "PartialSinkhorn",
    "SinkhornOutput",
    "PartialOTResult",
    "SolveOptions",
    "solve_partial",
    "solve_partial_batch",
    "entropic_partial_cost",
]
