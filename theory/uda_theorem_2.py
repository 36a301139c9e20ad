"""Theorem 2 of the UDA appendix (UDA): consensus shrinkage never increases aggregate bias.

Statement. For one model m, judge k's bias is eps_k = R_m^(k) - R_m^* (Elo points). UDA is
idealised as the common shrinkage R_UDA^(k) = alpha R_base^(k) + (1 - alpha) mean_j R_base^(j), so
eps_UDA^(k) = alpha eps_k + (1 - alpha) eps_bar. Theorem 2: for every bias vector and every alpha
in [0, 1], S_UDA = sum_k |eps_UDA^(k)| <= S_base = sum_k |eps_k| (triangle inequality + Jensen).

Equality. For alpha = 1 always; for alpha in [0, 1), S_UDA = S_base iff all eps_k have the same
(weak) sign: then every term keeps its sign and sum_k eps_UDA^(k) = sum_k eps_k. The paper's
conclusion ("strictly reduce, unless all biases are already identical") is therefore wrong: any
common-sign bias (every judge over-rates model m, by different amounts) gives equality, i.e. the
consensus cannot remove a bias shared by all judges.

What is measured:

- S_UDA / S_base over random bias vectors (M, scales, signs) and alpha grids: the maximum
  (must be <= 1), and the equality set (same sign or alpha = 1) against the prediction;
- per-judge shrinkage alpha_k (the appendix: "the closer a judge is to the consensus, the larger
  the effective alpha"): the proof needs a common alpha; a counterexample with free alpha_k, and a
  random search for one that respects "closer judge -> larger alpha_k";
- the appendix's own matrices (``puaudit_jax.datasets.load_uda_scores``, transfer Table 6 with
  human Elo): per model, S_base vs S_UDA of the learned adapter (not an idealised shrinkage) and the
  least-squares effective alpha.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from theory._io import new_figure, run_statement

NAME = "uda_theorem_2"


@dataclass(frozen=True)
class Config:
    n_random: int = 20000
    max_judges: int = 12
    n_alpha: int = 21
    n_search: int = 200000
    seed: int = 0


QUICK = Config(n_random=4000, n_search=40000)


def shrink(eps: np.ndarray, alpha) -> np.ndarray:
    """eps_UDA = alpha eps + (1 - alpha) mean(eps); alpha a scalar or an (M,) vector."""
    eps = np.asarray(eps, np.float64)
    return alpha * eps + (1.0 - alpha) * eps.mean()


def total_bias(eps: np.ndarray) -> float:
    return float(np.abs(eps).sum())


def equality_predicted(eps: np.ndarray, alpha: float) -> bool:
    """S_UDA == S_base iff alpha == 1 or all biases share a weak sign."""
    return bool(alpha == 1.0 or np.all(eps >= 0) or np.all(eps <= 0))


def random_biases(rng, max_judges: int) -> np.ndarray:
    m = int(rng.integers(1, max_judges + 1))
    kind = rng.integers(4)
    scale = 10 ** rng.uniform(-2, 3)
    if kind == 0:
        return rng.normal(0, scale, m)  # mixed signs
    if kind == 1:
        return np.abs(rng.normal(0, scale, m))  # all over-rating
    if kind == 2:
        return np.full(m, rng.normal(0, scale))  # identical
    e = rng.normal(0, scale, m)  # sparse: one outlier
    e[rng.random(m) < 0.5] = 0.0
    return e


def property_check(rng, cfg: Config) -> dict:
    alphas = np.linspace(0, 1, cfg.n_alpha)
    max_ratio, n_checked, mismatches = 0.0, 0, 0
    ratios = []
    for _ in range(cfg.n_random):
        eps = random_biases(rng, cfg.max_judges)
        s = total_bias(eps)
        for a in alphas:
            su = total_bias(shrink(eps, a))
            n_checked += 1
            if s == 0:
                continue
            r = su / s
            max_ratio = max(max_ratio, r)
            ratios.append(r)
            eq = abs(su - s) <= 1e-9 * s
            mismatches += eq != equality_predicted(eps, a)
    return {
        "n_checked": n_checked,
        "max_ratio": max_ratio,
        "equality_mismatches": int(mismatches),
        "ratio_quantiles": np.quantile(ratios, [0, 0.05, 0.5, 0.95, 1]).tolist(),
    }


def per_judge_counterexample() -> dict:
    eps = np.array([0.0, 0.0, 3.0])
    alpha = np.array([0.0, 0.0, 1.0])
    return {"eps": eps, "alpha": alpha, "S_base": total_bias(eps), "S_uda": total_bias(shrink(eps, alpha))}


def monotone_search(rng, cfg: Config) -> dict:
    """Random search for S_UDA > S_base with alpha_k decreasing in |eps_k - eps_bar| (M >= 3,
    distinct distances)."""
    worst = {"ratio": 0.0}
    for _ in range(cfg.n_search):
        m = int(rng.integers(3, 8))
        eps = rng.normal(0, 1, m) * (rng.random(m) < 0.7) + rng.normal(0, 1) * (rng.random() < 0.5)
        dist = np.abs(eps - eps.mean())
        if np.min(np.diff(np.sort(dist))) < 1e-6:  # "closer" must be strict
            continue
        alpha = np.sort(rng.random(m))[::-1][np.argsort(np.argsort(dist))]  # closer -> larger
        s = total_bias(eps)
        if s == 0:
            continue
        r = total_bias(shrink(eps, alpha)) / s
        if r > worst["ratio"]:
            worst = {"ratio": float(r), "eps": eps, "alpha": alpha}
    return worst


def real_matrices() -> dict:
    """Per model: S_base, S_UDA vs human Elo (transfer Table 6) and the effective alpha."""
    from puaudit_jax.datasets import load_uda_scores

    df = load_uda_scores()
    t = df[df["dataset"] == "transfer_table6"]
    human = t[t["matrix"] == "human"].set_index("model")["score"]
    base = t[t["matrix"] == "baseline"].pivot(index="judge", columns="model", values="score")
    uda = t[t["matrix"] == "uda"].pivot(index="judge", columns="model", values="score")
    rows = []
    for model in human.index:
        eb = (base[model] - human[model]).to_numpy()
        eu = (uda[model].reindex(base.index) - human[model]).to_numpy()
        x = eb - eb.mean()
        y = eu - eb.mean()
        a_eff = float(x @ y / (x @ x))
        rows.append(
            {
                "model": model,
                "S_base": total_bias(eb),
                "S_uda": total_bias(eu),
                "S_uda_ideal_at_alpha_eff": total_bias(shrink(eb, np.clip(a_eff, 0, 1))),
                "alpha_eff": a_eff,
                "mean_bias_base": float(eb.mean()),
                "mean_bias_uda": float(eu.mean()),
                "same_sign_base": bool(np.all(eb >= 0) or np.all(eb <= 0)),
            }
        )
    return {"rows": rows, "n_models_increased": int(sum(r["S_uda"] > r["S_base"] for r in rows))}


def run(cfg: Config) -> dict:
    ss = np.random.SeedSequence(cfg.seed)
    s1, s2 = ss.spawn(2)
    alphas = np.linspace(0, 1, cfg.n_alpha)
    examples = {
        "mixed signs": np.array([-40.0, -10.0, 5.0, 20.0, 60.0]),
        "same sign": np.array([5.0, 10.0, 20.0, 40.0, 60.0]),
        "identical": np.full(5, 25.0),
        "one outlier": np.array([0.0, 0.0, 0.0, 0.0, 100.0]),
    }
    curves = {k: [total_bias(shrink(e, a)) / total_bias(e) for a in alphas] for k, e in examples.items()}
    return {
        "config": asdict(cfg),
        "seeds": {"numpy_master": cfg.seed, "property": s1.spawn_key, "search": s2.spawn_key},
        "alphas": alphas,
        "examples": examples,
        "curves": curves,
        "property": property_check(np.random.default_rng(s1), cfg),
        "per_judge_counterexample": per_judge_counterexample(),
        "monotone_search": monotone_search(np.random.default_rng(s2), cfg),
        "real": real_matrices(),
    }


def plot(res: dict):
    fig, axes = new_figure(1, 3)
    ax = axes[0][0]
    styles = ["o-", "s--", "^:", "x-."]
    for (k, c), st in zip(res["curves"].items(), styles):
        e = res["examples"][k]
        ax.plot(res["alphas"], c, st, ms=4, label=f"{k}: ε={np.round(e).astype(int).tolist()}")
    ax.set_xlabel("α (1 = no alignment)")
    ax.set_ylabel("S_UDA / S_base")
    ax.set_title("idealised shrinkage, M = 5 judges", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[0][1]
    p = res["property"]
    ce = res["per_judge_counterexample"]
    ms = res["monotone_search"]
    txt = [
        f"random checks: {p['n_checked']}",
        f"max S_UDA/S_base = {p['max_ratio']:.6f}",
        f"equality-set mismatches = {p['equality_mismatches']}",
        "",
        "per-judge α_k (proof needs common α):",
        f"  ε={ce['eps'].tolist()}, α={ce['alpha'].tolist()}",
        f"  S_base={ce['S_base']:.1f} -> S_UDA={ce['S_uda']:.1f}",
        "",
        "closer judge -> larger α_k, random search:",
        f"  worst S_UDA/S_base = {ms['ratio']:.3f}",
    ]
    ax.axis("off")
    ax.text(0, 1, "\n".join(txt), va="top", family="monospace", fontsize=8)
    ax = axes[0][2]
    rows = res["real"]["rows"]
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["S_base"] for r in rows], 0.4, label="S_base (baseline Elo)")
    ax.bar(x + 0.2, [r["S_uda"] for r in rows], 0.4, label="S_UDA (learned adapter)")
    ax.set_xticks(x, [r["model"] for r in rows], rotation=60, fontsize=7, ha="right")
    ax.set_ylabel("Σ_k |R^(k) - R_human| (Elo)")
    ax.set_title("appendix matrices, transfer Table 6 (10 judges)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def main(argv=None):
    args, stem, res = run_statement(NAME, __doc__.splitlines()[0], Config(), QUICK, run, plot, argv)
    print("property:", res["property"])
    print("per-judge counterexample:", res["per_judge_counterexample"])
    print("monotone search worst:", res["monotone_search"])
    for r in res["real"]["rows"]:
        print(
            f"{r['model']:18s} S_base {r['S_base']:8.1f}  S_UDA {r['S_uda']:8.1f}  "
            f"alpha_eff {r['alpha_eff']:+.3f}  mean bias {r['mean_bias_base']:+8.1f} -> "
            f"{r['mean_bias_uda']:+8.1f}  same-sign {r['same_sign_base']}"
        )
    print(f"wrote {args.out}/{stem}.json (+ .png) in {res['wall_s']:.1f}s")
    return res


if __name__ == "__main__":
    main()
