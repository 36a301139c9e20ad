"""Ablation: what the scaling mode's stable cold-start step costs in compilation, and what it buys.

    OMP_NUM_THREADS=1 python -m experiments.benchmarks.cold_start [--repeats 3]

A cold scaling-mode solve starts with one stable log-domain iteration (``PartialSinkhorn._stable_step``):
its plan is nearly feasible, so the kernel built from it neither overflows nor underflows whole rows;
the same step rescues a non-finite update. It is compiled into every solve's program. Side by side:

- stable: the package's solver (``PartialSinkhorn``);
- max-shift: the same solver whose start and rescue instead shift the potentials so that every row and
  column of the real block, and each dummy, has its largest kernel entry equal to 1 (two max passes
  over C, no exp, no marginals): no entry overflows and no row or column underflows whole, which is all
  the scaling iterations need to proceed. Defined here only (``MaxShiftStart``).

Each variant compiles the 1000 x 1000 single-device program (d 768, float32, cosine) in fresh
processes (``--repeats``): compile seconds (median) and fusions of the compiled HLO. Then, in the same
processes, it solves a set of problems (sizes, epsilons, masses, cosine and squared-Euclidean costs):
iterations, steady seconds (median of 5 calls) and the transport cost (the table gives its difference
between the variants; the JSON has each solve's ``converged`` and marginal error). Prints the tables
with ratios; writes
results/bench_cold_start.{json,md} atomically. A script, not a test: no timed assertions.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics

from experiments.common import RESULTS, dump_json, machine, run_worker, serve_worker, timed
from puaudit_runtime.files import write_text

MODULE = "experiments.benchmarks.cold_start"
VARIANTS = ("stable", "max-shift")
# (n, k, d, layout, epsilon, mass, cost): layout "clustered" moves half of y away from x
PROBLEMS = (
    (1000, 1000, 768, "iid", 0.01, 0.5, "cosine"),
    (1000, 1000, 768, "iid", 0.001, 0.5, "cosine"),
    (1000, 1000, 768, "clustered", 0.01, 0.3, "cosine"),
    (500, 2000, 64, "clustered", 0.05, 0.9, "cosine"),
    (400, 600, 32, "iid", 0.01, 0.999, "cosine"),
    (400, 600, 8, "clustered", 0.05, 0.2, "sqeuclidean"),
    (300, 300, 16, "iid", 0.01, 1.0, "cosine"),
)


def _max_shift_solver():
    """The ``MaxShiftStart`` solver class (built in the worker: it imports JAX)."""
    import jax
    import jax.numpy as jnp

    from puaudit_jax.ot import PartialSinkhorn

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class MaxShiftStart(PartialSinkhorn):
        """PartialSinkhorn whose cold start and rescue shift the potentials by row and column maxima."""

        def _stable_step(self, geom, tg, s, eps0):
            """Potentials (f (n,), g (k,), fd, gd) with every kernel row's and column's largest entry 1."""
            f, g, fd, gd = s.pots
            sp, C = geom.split, geom.matrix
            ok_f, ok_g = jnp.isfinite(f), jnp.isfinite(g)
            f = jnp.where(ok_f, f - sp.max(jnp.max(f[:, None] + g[None, :] - C, axis=1), "cols"), f)
            g = jnp.where(ok_g, g - sp.max(jnp.max(f[:, None] + g[None, :] - C, axis=0), "rows"), g)
            gd = jnp.where(jnp.isfinite(gd), -sp.max(jnp.max(jnp.where(ok_f, f, -jnp.inf)), "rows"), gd)
            fd = jnp.where(jnp.isfinite(fd), -sp.max(jnp.max(jnp.where(ok_g, g, -jnp.inf)), "cols"), fd)
            one = jnp.array(1, jnp.int32)
            return s._replace(pots=(f, g, fd, gd), err=jnp.full_like(s.err, jnp.inf), stable_steps=s.stable_steps + one)

    return MaxShiftStart


def _problem(n: int, k: int, d: int, layout: str, cost: str, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, d)).astype(np.float32), rng.normal(size=(k, d)).astype(np.float32)
    if layout == "clustered":
        y[: k // 2] += 2.0
    if cost == "sqeuclidean":  # costs of order 1, like the cosine's
        x, y = x / 4, y / 4
    return x, y


def worker(spec: dict) -> dict:
    """Compile the 1000 x 1000 program of one variant, then solve every problem with it."""
    import jax
    import numpy as np

    from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial
    from puaudit_jax.ot.problem import unit_rows
    from puaudit_jax.ot.solve import run_points

    cls = PartialSinkhorn if spec["variant"] == "stable" else _max_shift_solver()
    x, y = unit_rows(*_problem(1000, 1000, 768, "iid", "cosine"), "cosine")
    a = np.full(1000, 1e-3, np.float32)
    lowered = run_points.lower(x, y, a, a, np.float32(0.5), None, cls(), cost="cosine", block_size=None,
                               with_plan=False)  # fmt: skip
    compiled, compile_s = timed(lowered.compile)
    fusions = len(re.findall(r"= \S+ fusion\(", compiled.as_text()))
    rows = []
    options = SolveOptions(method="sinkhorn", dtype="float32")
    for n, k, d, layout, eps, mass, cost in PROBLEMS:
        x, y = _problem(n, k, d, layout, cost)
        solver = cls(epsilon=eps, tol=1e-4)
        solve = lambda: jax.block_until_ready(solve_partial(x, y, mass, solver, options, cost=cost))  # noqa: B023
        r = solve()
        steady = statistics.median(timed(solve)[1] for _ in range(5))
        rows.append(dict(problem=f"{n}x{k} d{d} {layout} eps {eps} m {mass} {cost}", iterations=r.iterations,
                         converged=bool(r.converged), cost=float(r.cost), marginal_error=float(r.marginal_error),
                         steady_s=steady))  # fmt: skip
    return dict(spec, compile_s=compile_s, fusions=fusions, rows=rows)


def _table(results: dict) -> str:
    stable, shift = results["stable"], results["max-shift"]
    compile_s = {v: statistics.median(r["compile_s"] for r in results[v]) for v in VARIANTS}
    lines = [
        f"Compilation of the 1000 x 1000 program (d 768, float32, cosine), median of {len(stable)} fresh processes",
        "",
        "| start | compile (s) | fusions | / stable |",
        "|---|---|---|---|",
    ]
    for v in VARIANTS:
        lines.append(f"| {v} | {compile_s[v]:.2f} | {results[v][0]['fusions']} | "
                     f"{compile_s[v] / compile_s['stable']:.2f} |")  # fmt: skip
    lines += [
        "",
        "Solves (tol 1e-4, float32; steady: median of 5 calls in the first process)",
        "",
        "| problem | iterations stable | iterations max-shift | ratio | steady ms stable | steady ms max-shift "
        "| ratio | cost difference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a, b in zip(stable[0]["rows"], shift[0]["rows"]):
        lines.append(f"| {a['problem']} | {a['iterations']} | {b['iterations']} | "
                     f"{b['iterations'] / a['iterations']:.2f} | {1e3 * a['steady_s']:.1f} | "
                     f"{1e3 * b['steady_s']:.1f} | {b['steady_s'] / a['steady_s']:.2f} | "
                     f"{abs(a['cost'] - b['cost']):.1e} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run each variant in ``--repeats`` fresh processes, interleaved; print and write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per variant")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if serve_worker(args, worker):
        return
    results = {v: [] for v in VARIANTS}
    for i in range(args.repeats):
        for v in VARIANTS:
            r = run_worker(MODULE, dict(variant=v, repeat=i), env={"JAX_PLATFORMS": "cpu"})
            if "failed" in r:
                raise SystemExit(f"{v}: {r['failed']}")
            results[v].append(r)
            print(f"{v} #{i}: compile {r['compile_s']:.2f} s, {r['fusions']} fusions", flush=True)
    table = _table(results)
    print(table)
    dump_json({"machine": machine(), "problems": PROBLEMS, "runs": results}, RESULTS / "bench_cold_start.json")
    write_text(table, RESULTS / "bench_cold_start.md")
    print(f"wrote {RESULTS / 'bench_cold_start.json'} and .md")


if __name__ == "__main__":
    main()
