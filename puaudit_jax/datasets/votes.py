"""Several human votes on one comparison -> one human verdict.

Both bundled sets have several votes on some comparisons (MT-Bench: 1-5 expert/author votes per
(question, pair, turn); LLMFAO: 1-5 crowd votes per pair). Two rules:

- ``"plurality"`` (default): the verdict with the most votes among A, B and tie; when the largest
  count is shared by two or more verdicts the item is a *split* and its verdict is ``"tie"``
  (``human_split`` = True). Examples: (A, A, B) -> A; (A, B) -> tie (split); (A, tie, tie) -> tie;
  (A, A, tie, tie, B) -> tie (split).
- ``"decisive"``: tie votes are abstentions; A if more A than B votes, B if more B than A, else tie
  (``human_split`` = True when there was at least one A and one B vote and they balance).
  Examples: (A, tie, tie) -> A; (A, B, tie) -> tie (split).

The plurality rule is the default because "tie" is a real answer of the annotators (in LLMFAO it is
the most frequent crowd vote) and a split vote is no evidence for either side. The counts behind
every verdict are kept as the extra columns ``n_votes``, ``votes_a``, ``votes_b``, ``votes_tie`` and
``human_split``, so a user can apply any other rule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .verdicts import TIE, A, B

VOTE_RULES = ("plurality", "decisive")
VOTE_COLUMNS = ("n_votes", "votes_a", "votes_b", "votes_tie", "human_split")


def aggregate_votes(votes: pd.DataFrame, key: list[str], *, rule: str = "plurality") -> pd.DataFrame:
    """One row per ``key`` with the human verdict and the vote counts.

    Args:
        votes: one row per vote, with the ``key`` columns and ``vote`` in {"A", "B", "tie"}.
        key: the columns that identify a comparison.
        rule: "plurality" (the most votes; tie when the top is shared) or "decisive" (A or B by the
            more A / B votes, tie votes not counted; tie when they are equal).

    Returns:
        ``key`` columns + ``human`` + :data:`VOTE_COLUMNS` (counts as int64).

    Raises:
        ValueError: an unknown rule, or votes other than A / B / tie.
    """
    if rule not in VOTE_RULES:
        raise ValueError(f"unknown vote rule {rule!r}; use one of {VOTE_RULES}")
    unknown = sorted(set(votes["vote"].unique()) - {A, B, TIE})
    if unknown:
        raise ValueError(f"votes must be normalised to A/B/tie, found {unknown}")
    counts = (
        votes.groupby(key, sort=True)["vote"]
        .value_counts()
        .unstack(fill_value=0)
        .reindex(columns=[A, B, TIE], fill_value=0)
    )
    a, b, t = (counts[c].to_numpy(dtype=np.int64) for c in (A, B, TIE))
    if rule == "plurality":
        top = np.maximum(np.maximum(a, b), t)
        n_top = (a == top).astype(int) + (b == top) + (t == top)
        split = n_top > 1
        human = np.where(split, TIE, np.where(a == top, A, np.where(b == top, B, TIE)))
    else:
        split = (a == b) & (a > 0)
        human = np.where(a > b, A, np.where(b > a, B, TIE))
    out = counts.index.to_frame(index=False)
    out["human"] = human.astype(object)
    out["n_votes"] = a + b + t
    out["votes_a"], out["votes_b"], out["votes_tie"] = a, b, t
    out["human_split"] = split
    return out
