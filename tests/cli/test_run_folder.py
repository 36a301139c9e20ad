"""Output folders: one run at a time (a lock), a manifest of what each run wrote, no stale outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from puaudit_jax.cli import CommandError, main
from puaudit_jax.cli.run_folder import LOCK, MANIFEST, RunFolder


def test_manifest_lists_the_files_and_a_rerun_removes_only_its_own_stale_outputs(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with RunFolder(tmp_path, ["puaudit", "audit", "x"]) as run:
        for name in ("items.csv", "calibration.png"):
            (tmp_path / name).write_text(name)
        run.finish(["items.csv", "calibration.png"])
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert [f["name"] for f in manifest["files"]] == ["items.csv", "calibration.png"]
    assert manifest["files"][0]["bytes"] == len("items.csv") and manifest["command"][1] == "audit"
    (tmp_path / ".items.csv.k1ll3d.csv").write_text("half a file")  # a write killed mid-way
    with RunFolder(tmp_path, ["puaudit", "audit", "x", "--rule", "seed"]) as run:
        assert not (tmp_path / ".items.csv.k1ll3d.csv").exists()
        (tmp_path / "items.csv").write_text("new")
        run.finish(["items.csv"])
    assert not (tmp_path / "calibration.png").exists() and (tmp_path / "notes.txt").read_text() == "mine"
    assert json.loads((tmp_path / MANIFEST).read_text())["removed_stale"] == ["calibration.png"]
    assert not (tmp_path / LOCK).exists()


def test_a_live_writer_is_refused_and_a_dead_ones_lock_taken_over(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with RunFolder(tmp_path, ["first"]):
            pass
        (tmp_path / LOCK).write_text(json.dumps({"host": os.uname().nodename, "pid": sleeper.pid,
                                                 "command": ["puaudit", "evaluate"], "started": "now"}))  # fmt: skip
        with pytest.raises(ValueError, match=f"being written by another run \\(pid {sleeper.pid}"):
            with RunFolder(tmp_path, ["second"]):
                pass
    finally:
        sleeper.kill()
        sleeper.wait()
    with RunFolder(tmp_path, ["third"]) as run:  # the holder is gone: its lock is stale
        assert json.loads((tmp_path / LOCK).read_text())["command"] == ["third"]
        run.finish([])


def test_the_cli_refuses_a_folder_another_run_writes(cone_files, tmp_path, capsys):
    root, _ = cone_files
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK).write_text(json.dumps({"host": os.uname().nodename, "pid": os.getpid(), "command": ["x"]}))
    with pytest.raises(CommandError, match="being written by another run"):
        main(["audit", str(root / "cmp.jsonl"), "--embeddings", str(root / "emb.npz"), "--out", str(out), "--quiet"])
    (out / LOCK).unlink()
    main(["audit", str(root / "cmp.jsonl"), "--embeddings", str(root / "emb.npz"), "--out", str(out), "--quiet",
          "--rule", "two-sided"])  # fmt: skip
    assert "calibration.png" in [f["name"] for f in json.loads((out / MANIFEST).read_text())["files"]]
    main(["audit", str(root / "cmp.jsonl"), "--embeddings", str(root / "emb.npz"), "--out", str(out), "--quiet",
          "--rule", "seed"])  # fmt: skip
    assert not (out / "calibration.png").exists() and not (out / LOCK).exists()
