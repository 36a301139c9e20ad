"""Benchmark: the audit's penalised logistic Newton (numpy) vs a jit-compiled JAX Newton and scikit-learn.

    OMP_NUM_THREADS=1 python -m experiments.benchmarks.logistic [--sizes 604x46,755x46,3000x385] [--repeats 30]

``puaudit_jax.audit.logistic.penalised_logistic`` fits the decision rule's models (212 fits of 604-755
rows x 46 columns in a warm MT-Bench audit) and the Elkan-Noto scorer's. Side by side on synthetic
data of each size, one ridge on the slopes and none on the intercept:

- ours: numpy Newton, float64 (the median of ``--repeats`` calls; it compiles nothing);
- jax: the same Newton as one jit-compiled ``lax.while_loop`` in float64, rows padded to a power of
  two (the package's implementation until it was replaced): its first call (compilation included)
  and the median of the next calls;
- sklearn: ``LogisticRegression(solver="newton-cholesky", C=1/ridge)``, the same objective.

Prints the times, the ratios to ours and the largest coefficient difference to sklearn; writes
results/bench_logistic.json atomically. A script, not a test: no timed assertions.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import expit

from experiments.common import RESULTS, dump_json, machine, median_seconds, timed
from puaudit_jax.audit.logistic import penalised_logistic

RIDGE = 2.0


def _jax_newton(X, y, penalty, jitter=1e-9, tol=1e-10, max_iter=50):
    """The former JAX implementation: one jit-compiled while loop, float64, rows padded to 2^k >= 64."""

    @jax.jit
    def newton(X, y, weight, penalty):
        def step(state):
            i, w, _ = state
            p = jax.nn.sigmoid(X @ w)
            grad = X.T @ (weight * (p - y)) + penalty * w
            hess = (X.T * (weight * p * (1 - p))) @ X + jnp.diag(penalty + jitter)
            delta = jnp.linalg.solve(hess, grad)
            return i + 1, w - delta, jnp.max(jnp.abs(delta))

        init = (jnp.asarray(0), jnp.zeros(X.shape[1], X.dtype), jnp.asarray(jnp.inf, X.dtype))
        return jax.lax.while_loop(lambda s: (s[0] < max_iter) & (s[2] > tol), step, init)[1]

    n = X.shape[0]
    pad = max(64, 1 << max(0, n - 1).bit_length()) - n
    Xp, yp, wp = np.pad(X, ((0, pad), (0, 0))), np.pad(y, (0, pad)), np.pad(np.ones(n), (0, pad))
    with jax.enable_x64(True):
        return lambda: np.asarray(newton(Xp, yp, wp, penalty))


def make_data(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (n, p) with a column of ones, y (n,) in {0, 1} from a logistic model, penalty (p,)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, p - 1))])
    y = (rng.random(n) < expit(X @ (0.3 * rng.normal(size=p)))).astype(float)
    return X, y, np.r_[1e-6, np.full(p - 1, RIDGE)]


def bench(n: int, p: int, repeats: int) -> dict:
    """One row: times of ours, jax (first and steady) and sklearn at (n, p), and their agreement."""
    from sklearn.linear_model import LogisticRegression

    X, y, penalty = make_data(n, p)
    ours = penalised_logistic(X, y, penalty)
    with jax.enable_x64(True):
        run_jax = _jax_newton(X, y, penalty)
        w_jax, jax_first = timed(run_jax)
        jax_s = median_seconds(run_jax, repeats)
    sk = LogisticRegression(solver="newton-cholesky", C=1 / RIDGE, tol=1e-10, max_iter=100)
    fit_sk = lambda: sk.fit(X[:, 1:], y)
    sk_s = median_seconds(fit_sk, repeats)
    w_sk = np.r_[sk.intercept_, sk.coef_.ravel()]
    ours_s = median_seconds(lambda: penalised_logistic(X, y, penalty), repeats)
    return {"n": n, "p": p, "ours_ms": 1e3 * ours_s, "jax_first_ms": 1e3 * jax_first, "jax_ms": 1e3 * jax_s,
            "sklearn_ms": 1e3 * sk_s, "jax_over_ours": jax_s / ours_s, "sklearn_over_ours": sk_s / ours_s,
            "max_coef_diff_sklearn": float(np.max(np.abs(ours - w_sk))),
            "max_coef_diff_jax": float(np.max(np.abs(ours - w_jax)))}  # fmt: skip


def main() -> None:
    """Run every size, print the table, write results/bench_logistic.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="604x46,755x46,3000x385", help="n x p sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per method (median)")
    args = parser.parse_args()
    rows = []
    print(f"{'n x p':>10} {'ours ms':>8} {'jax 1st':>8} {'jax ms':>8} {'sklearn':>8} {'jax/ours':>8} "
          f"{'skl/ours':>8} {'|w-skl|':>8}")  # fmt: skip
    for size in args.sizes.split(","):
        n, p = map(int, size.split("x"))
        r = bench(n, p, args.repeats)
        rows.append(r)
        print(f"{size:>10} {r['ours_ms']:8.2f} {r['jax_first_ms']:8.1f} {r['jax_ms']:8.2f} {r['sklearn_ms']:8.2f} "
              f"{r['jax_over_ours']:8.2f} {r['sklearn_over_ours']:8.2f} {r['max_coef_diff_sklearn']:8.1e}")  # fmt: skip
    path = dump_json({"machine": machine(), "ridge": RIDGE, "repeats": args.repeats, "rows": rows},
                     RESULTS / "bench_logistic.json")  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
