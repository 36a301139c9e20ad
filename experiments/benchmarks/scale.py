"""How the sharded partial Sinkhorn (``puaudit_jax.ot.sharded``) scales with the number of devices.

Side-by-side comparisons, ratios printed, nothing asserted. Every configuration that needs a
particular number of (forced host CPU) devices runs in its own subprocess, since
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` must be set before JAX starts; the
parent collects each child's result (``puaudit_runtime.launch``: ``run_python`` / ``run_cluster``,
the child ``emit``s). Sections (each a flag; none given = all five):

  --memory   XLA buffer assignment per device (``sharded.memory_per_device``, nothing runs) of
             the compiled solve at a fixed problem for D = 1, 2, 4, 8 devices, dense (scaling)
             and blocked (log) modes: bytes and the ratio to D = 1 (target ~1/D). Then, at a
             fixed n_P (PUAudit's shape: a small labelled P, a large pool U) the largest n_U
             whose per-device peak fits a per-device budget, for each D (target ratio ~D).
  --time     time per iteration on 1 device pinned to 1 core vs 2 forced devices pinned to
             2 cores, dense and blocked, at 5000 x 5000 and 2000 x 100000 (d = 384, float32),
             with the memory-bandwidth bound of the dense mode (a streaming K v + u K kernel
             over a matrix of the problem's size, 1 core vs 2 cores, through XLA and numpy).
  --cluster  a two-process jax.distributed cluster on 127.0.0.1 (gloo), one forced device per
             process, each pinned to its own core, vs one process with two forced devices on
             the same two cores: time per iteration of the same dense solve, and the latency of
             one chained all-reduce (1 float, n_P floats) in each setting. An extra run lets both
             cluster processes use both cores (--no-cluster-unpinned skips it): pinned to one
             core each, a non-scalar gloo all-reduce waits about one scheduler tick (~4 ms at
             HZ=250) on this machine, since the process's transport and compute threads share
             the core.
  --prepare  where a 2-device solve's time goes (``puaudit_runtime.phases``): float32 points as numpy
             prepared on the host, as numpy prepared on the devices, and as JAX arrays ("auto": on
             the devices, never copied to the host), with the time before the solve against the host's.
  --comm     bytes exchanged by collectives, counted from the compiled sharded program's HLO
             by ``puaudit_runtime.hlo.comm_summary`` (per solver iteration, in the
             stable-fallback branches, per epoch, once per solve), on a 1-D mesh of 4 and a
             2 x 2 mesh, for several n_P, n_U: per iteration it is 4 (n_P / D_rows + n_U /
             D_cols) bytes (a side's term only when the other side is split) plus a few
             scalars, never a block of the cost.

Timing: the solver runs with tol = 1e-30 (never met) for a fixed number of iterations. Each
program is compiled ahead of time (``lower().compile()``), called once untimed (warm-up), then
timed; time per iteration is the difference between a long and a short run divided by the
difference in iterations, which removes fixed costs (building the cost matrix, the first
stable log-domain step, the final marginals, buffer allocation). Dense-mode iterations include
the occasional absorption (kernel rebuild, one exp pass) that the solver takes.

    python -m experiments.benchmarks.scale --quick                 # all sections, small sizes (~2-3 min)
    python -m experiments.benchmarks.scale --memory --comm         # compile-only sections, full sizes
    python -m experiments.benchmarks.scale --time --out /tmp/scale.json

The machine is whatever this runs on: the header names the CPU and the cores this process may
use; timings on a machine shared with other jobs are noisy (the load average is recorded
before and after each section).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import sys
import time
from pathlib import Path

from experiments.common import (
    ROOT,
    best_seconds,
    dump_json,
    fmt,
    load_average,
    machine,
    machine_header,
    run_worker,
    serve_worker,
    worker_args,
)
from puaudit_runtime.hlo import comm_summary
from puaudit_runtime.launch import run_cluster

MODULE = "experiments.benchmarks.scale"  # the workers run this module again (--worker)
M = 0.7  # transported mass (as experiments.benchmarks.ot)
EPS = 0.01  # entropic regularisation (cost units; cosine costs lie in [0, 2])
MiB = 2**20


# ============================================================================ children
def cluster_workers(spec: dict, n_processes: int, cores_of, timeout: float) -> list:
    """``worker(spec)`` in each of ``n_processes`` interpreters forming a jax.distributed cluster on
    127.0.0.1 (``puaudit_runtime.launch.run_cluster``), one forced device each, process i pinned to
    ``cores_of(i)``; all are killed when one fails or at the timeout. Their results, or
    ``[dict(spec, failed=...)]``."""
    why, done = run_cluster(
        worker_args(MODULE, spec),
        n_processes,
        1,
        timeout=timeout,
        env=dict(PUAUDIT_CLUSTER_TIMEOUT=str(int(min(timeout, 120)))),
        cwd=ROOT,
        cores_of=cores_of,
    )
    results = [d.result for d in done]
    if why or any(r is None for r in results):
        for i, d in enumerate(done):
            sys.stderr.write(f"--- cluster process {i} ---\n" + d.tail(10) + "\n")
        return [dict(spec, failed=why or "no result")]
    return results


# ============================================================================ worker side
def _mesh(devices, shape=None):
    """A Mesh even for one device (puaudit_runtime.mesh.make_mesh returns None there): axis "u" (1-D) or
    ("p", "u")."""
    import numpy as np
    from jax.sharding import Mesh

    from puaudit_runtime.mesh import COLS, ROWS

    shape = shape or (len(devices),)
    names = (COLS,) if len(shape) == 1 else (ROWS, COLS)
    return Mesh(np.asarray(devices, dtype=object).reshape(shape), names)


def _solver(mode: str, max_iter: int, tol: float = 1e-30):  # 1e-30: never met (tol must be > 0)
    from puaudit_jax.ot import PartialSinkhorn

    return PartialSinkhorn(epsilon=EPS, tol=tol, max_iter=max_iter, mode=mode)


def _abstract_args(layout, n, k, d, dtype="float32"):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding

    from puaudit_runtime.mesh import pad_to_multiple

    N, K = pad_to_multiple(n, layout.count("rows")), pad_to_multiple(k, layout.count("cols"))
    sp = layout.specs

    def spec(shape, s):
        return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype), sharding=NamedSharding(layout.mesh, s))

    return (spec((N, d), sp["x"]), spec((K, d), sp["y"]), spec((N,), sp["a"]), spec((K,), sp["b"]), spec((), sp["m"]))


def _compile(mode, max_iter, layout, block_size, args):
    """The compiled sharded solve of ``args`` (x, y, a, b, m); call it as ``prog(solver, *args)``."""
    from puaudit_jax.ot.sharded import program

    solver = _solver(mode, max_iter)
    return program(solver, layout, "cosine", block_size, False, True).lower(solver, *args).compile()


# ----------------------------------------------------------------------------- memory
def memory_worker(spec: dict) -> dict:
    import jax

    from puaudit_jax.ot.sharded import Layout, memory_per_device

    devs = jax.devices()
    n, k, d, bs = spec["n"], spec["k"], spec["d"], spec["block_size"]
    rows = []
    for mode in spec["modes"]:
        solver, block = _mode_solver(mode, bs)
        for D in spec["devices"]:
            layout = Layout.of(_mesh(devs[:D]))
            mem = memory_per_device(solver, layout, n, k, d, block_size=block)
            rows.append(dict(mode=mode, D=D, n=n, k=k, d=d, block_size=block, **mem))

    # largest n_U (fixed n_P) whose per-device peak fits the budget
    budget, n_p, unit = spec["budget"], spec["budget_n"], spec["unit"]
    fits_rows = []
    for mode in spec["budget_modes"]:
        solver, block = _mode_solver(mode, bs)
        for D in spec["devices"]:
            step = D * unit
            peak, probes = _peak_probe(solver, Layout.of(_mesh(devs[:D])), n_p, d, block)
            fit = largest_fit(peak, budget, step)
            fits_rows.append(dict(mode=mode, D=D, n=n_p, compiles=len(probes), **fit))
    return dict(rows=rows, budget_rows=fits_rows, budget=budget)


def largest_fit(peak, budget: int, step: int) -> dict:
    """The largest multiple of ``step`` whose ``peak(k)`` (bytes) fits ``budget``: k, peak, next_peak, predicted,
    slope (bytes per extra column); k = 0 when ``step`` itself does not fit.

    The peak is close to affine in n_U: predicted from two compiles, then bracketed and bisected.
    """
    if peak(step) > budget:
        return dict(k=0, peak=peak(step))
    k1, k2 = 16 * step, 64 * step
    slope = (peak(k2) - peak(k1)) / (k2 - k1)
    guess = max(step, int((budget - peak(k1)) / slope + k1) // step * step) if 0 < slope < math.inf else step
    lo, hi = _largest_fit(peak, budget, step, guess)
    return dict(k=lo, peak=peak(lo), next_peak=peak(hi), predicted=guess, slope=slope)


def _mode_solver(mode: str, block_size: int):
    """The solver and block of a mode: "dense" -> (scaling mode, None), "blocked" -> (log mode, block_size)."""
    solver = _solver("scaling" if mode == "dense" else "log", 100, tol=1e-4)
    return solver, None if mode == "dense" else block_size


def _peak_probe(solver, layout, n: int, d: int, block):
    """(k -> per-device peak bytes of the compiled (n, k) solve, memoised; the memo {k: peak}, whose
    size counts the compiles)."""
    from puaudit_jax.ot.sharded import memory_per_device

    probes = {}

    def peak(k):
        if k not in probes:
            probes[k] = memory_per_device(solver, layout, n, k, d, block_size=block)["peak"]
        return probes[k]

    return peak, probes


def _largest_fit(peak, budget: int, step: int, guess: int) -> tuple[int, int]:
    """(lo, hi): lo the largest multiple of ``step`` with peak(lo) <= budget (peak(step) fits), hi =
    lo + step (does not), found by bracketing from ``guess`` and bisecting."""
    lo, hi = step, None
    if peak(guess) <= budget:
        lo, up = guess, step
        while peak(lo + up) <= budget:
            lo, up = lo + up, up * 2
        hi = lo + up
    else:
        hi, down = guess, step
        while peak(max(step, hi - down)) > budget:
            hi, down = max(step, hi - down), down * 2
        lo = max(step, hi - down)
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        lo, hi = (mid, hi) if peak(mid) <= budget else (lo, mid)
    return lo, hi


# ----------------------------------------------------------------------------- timing
def _problem(n, k, d):
    from experiments.benchmarks.ot import make_problem

    return make_problem(n, k, d)


def _placed_args(layout, x, y):
    import jax.numpy as jnp
    import numpy as np

    from puaudit_jax.ot.problem import pad_points
    from puaudit_jax.ot.sharded import place
    from puaudit_runtime.mesh import pad_to_multiple

    n, k = len(x), len(y)
    a, b = np.full(n, 1 / n), np.full(k, 1 / k)
    N, K = pad_to_multiple(n, layout.count("rows")), pad_to_multiple(k, layout.count("cols"))
    (x, a), (y, b) = pad_points(x, a, N), pad_points(y, b, K)
    sp = layout.specs
    f32 = np.float32
    return (
        place(x.astype(f32), layout, sp["x"]),
        place(y.astype(f32), layout, sp["y"]),
        place(a.astype(f32), layout, sp["a"]),
        place(b.astype(f32), layout, sp["b"]),
        jnp.asarray(M, jnp.float32),
    )


def _scalar(arr):
    import numpy as np

    return np.asarray(arr.addressable_data(0)).item()


def solve_worker(spec: dict) -> dict:
    """Time per iteration of one sharded solve (mesh over every device this process or cluster
    sees, U split over "u")."""
    clustered = False
    if spec.get("cluster"):
        from puaudit_runtime.cluster import initialize_cluster

        clustered = initialize_cluster()
    import jax
    from jax.experimental import multihost_utils

    from puaudit_jax.ot.sharded import Layout

    affinity = sorted(os.sched_getaffinity(0))
    layout = Layout.of(_mesh(jax.devices()))
    n, k, d = spec["n"], spec["k"], spec["d"]
    mode = "scaling" if spec["mode"] == "dense" else "log"
    block = None if spec["mode"] == "dense" else spec["block_size"]
    res = dict(spec, devices=len(jax.devices()), processes=jax.process_count(), affinity=affinity)

    def sync(tag):
        if clustered:
            multihost_utils.sync_global_devices(tag)

    t = time.perf_counter()
    abstract = _abstract_args(layout, n, k, d)
    programs = {}
    for name, iters in (("short", spec["short"]), ("long", spec["short"] + spec["iters"])):
        compiled = _compile(mode, iters, layout, block, abstract)
        programs[name] = functools.partial(compiled, _solver(mode, iters))  # the solver's numbers: an argument
    short, long_ = programs["short"], programs["long"]
    res["compile_s"] = time.perf_counter() - t
    ma = long_.func.memory_analysis()
    peak = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
    res["peak_per_device"] = int(peak)
    with open("/proc/meminfo") as fh:
        avail = next(int(ln.split()[1]) * 1024 for ln in fh if ln.startswith("MemAvailable"))
    local = len(jax.local_devices()) if jax.default_backend() == "cpu" else 0  # XLA's buffers in host memory
    if peak * local + 4 * (n + k) * d * 3 > spec.get("mem_fraction", 0.6) * avail:
        res["skipped"] = (
            f"needs {peak * local / 2**30:.1f} GiB of XLA buffers (+ host data) on this process, "
            f"{avail / 2**30:.1f} GiB available"
        )
        return res

    x, y = _problem(n, k, d)
    args = _placed_args(layout, x, y)
    del x, y

    cpu = {}

    def run(prog, tag):
        sync(tag)
        c, t = os.times(), time.perf_counter()
        out, _ = prog(*args)
        jax.block_until_ready(out)
        dt, c1 = time.perf_counter() - t, os.times()
        cpu[tag] = (c1.user + c1.system - c.user - c.system) / dt
        return dt, out

    res["first_s"], _ = run(short, "warm")
    # short and long runs interleaved, the fastest of each kept: a burst of load from other
    # jobs then slows one pair rather than one side of the difference
    times = dict(short=[], long=[])
    outs = {}
    for r in range(spec["repeats"]):
        for name, prog in (("short", short), ("long", long_)):
            dt, outs[name] = run(prog, f"{name}{r}")
            times[name].append(dt)
    for name, out in outs.items():
        res[f"t_{name}"] = min(times[name])
        res[f"times_{name}"] = times[name]
        res[f"it_{name}"] = int(_scalar(out.iterations))
        res[f"stable_{name}"] = int(_scalar(out.stable_steps))
        res[f"converged_{name}"] = bool(_scalar(out.converged))
    times = {name: min(v) for name, v in times.items()}
    out = outs["long"]
    res["marginal_error"] = float(_scalar(out.marginal_error))
    res["cores_busy"] = cpu.get("long0")  # process CPU time / wall time of a long run
    res["per_iter"] = (times["long"] - times["short"]) / max(res["it_long"] - res["it_short"], 1)
    res["per_iter_naive"] = times["long"] / res["it_long"]  # fixed costs included
    if spec.get("latency"):
        res["allreduce_s"] = {str(size): _allreduce_latency(layout.mesh, size, sync) for size in (1, n)}
    res["process_id"] = jax.process_index()
    return res


def _allreduce_latency(mesh, size: int, sync, count: int = 200) -> float:
    """Seconds per all-reduce (psum over "u") of ``size`` float32 per device, chained
    ``count`` times inside one jitted loop, as the solver's collectives are."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    D = mesh.size

    def body(v):
        return jax.lax.fori_loop(0, count, lambda i, c: jax.lax.psum(c, "u") * (1.0 / D), v)

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("u"), out_specs=P("u"), check_vma=False))
    host = np.ones(D * size, np.float32)
    v = jax.make_array_from_callback(host.shape, NamedSharding(mesh, P("u")), lambda idx: host[idx])
    jax.block_until_ready(f(v))
    best = math.inf
    for r in range(3):
        sync(f"lat{size}-{r}")
        t = time.perf_counter()
        jax.block_until_ready(f(v))
        best = min(best, time.perf_counter() - t)
    return best / count


def bandwidth_worker(spec: dict) -> dict:
    """Streaming bound of a dense iteration: K v and u K over an (n, k) float32 matrix, through
    XLA (K split by columns over this process's devices, as the solver splits C) and through
    numpy (one thread per device on its own column block)."""
    import concurrent.futures

    import jax
    import numpy as np

    n, k, reps = spec["n"], spec["k"], spec["repeats"]
    devs = jax.devices()
    D = len(devs)
    res = dict(spec, devices=D, affinity=sorted(os.sched_getaffinity(0)), bytes=2 * n * k * 4)
    best = _xla_stream_seconds(_mesh(devs), n, k, reps)  # its matrix is freed on return
    res["xla_s"], res["xla_gbs"] = best, 2 * n * k * 4 / best / 1e9
    blocks = [np.full((n, k // D), 0.5, np.float32) for _ in range(D)]
    vs = [np.ones(k // D, np.float32) for _ in range(D)]
    un = np.ones(n, np.float32)

    def one(i):
        return blocks[i] @ vs[i], un @ blocks[i]

    with concurrent.futures.ThreadPoolExecutor(D) as pool:
        list(pool.map(one, range(D)))
        best = best_seconds(lambda: list(pool.map(one, range(D))), reps)
    res["numpy_s"], res["numpy_gbs"] = best, 2 * n * (k // D) * D * 4 / best / 1e9
    return res


def _xla_stream_seconds(mesh, n: int, k: int, reps: int) -> float:
    """The fastest of ``reps`` jitted (K v with a psum over "u", u K) on an (n, k) float32 matrix K
    split by columns over ``mesh``, after one untimed call."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    K = jax.jit(lambda: jnp.ones((n, k), jnp.float32) * 0.5, out_shardings=NamedSharding(mesh, P(None, "u")))()
    v = jax.device_put(jnp.ones((k,), jnp.float32), NamedSharding(mesh, P("u")))
    u = jax.device_put(jnp.ones((n,), jnp.float32), NamedSharding(mesh, P()))
    hi = jax.lax.Precision.HIGHEST

    def local(K, v, u):
        return jax.lax.psum(jnp.dot(K, v, precision=hi), "u"), jnp.dot(u, K, precision=hi)

    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(None, "u"), P("u"), P()), out_specs=(P(), P("u"))))
    jax.block_until_ready(f(K, v, u))
    return best_seconds(lambda: jax.block_until_ready(f(K, v, u)), reps)


# ----------------------------------------------------------------------------- communication
def comm_worker(spec: dict) -> dict:
    import jax

    from puaudit_jax.ot.sharded import Layout

    devs = jax.devices()
    rows = []
    for shape in spec["meshes"]:
        layout = Layout.of(_mesh(devs[: math.prod(shape)], tuple(shape)))
        for mode in spec["modes"]:
            for n, k in spec["sizes"]:
                block = None if mode == "dense" else spec["block_size"]
                args = _abstract_args(layout, n, k, spec["d"])
                text = _compile("scaling" if mode == "dense" else "log", 100, layout, block, args).as_text()
                s = dataclasses.asdict(comm_summary(text))
                s["groups"] = list(s["groups"])  # a tuple in CommSummary
                rows.append(
                    dict(
                        mesh="x".join(map(str, shape)),
                        rows_split=layout.count("rows"),
                        cols_split=layout.count("cols"),
                        mode=mode,
                        n=n,
                        k=k,
                        **s,
                    )
                )
    return dict(rows=rows)


# ----------------------------------------------------------------------------- preparation
#: ``--prepare``'s inputs: (name, kind of points, ``SolveOptions.prepare``).
PREPARE_RUNS = (("numpy, host", "numpy", "host"), ("numpy, device", "numpy", "device"), ("jax, auto", "jax", "auto"))
#: The phases of ``solve_partial`` that run before the solve: the host's share on the host path.
PREPARE_PHASES = ("validation", "transfer", "normalisation")


def prepare_worker(spec: dict) -> dict:
    """Phase tables of steady sharded solves (U split over every device) for each of :data:`PREPARE_RUNS`."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial
    from puaudit_runtime.phases import recording

    rng = np.random.default_rng(0)
    n, k, d = spec["n"], spec["k"], spec["d"]
    x, y = (rng.normal(size=(rows, d)).astype(np.float32) for rows in (n, k))
    mesh = _mesh(jax.devices())
    solver = PartialSinkhorn(epsilon=EPS, tol=1e-4, certify=False)
    rows = []
    for name, kind, prepare in PREPARE_RUNS:
        points = (jnp.asarray(x), jnp.asarray(y)) if kind == "jax" else (x, y)
        options = SolveOptions(method="sinkhorn", prepare=prepare)
        solve_partial(*points, M, solver, options, mesh=mesh)  # compiles
        tables = []
        for _ in range(spec["repeats"]):
            with recording() as table:
                result = solve_partial(*points, M, solver, options, mesh=mesh)
            tables.append(dict(table.seconds))
        phases = {p: float(np.median([t.get(p, 0.0) for t in tables])) for p in tables[0]}
        rows.append(dict(name=name, phases=phases, cost=result.cost, iterations=result.iterations))
    return dict(rows=rows, devices=len(jax.devices()))


def worker(spec: dict) -> dict:
    kinds = dict(memory=memory_worker, solve=solve_worker, bandwidth=bandwidth_worker, comm=comm_worker,
                 prepare=prepare_worker)  # fmt: skip
    return kinds[spec["kind"]](spec)


# ============================================================================ parent: sections
def section_memory(cfg) -> tuple[str, dict]:
    spec = dict(
        kind="memory",
        n=cfg.mem_n,
        k=cfg.mem_k,
        d=cfg.d,
        block_size=cfg.block_size,
        modes=["dense", "blocked"],
        devices=cfg.mem_devices,
        budget=int(cfg.budget_mib * MiB),
        budget_n=cfg.budget_n,
        budget_modes=cfg.budget_modes,
        unit=64,
    )
    r = run_worker(MODULE, spec, devices=max(cfg.mem_devices), timeout=cfg.timeout)
    if "failed" in r:
        return f"memory: failed ({r['failed']})", r
    lines = [
        f"## Memory per device (XLA buffer assignment of the compiled solve; nothing runs): "
        f"n_P x n_U = {cfg.mem_n} x {cfg.mem_k}, d = {cfg.d}, float32, U split over D devices",
        "",
        "| mode | D | arguments MiB | outputs MiB | temporaries MiB | peak MiB | peak / peak(D=1) | 1/D |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = {row["mode"]: row["peak"] for row in r["rows"] if row["D"] == 1}
    for row in r["rows"]:
        ratio = row["peak"] / base[row["mode"]] if row["mode"] in base else None
        row["ratio"] = ratio
        name = "dense (scaling)" if row["mode"] == "dense" else f"blocked (log, block {row['block_size']})"
        lines.append(
            f"| {name} | {row['D']} | {row['arguments'] / MiB:.1f} | {row['outputs'] / MiB:.2f} | "
            f"{row['temporaries'] / MiB:.1f} | {row['peak'] / MiB:.1f} | {fmt(ratio, '.3f')} | "
            f"{1 / row['D']:.3f} |"
        )
    lines += [
        "",
        f"## Largest n_U at fixed n_P = {cfg.budget_n} whose per-device peak fits {cfg.budget_mib:g} MiB "
        f"(d = {cfg.d}; search on memory_per_device only, n_U a multiple of 64 D)",
        "",
        "| mode | D | max n_U | peak MiB | peak at next step MiB | n_U / n_U(D=1) | D | cells n_P n_U (M) | compiles |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    kbase = {row["mode"]: row["k"] for row in r["budget_rows"] if row["D"] == 1}
    for row in r["budget_rows"]:
        ratio = row["k"] / kbase[row["mode"]] if kbase.get(row["mode"]) else None
        row["ratio"] = ratio
        lines.append(
            f"| {row['mode']} | {row['D']} | {row['k']} | {row['peak'] / MiB:.1f} | "
            f"{fmt(row.get('next_peak', math.nan) / MiB, '.1f')} | {fmt(ratio, '.2f')} | {row['D']} | "
            f"{row['n'] * row['k'] / 1e6:.1f} | {row['compiles']} |"
        )
    return "\n".join(lines), r


def section_time(cfg) -> tuple[str, dict]:
    out = dict(solve=[], bandwidth=[])
    for n, k in cfg.time_sizes:
        for mode in cfg.modes:
            iters = cfg.dense_iters if mode == "dense" else cfg.blocked_iters
            repeats = cfg.repeats
            if mode == "blocked" and n * k > cfg.blocked_cells_small:  # seconds per iteration: keep it short
                iters, repeats = cfg.blocked_iters_large, 1
            for D, cores in ((1, [0]), (2, [0, 1])):
                spec = dict(
                    kind="solve",
                    n=n,
                    k=k,
                    d=cfg.d,
                    mode=mode,
                    block_size=cfg.block_size,
                    short=cfg.short_iters,
                    iters=iters,
                    repeats=repeats,
                )
                t0 = time.perf_counter()
                r = run_worker(MODULE, spec, devices=D, cores=cores, timeout=cfg.timeout)
                r["wall_s"] = time.perf_counter() - t0
                r.setdefault("D", D)
                r["D"] = D
                r["cores"] = cores
                out["solve"].append(r)
                print(
                    f"  solve {n}x{k} {mode:7s} D={D} cores={cores}: "
                    + (
                        r.get("failed")
                        or r.get("skipped")
                        or f"{r['per_iter'] * 1e3:.1f} ms/iter ({r['it_long'] - r['it_short']} its, "
                        f"short {r['t_short']:.2f}s long {r['t_long']:.2f}s, compile {r['compile_s']:.1f}s, "
                        f"{fmt(r.get('cores_busy'), '.2f')} cores busy)"
                    )
                    + f" [{r['wall_s']:.0f}s wall]",
                    flush=True,
                )
        for D, cores in ((1, [0]), (2, [0, 1])):
            spec = dict(kind="bandwidth", n=n, k=k, repeats=max(5, cfg.repeats))
            r = run_worker(MODULE, spec, devices=D, cores=cores, timeout=cfg.timeout)
            r["D"], r["cores"] = D, cores
            out["bandwidth"].append(r)
            print(
                f"  bandwidth {n}x{k} D={D}: "
                + (r.get("failed") or f"XLA {r['xla_gbs']:.1f} GB/s, numpy {r['numpy_gbs']:.1f} GB/s"),
                flush=True,
            )

    def get(rows, **kw):
        for r in rows:
            if all(r.get(a) == b for a, b in kw.items()):
                return r
        return None

    lines = [
        f"## Time per iteration, 1 device on 1 core vs 2 forced devices on 2 cores (d = {cfg.d}, float32, "
        f"eps = {EPS}, tol = 1e-30: fixed iterations; (t_long - t_short) / (it_long - it_short))",
        "",
        "| n_P x n_U | mode | D=1 s/iter | D=2 s/iter | speed-up | bandwidth-bound speed-up (XLA / numpy) "
        "| s/iter incl. fixed costs D=1 / D=2 | iterations timed | peak MiB/device D=1 / D=2 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, k in cfg.time_sizes:
        b1, b2 = get(out["bandwidth"], n=n, k=k, D=1), get(out["bandwidth"], n=n, k=k, D=2)
        bw = (
            f"{b2['xla_gbs'] / b1['xla_gbs']:.2f} / {b2['numpy_gbs'] / b1['numpy_gbs']:.2f}"
            if b1 and b2 and "xla_gbs" in b1 and "xla_gbs" in b2
            else "-"
        )
        for mode in cfg.modes:
            r1, r2 = get(out["solve"], n=n, k=k, mode=mode, D=1), get(out["solve"], n=n, k=k, mode=mode, D=2)
            ok = [r for r in (r1, r2) if r and "per_iter" in r]
            if len(ok) < 2:
                why = "; ".join(
                    r.get("skipped") or r.get("failed") or "?" for r in (r1, r2) if r and "per_iter" not in r
                )
                lines.append(f"| {n}x{k} | {mode} | skipped: {why} | | | | | | |")
                continue
            sp = r1["per_iter"] / r2["per_iter"]
            r2["speedup"] = sp
            lines.append(
                f"| {n}x{k} | {mode} | {r1['per_iter']:.4g} | {r2['per_iter']:.4g} | {sp:.2f} | "
                f"{bw if mode == 'dense' else '(compute-bound)'} | "
                f"{r1['per_iter_naive']:.4g} / {r2['per_iter_naive']:.4g} | "
                f"{r1['it_long'] - r1['it_short']} | {r1['peak_per_device'] / MiB:.0f} / "
                f"{r2['peak_per_device'] / MiB:.0f} |"
            )
    lines += [
        "",
        "## Streaming bound: K v + u K over an n_P x n_U float32 matrix (two passes), split by columns",
        "",
        "| matrix | MiB | XLA 1 core GB/s | XLA 2 cores GB/s | ratio | numpy 1 thread GB/s "
        "| numpy 2 threads GB/s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, k in cfg.time_sizes:
        b1, b2 = get(out["bandwidth"], n=n, k=k, D=1), get(out["bandwidth"], n=n, k=k, D=2)
        if not (b1 and b2 and "xla_gbs" in b1 and "xla_gbs" in b2):
            lines.append(f"| {n}x{k} | failed | | | | | | |")
            continue
        lines.append(
            f"| {n}x{k} | {n * k * 4 / MiB:.0f} | {b1['xla_gbs']:.1f} | {b2['xla_gbs']:.1f} | "
            f"{b2['xla_gbs'] / b1['xla_gbs']:.2f} | {b1['numpy_gbs']:.1f} | {b2['numpy_gbs']:.1f} | "
            f"{b2['numpy_gbs'] / b1['numpy_gbs']:.2f} |"
        )
    return "\n".join(lines), out


def section_cluster(cfg) -> tuple[str, dict]:
    n, k = cfg.cluster_size
    spec = dict(
        kind="solve",
        n=n,
        k=k,
        d=cfg.d,
        mode="dense",
        block_size=cfg.block_size,
        short=cfg.short_iters,
        iters=cfg.cluster_iters,
        repeats=cfg.repeats,
        latency=True,
    )
    runs = {}
    for name, go in (
        (
            "cluster, process i on core i",
            lambda: cluster_workers(dict(spec, cluster=True), 2, lambda rank: [rank], cfg.timeout),
        ),
        ("one process, 2 devices", lambda: [run_worker(MODULE, spec, devices=2, cores=[0, 1], timeout=cfg.timeout)]),
        (
            "cluster, both processes on cores [0, 1]",
            lambda: cluster_workers(dict(spec, cluster=True), 2, lambda rank: [0, 1], cfg.timeout),
        ),
    ):
        if name.startswith("cluster, both") and not cfg.cluster_unpinned:
            continue
        t0 = time.perf_counter()
        runs[name] = dict(results=go(), wall_s=time.perf_counter() - t0)
        print(
            f"  {name}: "
            + ", ".join(r.get("failed") or f"{r['per_iter'] * 1e3:.1f} ms/iter" for r in runs[name]["results"]),
            flush=True,
        )
    lines = [
        f"## Two-process jax.distributed cluster (gloo over 127.0.0.1, 1 forced device per process) vs "
        f"one process with 2 forced devices on cores [0, 1]: dense {n} x {k}, d = {cfg.d}, U split in 2",
        "",
        "| run | s/iter | s/iter incl. fixed costs | iterations timed | cores busy | all-reduce latency 1 float / "
        f"{n} floats (us) | compile s | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    per = {}
    for name, run in runs.items():
        for i, r in enumerate(run["results"]):
            if "per_iter" not in r:
                lines.append(f"| {name} | failed: {r.get('failed') or r.get('skipped')} | | | | | | |")
                continue
            per.setdefault(name, []).append(r["per_iter"])
            lat = r.get("allreduce_s", {})
            who = (
                f"{name}: process {r.get('process_id', i)} (cores {r['affinity']})"
                if r.get("cluster")
                else f"{name} (cores {r['affinity']})"
            )
            lines.append(
                f"| {who} | {r['per_iter']:.4g} | {r['per_iter_naive']:.4g} | "
                f"{r['it_long'] - r['it_short']} | "
                f"{fmt(r.get('cores_busy'), '.2f')} | {fmt(lat.get('1', math.nan) * 1e6, '.0f')} / "
                f"{fmt(lat.get(str(n), math.nan) * 1e6, '.0f')} | {r['compile_s']:.1f} | "
                f"{run['wall_s']:.0f} |"
            )
    out = dict(runs=runs)
    single = per.get("one process, 2 devices")
    if single:
        lines.append("")
        for name, v in per.items():
            if name.startswith("cluster"):
                out.setdefault("ratio", {})[name] = max(v) / single[0]
                lines.append(
                    f"{name} / one process, time per iteration (slowest process): "
                    f"{max(v) / single[0]:.2f} (target within 1.5)"
                )
    return "\n".join(lines), out


def section_comm(cfg) -> tuple[str, dict]:
    spec = dict(
        kind="comm",
        meshes=[[4], [2, 2]],
        modes=["dense", "blocked"],
        sizes=cfg.comm_sizes,
        d=cfg.d,
        block_size=cfg.block_size,
    )
    r = run_worker(MODULE, spec, devices=4, timeout=cfg.timeout)
    if "failed" in r:
        return f"comm: failed ({r['failed']})", r
    lines = [
        "## Bytes per device exchanged by collectives, from the compiled per-device HLO (result shape of each "
        "all-reduce; per solver iteration = body + condition of the iteration loop)",
        "",
        "| mesh (rows x cols) | mode | n_P | n_U | per iteration B | ops/iter (non-scalar) "
        "| 4(n_P/Dr [Dc>1] + n_U/Dc [Dr>1]) B "
        "| per iter / that | fallback branches B | per epoch B | once B | cost block 4 n_P n_U / D B |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        dr, dc = row["rows_split"], row["cols_split"]
        vec = 4 * ((row["n"] / dr if dc > 1 else 0) + (row["k"] / dc if dr > 1 else 0))
        row["vector_bytes"] = vec
        row["cost_block_bytes"] = 4 * row["n"] * row["k"] / (dr * dc)
        lines.append(
            f"| {row['mesh']} ({dr}x{dc}) | {row['mode']} | {row['n']} | {row['k']} | {row['per_iter']} | "
            f"{row['per_iter_ops']} ({row['per_iter_multi']}) | {vec:.0f} | "
            f"{fmt(row['per_iter'] / vec if vec else None, '.4f')} | "
            f"{row['per_iter_fallback']} | {row['per_epoch']} | {row['once']} | "
            f"{row['cost_block_bytes']:.3g} |"
        )
    return "\n".join(lines), r


def section_prepare(cfg) -> tuple[str, dict]:
    out = []
    for n, k in cfg.prepare_sizes:
        spec = dict(kind="prepare", n=n, k=k, d=cfg.prepare_d, repeats=max(5, cfg.repeats))
        r = run_worker(MODULE, spec, devices=2, cores=[0, 1], timeout=cfg.timeout)
        out.append(dict(r, n=n, k=k))
        print(f"  prepare {n}x{k}: " + (r.get("failed") or "done"), flush=True)
    names = list(dict.fromkeys(p for r in out for row in r.get("rows", []) for p in row["phases"]))
    lines = [
        f"## Where a sharded solve's time goes: float32 points, d = {cfg.prepare_d}, U split over 2 forced devices "
        f"(cores [0, 1]), eps = {EPS}, tol 1e-4, uncertified; medians of {max(5, cfg.repeats)} steady solves (ms)",
        "",
        "| n_P x n_U | points, prepare | " + " | ".join(names) + " | before the solve | / numpy, host | cost |",
        "|---|---|" + "---|" * len(names) + "---|---|---|",
    ]
    for r in out:
        if "failed" in r:
            lines.append(f"| {r['n']}x{r['k']} | failed: {r['failed']} |")
            continue
        host = sum(r["rows"][0]["phases"].get(p, 0.0) for p in PREPARE_PHASES)
        for row in r["rows"]:
            before = sum(row["phases"].get(p, 0.0) for p in PREPARE_PHASES)
            row["before_solve"], row["ratio"] = before, before / host if host else None
            cells = " | ".join(f"{1e3 * row['phases'].get(p, 0.0):.1f}" for p in names)
            lines.append(f"| {r['n']}x{r['k']} | {row['name']} | {cells} | {1e3 * before:.1f} | "
                         f"{fmt(row['ratio'], '.2f')} | {row['cost']:.6f} |")  # fmt: skip
    return "\n".join(lines), dict(rows=out)


# ============================================================================ driver
def _sizes(text: str) -> list:
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s]


def config(args) -> argparse.Namespace:
    q = args.quick
    cfg = argparse.Namespace(
        d=args.d,
        block_size=args.block_size,
        repeats=args.repeats or (1 if q else 3),
        timeout=args.timeout or (300 if q else 900),
        mem_n=1000 if q else 4000,
        mem_k=5000 if q else 20000,
        mem_devices=[1, 2, 4] if q else [1, 2, 4, 8],
        budget_mib=args.budget_mib or (32 if q else 256),
        budget_n=500 if q else 2000,
        budget_modes=["dense"] if q else ["dense", "blocked"],
        time_sizes=_sizes(args.time_sizes or ("1000x8000" if q else "5000x5000,2000x100000")),
        modes=args.modes.split(","),
        short_iters=3,
        dense_iters=10 if q else 200,
        blocked_iters=3 if q else 10,
        blocked_iters_large=3 if q else 4,
        blocked_cells_small=30_000_000,
        cluster_size=_sizes(args.cluster_size or ("1000x8000" if q else "2000x40000"))[0],
        cluster_iters=10 if q else 200,
        cluster_unpinned=not args.no_cluster_unpinned,
        prepare_sizes=_sizes(args.prepare_sizes or ("1000x8000" if q else "5000x5000,2000x20000")),
        prepare_d=384 if q else 768,
        comm_sizes=_sizes(
            args.comm_sizes
            or ("1000x8000,2000x16000" if q else "1000x20000,2000x20000,4000x20000,2000x40000,2000x80000")
        ),
    )
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--memory", action="store_true", help="per-device memory, and the largest problem per budget")
    ap.add_argument("--time", action="store_true", help="time per iteration, 1 vs 2 devices / cores")
    ap.add_argument("--cluster", action="store_true", help="2-process cluster vs 1 process with 2 devices")
    ap.add_argument("--comm", action="store_true", help="collective bytes per iteration from the HLO")
    ap.add_argument("--prepare", action="store_true", help="phase tables of a 2-device solve, by where the points "
                    "are prepared")  # fmt: skip
    ap.add_argument("--prepare-sizes", default=None, help="--prepare: n_Pxn_U,... (default 5000x5000,2000x20000)")
    ap.add_argument("--quick", action="store_true", help="small sizes (all sections in a few minutes)")
    ap.add_argument("--d", type=int, default=384, help="point dimension")
    ap.add_argument("--block-size", type=int, default=256, help="blocked mode's block size")
    ap.add_argument("--budget-mib", type=float, default=None, help="per-device budget (default 256, quick 32)")
    ap.add_argument("--time-sizes", default=None, help="n_PxN_U,... (default 5000x5000,2000x100000)")
    ap.add_argument("--modes", default="dense,blocked", help="--time: solver modes (dense = scaling, blocked = log)")
    ap.add_argument("--cluster-size", default=None, help="n_Pxn_U (default 2000x40000)")
    ap.add_argument(
        "--no-cluster-unpinned",
        action="store_true",
        help="--cluster: skip the extra run with both processes allowed on both cores",
    )
    ap.add_argument("--comm-sizes", default=None, help="n_Pxn_U,...")
    ap.add_argument("--repeats", type=int, default=None, help="timed calls per program (min taken)")
    ap.add_argument("--timeout", type=float, default=None, help="per subprocess / cluster (s)")
    ap.add_argument("--out", default=None, help="write every number to this JSON file")
    args = ap.parse_args(argv)
    if serve_worker(args, worker):
        return
    sections = dict(memory=section_memory, time=section_time, cluster=section_cluster, comm=section_comm,
                    prepare=section_prepare)  # fmt: skip
    chosen = [s for s in sections if getattr(args, s)] or list(sections)
    cfg = config(args)
    info = machine()
    print(machine_header(info, "bench_scale"), flush=True)
    if len(info["usable_cpus"]) < 2 and any(s in chosen for s in ("time", "cluster")):
        print("# fewer than 2 usable cores: the 2-core runs share one core", flush=True)
    payload = dict(machine=info, config=vars(cfg), quick=args.quick, sections={})
    for name in chosen:
        before = load_average()
        t0 = time.perf_counter()
        print(f"\n# section {name} (load {before})", flush=True)
        table, data = sections[name](cfg)
        after = load_average()
        wall = time.perf_counter() - t0
        print(
            "\n" + table + f"\n\n(section {name}: {wall:.0f} s wall; load average before {before}, after {after})",
            flush=True,
        )
        payload["sections"][name] = dict(data=data, table=table, load_before=before, load_after=after, wall_s=wall)
    if args.out:
        out = dump_json(payload, Path(args.out), default=str)
        print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
