"""Figures of a quantification (matplotlib, Agg backend; files written atomically).

- :func:`forest_plot` -- estimates with intervals, one row per target, one marker per estimator.
- :func:`power_plot` -- a label plan's predicted interval half-width against the budget, planned and random.
- :func:`monitor_plot` -- a monitored stream: the estimate in its confidence sequence, the e-value and the alarm.
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

#: Panels of the forest plot, by target prefix (the first panel takes every other target).
PANELS = ("share", "Elo score", "Elo score at equal style", "style coefficient, Elo points (only A has it)",
          "judge bias: the judge's share minus the humans'", "agreement beyond chance (kappa, alpha)")  # fmt: skip
_PREFIXES = ("elo: ", "elo (style-controlled): ", "style: ", "judge bias: ", "beyond chance: ")
_NO_BIAS = PANELS[4]  # its 0 is marked: a judge without bias


def _panel_of(target: str) -> int:
    """The index in :data:`PANELS` of ``target``'s panel."""
    return next((k + 1 for k, p in enumerate(_PREFIXES) if target.startswith(p)), 0)


def forest_plot(frame: pd.DataFrame, path: str | Path | None = None, *, title: str = ""):
    """Estimates with intervals, one row per target, one marker per estimator.

    One panel per kind of target (:data:`PANELS`: proportions, the Elo leaderboard and the
    style-controlled one, each score with its simultaneous rank-set "#1-3", the style coefficients,
    the judge's bias with 0 marked, agreement beyond chance), its legend beside it; not-estimable
    rows are skipped.

    Args:
        frame: a :meth:`~puaudit_jax.quantify.Quantification.to_frame` table.
        path: where to save the figure (PNG), or None.
        title: the figure's title ("" for the default).

    Returns:
        The matplotlib figure.
    """
    frame = frame[frame["note"].fillna("") == ""]
    kind = frame["target"].map(_panel_of)
    panels = [(frame[kind == k], label) for k, label in enumerate(PANELS) if (kind == k).any()]
    heights = [len(set(part["target"])) + 2 for part, _ in panels] or [1]
    fig, axes = plt.subplots(len(panels) or 1, 1, figsize=(9.5, 0.3 * sum(heights) + 1.2), squeeze=False,
                             gridspec_kw={"height_ratios": heights})  # fmt: skip
    estimators = sorted(set(frame["estimator"]), key=lambda e: (ESTIMATORS + (e,)).index(e))
    for ax, (part, label) in zip(axes[:, 0], panels):
        _forest_panel(ax, part, estimators)
        if label == _NO_BIAS:
            ax.axvline(0.0, color="0.6", lw=0.8, ls="--", zorder=0)
        level = f", {int(round(100 * part['level'].iloc[0]))}% interval"
        ax.set(xlabel=label + level)
    fig.suptitle(title or "estimates by estimator")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def _rank_labels(ax, part: pd.DataFrame, y: np.ndarray, color: str) -> None:
    """Each leaderboard score's rank-set ("#1" or "#1-3") right of its interval."""
    if "rank_lower" not in part.columns:
        return
    for (_, row), yk in zip(part.iterrows(), y):
        lo, hi = row.get("rank_lower"), row.get("rank_upper")
        if pd.notna(lo) and pd.notna(hi) and pd.notna(row["upper"]):
            text = f"#{int(lo)}" if lo == hi else f"#{int(lo)}-{int(hi)}"
            ax.annotate(text, (row["upper"], yk), xytext=(3, 0), textcoords="offset points", va="center", fontsize=6,
                        color=color)  # fmt: skip


def _forest_panel(ax, frame: pd.DataFrame, estimators: list[str]) -> None:
    targets = list(dict.fromkeys(frame["target"]))
    for k, est in enumerate(estimators):
        part = frame[frame["estimator"] == est].set_index("target").reindex(targets)
        if part["estimate"].isna().all():
            continue  # no row of this estimator in this panel: no empty legend entry
        y = np.arange(len(targets)) + (k - (len(estimators) - 1) / 2) * 0.8 / max(len(estimators), 1)
        ax.errorbar(part["estimate"], y, xerr=[part["estimate"] - part["lower"], part["upper"] - part["estimate"]],
                    fmt="o", ms=3, lw=1, capsize=2, label=est, color=f"C{k}")  # fmt: skip
        _rank_labels(ax, part, y, f"C{k}")
    ax.set_yticks(np.arange(len(targets)), targets, fontsize=7)
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside: hides no point


def power_plot(report, path: str | Path | None = None, *, title: str = ""):
    """Predicted interval half-width of a label plan's target against the number of labels.

    Args:
        report: a :class:`~puaudit_jax.quantify.plan.LabelPlanReport`: its ``power`` table (budget,
            planned, random) drawn as two curves, the chosen budget marked.
        path: where to save the figure (PNG), or None.
        title: the figure's title ("" for the default).

    Returns:
        The matplotlib figure.
    """
    power = report.power
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(power["budget"], power["random"], "o-", ms=3, color="C7", label="random sampling")
    ax.plot(power["budget"], power["planned"], "o-", ms=3, color="C0", label="planned (active)")
    chosen = report.selected.shape[0]
    ax.axvline(chosen, color="C3", lw=0.8, ls="--", label=f"this plan: {chosen} items drawn")
    ax.set(xlabel="new labels (expected budget)", ylabel=f"predicted half-width: {report.target}",
           title=title or "label plan: power")  # fmt: skip
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def monitor_plot(result, path: str | Path | None = None, *, title: str = ""):
    """A monitored stream: the running estimate in its confidence sequence, and the e-value with the alarm.

    Args:
        result: a :class:`~puaudit_jax.quantify.monitoring.Monitoring`. Top panel: the estimate and its band
            against n (labels), with the threshold; bottom panel (with a threshold): the e-value on a log
            axis with 1 / alpha and the alarm marked.
        path: where to save the figure (PNG), or None.
        title: the figure's title ("" for the default).

    Returns:
        The matplotlib figure.
    """
    config, n = result.config, np.arange(1, len(result.estimate) + 1)
    rows = 2 if result.e_value is not None else 1
    fig, axes = plt.subplots(rows, 1, figsize=(6.5, 2.6 * rows + 0.6), sharex=True, squeeze=False)
    ax = axes[0, 0]
    ax.fill_between(n, result.lower, result.upper, color="C0", alpha=0.25, lw=0,
                    label=f"confidence sequence ({1 - config.alpha:.0%}, every n at once)")  # fmt: skip
    ax.plot(n, result.estimate, color="C0", lw=1, label=f"running {config.target}")
    if config.threshold is not None:
        ax.axhline(config.threshold, color="C3", lw=0.8, ls="--", label=f"threshold {config.threshold:g}")
    ax.set(ylabel=config.target, ylim=(0, 1), title=title or f"{config.target} as labels arrive")
    if result.e_value is not None:
        low = axes[1, 0]
        low.semilogy(n, np.maximum(result.e_value, 1e-6), color="C2", lw=1, label=f"e-value ({config.design})")
        low.axhline(1 / config.alpha, color="C3", lw=0.8, ls="--", label=f"1/alpha = {1 / config.alpha:g}")
        low.set(ylabel="e-value (log)")
        low.legend(fontsize=7, loc="upper left")
    if result.alarm is not None:
        for a in axes[:, 0]:
            a.axvline(result.alarm.n, color="C3", lw=1, label=f"alarm at n={result.alarm.n}" if a is ax else None)
    ax.legend(fontsize=7, loc="lower left")
    axes[-1, 0].set_xlabel(f"labels in the order of {config.order}")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig
