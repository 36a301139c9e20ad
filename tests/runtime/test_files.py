"""puaudit_runtime.files.atomic_path: the one atomic-write helper (results, caches, figures)."""

from __future__ import annotations

import os
import stat

import pytest

from puaudit_runtime.files import atomic_path


def test_atomic_path_replaces_on_success_with_umask_permissions(tmp_path):
    target = tmp_path / "sub" / "out.json"
    old = os.umask(0o027)
    try:
        with atomic_path(target) as tmp:
            assert tmp.parent == target.parent and tmp.suffix == ".json" and not target.exists()
            tmp.write_text("{}")
    finally:
        os.umask(old)
    assert target.read_text() == "{}"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_atomic_path_keeps_the_old_file_and_no_temporary_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_full_disk_names_the_file_being_written(tmp_path):
    """Before: the writer's bare "[Errno 28] No space left on device", naming no file."""
    import errno

    from puaudit_runtime.files import DiskFullError, write_text

    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(DiskFullError) as info:
        with atomic_path(target):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert str(info.value).startswith(f"{target}: the disk is full (no space left on device)")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    assert isinstance(info.value, OSError)  # callers that catch OSError still do
    with pytest.raises(OSError, match="Permission") as other:  # any other OSError passes unchanged
        with atomic_path(target):
            raise PermissionError(errno.EACCES, "Permission denied")
    assert not isinstance(other.value, DiskFullError)
    assert write_text  # the writers are built on atomic_path
