"""One split of the paper's protocol (PUAudit §5.1): hide the human labels of most labelled rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from puaudit_runtime.checks import check_fraction

from ..datasets.exclusions import LABELLED, item_status
from ..datasets.verdicts import MISSING, question_types


@dataclass(frozen=True)
class LabelSplit:
    """One protocol split: the table with hidden labels, the evaluation pool ids and their truth."""

    table: pd.DataFrame
    eval_ids: np.ndarray
    truth: pd.Series  # index: eval id -> hidden human verdict


def split_labels(table: pd.DataFrame, *, p_ratio: float, seed: int, split_by: str | None = None) -> LabelSplit:
    """Hide the human labels of all but a ``p_ratio`` share of each question type's labelled rows.

    Args:
        table: the comparison table.
        p_ratio: the share of each type's labelled rows (or groups) that stay labelled, in (0, 1).
        seed: the numpy seed of the split.
        split_by: a column whose groups of rows are kept or hidden together (None: rows); the share is
            then counted in groups, floor, at least one kept and one hidden when the type has two groups.

    Returns:
        The :class:`LabelSplit`: the table with the hidden labels missing, the evaluation ids and their
        hidden verdicts.

    Raises:
        ValueError: a bad ``p_ratio``, a ``split_by`` column absent or missing on rows, or fewer than 2
            labelled rows.
    """
    check_fraction("p_ratio", p_ratio)
    table = table.reset_index(drop=True)
    if split_by is not None:
        if split_by not in table.columns:
            raise ValueError(f"split_by={split_by!r} is not a column of the comparisons")
        if table[split_by].isna().any():
            bad = table.loc[table[split_by].isna(), "id"].astype(str).tolist()[:3]
            raise ValueError(f"split_by column {split_by!r} is missing on rows {bad}")
    status = item_status(table)["status"].to_numpy()
    labelled = np.flatnonzero(status == LABELLED)
    if len(labelled) < 2:
        raise ValueError(f"the protocol needs at least 2 labelled comparisons, have {len(labelled)}")
    types = question_types(table["question_type"])
    unit = table[split_by].astype(str).to_numpy(dtype=object) if split_by is not None else np.arange(len(table))
    # a group belongs to the type of its first labelled row (groups that straddle types stay whole)
    first = pd.Series(labelled).groupby(unit[labelled]).first()
    unit_type = pd.Series(types[first.to_numpy()], index=first.index)
    rng = np.random.default_rng(seed)
    hidden = []
    for t in sorted(pd.unique(unit_type.to_numpy()), key=str):
        groups = rng.permutation(np.sort(unit_type.index[unit_type.to_numpy() == t].to_numpy()))
        k = 0 if len(groups) == 1 else min(len(groups) - 1, max(1, int(np.floor(p_ratio * len(groups) + 1e-9))))
        hidden.extend(labelled[np.isin(unit[labelled], groups[k:])])
    hidden = np.sort(np.asarray(hidden, int))
    out = table.copy()
    truth = pd.Series(out.loc[hidden, "human"].to_numpy(), index=out.loc[hidden, "id"].astype(str).to_numpy())
    out.loc[hidden, "human"] = MISSING
    return LabelSplit(out, truth.index.to_numpy(), truth)
