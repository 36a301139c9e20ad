"""``puaudit monitor``: its files and summary on a judge that degrades, and its one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.cli import CommandError, main


@pytest.fixture
def stream(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    human = rng.choice(np.array(["A", "B", "tie"], object), n, p=[0.45, 0.45, 0.1])
    agree = np.r_[rng.random(200) < 0.95, rng.random(200) < 0.5]
    judge = np.where(agree, human, np.where(human == "A", "B", "A"))
    human[:3] = "missing"
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "question": "q", "response_a": "a", "response_b": "b",
                          "judge": judge, "human": human, "week": np.arange(n) // 25})  # fmt: skip
    path = tmp_path / "stream.csv"
    frame.to_csv(path, index=False)
    return path


def test_monitor_writes_the_sequence_the_report_and_the_figure(stream, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["monitor", str(stream), "--order", "week", "--threshold", "0.8", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ALARM: agreement below 0.8 shown at label" in printed and "left out: 3 rows (no human label)" in printed
    frame = pd.read_csv(out / "monitor.csv")
    assert list(frame.columns) == ["n", "order", "id", "value", "estimate", "lower", "upper", "e_value"]
    assert len(frame) == 397 and frame["order"].is_monotonic_increasing
    report = json.loads((out / "report.json").read_text())
    alarm = report["alarm_at"]
    assert 200 < alarm["n"] < 397 and frame.loc[alarm["n"] - 1, "id"] == alarm["id"]
    assert frame.loc[alarm["n"] - 2, "e_value"] < 20 <= frame.loc[alarm["n"] - 1, "e_value"]
    assert report["rows"] == {"read": 400, "labelled": 397, "in_stream": 397, "left_out": {"no human label": 3}}
    assert report["settings"]["threshold"] == 0.8 and (out / "monitor.png").stat().st_size > 0


def test_no_figures_and_no_threshold(stream, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["monitor", str(stream), "--order", "week", "--no-figures", "--out", str(out)]) == 0
    assert not (out / "monitor.png").exists()
    assert json.loads((out / "report.json").read_text())["alarm_at"] is None
    assert "note: no threshold" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "says"), [
    ([], "--order: name the column"),
    (["--order", "day"], "--order day: no such column"),
    (["--order", "week", "--threshold", "1.2"], "threshold must be in (0, 1)"),
    (["--order", "week", "--alpha", "0"], "alpha must be in (0, 1)"),
])  # fmt: skip
def test_bad_settings_end_in_one_line(stream, tmp_path, capsys, argv, says):
    with pytest.raises(CommandError):
        main(["monitor", str(stream), *argv, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1
