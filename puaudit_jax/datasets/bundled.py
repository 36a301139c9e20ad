"""The bundled real comparison sets, by name.

=================  ==========  =========================================================
name               unlabelled  judge vs human
                   by default
=================  ==========  =========================================================
``mtbench``        included    GPT-4 vs MT-Bench expert/author votes (:mod:`.mtbench`)
``llmfao-gpt4``    not         GPT-4 vs LLMFAO crowd (:mod:`.llmfao`)
``llmfao-gpt3``    not         GPT-3.5 vs LLMFAO crowd (:mod:`.llmfao`)
=================  ==========  =========================================================

``include_unlabelled`` (None = the default above) adds the judge verdicts nobody voted on as
human = "missing": 8 MT-Bench turn-2 items (they sit in the same file as the labelled verdicts, so
they are kept by default: nothing read is dropped), 1,097 LLMFAO pairs (a separate file, added on
request). ``vote_rule`` chooses how several human votes become one verdict (:mod:`.votes`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .comparisons import load_comparisons
from .llmfao import load_llmfao
from .mtbench import load_mtbench
from .names import BUNDLED  # noqa: F401  (re-exported: it moved to the light names module)


def load_bundled(name: str, *, include_unlabelled: bool | None = None, vote_rule: str = "plurality") -> pd.DataFrame:
    """Validated comparison table of a bundled set (names in :data:`BUNDLED`)."""
    if name == "mtbench":
        return load_mtbench(
            include_unlabelled=True if include_unlabelled is None else include_unlabelled, vote_rule=vote_rule
        )
    if name in ("llmfao-gpt4", "llmfao-gpt3"):
        return load_llmfao(name.split("-")[1], include_unlabelled=bool(include_unlabelled), vote_rule=vote_rule)
    raise ValueError(f"unknown bundled set {name!r}; use one of {BUNDLED}")


def load_data(data: str, include_unlabelled: bool | None = None, limit: int | None = None) -> pd.DataFrame:
    """A bundled set by name or a comparison file (jsonl / csv / parquet); ``limit``: the first rows only.

    Raises FileNotFoundError naming ``data`` when it is neither.
    """
    if data in BUNDLED:
        table = load_bundled(data, include_unlabelled=include_unlabelled)
    else:
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"{data!r} is neither a file nor a bundled set ({', '.join(BUNDLED)})")
        table = load_comparisons(path)
        if len(table) == 0:
            raise ValueError(f"{data}: no comparisons in the file")
    if limit is not None:
        table = table.head(int(limit)).reset_index(drop=True)
    return table
