"""Exact partial OT: the dummy-augmented balanced problem handed to a real LP solver.

Backends:

- ``"emd"``: POT's network simplex (``ot.emd``) on the (n+1) x (m+1) augmented problem.
- ``"highs"``: scipy's HiGHS on the partial LP written directly (n m variables, n + m
  inequality rows, one equality row); for small problems and cross-checks.

The dummy-dummy cell gets a finite cost A > -min(C) (we use ``2 max|C| + 1``): since the
optimal real-block cost is convex in the mass with slope >= min(C), any mass routed through
that cell would raise the cost, so the real block carries exactly m. Dense, O(n m) memory.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class ExactOutput:
    """An exact solver's result.

    Attributes:
        plan: (n, m) float64 real block of the optimal plan (NaN when HiGHS failed).
        cost: <C, G>, in the cost's units.
        backend: "emd" or "highs".
        warning: solver warning (None when clean).
    """

    plan: np.ndarray
    cost: float
    backend: str
    warning: str | None


def augmented(C: np.ndarray, a: np.ndarray, b: np.ndarray, m: float):
    """The balanced problem of the dummy-point reduction: (a~, b~, C~).

    Args:
        C: the cost matrix, shape (n, k).
        a: row weights, shape (n,).
        b: column weights, shape (k,).
        m: the mass to transport.

    Returns:
        (a~ (n + 1,), b~ (k + 1,), C~ (n + 1, k + 1)), float64: a dummy row of weight ``|b| - m`` and a
        dummy column of weight ``|a| - m`` (each at least 0), the dummy-dummy cell costing ``2 max |C| + 1``.
    """
    n, k = C.shape
    big = 2.0 * float(np.max(np.abs(C))) + 1.0
    Ct = np.zeros((n + 1, k + 1), dtype=np.float64)
    Ct[:n, :k] = C
    Ct[n, k] = big
    at = np.append(a, max(b.sum() - m, 0.0))
    bt = np.append(b, max(a.sum() - m, 0.0))
    return at, bt, Ct


def solve_emd(C, a, b, m, num_iter_max: int | None = None) -> ExactOutput:
    """Exact partial OT by POT's network simplex on the augmented problem.

    A warning is set when the simplex reports one or the dummy-dummy cell carries mass.

    Args:
        C: the cost matrix, shape (n, k).
        a: row weights, shape (n,).
        b: column weights, shape (k,).
        m: the mass to transport, ``0 < m <= min(|a|, |b|)``.
        num_iter_max: the simplex's iteration cap (None: max(1e5, 50 (n + k + 2)^1.5)).

    Returns:
        :class:`ExactOutput` with the (n, k) plan, its cost and ``backend="emd"``.
    """
    import ot  # POT

    C, a, b = (np.asarray(t, dtype=np.float64) for t in (C, a, b))
    at, bt, Ct = augmented(C, a, b, m)
    bt = bt * (at.sum() / bt.sum())  # exact equality of the two totals for the simplex
    iters = num_iter_max or max(100_000, 50 * (at.size + bt.size) ** 1.5)
    plan, log = ot.emd(at, bt, Ct, numItermax=int(iters), log=True)
    warning = log.get("warning")
    real = np.asarray(plan)[: C.shape[0], : C.shape[1]]
    if float(plan[-1, -1]) > 1e-12 * max(m, 1.0):
        warning = (warning or "") + f" dummy-dummy cell carries {plan[-1, -1]:.3g}"
    return ExactOutput(plan=real, cost=float(np.sum(real * C)), backend="emd", warning=warning)


def solve_highs(C, a, b, m) -> ExactOutput:
    """Exact partial OT by scipy's HiGHS on the partial LP.

    A failed solve returns a NaN plan and cost with HiGHS's status as the warning.

    Args:
        C: the cost matrix, shape (n, k).
        a: row weights, shape (n,).
        b: column weights, shape (k,).
        m: the mass to transport, ``0 < m <= min(|a|, |b|)``.

    Returns:
        :class:`ExactOutput` with the (n, k) plan, its cost and ``backend="highs"``.
    """
    from scipy import optimize, sparse

    C, a, b = (np.asarray(t, dtype=np.float64) for t in (C, a, b))
    n, k = C.shape
    rows = sparse.kron(sparse.eye(n), np.ones((1, k)))  # G 1 <= a
    cols = sparse.kron(np.ones((1, n)), sparse.eye(k))  # G^T 1 <= b
    res = optimize.linprog(
        C.ravel(),
        A_ub=sparse.vstack([rows, cols]).tocsr(),
        b_ub=np.concatenate([a, b]),
        A_eq=np.ones((1, n * k)),
        b_eq=[m],
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        return ExactOutput(
            plan=np.full((n, k), np.nan),
            cost=np.nan,
            backend="highs",
            warning=f"HiGHS status {res.status}: {res.message}",
        )
    plan = res.x.reshape(n, k)
    return ExactOutput(plan=plan, cost=float(res.fun), backend="highs", warning=None)


def solve_exact(C, a, b, m, backend: str = "emd") -> ExactOutput:
    """Exact partial OT plan for the (n, k) cost matrix C.

    Args:
        C: the cost matrix, shape (n, k).
        a: row weights, shape (n,).
        b: column weights, shape (k,).
        m: the mass to transport, ``0 < m <= min(|a|, |b|)``.
        backend: "emd" (:func:`solve_emd`) or "highs" (:func:`solve_highs`).

    Returns:
        The backend's :class:`ExactOutput`.

    Raises:
        ValueError: another backend.
    """
    if backend == "emd":
        return solve_emd(C, a, b, m)
    if backend == "highs":
        return solve_highs(C, a, b, m)
    raise ValueError(f"exact backend must be 'emd' or 'highs'; got {backend!r}")
