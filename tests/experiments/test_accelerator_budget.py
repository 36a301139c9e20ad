"""The accelerator benchmark's sizes, its wall-time budget and its ``large`` table, without a device or a solve.

The budget keeps ``python -m experiments.benchmarks.accelerator`` inside one device lease: a section that
would start after it is skipped (and recorded), and no worker outlives it.
"""

from __future__ import annotations

import json
import math

import pytest

from experiments.benchmarks import accelerator as acc


def test_the_sizes_hold_the_large_problems_and_a_budget():
    full, quick = acc.sizes(quick=False), acc.sizes(quick=True)
    assert full["large"] == (100_000, 100_000, 768)
    n, k, d = full["million"]
    assert n + k >= 1_000_000 and d == 768
    assert full["budget"] == 390
    for key in ("large", "million"):  # small on the CPU, and a d of their own
        n, k, d = quick[key]
        assert n * k * d <= 2000 * 2000 * 768 * 2
        assert len(quick[key]) == 3
    assert quick["budget"] > full["budget"]


def test_the_sections_run_the_most_important_first():
    assert acc.SECTIONS[:4] == ("device", "solver", "large", "iteration")
    assert acc.SECTIONS[-1] == "memory"
    assert set(acc.SECTIONS) == set(acc.SECTION_FNS)


@pytest.mark.parametrize(
    "elapsed, budget, need, skipped",
    [(0.0, 390.0, 0.0, False), (389.9, 390.0, 0.0, False), (390.0, 390.0, 0.0, True), (400.0, 390.0, 0.0, True),
     (380.0, 390.0, 15.0, True), (370.0, 390.0, 15.0, False), (1e6, math.inf, 15.0, False)],
)  # fmt: skip
def test_a_step_is_skipped_once_the_budget_is_spent(elapsed, budget, need, skipped):
    reason = acc.budget_skip(elapsed, budget, need)
    assert (reason is not None) == skipped
    if skipped:
        assert reason.startswith("budget spent") and f"{budget:.0f} s" in reason


def test_a_worker_timeout_is_cut_to_what_is_left_of_the_budget():
    assert acc.worker_timeout(150.0, 0.0, 390.0) == 150.0
    assert acc.worker_timeout(150.0, 300.0, 390.0) == pytest.approx(90.0)
    assert acc.worker_timeout(150.0, 390.0 - acc.MIN_WORKER_S + 1, 390.0) is None  # too little left to start one
    assert acc.worker_timeout(150.0, 1e6, math.inf) == 150.0


def test_past_the_budget_a_run_skips_every_section_and_records_why(tmp_path):
    acc.main(["--quick", "--budget", "1e-9", "--out-dir", str(tmp_path)])  # starts no worker process
    payload = json.loads((tmp_path / "unknown.json").read_text())
    assert list(payload["skipped"]) == list(acc.SECTIONS)
    assert all(reason.startswith("budget spent") for reason in payload["skipped"].values())
    assert set(payload["wall_s"]) == {"total"}
    text = (tmp_path / "unknown.md").read_text()
    assert "| memory | skipped: budget spent" in text and "| total |" in text


def test_the_matmul_bound_counts_two_products_at_the_precisions_rate():
    device = dict(matmul_highest_tflops=50.0, matmul_default_tflops=400.0, matmul_bfloat16_tflops=800.0)
    flop = 2 * 2 * 100_000 * 100_000 * 768
    assert acc.matmul_bound(100_000, 100_000, 768, "default", device) == pytest.approx(flop / 400e12)
    assert acc.matmul_bound(100_000, 100_000, 768, "bfloat16", device) == pytest.approx(flop / 800e12)
    assert acc.matmul_bound(100_000, 100_000, 768, "highest", device) == pytest.approx(flop / 50e12)
    assert acc.matmul_bound(10, 10, 8, "default", {}) is None


def _row(precision, certified_s, per_iter, compiling=False):
    phases = dict(validation=0.1, normalisation=0.2, transfer=0.3, iterations=1.5, certificate=1.0)
    return dict(precision=precision, first_s=9.0, certified_s=certified_s, solve_s=[certified_s],
                iterations=15, converged=True, per_iter=per_iter, per_iter_solve=0.1, phases=phases,
                gap=0.03, compile_included=compiling)  # fmt: skip


def test_the_large_table_says_whether_the_first_problem_meets_the_target():
    device = dict(matmul_default_tflops=400.0, matmul_bfloat16_tflops=400.0)  # at 100k x 100k, d 768: 76.8 ms
    first = dict(
        n=100_000,
        k=100_000,
        d=768,
        block_size=2048,
        rows=[_row("bfloat16", 4.0, 0.100), _row("default", 4.0, 0.200), _row("highest", 12.0, 0.1, compiling=True)],
    )
    second = dict(n=20_000, k=1_000_000, d=768, block_size=2048, precisions=["default"],
                  failed="timeout after 150 s")  # fmt: skip
    text = acc.large_table([first, second], device)
    target = text.split("Target")[1]
    assert "bfloat16: certified in 4.0 s, per iteration 1.30x the bound: met" in target
    assert "default: certified in 4.0 s, per iteration 2.60x the bound: not met" in target  # slower than 2x
    assert "highest: certified in 12.0 s (compiling)" in target and target.count("not met") == 2  # over 10 s
    assert "| 12.00 (compiling) |" in text and "| 4.00 |" in text
    assert "| 20000x1000000 | 768 | 2048 | default | failed: timeout after 150 s |" in text
    assert "host" in text and "| 0.30 |" in text  # validation + normalisation: the host's share of the solve
