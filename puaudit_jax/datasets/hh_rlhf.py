r"""Anthropic HH-RLHF, harmless-base test split: 2,312 human preferences (no judge verdict).

Source: ``puaudit_jax/data/hh_rlhf/harmless-base_test.jsonl.gz`` (MIT; see its README). Each record
is a pair of full transcripts ("\n\nHuman: ...\n\nAssistant: ...") that differ in the last assistant
turn; the human preferred ``chosen``. Table columns: ``id`` (``"hh:<line>"``, 0-based), ``chosen``,
``rejected``.
"""

from __future__ import annotations

import gzip
import json

import pandas as pd

from .paths import data_path


def load_hh_rlhf() -> pd.DataFrame:
    """The 2,312 preference pairs; raises naming the line of a record without text fields."""
    path = data_path("hh_rlhf", "harmless-base_test.jsonl.gz")
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for k, line in enumerate(handle):
            record = json.loads(line)
            for name in ("chosen", "rejected"):
                if not isinstance(record.get(name), str):
                    raise ValueError(f"{path}: line {k + 1}: field {name!r} is not text")
            rows.append({"id": f"hh:{k}", "chosen": record["chosen"], "rejected": record["rejected"]})
    return pd.DataFrame.from_records(rows)
