"""Partial Sinkhorn over every device of a mesh, and across the processes of a cluster.

A problem of size (n_P, n_U) is cut into blocks: the pool U (columns) is split over the mesh
axis ``cols``, and optionally the sources P (rows) over a second axis ``rows``. Each device
holds only its block of the points (x_i, y_j), of the weights (a_i, b_j), of the potentials
(f_i, g_j) and of the cost (dense, or recomputed block by block), and runs the *same* solver
code (``sinkhorn.py``) under ``jax.shard_map``: the geometry's ``Split`` turns every reduction
into a local reduction plus a collective (``split.py``). Per iteration a device sends
O(n_P / D_rows + n_U / D_cols) floats (the K v and K^T u partial sums), never a block of the cost.

    Layout.of(mesh, rows=None, cols=None)       which mesh axes split which side
    solve(solver, x, y, a, b, m, layout, ...)   SinkhornOutput (numpy) + plan (on the devices)
    solve_process_local(...)                    multi-process: each process passes its share of U
    reg_cost(solver, x, y, a, b, m, layout, ...) jittable and differentiable (envelope gradient)
    solve_batch(solver, xs, ys, m, mesh, ...)   a batch of problems split over the devices

Uneven sizes are padded with zero-weight points (copies of the first point, so the cosine cost
stays defined); the solver gives them potential -inf and zero mass, and they are cut from the
outputs. The sharded solve equals the single-device one up to the order of float additions
(``tests/ot/test_ot_sharded.py``: 1e-6 in float64).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from puaudit_jax.ot.certificate import Certificate
from puaudit_jax.ot.geometry import Geometry
from puaudit_jax.ot.problem import (
    PartialProblem,
    PointFacts,
    check_sqeuclidean_scale,
    compiles_fast,
    device_points,
    host_facts,
    pad_points,
    prepare_on_device,
    prepared_on_device,
    to_device,
    unit_rows,
    zero_row_error,
)
from puaudit_jax.ot.settings import check_settings
from puaudit_jax.ot.sinkhorn import PartialSinkhorn, SinkhornOutput
from puaudit_jax.ot.split import Split
from puaudit_runtime.jit import jit
from puaudit_runtime.mesh import COLS, ROWS, pad_to_multiple
from puaudit_runtime.phases import phase


@dataclasses.dataclass(frozen=True)
class Layout:
    """A mesh and the names of its axes that split the rows (P) and the columns (U).

    Build with :meth:`of`, which checks the names against the mesh.
    """

    mesh: Mesh
    rows: str | None
    cols: str | None

    @classmethod
    def of(cls, mesh, rows: str | None = None, cols: str | None = None) -> Layout:
        """The layout of ``mesh``: which of its axes split the rows and the columns.

        Default axes: a 1-axis mesh splits the columns; a 2-axis mesh (r, c) splits rows over
        its first axis and columns over its second; the names "p" / "u" are used when present.

        Args:
            mesh: a ``jax.sharding.Mesh`` (a :class:`Layout` is returned as it is).
            rows: the mesh axis that splits the rows (P), or None (the default axes when ``cols`` is None too).
            cols: the mesh axis that splits the columns (U), or None.

        Returns:
            The :class:`Layout`.

        Raises:
            ValueError: ``mesh`` is not a Mesh, an axis name is not one of the mesh's, both sides name the
                same axis, or a mesh axis with more than one device splits nothing (its devices would repeat
                the same solve).
        """
        if isinstance(mesh, Layout):
            return mesh
        if not isinstance(mesh, Mesh):
            raise ValueError(
                "mesh must be a jax.sharding.Mesh (puaudit_runtime.mesh.make_mesh) or a Layout; got "
                f"{type(mesh).__name__}"
            )
        names = tuple(mesh.axis_names)
        if rows is None and cols is None:
            if set(names) >= {ROWS, COLS} or set(names) == {COLS}:
                rows, cols = (ROWS if ROWS in names else None), COLS
            elif len(names) == 1:
                cols = names[0]
            elif len(names) == 2:
                rows, cols = names
            else:
                raise ValueError(
                    f"mesh axes {names}: name the axes that split the rows and the columns "
                    f"(Layout.of(mesh, rows=..., cols=...))"
                )
        for side, axis in (("rows", rows), ("cols", cols)):
            if axis is not None and axis not in names:
                raise ValueError(f"{side} axis {axis!r} is not an axis of the mesh {names}")
        if rows is not None and rows == cols:
            raise ValueError(f"rows and cols name the same mesh axis {rows!r}")
        idle = [a for a in names if a not in (rows, cols) and mesh.shape[a] > 1]
        if idle:
            raise ValueError(
                f"mesh axis {idle[0]!r} ({mesh.shape[idle[0]]} devices) splits neither the rows "
                f"nor the columns (rows={rows!r}, cols={cols!r}): its devices would repeat the solve"
            )
        return cls(mesh, rows, cols)

    @property
    def split(self) -> Split:
        """The :class:`Split` the geometry's reductions use (the axes of the rows and the columns)."""
        return Split(rows=self.rows, cols=self.cols)

    def count(self, side: str) -> int:
        """Devices that split ``side`` ("rows" or "cols")."""
        axis = self.rows if side == "rows" else self.cols
        return 1 if axis is None else int(self.mesh.shape[axis])

    @property
    def specs(self) -> dict:
        """PartitionSpecs of a problem's arrays."""
        r, c = self.rows, self.cols
        return dict(x=P(r, None), y=P(c, None), a=P(r), b=P(c), m=P(), matrix=P(r, c), plan=P(r, c))

    def output_specs(self, certify: bool = False) -> SinkhornOutput:
        """PartitionSpecs of a solve's output fields (the certificate's too with ``certify``)."""
        rep, r, c = P(), P(self.rows), P(self.cols)
        return SinkhornOutput(
            f=r,
            g=c,
            fd=rep,
            gd=rep,
            row_mass=r,
            col_mass=c,
            cost=rep,
            reg_cost=rep,
            mass=rep,
            marginal_error=rep,
            iterations=rep,
            converged=rep,
            stable_steps=rep,
            epsilon=rep,
            certificate=Certificate(rep, rep, rep, rep) if certify else None,
        )


# ---------------------------------------------------------------------------------------------
# The per-device program


def _geometry(x, y, matrix, cost, block_size, split, precision) -> Geometry:
    """One device's geometry; x, y rows normalised on the host already (``unit_rows``)."""
    if matrix is not None:
        return Geometry.from_matrix(matrix, split=split)
    return Geometry.from_points(x, y, cost, block_size=block_size, split=split, normalised=True, precision=precision)


def program(solver: PartialSinkhorn, layout: Layout, cost, block_size, with_plan: bool, points: bool,
            warm: bool = False, precision: str = "default"):  # fmt: skip
    """The jitted sharded solve: ``jit(shard_map(one device's solve))`` over ``layout.mesh``, cached.

    Its first argument is the solver (a pytree: its numbers are arguments, so one program serves every
    epsilon, tol and iteration cap with the same static settings, e.g. each round of ``gap_tol``); the
    others are global arrays of padded sizes N, K (multiples of the rows / columns split
    counts), split as ``layout.specs`` says (``place`` puts host arrays there).

    Args:
        solver: the :class:`PartialSinkhorn` each device runs (its static settings key the program).
        layout: :class:`Layout`: the mesh and which axes split the rows and the columns.
        cost: cost name of ``Geometry.from_points`` (e.g. "cosine"); None with ``points=False``.
        block_size: None (dense cost) or the block size of the recomputed (log-domain) cost.
        with_plan: also return the (N, K) plan (split as ``layout.specs["plan"]``).
        points: True: the program takes (x (N, d), y (K, d), a (N,), b (K,), m ()); False:
            (matrix (N, K), a (N,), b (K,), m ()).
        warm: four more arguments, the potentials (f (N,), g (K,), fd (), gd ()) to start from.
        precision: the cost's products during the solve (``SolveOptions.cost_precision``); the certificate
            picks its own (``Geometry.certified``).

    Returns:
        A jitted function ``(solver, *arrays) -> (SinkhornOutput of global arrays, plan (N, K) or None)``;
        ``.lower(solver, *abstract args).compile()`` gives its per-device HLO and memory.
    """
    return _program(jax.tree.structure(solver), solver.certify, layout, cost, block_size, with_plan, points, warm,
                    precision)  # fmt: skip


@functools.lru_cache(maxsize=64)
def _program(settings, certify: bool, layout: Layout, cost, block_size, with_plan: bool, points: bool, warm: bool,
             precision: str):  # fmt: skip
    """:func:`program`, cached by the solver's static settings (its pytree structure), not its numbers."""
    split, sp = layout.split, layout.specs

    def run(solver, *args):
        args, init = (args[:-4], args[-4:]) if warm else (args, None)
        (x, y, a, b, m), matrix = (args, None) if points else ((None, None, *args[1:]), args[0])
        geom = _geometry(x, y, matrix, cost, block_size, split, precision)
        out = solver(PartialProblem(geom, a, b, m), init=init)
        return out, (geom.plan(out.f, out.g, out.epsilon) if with_plan else None)

    in_specs = (P(),) + ((sp["x"], sp["y"]) if points else (sp["matrix"],))  # P(): the solver's numbers
    in_specs += (sp["a"], sp["b"], sp["m"])
    if warm:  # potentials are split like the weights they belong to
        in_specs += (sp["a"], sp["b"], sp["m"], sp["m"])
    out_specs = (layout.output_specs(certify), sp["plan"] if with_plan else None)

    def fast(solver, first, second, *_):  # (x, y, ...) or (matrix, a, ...): global sizes
        return compiles_fast(*((first.shape[0], second.shape[0]) if points else first.shape))

    return jit(jax.shard_map(run, mesh=layout.mesh, in_specs=in_specs, out_specs=out_specs), when=fast)


# ---------------------------------------------------------------------------------------------
# Padding and placement


def place(arr: np.ndarray, layout: Layout, spec: P) -> jax.Array:
    """A host array every process holds in full -> a global array split by ``spec`` over ``layout.mesh``.

    Each device receives only its block; works in one process or many.

    Args:
        arr: the whole array on the host, any shape (e.g. x (N, d), a (N,)), its split axes
            multiples of the mesh axes that split them.
        layout: :class:`Layout` (its mesh).
        spec: the ``PartitionSpec`` of the result (an entry of ``layout.specs``).

    Returns:
        A global ``jax.Array`` of ``arr``'s shape and dtype, split by ``spec``.
    """
    sharding = NamedSharding(layout.mesh, spec)
    return jax.make_array_from_callback(arr.shape, sharding, lambda idx: arr[idx])


def padded_points(z, w: np.ndarray, size: int, dtype) -> tuple[np.ndarray | jax.Array, np.ndarray]:
    """``pad_points`` of host or device points, cast to ``dtype``: a JAX array is padded and cast on its device.

    Args:
        z: (n, d) points, numpy or a JAX array.
        w: (n,) their weights (numpy).
        size: the padded row count (>= n).
        dtype: the points' dtype.

    Returns:
        (points (size, d), numpy or a JAX array as ``z``, weights (size,) numpy, 0 on the padding).
    """
    if not isinstance(z, jax.Array):
        z, w = pad_points(np.asarray(z), w, size)
        return z.astype(dtype), w
    extra = size - z.shape[0]
    if extra or z.dtype != dtype:
        z = _padded(z, extra=extra, dtype=np.dtype(dtype).name)
    return z, np.pad(w, (0, extra))


def placed_points(z, w: np.ndarray, size: int, layout: Layout, side: str, dtype) -> tuple[jax.Array, np.ndarray]:
    """Points and their weights padded to ``size`` rows (``pad_points``), the points split as ``layout`` says.

    Host points are padded on the host and each device receives its block (:func:`place`). A JAX array is padded
    on its own device and moved from device to device: never copied to the host.

    Args:
        z: (n, d) points, numpy or a JAX array (``solve_partial``'s device preparation: a single-process mesh).
        w: (n,) their weights (numpy).
        size: the padded row count (a multiple of the devices that split ``side``).
        layout: :class:`Layout`.
        side: "x" (rows of the problem) or "y" (its columns): the entry of ``layout.specs``.
        dtype: the points' dtype on the devices.

    Returns:
        (points (size, d) as a global array split over ``layout.mesh``, weights (size,) numpy, 0 on the padding).
    """
    z, w = padded_points(z, w, size, dtype)
    if isinstance(z, jax.Array):
        return jax.device_put(z, NamedSharding(layout.mesh, layout.specs[side])), w
    return place(z, layout, layout.specs[side]), w


@functools.partial(jit, static_argnames=("extra", "dtype"))
def _padded(z: jax.Array, *, extra: int, dtype: str) -> jax.Array:
    """``pad_points`` on the device: ``extra`` copies of z[0] appended to z (n, d), cast to ``dtype``.

    The copies carry no gradient (:func:`reg_cost` pads inside ``jax.grad``): a padding point has no weight.
    """
    return jnp.concatenate([z, jax.lax.stop_gradient(jnp.repeat(z[:1], extra, 0))]).astype(dtype)


def _to_host(arr: jax.Array) -> np.ndarray:
    """A global array -> numpy on every process (gathered across processes when needed)."""
    if arr.is_fully_addressable:
        return np.asarray(jax.device_get(arr))  # explicit: the transfer guard lets the results through
    return np.asarray(multihost_utils.process_allgather(arr, tiled=True))


# ---------------------------------------------------------------------------------------------
# Entry points


def solve(
    solver: PartialSinkhorn,
    x,
    y,
    a,
    b,
    m,
    layout: Layout,
    *,
    cost="cosine",
    matrix=None,
    block_size: int | None = None,
    with_plan: bool = False,
    dtype="float32",
    init=None,
    precision: str = "default",
):
    """Solve one problem over the devices of ``layout``.

    The arrays are validated (``problem.validate``): host arrays held in full by every process, or, on a mesh of
    one process's devices, points that are JAX arrays (``problem.checked_on_device``), which stay on the devices.

    Args:
      solver: the :class:`PartialSinkhorn` each device runs.
      x: (n, d) source points (None with ``matrix``); for the cosine cost, rows of unit norm
        (``problem.unit_rows`` or ``problem.checked_on_device``, as ``solve_partial`` passes them).
      y: (k, d) target points (None with ``matrix``), likewise.
      a: (n,) source weights.
      b: (k,) target weights.
      m: the mass to transport.
      layout: :class:`Layout`.
      cost: as ``Geometry.from_points``.
      matrix: None, or the (n, k) cost matrix instead of the points.
      block_size: as ``Geometry.from_points``.
      with_plan: also return the (n, k) plan (dense geometries only).
      dtype: "float32" or "float64".
      init: None or potentials (f (n,), g (k,), fd, gd) to start from (a returned output's:
        ``gap_tol`` rounds); padded with -inf, the potential of a zero-weight point.
      precision: the products behind a cost from points during the solve (``SolveOptions.cost_precision``).

    Returns:
      (SinkhornOutput of numpy arrays, plan (n, k) or None), padding removed. The plan stays split over the
      devices, copied to the host only when read, where one process holds them all; across processes it is
      gathered to every process as numpy.
    """
    n, k = matrix.shape if matrix is not None else (len(x), len(y))
    with jax.enable_x64(dtype == "float64"):
        args = phase("transfer", _arguments, x, y, matrix, a, b, m, init, layout, np.dtype(dtype))
        run = program(solver, layout, None if matrix is not None else cost, block_size, with_plan, matrix is None,
                      init is not None, precision)  # fmt: skip
        out, plan = phase("iterations", run, solver, *args)
        out = phase("host copies", jax.tree.map, _to_host, out)
        plan = None if plan is None else _plan_rows(plan, n, k)
    return _unpad(out, n, k), plan


def _arguments(x, y, matrix, a, b, m, init, layout: Layout, jd: np.dtype) -> tuple:
    """:func:`solve`'s arguments of :func:`program`, padded to the split counts and placed as ``layout.specs``."""
    n, k = matrix.shape if matrix is not None else (len(x), len(y))
    N, K = pad_to_multiple(n, layout.count("rows")), pad_to_multiple(k, layout.count("cols"))
    sp = layout.specs
    if matrix is not None:
        C = np.zeros((N, K), jd)
        C[:n, :k] = matrix
        a_p, b_p = np.pad(a, (0, N - n)), np.pad(b, (0, K - k))
        args = (place(C, layout, sp["matrix"]),)
    else:
        (x_p, a_p), (y_p, b_p) = placed_points(x, a, N, layout, "x", jd), placed_points(y, b, K, layout, "y", jd)
        args = (x_p, y_p)
    args += (place(a_p.astype(jd), layout, sp["a"]), place(b_p.astype(jd), layout, sp["b"]), to_device(m, jd))
    if init is not None:
        f, g, fd, gd = (np.asarray(p, jd) for p in init)
        pad = functools.partial(np.pad, mode="constant", constant_values=-np.inf)
        args += (place(pad(f, (0, N - n)), layout, sp["a"]), place(pad(g, (0, K - k)), layout, sp["b"]),
                 jnp.asarray(fd), jnp.asarray(gd))  # fmt: skip
    return args


def _plan_rows(plan: jax.Array, n: int, k: int):
    """The (n, k) plan without its padding: a device array where one process holds every block, else numpy."""
    if not plan.is_fully_addressable:
        return _to_host(plan)[:n, :k]
    return plan if plan.shape == (n, k) else plan[:n, :k]


def _unpad(out: SinkhornOutput, n: int, k: int) -> SinkhornOutput:
    return dataclasses.replace(out, f=out.f[:n], g=out.g[:k], row_mass=out.row_mass[:n], col_mass=out.col_mass[:k])


def solve_process_local(
    solver: PartialSinkhorn,
    x,
    y_local,
    m,
    layout: Layout,
    *,
    a=None,
    b_local=None,
    cost="cosine",
    block_size: int | None = None,
    dtype="float32",
    precision: str = "default",
    prepare: str = "auto",
):
    """A cluster solve where each process holds only its share of U.

    The columns axis of ``layout`` must span the processes, with the same number of devices on each;
    every share is padded to the same size with zero-weight points. Every process checks its share (NaN /
    inf; zero rows under the cosine cost; the squared Euclidean cost's range) and the processes agree on what
    they found before any of them solves, so that a bad share is the same error on all of them.

    Args:
        solver: the Sinkhorn settings.
        x: source points, shape (n, d), the same on every process.
        y_local: this process's rows of U, shape (k_i, d), in process order (process 0 holds the first
            rows: ``puaudit_runtime.cluster.process_rows``).
        m: the mass to transport, ``0 < m <= min(|a|, |b|)``.
        layout: the mesh and its rows / columns axes (:meth:`Layout.of`).
        a: source weights, shape (n,), the same on every process (None: uniform 1/n).
        b_local: this process's target weights, shape (k_i,) (None: uniform 1 / sum_i k_i).
        cost: "cosine" (rows scaled to unit norm here), "sqeuclidean" or a callable, as
            :func:`~puaudit_jax.ot.solve_partial`.
        block_size: rows/columns per block when the cost matrix is not materialised (None: materialised).
        dtype: the solve's dtype, "float32" or "float64".
        precision: the products behind the cost during the solve, as ``SolveOptions.cost_precision``.
        prepare: where each process checks and normalises its points, as ``SolveOptions.prepare``: float32
            points solved in float32 on the process's first device ("auto": JAX arrays, which are then never
            copied to the host), others on the host in float64.

    Returns:
        (SinkhornOutput with f, row_mass of all n rows and g, col_mass of this process's k_i rows;
        the scalars are the whole problem's, the same on every process).

    Raises:
        ValueError: a process's share disagrees with the others' (the same error on every process).
    """
    check_settings(prepare=prepare)
    x, y_local, facts = _checked_share(x, y_local, cost, dtype, prepare)
    a = np.full(len(x), 1.0 / len(x)) if a is None else np.asarray(a, np.float64)
    b_local = None if b_local is None else np.asarray(b_local, np.float64)
    shares = _agree_on_shares(x, y_local, a, b_local, m, layout, facts)
    if isinstance(cost, str) and cost == "sqeuclidean":  # the same scale, so the same error, on every process
        check_sqeuclidean_scale(float(shares[:, 8].max()), x.shape[1], dtype)
    if not isinstance(x, jax.Array):
        x, y_local = unit_rows(x, y_local, cost)
    n_proc = len(shares)
    if b_local is None:
        b_local = np.full(len(y_local), 1.0 / shares[:, 0].sum())
    share = pad_to_multiple(int(shares[:, 0].max()), layout.count("cols") // n_proc)
    sp = layout.specs
    with jax.enable_x64(dtype == "float64"):
        jd = np.dtype(dtype)

        def local(arr, spec, rows):
            return jax.make_array_from_process_local_data(
                NamedSharding(layout.mesh, spec), arr.astype(jd), (rows,) + arr.shape[1:]
            )

        y_p, b_p = padded_points(y_local, b_local, share, jd)

        args = (
            place(x.astype(jd), layout, sp["x"]),
            local(y_p, sp["y"], share * n_proc),
            place(a.astype(jd), layout, sp["a"]),
            local(b_p, sp["b"], share * n_proc),
            to_device(m, jd),
        )
        out, _ = program(solver, layout, cost, block_size, False, True, precision=precision)(solver, *args)
        # U's outputs stay where they are (this process's share); the rest is whole on every process
        fields = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
        own = {name: _local_rows(fields.pop(name))[: len(y_local)] for name in ("g", "col_mass")}
        whole = {name: jax.tree.map(_to_host, value) for name, value in fields.items()}
    return SinkhornOutput(**whole, **own)


def _checked_share(x, y_local, cost, dtype: str, prepare: str):
    """A process's points and what their check found, with nothing raised: the processes agree first.

    Returns (x, y_local, (facts of x, facts of y_local)) (:class:`~problem.PointFacts`; the agreement:
    :func:`_agree_on_shares`). float32 points solved in float32 are checked where ``prepare`` says
    (``problem.prepare_on_device``): on the process's first device, scaled there to unit rows for the cosine
    cost; others become float64 numpy, checked on the host and normalised after the agreement. Points of
    other shapes are left to the agreement to name.
    """
    shaped = (
        all(np.ndim(z) == 2 and np.shape(z)[0] > 0 for z in (x, y_local)) and np.shape(x)[1] == np.shape(y_local)[1]
    )
    if shaped and prepare_on_device(prepare, None, dtype, "sinkhorn", x, y_local):
        x, y_local, facts = prepared_on_device(*device_points(x, y_local, jax.local_devices()[0]), cost)
        return x, y_local, facts
    x, y_local = np.asarray(x, np.float64), np.asarray(y_local, np.float64)
    facts = tuple(host_facts(z, cost) if z.ndim == 2 and len(z) else PointFacts(bool(np.isfinite(z).all()), 0, 0, 0.0)
                  for z in (x, y_local))  # fmt: skip
    return x, y_local, facts


def _agree_on_shares(x, y_local, a, b_local, m, layout: Layout, facts) -> np.ndarray:
    """Check every process's share of the problem on every process, after one all-gather.

    The all-gather collects each process's (rows of U, d, |b_i| (NaN: uniform weights), m, |a|,
    finite, zero rows of y_local and the first, the largest ``|coordinate|``, zero rows of x and the first);
    then the same checks run on every process, so that a bad share stops all of them with the same ValueError
    instead of leaving the others waiting in the solve's collectives. ``facts``: the
    :class:`~problem.PointFacts` of x and y_local (:func:`_checked_share`). Returns (P, 11).
    """
    fx, fy = facts
    b = np.full(len(y_local), np.nan) if b_local is None else b_local
    finite = fx.finite and fy.finite and np.isfinite(a).all() and (b_local is None or np.isfinite(b).all())
    ok = finite and len(b) == len(y_local)
    mine = np.array(
        [
            len(y_local),
            y_local.shape[1] if y_local.ndim == 2 else -1,
            np.nan if b_local is None else b.sum(),
            float(m),
            a.sum(),
            float(ok),
            fy.zero_rows,
            fy.first_zero,
            max(fx.scale, fy.scale),
            fx.zero_rows,
            fx.first_zero,
        ]
    )
    shares = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, len(mine))
    n_proc = len(shares)
    problems = []
    if layout.count("cols") % n_proc:
        problems.append(
            f"the cols axis {layout.cols!r} has {layout.count('cols')} devices, not a multiple of the "
            f"{n_proc} processes: each process must hold the same number of U's blocks"
        )
    if layout.count("rows") > 1:
        problems.append("solve_process_local splits only U across processes: use a layout without a rows axis")
    if (shares[:, 0] < 1).any():
        problems.append(f"processes {np.flatnonzero(shares[:, 0] < 1).tolist()} hold no rows of U")
    if x.ndim != 2 or (shares[:, 1] != x.shape[1]).any():
        problems.append(f"dimensions of the U shares {shares[:, 1].astype(int).tolist()} differ from x's")
    if (shares[:, 3] != shares[0, 3]).any() or (shares[:, 4] != shares[0, 4]).any():
        problems.append(f"processes pass different m {shares[:, 3].tolist()} or a (|a| = {shares[:, 4].tolist()})")
    if not shares[:, 5].all():
        problems.append(
            f"processes {np.flatnonzero(shares[:, 5] == 0).tolist()} pass non-finite values or "
            "b_local of another length than y_local"
        )
    if np.isnan(shares[:, 2]).any() and not np.isnan(shares[:, 2]).all():
        problems.append("some processes pass b_local and others do not")
    for p in np.flatnonzero(shares[:, 6] > 0):
        problems.append(f"process {p}: {zero_row_error('y_local', int(shares[p, 7]), int(shares[p, 6]))}")
    if shares[0, 9] > 0:
        problems.append(str(zero_row_error("x", int(shares[0, 10]), int(shares[0, 9]))))
    b_total = 1.0 if np.isnan(shares[:, 2]).all() else float(np.nansum(shares[:, 2]))
    cap = min(shares[0, 4], b_total)
    if not 0 < shares[0, 3] <= cap * (1 + 1e-12):
        problems.append(f"m = {shares[0, 3]} must lie in (0, min(|a|, |b|)] = (0, {cap:.6g}]")
    if problems:
        raise ValueError("solve_process_local: " + "; ".join(problems))
    return shares


def _local_rows(arr: jax.Array) -> np.ndarray:
    """This process's rows of an array split on axis 0 (replicas counted once), in order."""
    blocks = {}
    for shard in arr.addressable_shards:
        blocks.setdefault(shard.index[0].start or 0, np.asarray(shard.data))
    return np.concatenate([blocks[s] for s in sorted(blocks)])


def reg_cost(
    solver: PartialSinkhorn, x, y, a, b, m, layout: Layout, *, cost="cosine", block_size: int | None = None
) -> jax.Array:
    """The regularised cost of ``solver`` on (x, y, a, b, m), split over ``layout``.

    Jittable and differentiable in x and y (envelope gradient, as on one device).
    Zero-weight padding is added here (its gradient is cut).

    Args:
        solver: the Sinkhorn settings.
        x: source points, shape (n, d).
        y: target points, shape (k, d).
        a: source weights, shape (n,).
        b: target weights, shape (k,).
        m: the mass to transport (scalar).
        layout: the mesh and its rows / columns axes (:meth:`Layout.of`).
        cost: "cosine", "sqeuclidean" or a callable, as :func:`~puaudit_jax.ot.solve_partial`.
        block_size: rows/columns per block when the cost matrix is not materialised (None: materialised).

    Returns:
        The regularised cost (scalar, cost units).
    """
    n, k = x.shape[0], y.shape[0]
    N, K = pad_to_multiple(n, layout.count("rows")), pad_to_multiple(k, layout.count("cols"))
    x, y = (_padded(z, extra=size - len(z), dtype=z.dtype.name) for z, size in ((x, N), (y, K)))
    a, b = jnp.pad(a, (0, N - n)), jnp.pad(b, (0, K - k))
    sp = layout.specs

    def run(x, y, a, b, m):
        geom = Geometry.from_points(x, y, cost, block_size=block_size, split=layout.split)
        return solver(PartialProblem(geom, a, b, m)).reg_cost

    split_run = jax.shard_map(
        run, mesh=layout.mesh, in_specs=(sp["x"], sp["y"], sp["a"], sp["b"], sp["m"]), out_specs=P()
    )
    return split_run(x, y, a, b, m)


@functools.partial(
    jit,
    static_argnames=("solver", "mesh", "cost", "block_size"),
    when=lambda solver, xs, ys, *_, **__: compiles_fast(xs.shape[1], ys.shape[1], solves=xs.shape[0]),
)
def solve_batch(
    solver: PartialSinkhorn, xs, ys, m, mesh: Mesh, *, cost="cosine", block_size: int | None = None
) -> SinkhornOutput:
    """Solve B independent problems with uniform weights, split over ``mesh``.

    The problems are split over every device of ``mesh`` (each device runs ``jax.vmap`` of the
    solver on its problems: no communication). B is padded to a multiple of the device count with
    copies of the first problem.

    Args:
        solver: the Sinkhorn settings.
        xs: source points, shape (B, n, d).
        ys: target points, shape (B, k, d).
        m: the masses, shape (B,).
        mesh: the devices; the problems are split over all its axes.
        cost: "cosine", "sqeuclidean" or a callable, as :func:`~puaudit_jax.ot.solve_partial`.
        block_size: rows/columns per block when the cost matrix is not materialised (None: materialised).

    Returns:
        A batched SinkhornOutput (leading axis B).
    """
    B = xs.shape[0]
    D = mesh.size
    axes = tuple(mesh.axis_names)
    extra = pad_to_multiple(B, D) - B
    xs, ys, m = (jnp.concatenate([z, jnp.repeat(z[:1], extra, 0)]) for z in (xs, ys, m))

    def one(x, y, mm):
        a = jnp.full(x.shape[0], 1.0 / x.shape[0], x.dtype)
        b = jnp.full(y.shape[0], 1.0 / y.shape[0], y.dtype)
        return solver(PartialProblem(Geometry.from_points(x, y, cost, block_size=block_size), a, b, mm))

    spec = P(axes)
    # check_vma=False: the per-device program has no collective, and its loop carries (created
    # unsplit inside the solver) would otherwise have to be re-typed as varying over the batch axes
    out = jax.shard_map(jax.vmap(one), mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec, check_vma=False)(
        xs, ys, m
    )
    return jax.tree.map(lambda t: t[:B], out)


def memory_per_device(
    solver: PartialSinkhorn,
    layout: Layout,
    n: int,
    k: int,
    d: int,
    *,
    cost="cosine",
    block_size: int | None = None,
    dtype="float32",
) -> dict:
    """XLA's buffer assignment for one device of the compiled sharded solve of an (n, k) problem.

    Nothing runs: the program is only compiled.

    Args:
        solver: the Sinkhorn settings.
        layout: the mesh and its rows / columns axes (:meth:`Layout.of`).
        n: rows of the problem (padded to a multiple of the rows axis).
        k: columns of the problem (padded to a multiple of the columns axis).
        d: the points' dimension.
        cost: "cosine", "sqeuclidean" or a callable, as :func:`~puaudit_jax.ot.solve_partial`.
        block_size: rows/columns per block when the cost matrix is not materialised (None: materialised).
        dtype: the solve's dtype, "float32" or "float64".

    Returns:
        Bytes per device: ``arguments``, ``outputs``, ``temporaries`` and their total ``peak`` (an
        upper bound: XLA may alias outputs with temporaries).
    """
    N, K = pad_to_multiple(n, layout.count("rows")), pad_to_multiple(k, layout.count("cols"))
    sp = layout.specs
    with jax.enable_x64(dtype == "float64"):
        jd = jnp.dtype(dtype)

        def spec(shape, s):
            return jax.ShapeDtypeStruct(shape, jd, sharding=NamedSharding(layout.mesh, s))

        args = (
            spec((N, d), sp["x"]),
            spec((K, d), sp["y"]),
            spec((N,), sp["a"]),
            spec((K,), sp["b"]),
            spec((), sp["m"]),
        )
        run = program(solver, layout, cost, block_size, False, True)
        stats = run.lower(solver, *args).compile().memory_analysis()
    out = dict(
        arguments=int(stats.argument_size_in_bytes),
        outputs=int(stats.output_size_in_bytes),
        temporaries=int(stats.temp_size_in_bytes),
    )
    out["peak"] = sum(out.values())
    return out
