"""Figures of one audit (matplotlib, Agg backend; files written atomically).

- :func:`figure2` -- seed Figure 2, diagnostics of one audit: (a) score density by ground truth
  (judge consistent with the hidden human label or not), (b) by final group (kept / flipped),
  (c) sorted normalised scores with the decision threshold eta and the 1 - m budget, coloured by
  truth, (d) 2-D PCA projection of the pool's difference embeddings coloured by score; a box with
  Cons_orig, Cons_adj and the number flipped. Ground truth is only known in the protocol (hidden
  labels); without it panels (a) and (c) show the scores alone.
- :func:`calibration_figure` -- a calibrated rule's decision: (a) reliability of the out-of-fold
  P(judge wrong) on the labelled items (binned predicted vs observed error rate, with the hidden
  pool's observed rate when known), (b) the pool's P(judge wrong) sorted, with its bootstrap
  interval and the flip threshold, coloured by hidden truth when known.
- :func:`guarantee_figure` -- ``--guarantee``'s risk-coverage curves: per candidate, the agreement
  guaranteed (one-sided Clopper-Pearson bound of its calibration rows above each threshold, at the level
  the threshold was tested at) against the share of the pool certified; the kept candidate's observed
  agreement, the target A, the judge's raw agreement, and the certified point.
- :func:`audit_figures` -- all of them that apply into an output folder.

The paper's panel (c) sorts a "diagnostic score" 0.6 (1 - r) + 0.4 (1 - d) whose terms it does not
define; we sort the normalised transport score s̄ itself.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from puaudit_runtime.files import save_figure  # noqa: E402

from .guarantee import probability  # noqa: E402

#: Colours shared by the audit and evaluation figures: judge right / wrong, item kept / flipped.
C_OK, C_BAD, C_KEEP, C_FLIP = "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"


def _density(ax, values, color, label):
    values = np.asarray(values, float)
    if len(values) == 0:
        return
    bins = np.linspace(0, 1, 26)
    ax.hist(values, bins=bins, density=True, alpha=0.35, color=color, label=f"{label} (n={len(values)})")
    if len(values) > 2 and np.std(values) > 1e-6:
        grid = np.linspace(0, 1, 200)
        ax.plot(grid, kde(values, grid), color=color, lw=1.5)


def kde(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Gaussian kernel density of (n,) ``values`` at (g,) ``grid``, Scott's bandwidth.

    ``scipy.stats.gaussian_kde(values)(grid)`` in one dimension, without scipy.stats' 0.6 s import
    (a warm audit's start-up); the tests compare the two.
    """
    h = np.std(values, ddof=1) * len(values) ** -0.2
    z = (grid[:, None] - values[None, :]) / h
    return np.exp(-0.5 * z**2).mean(1) / (h * np.sqrt(2 * np.pi))


def _truth_of(pool: pd.DataFrame, truth: pd.Series | None):
    """(known (k,) bool, judge == truth (k,) bool, truth (k,)) of the pool rows, or None without truth."""
    if truth is None or not pool["id"].isin(truth.index).any():
        return None
    known = pool["id"].isin(truth.index).to_numpy()
    t = truth.reindex(pool["id"]).to_numpy()
    return known, pool["judge"].to_numpy() == t, t


def _panel_by_truth(ax, score, seen, eta):
    if seen is not None:
        known, y, _ = seen
        _density(ax, score[known & y], C_OK, "judge = human (y=1)")
        _density(ax, score[known & ~y], C_BAD, "judge != human (y=0)")
    else:
        _density(ax, score, "gray", "all (no ground truth)")
    ax.axvline(eta, color="k", ls="--", lw=1, label=f"eta = {eta:g}")
    ax.set(title="(a) normalised score by ground truth", xlabel="normalised score s̄", ylabel="density")
    ax.legend(fontsize=8)


def _panel_by_group(ax, score, flipped, eta):
    _density(ax, score[~flipped], C_KEEP, "kept")
    _density(ax, score[flipped], C_FLIP, "flipped")
    ax.axvline(eta, color="k", ls="--", lw=1)
    ax.set(title="(b) normalised score by final group", xlabel="normalised score s̄", ylabel="density")
    ax.legend(fontsize=8)


def _panel_sorted(ax, score, flipped, seen, eta, m):
    order = np.argsort(score, kind="stable")
    if seen is not None:
        known, y, _ = seen
        colors = np.where(~known[order], "gray", np.where(y[order], C_OK, C_BAD))
    else:
        colors = np.where(flipped[order], C_FLIP, C_KEEP)
    ax.scatter(np.arange(len(order)), score[order], c=list(colors), s=8)
    ax.axhline(eta, color="k", ls="--", lw=1, label=f"rule threshold eta = {eta:g}")
    ax.axvline(flipped.sum() - 0.5, color=C_FLIP, lw=1, label=f"final groups: {int(flipped.sum())} flipped")
    ax.axvline((1 - m) * len(score) - 0.5, color="gray", ls=":", lw=1, label=f"budget 1 - m = {1 - m:.2f}")
    if seen is not None:
        n_bad = int((known & ~y).sum())
        ax.axvline(n_bad - 0.5, color=C_BAD, ls="-.", lw=1, label=f"ground truth: {n_bad} judge errors")
    ax.set(title="(c) sorted scores with thresholds", xlabel="pool items, sorted by score", ylabel="s̄")
    ax.legend(fontsize=8, loc="lower right")


def _panel_pca(fig, ax, z, score, flipped):
    if len(z) >= 2:
        zc = z - z.mean(0)
        _, _, vt = np.linalg.svd(zc, full_matrices=False)
        xy = zc @ vt[:2].T if vt.shape[0] >= 2 else np.c_[zc @ vt[0], np.zeros(len(zc))]
        sc = ax.scatter(xy[:, 0], xy[:, 1], c=score, cmap="viridis", s=10, vmin=0, vmax=1)
        ax.scatter(xy[flipped, 0], xy[flipped, 1], facecolors="none", edgecolors=C_FLIP, s=22, lw=0.6, label="flipped")
        fig.colorbar(sc, ax=ax, label="normalised score s̄")
        ax.legend(fontsize=8)
    ax.set(title="(d) PCA of pool difference embeddings z", xlabel="PC 1", ylabel="PC 2")


def figure2(result, truth: pd.Series | None = None, path: str | Path | None = None, *, title: str = ""):
    """Seed Figure 2 for an :class:`~puaudit_jax.audit.AuditResult`; returns the figure (saved if ``path``).

    Args:
        result: the audit's result.
        truth: id -> hidden human verdict (from :func:`puaudit_jax.evaluate.split_labels`), or None.
        path: the image to write, or None.
        title: the figure's title ("" for none).
    """
    pool = result.pool.reset_index(drop=True)
    score, flipped = pool["score"].to_numpy(float), pool["flipped"].to_numpy(bool)
    eta, m = result.report.eta, result.report.m.value
    seen = _truth_of(pool, truth)
    fig, ((ax_a, ax_b), (ax_c, ax_d)) = plt.subplots(2, 2, figsize=(11, 8.5))
    _panel_by_truth(ax_a, score, seen, eta)
    _panel_by_group(ax_b, score, flipped, eta)
    _panel_sorted(ax_c, score, flipped, seen, eta, m)
    _panel_pca(fig, ax_d, np.asarray(result.u_z, float), score, flipped)
    lines = [
        f"scorer {result.report.scorer}, rule {result.report.rule}, m = {m:.3f}",
        f"flipped {int(flipped.sum())} / {len(pool)}",
    ]
    if seen is not None:
        known, y, t = seen
        adj = pool["adjusted"].to_numpy() == t
        lines.insert(0, f"Cons_orig {y[known].mean():.3f}   Cons_adj {adj[known].mean():.3f}")
    ax_d.text(
        0.02,
        0.02,
        "\n".join(lines),
        transform=ax_d.transAxes,
        fontsize=8,
        va="bottom",
        bbox=dict(boxstyle="round", fc="white", alpha=0.85),
    )
    fig.suptitle(title or "PUAudit diagnostics (seed Figure 2)")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def _reliability(ax, p, wrong, color, label, bins: int):
    """Observed share wrong against the mean predicted P(judge wrong) in ``bins`` quantile bins."""
    edges = np.quantile(p, np.linspace(0, 1, bins + 1))
    idx = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
    xs, ys, ns = [], [], []
    for b in np.unique(idx):
        xs.append(p[idx == b].mean())
        ys.append(wrong[idx == b].mean())
        ns.append((idx == b).sum())
    ax.plot(xs, ys, "o-", color=color, label=f"{label} (n={len(p)})")
    for x, y, n in zip(xs, ys, ns):
        ax.annotate(str(n), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points", color=color)


def _panel_reliability(ax, items, pool, truth, threshold, bins):
    lab = items[(items["status"] == "labelled") & items["p_wrong"].notna()]
    if len(lab):
        _reliability(
            ax,
            lab["p_wrong"].to_numpy(float),
            (lab["judge"] != lab["human"]).to_numpy(),
            C_OK,
            "labelled, out of fold",
            bins,
        )
    if truth is not None and pool["id"].isin(truth.index).any():
        known = pool[pool["id"].isin(truth.index)]
        _reliability(
            ax,
            known["p_wrong"].to_numpy(float),
            (known["judge"].to_numpy() != truth.loc[known["id"]].to_numpy()),
            C_BAD,
            "pool, hidden labels",
            bins,
        )
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
    ax.axvline(threshold, color="black", lw=0.8, ls="--", label="flip threshold")
    ax.set(
        xlabel="predicted P(judge wrong) (bin mean)",
        ylabel="observed share judge wrong",
        title="(a) reliability",
        xlim=(0, 1),
        ylim=(0, 1),
    )
    ax.legend(fontsize=8)


def pool_title(decision, guaranteed: bool) -> str:
    """The pool panel's title: the rule's flips and their expected gain, said as not applied under a guarantee.

    Args:
        decision: the rule's :class:`~puaudit_jax.audit.rules.DecisionSummary`.
        guaranteed: a guarantee decided the pool rows (trust, flip or escalate), not the rule.
    """
    evidence, n = decision.evidence, decision.n_flipped
    gain = "" if evidence is None or decision.abstained else f", expected gain {100 * evidence.expected_gain:+.1f} pts"
    if guaranteed:
        alone = "abstains" if decision.abstained else f"would flip {n}"
        return f"(b) pool: the rule alone {alone}{gain} (not applied: the guarantee decides)"
    return f"(b) pool: {'abstained' if decision.abstained else f'{n} flipped'}{gain}"


def _panel_pool(ax, pool, truth, decision, guaranteed: bool):
    order = np.argsort(pool["p_wrong"].to_numpy(float))
    p, x = pool["p_wrong"].to_numpy(float)[order], np.arange(len(pool))
    evidence = decision.evidence
    ax.fill_between(
        x,
        pool["p_wrong_lo"].to_numpy(float)[order],
        pool["p_wrong_hi"].to_numpy(float)[order],
        color="grey",
        alpha=0.3,
        lw=0,
        label=f"{int(100 * (evidence.interval if evidence else 0.9))}% bootstrap",
    )
    seen = _truth_of(pool, truth)
    if seen is not None:
        known, right, _ = (a[order] for a in seen)
        ax.scatter(x[~known], p[~known], s=3, color="grey", label="no human label")
        ax.scatter(x[known & right], p[known & right], s=4, color=C_OK, label="judge right (hidden)")
        ax.scatter(x[known & ~right], p[known & ~right], s=4, color=C_BAD, label="judge wrong (hidden)")
    else:
        ax.plot(x, p, color=C_OK, lw=1)
    ax.axhline(decision.threshold, color="black", lw=0.8, ls="--")
    ax.set(xlabel="pool items, sorted", ylabel="P(judge wrong)", ylim=(0, 1), title=pool_title(decision, guaranteed))
    ax.legend(fontsize=8, loc="upper left")


def calibration_figure(
    result, truth: pd.Series | None = None, path: str | Path | None = None, *, title: str = "", bins: int = 8
):
    """Reliability and pool view of a calibrated rule's audit (see the module docstring).

    Args:
        result: the audit's result (a calibrated rule's: its report has a decision).
        truth: id -> hidden human verdict, or None.
        path: the image to write, or None.
        title: the figure's title ("" for the rule's name).
        bins: bins of the reliability panel.

    Returns:
        The matplotlib figure.
    """
    decision = result.report.decision
    pool = result.pool.reset_index(drop=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    _panel_reliability(ax1, result.items, pool, truth, decision.threshold, bins)
    _panel_pool(ax2, pool, truth, decision, result.report.guarantee is not None)
    fig.suptitle(title or f"{decision.rule} rule")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def guarantee_figure(guarantee, path: str | Path | None = None, *, title: str = ""):
    """Risk-coverage of a :class:`~puaudit_jax.audit.guarantee.Guarantee`: every candidate's curve, the one kept.

    Per candidate, the agreement guaranteed at its level (the lower bound at the level each threshold was
    tested at) against the share of the pool above the threshold; the kept candidate's calibration rows'
    observed agreement too; the target A, the judge's raw agreement and the certified point.

    Args:
        guarantee: the report's guarantee section.
        path: the image to write, or None.
        title: the figure's title ("" for the default).

    Returns:
        The matplotlib figure.
    """
    g = guarantee
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    styles = {"label-free": ("#9467bd", "-"), "fitted": (C_KEEP, "-"), "fitted-ppi": (C_KEEP, "--")}
    for name, rows in (g.curves or {}).items():
        curve = np.array([r[:5] for r in rows], float).reshape(-1, 5)  # threshold, coverage, n, errors, bound
        colour, dash = styles.get(name, ("grey", "-"))
        kept = name == g.candidate
        ax.plot(curve[:, 1], curve[:, 4], color=colour, ls=dash, lw=2 if kept else 1.2, alpha=1 if kept else 0.7,
                label=f"{name}: guaranteed (lower bound){' (kept)' if kept else ''}")  # fmt: skip
        if kept:
            observed = np.where(curve[:, 2] > 0, 1 - curve[:, 3] / np.maximum(curve[:, 2], 1), np.nan)
            ax.plot(curve[:, 1], observed, color=colour, lw=1, alpha=0.4, label=f"{name}: calibration agreement")
    ax.axhline(g.agreement, color=C_BAD, ls="--", lw=1, label=f"target A = {g.agreement:g}")
    ax.axhline(g.judge_agreement, color="grey", ls=":", lw=1, label=f"judge alone ({g.judge_agreement:.3f})")
    if g.threshold is not None:
        ax.plot([g.coverage], [g.lower_bound], "o", color=C_FLIP, label=f"certified: {g.coverage:.1%} of the pool")
    ax.set(xlabel="share of the pool certified (trust or flip)", ylabel="agreement with humans", xlim=(0, 1.01),
           ylim=(min(0.5, g.judge_agreement - 0.05), 1.005))  # fmt: skip
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(title or f"trust, flip or escalate at {probability(g.delta)}: {g.n_labelled} labelled rows",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def audit_figures(result, truth: pd.Series | None, out: str | Path, *, title: str) -> list[str]:
    """Write ``out``/figure2.png; for a calibrated rule calibration.png; with a guarantee guarantee.png.

    Args:
        result: the audit's result.
        truth: id -> hidden human verdict, or None.
        out: the output folder.
        title: the start of each figure's title.

    Returns:
        The names of the files written.
    """
    out = Path(out)
    plt.close(figure2(result, truth, out / "figure2.png", title=f"{title}: audit diagnostics"))
    names = ["figure2.png"]
    if result.report.decision is not None:
        plt.close(
            calibration_figure(
                result,
                truth,
                out / "calibration.png",
                title=f"{title}: {result.report.rule} rule, {result.report.scorer}",
            )
        )
        names.append("calibration.png")
    if result.report.guarantee is not None:
        plt.close(guarantee_figure(result.report.guarantee, out / "guarantee.png", title=f"{title}: trust, flip or "
                                   f"escalate at A = {result.report.guarantee.agreement:g}"))  # fmt: skip
        names.append("guarantee.png")
    return names
