"""Theorem A.3 of PUAudit (PUAudit, Appendix A.3): informational sufficiency of the positive set.

Statement (reconstructed). Assumption A.2: every z_i of the denoised set D_P' satisfies
<z_i, z_bar> >= 1 - lambda for some lambda in (0, 1), and the distribution is symmetric about z_bar
in that cap. Theorem A.3: for every eps > 0 there is n*(eps, lambda) such that |D_P'| >= n*
makes the empirical reference direction z_hat = sum_i z_i / ||sum_i z_i|| "eps-aligned" with
z_bar with high probability; "the empirical mean direction converges at rate O(|D_P'|^{-1/2})",
which the paper uses to explain the p_ratio plateau of its Table 6.

"eps-aligned" is not defined in the paper. We measure ||z_hat - z_bar|| (~ the angle, radians);
for 1 - <z_hat, z_bar> = ||z_hat - z_bar||^2 / 2 the rate is n^{-1}, not n^{-1/2}. For i.i.d.
draws with E<z, z_bar> = mu and E<z, z_bar>^2 = s2 the perpendicular part of the mean is an average
of n centred vectors, so E||z_hat - z_bar||^2 ~ (1 - s2) / (n mu^2) and
n*(eps) ~ (1 - s2) / (mu^2 eps^2): finite whenever mu > 0 -- the cap (lambda) and the symmetry are
not needed for the rate (symmetry is needed for z_hat to converge to z_bar at all).

What is measured:

1. ||z_hat - z_bar|| vs n on log-log axes for caps of several lambda, and for the denoised set of
   ``puaudit_jax.audit.denoise`` (alpha1 = alpha2 = 0.7) applied to a cone-model P with label noise;
   fitted slopes and the predicted constant sqrt((1 - s2) / mu^2).
2. The p_ratio plateau (seed Table 6) on synthetic comparisons: N_H human-labelled comparisons of
   one question type, a judge that agrees with the human with probability 0.781 (Table 6's
   Cons_orig), a fraction p_ratio used as P (oriented by the human), the rest as the evaluation
   pool U (oriented by the judge); the paper's audit (denoise, partial OT with mass m = 0.781 and
   cosine cost, flip where the normalised score < 0.5) and Cons_adj on U, 10 seeds, next to the
   published Table 6 (``puaudit_jax/reference/puaudit_table6_p_ratio.csv``). The exact solver is
   used (its vertex scores make the flip rule "flip the least-aligned 1 - m of the pool").
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from puaudit_jax.audit.denoise import denoise
from puaudit_jax.ot import SolveOptions, solve_partial
from theory import sphere
from theory._io import new_figure, run_statement

NAME = "theorem_a3"
TABLE6 = Path(__file__).resolve().parents[1] / "puaudit_jax" / "reference" / "puaudit_table6_p_ratio.csv"


@dataclass(frozen=True)
class Config:
    d: int = 64
    caps: tuple = (0.05, 0.2, 0.5)  # lambda of Assumption A.2 (cap <z, z_bar> >= 1 - lambda)
    ns: tuple = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    reps: int = 200
    # denoised cone-model set
    tau: float = 0.6
    delta: float = 0.4
    label_noise: float = 0.1
    # p_ratio experiment (Table 6)
    n_h: int = 1000
    plateau_d: int = 384  # MiniLM's embedding dimension
    judge_agreement: float = 0.781
    signal_mean: float = 0.2  # E <z_h, z_bar> of human-oriented comparisons
    signal_std: float = 0.15
    p_ratios: tuple = (0.01, 0.02, 0.05, 0.10, 0.20, 0.40, 0.60, 0.80, 0.99)
    split_seeds: int = 10
    eta: float = 0.5
    seed: int = 0


QUICK = Config(ns=(4, 16, 64, 256, 1024, 4096), reps=60, n_h=600, split_seeds=4)


# --------------------------------------------------------------------------- part 1
def mean_direction(Z: np.ndarray) -> np.ndarray:
    s = Z.sum(axis=0)
    return s / np.linalg.norm(s)


def cap_sample(rng, n: int, cap: float, z_bar: np.ndarray) -> np.ndarray:
    """n points with <z, z_bar> uniform on [1 - cap, 1], orthogonal parts uniform (symmetric)."""
    return sphere.with_projection(rng, rng.uniform(1.0 - cap, 1.0, n), z_bar)


def cap_moments(cap: float) -> tuple[float, float]:
    """mu = E t, s2 = E t^2 for t uniform on [1 - cap, 1]."""
    lo = 1.0 - cap
    return (1.0 + lo) / 2.0, (1.0 + lo + lo**2) / 3.0


def slope(ns, errs) -> float:
    return float(np.polyfit(np.log(ns), np.log(errs), 1)[0])


def direction_error(rng, cfg: Config) -> dict:
    z_bar = sphere.random_direction(rng, cfg.d)
    out = {"caps": [], "denoised": None}
    for cap in cfg.caps:
        mu, s2 = cap_moments(cap)
        rms, cosgap = [], []
        for n in cfg.ns:
            e = np.array(
                [np.linalg.norm(mean_direction(cap_sample(rng, n, cap, z_bar)) - z_bar) for _ in range(cfg.reps)]
            )
            rms.append(float(np.sqrt(np.mean(e**2))))
            cosgap.append(float(np.mean(e**2 / 2)))
        const = float(np.sqrt((1 - s2) / mu**2))
        out["caps"].append(
            {
                "cap": cap,
                "rms_error": rms,
                "mean_one_minus_cos": cosgap,
                "slope_error": slope(cfg.ns, rms),
                "slope_one_minus_cos": slope(cfg.ns, cosgap),
                "predicted_constant": const,
                "measured_constant": float(np.mean(np.array(rms) * np.sqrt(cfg.ns))),
                "n_star_eps_0.1_formula": const**2 / 0.01,
            }
        )
    # denoised P' from the cone model with label noise: n_raw -> |P'| ~ 0.49 n_raw
    model = sphere.ConeModel(d=cfg.d, tau=cfg.tau, delta=cfg.delta)
    sizes, rms_d, raw_rms = [], [], []
    for n in cfg.ns:
        n_raw = max(4, int(np.ceil(n / 0.49)))
        e, e_raw, kept = [], [], []
        for _ in range(cfg.reps):
            P = sphere.sample_positives(rng, model, n_raw, z_bar)
            k = int(round(cfg.label_noise * n_raw))
            P[:k] = sphere.sample_negatives(rng, model, k, z_bar)
            dn = denoise(P, P)
            e.append(np.linalg.norm(mean_direction(P[dn.keep]) - z_bar))
            e_raw.append(np.linalg.norm(mean_direction(P) - z_bar))
            kept.append(dn.n_kept)
        sizes.append(float(np.mean(kept)))
        rms_d.append(float(np.sqrt(np.mean(np.square(e)))))
        raw_rms.append(float(np.sqrt(np.mean(np.square(e_raw)))))
    out["denoised"] = {
        "n_kept": sizes,
        "rms_error": rms_d,
        "slope_error": slope(sizes, rms_d),
        "raw_rms_error": raw_rms,
        "raw_n": [max(4, int(np.ceil(n / 0.49))) for n in cfg.ns],
    }
    return out


# --------------------------------------------------------------------------- part 2
def synthetic_comparisons(rng, cfg: Config, z_bar: np.ndarray):
    """Human-oriented z_h (projection ~ N(signal_mean, signal_std) clipped to [-1, 1]) and
    whether the judge agrees with the human (Bernoulli(judge_agreement))."""
    t = np.clip(rng.normal(cfg.signal_mean, cfg.signal_std, cfg.n_h), -0.999, 0.999)
    z_h = sphere.with_projection(rng, t, z_bar)
    agree = rng.random(cfg.n_h) < cfg.judge_agreement
    return z_h, agree


def audit_split(rng, cfg: Config, z_h, agree, z_bar, p_ratio: float) -> dict:
    n = z_h.shape[0]
    perm = rng.permutation(n)
    n_p = max(1, int(round(p_ratio * n)))
    p_idx, u_idx = perm[:n_p], perm[n_p:]
    P = z_h[p_idx]  # oriented by the human
    U = np.where(agree[u_idx, None], z_h[u_idx], -z_h[u_idx])  # oriented by the judge
    dn = denoise(P, P)
    Pp = P[dn.keep]
    m = min(cfg.judge_agreement, 1.0)
    res = solve_partial(None, None, m, options=SolveOptions(method="exact", return_plan=False), cost=1.0 - Pp @ U.T)
    score = res.col_mass / res.col_mass.max()
    flip = score < cfg.eta
    judge_right = agree[u_idx]
    adjusted_right = judge_right ^ flip
    # centroid scorer: the idealisation of Theorem A.3 (rank U by <z_j, z_hat>, flip the same count)
    z_hat = mean_direction(Pp)
    order = np.argsort(U @ z_hat, kind="stable")
    flip_c = np.zeros(len(u_idx), bool)
    flip_c[order[: int(flip.sum())]] = True
    return {
        "n_p": n_p,
        "n_p_kept": dn.n_kept,
        "n_u": len(u_idx),
        "cons_orig": float(judge_right.mean()),
        "cons_adj": float(adjusted_right.mean()),
        "cons_adj_centroid": float((judge_right ^ flip_c).mean()),
        "flip_rate": float(flip.mean()),
        "direction_error": float(np.linalg.norm(mean_direction(Pp) - z_bar)),
    }


def p_ratio_plateau(rng, cfg: Config) -> dict:
    z_bar = sphere.random_direction(rng, cfg.plateau_d)
    rows = []
    for p in cfg.p_ratios:
        runs = []
        for s in range(cfg.split_seeds):
            data_rng = np.random.default_rng([cfg.seed, 7, s])  # same data across p_ratio per seed
            z_h, agree = synthetic_comparisons(data_rng, cfg, z_bar)
            runs.append(audit_split(rng, cfg, z_h, agree, z_bar, p))
        agg = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
        agg.update(
            {
                f"{k}_std": float(np.std([r[k] for r in runs]))
                for k in ("cons_orig", "cons_adj", "cons_adj_centroid", "direction_error")
            }
        )
        rows.append({"p_ratio": p} | agg)
    with open(TABLE6) as fh:
        paper = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]
    return {"rows": rows, "paper_table6": paper}


def run(cfg: Config) -> dict:
    ss = np.random.SeedSequence(cfg.seed)
    s1, s2 = ss.spawn(2)
    return {
        "config": asdict(cfg),
        "seeds": {
            "numpy_master": cfg.seed,
            "direction": s1.spawn_key,
            "plateau": s2.spawn_key,
            "plateau_data": f"default_rng([{cfg.seed}, 7, split_seed])",
        },
        "direction": direction_error(np.random.default_rng(s1), cfg),
        "plateau": p_ratio_plateau(np.random.default_rng(s2), cfg),
    }


# --------------------------------------------------------------------------- figure
def plot(res: dict):
    cfg = res["config"]
    ns = np.array(cfg["ns"], float)
    fig, axes = new_figure(1, 3)
    ax = axes[0][0]
    for k, c in enumerate(res["direction"]["caps"]):
        ax.loglog(ns, c["rms_error"], "o-", c=f"C{k}", label=f"cap λ={c['cap']}: slope {c['slope_error']:.3f}")
        ax.loglog(ns, c["predicted_constant"] / np.sqrt(ns), "--", c=f"C{k}", lw=1)
    dn = res["direction"]["denoised"]
    ax.loglog(
        dn["n_kept"], dn["rms_error"], "s-", c="k", label=f"denoised P' (cone+noise): slope {dn['slope_error']:.3f}"
    )
    ax.set_xlabel("|D_P'|")
    ax.set_ylabel("RMS ||ẑ - z̄||")
    ax.set_title(f"mean-direction error (d={cfg['d']}); dashed √((1-E t²)/(n μ²))", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[0][1]
    for k, c in enumerate(res["direction"]["caps"]):
        ax.loglog(
            ns,
            c["mean_one_minus_cos"],
            "o-",
            c=f"C{k}",
            label=f"cap λ={c['cap']}: slope {c['slope_one_minus_cos']:.3f}",
        )
    ax.set_xlabel("|D_P'|")
    ax.set_ylabel("mean 1 - <ẑ, z̄>")
    ax.set_title("same error as a cosine gap: rate n^-1", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[0][2]
    rows = res["plateau"]["rows"]
    p = [r["p_ratio"] for r in rows]
    ax.errorbar(
        p,
        [r["cons_adj"] for r in rows],
        yerr=[r["cons_adj_std"] for r in rows],
        fmt="o-",
        c="C0",
        label="synthetic Cons_adj",
    )
    ax.plot(p, [r["cons_adj_centroid"] for r in rows], "d-", c="C2", ms=4, label="synthetic, centroid scorer <z, ẑ_P'>")
    ax.plot(p, [r["cons_orig"] for r in rows], "-", c="C0", alpha=0.4, label="synthetic Cons_orig")
    pap = res["plateau"]["paper_table6"]
    ax.plot([r["p_ratio"] for r in pap], [r["adj"] for r in pap], "s--", c="C3", label="paper Table 6 adj")
    ax.plot([r["p_ratio"] for r in pap], [r["orig"] for r in pap], "--", c="C3", alpha=0.4, label="paper Table 6 orig")
    ax.set_xscale("log")
    ax.set_xlabel("p_ratio")
    ax.set_ylabel("consistency with hidden human verdicts")
    ax2 = ax.twinx()
    ax2.semilogx(p, [r["direction_error"] for r in rows], "^:", c="gray", label="||ẑ_P' - z̄||")
    ax2.set_ylabel("direction error of P'", color="gray")
    ax.set_title(
        f"p_ratio plateau (d={cfg['plateau_d']}, N_H={cfg['n_h']}, {cfg['split_seeds']} seeds, m=0.781)", fontsize=9
    )
    ax.set_ylim(0.55, 1.02)
    ax.legend(fontsize=6, loc="lower center", ncol=2)
    ax2.legend(fontsize=6, loc="upper right")
    fig.tight_layout()
    return fig


def main(argv=None):
    args, stem, res = run_statement(NAME, __doc__.splitlines()[0], Config(), QUICK, run, plot, argv)
    for c in res["direction"]["caps"]:
        print(
            f"cap {c['cap']}: slope(error) {c['slope_error']:.3f}, slope(1-cos) "
            f"{c['slope_one_minus_cos']:.3f}, constant measured {c['measured_constant']:.3f} vs "
            f"predicted {c['predicted_constant']:.3f}, n*(0.1) ~ {c['n_star_eps_0.1_formula']:.1f}"
        )
    dn = res["direction"]["denoised"]
    print(f"denoised: slope {dn['slope_error']:.3f}; |P'| {dn['n_kept']}; rms {np.round(dn['rms_error'], 4)}")
    for r in res["plateau"]["rows"]:
        print(
            f"p_ratio {r['p_ratio']:.2f}: |P|={r['n_p']:.0f} |P'|={r['n_p_kept']:.0f} n_U={r['n_u']:.0f} "
            f"orig {r['cons_orig']:.3f} adj {r['cons_adj']:.3f} ({r['cons_adj_std']:.3f}) "
            f"centroid {r['cons_adj_centroid']:.3f} flip {r['flip_rate']:.3f} dir-err {r['direction_error']:.3f}"
        )
    print(f"wrote {args.out}/{stem}.json (+ .png) in {res['wall_s']:.1f}s")
    return res


if __name__ == "__main__":
    main()
