"""Where an audit's results are written: items.csv, items.parquet and report.json (atomically)."""

from __future__ import annotations

from pathlib import Path

from puaudit_runtime.files import write_csv, write_json, write_parquet

from .pipeline import AuditResult

FILES = ("items.csv", "items.parquet", "report.json")


def write_result(result: AuditResult, folder: str | Path) -> list[str]:
    """Write ``result``'s items and report into ``folder`` (each file atomically).

    Args:
        result: the audit's result.
        folder: the output folder (created when missing).

    Returns:
        The file names written: items.csv and items.parquet (one row per input comparison) and
        report.json (versioned JSON, :meth:`AuditReport.to_dict`).
    """
    folder = Path(folder)
    write_csv(result.items, folder / "items.csv")
    write_parquet(result.items.astype({"question_type": "string"}), folder / "items.parquet")
    write_json(result.report.to_dict(), folder / "report.json")
    return list(FILES)


ITEM_COLUMNS = ("id", "judge", "human", "status", "p_wrong")


def read_items(path: str | Path):
    """An audit's items table from its output folder (items.parquet, else items.csv) or from the file itself.

    Args:
        path: an audit's ``--out`` folder, or its items.csv / items.parquet.

    Raises:
        ValueError: naming ``path`` and what was expected, when there is no such table, it cannot be read
            as one, or a column the readers need is missing.
    """
    path = Path(path)
    if path.is_dir():
        found = [path / f for f in ("items.parquet", "items.csv") if (path / f).exists()]
        if not found:
            raise ValueError(f"{path}: no items.parquet or items.csv in that folder (an audit's --out)")
        path = found[0]
    elif not path.is_file():
        raise ValueError(f"{path}: no such audit folder or items file (an audit's --out, or its items.csv)")
    items = _read_table(path)
    missing = [c for c in ITEM_COLUMNS if c not in items.columns]
    if missing:
        raise ValueError(_not_items(path, f"missing columns {missing}"))
    return items


def _not_items(path: Path, why: str) -> str:
    """The message for ``path``, which is not an audit's items table, and ``why``."""
    return (f"{path}: not an audit's items table ({why}); expected an audit's --out folder, or its items.csv / "
            f"items.parquet with columns {list(ITEM_COLUMNS)}")  # fmt: skip


def _read_table(path: Path):
    """``path`` as a DataFrame (parquet by its suffix, else CSV); ValueError naming it where it is neither."""
    import pandas as pd

    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype={"id": str, "judge": str, "human": str}, keep_default_na=False,
                           na_values={"p_wrong": [""]})  # fmt: skip
    except (ValueError, OSError, UnicodeDecodeError) as err:  # ParserError, EmptyDataError, ArrowInvalid: ValueErrors
        kind = "parquet" if path.suffix == ".parquet" else "CSV"
        raise ValueError(_not_items(path, f"unreadable as {kind}: {' '.join(str(err).split())}")) from None
