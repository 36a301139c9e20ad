"""Chatbot Arena human-preference tables (lmarena's arena-human-preference-55k and its Kaggle CSV).

Each record is one human vote between two anonymous models: ``id``, ``model_a``, ``model_b``,
``prompt``, ``response_a``, ``response_b`` (each a JSON list of the conversation's turns, as a string
in the CSV), and the one-hot ``winner_model_a`` / ``winner_model_b`` / ``winner_tie``.

How a row is built (one per record):

- ``id`` = the record's ``id``;
- a conversation of k turns: question = the last user turn (k = 1) or all k user turns, response_a /
  response_b = each model's last answer, ``history_a`` / ``history_b`` = its k - 1 earlier answers;
  a null turn is a missing text (the row is kept and excluded later with its reason);
- the winner is the human verdict (``read_as="labels"``, the default; the judge column is then
  missing, to be joined or compared elsewhere) or the judge's (``read_as="judge"``);
- a record whose one-hot winner is not exactly one 1 is refused by name.
"""

from __future__ import annotations

import json

import numpy as np

from .reading import Read, report_of, table_of
from .records import Records
from .verdicts import MISSING, TIE, A, B, is_null

NAME = "arena"
WINNERS = ("winner_model_a", "winner_model_b", "winner_tie")
FIELDS = frozenset({"prompt", "response_a", "response_b", *WINNERS})
IDS = "the record's id"


def detect(columns: frozenset[str]) -> bool:
    """Whether records with these fields are an Arena human-preference table."""
    return FIELDS <= columns


def _turns(value, where: str, field: str) -> list:
    """A conversation field as a list of turns (a JSON list, possibly stored as a string)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [value]  # a plain text: one turn
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, list):
        raise ValueError(f"{where}: field {field!r}: expected a JSON list of turns, got {type(value).__name__}")
    return [None if is_null(t) or t == "" else str(t) for t in value]


def _winner(record: dict, where: str) -> str:
    flags, given = [], [record.get(name) for name in WINNERS]
    for name, value in zip(WINNERS, given):
        if is_null(value) or str(value).strip() not in ("0", "1", "0.0", "1.0", "True", "False"):
            raise ValueError(f"{where}: field {name!r}: {value!r} is not 0 or 1")
        flags.append(str(value).strip() in ("1", "1.0", "True"))
    if sum(flags) != 1:
        shown = ", ".join(str(v) for v in given)
        raise ValueError(f"{where}: fields {', '.join(WINNERS)}: exactly one must be 1, got {shown}")
    return (A, B, TIE)[flags.index(True)]


def _row(record: dict, where: str, read_as: str) -> dict:
    prompt = _turns(record["prompt"], where, "prompt")
    sides = {s: _turns(record[f"response_{s}"], where, f"response_{s}") for s in ("a", "b")}
    winner = _winner(record, where)
    row = {"id": record.get("id"), "question": prompt[0] if len(prompt) == 1 else prompt}
    for s, turns in sides.items():
        row[f"response_{s}"] = turns[-1] if turns else None
        row[f"history_{s}"] = (
            turns[:-1] if len(turns) == len(prompt) and all(t is not None for t in turns[:-1]) else None
        )
    row.update(judge=winner if read_as == "judge" else MISSING, human=winner if read_as == "labels" else MISSING)
    skip = {"prompt", "response_a", "response_b", *WINNERS}
    row.update({k: v for k, v in record.items() if k not in skip and k not in row})
    return row


def read(sources: list[Records], config=None) -> Read:
    """The comparison table of Arena human-preference files (module docstring).

    Args:
        sources: the files' records.
        config: the read settings; ``config.read_as`` is "labels" (default) or "judge".
    """
    read_as = getattr(config, "read_as", "labels")
    table = table_of(sources, lambda records: lambda record, where: _row(record, where, read_as))
    role = "human labels" if read_as == "labels" else "judge verdicts"
    notes = [f"the winner columns are read as {role} (read_as={read_as!r})"]
    if read_as == "labels":
        notes.append("no judge verdicts: join a judge's table to these labels with --labels, or read as a judge")
    return Read(table, report_of(NAME, [s.path for s in sources], len(table), table, IDS, (), notes))
