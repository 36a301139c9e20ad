"""The package's own comparison table as a file, in any encoding :mod:`.records` reads.

Records with ``question``, ``response_a``, ``response_b``, ``judge`` (and ``id``, ``human``, ... as
:mod:`.comparisons` describes), as JSON lines, a JSON array, CSV or parquet.

Any other table reads as this one once its fields are mapped onto these names (``--columns
question=input,response_a=output_1,...``). ``id`` = the record's ``id``; a table without one gets
:func:`~puaudit_jax.datasets.reading.content_id` ``("row:", question, response_a, response_b)``.
"""

from __future__ import annotations

import pandas as pd

from .comparisons import LIST_COLUMNS, as_list_cell, validate_comparisons
from .reading import Read, content_id, report_of
from .records import Records

NAME = "comparisons"
FIELDS = frozenset({"question", "response_a", "response_b", "judge"})
IDS = "the record's id, else row: + SHA-256 of [question, response_a, response_b] (16 hex digits)"


def detect(columns: frozenset[str]) -> bool:
    """Whether records with these fields are a comparison table."""
    return FIELDS <= columns


def _frame(records: Records) -> pd.DataFrame:
    frame = records.frame.copy()
    for column in LIST_COLUMNS:
        if column in frame.columns:
            frame[column] = pd.Series(
                [as_list_cell(v) for v in frame[column].tolist()], index=frame.index, dtype=object
            )
    if "id" not in frame.columns:  # from the texts there are; validation names a missing text column
        texts = [
            frame[c] if c in frame.columns else [None] * len(frame) for c in ("question", "response_a", "response_b")
        ]
        frame.insert(0, "id", [content_id("row:", *p) for p in zip(*texts)])
    return frame


def read(sources: list[Records], config=None) -> Read:
    """The comparison table of one or more comparison files, in order.

    Args:
        sources: the files' records.
        config: the read settings (unused: the format has none).
    """
    frames = [_frame(r) for r in sources]
    hint = "" if detect(sources[0].columns) else " (other field names map onto these with --columns NAME=FIELD)"
    if len(sources) == 1:
        table = validate_comparisons(frames[0], source=f"{sources[0].path}{hint}", row_labels=sources[0].label)
    else:
        labels = [f"{r.path.name} {r.label(k)}" for r in sources for k in range(len(r.frame))]
        source = ", ".join(str(r.path) for r in sources) + hint
        table = validate_comparisons(pd.concat(frames, ignore_index=True), source=source, row_labels=labels)
    return Read(table, report_of(NAME, [r.path for r in sources], len(table), table, IDS))
