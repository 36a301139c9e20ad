"""Figures of the seed (matplotlib, Agg backend; files written atomically).

- :func:`figure2` -- seed Figure 2, diagnostics of one audit: (a) score density by ground truth
  (judge consistent with the hidden human label or not), (b) by final group (kept / flipped),
  (c) sorted normalised scores with the decision threshold eta and the 1 - m budget, coloured by
  truth, (d) 2-D PCA projection of the pool's difference embeddings coloured by score; a box with
  Cons_orig, Cons_adj and the number flipped. Ground truth is only known in the protocol (hidden
  labels); without it panels (a) and (c) show the scores alone.
- :func:`figure3` -- seed Figure 3, radar of Cons_orig vs Cons_adj per question type, one panel per
  entry (e.g. per data set or scorer), at most ``ncols`` per row.
- :func:`calibration_figure` -- a calibrated rule's decision (issue 9): (a) reliability of the
  out-of-fold P(judge wrong) on the labelled items (binned predicted vs observed error rate, with
  the hidden pool's observed rate when known), (b) the pool's P(judge wrong) sorted, with its
  bootstrap interval and the flip threshold, coloured by hidden truth when known.

The seed's panel (c) sorts a "diagnostic score" 0.6 (1 - r) + 0.4 (1 - d) whose terms it does not
define; we sort the normalised transport score s̄ itself.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .outputs import save_figure  # noqa: E402

C_OK, C_BAD, C_KEEP, C_FLIP = "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"


def _density(ax, values, color, label):
    values = np.asarray(values, float)
    if len(values) == 0:
        return
    bins = np.linspace(0, 1, 26)
    ax.hist(values, bins=bins, density=True, alpha=0.35, color=color, label=f"{label} (n={len(values)})")
    if len(values) > 2 and np.std(values) > 1e-6:
        from scipy.stats import gaussian_kde

        try:
            grid = np.linspace(0, 1, 200)
            ax.plot(grid, gaussian_kde(values)(grid), color=color, lw=1.5)
        except np.linalg.LinAlgError:
            pass


def figure2(result, truth: pd.Series | None = None, path: str | Path | None = None, *, title: str = ""):
    """Seed Figure 2 for an :class:`~puaudit_jax.audit.AuditResult`; ``truth``: id -> hidden human
    verdict (from :func:`puaudit_jax.evaluate.split_labels`). Returns the figure (saved if ``path``)."""
    pool = result.pool.reset_index(drop=True)
    z = np.asarray(result.u_z, float)
    score = pool["score"].to_numpy(float)
    flipped = pool["flipped"].to_numpy(bool)
    eta, m = result.report["eta"], result.report["m"]["value"]
    has_truth = truth is not None and pool["id"].isin(truth.index).any()
    if has_truth:
        known = pool["id"].isin(truth.index).to_numpy()
        t = truth.reindex(pool["id"]).to_numpy()
        y = pool["judge"].to_numpy() == t  # judge consistent with the human
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    (ax_a, ax_b), (ax_c, ax_d) = axes

    if has_truth:
        _density(ax_a, score[known & y], C_OK, "judge = human (y=1)")
        _density(ax_a, score[known & ~y], C_BAD, "judge != human (y=0)")
    else:
        _density(ax_a, score, "gray", "all (no ground truth)")
    ax_a.axvline(eta, color="k", ls="--", lw=1, label=f"eta = {eta:g}")
    ax_a.set(title="(a) normalised score by ground truth", xlabel="normalised score s̄", ylabel="density")
    ax_a.legend(fontsize=8)

    _density(ax_b, score[~flipped], C_KEEP, "kept")
    _density(ax_b, score[flipped], C_FLIP, "flipped")
    ax_b.axvline(eta, color="k", ls="--", lw=1)
    ax_b.set(title="(b) normalised score by final group", xlabel="normalised score s̄", ylabel="density")
    ax_b.legend(fontsize=8)

    order = np.argsort(score, kind="stable")
    x = np.arange(len(order))
    if has_truth:
        colors = np.where(~known[order], "gray", np.where(y[order], C_OK, C_BAD))
    else:
        colors = np.where(flipped[order], C_FLIP, C_KEEP)
    ax_c.scatter(x, score[order], c=list(colors), s=8)
    ax_c.axhline(eta, color="k", ls="--", lw=1, label=f"rule threshold eta = {eta:g}")
    ax_c.axvline(flipped.sum() - 0.5, color=C_FLIP, lw=1, label=f"final groups: {int(flipped.sum())} flipped")
    ax_c.axvline((1 - m) * len(score) - 0.5, color="gray", ls=":", lw=1, label=f"budget 1 - m = {1 - m:.2f}")
    if has_truth:
        n_bad = int((known & ~y).sum())
        ax_c.axvline(n_bad - 0.5, color=C_BAD, ls="-.", lw=1, label=f"ground truth: {n_bad} judge errors")
    ax_c.set(title="(c) sorted scores with thresholds", xlabel="pool items, sorted by score", ylabel="s̄")
    ax_c.legend(fontsize=8, loc="lower right")

    if len(z) >= 2:
        zc = z - z.mean(0)
        _, _, vt = np.linalg.svd(zc, full_matrices=False)
        xy = zc @ vt[:2].T if vt.shape[0] >= 2 else np.c_[zc @ vt[0], np.zeros(len(zc))]
        sc = ax_d.scatter(xy[:, 0], xy[:, 1], c=score, cmap="viridis", s=10, vmin=0, vmax=1)
        ax_d.scatter(xy[flipped, 0], xy[flipped, 1], facecolors="none", edgecolors=C_FLIP, s=22, lw=0.6,
                     label="flipped")
        fig.colorbar(sc, ax=ax_d, label="normalised score s̄")
        ax_d.legend(fontsize=8)
    ax_d.set(title="(d) PCA of pool difference embeddings z", xlabel="PC 1", ylabel="PC 2")

    lines = [f"scorer {result.report['scorer']}, rule {result.report['rule']}, m = {m:.3f}",
             f"flipped {int(flipped.sum())} / {len(pool)}"]
    if has_truth:
        adj = pool["adjusted"].to_numpy() == t
        lines.insert(0, f"Cons_orig {y[known].mean():.3f}   Cons_adj {adj[known].mean():.3f}")
    ax_d.text(0.02, 0.02, "\n".join(lines), transform=ax_d.transAxes, fontsize=8, va="bottom",
              bbox=dict(boxstyle="round", fc="white", alpha=0.85))
    fig.suptitle(title or "PUAudit diagnostics (seed Figure 2)")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def figure3(panels: dict[str, pd.DataFrame], path: str | Path | None = None, *, title: str = "", ncols: int = 4):
    """Seed Figure 3: one radar per entry of ``panels`` (title -> frame with question_type,
    cons_orig_mean, cons_adj_mean; the "all" row is left out of the radar and put in the title)."""
    k = len(panels)
    if k == 0:
        raise ValueError("figure3: nothing to plot")
    polar = all((f["question_type"] != "all").sum() >= 3 for f in panels.values())  # a radar needs 3 axes
    ncols = min(k, ncols)
    nrows = -(-k // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 4.8 * nrows),
                             subplot_kw={"polar": True} if polar else {}, squeeze=False)
    for ax in axes.flat[k:]:
        ax.set_visible(False)
    for ax, (name, frame) in zip(axes.flat, panels.items()):
        frame = frame.reset_index(drop=True)
        overall = frame[frame["question_type"] == "all"]
        part = frame[frame["question_type"] != "all"]
        labels = part["question_type"].astype(str).tolist()
        sub = name
        if len(overall):
            sub += f"\nall: {overall['cons_orig_mean'].iloc[0]:.3f} -> {overall['cons_adj_mean'].iloc[0]:.3f}"
        if not polar:  # fewer than 3 question types: grouped bars instead of a degenerate radar
            x = np.arange(len(labels))
            ax.bar(x - 0.2, part["cons_orig_mean"], 0.4, color=C_OK, label="original")
            ax.bar(x + 0.2, part["cons_adj_mean"], 0.4, color=C_FLIP, label="adjusted")
            ax.set_xticks(x, labels)
            ax.set_ylim(0, 1)
            ax.set_title(sub, fontsize=9)
            continue
        angles = np.linspace(0, 2 * np.pi, len(labels), endpoint=False).tolist()
        for col, color, label in (("cons_orig_mean", C_OK, "original"), ("cons_adj_mean", C_FLIP, "adjusted")):
            vals = part[col].to_numpy(float).tolist()
            ax.plot(angles + angles[:1], vals + vals[:1], color=color, lw=1.6, label=label)
            ax.fill(angles + angles[:1], vals + vals[:1], color=color, alpha=0.18)
        ax.set_xticks(angles)
        ax.set_xticklabels(labels, fontsize=8)
        lo = max(0.0, np.floor(min(part["cons_orig_mean"].min(), part["cons_adj_mean"].min()) * 10) / 10 - 0.1)
        ax.set_ylim(lo, 1.0)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(sub, fontsize=9, pad=14)
    axes[0][0].legend(loc="upper right", bbox_to_anchor=(0.05, 1.12) if polar else None, fontsize=8)
    fig.suptitle(title or "Original vs adjusted consistency per question type (seed Figure 3)", fontsize=11)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def calibration_figure(result, truth: pd.Series | None = None, path: str | Path | None = None, *,
                       title: str = "", bins: int = 8):
    """Reliability and pool view of a calibrated rule's audit (see the module docstring)."""
    items = result.items
    decision = result.report["decision"]
    lab = items[(items["status"] == "labelled") & items["p_wrong"].notna()]
    pool = result.pool.reset_index(drop=True)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))

    def reliability(ax, p, wrong, color, label):
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

    if len(lab):
        reliability(ax1, lab["p_wrong"].to_numpy(float), (lab["judge"] != lab["human"]).to_numpy(), C_OK,
                    "labelled, out of fold")
    has_truth = truth is not None and pool["id"].isin(truth.index).any()
    if has_truth:
        known = pool[pool["id"].isin(truth.index)]
        reliability(ax1, known["p_wrong"].to_numpy(float),
                    (known["judge"].to_numpy() != truth.loc[known["id"]].to_numpy()), C_BAD, "pool, hidden labels")
    ax1.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
    ax1.axvline(decision["threshold"], color="black", lw=0.8, ls="--", label="flip threshold")
    ax1.set(xlabel="predicted P(judge wrong) (bin mean)", ylabel="observed share judge wrong",
            title="(a) reliability", xlim=(0, 1), ylim=(0, 1))
    ax1.legend(fontsize=8)

    order = np.argsort(pool["p_wrong"].to_numpy(float))
    p = pool["p_wrong"].to_numpy(float)[order]
    x = np.arange(len(p))
    ax2.fill_between(x, pool["p_wrong_lo"].to_numpy(float)[order], pool["p_wrong_hi"].to_numpy(float)[order],
                     color="grey", alpha=0.3, lw=0, label=f"{int(100 * decision.get('interval', 0.9))}% bootstrap")
    if has_truth:
        t = truth.reindex(pool["id"]).to_numpy()[order]
        known = pool["id"].isin(truth.index).to_numpy()[order]
        wrong = pool["judge"].to_numpy()[order] != t
        ax2.scatter(x[~known], p[~known], s=3, color="grey", label="no human label")
        ax2.scatter(x[known & ~wrong], p[known & ~wrong], s=4, color=C_OK, label="judge right (hidden)")
        ax2.scatter(x[known & wrong], p[known & wrong], s=4, color=C_BAD, label="judge wrong (hidden)")
    else:
        ax2.plot(x, p, color=C_OK, lw=1)
    ax2.axhline(decision["threshold"], color="black", lw=0.8, ls="--")
    state = "abstained" if decision["abstained"] else f"{decision['n_flipped']} flipped"
    gain = decision.get("expected_gain")
    ax2.set(xlabel="pool items, sorted", ylabel="P(judge wrong)", ylim=(0, 1),
            title=f"(b) pool: {state}" + ("" if gain is None else f", expected gain {100 * gain:+.1f} pts"))
    ax2.legend(fontsize=8, loc="upper left")
    fig.suptitle(title or f"{decision['rule']} rule")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig
