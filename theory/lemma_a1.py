"""Lemma A.1 of PUAudit (PUAudit, Appendix A.1): maximal correlation with N uniform vectors.

Statement (reconstructed from the extracted text). Let z_bar be the unit consensus direction,
u = z_i^perp a fixed unit vector in the (d-1)-dimensional complement z_bar^perp and
x_1, ..., x_N i.i.d. uniform on the unit sphere S^{d-2} of that complement (N = N_U). Then

    (statement, eq. 2)   P( max_j |<u, x_j>| > t ) <= N exp(-(d-1) t^2 / 2),
    (proof, last line)   P( max_j |<u, x_j>| > t ) <= 2 N exp(-(d-1) t^2 / 2),

the proof being the one-vector cap bound P(|<u, x>| > t) <= 2 exp(-(d-1) t^2 / 2) and a union
bound. The two displays differ by the factor 2; Theorem 4.3 uses the proof's 2 N.

What is measured (t, probabilities dimensionless):

- the Monte Carlo tail of M = max_j |<u, x_j>| from vectors drawn by ``theory.sphere``;
- the exact tail: with n = d - 1, (1 + <u, x>) / 2 ~ Beta((n-1)/2, (n-1)/2), so
  p(t) = P(|<u, x>| > t) = 2 BetaSF((1 + t) / 2) and P(M > t) = 1 - (1 - p(t))^N;
- both bounds, where they are vacuous (>= 1), how far the bound's 5 % quantile
  t_bound = sqrt(2 ln(N / 0.05) / (d - 1)) sits above the exact one, and the worst ratio
  exact / bound over a dense (n, t) grid (the statement without the factor 2 is true iff it is
  <= 1).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, special

from theory import sphere
from theory._io import new_figure, run_statement

NAME = "lemma_a1"


@dataclass(frozen=True)
class Config:
    dims: tuple = (16, 64, 256, 1024)
    n_u: tuple = (100, 1000)
    reps: int = 400
    seed: int = 0
    t_grid: int = 201


QUICK = Config(dims=(16, 64, 256, 1024), n_u=(100, 1000), reps=100)


def max_correlation_samples(rng: np.random.Generator, d: int, n_u: int, reps: int) -> np.ndarray:
    """(reps,) draws of max_j |<u, x_j>|, u and x_j uniform unit vectors in z_bar^perp of R^d."""
    z_bar = sphere.random_direction(rng, d)
    out = np.empty(reps)
    for r in range(reps):
        u = sphere.uniform_orthogonal(rng, 1, z_bar)[0]
        x = sphere.uniform_orthogonal(rng, n_u, z_bar)
        out[r] = np.abs(x @ u).max()
    return out


def single_tail_exact(t, d: int) -> np.ndarray:
    """P(|<u, x>| > t) for x uniform on S^{d-2} (the unit sphere of R^{d-1}); exact."""
    n = d - 1
    a = (n - 1) / 2.0
    t = np.clip(np.asarray(t, np.float64), 0.0, 1.0)
    return np.minimum(1.0, 2.0 * special.betainc(a, a, (1.0 - t) / 2.0))


def max_tail_exact(t, d: int, n_u: int) -> np.ndarray:
    """P(max over n_u i.i.d. uniform x of |<u, x>| > t); exact."""
    p = single_tail_exact(t, d)
    with np.errstate(divide="ignore"):
        return np.where(p >= 1.0, 1.0, -np.expm1(n_u * np.log1p(-np.minimum(p, 1.0))))


def bound_statement(t, d: int, n_u: int) -> np.ndarray:
    return n_u * np.exp(-(d - 1) * np.asarray(t) ** 2 / 2.0)


def quantile_exact(q: float, d: int, n_u: int) -> float:
    """t with P(max > t) = q (exact)."""
    return float(optimize.brentq(lambda t: max_tail_exact(t, d, n_u) - q, 0.0, 1.0, xtol=1e-12))


def worst_ratio_single(n_max: int = 4000) -> dict:
    """max over ambient n = d - 1 in [2, n_max] and t of P(|<u,x>|>t) / exp(-n t^2 / 2).

    <= 1 means the one-vector bound holds without the factor 2 (so the statement, eq. 2, holds).
    """
    best = (0.0, None, None)
    for n in np.unique(np.geomspace(2, n_max, 200).astype(int)):
        d = n + 1
        t = np.linspace(0.0, 1.0, 2001)[1:-1]
        bound = np.exp(-n * t**2 / 2.0)
        ok = bound > 1e-250
        ratio = single_tail_exact(t[ok], d) / bound[ok]
        t = t[ok]
        k = int(np.argmax(ratio))
        if ratio[k] > best[0]:
            best = (float(ratio[k]), int(n), float(t[k]))
    return {"max_ratio": best[0], "at_n": best[1], "at_t": best[2]}


def run(cfg: Config) -> dict:
    rng = np.random.default_rng(cfg.seed)
    t = np.linspace(0.0, 1.0, cfg.t_grid)
    rows = []
    curves = {}
    for d in cfg.dims:
        for n_u in cfg.n_u:
            m = max_correlation_samples(rng, d, n_u, cfg.reps)
            emp = (m[None, :] > t[:, None]).mean(axis=1)
            exact = max_tail_exact(t, d, n_u)
            b_stmt = bound_statement(t, d, n_u)
            # Monte Carlo vs exact: the empirical CDF should match within ~3 binomial std
            se = np.sqrt(np.maximum(exact * (1 - exact), 1.0 / cfg.reps) / cfg.reps)
            t05_exact = quantile_exact(0.05, d, n_u)
            t05_bound = float(np.sqrt(2.0 * np.log(n_u / 0.05) / (d - 1)))
            t05_bound_proof = float(np.sqrt(2.0 * np.log(2 * n_u / 0.05) / (d - 1)))
            rows.append(
                {
                    "d": d,
                    "n_u": n_u,
                    "reps": cfg.reps,
                    "mean_max_corr": float(m.mean()),
                    "emp_quantile_95": float(np.quantile(m, 0.95)),
                    "exact_t05": t05_exact,
                    "bound_t05_statement": t05_bound,
                    "bound_t05_proof": t05_bound_proof,
                    "t_quantile_ratio_statement": t05_bound / t05_exact,
                    "bound_over_exact_at_exact_t05": float(bound_statement(t05_exact, d, n_u) / 0.05),
                    "vacuous_below_t_statement": float(np.sqrt(2.0 * np.log(n_u) / (d - 1))),
                    # > 0 would be a counterexample; MC noise allowed for by 3 standard errors
                    "max_emp_minus_statement_minus_3se": float(np.max(emp - b_stmt - 3 * se)),
                    "max_exact_over_statement": float(np.max((exact / b_stmt)[b_stmt <= 1.0])),
                    "max_abs_emp_minus_exact_in_se": float(np.max(np.abs(emp - exact) / se)),
                }
            )
            curves[f"{d}_{n_u}"] = {"emp": emp, "exact": exact}
    return {
        "config": asdict(cfg),
        "seeds": {"numpy_master": cfg.seed},
        "t": t,
        "rows": rows,
        "one_vector_worst_ratio": worst_ratio_single(),
        "curves": curves,
    }


def plot(res: dict):
    t = np.asarray(res["t"])
    dims = res["config"]["dims"]
    n_us = res["config"]["n_u"]
    fig, axes = new_figure(1, len(n_us) + 1)
    colors = dict(zip(dims, ["C0", "C1", "C2", "C3", "C4", "C5"]))
    for ax, n_u in zip(axes[0], n_us):
        for d in dims:
            c = res["curves"][f"{d}_{n_u}"]
            emp = np.asarray(c["emp"])
            ax.semilogy(t[emp > 0], emp[emp > 0], "o", ms=2.5, color=colors[d], alpha=0.6)
            ax.semilogy(t, np.maximum(c["exact"], 1e-30), "-", color=colors[d], label=f"d={d}")
            ax.semilogy(t, bound_statement(t, d, n_u), "--", color=colors[d], lw=1)
        ax.axhline(1.0, color="k", lw=0.6)
        ax.set_ylim(1e-6, 1e3)
        ax.set_xlabel("t")
        ax.set_ylabel("P(max_j |<u, x_j>| > t)")
        ax.set_title(f"N_U={n_u}: dots MC, line exact,\ndashed N_U exp(-(d-1)t²/2)", fontsize=9)
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    rows = [r for r in res["rows"]]
    for n_u, mk in zip(n_us, ["o", "s"]):
        rr = [r for r in rows if r["n_u"] == n_u]
        col = "C0" if n_u == n_us[0] else "C3"
        ax.loglog([r["d"] for r in rr], [r["exact_t05"] for r in rr], mk + "-", color=col, label=f"exact, N_U={n_u}")
        ax.loglog(
            [r["d"] for r in rr],
            [r["bound_t05_statement"] for r in rr],
            mk + "--",
            color=col,
            mfc="none",
            label=f"bound, N_U={n_u}",
        )
    ax.set_xlabel("d")
    ax.set_ylabel("t at which P(max > t) = 0.05")
    ax.set_title("5% quantile of the max correlation", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def main(argv=None):
    args, stem, res = run_statement(NAME, __doc__.splitlines()[0], Config(), QUICK, run, plot, argv)
    for r in res["rows"]:
        print(
            f"d={r['d']:5d} N_U={r['n_u']:5d}  t05 exact={r['exact_t05']:.3f} "
            f"bound={r['bound_t05_statement']:.3f} (x{r['t_quantile_ratio_statement']:.2f})  "
            f"bound/exact at t05={r['bound_over_exact_at_exact_t05']:.3g}  "
            f"max exact/bound={r['max_exact_over_statement']:.3g}  "
            f"|emp-exact|/se<={r['max_abs_emp_minus_exact_in_se']:.2f}"
        )
    print("one-vector worst ratio exact/exp(-n t^2/2):", res["one_vector_worst_ratio"])
    print(f"wrote {args.out}/{stem}.json (+ .png) in {res['wall_s']:.1f}s")
    return res


if __name__ == "__main__":
    main()
