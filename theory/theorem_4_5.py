"""Theorem 4.5 of PUAudit (PUAudit, §4.2 and Appendix A.2): stability under a bias direction.

Statement (reconstructed). Assumption 4.4: a nuisance direction b = z_bias is orthogonal to the
consensus direction z_bar. The attack moves a target to z~ = (z + lambda b) / sqrt(1 + lambda^2).
For an anchor z_i = tau_i z_bar + eps_i z_i^perp of the denoised set D_P' and the target z = z_bar,

    <z_i, z~> = (tau_i + lambda eps_i <z_i^perp, b>) / sqrt(1 + lambda^2)
              = tau_i + lambda eps_i <z_i^perp, b> - tau_i lambda^2 / 2 + O(lambda^3),

so the cosine (and the cost 1 - cosine) moves by a first-order term lambda eps_i <z_i^perp, b>,
bounded by lambda eps_p once denoising makes every eps_i <= eps_p, plus O(lambda^2): "the
transport cost is invariant to the bias up to O(lambda eps_p) + O(lambda^2)". The paper writes
eps_i = sqrt(1 - tau_i) in A.2 but eps_z = sqrt(1 - tau_z^2) in A.1.

What is measured (all quantities dimensionless; lambda is the bias size relative to ||z|| = 1):

1. Pointwise, target z_bar: the exact change f_i(lambda) = <z_i, z~> - tau_i on a lambda grid,
   polynomial fits of its first and second-order coefficients against eps_i <z_i^perp, b> (with
   both definitions of eps_i) and -tau_i / 2, for random and adversarial b (b = z_i^perp).
2. General targets z (hidden positives of U, not z_bar): with the proper normalisation
   (z + lambda b) / ||z + lambda b|| the first-order coefficient is
   <z_i, b> - <z_i, z> <z, b> = eps_i <z_i^perp, b> - <z_i, z> eps_z <z^perp, b>; the second part
   depends on the target, not on the anchors, and is not reduced by denoising.
3. Transport cost: exact partial OT from P (or the denoised P', alpha1 = alpha2 = 0.7 as in the
   paper's Appendix A.4, via ``puaudit_jax.audit.denoise``) to the attacked pool U(lambda); its change
   Delta W(lambda), the first-order slope (envelope theorem: dW/dlambda = sum_ij Gamma_ij
   dC_ij/dlambda, split into an anchor part and a target part) and eps_p before and after
   denoising. P contains a fraction of label noise (negatives) as real human labels would.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from puaudit_jax.audit.denoise import denoise
from puaudit_jax.ot import SolveOptions, solve_partial
from theory import sphere
from theory._io import new_figure, run_statement

NAME = "theorem_4_5"


@dataclass(frozen=True)
class Config:
    d: int = 256
    tau: float = 0.6
    delta: float = 0.4
    alpha: float = 0.5
    anchor_taus: tuple = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
    lam_fit: float = 0.1  # pointwise fits on [-lam_fit, lam_fit]
    lam_max: float = 0.5  # transport-cost curves on [0, lam_max]
    n_lam: int = 21
    n_p: int = 200
    n_u: int = 400
    label_noise: float = 0.1  # fraction of P drawn from mu_- (noisy human labels)
    alpha1: float = 0.7
    alpha2: float = 0.7
    reps: int = 20  # draws for the transport-cost part
    seed: int = 0


QUICK = Config(reps=5, n_lam=11)


# --------------------------------------------------------------------------- part 1
def anchor_with(rng, tau_i: float, z_bar: np.ndarray) -> np.ndarray:
    return sphere.with_projection(rng, np.array([tau_i]), z_bar)[0]


def cosine_change(z_i: np.ndarray, z_bar: np.ndarray, b: np.ndarray, lams: np.ndarray) -> np.ndarray:
    """f(lambda) = <z_i, (z_bar + lambda b)/sqrt(1 + lambda^2)> - <z_i, z_bar> (exact)."""
    return np.array([z_i @ sphere.perturb(z_bar, b, lam) for lam in lams]) - z_i @ z_bar


def taylor_coefficients(lams: np.ndarray, f: np.ndarray, deg: int = 4) -> tuple[float, float]:
    """(c1, c2): the lambda and lambda^2 coefficients of a least-squares polynomial fit."""
    c = np.polynomial.polynomial.polyfit(lams, f, deg)
    return float(c[1]), float(c[2])


def pointwise(rng, cfg: Config) -> dict:
    z_bar = sphere.random_direction(rng, cfg.d)
    lams = np.linspace(-cfg.lam_fit, cfg.lam_fit, 41)
    rows = []
    for tau_i in cfg.anchor_taus:
        z_i = anchor_with(rng, tau_i, z_bar)
        t, e, perp = sphere.decompose(z_i[None], z_bar)
        for kind in ("random", "adversarial"):
            b = sphere.bias_direction(rng, z_bar) if kind == "random" else perp[0]
            c1, c2 = taylor_coefficients(lams, cosine_change(z_i, z_bar, b, lams))
            proj = float(perp[0] @ b)
            # residual of the paper's second-order expansion at lambda = lam_max
            lm = cfg.lam_max
            exact = cosine_change(z_i, z_bar, b, np.array([lm]))[0]
            second = lm * np.sqrt(1 - tau_i**2) * proj - tau_i * lm**2 / 2
            rows.append(
                {
                    "tau_i": tau_i,
                    "b": kind,
                    "perp_dot_b": proj,
                    "c1_fit": c1,
                    "c2_fit": c2,
                    "c1_eps_sqrt_1_minus_tau2": float(np.sqrt(1 - tau_i**2) * proj),
                    "c1_eps_sqrt_1_minus_tau": float(np.sqrt(1 - tau_i) * proj),
                    "c2_paper": -tau_i / 2,
                    "eps_measured": float(e[0]),
                    "residual_at_lam_max": float(exact - second),
                }
            )
    err = lambda k: float(max(abs(r["c1_fit"] - r[k]) for r in rows))
    return {
        "lam_fit": cfg.lam_fit,
        "rows": rows,
        "max_abs_err_c1_sqrt_1_minus_tau2": err("c1_eps_sqrt_1_minus_tau2"),
        "max_abs_err_c1_sqrt_1_minus_tau": err("c1_eps_sqrt_1_minus_tau"),
        "max_abs_err_c2": float(max(abs(r["c2_fit"] - r["c2_paper"]) for r in rows)),
        "max_abs_err_eps_def_sqrt_1_minus_tau2": float(
            max(abs(r["eps_measured"] - np.sqrt(1 - r["tau_i"] ** 2)) for r in rows)
        ),
    }


# --------------------------------------------------------------------------- parts 2 and 3
def draw(rng, cfg: Config):
    """z_bar, P (with label noise), U, u_pos, b (bias direction orthogonal to z_bar)."""
    model = sphere.ConeModel(d=cfg.d, tau=cfg.tau, delta=cfg.delta, alpha=cfg.alpha)
    s = sphere.sample_pu(rng, model, cfg.n_p, cfg.n_u)
    n_noise = int(round(cfg.label_noise * cfg.n_p))
    P = s.P.copy()
    P[:n_noise] = sphere.sample_negatives(rng, model, n_noise, s.z_bar)
    return s.z_bar, P, s.U, s.u_pos, sphere.bias_direction(rng, s.z_bar)


def exact_pot(P: np.ndarray, U: np.ndarray, m: float):
    """Exact partial OT with cost 1 - <p, u> (rows unit); returns (cost W, plan)."""
    res = solve_partial(None, None, m, options=SolveOptions(method="exact"), cost=1.0 - P @ U.T)
    return res.cost, res.plan


def envelope_slope(P, U, plan, b) -> dict:
    """dW/dlambda at lambda = 0 for U -> normalise(U + lambda b), split in two parts.

    dC_ij/dlambda = -(<z_i, b> - <z_i, z_j> <z_j, b>): anchor part -sum_i r_i <z_i, b>
    (r_i the row mass; bounded by m eps_p) and target part sum_ij Gamma_ij <z_i,z_j> <z_j,b>.
    """
    r = plan.sum(axis=1)
    anchor = -float(r @ (P @ b))
    target = float(np.sum(plan * (P @ U.T) * (U @ b)[None, :]))
    return {"anchor": anchor, "target": target, "total": anchor + target}


def target_first_order(rng, cfg: Config, P, U, u_pos, z_bar, b) -> dict:
    """Part 2: first-order coefficient of cos(z_i, z~_j) for anchor-target pairs (z_j in U_+)."""
    Z = U[u_pos][:50]
    G = P @ Z.T
    full = (P @ b)[:, None] - G * (Z @ b)[None, :]
    anchor_only = np.broadcast_to((P @ b)[:, None], full.shape)
    return {
        "mean_abs_full": float(np.abs(full).mean()),
        "mean_abs_anchor_term": float(np.abs(anchor_only).mean()),
        "mean_abs_target_term": float(np.abs(full - anchor_only).mean()),
    }


def eps_stats(P: np.ndarray, z_bar: np.ndarray) -> dict:
    _, eps, _ = sphere.decompose(P, z_bar)
    return {
        "eps_p_max": float(eps.max()),
        "eps_mean": float(eps.mean()),
        "eps_q90": float(np.quantile(eps, 0.9)),
        "eps": eps,
    }


def transport(rng, cfg: Config) -> dict:
    lams = np.linspace(0.0, cfg.lam_max, cfg.n_lam)
    out = {"lams": lams, "P": [], "P_denoised": [], "target_part2": []}
    for _ in range(cfg.reps):
        z_bar, P, U, u_pos, b = draw(rng, cfg)
        dn = denoise(P, P, alpha1=cfg.alpha1, alpha2=cfg.alpha2)  # stage 1 on z (no e_winner)
        for key, anchors in (("P", P), ("P_denoised", P[dn.keep])):
            W = []
            for lam in lams:
                cost, plan = exact_pot(anchors, sphere.perturb_normalised(U, b, lam), cfg.alpha)
                W.append(cost)
                if lam == 0.0:
                    slope = envelope_slope(anchors, U, plan, b)
            W = np.array(W) - W[0]
            small = lams <= 0.2 * cfg.lam_max + 1e-12  # (kept for reference in the JSON)
            c = np.polynomial.polynomial.polyfit(lams, W, min(3, len(lams) - 1))
            st = eps_stats(anchors, z_bar)
            # worst case over unit b orthogonal to z_bar of the anchor part: || sum_i r_i eps_i z_i^perp ||
            _, plan0 = exact_pot(anchors, U, cfg.alpha)
            r = plan0.sum(axis=1)
            perp_sum = r @ anchors - (r @ anchors @ z_bar) * z_bar
            out[key].append(
                {
                    "n": anchors.shape[0],
                    "dW": W,
                    "fit_c1": float(c[1]),
                    "fit_c2": float(c[2]),
                    "slope": slope,
                    "anchor_part_worst_b": float(np.linalg.norm(perp_sum)),
                    "m_times_eps_p": cfg.alpha * st["eps_p_max"],
                    "noise_kept": int(np.sum(dn.keep < int(round(cfg.label_noise * cfg.n_p))))
                    if key == "P_denoised"
                    else int(round(cfg.label_noise * cfg.n_p)),
                    "small_lam_points": int(small.sum()),
                    # per-anchor first-order coefficient of the cosine to a target at z_bar: <z_i, b>
                    "anchor_c1_mean_abs": float(np.abs(anchors @ b).mean()),
                    "anchor_c1_max_abs": float(np.abs(anchors @ b).max()),
                    **{k: v for k, v in st.items() if k != "eps"},
                }
            )
            out[key][-1]["eps_values"] = st["eps"]
        out["target_part2"].append(target_first_order(rng, cfg, P[dn.keep], U, u_pos, z_bar, b))
    summ = {}
    for key in ("P", "P_denoised"):
        rows = out[key]
        summ[key] = {
            k: float(np.mean([r[k] for r in rows]))
            for k in (
                "n",
                "eps_p_max",
                "eps_mean",
                "eps_q90",
                "fit_c1",
                "fit_c2",
                "anchor_part_worst_b",
                "m_times_eps_p",
                "noise_kept",
                "anchor_c1_mean_abs",
                "anchor_c1_max_abs",
            )
        }
        summ[key]["abs_slope_total"] = float(np.mean([abs(r["slope"]["total"]) for r in rows]))
        summ[key]["abs_slope_anchor"] = float(np.mean([abs(r["slope"]["anchor"]) for r in rows]))
        summ[key]["abs_slope_target"] = float(np.mean([abs(r["slope"]["target"]) for r in rows]))
        summ[key]["abs_fit_c1"] = float(np.mean([abs(r["fit_c1"]) for r in rows]))
        summ[key]["dW_at_lam_max"] = float(np.mean([r["dW"][-1] for r in rows]))
    summ["target_part2"] = {k: float(np.mean([r[k] for r in out["target_part2"]])) for k in out["target_part2"][0]}
    out["summary"] = summ
    return out


def run(cfg: Config) -> dict:
    ss = np.random.SeedSequence(cfg.seed)
    s1, s2 = ss.spawn(2)
    return {
        "config": asdict(cfg),
        "seeds": {"numpy_master": cfg.seed, "pointwise": s1.spawn_key, "transport": s2.spawn_key},
        "pointwise": pointwise(np.random.default_rng(s1), cfg),
        "transport": transport(np.random.default_rng(s2), cfg),
    }


# --------------------------------------------------------------------------- figure
def plot(res: dict):
    cfg = res["config"]
    fig, axes = new_figure(1, 4)
    rng = np.random.default_rng(123)  # display only: one anchor per tau, adversarial b
    z_bar = sphere.random_direction(rng, cfg["d"])
    lams = np.linspace(0, 1.0, 101)
    ax = axes[0][0]
    for k, tau_i in enumerate((0.5, 0.8, 0.95)):
        z_i = anchor_with(rng, tau_i, z_bar)
        _, _, perp = sphere.decompose(z_i[None], z_bar)
        f = cosine_change(z_i, z_bar, perp[0], lams)
        ax.plot(lams, f, "-", c=f"C{k}", label=f"exact, τ_i={tau_i}")
        ax.plot(
            lams,
            lams * np.sqrt(1 - tau_i**2) - tau_i * lams**2 / 2,
            "--",
            c=f"C{k}",
            lw=1,
            label="λ√(1-τ²) - τλ²/2" if k == 0 else None,
        )
        ax.plot(
            lams,
            lams * np.sqrt(1 - tau_i) - tau_i * lams**2 / 2,
            ":",
            c=f"C{k}",
            lw=1,
            label="λ√(1-τ) - τλ²/2" if k == 0 else None,
        )
    ax.set_xlabel("λ")
    ax.set_ylabel("<z_i, z~> - τ_i")
    ax.set_title("cosine change, target z̄, b = z_i⊥ (worst case)", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[0][1]
    rows = [r for r in res["pointwise"]["rows"] if r["b"] == "adversarial"]
    t = np.array([r["tau_i"] for r in rows])
    ax.plot(t, [r["c1_fit"] for r in rows], "o", label="fitted λ coefficient")
    tt = np.linspace(0.25, 1, 100)
    ax.plot(tt, np.sqrt(1 - tt**2), "k-", label="√(1-τ²) (A.1's ε)")
    ax.plot(tt, np.sqrt(1 - tt), "k:", label="√(1-τ) (A.2's ε)")
    ax.plot(t, [r["c2_fit"] for r in rows], "s", label="fitted λ² coefficient")
    ax.plot(tt, -tt / 2, "k--", lw=1, label="-τ/2")
    ax.set_xlabel("τ_i = <z_i, z̄>")
    ax.set_title("first / second-order coefficients (b = z_i⊥)", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[0][2]
    tr = res["transport"]
    lam = np.asarray(tr["lams"])
    for key, c in (("P", "C3"), ("P_denoised", "C0")):
        dW = np.array([r["dW"] for r in tr[key]])
        ax.plot(lam, dW.T, c=c, alpha=0.25, lw=0.8)
        sm = tr["summary"][key]
        ax.plot(
            lam,
            dW.mean(0),
            c=c,
            lw=2,
            label=f"{key}: |dW/dλ(0)|={sm['abs_slope_total']:.4f}, ε_p={sm['eps_p_max']:.2f}",
        )
    ax.set_xlabel("λ")
    ax.set_ylabel("W(λ) - W(0)")
    ax.set_title(f"exact POT cost, U attacked along b ⊥ z̄ (d={cfg['d']}, m=α)", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[0][3]
    bins = np.linspace(0, 1, 41)
    for key, c in (("P", "C3"), ("P_denoised", "C0")):
        eps = np.concatenate([r["eps_values"] for r in tr[key]])
        ax.hist(
            eps,
            bins=bins,
            alpha=0.5,
            color=c,
            density=True,
            label=f"{key}: ε_p (max) = {tr['summary'][key]['eps_p_max']:.2f}",
        )
    ax.set_xlabel("ε_i = √(1 - τ_i²)")
    ax.set_title(
        f"anchors' orthogonal size ({cfg['label_noise']:.0%} label noise in P; α1=α2={cfg['alpha1']})", fontsize=9
    )
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def main(argv=None):
    args, stem, res = run_statement(NAME, __doc__.splitlines()[0], Config(), QUICK, run, plot, argv)
    pw = res["pointwise"]
    for r in pw["rows"]:
        print(
            f"tau_i={r['tau_i']:.2f} b={r['b']:11s} c1 fit {r['c1_fit']:+.5f}  "
            f"eps=sqrt(1-tau^2): {r['c1_eps_sqrt_1_minus_tau2']:+.5f}  "
            f"eps=sqrt(1-tau): {r['c1_eps_sqrt_1_minus_tau']:+.5f}  c2 fit {r['c2_fit']:+.5f} "
            f"(-tau/2 {r['c2_paper']:+.3f})  residual@{res['config']['lam_max']} {r['residual_at_lam_max']:+.4f}"
        )
    print({k: v for k, v in pw.items() if k.startswith("max")})
    for key, sm in res["transport"]["summary"].items():
        print(key, {k: round(v, 5) for k, v in sm.items()})
    print(f"wrote {args.out}/{stem}.json (+ .png) in {res['wall_s']:.1f}s")
    return res


if __name__ == "__main__":
    main()
