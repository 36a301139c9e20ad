"""USR annotations on Topical-Chat: 360 responses with human quality scores (for regression probes).

Source: ``puaudit_jax/data/usr_topicalchat/topical_chat.json`` (provenance in its README): 60
dialogues x 6 systems. Each record has ``source`` (the dialogue history, turns separated by
newlines), ``context`` (the knowledge snippet), ``system_output`` (the rated response),
``system_id`` and ``scores`` (mean of 3 annotators).

Table columns: ``id`` (``"usr:<dialogue>:<system_id>"``), ``dialogue`` (0-59, by first appearance of
the history), ``system_id``, ``source``, ``context``, ``system_output``, then one float column per
score with its scale: ``overall`` 1-5, ``naturalness`` / ``coherence`` / ``engagingness`` 1-3,
``understandability`` / ``groundedness`` 0-1.
"""

from __future__ import annotations

import json

import pandas as pd

from .paths import data_path

SCORE_RANGES = {
    "overall": (1.0, 5.0),
    "naturalness": (1.0, 3.0),
    "coherence": (1.0, 3.0),
    "engagingness": (1.0, 3.0),
    "understandability": (0.0, 1.0),
    "groundedness": (0.0, 1.0),
}
_TEXT_FIELDS = ("source", "context", "system_output", "system_id")


def load_usr_topicalchat() -> pd.DataFrame:
    """The 360 rated responses as a DataFrame (see the module docstring); validates every record."""
    path = data_path("usr_topicalchat", "topical_chat.json")
    with open(path, encoding="utf-8") as handle:
        records = json.load(handle)
    problems = []
    rows = []
    for k, record in enumerate(records):
        for name in _TEXT_FIELDS:
            if not isinstance(record.get(name), str):
                problems.append(f"record {k}: field {name!r} is not text")
        scores = record.get("scores") or {}
        for name, (low, high) in SCORE_RANGES.items():
            value = scores.get(name)
            if not isinstance(value, (int, float)) or not low - 1e-9 <= value <= high + 1e-9:
                problems.append(f"record {k}: score {name!r} = {value!r} is not a number in [{low}, {high}]")
        rows.append({**{n: record.get(n) for n in _TEXT_FIELDS}, **{n: scores.get(n) for n in SCORE_RANGES}})
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems[:20]))
    table = pd.DataFrame.from_records(rows)
    table.insert(0, "dialogue", pd.factorize(table["source"])[0].astype("int64"))
    table.insert(0, "id", [f"usr:{d}:{s}" for d, s in zip(table["dialogue"], table["system_id"])])
    if table["id"].duplicated().any():
        raise ValueError(f"{path}: a system appears twice in one dialogue")
    return table.astype({name: "float64" for name in SCORE_RANGES})
