"""Figures of consensus alignment: heat maps, the consensus-weight trade-off, and judge-vs-reference scatters.

Judges x models heat maps, the trade-off over the consensus weight, and BT scores of several judges
against a reference judge with bootstrap intervals.

Each function draws into a new matplotlib figure and returns it (save with
``puaudit_runtime.files.save_figure``, which writes atomically).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def heatmaps(matrices: dict[str, pd.DataFrame], *, center: pd.Series | None = None, title: str = ""):
    """One panel per named judges x models matrix, drawn as deviation from ``center`` in Elo points.

    One shared symmetric colour scale.

    Args:
        matrices: panel title -> judges x models scores (Elo points).
        center: per-model scores subtracted from every row (Elo points; None: the first matrix's
            column mean).
        title: the figure's title ("" for none).

    Returns:
        The matplotlib figure.
    """
    names = list(matrices)
    first = matrices[names[0]]
    ref = first.mean(axis=0) if center is None else center.loc[first.columns]
    devs = {k: v - ref.to_numpy() for k, v in matrices.items()}
    vmax = max(float(np.abs(d.to_numpy()).max()) for d in devs.values())
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names) + 2, 4.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        d = devs[name]
        im = ax.imshow(d.to_numpy(), cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        ax.set_xticks(range(d.shape[1]), [str(c) for c in d.columns], rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(d.shape[0]), [str(r) for r in d.index] if ax is axes[0][0] else [], fontsize=7)
        std = float(matrices[name].std(axis=0, ddof=0).mean())
        ax.set_title(f"{name}\n(mean inter-judge std {std:.0f})", fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="Elo minus baseline consensus")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def tradeoff(
    table: pd.DataFrame,
    *,
    x: str = "w_consensus",
    shrink: pd.DataFrame | None = None,
    references: dict[str, dict] | None = None,
    judges: list[str] | None = None,
    title: str = "",
):
    """The trade-off over the consensus weight: agreement with humans and with the consensus, and spread.

    Left: mean Pearson to human and to the baseline consensus vs the consensus weight (log x), with
    per-judge Pearson to human for ``judges`` (thin lines). Right: inter-judge std vs mean Pearson to
    human for the adapter sweep, the common-alpha shrinkage curve and named reference points.

    Args:
        table: :func:`~puaudit_jax.consensus.alignment.tradeoff_curve`'s table (one row per weight).
        x: the column of the weights (0 is drawn at half the smallest positive one).
        shrink: the common-alpha shrinkage curve (columns alpha, pearson_human, inter_judge_std), or None.
        references: name -> point with ``inter_judge_std`` and ``pearson_human`` (e.g. the paper's UDA).
        judges: judges whose per-judge Pearson to human (``pearson_human[<judge>]``) is drawn.
        title: the figure's title ("" for none).

    Returns:
        The matplotlib figure.
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.3))
    xs = table[x].to_numpy(float)
    xplot = np.where(xs > 0, xs, np.nan)
    pos = xs[xs > 0]
    zero_at = pos.min() / 2 if len(pos) else 1.0
    xplot = np.where(xs > 0, xs, zero_at)
    ax1.plot(xplot, table["pearson_human"], "o-", color="C0", label="mean Pearson to human")
    ax1.plot(xplot, table["pearson_base_consensus"], "s--", color="C1", label="mean Pearson to baseline consensus")
    for j in judges or []:
        col = f"pearson_human[{j}]"
        if col in table:
            ax1.plot(xplot, table[col], "-", lw=0.8, alpha=0.6, label=f"{j} to human")
    ax1.set_xscale("log")
    ax1.set_xlabel(f"{x} (log; w = 0 drawn at {zero_at:g})")
    ax1.set_ylabel("Pearson r")
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    ax2.plot(table["inter_judge_std"], table["pearson_human"], "o-", color="C0", label="adapter (sweep of w)")
    if shrink is not None:
        ax2.plot(shrink["inter_judge_std"], shrink["pearson_human"], ".-", color="C2", label="common-alpha shrinkage")
    for k, (name, point) in enumerate((references or {}).items()):
        ax2.scatter(
            [point["inter_judge_std"]],
            [point["pearson_human"]],
            marker="*^vD"[k % 4],
            s=90,
            zorder=5,
            color=f"C{3 + k}",
            label=name,
        )
    ax2.set_xlabel("mean inter-judge std (Elo)")
    ax2.set_ylabel("mean Pearson to human")
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def judge_scatter(scores: pd.DataFrame, reference: str, *, intervals: dict | None = None, title: str = ""):
    """One panel per judge other than ``reference``: its BT Elo against the reference judge's.

    Args:
        scores: a judges x models score matrix, in Elo points.
        reference: the judge on every panel's x axis.
        intervals: judge -> bootstrap table (columns model, lo, hi; Elo points), drawn as error bars
            when both judges have one; None for points only.
        title: the figure's title ("" for none).

    Returns:
        The matplotlib figure.
    """
    others = [j for j in scores.index if j != reference]
    fig, axes = plt.subplots(1, len(others), figsize=(4.6 * len(others), 4.2), squeeze=False)
    x = scores.loc[reference]
    for ax, judge in zip(axes[0], others):
        y = scores.loc[judge]
        if intervals and judge in intervals and reference in intervals:
            yi = intervals[judge].set_index("model").loc[scores.columns]
            xi = intervals[reference].set_index("model").loc[scores.columns]
            ax.errorbar(
                x,
                y,
                xerr=[x - xi["lo"], xi["hi"] - x],
                yerr=[y - yi["lo"], yi["hi"] - y],
                fmt="o",
                ms=3,
                lw=0.5,
                alpha=0.7,
            )
        else:
            ax.plot(x, y, "o", ms=3)
        r = np.corrcoef(x, y)[0, 1]
        ax.set_xlabel(f"{reference} Elo")
        ax.set_ylabel(f"{judge} Elo")
        ax.set_title(f"{judge} vs {reference}: r = {r:.3f}", fontsize=9)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
