"""``python -m experiments.benchmarks.scale --prepare``: the three preparations of a 2-device solve, side by side.

The benchmark behind the mesh's device preparation (``SolveOptions.prepare``; ``results/bench_scale/prepare.json``):
every row must solve the same problem, and the ratio column must be taken against the host's row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.benchmarks.scale import PREPARE_PHASES, PREPARE_RUNS
from puaudit_runtime import launch

ROOT = Path(__file__).resolve().parents[2]


def test_the_prepare_section_compares_the_three_preparations_on_the_same_problem(tmp_path):
    out = tmp_path / "prepare.json"
    args = ["-m", "experiments.benchmarks.scale", "--prepare", "--quick", "--prepare-sizes", "300x900",
            "--repeats", "1", "--out", str(out)]  # fmt: skip
    done = launch.run_python(args, cwd=ROOT, env={"OMP_NUM_THREADS": "1"}, timeout=300)
    assert done.ok, done.tail()
    section = json.loads(out.read_text())["sections"]["prepare"]
    (size,) = section["data"]["rows"]
    rows = size["rows"]
    assert size["devices"] == 2 and [r["name"] for r in rows] == [name for name, _, _ in PREPARE_RUNS]
    for row in rows:
        assert row["cost"] == pytest.approx(rows[0]["cost"], abs=1e-6), row["name"]
        assert set(PREPARE_PHASES) <= set(row["phases"]) and row["phases"]["iterations"] > 0, row
        before = sum(row["phases"][p] for p in PREPARE_PHASES)
        assert row["before_solve"] == pytest.approx(before)
    assert rows[0]["ratio"] == pytest.approx(1.0)
    assert rows[2]["ratio"] == pytest.approx(rows[2]["before_solve"] / rows[0]["before_solve"])
    assert "| 300x900 | jax, auto |" in section["table"]
