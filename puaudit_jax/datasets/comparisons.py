"""The comparison table: its schema, its validation, and reading / writing jsonl, csv and parquet.

A comparison table is a pandas DataFrame with one row per pairwise comparison. Core columns come
first, in this order; every other column is an extra column and is kept as read.

=============  ===============================  ==================================================
column         values                           meaning
=============  ===============================  ==================================================
id             str, non-empty, unique           the comparison's identifier (integers -> str)
question       str | list[str] | None           the user message; a multi-turn comparison stores
                                                the user turns in order (see "Multi-turn")
response_a     str | None                       the judged response of the first model
response_b     str | None                       the judged response of the second model
judge          "A" | "B" | "tie" | "missing"    the judge's verdict on every row; "missing" (that
                                                word: a blank cell is an error) = the judge gave
                                                none (a failed request of ``puaudit judge``): the
                                                row is excluded and counted, never a verdict
human          "A" | "B" | "tie" | "missing"    the human verdict; "missing" = unlabelled.
                                                Optional column: absent -> all "missing"
question_type  str | None                       optional grouping label; absent -> None
turn           Int64 >= 1 | <NA>                optional turn number; absent -> <NA>
=============  ===============================  ==================================================

Judge-side evidence: optional columns the audit reads when they are present (kept as extra columns,
validated and normalised like the core ones):

================  ===============================  ===============================================
column            values                           meaning
================  ===============================  ===============================================
judge_swapped     "A" | "B" | "tie" | "missing"    the same judge with the two responses shown in
                                                   the other order, in the original frame ("A"
                                                   means response_a)
judge_confidence  float in [0, 1] | missing        the judge's confidence in its verdict (e.g. the
                                                   probability of its verdict token)
================  ===============================  ===============================================

Other judges' verdicts live in columns the user names (``--other-judges COL,...``);
:func:`other_judge_verdicts` validates them. Model names, for per-model targets (win rates, the
leaderboard), live in the optional extra columns ``model_a`` / ``model_b``: when a table has them,
every row names both models (a missing or empty name is a validation error).

Verdict spellings accepted on input are listed in :mod:`puaudit_jax.datasets.verdicts`.

Missing text (None, NaN or an empty / whitespace-only string in question, response_a or response_b;
the empty string is stored as None) is *not* a validation error: such rows are kept and reported
with a reason by :func:`puaudit_jax.datasets.exclusions.item_status`. Validation errors are problems
that make a row unreadable: a missing required column, an empty or duplicate id, an unknown verdict,
a missing judge verdict, text that is not a string, a bad turn number, a history cell that is not
its side's earlier answers, a missing model name. All problems of a file are
collected and raised together in one :class:`ComparisonValidationError`, each naming the row (file
line for jsonl and csv, 1-based record number for parquet and DataFrames), the id when known, and
the column.

**Multi-turn**

``question`` may be a list of user turns ``[user_1, ..., user_k]``; ``response_a`` / ``response_b``
are then the models' answers to ``user_k`` (what the judge compared). The models' own earlier
answers live in the extra columns ``history_a`` / ``history_b`` (``list[str]`` of length k - 1 on
each row whose question has k >= 2 turns and no missing text), because they differ between the two
sides; encoding a table checks first that it has them (:func:`check_histories`).
:func:`conversation` rebuilds a side's full chat.

**File formats**

- jsonl: one JSON object per line; lists are stored natively; blank lines are skipped.
- csv: list cells of ``question``, ``history_a`` and ``history_b`` are JSON arrays
  (``["turn 1", "turn 2"]``); a cell is read back as a list only when the whole cell parses as a
  JSON array of strings. Empty cells of text columns are missing text; text is never type-guessed
  (a response "42" stays the string "42").
- parquet: list columns are stored natively; a column that mixes text and lists (``question`` of
  MT-Bench) stores its list cells as JSON arrays, decoded as for csv.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit_runtime.files import atomic_path

from .exclusions import is_blank
from .verdicts import MISSING, A, is_null, normalize_verdict

REQUIRED_COLUMNS = ("id", "question", "response_a", "response_b", "judge")
OPTIONAL_COLUMNS = ("human", "question_type", "turn")
CORE_COLUMNS = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
EVIDENCE_COLUMNS = ("judge_swapped", "judge_confidence")
"""Optional columns of judge-side evidence, validated when present (module docstring)."""
TEXT_COLUMNS = ("question", "response_a", "response_b")
LIST_COLUMNS = ("question", "history_a", "history_b")
"""Columns whose cells may be lists of strings (decoded from JSON arrays in csv / parquet)."""
HISTORY_COLUMNS = ("history_a", "history_b")
"""Each side's earlier answers of a multi-turn comparison (see "Multi-turn")."""
MODEL_COLUMNS = ("model_a", "model_b")
"""Optional extra columns naming the two models; when present, a name on every row."""

_MAX_LISTED_PROBLEMS = 50
_CSV_NA_VALUES = ["", "NA", "N/A", "NaN", "nan", "null", "None", "<NA>", "#N/A"]


@dataclass(frozen=True)
class ValidationProblem:
    """One problem found while validating a comparison table.

    ``row`` is the 0-based position in the table (None for table-level problems such as a missing
    column); ``label`` names that row for people ("line 7", "row 3").
    """

    message: str
    row: int | None = None
    label: str | None = None
    id: str | None = None
    column: str | None = None

    def __str__(self) -> str:
        where = []
        if self.label is not None:
            where.append(self.label if self.id is None else f"{self.label} (id {self.id!r})")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        return (": ".join(where) + ": " if where else "") + self.message


class ComparisonValidationError(ValueError):
    """Raised with every problem of a table; ``problems`` holds them as :class:`ValidationProblem`."""

    def __init__(self, source: str, problems: Sequence[ValidationProblem]):
        self.source = source
        self.problems = tuple(problems)
        lines = [f"{len(self.problems)} problem(s) in {source}:"]
        lines += [f"  {p}" for p in self.problems[:_MAX_LISTED_PROBLEMS]]
        if len(self.problems) > _MAX_LISTED_PROBLEMS:
            lines.append(f"  ... and {len(self.problems) - _MAX_LISTED_PROBLEMS} more")
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Comparison:
    """One comparison, for building tables in code (see :func:`comparisons_to_frame`)."""

    id: str
    question: str | tuple[str, ...] | None
    response_a: str | None
    response_b: str | None
    judge: str
    human: str = MISSING
    question_type: str | None = None
    turn: int | None = None
    extra: Mapping[str, object] = field(default_factory=dict)


def comparisons_to_frame(items: Iterable[Comparison], *, source: str = "comparisons") -> pd.DataFrame:
    """Validated comparison table from :class:`Comparison` objects (``extra`` -> extra columns)."""
    records = []
    for item in items:
        record = {
            "id": item.id,
            "question": list(item.question) if isinstance(item.question, tuple) else item.question,
            "response_a": item.response_a,
            "response_b": item.response_b,
            "judge": item.judge,
            "human": item.human,
            "question_type": item.question_type,
            "turn": item.turn,
        }
        clash = set(item.extra) & set(record)
        if clash:
            raise ValueError(f"comparison {item.id!r}: extra keys {sorted(clash)} clash with core columns")
        records.append({**record, **item.extra})
    frame = pd.DataFrame.from_records(records, columns=None if records else list(CORE_COLUMNS))
    return validate_comparisons(frame, source=source)


def conversation(question, history, response) -> list[dict[str, str]]:
    """A side's full chat as ``[{"role": "user" | "assistant", "content": str}, ...]``.

    Args:
        question: the user text, or the list of user turns.
        history: the side's earlier answers (one fewer than the user turns; None or [] for single-turn).
        response: the judged answer (the last assistant turn).

    Returns:
        The messages, user and assistant alternating.

    Raises:
        ValueError: a number of earlier answers other than the user turns less one.
    """
    turns = [question] if isinstance(question, str) else list(question)
    earlier = [] if history is None else list(history)
    if len(earlier) != len(turns) - 1:
        raise ValueError(f"{len(turns)} user turns need {len(turns) - 1} earlier answers, got {len(earlier)}")
    messages = []
    for k, user in enumerate(turns):
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": earlier[k] if k < len(earlier) else response})
    return messages


# --------------------------------------------------------------------------------------------------
# validation


def validate_comparisons(
    frame: pd.DataFrame, *, source: str = "table", row_labels: Sequence[str] | Callable[[int], str] | None = None
) -> pd.DataFrame:
    """Check ``frame`` against the schema and return it in normal form (a new DataFrame).

    Normal form: core columns first (absent optional ones added), ids as str, verdicts normalised,
    missing text as None, list questions as ``list[str]``, ``turn`` as nullable Int64, a fresh
    RangeIndex; extra columns unchanged.

    Args:
        frame: a comparison table.
        source: names the table in the error.
        row_labels: names rows in messages: one label per row, or a function of the 0-based position
            (None: "row <1-based position>").

    Returns:
        The table in normal form.

    Raises:
        ComparisonValidationError: listing every problem (a ValueError).
    """
    label = _labeller(row_labels)
    _check_column_names(frame, source)
    columns, problems = _check_cells(frame, label)
    if problems:
        problems.sort(key=lambda p: p.row if p.row is not None else -1)
        raise ComparisonValidationError(source, problems)
    return _normal_form(frame, columns)


def _check_column_names(frame: pd.DataFrame, source: str) -> None:
    """Raise if a required column is missing or a column name appears more than once."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        problems = [
            ValidationProblem(f"required column is missing (have: {list(frame.columns)})", column=c) for c in missing
        ]
        raise ComparisonValidationError(source, problems)
    duplicated_names = frame.columns[frame.columns.duplicated()].tolist()
    if duplicated_names:
        raise ComparisonValidationError(
            source, [ValidationProblem("column appears more than once", column=c) for c in duplicated_names]
        )


def _check_cells(frame: pd.DataFrame, label: Callable[[int], str]) -> tuple[dict[str, list], list[ValidationProblem]]:
    """Check every cell of the core columns (absent optional ones read as missing).

    Returns (columns, problems): core column -> its normalised values (one per row), and every
    problem found, in column order (unsorted).
    """
    problems: list[ValidationProblem] = []
    n = len(frame)
    ids, id_problems = _check_ids(frame["id"].tolist(), label)
    display_ids = [i if i else None for i in ids]

    def add(row: int, column: str, message: str) -> None:
        problems.append(ValidationProblem(message, row=row, label=label(row), id=display_ids[row], column=column))

    for row, message in id_problems:
        add(row, "id", message)
    columns: dict[str, list] = {"id": ids}
    for column in TEXT_COLUMNS:
        columns[column] = [
            _check_text(v, allow_list=column == "question", report=lambda m, r=row, c=column: add(r, c, m))
            for row, v in enumerate(frame[column].tolist())
        ]
    judged = frame["judge"].tolist()
    unjudged = [isinstance(v, str) and v.strip().lower() == MISSING for v in judged]  # explicit: no verdict
    columns["judge"] = _check_verdicts(
        [A if u else v for u, v in zip(unjudged, judged)], allow_missing=False, report=lambda r, m: add(r, "judge", m)
    )
    columns["judge"] = [MISSING if u else v for u, v in zip(unjudged, columns["judge"])]
    human = frame["human"].tolist() if "human" in frame.columns else [MISSING] * n
    columns["human"] = _check_verdicts(human, allow_missing=True, report=lambda r, m: add(r, "human", m))
    qtypes = frame["question_type"].tolist() if "question_type" in frame.columns else [None] * n
    columns["question_type"] = [
        _check_label(v, report=lambda m, r=row: add(r, "question_type", m)) for row, v in enumerate(qtypes)
    ]
    turns = frame["turn"].tolist() if "turn" in frame.columns else [None] * n
    columns["turn"] = [_check_turn(v, report=lambda m, r=row: add(r, "turn", m)) for row, v in enumerate(turns)]
    if "judge_swapped" in frame.columns:
        columns["judge_swapped"] = _check_verdicts(
            frame["judge_swapped"].tolist(), allow_missing=True, report=lambda r, m: add(r, "judge_swapped", m)
        )
    if "judge_confidence" in frame.columns:
        columns["judge_confidence"] = [
            _check_probability(v, report=lambda m, r=row: add(r, "judge_confidence", m))
            for row, v in enumerate(frame["judge_confidence"].tolist())
        ]
    texts = zip(*(columns[c] for c in TEXT_COLUMNS))
    histories = _history_problems(frame, list(texts), absent_ok=True)
    for row, column, message in histories + _model_problems(frame):
        add(row, column, message)
    return columns, problems


def check_histories(table: pd.DataFrame, *, source: str = "table") -> None:
    """Raise :class:`ComparisonValidationError` naming each multi-turn row without its sides' earlier answers.

    What encoding a table needs (each side's conversation so far): :func:`validate_comparisons`
    checks the history cells of a table that has the columns, this also that a table with multi-turn
    rows has them. Run before anything is encoded.
    """
    ids = table["id"].astype(str).tolist()
    texts = zip(*([as_list_cell(v) for v in table[c].tolist()] for c in TEXT_COLUMNS))
    problems = [
        ValidationProblem(message, row=row, label=f"row {row + 1}", id=ids[row], column=column)
        for row, column, message in _history_problems(table, list(texts), absent_ok=False)
    ]
    if problems:
        raise ComparisonValidationError(source, problems)


def _history_problems(frame: pd.DataFrame, texts: list[tuple], absent_ok: bool) -> list[tuple[int, str, str]]:
    """(row, column, message) of each multi-turn row whose history_a / history_b is not its earlier answers.

    ``texts``: (question, response_a, response_b) of each row. A question of k >= 2 user turns needs
    each side's k - 1 earlier answers (a list of str); rows with missing text are left out (they are
    excluded, never encoded). An absent history column is one problem, on the first row needing it,
    unless ``absent_ok`` (a table that is only read and written, not encoded, may lack them).
    """
    multi = [row for row, (q, a, b) in enumerate(texts) if isinstance(q, list) and len(q) > 1
             and not any(is_blank(t) for t in (q, a, b))]  # fmt: skip
    out = []
    for column in HISTORY_COLUMNS if multi else ():
        if column not in frame.columns:
            if absent_ok:
                continue
            out.append((multi[0], column, f"column is missing; the {len(multi)} rows whose question is a list of "
                        "user turns need each side's earlier answers (see Multi-turn)"))  # fmt: skip
            continue
        values = frame[column].tolist()
        for row in multi:
            need, history = len(texts[row][0]) - 1, as_list_cell(values[row])
            if not (isinstance(history, list) and len(history) == need and all(isinstance(h, str) for h in history)):
                out.append((row, column, f"a {need + 1}-turn question needs this side's {need} earlier "
                            f"answer(s) as a list of text, got {_short(history)}"))  # fmt: skip
    return out


def _model_problems(frame: pd.DataFrame) -> list[tuple[int, str, str]]:
    """(row, column, message) of each missing or empty model name in the model_a / model_b columns present."""
    out = []
    for column in (c for c in MODEL_COLUMNS if c in frame.columns):
        for row, value in enumerate(frame[column].tolist()):
            if _is_missing_name(value):
                out.append((row, column, f"missing model name ({_short(value)}); every row needs one"))
    return out


def _is_missing_name(value) -> bool:
    """A model name cell that names no model: null (None, NaN, NA) or blank text."""
    return is_null(value) or (isinstance(value, str) and not value.strip())


def _normal_form(frame: pd.DataFrame, columns: dict[str, list]) -> pd.DataFrame:
    """The validated table, on a fresh RangeIndex.

    The checked core columns with their dtypes, then ``frame``'s extra columns unchanged (list-valued
    ones as ``list[str]`` cells).
    """
    out = pd.DataFrame(
        {
            "id": pd.Series(columns["id"], dtype="str"),
            "question": pd.Series(columns["question"], dtype=object),
            "response_a": pd.Series(columns["response_a"], dtype=object),
            "response_b": pd.Series(columns["response_b"], dtype=object),
            "judge": pd.Series(columns["judge"], dtype="str"),
            "human": pd.Series(columns["human"], dtype="str"),
            "question_type": pd.Series(columns["question_type"], dtype=object),
            "turn": pd.array(columns["turn"], dtype="Int64"),
        }
    )
    extras = [c for c in frame.columns if c not in CORE_COLUMNS]
    if extras:
        rest = frame[extras].reset_index(drop=True)
        if "judge_swapped" in rest.columns:
            rest["judge_swapped"] = pd.Series(columns["judge_swapped"], dtype="str")
        if "judge_confidence" in rest.columns:
            rest["judge_confidence"] = pd.Series(columns["judge_confidence"], dtype="float64")
        for column in LIST_COLUMNS:
            if column in rest.columns:
                rest[column] = pd.Series([as_list_cell(v) for v in rest[column].tolist()], dtype=object)
        out = pd.concat([out, rest], axis=1)
    return out


def _labeller(row_labels) -> Callable[[int], str]:
    if row_labels is None:
        return lambda row: f"row {row + 1}"
    if callable(row_labels):
        return row_labels
    return lambda row: row_labels[row]


def _check_ids(values: list, label: Callable[[int], str]) -> tuple[list[str], list[tuple[int, str]]]:
    """Ids as str ("" where unusable) and (row, message) problems: wrong type, empty, padded, repeated."""
    ids: list[str] = []
    problems: list[tuple[int, str]] = []
    first_seen: dict[str, int] = {}
    for row, value in enumerate(values):
        if is_null(value):
            text = ""
        elif isinstance(value, str):
            text = value.strip()
            if text and text != value:
                problems.append((row, f"id {value!r} has leading or trailing whitespace"))
        elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            text = str(int(value))
        else:
            problems.append((row, f"id must be a string or an integer, got {type(value).__name__} {_short(value)}"))
            ids.append("")
            continue
        ids.append(text)
        if not text:
            problems.append((row, "empty id"))
        elif text in first_seen:
            problems.append((row, f"duplicate id {text!r} (first at {label(first_seen[text])})"))
        else:
            first_seen[text] = row
    return ids, problems


def _check_text(value, *, allow_list: bool, report: Callable[[str], None]):
    if isinstance(value, str):
        return value if value else None  # "" and a null cell are the same thing in csv
    if isinstance(value, (list, tuple, np.ndarray)):
        if not allow_list:
            report(f"expected text (str), got a list {_short(value)}")
            return None
        items = list(value)
        bad = [k for k, item in enumerate(items) if not isinstance(item, str)]
        if bad:
            report(f"list item {bad[0]} is {type(items[bad[0]]).__name__}, expected str")
            return None
        return items
    if is_null(value):
        return None
    report(f"expected text (str), got {type(value).__name__} {_short(value)}")
    return None


def _check_verdicts(values: list, *, allow_missing: bool, report: Callable[[int, str], None]) -> list[str]:
    mapping: dict[object, str] = {}
    errors: dict[object, str] = {}
    out = []
    for row, value in enumerate(values):
        key = _hashable(value)
        if key not in mapping and key not in errors:
            try:
                mapping[key] = normalize_verdict(value, allow_missing=allow_missing)
            except ValueError as error:
                errors[key] = str(error)
        if key in errors:
            report(row, errors[key])
            out.append(MISSING)
        else:
            out.append(mapping[key])
    return out


def _hashable(value):
    if is_null(value):
        return ("null",)
    try:
        hash(value)
    except TypeError:
        return ("unhashable", repr(value))
    return (type(value).__name__, value)


def _check_label(value, *, report: Callable[[str], None]):
    if is_null(value):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    report(f"expected a label (str), got {type(value).__name__} {_short(value)}")
    return None


def _check_turn(value, *, report: Callable[[str], None]):
    if is_null(value):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, (bool, np.bool_)):
        report(f"turn must be an integer >= 1, got {value!r}")
        return None
    if isinstance(value, (int, np.integer)) or (isinstance(value, (float, np.floating)) and float(value).is_integer()):
        if int(value) >= 1:
            return int(value)
    report(f"turn must be an integer >= 1, got {_short(value)}")
    return None


def _check_probability(value, *, report: Callable[[str], None]) -> float:
    """A float in [0, 1], NaN for a missing cell; anything else is reported (and read as NaN)."""
    if is_null(value):
        return float("nan")
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("", "missing", "na", "n/a", "nan", "none", "null"):
            return float("nan")
        try:
            value = float(text)
        except ValueError:
            report(f"expected a number in [0, 1], got {_short(value)}")
            return float("nan")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        report(f"expected a number in [0, 1], got {type(value).__name__} {_short(value)}")
        return float("nan")
    if not 0.0 <= float(value) <= 1.0:
        report(f"expected a number in [0, 1], got {_short(value)}")
        return float("nan")
    return float(value)


def other_judge_verdicts(table: pd.DataFrame, columns: Sequence[str], *, source: str = "table") -> np.ndarray:
    """Other judges' verdicts from the columns ``columns`` of a comparison table, in normal form.

    Args:
        table: a comparison table (n rows).
        columns: the names of the columns that hold other judges' verdicts (A | B | tie | missing,
            any spelling of :mod:`puaudit_jax.datasets.verdicts`).
        source: the table's name in error messages.

    Returns:
        (n, k) object array of "A" | "B" | "tie" | "missing", one column per name.

    Raises:
        ComparisonValidationError: a column is absent, named twice, is a core column, or holds a value
            that is no verdict (each problem names the row, the id and the column).
    """
    problems: list[ValidationProblem] = []
    for name in columns:
        if name not in table.columns:
            problems.append(ValidationProblem(f"no such column (have: {list(table.columns)})", column=name))
        elif name in CORE_COLUMNS or name in EVIDENCE_COLUMNS:
            problems.append(ValidationProblem("a core or evidence column cannot be another judge", column=name))
    if len(set(columns)) != len(columns):
        problems.append(ValidationProblem(f"columns named more than once: {list(columns)}"))
    if problems:
        raise ComparisonValidationError(source, problems)
    ids = table["id"].astype(str).tolist()
    out = np.empty((len(table), len(columns)), dtype=object)
    for k, name in enumerate(columns):

        def add(row: int, message: str, name: str = name) -> None:
            problems.append(ValidationProblem(message, row=row, label=f"row {row + 1}", id=ids[row], column=name))

        out[:, k] = _check_verdicts(table[name].tolist(), allow_missing=True, report=add)
    if problems:
        raise ComparisonValidationError(source, problems)
    return out


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_list_cell(value):
    """A list cell: ndarray -> list; a JSON array of strings -> list; anything else unchanged.

    A Python list literal of strings (what ``DataFrame.to_csv`` writes for a list cell) reads as its
    list too, so a table written by pandas reads back with its multi-turn rows intact.
    """
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        try:
            decoded = json.loads(value)
        except ValueError:
            try:
                decoded = ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return value
        if isinstance(decoded, list) and all(isinstance(item, str) for item in decoded):
            return decoded
    return value


# --------------------------------------------------------------------------------------------------
# reading


# --------------------------------------------------------------------------------------------------
# writing

SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet",
            ".pq": "parquet"}  # fmt: skip
"""File suffix -> encoding of a table file; reading looks at the content first (:mod:`.records`)."""


def encoding_of(path: Path) -> str:
    """The encoding ("jsonl", "json", "csv", "parquet") a file's suffix names; ValueError naming the suffix."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{path}: cannot tell the encoding from suffix {suffix!r}; use one of {sorted(SUFFIXES)}")
    return SUFFIXES[suffix]


def save_comparisons(frame: pd.DataFrame, path: str | os.PathLike, *, format: str | None = None) -> Path:
    """Validate ``frame`` and write it atomically (temp file + rename) as jsonl, json, csv or parquet.

    :func:`load_comparisons` reads the file back to an equal table (extra columns may come back
    with pandas' inferred dtypes in csv).

    Args:
        frame: a comparison table.
        path: the file to write.
        format: "jsonl", "json", "csv" or "parquet" (None: from the file name).

    Returns:
        The path written.

    Raises:
        ComparisonValidationError: a table that does not validate.
        ValueError: an unknown format.
    """
    path = Path(path)
    kind = format or encoding_of(path)
    table = validate_comparisons(frame, source="table to save")
    if kind not in ("jsonl", "json", "csv", "parquet"):
        raise ValueError(f"{path}: unknown format {kind!r} (use jsonl, json, csv or parquet)")
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        if kind == "json":
            records = [{k: _json_value(v) for k, v in r.items()} for r in table.to_dict(orient="records")]
            handle.write(json.dumps(records, ensure_ascii=False, indent=1).encode("utf-8") + b"\n")
        elif kind == "jsonl":
            for record in table.to_dict(orient="records"):
                line = json.dumps({k: _json_value(v) for k, v in record.items()}, ensure_ascii=False)
                handle.write(line.encode("utf-8") + b"\n")
        elif kind == "csv":
            # RFC 4180 line ends, so that cells holding a bare "\r" get quoted too
            _encode_lists(table, always=True).to_csv(handle, index=False, encoding="utf-8", lineterminator="\r\n")
        else:
            _encode_lists(table, always=False).to_parquet(handle, index=False)
    return path


def _json_value(value):
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if is_null(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _encode_lists(table: pd.DataFrame, *, always: bool) -> pd.DataFrame:
    """JSON-encode list cells of object columns: all of them (csv) or only in mixed columns (parquet)."""
    out = table.copy()
    for column in out.columns:
        if out[column].dtype != object:
            continue
        values = out[column].tolist()
        is_list = [isinstance(v, (list, tuple, np.ndarray)) for v in values]
        if not any(is_list):
            continue
        if always or not all(flag or is_null(v) for flag, v in zip(is_list, values)):
            out[column] = pd.Series(
                [json.dumps(_json_value(v), ensure_ascii=False) if flag else v for flag, v in zip(is_list, values)],
                dtype=object,
            )
    return out
