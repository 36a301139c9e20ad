"""Ablation: XLA:CPU's fast-compile options (``puaudit_runtime.jit``) against jax.jit's defaults, by problem size.

    OMP_NUM_THREADS=1 python -m experiments.benchmarks.compile_options [--repeats 2] [--sizes 1000 2000 4000]

The solver's single-device program (``solve.run_points``: cosine cost, d 768, float32, eps 0.01, tol 1e-4,
mass 0.5) and its certificate (``solve._certified``), each jitted twice from the same function: with
jax.jit's defaults ("default") and with ``puaudit_runtime.jit.CPU_COMPILER_OPTIONS`` ("fast-compile").
Per size, ``--repeats`` pairs of fresh processes; each process compiles one variant first (its cold
compile, the one reported: median over the processes that compiled that variant first) and the other
second, then times both steady-state, interleaved (median of ``--rounds`` calls). Fusions are counted
in the compiled HLO (XLA:CPU's compile time is per fused kernel). The solve's answers are compared
(largest difference of the column masses). Prints the table with ratios and writes
results/bench_compile_options.{json,md} atomically: the evidence for ``ot.problem.FAST_COMPILE_CELLS``.
A script, not a test: no timed assertions.
"""

from __future__ import annotations

import argparse
import statistics

from experiments.common import RESULTS, dump_json, machine, run_worker, serve_worker, timed
from puaudit_runtime.files import write_text

MODULE = "experiments.benchmarks.compile_options"
VARIANTS = ("default", "fast-compile")


def _programs(variant: str):
    """(solve, certificate) jitted from the package's functions with the variant's compile options."""
    import jax

    from puaudit_jax.ot.solve import _certified, run_points
    from puaudit_runtime.jit import CPU_COMPILER_OPTIONS

    options = dict(compiler_options=CPU_COMPILER_OPTIONS) if variant == "fast-compile" else {}
    solve = jax.jit(run_points.__wrapped__, static_argnames=("cost", "block_size", "with_plan"), **options)
    certificate = jax.jit(_certified.__wrapped__, static_argnames=("cost", "block_size"), **options)
    return solve, certificate


def worker(spec: dict) -> dict:
    """Compile both variants at one size (``spec["first"]`` first), then time both steady-state."""
    import re

    import jax
    import numpy as np

    from puaudit_jax.ot import PartialSinkhorn
    from puaudit_jax.ot.problem import unit_rows

    n, rounds = spec["n"], spec["rounds"]
    rng = np.random.default_rng(0)
    x, y = unit_rows(rng.normal(size=(n, 768)), rng.normal(size=(n, 768)), "cosine", np.float32)
    a, m = np.full(n, 1 / n, np.float32), np.float32(0.5)
    solver = PartialSinkhorn(epsilon=0.01, tol=1e-4)
    order = [spec["first"]] + [v for v in VARIANTS if v != spec["first"]]
    args, kw = (x, y, a, a, m, None, solver), dict(cost="cosine", block_size=None, with_plan=False)
    programs, out, solved = {}, {}, None
    for v in order:
        programs[v] = solve, certificate = _programs(v)
        compiled, seconds = timed(solve.lower(*args, **kw).compile)
        solution = jax.block_until_ready(solve(*args, **kw))[0]
        solved = solution if solved is None else solved  # the certificates' input: the first variant's solve
        out[v] = dict(compile_s=seconds, fusions=len(re.findall(r"= \S+ fusion\(", compiled.as_text())),
                      col_mass=np.asarray(solution.col_mass))  # fmt: skip
    calls = {
        v: (
            lambda s=s: jax.block_until_ready(s(*args, **kw)),
            lambda c=c: jax.block_until_ready(c(x, y, None, a, a, m, solved, cost="cosine", block_size=None)),
        )
        for v, (s, c) in programs.items()
    }
    for _, certify in calls.values():  # compile the certificates outside the timed rounds
        certify()
    times = {v: ([], []) for v in VARIANTS}
    for r in range(rounds):
        for v in order if r % 2 == 0 else order[::-1]:
            for i in (0, 1):
                times[v][i].append(timed(calls[v][i])[1])
    for v in VARIANTS:
        out[v].update(solve_s=statistics.median(times[v][0]), certificate_s=statistics.median(times[v][1]))
    difference = float(np.abs(out["default"].pop("col_mass") - out["fast-compile"].pop("col_mass")).max())
    return dict(spec, variants=out, col_mass_difference=difference, iterations=int(solved.iterations))


def _table(runs: list[dict], sizes: list[int]) -> str:
    lines = [
        "Solver program (cosine, d 768, float32, eps 0.01, tol 1e-4, m 0.5): jax.jit's defaults against "
        "`puaudit_runtime.jit`'s fast-compile options. Compile: median of the fresh processes that compiled "
        "that variant first; steady: median of the per-process medians (interleaved calls).",
        "",
        "| n x n | fusions default | fusions fast | compile default (s) | compile fast (s) | ratio "
        "| solve default (ms) | solve fast (ms) | ratio | certificate default (ms) | certificate fast (ms) | ratio "
        "| max column-mass difference |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        rs = [r for r in runs if r["n"] == n]

        def med(v, key, first_only=False, rs=rs):
            return statistics.median(r["variants"][v][key] for r in rs if not first_only or r["first"] == v)

        c = {v: med(v, "compile_s", True) for v in VARIANTS}
        s = {v: 1e3 * med(v, "solve_s") for v in VARIANTS}
        t = {v: 1e3 * med(v, "certificate_s") for v in VARIANTS}
        f = {v: rs[0]["variants"][v]["fusions"] for v in VARIANTS}
        diff = max(r["col_mass_difference"] for r in rs)
        d, q = "default", "fast-compile"
        lines.append(f"| {n} x {n} | {f[d]} | {f[q]} | {c[d]:.2f} | {c[q]:.2f} | {c[q] / c[d]:.2f} "
                     f"| {s[d]:.1f} | {s[q]:.1f} | {s[q] / s[d]:.2f} "
                     f"| {t[d]:.1f} | {t[q]:.1f} | {t[q] / t[d]:.2f} | {diff:.1e} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run ``--repeats`` pairs of fresh processes per size (each variant first in half); print and write."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--repeats", type=int, default=2, help="process pairs per size")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved steady calls per variant")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if serve_worker(args, worker):
        return
    runs = []
    for n in args.sizes:
        for i in range(args.repeats):
            for first in VARIANTS:
                r = run_worker(
                    MODULE, dict(n=n, first=first, repeat=i, rounds=args.rounds), env={"JAX_PLATFORMS": "cpu"}
                )
                if "failed" in r:
                    raise SystemExit(f"{n} ({first} first): {r['failed']}")
                runs.append(r)
                v = r["variants"]
                solve_ms = [f"{1e3 * v[q]['solve_s']:.1f}" for q in VARIANTS]
                print(f"{n} #{i} {first} first: compile {v[first]['compile_s']:.2f} s; solve {' / '.join(solve_ms)} ms")
    table = _table(runs, args.sizes)
    print(table)
    dump_json({"machine": machine(), "runs": runs}, RESULTS / "bench_compile_options.json")
    write_text(table, RESULTS / "bench_compile_options.md")
    print(f"wrote {RESULTS / 'bench_compile_options.json'} and .md")


if __name__ == "__main__":
    main()
