"""Theorem 4.3 of PUAudit (PUAudit, §4.2 and Appendix A.1): support recovery by partial OT.

Statement (reconstructed). Under Assumption 4.1 (mu_+ supported on the cone
{<z, z_bar> >= tau}) and Assumption 4.2 (mu_- supported on {<z, z_bar> < tau - delta}, with
tau^2 > tau - delta), let P ~ mu_+ (n_P points, weights 1/n_P) and U ~ alpha mu_+ + (1-alpha) mu_-
(n_U points, weights 1/n_U), cost C_ij = 1 - <z_i, z_j>, and Gamma* a solution of the partial OT
problem with mass m. If m <= alpha then supp(Gamma*) is contained in P x U_+, and "the POT score
s_j = sum_i Gamma*_ij is non-zero iff z_j is a hidden positive". The proof bounds the pairwise
utility gap of an anchor z_i,

    Delta = min_{j in U_+} <z_i, z_j> - max_{k in U_-} <z_i, z_k> >= Delta_base - 2 t,
    Delta_base = tau^2 - tau + delta,   t = max_{x in U} |<z_i^perp, x^perp>|,

and with t = Delta_base / 4 and Lemma A.1:  P(Delta > 0) >= 1 - 2 N_U exp(-(d-1) Delta_base^2 / 32).

Everything here is dimensionless (cosines, masses as fractions of the unit total mass).

What is measured, over independent draws of the cone model (``theory.sphere``):

- exact POT (``solve_partial(..., method="exact")``, a network-simplex vertex): whether the
  plan's support lies in P x U_+ (mass on U_- below 1e-12), the mass precision (fraction of m
  received by U_+) and the support recall (fraction of U_+ receiving mass), vs d, n_P, n_U, m/alpha;
- the entropic solver: mass precision and the paper's score rule (normalised score >= 0.5 read as
  "positive") vs epsilon;
- the events the proof uses: Delta > 0 for one anchor, Delta > 0 for every anchor (what the
  support argument actually needs), and the proof's event t <= Delta_base / 4, next to the bound;
- the smallest d at which the bound reaches 0.95 (closed form) vs the smallest d at which the
  empirical probability of Delta > 0 for all anchors does, across Delta_base.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial
from theory import sphere
from theory._io import new_figure, run_statement

NAME = "theorem_4_3"
LEAK_TOL = 1e-12  # exact plans: mass below this on U_- counts as none (float64 round-off)


@dataclass(frozen=True)
class Config:
    tau: float = 0.6
    delta: float = 0.4
    alpha: float = 0.5
    n_p: int = 100
    n_u: int = 400
    reps: int = 40
    dims: tuple = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    d_sweep: int = 16  # dimension of the n_P / n_U / m sweeps
    d_eps: int = 64  # dimension of the epsilon sweep (recovery is exact there)
    n_ps: tuple = (2, 5, 10, 25, 50, 100, 200, 400)
    n_us: tuple = (50, 100, 200, 400, 800, 1600)
    m_ratios: tuple = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 1.9)
    epsilons: tuple = (0.003, 0.01, 0.03, 0.1, 0.3)
    gap_grid: tuple = ((0.6, 0.3), (0.6, 0.4), (0.7, 0.5), (0.8, 0.6), (0.8, 0.9), (0.9, 1.2))
    gap_reps: int = 40
    no_gap_model: tuple = (0.6, 0.1)  # tau^2 = 0.36 < tau - delta = 0.5
    negative_margin_model: tuple = (0.8, 0.9)  # tau - delta = -0.1 < 0
    seed: int = 0


QUICK = Config(
    reps=12,
    dims=(4, 8, 16, 64, 256, 1024, 4096),
    n_ps=(2, 10, 50, 200),
    n_us=(50, 200, 800),
    m_ratios=(0.5, 0.9, 1.0, 1.25, 1.9),
    epsilons=(0.01, 0.1, 0.3),
    gap_grid=((0.6, 0.4), (0.8, 0.6), (0.9, 1.2)),
    gap_reps=12,
)


# --------------------------------------------------------------------------- the bound
def paper_bound(d, n_u: int, gap_base: float):
    """The paper's lower bound 1 - 2 N_U exp(-(d-1) Delta_base^2 / 32) (may be negative)."""
    return 1.0 - 2.0 * n_u * np.exp(-(np.asarray(d, np.float64) - 1.0) * gap_base**2 / 32.0)


def bound_dimension(n_u: int, gap_base: float, level: float = 0.0) -> float:
    """Smallest d with paper_bound(d) >= level (level=0: below it the bound is vacuous)."""
    return 1.0 + 32.0 * np.log(2.0 * n_u / (1.0 - level)) / gap_base**2


def corrected_bound(d, n_p: int, n_u: int, tau: float, delta: float):
    """A bound that does follow from the argument: P(Delta_i > 0 for every anchor) >=
    1 - 2 n_P N_U exp(-(d-1) (tau delta)^2 / 32).

    Per anchor, <z_i, z_j> >= tau_i tau - t and <z_i, z_k> <= tau_i (tau - delta) + t, so
    Delta_i >= tau_i delta - 2t >= tau delta - 2t (no need for tau^2 > tau - delta); t = tau
    delta / 4 and a union bound over the n_P anchors (the paper's bound is for one anchor).
    """
    return 1.0 - 2.0 * n_p * n_u * np.exp(-(np.asarray(d, np.float64) - 1.0) * (tau * delta) ** 2 / 32.0)


def corrected_bound_dimension(n_p: int, n_u: int, tau: float, delta: float, level: float) -> float:
    return 1.0 + 32.0 * np.log(2.0 * n_p * n_u / (1.0 - level)) / (tau * delta) ** 2


def negative_bound_excess(s: sphere.PUSample, tau: float, delta: float) -> float:
    """max over anchors i, negatives k of <z_i, z_k> - (tau - delta) - |<z_i^perp, z_k^perp>|.

    The paper's (U_- remains) step claims this is <= 0. It uses tau_i tau_k <= tau - delta, which
    fails when tau - delta < 0 (then tau_i tau_k can reach tau (tau - delta) > tau - delta).
    """
    _, _, p_perp = sphere.decompose(s.P, s.z_bar)
    _, _, u_perp = sphere.decompose(s.U[~s.u_pos], s.z_bar)
    excess = s.P @ s.U[~s.u_pos].T - (tau - delta) - np.abs(p_perp @ u_perp.T)
    return float(excess.max())


# --------------------------------------------------------------------------- gap events
def anchor_gaps(s: sphere.PUSample) -> np.ndarray:
    """(n_P,) Delta_i = min_{j in U_+} <z_i, z_j> - max_{k in U_-} <z_i, z_k>."""
    G = s.P @ s.U.T
    return G[:, s.u_pos].min(axis=1) - G[:, ~s.u_pos].max(axis=1)


def proof_event(s: sphere.PUSample, gap_base: float) -> bool:
    """The proof's event for anchor 0: max_{x in U} |<z_0^perp, x^perp>| <= Delta_base / 4."""
    _, _, p_perp = sphere.decompose(s.P[:1], s.z_bar)
    _, _, u_perp = sphere.decompose(s.U, s.z_bar)
    return bool(np.abs(u_perp @ p_perp[0]).max() <= gap_base / 4.0)


# --------------------------------------------------------------------------- recovery
def recovery_metrics(col_mass: np.ndarray, u_pos: np.ndarray, *, eta: float = 0.5) -> dict:
    """Precision / recall of the mass received by U (col_mass = s_j)."""
    total = col_mass.sum()
    n_u = u_pos.shape[0]
    support = col_mass > LEAK_TOL
    leak = float(col_mass[~u_pos].sum())
    score = col_mass / col_mass.max()
    flagged = score >= eta
    tp = np.sum(flagged & u_pos)
    return {
        "support_in_positives": bool(leak <= LEAK_TOL),
        "mass_on_negatives": leak,
        "mass_precision": float(col_mass[u_pos].sum() / total),
        "support_precision": float(np.sum(support & u_pos) / max(1, support.sum())),
        "support_recall": float(np.sum(support & u_pos) / max(1, u_pos.sum())),
        "score_precision": float(tp / max(1, flagged.sum())),
        "score_recall": float(tp / max(1, u_pos.sum())),
        "n_support": int(support.sum()),
        "n_u": n_u,
    }


def solve(s: sphere.PUSample, m: float, *, method: str = "exact", epsilon: float = 0.01):
    """Partial OT from P to U with the cosine cost, uniform weights, mass m.

    The cost matrix 1 - P U^T is passed precomputed (the same matrix ``cost="cosine"`` builds
    for unit rows), so the exact path does not compile a JAX geometry per shape. The entropic
    path uses epsilon scaling (decay 0.9) to converge at small epsilon.
    """
    C = 1.0 - s.P @ s.U.T
    return solve_partial(
        None,
        None,
        m,
        solver=PartialSinkhorn(epsilon=epsilon, max_iter=20000, eps_decay=0.9 if method == "sinkhorn" else None),
        options=SolveOptions(method=method, dtype="float64", return_plan=False),
        cost=C,
    )


def trial(
    rng,
    model: sphere.ConeModel,
    n_p: int,
    n_u: int,
    m_ratio: float = 1.0,
    *,
    exact_alpha: bool = True,
    method: str = "exact",
    epsilon: float = 0.01,
) -> dict:
    """One draw: the POT recovery metrics and the gap events. m = m_ratio * alpha."""
    s = sphere.sample_pu(rng, model, n_p, n_u, exact_alpha=exact_alpha)
    m = min(m_ratio * model.alpha, 1.0)
    res = solve(s, m, method=method, epsilon=epsilon)
    out = recovery_metrics(res.col_mass, s.u_pos)
    gaps = anchor_gaps(s)
    out.update(
        gap_anchor0=bool(gaps[0] > 0),
        gap_all=bool(np.all(gaps > 0)),
        min_gap=float(gaps.min()),
        proof_event=proof_event(s, model.gap_base),
        alpha_hat=s.alpha_hat,
        m=m,
        converged=bool(res.converged),
        iterations=int(res.iterations),
    )
    return out


def summarise(trials: list[dict]) -> dict:
    keys = [
        "support_in_positives",
        "mass_precision",
        "support_precision",
        "support_recall",
        "score_precision",
        "score_recall",
        "gap_anchor0",
        "gap_all",
        "proof_event",
        "converged",
        "mass_on_negatives",
    ]
    return {k: float(np.mean([t[k] for t in trials])) for k in keys} | {"reps": len(trials)}


def sweep(
    rng, cfg: Config, *, d, n_p, n_u, m_ratio=1.0, proj="uniform", exact_alpha=True, method="exact", epsilon=0.01
) -> dict:
    model = sphere.ConeModel(d=d, tau=cfg.tau, delta=cfg.delta, alpha=cfg.alpha, proj=proj)
    trials = [
        trial(rng, model, n_p, n_u, m_ratio, exact_alpha=exact_alpha, method=method, epsilon=epsilon)
        for _ in range(cfg.reps)
    ]
    return {
        "d": d,
        "n_p": n_p,
        "n_u": n_u,
        "m_ratio": m_ratio,
        "m": min(m_ratio * cfg.alpha, 1.0),
        "proj": proj,
        "exact_alpha": exact_alpha,
        "method": method,
        "epsilon": epsilon,
        "bound": float(paper_bound(d, n_u, model.gap_base)),
    } | summarise(trials)


def empirical_dimensions(
    rng, tau, delta, cfg: Config, *, proj: str, level: float = 0.95, require_gap: bool = True
) -> dict:
    """Smallest d in powers of 2 (<= 2^15) at which, over cfg.gap_reps draws,
    P(Delta_i > 0 for all anchors) >= level ("gap") and P(exact POT supp in P x U_+) >= level
    ("pot"); m = alpha, exact_alpha labels."""
    found = {"gap": float("nan"), "pot": float("nan")}
    for k in range(2, 16):
        d = 2**k
        model = sphere.ConeModel(d=d, tau=tau, delta=delta, alpha=cfg.alpha, proj=proj, require_gap=require_gap)
        gap, pot = [], []
        for _ in range(cfg.gap_reps):
            s = sphere.sample_pu(rng, model, cfg.n_p, cfg.n_u)
            gap.append(np.all(anchor_gaps(s) > 0))
            if np.isnan(found["pot"]):
                leak = solve(s, model.alpha).col_mass[~s.u_pos].sum()
                pot.append(leak <= LEAK_TOL)
        if np.isnan(found["pot"]) and np.mean(pot) >= level:
            found["pot"] = d
        if np.mean(gap) >= level:
            found["gap"] = d
            break
    return found


def run(cfg: Config) -> dict:
    ss = np.random.SeedSequence(cfg.seed)
    names = ["dims", "n_p", "n_u", "m", "bernoulli", "eps", "gapdim", "nogap", "negbound"]
    streams = dict(zip(names, ss.spawn(len(names))))
    rng = {k: np.random.default_rng(v) for k, v in streams.items()}
    gap_base = cfg.tau**2 - cfg.tau + cfg.delta
    out = {
        "config": asdict(cfg),
        "gap_base": gap_base,
        "seeds": {"numpy_master": cfg.seed, "streams": {k: v.spawn_key for k, v in streams.items()}},
    }

    out["vs_d"] = [
        sweep(rng["dims"], cfg, d=d, n_p=cfg.n_p, n_u=cfg.n_u, proj=proj)
        for proj in ("uniform", "boundary")
        for d in cfg.dims
    ]
    out["vs_n_p"] = [sweep(rng["n_p"], cfg, d=cfg.d_sweep, n_p=n, n_u=cfg.n_u) for n in cfg.n_ps]
    out["vs_n_u"] = [sweep(rng["n_u"], cfg, d=cfg.d_sweep, n_p=cfg.n_p, n_u=n) for n in cfg.n_us]
    out["vs_m"] = [sweep(rng["m"], cfg, d=cfg.d_eps, n_p=cfg.n_p, n_u=cfg.n_u, m_ratio=r) for r in cfg.m_ratios]
    # m = alpha with i.i.d. Bernoulli(alpha) labels: the constraint that matters is m <= alpha_hat
    out["m_eq_alpha_bernoulli"] = sweep(rng["bernoulli"], cfg, d=cfg.d_eps, n_p=cfg.n_p, n_u=cfg.n_u, exact_alpha=False)
    out["vs_epsilon"] = [
        sweep(rng["eps"], cfg, d=cfg.d_eps, n_p=cfg.n_p, n_u=cfg.n_u, method="sinkhorn", epsilon=e)
        for e in cfg.epsilons
    ]
    out["gap_dimension"] = []
    for tau, delta in cfg.gap_grid:
        gb = tau**2 - tau + delta
        row = {
            "tau": tau,
            "delta": delta,
            "gap_base": gb,
            "bound_d_vacuous_below": bound_dimension(cfg.n_u, gb, 0.0),
            "bound_d_095": bound_dimension(cfg.n_u, gb, 0.95),
        }
        row["corrected_bound_d_095"] = corrected_bound_dimension(cfg.n_p, cfg.n_u, tau, delta, 0.95)
        for proj in ("uniform", "boundary"):
            found = empirical_dimensions(rng["gapdim"], tau, delta, cfg, proj=proj)
            row[f"empirical_d_095_{proj}"] = found["gap"]
            row[f"empirical_pot_d_095_{proj}"] = found["pot"]
        out["gap_dimension"].append(row)

    # Assumption 4.2's tau^2 > tau - delta is not needed: a model that violates it
    tau, delta = cfg.no_gap_model
    out["no_gap_model"] = {
        "tau": tau,
        "delta": delta,
        "gap_base": tau**2 - tau + delta,
        "tau_delta": tau * delta,
        "rows": [],
    }
    for d in cfg.dims:
        model = sphere.ConeModel(d=d, tau=tau, delta=delta, alpha=cfg.alpha, proj="boundary", require_gap=False)
        tr = [trial(rng["nogap"], model, cfg.n_p, cfg.n_u) for _ in range(cfg.reps)]
        out["no_gap_model"]["rows"].append({"d": d} | summarise(tr))

    # the (U_- remains) inequality fails when tau - delta < 0
    tau, delta = cfg.negative_margin_model
    model = sphere.ConeModel(d=max(cfg.dims), tau=tau, delta=delta, alpha=cfg.alpha, proj="boundary")
    exc = [
        negative_bound_excess(sphere.sample_pu(rng["negbound"], model, cfg.n_p, cfg.n_u), tau, delta) for _ in range(3)
    ]
    out["negative_bound_check"] = {
        "tau": tau,
        "delta": delta,
        "d": model.d,
        "max_excess": float(max(exc)),
        "predicted_excess_t0": (tau - delta) * (tau - 1.0),
    }
    return out


# --------------------------------------------------------------------------- figure
def plot(res: dict):
    cfg = res["config"]
    fig, axes = new_figure(2, 4)
    ax = axes[0][0]
    for proj, ls in (("uniform", "-"), ("boundary", "--")):
        rows = [r for r in res["vs_d"] if r["proj"] == proj]
        d = [r["d"] for r in rows]
        ax.semilogx(d, [r["support_in_positives"] for r in rows], "o" + ls, c="C0", label=f"POT supp ⊆ P×U+ ({proj})")
        ax.semilogx(d, [r["gap_all"] for r in rows], "s" + ls, c="C1", label=f"Δ>0 all anchors ({proj})")
        ax.semilogx(
            d, [r["proof_event"] for r in rows], "^" + ls, c="C2", ms=4, label=f"t ≤ Δ_base/4, anchor 0 ({proj})"
        )
    dd = np.geomspace(min(cfg["dims"]), 40000, 300)
    ax.semilogx(
        dd,
        np.clip(paper_bound(dd, cfg["n_u"], res["gap_base"]), 0, 1),
        "k-",
        lw=1.5,
        label="paper bound (clipped at 0)",
    )
    ax.semilogx(
        dd,
        np.clip(corrected_bound(dd, cfg["n_p"], cfg["n_u"], cfg["tau"], cfg["delta"]), 0, 1),
        "k:",
        lw=1.5,
        label="corrected bound, all anchors",
    )
    ax.set_xlabel("d")
    ax.set_ylabel("probability over draws")
    ax.set_title(
        f"vs d (τ={cfg['tau']}, δ={cfg['delta']}, Δ_base={res['gap_base']:.2f},\n"
        f"n_P={cfg['n_p']}, n_U={cfg['n_u']}, m=α={cfg['alpha']})",
        fontsize=9,
    )
    ax.legend(fontsize=6)

    for ax, key, xl in ((axes[0][1], "vs_n_p", "n_p"), (axes[0][2], "vs_n_u", "n_u")):
        rows = res[key]
        x = [r[xl] for r in rows]
        ax.semilogx(x, [r["support_in_positives"] for r in rows], "o-", label="POT supp ⊆ P×U+")
        ax.semilogx(x, [r["mass_precision"] for r in rows], "d-", label="mass precision")
        ax.semilogx(x, [r["gap_anchor0"] for r in rows], "s--", label="Δ>0 anchor 0")
        ax.semilogx(x, [r["gap_all"] for r in rows], "s-", label="Δ>0 all anchors")
        ax.semilogx(x, [max(0, r["bound"]) for r in rows], "k-", label="paper bound (≤0 → 0)")
        ax.set_xlabel(xl)
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"vs {xl} (d={cfg['d_sweep']}, uniform projections)", fontsize=9)
        ax.legend(fontsize=6)

    ax = axes[0][3]
    ng = res["no_gap_model"]
    rows = ng["rows"]
    d = [r["d"] for r in rows]
    ax.semilogx(d, [r["support_in_positives"] for r in rows], "o-", label="POT supp ⊆ P×U+")
    ax.semilogx(d, [r["gap_all"] for r in rows], "s-", label="Δ>0 all anchors")
    ax.semilogx(d, [r["mass_precision"] for r in rows], "d-", label="mass precision")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("d")
    ax.set_title(
        f"outside Assumption 4.2: τ={ng['tau']}, δ={ng['delta']}\n"
        f"(Δ_base={ng['gap_base']:.2f} < 0, τδ={ng['tau_delta']:.2f}; boundary)",
        fontsize=9,
    )
    ax.legend(fontsize=6)

    ax = axes[1][0]
    rows = res["vs_m"]
    r_ = np.array([r["m_ratio"] for r in rows])
    ax.plot(r_, [r["mass_precision"] for r in rows], "o-", label="mass precision")
    ax.plot(r_, [r["support_recall"] for r in rows], "s-", label="support recall")
    rr = np.linspace(r_.min(), r_.max(), 100)
    ax.plot(rr, np.minimum(1, 1 / rr), "k--", lw=1, label="min(1, α/m)")
    ax.plot(rr, np.minimum(1, rr), "k:", lw=1, label="min(1, m/α)")
    b = res["m_eq_alpha_bernoulli"]
    ax.plot([1.0], [b["support_in_positives"]], "r*", ms=10, label="P(supp ⊆ U+), m=α, Bernoulli labels")
    ax.set_xlabel("m / α")
    ax.set_title(f"exact POT vs m/α (d={cfg['d_eps']}, uniform)", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[1][1]
    rows = res["vs_epsilon"]
    e = [r["epsilon"] for r in rows]
    ax.loglog(e, [max(r["mass_on_negatives"] / r["m"], 1e-17) for r in rows], "o-", c="C3", label="mass on U- / m")
    ax.set_xlabel("ε (Sinkhorn, cost units)")
    ax.set_ylabel("fraction of m leaked to negatives")
    ax2 = ax.twinx()
    ax2.semilogx(e, [r["score_precision"] for r in rows], "s--", c="C0", label="score-rule precision")
    ax2.semilogx(e, [r["score_recall"] for r in rows], "^--", c="C2", label="score-rule recall")
    ax2.set_ylim(0, 1.05)
    ax.set_title(f"entropic POT vs ε (d={cfg['d_eps']}, m=α, η=0.5)", fontsize=9)
    ax.legend(fontsize=6, loc="upper left")
    ax2.legend(fontsize=6, loc="lower right")

    ax = axes[1][2]
    rows = res["gap_dimension"]
    g = np.array([r["gap_base"] for r in rows])
    o = np.argsort(g)
    col = lambda k: np.array([r[k] for r in rows], dtype=float)[o]
    ax.loglog(g[o], col("bound_d_095"), "k-o", label="paper bound ≥ 0.95")
    ax.loglog(g[o], col("corrected_bound_d_095"), "k:o", mfc="none", label="corrected bound ≥ 0.95")
    for proj, mk, c in (("uniform", "s", "C1"), ("boundary", "^", "C2")):
        ax.loglog(g[o], col(f"empirical_d_095_{proj}"), mk + "--", c=c, label=f"P(Δ>0 all) ≥ 0.95 ({proj})")
        ax.loglog(
            g[o],
            col(f"empirical_pot_d_095_{proj}"),
            mk + "-",
            c=c,
            mfc="none",
            label=f"P(POT supp ⊆ U+) ≥ 0.95 ({proj})",
        )
    ax.set_xlabel("Δ_base = τ² - τ + δ")
    ax.set_ylabel("smallest d")
    ax.set_title(f"dimension needed (n_P={cfg['n_p']}, n_U={cfg['n_u']})", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[1][3]
    ax.axis("off")
    nb = res["negative_bound_check"]
    lines = [
        f"Δ_base = {res['gap_base']:.3f}",
        f"paper bound vacuous below d = {bound_dimension(cfg['n_u'], res['gap_base']):.0f}",
        f"paper bound ≥ 0.95 from d = {bound_dimension(cfg['n_u'], res['gap_base'], 0.95):.0f}",
        f"m = α with Bernoulli labels: P(supp ⊆ U+) = {res['m_eq_alpha_bernoulli']['support_in_positives']:.2f}",
        f"(U- remains) step, τ={nb['tau']}, δ={nb['delta']}, d={nb['d']}:",
        f"  max <z_i,z_k> - (τ-δ) - |<z_i⊥,z_k⊥>| = {nb['max_excess']:+.3f}",
        f"  (paper: ≤ 0; predicted (τ-δ)(τ-1) = {nb['predicted_excess_t0']:+.3f})",
    ]
    ax.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=7)
    fig.tight_layout()
    return fig


def main(argv=None):
    args, stem, res = run_statement(NAME, __doc__.splitlines()[0], Config(), QUICK, run, plot, argv)
    print(
        f"Delta_base = {res['gap_base']:.3f}; bound vacuous below d = "
        f"{bound_dimension(res['config']['n_u'], res['gap_base']):.0f}, >= 0.95 from d = "
        f"{bound_dimension(res['config']['n_u'], res['gap_base'], 0.95):.0f}"
    )
    for r in res["vs_d"]:
        print(
            f"[{r['proj']:8s}] d={r['d']:5d}  supp⊆U+ {r['support_in_positives']:.2f}  "
            f"prec {r['mass_precision']:.3f}  rec {r['support_recall']:.3f}  "
            f"Δ>0(a0) {r['gap_anchor0']:.2f}  Δ>0(all) {r['gap_all']:.2f}  "
            f"proof-event {r['proof_event']:.2f}  bound {r['bound']:.3g}"
        )
    for key, x in (("vs_n_p", "n_p"), ("vs_n_u", "n_u"), ("vs_m", "m_ratio"), ("vs_epsilon", "epsilon")):
        for r in res[key]:
            print(
                f"{key}: {x}={r[x]:<6}  supp⊆U+ {r['support_in_positives']:.2f}  "
                f"mass prec {r['mass_precision']:.4f}  supp rec {r['support_recall']:.3f}  "
                f"score P/R {r['score_precision']:.3f}/{r['score_recall']:.3f}  "
                f"Δ>0(a0) {r['gap_anchor0']:.2f}  Δ>0(all) {r['gap_all']:.2f}  "
                f"conv {r['converged']:.2f}  bound {r['bound']:.3g}"
            )
    b = res["m_eq_alpha_bernoulli"]
    print(
        f"m = alpha, Bernoulli labels: P(supp⊆U+) {b['support_in_positives']:.2f}, mass prec {b['mass_precision']:.4f}"
    )
    for r in res["gap_dimension"]:
        print(
            f"tau={r['tau']} delta={r['delta']} Delta_base={r['gap_base']:.3f}: paper bound d95 "
            f"{r['bound_d_095']:.0f} (vacuous below {r['bound_d_vacuous_below']:.0f}), corrected "
            f"{r['corrected_bound_d_095']:.0f}; empirical d95 Delta>0(all) uniform "
            f"{r['empirical_d_095_uniform']}, boundary {r['empirical_d_095_boundary']}; POT "
            f"uniform {r['empirical_pot_d_095_uniform']}, boundary {r['empirical_pot_d_095_boundary']}"
        )
    for r in res["no_gap_model"]["rows"]:
        print(
            f"no-gap model tau,delta={res['no_gap_model']['tau']},{res['no_gap_model']['delta']} "
            f"d={r['d']:5d}: supp⊆U+ {r['support_in_positives']:.2f} Δ>0(all) {r['gap_all']:.2f} "
            f"mass prec {r['mass_precision']:.4f}"
        )
    print("negative-bound check:", res["negative_bound_check"])
    print(f"wrote {args.out}/{stem}.json (+ .png) in {res['wall_s']:.1f}s")
    return res


if __name__ == "__main__":
    main()
