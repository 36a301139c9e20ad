"""Figures of a quantification (matplotlib, Agg backend; files written atomically).

- :func:`forest_plot` -- estimates with intervals, one row per target, one marker per estimator.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from puaudit_runtime.files import save_figure  # noqa: E402

from .estimators import ESTIMATORS  # noqa: E402


def forest_plot(frame: pd.DataFrame, path: str | Path | None = None, *, title: str = ""):
    """Estimates with intervals, one row per target, one marker per estimator.

    ``frame`` is a :meth:`~puaudit_jax.quantify.Quantification.to_frame` table; proportions and the Elo
    leaderboard (targets "elo: ...") in separate panels; not-estimable rows are skipped.
    """
    frame = frame[frame["note"].fillna("") == ""]
    elo = frame["target"].str.startswith("elo: ")
    panels = [(part, label) for part, label in ((frame[~elo], "share"), (frame[elo], "Elo score")) if len(part)]
    heights = [len(set(part["target"])) + 2 for part, _ in panels] or [1]
    fig, axes = plt.subplots(len(panels) or 1, 1, figsize=(8, 0.3 * sum(heights) + 1.2), squeeze=False,
                             gridspec_kw={"height_ratios": heights})  # fmt: skip
    estimators = sorted(set(frame["estimator"]), key=lambda e: (ESTIMATORS + (e,)).index(e))
    for ax, (part, label) in zip(axes[:, 0], panels):
        _forest_panel(ax, part, estimators)
        level = f", {int(round(100 * part['level'].iloc[0]))}% interval"
        ax.set(xlabel=label + level)
    fig.suptitle(title or "estimates by estimator")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def _forest_panel(ax, frame: pd.DataFrame, estimators: list[str]) -> None:
    targets = list(dict.fromkeys(frame["target"]))
    for k, est in enumerate(estimators):
        part = frame[frame["estimator"] == est].set_index("target").reindex(targets)
        y = np.arange(len(targets)) + (k - (len(estimators) - 1) / 2) * 0.8 / max(len(estimators), 1)
        ax.errorbar(part["estimate"], y, xerr=[part["estimate"] - part["lower"], part["upper"] - part["estimate"]],
                    fmt="o", ms=3, lw=1, capsize=2, label=est, color=f"C{k}")  # fmt: skip
    ax.set_yticks(np.arange(len(targets)), targets, fontsize=7)
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="best")
