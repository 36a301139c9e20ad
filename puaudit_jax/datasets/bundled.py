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

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .formats import read_comparisons, with_labels
from .llmfao import load_llmfao
from .mtbench import load_mtbench
from .names import BUNDLED  # noqa: F401  (re-exported: it moved to the light names module)
from .read_config import READ_DEFAULTS, ReadConfig
from .reading import Read, report_of


def load_bundled(name: str, *, include_unlabelled: bool | None = None, vote_rule: str = "plurality") -> pd.DataFrame:
    """Validated comparison table of a bundled set (names in :data:`BUNDLED`).

    Args:
        name: the set's name: "mtbench", "llmfao-gpt4" or "llmfao-gpt3".
        include_unlabelled: add the judge-only comparisons (None: the set's default, yes for MT-Bench and
            no for LLMFAO).
        vote_rule: how several human votes make one verdict (:data:`~.votes.VOTE_RULES`).

    Returns:
        The validated comparison table.

    Raises:
        ValueError: an unknown set.
    """
    if name == "mtbench":
        return load_mtbench(
            include_unlabelled=True if include_unlabelled is None else include_unlabelled, vote_rule=vote_rule
        )
    if name in ("llmfao-gpt4", "llmfao-gpt3"):
        return load_llmfao(name.split("-")[1], include_unlabelled=bool(include_unlabelled), vote_rule=vote_rule)
    raise ValueError(f"unknown bundled set {name!r}; use one of {BUNDLED}")


def read_data(
    data: str | Sequence[str],
    include_unlabelled: bool | None = None,
    limit: int | None = None,
    read: ReadConfig = READ_DEFAULTS,
) -> Read:
    """A bundled set by name, or one or more files of a format the registry reads, with its read report.

    Args:
        data: a bundled set's name (:data:`BUNDLED`), a file, or files of one format.
        include_unlabelled: bundled sets: add the judge-only comparisons (None: the set's default).
        limit: the first rows only (None: all).
        read: how files are read (:class:`~.read_config.ReadConfig`); ``read.labels`` also joins
            labels to a bundled set.

    Raises:
        FileNotFoundError: naming ``data`` when it is neither a file nor a bundled set.
        ValueError: a file that reads to no comparison, or any reading problem, by name.
    """
    files = [data] if isinstance(data, str) else list(data)
    if len(files) == 1 and files[0] in BUNDLED:
        table = load_bundled(files[0], include_unlabelled=include_unlabelled)
        report = report_of("bundled", [files[0]], len(table), table, "the set's own (see its loader)")
        result = with_labels(Read(table, report), read.labels)
    else:
        for name in files:
            if not Path(name).exists():
                raise FileNotFoundError(f"{name!r} is neither a file nor a bundled set ({', '.join(BUNDLED)})")
        result = read_comparisons(files, read)
        if len(result.table) == 0:
            raise ValueError(f"{', '.join(files)}: no comparisons in the file")
    if limit is not None:
        result = Read(result.table.head(int(limit)).reset_index(drop=True), result.report)
    return result


def load_data(
    data: str | Sequence[str],
    include_unlabelled: bool | None = None,
    limit: int | None = None,
    read: ReadConfig = READ_DEFAULTS,
) -> pd.DataFrame:
    """The table of :func:`read_data` (a bundled set by name, or files of any format the registry reads).

    Args:
        data: a bundled set's name (:data:`BUNDLED`), a file, or files of one format.
        include_unlabelled: bundled sets: add the judge-only comparisons (None: the set's default).
        limit: the first rows only (None: all).
        read: how files are read (:class:`~.read_config.ReadConfig`).

    Returns:
        The validated comparison table (the read report dropped: :func:`read_data` keeps it).

    Raises:
        FileNotFoundError: naming ``data`` when it is neither a file nor a bundled set.
        ValueError: a file that reads to no comparison, or any reading problem, by name.
    """
    return read_data(data, include_unlabelled, limit, read).table
