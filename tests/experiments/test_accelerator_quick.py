"""The accelerator benchmark's ``--quick`` run on the CPU: every section runs and writes its table.

A device run is one command (``python -m experiments.benchmarks.accelerator``); this keeps that command
working between the sessions that have a device (it broke once unseen: a refused ``tol=0``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.benchmarks.accelerator import SECTIONS
from puaudit_runtime import launch

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about four minutes on two cores: every section of the benchmark, small sizes
def test_the_quick_accelerator_run_completes_every_section(tmp_path):
    done = launch.run_python(["-m", "experiments.benchmarks.accelerator", "--quick", "--out-dir", str(tmp_path)],
                             cwd=ROOT, env={"OMP_NUM_THREADS": "1"}, timeout=900)  # fmt: skip
    assert done.ok, done.tail()
    text = (tmp_path / "cpu.md").read_text()
    payload = json.loads((tmp_path / "cpu.json").read_text())
    assert "failed" not in text and "rc 1" not in text, text
    for heading in (
        "Where the time goes",
        "ours fused tok/s",
        "at each cost precision",
        "PLS",
        "blocked mode at scale",
    ):
        assert heading in text, heading
    assert {"device", "solver", "large", "iteration", "extract", "pls"} <= set(payload)
    assert not payload["skipped"] and set(payload["wall_s"]) == {*SECTIONS, "total"}  # every section, in the budget
