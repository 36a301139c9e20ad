"""AlpacaEval annotations (Dubois et al. 2024, github.com/tatsu-lab/alpaca_eval): ``annotations.json``.

Each record is one judge's (``annotator``'s) preference between two outputs to an instruction:
``instruction``, ``output_1`` by ``generator_1`` (the baseline), ``output_2`` by ``generator_2``,
``preference`` in [1, 2] (1: output_1 is better, 2: output_2; a weighted annotator gives the
probability-weighted value in between, 1.5 a tie; null when the annotator failed), ``dataset``;
other fields are kept as extra columns.

How a row is built (one per record of the first file):

- ``id`` = :func:`~puaudit_jax.datasets.reading.content_id` ``("alpaca_eval:", instruction,
  generator_1, output_1, generator_2, output_2)``: the same comparison has the same id in every
  annotator's file and in every run;
- question = instruction, response_a = output_1, response_b = output_2, model_a / model_b = the
  generators, question_type = dataset;
- ``judge``: B where preference > 1.5, A where < 1.5, tie at 1.5, missing where null (named in the
  read report); ``judge_preference`` = preference - 1 (the judge's probability that output_2 is
  better, AlpacaEval's win-rate unit); ``judge_confidence`` = max(p, 1 - p) of that probability;
  ``judge_model`` = the annotator;
- each further file (another annotator on the same outputs) adds its verdicts as the column
  ``other_<annotator>``; a record there without a match in the first file is refused by name, a
  comparison it lacks gets a missing verdict (counted).

No human labels are in these files: ``human`` is missing unless labels are joined (``--labels``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .comparisons import validate_comparisons
from .reading import Read, align_verdicts, content_id, report_of, slug
from .records import Records
from .verdicts import MISSING, TIE, A, B

NAME = "alpaca_eval"
FIELDS = frozenset({"instruction", "output_1", "output_2", "preference"})
IDS = "alpaca_eval: + SHA-256 of [instruction, generator_1, output_1, generator_2, output_2] (16 hex digits)"


def detect(columns: frozenset[str]) -> bool:
    """Whether records with these fields are AlpacaEval annotations."""
    return FIELDS <= columns


def _preferences(records: Records) -> tuple[np.ndarray, list[str]]:
    """(n,) preference - 1 (NaN where null) and the records without one; ValueError outside [1, 2]."""
    values, missing = [], []
    for row, value in enumerate(records.frame["preference"].tolist()):
        where = f"{records.path.name} {records.label(row)}"
        if value is None or (isinstance(value, float) and np.isnan(value)):
            values.append(np.nan)
            missing.append(f"{where}: preference is null (the annotator gave none)")
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: field 'preference': {value!r} is not a number in [1, 2]") from None
        if not 1.0 <= number <= 2.0:
            raise ValueError(f"{where}: field 'preference': {value!r} is outside [1, 2]")
        values.append(number - 1.0)
    return np.asarray(values, dtype=float), missing


def _verdicts(p: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(p), MISSING, np.where(p > 0.5, B, np.where(p < 0.5, A, TIE))).astype(object)


def _ids(records: Records) -> list[str]:
    f = records.frame
    get = lambda c: f[c].tolist() if c in f.columns else [None] * len(f)  # noqa: E731
    return [content_id("alpaca_eval:", *parts) for parts in
            zip(f["instruction"], get("generator_1"), f["output_1"], get("generator_2"), f["output_2"])]  # fmt: skip


def _annotator(records: Records) -> str:
    names = records.frame["annotator"].dropna().unique() if "annotator" in records.frame.columns else []
    name = str(names[0]) if len(names) == 1 else records.path.stem
    return slug(name)


def _first(records: Records) -> tuple[pd.DataFrame, list[str]]:
    p, unreadable = _preferences(records)
    f = records.frame
    table = pd.DataFrame({"id": _ids(records), "question": f["instruction"], "response_a": f["output_1"],
                          "response_b": f["output_2"], "judge": _verdicts(p), "human": MISSING})  # fmt: skip
    if "dataset" in f.columns:
        table["question_type"] = f["dataset"]
    for side, column in (("a", "generator_1"), ("b", "generator_2")):
        if column in f.columns:
            table[f"model_{side}"] = f[column]
    if "annotator" in f.columns:
        table["judge_model"] = f["annotator"]
    table["judge_preference"] = p
    table["judge_confidence"] = np.where(np.isnan(p), np.nan, np.maximum(p, 1.0 - p))
    kept = [c for c in f.columns if c not in ("instruction", "output_1", "output_2", "preference", "dataset")]
    for column in kept:
        if column not in table.columns:
            table[column] = f[column]
    return table, unreadable


def _other(table: pd.DataFrame, records: Records) -> tuple[str, np.ndarray, list[str], int]:
    """Another annotator's verdicts on ``table``'s rows: (column, verdicts, unreadable, rows it lacks)."""
    p, unreadable = _preferences(records)
    verdicts, lacking = align_verdicts(table["id"], _ids(records), _verdicts(p),
                                       lambda row: f"{records.path.name} {records.label(row)}")  # fmt: skip
    return f"other_{_annotator(records)}", verdicts, unreadable, lacking


def read(sources: list[Records], config=None) -> Read:
    """The comparison table of AlpacaEval annotation files (the first the judge, the others other judges).

    Args:
        sources: one or more annotation files' records, of the same outputs.
        config: the read settings (unused: the format has none).
    """
    table, unreadable = _first(sources[0])
    notes = []
    for records in sources[1:]:
        column, verdicts, missing, lacking = _other(table, records)
        if column in table.columns:
            raise ValueError(f"{records.path}: annotator column {column!r} twice: give each annotator's file once")
        table[column] = verdicts
        unreadable += missing
        notes.append(
            f"other judge {column} from {records.path.name}"
            + (f" ({lacking} comparisons it lacks are missing)" if lacking else "")
        )
    table = validate_comparisons(table, source=str(sources[0].path), row_labels=sources[0].label)
    notes += _win_rate_notes(table)
    return Read(table, report_of(NAME, [s.path for s in sources], sum(len(s.frame) for s in sources), table, IDS,
                                unreadable, notes))  # fmt: skip


def _win_rate_notes(table: pd.DataFrame) -> list[str]:
    """The judge's win rate of generator_2 as AlpacaEval defines it (soft) and binarised, when one model."""
    if "model_b" not in table.columns or table["model_b"].nunique() != 1:
        return []
    p = table["judge_preference"].to_numpy(float)
    p = p[~np.isnan(p)]
    if not len(p):
        return []
    binary = np.where(p > 0.5, 1.0, np.where(p < 0.5, 0.0, 0.5))
    return [f"judge win rate of {table['model_b'].iloc[0]} (AlpacaEval's, from the preferences): {100 * p.mean():.2f} %"
            f"; from the verdicts (ties 1/2): {100 * binary.mean():.2f} %; the preference is kept as "
            "judge_preference and judge_confidence"]  # fmt: skip
