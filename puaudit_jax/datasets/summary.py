"""Counts and raw judge-human agreement of a comparison table (for run reports and READMEs)."""

from __future__ import annotations

import pandas as pd

from .exclusions import EXCLUDED, LABELLED, UNLABELLED, exclusion_counts, item_status
from .verdicts import HUMAN_VERDICTS, JUDGE_VERDICTS, MISSING, A, B


def agreement(table: pd.DataFrame, *, ties: str = "exclude") -> tuple[float, int]:
    """Raw judge-human agreement from the verdicts alone, and the number of rows it is taken over.

    ``ties="exclude"`` (the PUAudit paper's consistency ratio): over rows where judge and human are both A
    or B, the share where they are equal. ``ties="include"``: over rows with a human verdict
    (A, B or tie), the share where the judge's three-way verdict equals the human's.
    Texts are not looked at (a row excluded for missing text still counts here). NaN when empty.
    """
    judge, human = table["judge"], table["human"]
    if ties == "exclude":
        rows = judge.isin([A, B]) & human.isin([A, B])
    elif ties == "include":
        rows = human != MISSING
    else:
        raise ValueError(f"ties must be 'exclude' or 'include', got {ties!r}")
    n = int(rows.sum())
    return (float((judge[rows] == human[rows]).mean()) if n else float("nan")), n


def summarize(table: pd.DataFrame) -> dict:
    """Counts by status, verdict and exclusion reason, and the raw agreement (both tie conventions)."""
    status = item_status(table)["status"]
    agree, n_agree = agreement(table, ties="exclude")
    agree3, n_agree3 = agreement(table, ties="include")
    return {
        "n": len(table),
        "labelled": int((status == LABELLED).sum()),
        "unlabelled": int((status == UNLABELLED).sum()),
        "excluded": int((status == EXCLUDED).sum()),
        "exclusion_reasons": exclusion_counts(table),
        "judge": {v: int((table["judge"] == v).sum()) for v in JUDGE_VERDICTS},
        "human": {v: int((table["human"] == v).sum()) for v in HUMAN_VERDICTS},
        "agreement": agree,
        "agreement_n": n_agree,
        "agreement_with_ties": agree3,
        "agreement_with_ties_n": n_agree3,
    }
