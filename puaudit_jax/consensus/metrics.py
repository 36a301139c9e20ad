"""Metrics of a judges x models score matrix (Elo points): agreement with a reference, dispersion, bias.

- :func:`consensus`: the column mean (per model mean over judges), the UDA appendix's consensus.
- :func:`judge_metrics`: one row per judge: Pearson r, MSE (Elo points^2) and Kendall tau-b of its
  row against a per-model reference (human scores, or the consensus). The appendix's Table 4 is
  ``judge_metrics(uda, consensus(baseline))`` averaged over judges.
- :func:`inter_judge_std`: per model, the standard deviation over judges (ddof 0 by default; the
  appendix's "inter-judge rating standard deviation" -- its 63.4% reduction is a ratio, so ddof does
  not matter for it).
- :func:`aggregate_bias`: Theorem 2's ``S_m = sum_k |R_m^(k) - R_m^*|`` per model, against reference
  scores R^* (in the appendix, the unknown true scores; here human scores stand in).
- :func:`summary`: the scalar summary used in the result tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import kendalltau


def _check(scores: pd.DataFrame, reference: pd.Series | None = None) -> None:
    if not isinstance(scores, pd.DataFrame) or scores.ndim != 2 or scores.empty:
        raise ValueError("scores must be a non-empty judges x models DataFrame")
    if not np.isfinite(scores.to_numpy(float)).all():
        bad = scores.stack(future_stack=True)
        bad = bad[~np.isfinite(bad.astype(float))]
        raise ValueError(f"scores has non-finite cells, e.g. {bad.index[0]}")
    if reference is not None:
        missing = [m for m in scores.columns if m not in reference.index]
        if missing:
            raise ValueError(f"reference has no score for models {missing[:5]}")
        if not np.isfinite(reference.loc[scores.columns].to_numpy(float)).all():
            raise ValueError("reference has non-finite scores")


def consensus(scores: pd.DataFrame) -> pd.Series:
    """Per-model mean over judges (the column mean), Elo points."""
    _check(scores)
    return scores.mean(axis=0).rename("consensus")


def judge_metrics(scores: pd.DataFrame, reference: pd.Series) -> pd.DataFrame:
    """One row per judge (index = judges): pearson, mse (Elo^2), kendall_tau (tau-b) against ``reference``.

    A constant row has an undefined correlation: pearson / kendall_tau are then NaN (reported, not
    hidden) while mse stays defined.
    """
    _check(scores, reference)
    ref = reference.loc[scores.columns].to_numpy(float)
    rows = []
    for judge, row in scores.iterrows():
        x = row.to_numpy(float)
        constant = np.ptp(x) == 0 or np.ptp(ref) == 0
        rows.append(
            {
                "judge": judge,
                "pearson": np.nan if constant else float(np.corrcoef(x, ref)[0, 1]),
                "mse": float(np.mean((x - ref) ** 2)),
                "kendall_tau": np.nan if constant else float(kendalltau(x, ref).statistic),
            }
        )
    return pd.DataFrame(rows).set_index("judge")


def inter_judge_std(scores: pd.DataFrame, ddof: int = 0) -> pd.Series:
    """Per-model standard deviation over judges (Elo points)."""
    _check(scores)
    return scores.std(axis=0, ddof=ddof).rename("inter_judge_std")


def aggregate_bias(scores: pd.DataFrame, truth: pd.Series) -> pd.Series:
    """Theorem 2's S_m = sum over judges of ``|R_m^(k) - R_m^*|`` (Elo points), one value per model."""
    _check(scores, truth)
    return (scores - truth.loc[scores.columns]).abs().sum(axis=0).rename("aggregate_abs_bias")


def summary(scores: pd.DataFrame, *, base_consensus: pd.Series | None = None, human: pd.Series | None = None) -> dict:
    """Scalars of one matrix: agreement with the consensus and with human scores, spread, and bias.

    Mean Pearson / MSE / Kendall to the baseline consensus, to its own consensus, to human scores (when
    given), inter-judge std (mean over models), S (sum over models of the aggregate absolute bias against
    human), and the consensus row's own Pearson to human.

    Args:
        scores: a judges x models score matrix, in Elo points.
        base_consensus: the baseline consensus per model, in Elo points (None: the matrix's own).
        human: human scores per model, in Elo points, or None.

    Returns:
        Name -> float: the MSEs in squared Elo points, the std and the bias in Elo points.
    """
    base = consensus(scores) if base_consensus is None else base_consensus
    to_base = judge_metrics(scores, base).mean()
    to_own = judge_metrics(scores, consensus(scores)).mean()
    out = {
        "pearson_base_consensus": to_base["pearson"],
        "mse_base_consensus": to_base["mse"],
        "kendall_base_consensus": to_base["kendall_tau"],
        "pearson_own_consensus": to_own["pearson"],
        "inter_judge_std": float(inter_judge_std(scores).mean()),
    }
    if human is not None:
        to_h = judge_metrics(scores, human).mean()
        out.update(
            {
                "pearson_human": to_h["pearson"],
                "mse_human": to_h["mse"],
                "kendall_human": to_h["kendall_tau"],
                "aggregate_abs_bias": float(aggregate_bias(scores, human).sum()),
                "consensus_pearson_human": float(np.corrcoef(consensus(scores), human.loc[scores.columns])[0, 1]),
            }
        )
    return {k: float(v) for k, v in out.items()}
