"""What every reader of a file format returns: the comparison table and a report of what was read.

A reader (one module per format, registered in :mod:`.formats`) is a pure function from a file's
records to a :class:`Read`. Its :class:`ReadReport` accounts for every record: how many were read,
how many rows the table has, the verdicts found (ties and missing ones counted), the records whose
verdict could not be used (named by file and line), and the rule that made the ids.

Ids are stable: they depend only on the record (never on its position or on the other files read
with it). A format with an id field uses it; the others hash the fields that identify the
comparison (:func:`content_id`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .comparisons import validate_comparisons
from .verdicts import HUMAN_VERDICTS, MISSING, normalize_verdict

__all__ = ["Read", "ReadReport", "align_verdicts", "content_id", "slug", "table_of", "verdict_counts", "verdicts_of"]


def content_id(prefix: str, *parts) -> str:
    """``prefix`` + the first 16 hex digits of SHA-256 of the JSON list of ``parts`` (text, numbers, None).

    Line ends are normalised first (Windows' and old Mac's to a newline), so a copy of a file saved on
    Windows gives the same ids.

    Args:
        prefix: names the format, e.g. ``"alpaca_eval:"``.
        parts: the fields that identify one comparison, in a fixed order.
    """
    text = json.dumps([_plain(p) for p in parts], ensure_ascii=False, separators=(",", ":"))
    return prefix + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _plain(value):
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, str):
        return value.replace("\r\n", "\n").replace("\r", "\n")  # a file saved with Windows line ends: same id
    return value if isinstance(value, (int, float, bool)) else str(value)


def align_verdicts(table_ids, ids, verdicts, where) -> tuple[np.ndarray, int]:
    """Another file's verdicts on the rows of a table, by id: (verdicts in table order, rows it lacks).

    Args:
        table_ids: (n,) the table's ids.
        ids: (k,) the other file's ids, one per record.
        verdicts: (k,) its verdicts in normal form.
        where: record position -> its name for people ("other.json record 8").

    Raises:
        ValueError: an id twice in the other file, or one the table lacks (the first named, the count given).
    """
    index = pd.Index(list(ids))
    if index.has_duplicates:
        raise ValueError(f"{where(int(np.flatnonzero(index.duplicated())[0]))}: the same comparison appears twice")
    unknown = ~index.isin(pd.Index(list(table_ids)))
    if unknown.any():
        raise ValueError(f"{where(int(np.flatnonzero(unknown)[0]))}: no comparison of the first file has this "
                         f"question and these responses ({int(unknown.sum())} such records): combine files of the "
                         "same comparisons only")  # fmt: skip
    aligned = pd.Series(np.asarray(verdicts, dtype=object), index=index).reindex(list(table_ids))
    return aligned.fillna(MISSING).to_numpy(dtype=object), int(len(table_ids) - len(index))


def slug(name: str) -> str:
    """``name`` as part of a column name: lower case, runs of other characters than a-z and 0-9 as one ``_``."""
    return re.sub(r"[^0-9a-z]+", "_", str(name).lower()).strip("_")


def verdicts_of(values, where: Callable[[int], str]) -> list[str]:
    """Verdicts in normal form (missing allowed), ValueError prefixed by ``where(k)`` at the first bad one.

    Args:
        values: (n,) verdicts as spelt in a file.
        where: position -> the record and field for the message ("labels.csv line 3: column 'human'").
    """
    out = []
    for k, value in enumerate(values):
        try:
            out.append(normalize_verdict(value, allow_missing=True))
        except ValueError as err:
            raise ValueError(f"{where(k)}: {err}") from None
    return out


def table_of(sources: Sequence, row: Callable) -> pd.DataFrame:
    """The validated comparison table of one row per record of ``sources``, in order.

    Args:
        sources: the files' :class:`~.records.Records`.
        row: a file's records -> the function (record as a dict, its name "file line 7") -> its row.
    """
    rows, labels = [], []
    for records in sources:
        make = row(records)
        for k, record in enumerate(records.frame.to_dict(orient="records")):
            where = f"{records.path.name} {records.label(k)}"
            rows.append(make(record, where))
            labels.append(where)
    source = ", ".join(str(s.path) for s in sources)
    return validate_comparisons(pd.DataFrame.from_records(rows), source=source, row_labels=labels)


def verdict_counts(verdicts) -> dict[str, int]:
    """``{"A": n, "B": n, "tie": n, "missing": n}`` of verdicts in normal form."""
    values = pd.Series(np.asarray(verdicts, dtype=object))
    return {v: int((values == v).sum()) for v in HUMAN_VERDICTS}


@dataclass(frozen=True)
class ReadReport:
    """What a reader read, so that a user sees it and no record goes unaccounted.

    Attributes:
        format: the format's name (a key of :data:`puaudit_jax.datasets.formats.FORMATS`).
        files: the files read, in order.
        records: records read from all files.
        rows: rows of the comparison table.
        judge: verdict -> count of the ``judge`` column (A, B, tie, missing).
        human: verdict -> count of the ``human`` column (missing = unlabelled).
        ids: the rule that made the ids.
        unreadable: verdicts that could not be used, each "file line N: why" (their rows are kept,
            the verdict missing).
        notes: other facts of the format worth a line (a seed, a soft win rate, columns added).
    """

    format: str
    files: tuple[str, ...]
    records: int
    rows: int
    judge: Mapping[str, int]
    human: Mapping[str, int]
    ids: str
    unreadable: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def lines(self, limit: int = 5) -> list[str]:
        """The report for people, one fact a line; ``limit``: unreadable records listed by name."""

        def counts(c):
            return ", ".join(f"{k} {v:,}" for k, v in c.items() if v)

        out = [
            f"read {self.records:,} records of {len(self.files)} file(s) as {self.format}: {self.rows:,} comparisons",
            f"judge verdicts: {counts(self.judge) or 'none'}",
            f"human labels: {counts(self.human) or 'none'}",
            f"ids: {self.ids}",
        ]
        if self.unreadable:
            out.append(f"{len(self.unreadable)} verdict(s) could not be used (kept as missing):")
            out += [f"  {u}" for u in self.unreadable[:limit]]
            if len(self.unreadable) > limit:
                out.append(f"  ... and {len(self.unreadable) - limit} more")
        return out + list(self.notes)


@dataclass(frozen=True)
class Read:
    """A comparison table with the report of its reading.

    Attributes:
        table: the validated comparison table (:func:`puaudit_jax.datasets.validate_comparisons`).
        report: what was read (:class:`ReadReport`).
    """

    table: pd.DataFrame = field(repr=False)
    report: ReadReport


def report_of(format: str, files, records: int, table: pd.DataFrame, ids: str, unreadable=(), notes=()) -> ReadReport:
    """The :class:`ReadReport` of ``table`` read from ``records`` records of ``files``.

    Args:
        format: the format's name (a key of :data:`puaudit_jax.datasets.formats.FORMATS`).
        files: the files read, in order.
        records: records read from all files.
        table: the comparison table they made (its ``judge`` and ``human`` verdicts are counted).
        ids: the rule that made the ids.
        unreadable: verdicts that could not be used, each "file line N: why".
        notes: other facts of the format worth a line.
    """
    return ReadReport(
        format=format,
        files=tuple(str(f) for f in files),
        records=int(records),
        rows=len(table),
        judge=verdict_counts(table["judge"]),
        human=verdict_counts(table["human"]),
        ids=ids,
        unreadable=tuple(unreadable),
        notes=tuple(notes),
    )
