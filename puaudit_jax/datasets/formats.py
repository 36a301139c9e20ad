"""The field's file formats, one registry: detect a file's format from its content, read it, join labels.

=================  =================================================================  ===============
format             a record has                                                       module
=================  =================================================================  ===============
``comparisons``    question, response_a, response_b, judge (this package's table)     comparison_files
``alpaca_eval``    instruction, output_1, output_2, preference                        alpaca_eval
``fastchat``       question_id, model_1, model_2, g1_winner                           fastchat
``arena``          prompt, response_a, response_b, winner_model_a / _b / _tie          arena
``llmbar``         input, output_1, output_2, label (a benchmark's dataset / result)  llmbar
``reward_pairs``   chosen, rejected                                                   reward_pairs
=================  =================================================================  ===============

A file is a JSON array, JSON lines, CSV or parquet whatever its suffix (:mod:`.records`). Its
fields are first renamed by the ``columns`` mapping (``question=input,response_a=output_1``: the
table's name = the file's field), so any other table of records reads as one of the formats; then
the first format in the table above whose fields the records have is the format, unless
``format`` names one. Each format's module documents how a row and its id are built.

Human labels may come from their own file (``labels``): a table with ``id`` and ``human`` (a filled
``to_label.csv`` is one), or any file a format reads with labels (Arena votes, reward pairs). They
are joined on ids: an id the data lacks, an id given twice, or a label that contradicts one the data
already has is refused by name.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd

from . import alpaca_eval, arena, comparison_files, fastchat, llmbar, reward_pairs
from .comparisons import validate_comparisons
from .read_config import READ_DEFAULTS, ReadConfig
from .reading import Read, verdict_counts, verdicts_of
from .records import ENCODINGS, Records, read_records
from .verdicts import MISSING

FORMATS: dict[str, ModuleType] = {
    m.NAME: m for m in (comparison_files, alpaca_eval, fastchat, arena, llmbar, reward_pairs)
}
"""Format name -> its module (``NAME``, ``FIELDS``, ``IDS``, ``detect(columns)``, ``read(sources, config)``)."""


def detect(columns: frozenset[str]) -> str:
    """The format of records with fields ``columns``.

    The first format (in :data:`FORMATS` order) whose fields they all have; failing that, the one they
    share most fields with (its reader then names what is missing); ValueError when they share none.
    """
    for name, module in FORMATS.items():
        if module.detect(columns):
            return name
    overlap = {name: len(m.FIELDS & columns) for name, m in FORMATS.items()}
    best = max(overlap, key=overlap.get)
    if overlap[best]:
        return best
    needs = "; ".join(f"{name}: {', '.join(sorted(m.FIELDS))}" for name, m in FORMATS.items())
    raise ValueError(f"no known format has the fields {', '.join(sorted(columns)) or '(none)'} ({needs}); map "
                     "yours with --columns NAME=FIELD,... (columns=...) or name the format with --format")  # fmt: skip


def _detect(records: Records) -> str:
    try:
        return detect(records.columns)
    except ValueError as err:
        raise ValueError(f"{records.path}: {err}") from None


def _mapped(records: Records, mapping: dict[str, str]) -> Records:
    absent = [f for f in mapping if f not in records.columns]
    if absent:
        raise ValueError(f"--columns: {records.path} has no field {', '.join(map(repr, absent))} (its fields: "
                         f"{', '.join(sorted(records.columns))})")  # fmt: skip
    clash = sorted(set(mapping.values()) & (records.columns - set(mapping)))
    if clash:
        raise ValueError(f"--columns: {records.path} already has a field {clash[0]!r}; map it away first "
                         f"(e.g. {clash[0]}_original={clash[0]})")  # fmt: skip
    return dataclasses.replace(records, frame=records.frame.rename(columns=mapping))


def read_comparisons(
    paths: str | os.PathLike | Sequence[str | os.PathLike], config: ReadConfig = READ_DEFAULTS
) -> Read:
    """Read one or more files of one format into a comparison table with its :class:`~.reading.ReadReport`.

    Args:
        paths: a file, or several files of the same format (AlpacaEval annotators of the same outputs,
            FastChat judgment files, tables to concatenate).
        config: the format (None: detected), the column mapping, the labels file and the format's options.

    Raises:
        FileNotFoundError: a file or a FastChat layout folder is missing.
        ValueError: an unknown format, an unmapped table, files of different formats, a malformed record
            (named by file, record and field), or a labels file that does not join.
    """
    paths = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
    if not paths:
        raise ValueError("no file to read")
    twice = [p for k, p in enumerate(paths) if p.resolve() in {q.resolve() for q in paths[:k]}]
    if twice:
        raise ValueError(f"{twice[0]}: given twice")
    if isinstance(config, Mapping):
        config = ReadConfig(**config)
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
    mapping = config.mapping()
    sources = [_mapped(read_records(p), mapping) for p in paths]
    if config.format is not None and config.format not in FORMATS:
        raise ValueError(f"unknown format {config.format!r}; use one of {', '.join(FORMATS)}")
    kinds = {s.path: (config.format or _detect(s)) for s in sources}
    if len(set(kinds.values())) > 1:
        raise ValueError(
            "files of different formats read together: " + ", ".join(f"{p} ({k})" for p, k in kinds.items())
        )
    module = FORMATS[next(iter(kinds.values()))]
    missing = sorted(module.FIELDS - sources[0].columns)
    if missing and module is not comparison_files:  # the table's own validation names its missing columns
        fields = ", ".join(sorted(sources[0].columns))
        raise ValueError(f"{sources[0].path}: format {module.NAME} needs the field(s) {', '.join(missing)} (its "
                         f"fields: {fields}); map them with --columns NAME=FIELD")  # fmt: skip
    _refuse_other_formats_options(config, module.NAME)
    return with_labels(module.read(sources, config), config.labels)


def with_labels(read: Read, paths: Sequence[str]) -> Read:
    """``read`` with the labels of each file of ``paths`` joined in turn (:func:`join_labels`), its report told."""
    table, notes = read.table, []
    for path in paths:
        table, note = join_labels(table, path)
        notes.append(note)
    if not notes:
        return read
    return Read(table, dataclasses.replace(read.report, human=verdict_counts(table["human"]),
                                           notes=read.report.notes + tuple(notes)))  # fmt: skip


def _refuse_other_formats_options(config: ReadConfig, format: str) -> None:
    """An option of another format than the one read would be ignored: ValueError naming it."""
    given = {"fastchat": config.answers is not None, "arena": config.read_as != READ_DEFAULTS.read_as,
             "reward_pairs": config.order_seed != READ_DEFAULTS.order_seed}  # fmt: skip
    option = {"fastchat": "--answers", "arena": "--as", "reward_pairs": "--order-seed"}
    for owner, set_ in given.items():
        if set_ and owner != format:
            raise ValueError(f"{option[owner]} applies to {owner} files only; these were read as {format}")


def load_comparisons(path: str | os.PathLike, *, format: str | None = None, **settings) -> pd.DataFrame:
    """Read and validate a comparison table from a file of any format the registry reads.

    Args:
        path: the file.
        format: a format name (:data:`FORMATS`; None: told from the content), or an encoding
            ("jsonl", "json", "csv", "parquet") of this package's own table.
        settings: the other fields of :class:`ReadConfig` (columns, labels, answers, read_as, order_seed).

    Returns:
        The table in normal form (:func:`~puaudit_jax.datasets.validate_comparisons`); errors name the
        line or record, the id and the column of every problem.
    """
    if format in ENCODINGS:
        records = read_records(path, format)
        mapping = ReadConfig(**settings).mapping()
        read = comparison_files.read([_mapped(records, mapping)])
        return with_labels(read, ReadConfig(**settings).labels).table
    return read_comparisons(path, ReadConfig(format=format, **settings)).table


def _labels_of(path: str) -> pd.DataFrame:
    """``id``, ``human`` of a labels file (an id / human table, or any format read with labels)."""
    records = read_records(path)
    if "human" not in records.columns and not any(m.detect(records.columns) for m in FORMATS.values()):
        raise ValueError(f"--labels {path}: a labels file needs the columns id and human (A, B or tie), or to be "
                         f"a file of a format with labels; it has {', '.join(sorted(records.columns))}")  # fmt: skip
    if {"id", "human"} <= records.columns and not comparison_files.detect(records.columns):
        frame = records.frame
        human = verdicts_of(frame["human"].tolist(), lambda k: f"--labels {path}: {records.label(k)}: column 'human'")
        return pd.DataFrame({"id": [None if v is None else str(v) for v in frame["id"]], "human": human})
    table = FORMATS[detect(records.columns)].read([records], ReadConfig()).table
    return table[["id", "human"]]


def join_labels(table: pd.DataFrame, path: str) -> tuple[pd.DataFrame, str]:
    """``table`` with human labels joined from the labels file ``path`` on ids, and a line saying so.

    Args:
        table: a comparison table.
        path: the labels file (module docstring).

    Raises:
        ValueError: an id the data lacks, a repeated id, or a label contradicting the data's, by name.
    """
    labels = _labels_of(path)
    labels = labels[labels["human"] != MISSING]
    repeated = labels["id"][labels["id"].duplicated()].unique()
    if len(repeated):
        raise ValueError(f"--labels {path}: id {repeated[0]!r} is labelled more than once ({len(repeated)} such ids)")
    table = table.copy()
    index = pd.Index(table["id"])
    unknown = labels["id"][~labels["id"].isin(index)].tolist()
    if unknown:
        raise ValueError(f"--labels {path}: id {unknown[0]!r} is not in the data ({len(unknown)} such ids; the "
                         "data's ids follow the rule in its read report)")  # fmt: skip
    rows = index.get_indexer(labels["id"])
    before = table["human"].to_numpy(dtype=object)[rows]
    clash = (before != MISSING) & (before != labels["human"].to_numpy(dtype=object))
    if clash.any():
        k = int(np.flatnonzero(clash)[0])
        raise ValueError(f"--labels {path}: id {labels['id'].iloc[k]!r} is labelled {labels['human'].iloc[k]!r} "
                         f"there and {before[k]!r} in the data")  # fmt: skip
    human = table["human"].to_numpy(dtype=object).copy()
    human[rows] = labels["human"].to_numpy(dtype=object)
    table["human"] = human
    table = validate_comparisons(table, source=f"the data with --labels {path}")
    return table, f"labels: {len(labels):,} joined from {path} on ids ({int((before == MISSING).sum()):,} new)"
