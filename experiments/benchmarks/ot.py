"""Partial OT solvers side by side on cosine problems (PUAudit's shape of problem).

Every (solver, size, epsilon) runs in its own subprocess, so peak memory (max RSS above
the process's baseline after imports and data generation) and compile caches are per run.
Solvers:

- ``ours``          puaudit_jax.ot, entropic, dense stabilised scaling (float32)
- ``ours-relaxed``  ``ours`` with over-relaxed scaling steps (``relaxation="auto"``)
- ``ours-path``     the mass path over m = 0.1 ... 0.9 (``solve_mass_path``) against one solve per
                    mass, plain and over-relaxed
- ``ours-blocked``  the same problem with the cost computed block by block (log domain,
                    O((n + m) d) memory); it recomputes a matmul per pass, so it is run for a
                    fixed number of iterations to measure time per iteration and memory
- ``ours-exact``    puaudit_jax.ot exact path (network simplex on the augmented problem)
- ``pot-exact``     POT's ot.partial.partial_wasserstein: the reference cost
- ``pot-entropic`` / ``pot-entropic-log``  POT's entropic_partial_wasserstein and its
                    logscale variant (O(n m (n + m)) per iteration: skipped above a budget)
- ``ott``           ott-jax 0.6.0 Sinkhorn on the same dummy-augmented problem (dense
                    PointCloud, NegDotProduct cost in d + 2 dims, float32)
- ``ott-matrix``    the same, with the augmented cost matrix precomputed (ott ``Geometry``)

Entropic solvers use the same epsilon (absolute, cost units; cosine costs lie in [0, 2])
and the same stopping rule (L1 marginal error < tol). Data: a cone model in d = 768, P
around a direction, U an 80/20 mixture of that cone and uniform directions, m = 0.7 (the
PUAudit regime m < alpha of Theorem 4.3; at m = alpha exactly the problem is degenerate and
every Sinkhorn needs thousands of iterations).

    python -m experiments.benchmarks.ot            # full run (about 30-40 min on 2 cores)
    python -m experiments.benchmarks.ot --quick    # small sizes, a minute or two
    python -m experiments.benchmarks.ot --memory   # compiled memory of each solve (no run)
    python -m experiments.benchmarks.ot --first-call   # a fresh process's first solve, compilation
        included: ours with cold and with warm persistent compilation caches, ott-jax cold (ratios)
    python -m experiments.benchmarks.ot --solvers ours,ott --sizes 5000 --phases   # + where ours' time goes
    python -m experiments.benchmarks.ot --devices 2 --solvers ours,ours-blocked   # + ours@mesh rows:
        the same solves split over 2 devices (forced host devices on CPU), side by side

``peak MB`` in the timing table is the RSS high-water mark above the process's level after a
warm-up solve: right for numpy/POT, an underestimate for XLA (its allocator keeps freed
buffers), hence the separate ``--memory`` table from XLA's buffer assignment.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np

from experiments.common import RESULTS, ROOT, dump_json, fmt, median_seconds, run_worker, serve_worker, timed
from puaudit_runtime.files import write_text
from puaudit_runtime.flags import add_device_arguments

D = 768
M = 0.7
ALPHA = 0.8  # fraction of U drawn from the positive cone
SEED = 0
MODULE = "experiments.benchmarks.ot"  # the workers run this module again (--worker)


# ----------------------------------------------------------------------------- data
def make_problem(n: int, k: int, d: int = D, seed: int = SEED):
    """(x (n, d), y (k, d)) float32 unit vectors from the cone model."""
    rng = np.random.default_rng(seed)
    zbar = rng.normal(size=d)
    zbar /= np.linalg.norm(zbar)

    def cloud(size, frac):
        z = rng.normal(size=(size, d))
        z /= np.linalg.norm(z, axis=1, keepdims=True)
        pos = rng.random(size) < frac
        z[pos] = 0.6 * z[pos] + 0.8 * zbar
        return (z / np.linalg.norm(z, axis=1, keepdims=True)).astype(np.float32)

    return cloud(n, 1.0), cloud(k, ALPHA)


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    """Reset the kernel's peak-RSS counter (VmHWM) of this process (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


# ----------------------------------------------------------------------------- solvers
def _violation(row, col, n, k, mass):
    """(cap violation sum(max(0, G1 - a)) + sum(max(0, G^T 1 - b)), |mass - m|)."""
    return (float(np.maximum(row - 1 / n, 0).sum() + np.maximum(col - 1 / k, 0).sum()), float(abs(mass - M)))


def run_ours(x, y, eps, tol, max_iter, blocked=False, mesh=None, certify=False, relaxation=1.0):
    from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial

    solver = PartialSinkhorn(epsilon=eps, tol=tol, max_iter=max_iter, certify=certify, relaxation=relaxation)
    options = SolveOptions(method="sinkhorn", return_plan=False, block_size=256 if blocked else None)
    r = solve_partial(x, y, M, solver, options, mesh=mesh)
    viol, merr = _violation(r.row_mass, r.col_mass, len(x), len(y), r.mass)
    out = dict(cost=r.cost, iterations=r.iterations, converged=r.converged, mass_error=merr, violation=viol)
    if r.certificate is not None:
        c = r.certificate
        out.update(cert_upper=c.upper, cert_lower=c.lower, cert_gap=c.gap, cert_violation=c.violation)
    return out


PATH_MASSES = tuple(np.round(np.linspace(0.1, 0.9, 9), 2))


def run_ours_path(x, y, eps, tol, max_iter, independent=False, relaxation=1.0):
    """The mass path over PATH_MASSES: one compiled, warm-started, over-relaxed call
    (``solve_mass_path``), or (``independent``) one ``solve_partial`` per mass with ``relaxation``
    (1.0: plain Sinkhorn); no certificate in either."""
    from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial
    from puaudit_jax.ot.mass_path import PATH_SOLVER, solve_mass_path

    solver = PartialSinkhorn(epsilon=eps, tol=tol, max_iter=max_iter)  # no certificate
    if independent:
        options = SolveOptions(method="sinkhorn", return_plan=False)
        runs = [solve_partial(x, y, m, dataclasses.replace(solver, relaxation=relaxation), options)
                for m in PATH_MASSES]  # fmt: skip
        cols, its, conv = (
            np.stack([r.col_mass for r in runs]),
            [r.iterations for r in runs],
            [r.converged for r in runs],
        )
    else:
        path = solve_mass_path(x, y, PATH_MASSES, dataclasses.replace(solver, relaxation=PATH_SOLVER.relaxation))
        cols, its, conv = path.col_mass, path.iterations.tolist(), path.converged.tolist()
    return dict(cost=0.0, iterations=int(sum(its)), converged=bool(all(conv)), mass_error=0.0, violation=0.0,
                col_mass=cols, iterations_per_mass=[int(i) for i in its])  # fmt: skip


def run_ours_exact(x, y, **_):
    from puaudit_jax.ot import SolveOptions, solve_partial

    r = solve_partial(x, y, M, options=SolveOptions(method="exact", return_plan=False))
    viol, merr = _violation(r.row_mass, r.col_mass, len(x), len(y), r.mass)
    return dict(cost=r.cost, iterations=0, converged=r.converged, mass_error=merr, violation=viol)


def _cosine64(x, y):
    return 1.0 - x.astype(np.float64) @ y.astype(np.float64).T


def run_pot_exact(x, y, **_):
    import ot

    n, k = len(x), len(y)
    C = _cosine64(x, y)
    G = ot.partial.partial_wasserstein(np.full(n, 1 / n), np.full(k, 1 / k), C, m=M, numItermax=10**9)
    viol, merr = _violation(G.sum(1), G.sum(0), n, k, G.sum())
    return dict(cost=float((G * C).sum()), iterations=0, converged=True, mass_error=merr, violation=viol)


def run_pot_entropic(x, y, eps, tol, max_iter, log=False):
    import ot

    n, k = len(x), len(y)
    C = _cosine64(x, y)
    fn = ot.partial.entropic_partial_wasserstein_logscale if log else ot.partial.entropic_partial_wasserstein
    G, info = fn(np.full(n, 1 / n), np.full(k, 1 / k), C, reg=eps, m=M, numItermax=max_iter, stopThr=tol, log=True)
    its = len(info.get("err", [])) * 10 if "err" in info else -1
    viol, merr = _violation(G.sum(1), G.sum(0), n, k, G.sum())
    return dict(cost=float((G * C).sum()), iterations=its, converged=None, mass_error=merr, violation=viol)


_OTT_CACHE: dict = {}


def _ott_solver(n, k, eps, tol, max_iter, matrix=False):
    """One jitted ott-jax solve per configuration (compiled once, like ours). ``matrix``:
    build the augmented cost matrix once and hand ott a dense ``Geometry`` (its fastest
    dense path) instead of the ``PointCloud``."""
    key = (n, k, eps, tol, max_iter, matrix)
    if key not in _OTT_CACHE:
        import jax
        import jax.numpy as jnp
        from ott.geometry import costs, geometry, pointcloud
        from ott.problems.linear import linear_problem
        from ott.solvers.linear import sinkhorn

        @jax.jit
        def solve(X, Y, a, b):
            geom = pointcloud.PointCloud(X, Y, cost_fn=costs.NegDotProduct(), epsilon=eps)
            if matrix:
                geom = geometry.Geometry(cost_matrix=geom.cost_matrix, epsilon=eps)
            out = sinkhorn.Sinkhorn(threshold=tol, max_iterations=max_iter)(linear_problem.LinearProblem(geom, a, b))
            P = out.matrix[:n, :k]
            C = 1.0 - X[:n, :-2] @ Y[:k, :-2].T
            return jnp.sum(P * C), out.n_iters, out.converged, P.sum(1), P.sum(0)

        _OTT_CACHE[key] = solve
    return _OTT_CACHE[key]


def run_ott(x, y, eps, tol, max_iter, matrix=False):
    import jax

    n, k, d = len(x), len(y), x.shape[1]
    big = 10.0  # dummy-dummy cost A: forbidden up to exp(-A / eps)
    X = np.zeros((n + 1, d + 2), np.float32)
    Y = np.zeros((k + 1, d + 2), np.float32)
    X[:n, :d], X[:n, d], X[n, d + 1] = x, -1.0, -1.0
    Y[:k, :d], Y[:k, d], Y[k, d + 1] = y, 1.0, big
    a = np.append(np.full(n, 1 / n), 1 - M).astype(np.float32)
    b = np.append(np.full(k, 1 / k), 1 - M).astype(np.float32)
    solve = _ott_solver(n, k, eps, tol, max_iter, matrix)
    cost, its, conv, row, col = (np.asarray(t) for t in jax.block_until_ready(solve(X, Y, a, b)))
    viol, merr = _violation(row, col, n, k, float(row.sum()))
    return dict(cost=float(cost), iterations=int(its), converged=bool(conv), mass_error=merr, violation=viol)


SOLVERS = {
    "ours": lambda x, y, eps, tol, max_iter, mesh=None, certify=False: run_ours(
        x, y, eps, tol, max_iter, mesh=mesh, certify=certify
    ),
    "ours-blocked": lambda x, y, eps, tol, max_iter, mesh=None, certify=False: run_ours(
        x, y, eps, tol, max_iter, True, mesh, certify=certify
    ),
    "ours-relaxed": lambda x, y, eps, tol, max_iter, mesh=None, certify=False: run_ours(
        x, y, eps, tol, max_iter, mesh=mesh, certify=certify, relaxation="auto"
    ),
    "ours-path": run_ours_path,
    "ours-exact": run_ours_exact,
    "pot-exact": run_pot_exact,
    "pot-entropic": lambda x, y, eps, tol, max_iter: run_pot_entropic(x, y, eps, tol, max_iter),
    "pot-entropic-log": lambda x, y, eps, tol, max_iter: run_pot_entropic(x, y, eps, tol, max_iter, True),
    "ott": run_ott,
    "ott-matrix": lambda x, y, eps, tol, max_iter: run_ott(x, y, eps, tol, max_iter, True),
}
EXACT = {"ours-exact", "pot-exact"}


def worker(spec: dict) -> dict:
    """Run one configuration in this process; its result (``main`` emits it to the parent).

    Libraries are imported and the data generated before the baseline; the first call
    (jit compilation, caches) is timed separately; the peak-RSS counter is then reset, so
    ``peak_mb`` is the extra memory of a steady-state solve.
    """
    import jax  # noqa: F401  (import cost outside the timings)

    import puaudit_jax.ot  # noqa: F401

    if spec["solver"].startswith("pot"):  # POT only where it runs (an accelerator machine may lack it)
        import ot  # noqa: F401

    if spec.get("compile_cache"):  # --first-call: ours with a persistent compilation cache
        from puaudit_runtime.cache import enable_compilation_cache

        enable_compilation_cache(spec["compile_cache"])

    if spec["solver"].startswith("ott"):
        import ott.solvers.linear.sinkhorn  # noqa: F401
    x, y = make_problem(spec["n"], spec["k"])
    fn = SOLVERS[spec["solver"].removesuffix(MESH_SUFFIX)]
    if spec.get("mesh"):  # the "@mesh" variants: ours split over --devices / --mesh
        from puaudit_runtime.mesh import make_mesh

        fn = functools.partial(fn, mesh=make_mesh(spec["mesh"]["devices"], spec["mesh"]["shape"]))
    if spec.get("certify"):  # --first-call's certified rows
        fn = functools.partial(fn, certify=True)
    kw = dict(eps=spec["eps"], tol=spec["tol"], max_iter=spec["max_iter"])
    warm = spec["solver"] not in EXACT
    first = None
    if not warm:  # imports and eager-op compilation on a tiny problem, untimed
        fn(x[:20], y[:20], **kw)
    else:
        _, first = timed(fn, x, y, **kw)
    _reset_peak()
    base = _status_mb("VmRSS")
    times, out = [], None
    for _ in range(spec["repeats"]):
        out, t = timed(fn, x, y, **kw)
        times.append(t)
    peak = _status_mb("VmHWM") - base
    res = dict(spec, **out)
    med = statistics.median(times)
    res.update(
        time=med, first=first if warm else times[0], compile=max(first - med, 0.0) if warm else 0.0, peak_mb=peak
    )
    if spec.get("with_phases") and spec["solver"] in PHASED:
        res.update(_phases(fn, x, y, kw))
    if spec["solver"] == "ours-path":
        res.update(_independent_masses(x, y, kw, res))
    elif spec.get("short_iter") and spec["solver"].startswith("ours"):
        if spec.get("per_iteration", True):
            res.update(_per_iteration(fn, x, y, spec))
        phased = spec.get("with_phases") and spec["solver"] in PHASED  # the certified solve compiled there
        res.update(_certified(fn, x, y, kw, med, compiled=phased))
    elif res["iterations"] and res["iterations"] > 0:
        res["per_iter"] = res["time"] / res["iterations"]
    if not np.isfinite(res["cost"]):
        res["failed"] = "non-finite plan (kernel exp(-C/eps) underflows)"
    return res


PHASED = ("ours", "ours-blocked", "ours-relaxed")  # the solves that pass through solve_partial's phases


def _phases(fn, x, y, kw) -> dict:
    """One solve's seconds per phase of ``solve_partial`` (``puaudit_runtime.phases``), without and with
    the certificate (each compiled first, so the table is a steady solve's)."""
    from puaudit_runtime.phases import recording

    out = {}
    for key, certify in (("phases", False), ("phases_certified", True)):
        fn(x, y, certify=certify, **kw)  # compiled
        with recording() as table:
            fn(x, y, certify=certify, **kw)
        out[key] = dict(table.seconds)
    return out


def _per_iteration(fn, x, y, spec) -> dict:
    """Time per iteration and fixed cost (cost matrix, kernel, final passes) from two runs that never
    converge (tol 1e-30) at N1 = short_iter and N2 = N1 + span iterations (40; 10 blocked), medians
    of ``repeats`` runs each:
    per_iter = (t2 - t1) / (N2 - N1), fixed = t1 - N1 per_iter. Independent of how many iterations
    the converged run took (the old difference with the converged run went negative at 15 iterations,
    below the timing noise)."""
    n1 = spec["short_iter"]
    n2 = n1 + spec.get("span", 40)

    def median_time(iters):
        # tol and max_iter are arguments of the compiled solve (PartialSinkhorn is a pytree): nothing compiles
        run = functools.partial(fn, x, y, eps=spec["eps"], tol=1e-30, max_iter=iters)
        return median_seconds(run, spec["repeats"])

    t1, t2 = median_time(n1), median_time(n2)
    per = (t2 - t1) / (n2 - n1)
    return dict(per_iter=per if per > 0 else None, fixed=t1 - n1 * per if per > 0 else None)


def _independent_masses(x, y, kw, res) -> dict:
    """The path's baselines: one solve_partial per mass (after a warm-up), plain Sinkhorn and
    over-relaxed ("auto", so the path's own gain shows apart from the relaxation's): times,
    iterations, ratios, and the largest score difference between the path and the plain solves."""
    cols = res.pop("col_mass")
    out = {}
    for tag, relaxation in (("independent", 1.0), ("relaxed", "auto")):
        run_ours_path(x, y, independent=True, relaxation=relaxation, **kw)
        ind, elapsed = timed(run_ours_path, x, y, independent=True, relaxation=relaxation, **kw)
        diff = float(np.abs(ind["col_mass"] - cols).max())
        out.update({f"{tag}_time": elapsed, f"{tag}_ratio": elapsed / res["time"],
                    f"{tag}_iterations": ind["iterations"], f"{tag}_col_diff": diff,
                    f"{tag}_iterations_per_mass": ind["iterations_per_mass"]})  # fmt: skip
    return dict(out, path_ratio=out["independent_ratio"], path_col_diff=out["independent_col_diff"])


def _certified(fn, x, y, kw, plain_time, compiled=False) -> dict:
    """The same solve with the certificate (rounded feasible plan, dual bound, gap): its extra time
    and the certificate's numbers (``compiled``: the certified solve ran before, e.g. in :func:`_phases`)."""
    if not compiled:
        fn(x, y, certify=True, **kw)  # compile
    out, elapsed = timed(fn, x, y, certify=True, **kw)
    keys = ("cert_upper", "cert_lower", "cert_gap", "cert_violation")
    return dict({k: out[k] for k in keys if k in out}, cert_time=elapsed - plain_time)


def xla_memory(n: int, k: int, block_size: int | None, matrix_ott: bool = False) -> dict:
    """Bytes the compiled solve needs, from XLA's own buffer assignment (no run): arguments,
    outputs and temporaries (the peak of live intermediates), for our dense and blocked
    solvers and for ott-jax's dense solve. RSS after a warm-up cannot show this: freed
    buffers stay in the allocator."""
    import jax
    import jax.numpy as jnp

    from puaudit_jax.ot import PartialSinkhorn
    from puaudit_jax.ot.solve import run_points

    x = jax.ShapeDtypeStruct((n, D), jnp.float32)
    y = jax.ShapeDtypeStruct((k, D), jnp.float32)
    a = jax.ShapeDtypeStruct((n,), jnp.float32)
    b = jax.ShapeDtypeStruct((k,), jnp.float32)
    m = jax.ShapeDtypeStruct((), jnp.float32)
    solver = PartialSinkhorn()  # the defaults: epsilon 0.01, tol 1e-4
    out = {}
    for name, bs in (("ours", None), ("ours-blocked", block_size)):
        c = run_points.lower(x, y, a, b, m, None, solver, cost="cosine", block_size=bs, with_plan=False).compile()
        ma = c.memory_analysis()
        out[name] = dict(argument=ma.argument_size_in_bytes, output=ma.output_size_in_bytes, temp=ma.temp_size_in_bytes)
    X = jax.ShapeDtypeStruct((n + 1, D + 2), jnp.float32)
    Y = jax.ShapeDtypeStruct((k + 1, D + 2), jnp.float32)
    for name, mat in (("ott", False), ("ott-matrix", True)):
        c = (
            _ott_solver(n, k, 0.01, 1e-4, 10_000, mat)
            .lower(X, Y, jax.ShapeDtypeStruct((n + 1,), jnp.float32), jax.ShapeDtypeStruct((k + 1,), jnp.float32))
            .compile()
        )
        ma = c.memory_analysis()
        out[name] = dict(argument=ma.argument_size_in_bytes, output=ma.output_size_in_bytes, temp=ma.temp_size_in_bytes)
    return out


def memory_table(sizes) -> tuple[str, list]:
    rows, lines = (
        [],
        [
            "| n_P x n_U | solver | arguments (MB) | temporaries (MB) | n_P x n_U x 4 B (MB) "
            "| (n_P + n_U) d x 4 B (MB) |",
            "|---|---|---|---|---|---|",
        ],
    )
    for n, k in sizes:
        mem = xla_memory(n, k, 256)
        for name, v in mem.items():
            rows.append(dict(n=n, k=k, solver=name, **v))
            lines.append(
                f"| {n}x{k} | {name} | {v['argument'] / 2**20:.0f} | {v['temp'] / 2**20:.0f} "
                f"| {n * k * 4 / 2**20:.0f} | {(n + k) * D * 4 / 2**20:.0f} |"
            )
    return "\n".join(lines), rows


def bandwidth_gbs() -> float:
    """Streaming read bandwidth of this machine through XLA (jnp.sum over 512 MB)."""
    import jax
    import jax.numpy as jnp

    arr = jnp.ones((128, 1024, 1024), jnp.float32)
    f = jax.jit(jnp.sum)
    jax.block_until_ready(f(arr))
    t = time.perf_counter()
    for _ in range(10):
        jax.block_until_ready(f(arr))
    return arr.nbytes * 10 / (time.perf_counter() - t) / 1e9


# ----------------------------------------------------------------------------- driver
MESH_SUFFIX = "@mesh"


def _mesh_spec(args) -> tuple[dict | None, int | None]:
    """--devices / --mesh -> ({"devices", "shape"} for the workers, forced host devices or None)
    (the flags are validated here, in a process that may see fewer devices than its workers)."""
    from puaudit_runtime.mesh import parse_devices, parse_mesh_shape

    devices, shape = parse_devices(args.devices), parse_mesh_shape(args.mesh)
    if devices is None and shape is None:
        return None, None
    if devices is None:
        devices = math.prod(shape)
    import jax

    on_cpu = jax.default_backend() == "cpu"
    forced = (devices if devices != "all" else os.cpu_count()) if on_cpu else None
    return dict(devices=devices, shape=args.mesh), forced


def pot_entropic_estimate(n: int, k: int) -> float:
    """Seconds per iteration of POT's entropic partial solver (two diag matmuls)."""
    import ot

    x, y = make_problem(n, k)
    C = _cosine64(x, y)
    _, seconds = timed(
        ot.partial.entropic_partial_wasserstein, np.full(n, 1 / n), np.full(k, 1 / k), C, reg=0.01, m=M, numItermax=2
    )
    return seconds / 2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="sizes 500 and 1000 only")
    ap.add_argument("--sizes", default="1000,2000,5000", help="n_P = n_U values ('' for none)")
    ap.add_argument("--puaudit-shape", default="2000x20000", help="extra n_P x n_U problem ('' to skip)")
    ap.add_argument("--eps", default="0.01,0.001", help="entropic regularisations (cost units)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--max-iter", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--solvers", default=",".join(SOLVERS))
    ap.add_argument(
        "--pot-entropic-budget",
        type=float,
        default=300.0,
        help="skip POT's entropic solvers when the estimated run exceeds this (s)",
    )
    ap.add_argument("--timeout", type=float, default=1800.0, help="per configuration (s)")
    ap.add_argument("--out", default="results/bench_ot.json")
    ap.add_argument(
        "--memory", action="store_true", help="only the compiled-memory table (XLA buffer assignment, no solve)"
    )
    ap.add_argument("--first-call", action="store_true", help="only the first-call table (fresh processes)")
    ap.add_argument("--phases", action="store_true", help="add the phase table of each of ours' solves "
                    "(where the time goes: validation, normalisation, transfer, iterations, ...)")  # fmt: skip
    add_device_arguments(ap, cluster=False, what="ours@mesh")
    args = ap.parse_args(argv)
    if serve_worker(args, worker):
        return
    if args.first_call:
        first_call_table(args)
        return
    if args.memory:
        sizes = _square_sizes(args.sizes)
        if args.puaudit_shape:
            sizes.append(tuple(int(v) for v in args.puaudit_shape.split("x")))
        table, rows = memory_table(sizes)
        print(table)
        out = RESULTS / "bench_ot_memory.json"
        dump_json(dict(d=D, block_size=256, rows=rows), out)
        write_text(table + "\n", out.with_suffix(".md"))
        return

    sizes = [(500, 500), (1000, 1000)] if args.quick else _square_sizes(args.sizes)
    if args.puaudit_shape and not args.quick:
        n, k = args.puaudit_shape.split("x")
        sizes.append((int(n), int(k)))
    epsilons = [float(e) for e in args.eps.split(",")]
    solvers = args.solvers.split(",")
    mesh, forced = _mesh_spec(args)
    if mesh:  # ours beside ours split over the devices, in the same run
        solvers += [s + MESH_SUFFIX for s in ("ours", "ours-blocked") if s in solvers]
        print(f"ours{MESH_SUFFIX}: {mesh['devices']} devices, mesh {mesh['shape'] or 'one axis'}", flush=True)
    bw = bandwidth_gbs()
    print(f"memory bandwidth (XLA jnp.sum over 512 MB): {bw:.1f} GB/s", flush=True)

    rows = []
    for n, k in sizes:
        ref = None
        for solver in [s for s in solvers if s in EXACT] + [s for s in solvers if s not in EXACT]:
            for eps in epsilons if solver not in EXACT else [None]:
                spec = dict(
                    solver=solver,
                    n=n,
                    k=k,
                    eps=eps,
                    tol=args.tol,
                    max_iter=args.max_iter,
                    repeats=1 if solver in EXACT or solver.startswith("pot") else args.repeats,
                    short_iter=10,
                    with_phases=args.phases,
                )
                if solver.startswith("ours-blocked"):
                    spec.update(max_iter=30, short_iter=5, repeats=1, span=10)
                if solver.endswith(MESH_SUFFIX):
                    spec["mesh"] = mesh
                if solver.startswith("pot-entropic"):
                    est = pot_entropic_estimate(n, k) * min(args.max_iter, 1000)
                    if est > args.pot_entropic_budget:
                        rows.append(
                            dict(
                                spec,
                                skipped=f"estimated {est:.0f} s > budget "
                                f"{args.pot_entropic_budget:.0f} s (O(n m (n + m)) per iteration)",
                            )
                        )
                        print(f"{solver:18s} {n}x{k}: skipped ({rows[-1]['skipped']})", flush=True)
                        continue
                    spec["max_iter"] = min(args.max_iter, 1000)
                r = run_worker(
                    MODULE,
                    spec,
                    key="skipped",
                    devices=forced if solver.endswith(MESH_SUFFIX) else None,
                    env={"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
                    timeout=args.timeout,
                )
                if solver == "pot-exact" and "cost" in r:
                    ref = r["cost"]
                if ref is not None and "cost" in r and solver != "ours-path":
                    r["gap"] = (r["cost"] - ref) / ref
                if r.get("per_iter"):
                    r["bound"] = 2 * n * k * 4 / (bw * 1e9)  # two float32 passes over C
                rows.append(r)
                _write(ROOT / args.out, rows, args.tol, bw)  # after every row: a cut-off run keeps its rows
                print(
                    f"{solver:18s} {n}x{k} eps={eps}: "
                    + (
                        r.get("skipped")
                        or f"time {r['time']:.3f}s (first {r['first']:.2f}s) "
                        f"it {r['iterations']} gap {fmt(r.get('gap'))} peak {r['peak_mb']:.0f} MB"
                    ),
                    flush=True,
                )

    out = ROOT / args.out
    print("\n" + _write(out, rows, args.tol, bw))
    print(f"\nwrote {out} and {out.with_suffix('.md')}")


FIRST_CALL = (  # (row, solver, persistent compilation cache, certify)
    ("ours, cold", "ours", False, False),
    ("ours, cold, certified", "ours", False, True),
    ("ours, warm cache", "ours", True, False),
    ("ours, warm cache, certified", "ours", True, True),
    ("ott-jax, cold", "ott", False, False),
)


def first_call_table(args) -> str:
    """``--first-call``: :func:`first_call_rows` at the first of ``--sizes`` and ``--eps``, written to
    ``results/bench_ot_first_call.{json,md}``."""
    n, eps = _square_sizes(args.sizes)[0][0], float(args.eps.split(",")[0])
    text, payload = first_call_rows(n, eps, args.tol, args.max_iter, args.repeats, args.timeout)
    out = ROOT / "results" / "bench_ot_first_call.json"
    dump_json(payload, out, default=float)
    write_text(text + "\n", out.with_suffix(".md"))
    print(text)
    return text


def first_call_rows(
    n: int, eps: float, tol: float, max_iter: int, repeats: int, timeout: float, deadline: float | None = None
) -> tuple[str, dict]:
    """Seconds of a fresh process's first solve (compilation included), medians over ``repeats`` processes.

    The rows of ``FIRST_CALL`` run interleaved, one process each, on an n x n problem: ours without a
    persistent compilation cache, ours with one warmed by an untimed process, and ott-jax (no cache).

    Args:
        n: rows and columns of the problem.
        eps: entropic regularisation (cost units).
        tol: the solves' stopping tolerance.
        max_iter: their iteration cap.
        repeats: processes per row (the median is reported).
        timeout: seconds per process.
        deadline: None, or a ``time.perf_counter()`` time no process outlives: each one's timeout is cut
            to it, and none starts after it (recorded as failed: "past the deadline").

    Returns:
        (the Markdown table, its numbers as a JSON-ready dict).
    """
    import tempfile

    cache = tempfile.mkdtemp(prefix="puaudit-first-call-")
    env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    base = dict(n=n, k=n, eps=eps, tol=tol, max_iter=max_iter, repeats=1)

    def run(spec, limit):
        if deadline is not None:
            limit = min(limit, deadline - time.perf_counter())
            if limit <= 0:
                return dict(spec, failed="past the deadline")
        return run_worker(MODULE, spec, env=env, timeout=limit)

    for certify in (False, True):  # fill the persistent cache, untimed
        run(dict(base, solver="ours", certify=certify, compile_cache=cache), 600)
    runs = {name: [] for name, *_ in FIRST_CALL}
    for _ in range(repeats):
        for name, solver, cached, certify in FIRST_CALL:
            spec = dict(base, solver=solver, certify=certify, compile_cache=cache if cached else None)
            runs[name].append(run(spec, timeout))
    firsts = [r["first"] for r in runs["ott-jax, cold"] if "first" in r]
    ott = statistics.median(firsts) if firsts else math.nan
    lines = [f"First call in a fresh process, {n} x {n}, d {D}, eps {eps}, tol {tol}: median of {repeats} "
             "processes (s)", "", "| run | first call | steady solve | first / ott-jax's first |",
             "|---|---|---|---|"]  # fmt: skip
    rows = []
    for name, *_ in FIRST_CALL:
        ok = [r for r in runs[name] if "first" in r]
        if not ok:
            rows.append(dict(run=name, failed=runs[name][0].get("failed"), runs=runs[name]))
            lines.append(f"| {name} | failed: {runs[name][0].get('failed')} | | |")
            continue
        first, steady = (statistics.median(r[k] for r in ok) for k in ("first", "time"))
        rows.append(dict(run=name, first=first, steady=steady, ratio=first / ott, runs=runs[name]))
        lines.append(f"| {name} | {first:.2f} | {steady:.3f} | {fmt(first / ott, '.2f')} |")
    return "\n".join(lines), dict(n=n, d=D, eps=eps, tol=tol, repeats=repeats, rows=rows)


def _square_sizes(arg: str) -> list[tuple[int, int]]:
    """--sizes "1000,5000" -> [(1000, 1000), (5000, 5000)]; "" -> []."""
    return [(int(s), int(s)) for s in arg.split(",") if s]


def _write(out: Path, rows: list, tol: float, bw: float) -> str:
    """The rows so far as ``out`` (JSON) and its .md table, both written atomically; returns the table."""
    table = render(rows)
    payload = dict(seed=SEED, d=D, m=M, alpha=ALPHA, tol=tol, bandwidth_gbs=bw, rows=rows,
                   machine=dict(cpus=os.cpu_count(), omp=os.environ.get("OMP_NUM_THREADS")))  # fmt: skip
    dump_json(payload, out)
    write_text(table + "\n", out.with_suffix(".md"))
    return table


def gap_cell(r) -> str:
    if r.get("failed"):
        return "failed: " + r["failed"]
    return fmt(r.get("gap"), ".2%") if r.get("gap") is not None else "-"


def cert_cell(r) -> str:
    """The certified gap relative to the rounded plan's cost (an upper bound on its distance to OPT)."""
    if r.get("cert_gap") is None:
        return "-"
    return f"{r['cert_gap'] / r['cert_upper']:.2%}" if r.get("cert_upper") else fmt(r["cert_gap"])


def render(rows) -> str:
    """Markdown table with ratios against ott-jax and POT's exact solver."""
    by = {(r["solver"], r["n"], r["k"], r["eps"]): r for r in rows}
    head = (
        "| n_P x n_U | eps | solver | time (s) | compile (s) | iters | ms/iter | x bound | fixed (s) "
        "| |mass-m| | violation | gap to exact | certified gap | certificate (s) | peak MB | best ott / ours "
        "| POT exact / this |"
    )
    lines = [head, "|" + "---|" * 17]
    paths = [r for r in rows if r["solver"] == "ours-path" and "time" in r]
    for r in [r for r in rows if r["solver"] != "ours-path"]:
        key = (r["n"], r["k"])
        if "skipped" in r:
            lines.append(
                f"| {key[0]}x{key[1]} | {fmt(r['eps'])} | {r['solver']} | skipped: {r['skipped']} |" + " |" * 13
            )
            continue
        otts = [by.get((o, *key, r["eps"])) for o in ("ott", "ott-matrix")]
        otts = [o for o in otts if o and "time" in o]
        ott = min(otts, key=lambda o: o["time"]) if otts else None
        pot = by.get(("pot-exact", *key, None))
        vs_ott = fmt(ott["time"] / r["time"], ".1f") if r["solver"] == "ours" and ott and "time" in ott else ""
        vs_pot = fmt(pot["time"] / r["time"], ".1f") if pot and "time" in pot else ""
        per = r.get("per_iter")
        lines.append(
            f"| {key[0]}x{key[1]} | {fmt(r['eps'])} | {r['solver']} | {r['time']:.3f} | "
            f"{r['compile']:.2f} | {r['iterations']} | {fmt(per * 1e3 if per else None)} | "
            f"{fmt(per / r['bound'] if per and r.get('bound') else None, '.1f')} | {fmt(r.get('fixed'))} | "
            f"{fmt(r['mass_error'], '.1e')} | {fmt(r['violation'], '.1e')} | "
            f"{gap_cell(r)} | {cert_cell(r)} | {fmt(r.get('cert_time'))} | {r['peak_mb']:.0f} | "
            f"{vs_ott} | {vs_pot} |"
        )
    if paths:
        masses = ", ".join(f"{m:g}" for m in PATH_MASSES)
        lines += ["", f"Mass path over m = {masses} (over-relaxed, warm-started; no certificate) against one solve "
                  "per mass, plain and over-relaxed:", "",
                  "| n_P x n_U | eps | path (s) | iters | plain solves (s) | iters | plain / path "
                  "| relaxed solves (s) | iters | relaxed / path | max score difference |",
                  "|" + "---|" * 11]  # fmt: skip
        lines += [f"| {r['n']}x{r['k']} | {fmt(r['eps'])} | {r['time']:.3f} | {r['iterations']} | "
                  f"{r['independent_time']:.3f} | {r['independent_iterations']} | {r['path_ratio']:.2f} | "
                  f"{fmt(r.get('relaxed_time'))} | {r.get('relaxed_iterations', '')} | "
                  f"{fmt(r.get('relaxed_ratio'), '.2f')} | "
                  f"{r['path_col_diff']:.1e} |" for r in paths]  # fmt: skip
        lines += per_mass_table(paths)
    return "\n".join(lines + phase_table(rows))


HOST_PHASES = ("validation", "normalisation", "transfer", "host copies", "finalisation")


def phase_table(rows) -> list[str]:
    """``--phases``: milliseconds per phase of each of ours' solves, and the host's share of the solve.

    The host's share is that of :data:`HOST_PHASES` (what is not the device's iterations or certificate).
    """
    rows = [r for r in rows if isinstance(r.get("phases"), dict)]
    if not rows:
        return []
    names = list(dict.fromkeys(name for r in rows for key in ("phases", "phases_certified")
                               for name in r.get(key, {})))  # fmt: skip
    lines = ["", "Where the time goes (`--phases`: one steady solve, each phase waited for; ms):", "",
             "| n_P x n_U | eps | solver | certified | " + " | ".join(names) + " | total | host share |",
             "|" + "---|" * (6 + len(names))]  # fmt: skip
    for r in rows:
        for key, certified in (("phases", "no"), ("phases_certified", "yes")):
            seconds = r.get(key) or {}
            total = sum(seconds.values())
            host = sum(seconds.get(name, 0.0) for name in HOST_PHASES)
            cells = " | ".join(fmt(1e3 * seconds[n], ".1f") if n in seconds else "-" for n in names)
            lines.append(f"| {r['n']}x{r['k']} | {fmt(r['eps'])} | {r['solver']} | {certified} | {cells} | "
                         f"{1e3 * total:.1f} | {fmt(host / total if total else None, '.1%')} |")  # fmt: skip
    return lines


def per_mass_table(paths) -> list[str]:
    """Iterations at each mass of the path rows: one plain solve, one over-relaxed solve, the path's
    warm-started over-relaxed solve (where the iterations go, and what relaxation saves at each m)."""
    paths = [r for r in paths if r.get("relaxed_iterations_per_mass")]
    if not paths:
        return []
    lines = ["", "Iterations per mass (tol as above): plain solve / over-relaxed solve / the path's warm-started one:",
             "", "| n_P x n_U | eps | " + " | ".join(f"m = {m:g}" for m in PATH_MASSES) + " |",
             "|" + "---|" * (2 + len(PATH_MASSES))]  # fmt: skip
    for r in paths:
        cells = zip(r["independent_iterations_per_mass"], r["relaxed_iterations_per_mass"], r["iterations_per_mass"])
        lines.append(f"| {r['n']}x{r['k']} | {fmt(r['eps'])} | " + " | ".join(f"{p} / {x} / {w}" for p, x, w in cells)
                     + " |")  # fmt: skip
    return lines


if __name__ == "__main__":
    main()
