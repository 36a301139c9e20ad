"""An output folder that one run writes at a time, and that always holds one run's outputs.

``with RunFolder(path, command) as run:`` takes the folder's lock (``.puaudit.lock``, created
exclusively, holding the writer's host, pid and command). Another live run writing the same folder
is refused with an error naming it; a lock left by a process that no longer exists (killed) is
taken over.

The run writes its files into ``run.path``, a staging folder inside the output folder
(``.puaudit-run-<pid>``). ``run.finish(files)`` commits them: it writes the manifest (the command,
the files with their sizes and SHA-256, start and end time) into the staging folder, moves the
files into the folder, removes the files the previous manifest listed that this run did not write
again (e.g. a ``calibration.png`` of an earlier calibrated rule) and moves the manifest in last.
So the folder never mixes two runs' outputs:

- a run that fails or is killed before ``finish`` leaves the previous run's outputs as they were
  (its staging folder is removed on exit, or by the next run when it was killed);
- a run killed during the commit (a few renames) left a complete manifest in its staging folder:
  the next run on the folder completes that commit first.

Files the manifests never listed (a user's own) are left alone. A manifest that cannot be read no
longer says which files are a run's outputs: the folder is refused with an error saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

LOCK, MANIFEST = ".puaudit.lock", "manifest.json"
STAGING = ".puaudit-run-"
MANIFEST_VERSION = 2


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


def _listed(manifest: Path) -> list[str]:
    """The file names ``manifest`` lists; ValueError when it exists but cannot be read as one."""
    if not manifest.exists():
        return []
    try:
        return [str(f["name"]) for f in json.loads(manifest.read_text())["files"]]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{manifest} cannot be read ({type(err).__name__}: {err}): it no longer says which files of "
            f"{manifest.parent} a run wrote, so stale outputs could stay beside new ones; remove that "
            "folder's outputs and its manifest, or choose another --out"
        ) from None


class RunFolder:
    """The lock, staging folder and manifest of one output folder (module docstring).

    Args:
        folder: the output folder (created when missing).
        command: the argv list, recorded in the lock and the manifest.
    """

    def __init__(self, folder: str | Path, command: list[str]):
        """A run of ``command`` writing ``folder`` (nothing happens before ``with``)."""
        self.folder, self.command = Path(folder), list(command)
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.path = self.folder / f"{STAGING}{os.getpid()}"
        self._lock: Path | None = None

    def __enter__(self) -> RunFolder:
        """Take the lock, settle what killed runs left, and open the staging folder ``path``."""
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"--out {self.folder}: {self.folder} is a file, not a folder")
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
            try:
                self._settle_killed_runs()
                self.previous_files()  # an unreadable manifest is refused before any work
            except BaseException:
                self.__exit__()
                raise
            self.path.mkdir()
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

    def _settle_killed_runs(self) -> None:
        """With the lock held, no other run is writing: finish killed commits, drop killed runs' files.

        A staging folder with a manifest was killed while committing (its commit is completed); one
        without was killed while computing (removed). Temporary files of killed atomic writes
        (``.<name>.<random><suffix>``, :func:`puaudit_runtime.files.atomic_path`) of the outputs go too.
        """
        for staging in sorted(self.folder.glob(f"{STAGING}*")):
            if staging.is_dir() and (staging / MANIFEST).exists():
                self._commit(staging, _listed(staging / MANIFEST))
            shutil.rmtree(staging, ignore_errors=True)
        try:
            names = set(_listed(self.folder / MANIFEST)) | {MANIFEST}
        except ValueError:
            names = {MANIFEST}
        for path in self.folder.glob(".*"):
            if path.is_file() and any(path.name.startswith(f".{name}.") for name in names):
                path.unlink(missing_ok=True)

    def __exit__(self, *exc) -> None:
        """Remove an uncommitted staging folder (a failed run changes nothing) and release the lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is not None:
            self._lock.unlink(missing_ok=True)
            self._lock = None

    def previous_files(self) -> list[str]:
        """The files the folder's current manifest lists (none without one).

        Raises:
            ValueError: the manifest exists but cannot be read.
        """
        return _listed(self.folder / MANIFEST)

    def finish(self, files: list[str]) -> Path:
        """Commit ``files`` (names, written in ``path``) into the folder with their manifest.

        A name not in ``path`` but in the folder itself was written there directly and is recorded as is.

        Returns:
            The path of the folder's new manifest.json.
        """
        source = lambda name: self.path / name if (self.path / name).exists() else self.folder / name  # noqa: E731
        stale = [name for name in self.previous_files() if name not in files and Path(name).name == name]
        entries = [{"name": name, "bytes": source(name).stat().st_size, "sha256": _sha256(source(name))}
                   for name in files]  # fmt: skip
        manifest = {"format_version": MANIFEST_VERSION, "command": self.command, "started": self.started,
                    "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": entries,
                    "removed_stale": stale}  # fmt: skip
        from puaudit_runtime.files import write_json  # numpy and pandas: not for the parser

        write_json(manifest, self.path / MANIFEST)
        self._commit(self.path, files)
        return self.folder / MANIFEST

    def _commit(self, staging: Path, files: list[str]) -> None:
        """Move ``files`` from ``staging`` into the folder, remove the stale ones, move the manifest in last."""
        for name in files:
            if (staging / name).exists():
                (self.folder / name).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / name, self.folder / name)
        stale = json.loads((staging / MANIFEST).read_text()).get("removed_stale", [])
        for name in stale:
            (self.folder / name).unlink(missing_ok=True)
        os.replace(staging / MANIFEST, self.folder / MANIFEST)
        shutil.rmtree(staging, ignore_errors=True)


def wrote(out, files) -> str:
    """``wrote OUT/a, b``: the folder and the files a command wrote, one slash between them (``--out x/`` too)."""
    folder = str(out).rstrip("/")
    return f"wrote {folder}/" + ", ".join(files)
