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
    with RunFolder(tmp_path, ["puaudit", "audit", "x", "--rule", "paper"]) as run:
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
          "--rule", "paper"])  # fmt: skip
    assert not (out / "calibration.png").exists() and not (out / LOCK).exists()


def _run(folder, command, outputs: dict) -> None:
    with RunFolder(folder, command) as run:
        for name, text in outputs.items():
            (run.path / name).write_text(text)
        run.finish(list(outputs))


def test_a_run_killed_before_its_commit_leaves_the_previous_outputs(tmp_path):
    _run(tmp_path, ["puaudit", "audit", "old"], {"items.csv": "old items", "report.json": "old report"})
    script = (f"import time; from puaudit_jax.cli.run_folder import RunFolder\n"
              f"with RunFolder({str(tmp_path)!r}, ['puaudit', 'audit', 'new']) as run:\n"
              f"    (run.path / 'items.csv').write_text('new items')\n"
              f"    print('written', flush=True)\n"
              f"    time.sleep(60)\n")  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
    finally:
        child.kill()  # SIGKILL: no cleanup runs
        child.wait(timeout=30)
    assert (tmp_path / "items.csv").read_text() == "old items"  # never the new items beside the old report
    assert json.loads((tmp_path / MANIFEST).read_text())["command"][-1] == "old"
    _run(tmp_path, ["puaudit", "audit", "third"], {"items.csv": "third"})
    assert not list(tmp_path.glob(".puaudit-run-*")) and not (tmp_path / "report.json").exists()


def test_a_failed_run_changes_nothing(tmp_path):
    _run(tmp_path, ["puaudit", "audit", "old"], {"items.csv": "old items"})
    with pytest.raises(RuntimeError):
        with RunFolder(tmp_path, ["puaudit", "audit", "new"]) as run:
            (run.path / "items.csv").write_text("half")
            raise RuntimeError("the run failed")
    assert (tmp_path / "items.csv").read_text() == "old items" and not list(tmp_path.glob(".puaudit-run-*"))


def test_a_commit_killed_half_way_is_completed_by_the_next_run(tmp_path):
    _run(tmp_path, ["puaudit", "audit", "old"], {"items.csv": "old", "report.json": "old", "calibration.png": "old"})
    staging = tmp_path / ".puaudit-run-999999"  # what a run killed after moving items.csv left
    staging.mkdir()
    (staging / "report.json").write_text("new")
    (tmp_path / "items.csv").write_text("new")
    files = [{"name": "items.csv"}, {"name": "report.json"}]
    manifest = {"command": ["new"], "removed_stale": ["calibration.png"], "files": files}
    (staging / MANIFEST).write_text(json.dumps(manifest))
    with RunFolder(tmp_path, ["puaudit", "quantify"]) as run:
        assert (tmp_path / "report.json").read_text() == "new" and not (tmp_path / "calibration.png").exists()
        assert json.loads((tmp_path / MANIFEST).read_text())["command"] == ["new"]
        run.finish([])


def test_an_unreadable_manifest_is_refused(tmp_path):
    _run(tmp_path, ["puaudit", "audit", "old"], {"calibration.png": "old"})
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(ValueError, match="manifest.json cannot be read"):
        with RunFolder(tmp_path, ["puaudit", "audit", "new"]):
            pass
    assert not (tmp_path / LOCK).exists()
