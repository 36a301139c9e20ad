"""Where the bundled data and the published reference numbers live inside the installed package.

Files are package data of ``puaudit_jax`` (``puaudit_jax/data/<set>/...`` and
``puaudit_jax/reference/*.csv``); nothing here looks outside the package.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _package_root() -> Path:
    return Path(str(resources.files("puaudit_jax")))


def data_path(*parts: str) -> Path:
    """Path of a bundled data file, e.g. ``data_path("mtbench", "question.jsonl")``.

    Raises ``FileNotFoundError`` naming the path when the file is not installed.
    """
    path = _package_root().joinpath("data", *parts)
    if not path.exists():
        raise FileNotFoundError(f"bundled data file not found: {path}")
    return path


def reference_path(name: str) -> Path:
    """Path of a published-numbers table, e.g. ``reference_path("puaudit_table6_p_ratio.csv")``."""
    path = _package_root().joinpath("reference", name)
    if not path.exists():
        raise FileNotFoundError(f"reference table not found: {path}")
    return path
