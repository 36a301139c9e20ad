"""What the protocol measures on the evaluation pool (PUAudit Appendix A.5).

Cons_orig, Cons_adj, flip rate and precision per question type and overall, and the hindsight ceiling.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..audit import HiddenLabels
from ..datasets.verdicts import question_types

ALL = "all"


def consistency(pool: pd.DataFrame, truth: pd.Series, guarantee: float | None = None) -> pd.DataFrame:
    """Cons_orig, Cons_adj and the flip rate of ``pool`` (audit items) against ``truth`` per type + all.

    With a guaranteed audit's ``decision`` column, also ``coverage`` (share trusted or flipped) and
    ``certified_agreement`` (agreement of their final verdicts with the hidden ones; NaN when none is
    certified).

    Args:
        pool: the audit's pool rows (columns id, question_type, judge, adjusted, flipped, and
            ``decision`` for a guaranteed audit); rows without a hidden verdict are left out.
        truth: the hidden human verdicts, indexed by id.
        guarantee: the agreement A the audit guaranteed, in (0, 1), or None. When given (and the pool
            has ``decision``), the "all" row gets ``violated``: 1 when the certified rows' agreement is
            below A, else 0 (an empty certified set violates nothing).

    Returns:
        One row per question type and one "all" row; agreements and rates in [0, 1].
    """
    pool = pool[pool["id"].isin(truth.index)]
    t = truth.loc[pool["id"]].to_numpy()
    frame = pd.DataFrame(
        {
            "question_type": question_types(pool["question_type"]),
            "orig": (pool["judge"].to_numpy() == t),
            "adj": (pool["adjusted"].to_numpy() == t),
            "flipped": pool["flipped"].to_numpy(bool),
        }
    )
    decided = "decision" in pool.columns
    if decided:
        frame["certified"] = pool["decision"].isin(("trust", "flip")).to_numpy()
    rows = []
    for qt, part in list(frame.groupby("question_type", sort=True)) + [(ALL, frame)]:
        flipped = part["flipped"].to_numpy(bool)
        row = {
            "question_type": qt,
            "n_eval": len(part),
            "n_flipped": int(flipped.sum()),
            "cons_orig": part["orig"].mean() if len(part) else np.nan,
            "cons_adj": part["adj"].mean() if len(part) else np.nan,
            "flip_rate": flipped.mean() if len(part) else np.nan,
            "flip_precision": (~part["orig"].to_numpy()[flipped]).mean() if flipped.any() else np.nan,
        }
        if decided:
            row.update(_certified(part, guarantee if qt == ALL else None))
        rows.append(row)
    return pd.DataFrame(rows)


def _certified(part: pd.DataFrame, guarantee: float | None) -> dict:
    """Coverage, the certified rows' realised agreement and (with ``guarantee``) whether it fell below it."""
    certified = part["certified"].to_numpy(bool)
    agreement = part["adj"].to_numpy()[certified].mean() if certified.any() else np.nan
    out = {"coverage": certified.mean() if len(part) else np.nan, "certified_agreement": agreement}
    if guarantee is not None:
        out["violated"] = float(certified.any() and agreement < guarantee)
    return out


def hindsight_flips(pool: pd.DataFrame, truth: pd.Series) -> np.ndarray:
    """(n_pool,) flips of the best budget per scoring group chosen with the hidden labels.

    Flip the k lowest-scored items, k maximising agreement with ``truth`` (items not in ``truth`` never
    flip).
    """
    flips = np.zeros(len(pool), bool)
    known = pool["id"].isin(truth.index).to_numpy()
    wrong = np.zeros(len(pool), bool)
    wrong[known] = pool["judge"].to_numpy()[known] != truth.loc[pool["id"][known]].to_numpy()
    groups, scores = pool["group"].to_numpy(), pool["score"].to_numpy()
    for g in pd.unique(groups):
        rows = np.flatnonzero((groups == g) & known)
        order = rows[np.argsort(scores[rows], kind="stable")]
        gain = np.cumsum(np.where(wrong[order], 1, -1))
        best = int(np.argmax(gain)) + 1 if len(gain) and gain.max() > 0 else 0
        flips[order[:best]] = True
    return flips


def with_hidden_labels(result, truth: pd.Series, share: float):
    """``result`` with the hidden verdicts in an ``items`` column ``human_hidden`` and their consistency in the report.

    Args:
        result: an :class:`~puaudit_jax.audit.AuditResult` of a table with hidden labels.
        truth: the hidden human verdicts, indexed by id.
        share: the share of the labels that were hidden, in (0, 1) (recorded in the report).

    Returns:
        A new result (the given one unchanged).
    """
    cons = consistency(result.pool, truth)
    report = replace(result.report, hidden_labels=HiddenLabels(share, tuple(cons.to_dict(orient="records"))))
    items = result.items.assign(human_hidden=result.items["id"].map(truth))
    return replace(result, items=items, report=report)
