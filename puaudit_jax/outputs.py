"""Atomic result files: write to a temporary file in the target folder, then rename."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from probes.files import atomic_path

__all__ = ["atomic_path", "save_figure", "write_csv", "write_json", "write_parquet", "write_text"]


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(obj, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_jsonable(obj), indent=2) + "\n", encoding="utf-8")
    return Path(path)


def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return Path(path)


def write_parquet(frame: pd.DataFrame, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return Path(path)


def save_figure(fig, path: str | Path, **kwargs) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", **kwargs)
    return Path(path)


def write_text(text: str, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)
    return Path(path)


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """``frame`` as a GitHub markdown table, floats with ``digits`` decimals (no tabulate needed)."""

    def cell(v) -> str:
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
