"""User-facing partial OT: validation, solver choice, exact fallback, result object.

``solve_partial`` is the boundary of the OT layer (concrete inputs, Python control flow,
numpy results). The jittable, vmappable, differentiable pieces are :class:`PartialSinkhorn`
(``sinkhorn.py``), :func:`entropic_partial_cost` and :func:`solve_partial_batch` below.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from puaudit_jax.ot import exact as exact_lib
from puaudit_jax.ot import sharded
from puaudit_jax.ot.certificate import Certificate
from puaudit_jax.ot.geometry import Geometry
from puaudit_jax.ot.problem import (
    PartialProblem,
    check_sqeuclidean_range,
    check_sqeuclidean_scale,
    checked_on_device,
    compiles_fast,
    device_points,
    prepare_on_device,
    to_device,
    unit_rows,
    validate,
)
from puaudit_jax.ot.settings import check_fields, replace_deprecated
from puaudit_jax.ot.sinkhorn import PartialSinkhorn, SinkhornOutput, with_certificate
from puaudit_runtime.jit import jit
from puaudit_runtime.mesh import make_mesh
from puaudit_runtime.phases import phase

#: Default cap on a materialised cost matrix: "auto" (:func:`memory_budget_of`); above the cap the
#: cosine / callable costs are computed block by block and the plan is not returned.
DEFAULT_MEMORY_BUDGET = "auto"
#: "auto" on the CPU, or on a device that reports no memory limit: 1 GiB (host memory is shared
#: with the rest of the process and the machine).
HOST_MEMORY_BUDGET = 1 << 30
#: "auto" on an accelerator: this share of the device's memory (the dense scaling mode holds the cost,
#: its kernel and, with ``return_plan``, the plan: three matrices of the budget's size, and XLA's temporaries).
DEVICE_MEMORY_SHARE = 0.25
#: ``gap_tol``: at most this many solves (epsilon / 4 each time: 4^5 ~ 1000x smaller at the last).
MAX_GAP_ROUNDS = 6
#: The exact solvers are dense float64; refuse to build more than this for a fallback.
EXACT_MEMORY_LIMIT = 8 << 30
#: ``solve_partial``'s solver: :class:`PartialSinkhorn`'s defaults, certified (a result reported to a user
#: carries bounds on the exact cost; the jittable solver's certificate is opt-in, see ``PartialSinkhorn.certify``).
DEFAULT_SOLVER = PartialSinkhorn(certify=True)


@dataclasses.dataclass(frozen=True)
class SolveOptions:
    """How :func:`solve_partial` solves a problem, beside the Sinkhorn settings (:class:`PartialSinkhorn`).

    Out-of-range values raise a ValueError naming the field when the options are built
    (``settings.check_settings``).

    Attributes:
      method: "sinkhorn" (entropic), "exact" (LP), or "auto" (Sinkhorn, then the exact solver when
        Sinkhorn did not converge or produced non-finite values).
      dtype: "float32" or "float64" for Sinkhorn (the exact solvers are float64).
      memory_budget: bytes allowed for a materialised cost matrix (per device); above it the cost is
        computed block by block (cosine / sqeuclidean / callable costs only). "auto": 1 GiB on the
        CPU, a quarter of the device's memory on an accelerator (:func:`memory_budget_of`).
      block_size: None, or force blocked mode with this many rows per block.
      return_plan: materialise the (n, k) plan when the cost matrix is materialised.
      exact_backend: "emd" (POT network simplex) or "highs" (scipy LP; small problems).
      gap_tol: None, or stop only when the certified gap is <= gap_tol (cost units): while it is
        larger, solve again with epsilon / 4 from the last round's potentials (on one device or
        sharded), at most ``MAX_GAP_ROUNDS`` solves; the solver certifies then whatever its ``certify``.
      cost_precision: the products x y^T behind a cosine or squared Euclidean cost computed from points
        during the solve (:data:`~puaudit_jax.ot.settings.COST_PRECISIONS`: "default", "highest",
        "bfloat16"), on one device or a mesh. The certificate evaluates the costs at a precision whose error it
        bounds ("highest"; off the CPU "bfloat16x3": ``geometry.Geometry.certified``), so its
        gap also bounds what a faster precision cost.
      prepare: where the points are checked (NaN / inf, zero rows) and, for the cosine cost, scaled to unit
        rows (:data:`~puaudit_jax.ot.settings.PREPARE_ON`): "device" where the solve runs, as one jitted
        pass (``problem.checked_on_device``; a JAX array is never copied to the host), for float32 points
        solved in float32 on one device or on a mesh of one process's devices (there the pass runs where the
        points are, a mesh's first device for numpy points, and ``sharded.placed_points`` pads them and moves
        each device's block from device to device); others go to the host; "host" in numpy, norms accumulated in
        float64; "auto" (the default) the device for JAX arrays, and for numpy points on an accelerator
        from :data:`~puaudit_jax.ot.problem.DEVICE_PREPARE_ELEMENTS` elements on; else the host. The device
        pass saves a copy of the points per solve (0.5-0.9x the host's time on this project's CPU) but its first
        call compiles a program (0.15 s on the CPU), which a single small solve does not repay.
    """

    method: str = "auto"
    dtype: str = "float32"
    memory_budget: int | str = DEFAULT_MEMORY_BUDGET
    block_size: int | None = None
    return_plan: bool = True
    exact_backend: str = "emd"
    gap_tol: float | None = None
    cost_precision: str = "default"
    prepare: str = "auto"

    def __post_init__(self):
        check_fields(self, [f.name for f in dataclasses.fields(self)])


@dataclasses.dataclass(frozen=True)
class PartialOTResult:
    """Solution of a partial OT problem of size (n, m).

    Attributes:
      plan: (n, m) transport plan, or None when it was never materialised (blocked mode). From a
        Sinkhorn solve on one device, or on a mesh of one process's devices, it is a JAX array on the solve's
        devices (split over a mesh as the cost was), copied to the host only when read
        (``np.asarray(result.plan)``); from a cluster of processes or the exact solvers a numpy array.
      row_mass: (n,) G 1, mass sent by each source point (<= a).
      col_mass: (m,) G^T 1, mass received by each target point (<= b); PUAudit's score
        before normalisation (PUAudit §3.3, s_j).
      cost: <C, G>, the transport cost (no entropy term).
      mass: 1^T G 1 (= m up to ``marginal_error``).
      marginal_error: ``sum(max(0, G 1 - a)) + sum(max(0, G^T 1 - b)) + |1^T G 1 - m|``.
      iterations: Sinkhorn iterations (0 for the exact solver).
      converged: whether the solver that produced the result met its stopping criterion.
      method: "sinkhorn", "exact-emd" or "exact-highs".
      fallback_reason: why "auto" fell back to the exact solver, else None.
      epsilon: entropic regularisation of the result (None for exact).
      reg_cost: regularised (dual) cost for Sinkhorn results, else None.
      blocked: whether the cost matrix was computed block by block.
      certificate: for Sinkhorn results solved with ``certify=True`` (the default), bounds on the
        exact partial cost OPT (floats): ``upper`` (cost of a rounded feasible plan),
        ``lower`` (a dual-feasible value), ``gap`` = upper - lower, ``violation`` (the rounded
        plan's largest constraint violation: float rounding); None for the exact solvers (their
        cost is OPT) and without certification. ``plan`` is the entropic plan either way (the
        rounded one: ``certificate.round_plan`` and ``rounded_plan``).
      gap_met: with ``gap_tol``, whether the certified gap reached it; else None.
      rounds: solves run (> 1 when ``gap_tol`` lowered epsilon).
    """

    plan: np.ndarray | jax.Array | None
    row_mass: np.ndarray
    col_mass: np.ndarray
    cost: float
    mass: float
    marginal_error: float
    iterations: int
    converged: bool
    method: str
    fallback_reason: str | None = None
    epsilon: float | None = None
    reg_cost: float | None = None
    blocked: bool = False
    certificate: Certificate | None = None
    gap_met: bool | None = None
    rounds: int = 1


def _violation(row, col, a, b, m) -> float:
    return float(np.maximum(row - a, 0).sum() + np.maximum(col - b, 0).sum() + abs(row.sum() - m))


@functools.partial(
    jit,
    static_argnames=("cost", "block_size", "with_plan", "precision"),
    when=lambda x, y, *_, **__: compiles_fast(x.shape[0], y.shape[0]),
)
def run_points(x, y, a, b, m, init, solver, *, cost, block_size, with_plan, precision="default"):
    """The jitted single-device solve of a problem given by its points.

    One program per shape, cost, block size and static setting of ``solver``: its epsilon, tol and
    iteration cap are arguments, so changing them compiles nothing new.

    Args:
        x: (n, d) source points, rows normalised on the host already (``unit_rows``).
        y: (k, d) target points, normalised likewise.
        a: (n,) source weights.
        b: (k,) target weights.
        m: () mass to transport.
        init: None or potentials (f (n,), g (k,), fd (), gd ()) to start from.
        solver: the :class:`PartialSinkhorn` to run (a pytree argument).
        cost: cost name of ``Geometry.from_points``, e.g. "cosine" (static).
        block_size: None (dense (n, k) cost) or the block size of the recomputed cost (static).
        with_plan: also return the (n, k) plan (static).
        precision: the cost's products, one of :data:`~puaudit_jax.ot.settings.COST_PRECISIONS` (static).

    Returns:
        (SinkhornOutput, plan (n, k) or None).
    """
    geom = Geometry.from_points(x, y, cost, block_size=block_size, normalised=True, precision=precision)
    out = solver(PartialProblem(geom, a, b, m), init=init)
    plan = geom.plan(out.f, out.g, out.epsilon) if with_plan else None
    return out, plan


@functools.partial(jit, static_argnames=("with_plan",), when=lambda C, *_, **__: compiles_fast(*C.shape))
def _run_matrix(C, a, b, m, init, solver, *, with_plan):
    geom = Geometry.from_matrix(C)
    out = solver(PartialProblem(geom, a, b, m), init=init)
    plan = geom.plan(out.f, out.g, out.epsilon) if with_plan else None
    return out, plan


def layout_for(mesh) -> sharded.Layout | None:
    """The layout of the ``mesh=`` argument of the functions below.

    None (one device), "all" or a device count (``puaudit_runtime.mesh.make_mesh``: one axis, U
    split over it), a ``Mesh`` (default axes, see ``sharded.Layout.of``) or a ``sharded.Layout``.
    Returns None when it amounts to one device.
    """
    if mesh is None or isinstance(mesh, sharded.Layout):
        return mesh
    if isinstance(mesh, (str, int)):
        mesh = make_mesh(mesh)
        if mesh is None:
            return None
    return sharded.Layout.of(mesh)


def memory_budget_of(devices) -> int:
    """Bytes ``memory_budget="auto"`` allows a materialised cost matrix (per device) on ``devices``.

    Args:
        devices: the JAX devices the solve runs on (one, or a mesh's).

    Returns:
        ``HOST_MEMORY_BUDGET`` on the CPU or where a device reports no memory limit, else
        ``DEVICE_MEMORY_SHARE`` of the smallest device's memory limit (``memory_stats()["bytes_limit"]``):
        a 20,000 x 100,000 float32 cost (8 GB) stays dense on an 80 GB GPU, where the blocked mode
        recomputes a matmul per pass and runs about 10x slower.
    """
    limits = []
    for dev in devices:
        stats = dev.memory_stats() if dev.platform != "cpu" else None
        if not stats or not stats.get("bytes_limit"):
            return HOST_MEMORY_BUDGET
        limits.append(int(stats["bytes_limit"]))
    return int(DEVICE_MEMORY_SHARE * min(limits)) if limits else HOST_MEMORY_BUDGET


def _memory_budget(budget: int | str, layout: sharded.Layout | None) -> int:
    """``memory_budget`` in bytes: itself, or for "auto" :func:`memory_budget_of` the solve's devices."""
    if budget != "auto":
        return budget
    return memory_budget_of(jax.devices()[:1] if layout is None else list(layout.mesh.devices.flat))


def _dense_cost_np(x, y, matrix, cost) -> np.ndarray:
    """The float64 cost matrix for the exact solvers (same definition as Geometry)."""
    if matrix is not None:
        return matrix
    with jax.enable_x64(True):
        geom = Geometry.from_points(jnp.asarray(x, jnp.float64), jnp.asarray(y, jnp.float64), cost)
        return np.asarray(geom.matrix)


def solve_partial(
    x,
    y,
    m: float,
    solver: PartialSinkhorn = DEFAULT_SOLVER,
    options: SolveOptions = SolveOptions(),
    *,
    a=None,
    b=None,
    cost: str | Callable | np.ndarray = "cosine",
    mesh=None,
    **deprecated,
) -> PartialOTResult:
    """Solve min <C, G> s.t. G >= 0, G 1 <= a, G^T 1 <= b, 1^T G 1 = m.

    Args:
      x: (n, d) source points (PUAudit: the denoised positives' difference embeddings).
      y: (k, d) target points (the unlabelled pool). Rows need not be normalised for
        the cosine cost. Pass ``x = y = None`` with ``cost`` an (n, k) matrix.
      m: mass to transport, ``0 < m <= min(|a|, |b|)``.
      solver: the Sinkhorn settings (epsilon, tol, max_iter, eps_decay, relaxation, certify, ...):
        :class:`PartialSinkhorn`; the default, :data:`DEFAULT_SOLVER`, is its defaults with the certificate.
      options: how the problem is solved (method, dtype, memory budget, plan, exact backend, gap_tol):
        :class:`SolveOptions`.
      a: nonnegative source weights, default uniform 1/n.
      b: nonnegative target weights, default uniform 1/k.
      cost: "cosine" (1 - cos, in [0, 2]), "sqeuclidean", a callable
        ``fn(x_block, y_block) -> (bx, by)``, or a precomputed (n, k) matrix.
      mesh: None (one device), "all", a device count, a ``jax.sharding.Mesh`` or a
        ``sharded.Layout``: the Sinkhorn solve is split over the devices (U over the columns
        axis, P over the rows axis of a 2-D mesh; see ``sharded.py``). ``options.memory_budget`` then
        applies to each device's block of the cost matrix. Every process of a cluster passes
        the same full inputs (``sharded.solve_process_local`` when each holds a share of U).
      **deprecated: the keywords of the settings before ``solver`` / ``options`` (``epsilon=``, ``tol=``,
        ``method=``, ...): mapped onto them with a DeprecationWarning, for one release.

    Returns:
      :class:`PartialOTResult`. With ``solver.certify`` (the default) a Sinkhorn result carries its
      :class:`~puaudit_jax.ot.certificate.Certificate`; with ``options.gap_tol`` it is solved again with
      epsilon / 4 from the last round's potentials until the certified gap is <= gap_tol (at most
      ``MAX_GAP_ROUNDS`` solves; ``result.gap_met``, ``result.epsilon`` the last epsilon,
      ``result.iterations`` the last round's).

    Raises:
      ValueError: naming the argument for bad input (the data: ``problem.validate``; the settings: when
        the configs are built, ``settings.check_settings``).
    """
    solver, options = _configs("solve_partial", solver, options, deprecated)
    method, dtype = options.method, options.dtype
    layout = layout_for(mesh)
    on_device = prepare_on_device(options.prepare, layout, dtype, method, x, y)
    x, y, matrix, a, b, m = phase("validation", validate, x, y, m, a=a, b=b, cost=cost, dtype=np.float64,
                                  on_device=on_device)  # fmt: skip
    if matrix is None:
        x, y = prepared_points(x, y, cost, "float64" if method == "exact" else dtype, on_device, layout)
    if method == "exact":
        return _exact(x, y, matrix, cost, a, b, m, options.exact_backend, options.return_plan, None)
    result, out = _sinkhorn(x, y, matrix, a, b, m, solver, options, cost, layout)
    if method == "sinkhorn" and not _finite(result):
        raise nonfinite_error(solver.epsilon, dtype, "or method='auto' (the exact solver then takes over)")
    if method != "auto":
        return result
    return _auto_fallback(result, out, x, y, matrix, cost, a, b, m, solver.tol, options.exact_backend,
                          options.return_plan)  # fmt: skip


def prepared_points(x, y, cost, dtype: str, on_device: bool, layout=None):
    """Validated points (``problem.validate``) checked and, for the cosine cost, scaled to unit rows.

    Where ``problem.prepare_on_device`` said: on the device (``problem.checked_on_device``, after
    ``problem.device_points``), or on the host (``problem.unit_rows``: float32 points stay float32 unless the solve is
    in float64). The squared Euclidean cost's range is checked for ``dtype`` either way.

    Args:
        x: (n, d) source points, as ``validate`` returned them.
        y: (k, d) target points.
        cost: the cost ("cosine", "sqeuclidean" or a callable).
        dtype: the dtype the costs are computed in ("float32" or "float64"; the exact solvers': "float64").
        on_device: ``problem.prepare_on_device``'s answer.
        layout: None (one device) or the mesh's :class:`~puaudit_jax.ot.sharded.Layout`.

    Returns:
        (x, y): device arrays with ``on_device``, else numpy arrays.

    Raises:
        ValueError: naming the cloud of a NaN / inf or a zero row, or squared distances out of ``dtype``'s range.
    """
    sqeuclidean = isinstance(cost, str) and cost == "sqeuclidean"
    if on_device:
        # a mesh's first device: sharded.placed_points splits them from there
        x, y = phase("transfer", device_points, x, y, None if layout is None else layout.mesh.devices.flat[0])
        x, y, scale = phase("normalisation", checked_on_device, x, y, cost)
        if sqeuclidean:
            check_sqeuclidean_scale(scale, x.shape[1], dtype)
        return x, y
    x, y = phase("normalisation", unit_rows, x, y, cost, dtype=np.float64 if dtype == "float64" else None)
    if sqeuclidean:
        check_sqeuclidean_range(x, y, dtype)
    return x, y


def _configs(entry: str, solver, options, deprecated: dict) -> tuple[PartialSinkhorn, SolveOptions]:
    """``(solver, options)`` checked for type, with the deprecated keywords mapped onto them."""
    if not isinstance(solver, PartialSinkhorn):
        raise TypeError(f"{entry}: solver must be a PartialSinkhorn, got {type(solver).__name__}")
    if not isinstance(options, SolveOptions):
        raise TypeError(f"{entry}: options must be a SolveOptions, got {type(options).__name__}")
    new = replace_deprecated(entry, {"solver": solver, "options": options}, deprecated, stacklevel=4)
    return new["solver"], new["options"]


def _sinkhorn(x, y, matrix, a, b, m, solver, options: SolveOptions, cost, layout):
    """The Sinkhorn solve of ``solve_partial`` (its ``gap_tol`` rounds too): (PartialOTResult, SinkhornOutput).

    x, y: (n, d), (k, d) unit rows or None with ``matrix`` (n, k); a (n,), b (k,) weights; m the mass.
    """
    dtype, block_size = options.dtype, options.block_size
    n, k = matrix.shape if matrix is not None else (x.shape[0], y.shape[0])
    # each device's block of the problem (the whole problem on one device)
    n_dev, k_dev = (n, k) if layout is None else (-(-n // layout.count("rows")), -(-k // layout.count("cols")))
    if block_size is None and matrix is None:
        itemsize, budget = np.dtype(dtype).itemsize, _memory_budget(options.memory_budget, layout)
        if n_dev * k_dev * itemsize > budget:
            block_size = max(1, min(1024, budget // (4 * max(n_dev, k_dev) * itemsize)))
    blocked = block_size is not None and matrix is None
    gap_tol = options.gap_tol
    solver = dataclasses.replace(solver, certify=solver.certify or gap_tol is not None)
    with_plan, block = options.return_plan and not blocked, block_size if blocked else None

    def run(solver, init=None):
        if layout is not None:
            return sharded.solve(solver, x, y, a, b, m, layout, cost=cost, matrix=matrix, block_size=block,
                                 with_plan=with_plan, dtype=dtype, init=init,
                                 precision=options.cost_precision)  # fmt: skip
        return _solve_one_device(x, y, matrix, a, b, m, solver, cost, block, with_plan, dtype, init,
                                 options.cost_precision)  # fmt: skip

    out, plan = run(solver)
    rounds = 1
    while gap_tol is not None and rounds < MAX_GAP_ROUNDS and float(out.certificate.gap) > gap_tol:
        # the next round starts from this one's potentials (cost units: valid at any epsilon)
        solver, rounds = dataclasses.replace(solver, epsilon=solver.epsilon / 4), rounds + 1
        out, plan = run(solver, (out.f, out.g, out.fd, out.gd))
    gap_met = None if gap_tol is None else bool(float(out.certificate.gap) <= gap_tol)
    result = phase("finalisation", _from_sinkhorn, out, plan, a, b, m, blocked)
    return dataclasses.replace(result, gap_met=gap_met, rounds=rounds), out


def _solve_one_device(x, y, matrix, a, b, m, solver, cost, block_size, with_plan, dtype, init=None,
                      precision="default"):  # fmt: skip
    """The single-device Sinkhorn solve: (SinkhornOutput of numpy arrays, plan or None).

    ``init``: None or potentials (f, g, fd, gd) to start from; ``precision``: the cost's products during
    the solve (the certificate's: ``Geometry.certified``). The certificate, when asked for, is a program of its
    own, so the solve's serves both.
    """
    with jax.enable_x64(dtype == "float64"):
        x, y, matrix, a, b, m, init = phase("transfer", _on_device, dtype, x, y, matrix, a, b, m, init)
        args = (a, b, m, init, dataclasses.replace(solver, certify=False))
        if matrix is not None:
            out, plan = phase("iterations", _run_matrix, matrix, *args, with_plan=with_plan)
        else:
            out, plan = phase("iterations", run_points, x, y, *args, cost=cost, block_size=block_size,
                              with_plan=with_plan, precision=precision)  # fmt: skip
        if solver.certify:
            points_cost = None if matrix is not None else cost  # a matrix ``cost`` is ``matrix``
            out = phase("certificate", _certified, x, y, matrix, *args[:3], out, cost=points_cost,
                        block_size=block_size)  # fmt: skip
        return phase("host copies", _on_host, out, plan)


def _on_device(dtype: str, *arrays):
    """``arrays`` (None, numpy or JAX arrays, or a tuple of them) as device arrays of ``dtype``, None kept.

    Host values are cast on the host before they are transferred: cast on the device, the float64 weights
    and the mass compiled two programs of their own on a solve's first call (``to_device``).
    """
    return jax.tree.map(functools.partial(to_device, dtype=dtype), arrays)


def _on_host(out: SinkhornOutput, plan):
    """The solve's output as numpy arrays (O(n + k) numbers) and the (n, k) plan (or None) as it is.

    The plan stays a device array: copied to the host only if the caller reads it.
    """
    return jax.device_get(out), plan


def _certified_fast(x, y, matrix, *_, **__) -> bool:
    return compiles_fast(*(matrix.shape if matrix is not None else (x.shape[0], y.shape[0])))


@functools.partial(jit, static_argnames=("cost", "block_size"), when=_certified_fast)
def _certified(x, y, matrix, a, b, m, out: SinkhornOutput, *, cost, block_size) -> SinkhornOutput:
    """``out`` with its certificate, for the problem of points x, y (or of ``matrix`` when not None)."""
    if matrix is not None:
        geom = Geometry.from_matrix(matrix)
    else:  # "highest": at "default" XLA:CPU ran this program ~10 % slower; elsewhere with_certificate replaces it
        geom = Geometry.from_points(x, y, cost, block_size=block_size, normalised=True, precision="highest")
    return with_certificate(PartialProblem(geom, a, b, m), out)


def _auto_fallback(result, out, x, y, matrix, cost, a, b, m, tol, exact_backend, return_plan):
    """method="auto": the exact solver when Sinkhorn did not converge or was not finite."""
    n, k = len(a), len(b)
    reason = None
    if not _finite(result):
        reason = "Sinkhorn produced non-finite values"
    elif not result.converged:
        reason = (
            f"Sinkhorn did not converge in {result.iterations} iterations "
            f"(marginal error {float(out.marginal_error):.3g} > tol {tol:g})"
        )
    if reason is None:
        return result
    if n * k * 8 > EXACT_MEMORY_LIMIT:
        return dataclasses.replace(
            result,
            fallback_reason=reason + "; exact fallback skipped: the dense "
            f"{n}x{k} float64 problem exceeds {EXACT_MEMORY_LIMIT >> 30} GiB",
        )
    return _exact(x, y, matrix, cost, a, b, m, exact_backend, return_plan, reason)


def nonfinite_error(epsilon: float, dtype: str, remedy: str) -> ValueError:
    """The error of a Sinkhorn solve that produced NaN or inf at ``epsilon`` in ``dtype``.

    Below 1 (cost units) epsilon is too small (C / epsilon overflows: 1e-40 in float32), above it too large
    (the potentials, of order epsilon, overflow: 1e300); float64 holds both further out.

    Args:
        epsilon: the entropic regularisation of the failed solve, in cost units.
        dtype: the solve's dtype ("float32" or "float64").
        remedy: a further remedy appended to the message (e.g. "or method='auto' (...)").

    Returns:
        The ValueError (to raise).
    """
    small = epsilon < 1.0
    why = "too small: C / epsilon overflows" if small else "too large: the potentials, of order epsilon, overflow"
    return ValueError(f"Sinkhorn produced non-finite values at epsilon={epsilon:g} in {dtype} ({why}): use a "
                      f"{'larger' if small else 'smaller'} epsilon, dtype='float64', {remedy}")  # fmt: skip


def _finite(result: PartialOTResult) -> bool:
    """Whether a Sinkhorn result's cost and scores are finite."""
    return bool(np.isfinite(result.cost) and np.all(np.isfinite(result.col_mass)))


def _from_sinkhorn(out: SinkhornOutput, plan, a, b, m, blocked) -> PartialOTResult:
    row = np.asarray(out.row_mass, np.float64)
    col = np.asarray(out.col_mass, np.float64)
    return PartialOTResult(
        plan=plan,
        row_mass=row,
        col_mass=col,
        cost=float(out.cost),
        mass=float(out.mass),
        marginal_error=_violation(row, col, a, b, m),
        iterations=int(out.iterations),
        converged=bool(out.converged),
        method="sinkhorn",
        epsilon=float(out.epsilon),
        reg_cost=float(out.reg_cost),
        blocked=blocked,
        certificate=None if out.certificate is None else jax.tree.map(float, out.certificate),
    )


def _exact(x, y, matrix, cost, a, b, m, backend, return_plan, reason) -> PartialOTResult:
    C = _dense_cost_np(x, y, matrix, cost)
    out = exact_lib.solve_exact(C, a, b, m, backend=backend)
    row, col = out.plan.sum(1), out.plan.sum(0)
    return PartialOTResult(
        plan=out.plan if return_plan else None,
        row_mass=row,
        col_mass=col,
        cost=out.cost,
        mass=float(row.sum()),
        marginal_error=_violation(row, col, a, b, m),
        iterations=0,
        converged=out.warning is None and bool(np.isfinite(out.cost)),
        method=f"exact-{out.backend}",
        fallback_reason=reason,
    )


def entropic_partial_cost(
    x,
    y,
    m,
    *,
    a=None,
    b=None,
    cost="cosine",
    solver: PartialSinkhorn = PartialSinkhorn(),
    block_size: int | None = None,
    mesh=None,
) -> jax.Array:
    """Regularised partial OT cost (dual objective), jittable and differentiable in x, y.

    No input validation (call inside ``jax.grad`` / ``jax.jit``).

    Args:
        x: source points, shape (n, d).
        y: target points, shape (k, d).
        m: the mass to transport, ``0 < m <= min(|a|, |b|)``.
        a: source weights, shape (n,) (None: uniform 1/n).
        b: target weights, shape (k,) (None: uniform 1/k).
        cost: "cosine", "sqeuclidean" or a callable, as :func:`solve_partial`.
        solver: the Sinkhorn settings.
        block_size: rows/columns per block when the cost matrix is not materialised (None: materialised).
        mesh: as in :func:`solve_partial` (the solve split over the devices; same gradient).

    Returns:
        The regularised cost (scalar, cost units).
    """
    a = jnp.full(x.shape[0], 1.0 / x.shape[0], x.dtype) if a is None else a
    b = jnp.full(y.shape[0], 1.0 / y.shape[0], y.dtype) if b is None else b
    layout = layout_for(mesh)
    if layout is not None:
        return sharded.reg_cost(solver, x, y, a, b, jnp.asarray(m, x.dtype), layout, cost=cost, block_size=block_size)
    geom = Geometry.from_points(x, y, cost, block_size=block_size)
    return solver(PartialProblem(geom, a, b, jnp.asarray(m, x.dtype))).reg_cost


def solve_partial_batch(
    xs, ys, m, *, cost="cosine", solver: PartialSinkhorn | None = None, block_size: int | None = None, mesh=None
) -> SinkhornOutput:
    """``jax.vmap`` of the Sinkhorn solver over a batch of same-shaped problems.

    Uniform weights. Under vmap ``lax.cond`` evaluates both branches, so the default solver here uses
    the stable two-pass reductions only.

    Args:
        xs: source points, shape (B, n, d).
        ys: target points, shape (B, k, d).
        m: the mass to transport, a scalar or shape (B,).
        cost: "cosine", "sqeuclidean" or a callable, as :func:`solve_partial`.
        solver: the Sinkhorn settings (None: ``PartialSinkhorn(one_pass=False)``).
        block_size: rows/columns per block when the cost matrix is not materialised (None: materialised).
        mesh: None, "all", a device count or a ``Mesh``: the problems are split over all its
            devices (each device solves its share; no communication).

    Returns:
        A batched :class:`SinkhornOutput` (leading axis B).
    """
    solver = solver or PartialSinkhorn(one_pass=False)
    m = jnp.broadcast_to(jnp.asarray(m, xs.dtype), xs.shape[:1])
    layout = layout_for(mesh)
    if layout is not None:
        return sharded.solve_batch(solver, xs, ys, m, layout.mesh, cost=cost, block_size=block_size)

    return _batch(xs, ys, m, solver, cost=cost, block_size=block_size)


@functools.partial(
    jit,
    static_argnames=("cost", "block_size"),
    when=lambda xs, ys, *_, **__: compiles_fast(xs.shape[1], ys.shape[1], solves=xs.shape[0]),
)
def _batch(xs, ys, m, solver: PartialSinkhorn, *, cost, block_size) -> SinkhornOutput:
    """``solve_partial_batch`` on one device: vmap of the solver, uniform weights."""

    def one(x, y, mm):
        a = jnp.full(x.shape[0], 1.0 / x.shape[0], x.dtype)
        b = jnp.full(y.shape[0], 1.0 / y.shape[0], y.dtype)
        geom = Geometry.from_points(x, y, cost, block_size=block_size)
        return solver(PartialProblem(geom, a, b, mm))

    return jax.vmap(one)(xs, ys, m)
