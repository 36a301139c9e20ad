"""A file's records as read, before any format gives them meaning: JSON lines, a JSON array, CSV, parquet.

The encoding is told from the content, never only from the suffix: parquet by its magic bytes, JSON
by a first ``[`` (an array of records) or ``{`` (one record per line), anything else as CSV. A
suffix-less file or a ``.json`` holding records therefore reads like any other. Every record keeps
a label that names it for people (``line 7`` for JSON lines and CSV, ``record 3`` for a JSON array
and parquet), so that a format's reader can name the record and the field of a problem.

Text is never type-guessed: in CSV, the comparison table's text and verdict columns are read as
strings (a response "42" stays "42"), and JSON values keep their JSON types.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .comparisons import (
    CORE_COLUMNS,
    LIST_COLUMNS,
    TEXT_COLUMNS,
    ComparisonValidationError,
    ValidationProblem,
    encoding_of,
)

ENCODINGS = ("jsonl", "json", "csv", "parquet")
_CSV_NA_VALUES = ["", "NA", "N/A", "NaN", "nan", "null", "None", "<NA>", "#N/A"]
_AS_TEXT = ("id", "judge", "human", "question_type") + TEXT_COLUMNS + LIST_COLUMNS


@dataclass(frozen=True)
class Records:
    """One file's records.

    Attributes:
        path: the file read.
        frame: one row per record, the file's fields as columns, in file order.
        label: row position (0-based) -> the record's name for people ("line 7", "record 3").
        encoding: "jsonl", "json", "csv" or "parquet".
    """

    path: Path
    frame: pd.DataFrame
    label: Callable[[int], str]
    encoding: str

    @property
    def columns(self) -> frozenset[str]:
        """The field names of the records."""
        return frozenset(map(str, self.frame.columns))


def read_records(path: str | Path, encoding: str | None = None) -> Records:
    """The records of ``path``; ``encoding`` (one of :data:`ENCODINGS`) forces one, else it is sniffed.

    Args:
        path: a file of records.
        encoding: None (told from the content) or one of :data:`ENCODINGS`.

    Raises:
        ValueError: a folder, not UTF-8 text, an empty file, or a malformed one (the line or record named).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a file of records")
    kind = encoding or sniff(path)
    if kind not in ENCODINGS:
        raise ValueError(f"{path}: unknown encoding {kind!r} (use one of {', '.join(ENCODINGS)})")
    if kind == "parquet":
        frame = pd.read_parquet(path)
        return Records(path, frame, lambda row: f"record {row + 1}", kind)
    check_utf8(path)
    if kind == "csv":
        frame, label = _read_csv(path)
    elif kind == "json":
        frame, label = _read_json_array(path)
    else:
        frame, label = _read_jsonl(path)
    return Records(path, frame, label, kind)


def sniff(path: Path) -> str:
    """The encoding of ``path`` from its first bytes (parquet magic, ``[``, ``{``), else its suffix, else csv."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if head.startswith(b"PAR1"):
        return "parquet"
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if first == b"[":
        return "json"
    if first == b"{":
        return "jsonl"
    if not first:
        raise ValueError(f"{path}: the file is empty (no header line, no records)")
    try:
        suffix = encoding_of(path)
    except ValueError:
        return "csv"
    return "csv" if suffix in ("json", "jsonl") else suffix


def check_utf8(path: Path) -> None:
    """ValueError naming the line and byte of the first bytes that are not UTF-8 text."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path}: line {line}: not UTF-8 text (byte {data[err.start]:#04x} at offset "
                         f"{err.start}: {err.reason}); save the file as UTF-8") from None  # fmt: skip


def _frame(records: list[dict]) -> pd.DataFrame:
    """Records as a frame; the text and verdict columns keep their JSON values (no float coercion of ints)."""
    if not records:
        return pd.DataFrame(columns=list(CORE_COLUMNS))
    frame = pd.DataFrame.from_records(records)
    for column in _AS_TEXT + ("turn",):
        if column in frame.columns:
            frame[column] = pd.Series([r.get(column) for r in records], dtype=object)
    return frame


def _read_json_array(path: Path) -> tuple[pd.DataFrame, Callable[[int], str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except ValueError as error:
        raise ValueError(f"{path}: not valid JSON: {error}") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON array of records, got a JSON {type(data).__name__}")
    problems = [ValidationProblem(f"expected a JSON object, got {type(r).__name__}", label=f"record {k + 1}")
                for k, r in enumerate(data) if not isinstance(r, dict)]  # fmt: skip
    if problems:
        raise ComparisonValidationError(str(path), problems)
    return _frame(data), lambda row: f"record {row + 1}"


def _read_jsonl(path: Path) -> tuple[pd.DataFrame, Callable[[int], str]]:
    records, lines, problems = [], [], []
    with open(path, encoding="utf-8-sig") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                problems.append(ValidationProblem(f"invalid JSON: {error}", label=f"line {lineno}"))
                continue
            if not isinstance(record, dict):
                problems.append(
                    ValidationProblem(f"expected a JSON object, got {type(record).__name__}", label=f"line {lineno}")
                )
                continue
            records.append(record)
            lines.append(lineno)
    if problems:
        _refuse_one_object(path)
        raise ComparisonValidationError(str(path), problems)
    return _frame(records), lambda row: f"line {lines[row]}"


def _refuse_one_object(path: Path) -> None:
    """A file that is one JSON object (records under a key?) is said to be one, not as a line error per line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except ValueError:
        return
    if isinstance(data, dict):
        lists = [k for k, v in data.items() if isinstance(v, list)]
        hint = f"; the records may be the list under {lists[0]!r}: save that list alone" if lists else ""
        raise ValueError(f"{path}: one JSON object (keys: {', '.join(map(str, list(data)[:8]))}), not a JSON array "
                         f"of records or JSON lines{hint}")  # fmt: skip


def _read_csv(path: Path) -> tuple[pd.DataFrame, Callable[[int], str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        raw_header = next(csv.reader(handle), [])
    if not raw_header:
        raise ValueError(f"{path}: the file is empty (no header line: id, question, response_a, ...)")
    repeated = sorted({c for c in raw_header if raw_header.count(c) > 1})
    if repeated:
        raise ValueError(f"{path}: line 1: column(s) {repeated} appear more than once in the header")
    header = pd.read_csv(path, nrows=0).columns.tolist()
    as_text = [c for c in header if c in _AS_TEXT]
    try:
        frame = pd.read_csv(
            path,
            dtype={c: str for c in as_text},
            keep_default_na=False,
            na_values={c: _CSV_NA_VALUES for c in header if c not in as_text},
        )
    except pd.errors.ParserError as err:  # e.g. "Expected 9 fields in line 82, saw 10"
        raise ValueError(
            f"{path}: not a well-formed CSV table: {str(err).strip().removeprefix('Error tokenizing data. C error: ')}"
        ) from None
    for column in as_text:  # an empty cell is missing; any other text is kept verbatim
        frame[column] = pd.Series([None if v == "" else v for v in frame[column].tolist()], dtype=object)
    lines: list[int] = []

    def label(row: int) -> str:
        if not lines:
            lines.extend(_csv_record_lines(path))
        return f"line {lines[row]}" if row < len(lines) else f"record {row + 1}"

    return frame, label


def _csv_record_lines(path: Path) -> list[int]:
    """1-based file line on which each data record starts (quoted fields may span lines)."""
    starts = []
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        previous_end = reader.line_num
        for _ in reader:
            starts.append(previous_end + 1)
            previous_end = reader.line_num
    return starts
