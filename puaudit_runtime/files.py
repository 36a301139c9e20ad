"""Atomic result files: the one implementation every result, cache and figure writer uses.

A writer gets a temporary path in the target's own folder (same file system, so the final
``os.replace`` is atomic) and the file appears under its name only when the writer finished: a
crash or an interrupt leaves the previous file (or none), never a half-written one.

    atomic_path(path)                       the primitive: a temporary path that becomes ``path``
    write_json / write_csv / write_parquet / write_text / save_figure   the writers built on it
    markdown_table(frame)                   a table as GitHub markdown (for result write-ups)
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "DISK_FULL",
    "DiskFullError",
    "atomic_path",
    "markdown_table",
    "save_figure",
    "write_csv",
    "write_json",
    "write_parquet",
    "write_text",
]


def _file_mode() -> int:
    """0o666 less the process umask: what ``open(path, "w")`` would have given the file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
"""The errno codes of a write that found no room: no space left on the device, the disk quota exhausted."""


class DiskFullError(OSError):
    """Writing a file failed for lack of room; ``filename`` is the file, ``errno`` one of :data:`DISK_FULL`."""

    def __init__(self, path: str | Path, code: int = errno.ENOSPC):
        """The error of writing ``path`` with errno ``code``."""
        super().__init__(code, os.strerror(code), str(path))

    def __str__(self) -> str:
        """``PATH: the disk is full (...)``: what a user must act on, the file first."""
        return f"{self.filename}: the disk is full ({self.strerror.lower()}) while writing it; free some space"


@contextmanager
def atomic_path(path: str | Path, *, prefix: str | None = None):
    """Yield a temporary path next to ``path``; on success it replaces ``path`` (else it is removed).

    ``prefix``: name prefix of the temporary file (default ``.<name>.``); the suffix is ``path``'s,
    so writers that choose a format by extension (numpy, matplotlib) see the right one. The file
    gets the permissions the umask gives a new file (mkstemp alone would leave it 0600). A write that
    finds no room (an OSError with an errno of :data:`DISK_FULL`) becomes a :class:`DiskFullError`
    naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix or f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except OSError as err:
        if err.errno not in DISK_FULL or isinstance(err, DiskFullError):
            raise
        raise DiskFullError(path, err.errno) from err
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


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
    """Write ``obj`` as indented JSON (numpy scalars / arrays converted, non-finite floats null); return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_jsonable(obj), indent=2) + "\n", encoding="utf-8")
    return Path(path)


def write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` as CSV without its index; return the path."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return Path(path)


def write_parquet(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` as Parquet without its index; return the path."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    return Path(path)


def save_figure(fig, path: str | Path, **kwargs) -> Path:
    """Save a matplotlib figure in the format of ``path``'s suffix (default png); return the path."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", **kwargs)
    return Path(path)


def write_text(text: str, path: str | Path) -> Path:
    """Write ``text`` to ``path``; return the path."""
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
