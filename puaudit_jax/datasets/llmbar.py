"""LLMBar-style benchmark files (Zeng et al. 2024): a ``dataset.json`` and its evaluators' ``result.json``.

The layout of github.com/princeton-nlp/LLMBar, which other judge benchmarks share.

A benchmark's ``dataset.json`` holds the comparisons and their gold label: ``input``, ``output_1``,
``output_2``, ``label`` (1: output_1 is better, 2: output_2). Each evaluator (a judge LLM with a
prompting strategy) writes ``evaluators/<LLM>/<strategy>/result.json``: the same records with
``results``, a list of runs (possibly as the string of a Python list), each with the verdict in both
orders, ``{"swap = False": {"winner": "1"}, "swap = True": {"winner": "2"}}``; both winners are in the
original frame (1 = output_1). The last run is the verdict.

How a row is built (one per record of the first file):

- ``id`` = :func:`~puaudit_jax.datasets.reading.content_id` ``("llmbar:", input, output_1, output_2)``;
- question = input, response_a = output_1, response_b = output_2, human = the label;
- from a ``result.json``: judge = the swap = False winner, ``judge_swapped`` = the swap = True winner
  (a winner other than 1 or 2 is missing, named in the read report), ``judge_model`` = its
  ``<LLM>/<strategy>`` folders; a ``dataset.json`` has no judge (missing);
- each further ``result.json`` of the same records adds the column ``other_<LLM>_<strategy>``.
"""

from __future__ import annotations

import ast

import numpy as np
import pandas as pd

from .comparisons import validate_comparisons
from .reading import Read, align_verdicts, content_id, report_of, slug, verdicts_of
from .records import Records
from .verdicts import MISSING, A, B

NAME = "llmbar"
FIELDS = frozenset({"input", "output_1", "output_2", "label"})
IDS = "llmbar: + SHA-256 of [input, output_1, output_2] (16 hex digits)"
_WINNERS = {"1": A, "2": B}


def detect(columns: frozenset[str]) -> bool:
    """Whether records with these fields are an LLMBar-style dataset or evaluator result."""
    return FIELDS <= columns


def _judge_name(records: Records) -> str:
    parts = records.path.resolve().parts
    return "/".join(parts[-3:-1]) if len(parts) >= 3 and parts[-4:-3] == ("evaluators",) else records.path.stem


def _final_run(value, where: str) -> dict:
    runs = ast.literal_eval(value) if isinstance(value, str) else value
    if not isinstance(runs, (list, tuple)) or not runs or not isinstance(runs[-1], dict):
        raise ValueError(f"{where}: field 'results': expected a list of runs with 'swap = False' / 'swap = True'")
    return runs[-1]


def _verdicts(records: Records) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(first-order verdicts, swapped-order verdicts, the unusable ones named) of a result.json."""
    first, second, unreadable = [], [], []
    for row, value in enumerate(records.frame["results"].tolist()):
        where = f"{_judge_name(records)} {records.path.name} {records.label(row)}"
        run = _final_run(value, where)
        for key, out in (("swap = False", first), ("swap = True", second)):
            winner = str((run.get(key) or {}).get("winner"))
            out.append(_WINNERS.get(winner, MISSING))
            if winner not in _WINNERS:
                unreadable.append(f"{where}: {key} winner is {winner!r}")
    return np.array(first, dtype=object), np.array(second, dtype=object), unreadable


def _ids(records: Records) -> list[str]:
    f = records.frame
    return [content_id("llmbar:", *p) for p in zip(f["input"], f["output_1"], f["output_2"])]


def _first(records: Records) -> tuple[pd.DataFrame, list[str]]:
    f = records.frame
    human = verdicts_of(f["label"].tolist(), lambda row: f"{records.path.name} {records.label(row)}: field 'label'")
    table = pd.DataFrame({"id": _ids(records), "question": f["input"], "response_a": f["output_1"],
                          "response_b": f["output_2"], "judge": MISSING, "human": human})  # fmt: skip
    unreadable = []
    if "results" in f.columns:
        table["judge"], table["judge_swapped"], unreadable = _verdicts(records)
        table["judge_model"] = _judge_name(records)
    return table, unreadable


def read(sources: list[Records], config=None) -> Read:
    """The comparison table of an LLMBar-style dataset.json or evaluators' result.json files (module docstring).

    Args:
        sources: a dataset.json, or one or more result.json of the same records.
        config: the read settings (unused: the format has none).
    """
    table, unreadable = _first(sources[0])
    notes = []
    for records in sources[1:]:
        if "results" not in records.columns:
            raise ValueError(f"{records.path}: a further file must be an evaluator's result.json (with 'results')")
        first, _, missing = _verdicts(records)
        column = f"other_{slug(_judge_name(records))}"
        where = lambda row, r=records: f"{r.path.name} {r.label(row)}"  # noqa: E731
        table[column], lacking = align_verdicts(table["id"], _ids(records), first, where)
        unreadable += missing
        notes.append(
            f"other judge {column} from {records.path}" + (f" ({lacking} rows it lacks are missing)" if lacking else "")
        )
    if "results" not in sources[0].columns:
        notes.append("a dataset.json holds no judge: give an evaluator's result.json first to audit its verdicts")
    table = validate_comparisons(table, source=str(sources[0].path), row_labels=sources[0].label)
    return Read(table, report_of(NAME, [s.path for s in sources], sum(len(s.frame) for s in sources), table, IDS,
                                unreadable, notes))  # fmt: skip
