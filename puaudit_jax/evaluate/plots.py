"""Figures of the evaluation protocol (matplotlib, Agg backend; files written atomically).

- :func:`figure3` -- seed Figure 3, radar of Cons_orig vs Cons_adj per question type, one panel per
  entry (e.g. per data set or scorer), at most ``ncols`` per row.
- :func:`evaluation_figures` -- figure3.png, and the first audit's figure2.png and calibration.png
  (:mod:`puaudit_jax.audit.plots`), into an output folder.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from puaudit_runtime.files import save_figure  # noqa: E402

from ..audit.plots import C_FLIP, C_OK, calibration_figure, figure2  # noqa: E402


def figure3(panels: dict[str, pd.DataFrame], path: str | Path | None = None, *, title: str = "", ncols: int = 4):
    """Seed Figure 3: one radar per entry of ``panels`` (grouped bars with fewer than 3 question types).

    Args:
        panels: title -> frame with question_type, cons_orig_mean, cons_adj_mean (agreements in
            [0, 1]); the "all" row is left out of the radar and put in the title.
        path: the image to write, or None.
        title: the figure's title ("" for the default).
        ncols: panels per row.

    Returns:
        The matplotlib figure.

    Raises:
        ValueError: no panels.
    """
    k = len(panels)
    if k == 0:
        raise ValueError("figure3: nothing to plot")
    polar = all((f["question_type"] != "all").sum() >= 3 for f in panels.values())  # a radar needs 3 axes
    ncols = min(k, ncols)
    nrows = -(-k // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.6 * ncols, 4.8 * nrows), subplot_kw={"polar": True} if polar else {}, squeeze=False
    )
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


def evaluation_figures(res, out: str | Path, *, data: str) -> list[str]:
    """Figures of a protocol run (:class:`~puaudit_jax.evaluate.EvalResult`); returns the file names.

    figure3.png (radar per scorer, its first rule), figure2.png (the first scorer's audit on the first
    seed) and, for a calibrated rule, calibration.png. A sweep or a table without question types draws none.

    Args:
        res: the protocol's result.
        out: the output folder.
        data: names the data in the titles.
    """
    summ, out = res.summary, Path(out)
    if "question_type" not in summ or "param" in res.meta or res.first_audit is None:
        return []
    panels = {}
    for s in res.meta["scorers"]:  # each scorer with the first rule that has rows for it
        rule = next(r for r in res.meta["rules"] + ["hindsight"] if ((summ.scorer == s) & (summ.rule == r)).any())
        panels[f"{s} (rule {rule})"] = summ[(summ.scorer == s) & (summ.rule == rule)]
    plt.close(figure3(panels, out / "figure3.png", title=f"{data}: Cons_orig vs Cons_adj, mean over seeds"))
    first, seed = res.first_audit, res.meta["seeds"][0]
    plt.close(
        figure2(
            first,
            res.first_truth,
            out / "figure2.png",
            title=f"{data}: {first.report.scorer} audit, seed {seed} (seed Figure 2)",
        )
    )
    names = ["figure3.png", "figure2.png"]
    if first.report.decision is not None:
        plt.close(
            calibration_figure(
                first,
                res.first_truth,
                out / "calibration.png",
                title=f"{data}: {first.report.scorer} scores, {first.report.rule} rule, seed {seed}",
            )
        )
        names.append("calibration.png")
    return names
