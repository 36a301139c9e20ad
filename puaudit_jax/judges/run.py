"""Re-judging a comparison table (seed Algorithm 2, Phase 1) with any :class:`~.base.Judge`.

:func:`judge_table` returns the table with the new verdicts in ``judge`` (so every downstream
command, e.g. ``puaudit evaluate``, reads them) and the previous ones in ``judge_original``. Rows
whose new verdict is not usable (unparsed, error, missing text) get ``judge = "tie"``: ties are
excluded, with a count and a reason, by the audit; ``judge_status`` says why
("ok" | "unparsed: ..." | "error: ..." | "skipped: missing text"), so nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..datasets.verdicts import TIE, is_null
from .base import OK, Verdict, progress_iter, row_inputs

JUDGE_COLUMNS = (
    "judge_original",
    "judge_status",
    "judge_type",
    "judge_text",
    "verdict_ab",
    "verdict_ba",
    "margin",
    "consistent",
    "omitted_tokens",
)


def has_text(row) -> bool:
    """True when question, response_a and response_b are all present (non-empty)."""

    def ok(v):
        if isinstance(v, (list, tuple, np.ndarray)):
            return len(v) > 0 and all(isinstance(x, str) and x.strip() for x in v)
        return not is_null(v) and str(v).strip() != ""

    return all(ok(row.get(c)) for c in ("question", "response_a", "response_b"))


def verdict_status(v: Verdict) -> str:
    if v.status == OK:
        return OK
    reason = v.details.get("reason") if v.details else None
    return f"{v.status}: {reason or v.raw[:200]}"


def verdict_columns(v: Verdict | None, skipped: str | None = None) -> dict:
    """The :data:`JUDGE_COLUMNS` values (except judge_original) of one verdict."""
    if v is None:
        return {
            "judge": TIE,
            "judge_status": f"skipped: {skipped}",
            "judge_type": None,
            "judge_text": None,
            "verdict_ab": None,
            "verdict_ba": None,
            "margin": np.nan,
            "consistent": None,
            "omitted_tokens": 0,
        }
    d = v.details or {}
    return {
        "judge": v.winner if v.status == OK else TIE,
        "judge_status": verdict_status(v),
        "judge_type": v.question_type,
        "judge_text": v.raw,
        "verdict_ab": d.get("verdict_ab"),
        "verdict_ba": d.get("verdict_ba"),
        "margin": d.get("margin", np.nan),
        "consistent": d.get("consistent"),
        "omitted_tokens": d.get("omitted_tokens", 0),
    }


def judge_table(
    table: pd.DataFrame,
    judge,
    *,
    chunk: int = 16,
    progress: bool = True,
    on_chunk: Callable[[pd.DataFrame], None] | None = None,
) -> pd.DataFrame:
    """``table`` re-judged by ``judge`` (see module docstring); one output row per input row, same
    order. ``on_chunk(partial)`` is called after every ``chunk`` rows with the rows done so far
    (for incremental writing of long runs)."""
    records = table.to_dict(orient="records")
    out = [None] * len(records)
    todo = []
    for i, r in enumerate(records):
        if has_text(r):
            todo.append(i)
        else:
            out[i] = verdict_columns(None, "missing text")
    chunks = [todo[k : k + chunk] for k in range(0, len(todo), chunk)]
    done = [i for i in range(len(records)) if out[i] is not None]

    def frame(rows):
        base = table.iloc[rows].copy()
        base = base.drop(columns=[c for c in JUDGE_COLUMNS if c in base.columns])  # re-judging a judged table
        base.insert(base.columns.get_loc("judge") + 1, "judge_original", base["judge"])
        cols = pd.DataFrame([out[i] for i in rows], index=base.index)
        for c in cols.columns:
            base[c] = cols[c].values
        return base.reset_index(drop=True)

    for group in progress_iter(chunks, len(chunks), progress, f"judging ({getattr(judge, 'name', 'judge')})"):
        verdicts = judge.judge_many([row_inputs(records[i]) for i in group])
        for i, v in zip(group, verdicts):
            out[i] = verdict_columns(v)
        done += group
        if on_chunk is not None:
            on_chunk(frame(sorted(done)))
    return frame(list(range(len(records))))
