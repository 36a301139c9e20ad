"""Atomic file writes: the one implementation every result, cache and figure writer uses.

A writer gets a temporary path in the target's own folder (same file system, so the final
``os.replace`` is atomic) and the file appears under its name only when the writer finished: a
crash or an interrupt leaves the previous file (or none), never a half-written one.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


def _file_mode() -> int:
    """0o666 less the process umask: what ``open(path, "w")`` would have given the file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_path(path: str | Path, *, prefix: str | None = None):
    """Yield a temporary path next to ``path``; on success it replaces ``path`` (else it is removed).

    ``prefix``: name prefix of the temporary file (default ``.<name>.``); the suffix is ``path``'s,
    so writers that choose a format by extension (numpy, matplotlib) see the right one. The file
    gets the permissions the umask gives a new file (mkstemp alone would leave it 0600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix or f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
