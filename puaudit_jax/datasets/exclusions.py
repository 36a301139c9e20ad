"""The status of every comparison: usable as labelled, usable as unlabelled, or excluded (and why).

Later steps (the audit, the evaluation protocol) work on the rows whose status is ``"labelled"``
(human A/B and judge A/B: candidates for the positives P and the evaluation pool) or
``"unlabelled"`` (human missing, judge A/B: the pool U). Every other row is ``"excluded"`` with all
of its reasons, in this order, joined by ``"; "``:

- ``missing text: <column>`` -- question, response_a or response_b is None, empty or blank (for a
  list question: empty, or every turn blank)
- ``identical responses`` -- response_a == response_b after stripping whitespace (their difference
  vector would be zero); only checked when both texts are present
- ``judge tie`` -- the judge did not pick a side
- ``no judge verdict`` -- the judge's verdict is missing (e.g. a failed request of ``puaudit judge``)
- ``human tie`` -- the human verdict is a tie by the annotators' votes
- ``human split vote`` -- the human verdict is a tie because the votes were split (``human_split``
  column True; see :mod:`puaudit_jax.datasets.votes`)

The audit adds one reason of its own, ``zero difference embedding`` (the two responses embed to the same
vector; :data:`puaudit_jax.audit.ZERO_DIFF`). Nothing is dropped: :func:`item_status` has one row per
input row, in input order.
"""

from __future__ import annotations

import pandas as pd

from .verdicts import MISSING, TIE, A, B

LABELLED, UNLABELLED, EXCLUDED = "labelled", "unlabelled", "excluded"
REASONS = (
    "missing text: question",
    "missing text: response_a",
    "missing text: response_b",
    "identical responses",
    "judge tie",
    "no judge verdict",
    "human tie",
    "human split vote",
)


def is_blank(value) -> bool:
    """True for missing text: None, NaN, a blank string, or a list of blank strings (or empty)."""
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple)):
        return all(is_blank(item) for item in value)
    return True


def item_status(table: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison: ``id``, ``status`` (labelled | unlabelled | excluded), ``reason``.

    ``table`` is a validated comparison table. ``reason`` is "" for usable rows.
    """
    split = (
        table["human_split"].fillna(False).astype(bool)
        if "human_split" in table.columns
        else pd.Series(False, index=table.index)
    )
    reasons: list[list[str]] = [[] for _ in range(len(table))]
    for column in ("question", "response_a", "response_b"):
        for row, value in enumerate(table[column].tolist()):
            if is_blank(value):
                reasons[row].append(f"missing text: {column}")
    for row, (a, b) in enumerate(zip(table["response_a"].tolist(), table["response_b"].tolist())):
        if not is_blank(a) and not is_blank(b) and a.strip() == b.strip():
            reasons[row].append("identical responses")
    for row, (judge, human, is_split) in enumerate(zip(table["judge"], table["human"], split)):
        if judge == TIE:
            reasons[row].append("judge tie")
        if judge == MISSING:
            reasons[row].append("no judge verdict")
        if human == TIE:
            reasons[row].append("human split vote" if is_split else "human tie")
    status = []
    for row, human in enumerate(table["human"]):
        if reasons[row]:
            status.append(EXCLUDED)
        elif human == MISSING:
            status.append(UNLABELLED)
        elif human in (A, B):
            status.append(LABELLED)
        else:  # unreachable for a validated table
            raise ValueError(f"row {row + 1}: human verdict {human!r} is not normalised")
    return pd.DataFrame(
        {
            "id": table["id"].to_numpy(),
            "status": pd.Series(status, dtype="str"),
            "reason": pd.Series(["; ".join(r) for r in reasons], dtype="str"),
        }
    )


def exclusions(table: pd.DataFrame) -> pd.DataFrame:
    """The excluded rows of :func:`item_status`: ``id`` and ``reason`` (all reasons of the row)."""
    status = item_status(table)
    return status.loc[status["status"] == EXCLUDED, ["id", "reason"]].reset_index(drop=True)


def exclusion_counts(table: pd.DataFrame) -> dict[str, int]:
    """How many rows carry each reason (a row with two reasons counts under both), in REASONS order."""
    reasons = exclusions(table)["reason"].str.split("; ").explode()
    counts = reasons.value_counts()
    return {reason: int(counts.get(reason, 0)) for reason in REASONS}
