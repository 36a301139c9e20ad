"""Where an audit's results are written: items.csv, items.parquet and report.json (atomically)."""

from __future__ import annotations

from pathlib import Path

from ..outputs import write_csv, write_json, write_parquet
from .pipeline import AuditResult

FILES = ("items.csv", "items.parquet", "report.json")


def write_result(result: AuditResult, folder: str | Path) -> list[str]:
    """Write ``result``'s items (csv and parquet, one row per input comparison) and its report
    (versioned JSON, :meth:`AuditReport.to_dict`) into ``folder``; returns the file names."""
    folder = Path(folder)
    write_csv(result.items, folder / "items.csv")
    write_parquet(result.items.astype({"question_type": "string"}), folder / "items.parquet")
    write_json(result.report.to_dict(), folder / "report.json")
    return list(FILES)
