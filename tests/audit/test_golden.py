"""The numbers of `puaudit audit` / `puaudit evaluate` on the three bundled sets must not change:
a fresh run equals the files recorded under tests/data/golden/ (record.py there says how
they were made and rewrites them when a change is intended)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "data" / "golden" / "record.py"


def _record():
    spec = importlib.util.spec_from_file_location("golden_record", RECORD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_audit_and_evaluate_outputs_equal_the_recorded_ones(tmp_path):
    record = _record()
    runs = record.run_all(tmp_path)
    assert set(runs) == set(record.AUDITS) | {f"evaluate-{name}" for name in record.EVALUATIONS}
    assert record.differences(runs) == []


def test_the_comparison_catches_a_changed_flip(tmp_path):
    """A single changed verdict in items.csv is reported (the check is not vacuous)."""
    record = _record()
    name = "llmfao-gpt4-paper"
    items = record.recorded(name, "items.csv")
    changed = items.replace(",True,", ",False,", 1)
    assert changed != items
    assert record.differences({name: {"items.csv": changed}}) != []
    report = record.recorded(name, "report.json")
    report["m"]["value"] += 1e-6
    assert any(".m.value" in line for line in record.differences({name: {"report.json": report}}))
