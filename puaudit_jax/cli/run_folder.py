"""An output folder that one run writes at a time, with a manifest of what it holds.

``with RunFolder(path, command) as run:`` takes the folder's lock (``.puaudit.lock``, created
exclusively, holding the writer's host, pid and command). Another live run writing the same folder
is refused with an error naming it; a lock left by a process that no longer exists (killed) is
taken over. ``run.finish(files)`` writes ``manifest.json`` (the command, the files with their sizes
and SHA-256, start and end time) and removes the files the previous manifest listed that this run
did not write again -- e.g. a ``calibration.png`` of an earlier calibrated rule -- so a folder never
mixes the outputs of two runs; temporary files of killed writes of those outputs go too. Files the
manifests never listed (a user's own) are left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path

from puaudit_runtime.files import write_json

LOCK, MANIFEST = ".puaudit.lock", "manifest.json"
MANIFEST_VERSION = 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class RunFolder:
    """The lock and manifest of one output folder (module docstring). ``command``: the argv list."""

    def __init__(self, folder: str | Path, command: list[str]):
        self.folder, self.command = Path(folder), list(command)
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._lock: Path | None = None

    def __enter__(self) -> RunFolder:
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = self.folder / LOCK
        for _ in range(2):  # a second try after removing a stale lock
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._refuse_or_clear(lock)
                continue
            with os.fdopen(fd, "w") as fh:
                json.dump({"host": socket.gethostname(), "pid": os.getpid(), "command": self.command,
                           "started": self.started}, fh)  # fmt: skip
            self._lock = lock
            self._remove_killed_temporaries()
            return self
        raise ValueError(f"--out {self.folder}: could not take its lock {lock}")

    def _refuse_or_clear(self, lock: Path) -> None:
        """A live writer on this host (or any writer on another host) refuses; a dead one's lock goes."""
        try:
            holder = json.loads(lock.read_text())
        except (OSError, ValueError):
            holder = {}
        same_host = holder.get("host") == socket.gethostname()
        if same_host and isinstance(holder.get("pid"), int) and not _alive(holder["pid"]):
            lock.unlink(missing_ok=True)
            return
        raise ValueError(
            f"--out {self.folder} is being written by another run (pid {holder.get('pid')} on "
            f"{holder.get('host')}, started {holder.get('started')}: {' '.join(holder.get('command', []))}); "
            f"choose another --out, or remove {lock} if that run is gone"
        )

    def _remove_killed_temporaries(self) -> None:
        """Remove temporary files of earlier writes of this folder's outputs.

        atomic_path names them ``.<name>.<random><suffix>``: with the lock held, no one else is writing them.
        """
        names = set(self.previous_files()) | {MANIFEST}
        for path in self.folder.glob(".*"):
            if path.is_file() and any(path.name.startswith(f".{name}.") for name in names):
                path.unlink(missing_ok=True)

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            self._lock.unlink(missing_ok=True)
            self._lock = None

    def previous_files(self) -> list[str]:
        """The files the folder's current manifest lists (none without a readable manifest)."""
        try:
            return [f["name"] for f in json.loads((self.folder / MANIFEST).read_text())["files"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def finish(self, files: list[str]) -> Path:
        """Record ``files`` (names in the folder) in manifest.json; remove the previous run's others."""
        stale = [name for name in self.previous_files() if name not in files and Path(name).name == name]
        for name in stale:
            (self.folder / name).unlink(missing_ok=True)
        entries = [{"name": name, "bytes": (self.folder / name).stat().st_size, "sha256": _sha256(self.folder / name)}
                   for name in files]  # fmt: skip
        manifest = {"format_version": MANIFEST_VERSION, "command": self.command, "started": self.started,
                    "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": entries,
                    "removed_stale": stale}  # fmt: skip
        return write_json(manifest, self.folder / MANIFEST)
