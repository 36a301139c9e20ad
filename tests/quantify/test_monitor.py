"""``monitor``: the betting confidence sequence and e-process against brute force, small-sample validity
checks (the 1,000-stream versions are ``experiments/reproductions/monitor.py``), the stream's order and
its refusals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from puaudit_jax.quantify import MonitorConfig, monitor
from puaudit_jax.quantify.betting import TRUNCATION, drop_bets, e_process, hedged_cs, plugin_bets
from puaudit_jax.quantify.monitoring import NO_LABEL, NO_ORDER, NO_VERDICT, stream_of


def _capital(x, m, alpha):
    """Hedged capital max(K+, K-) / 2 at mean m, by a plain loop (Waudby-Smith & Ramdas 2023, Theorem 3)."""
    up = down = 1.0
    total, sq, out = 0.5, 0.25, []
    for t, xt in enumerate(x, start=1):
        var = sq / t  # sigma2_{t-1} = (1/4 + sum_{i<t} (x_i - mu_i)^2) / t
        lam = math.sqrt(2 * math.log(2 / alpha) / (var * t * math.log(1 + t)))
        lp = lam if m == 0 else min(lam, TRUNCATION / m)
        lm = lam if m == 1 else min(lam, TRUNCATION / (1 - m))
        up *= 1 + lp * (xt - m)
        down *= 1 - lm * (xt - m)
        total += xt
        sq += (xt - total / (t + 1)) ** 2
        out.append(max(up, down) / 2)
    return np.array(out)


def test_confidence_sequence_is_the_set_of_means_whose_capital_stays_below_one_over_alpha(rng):
    x = rng.choice([0.0, 0.5, 1.0], 80, p=[0.2, 0.2, 0.6])
    lower, upper = hedged_cs(x, 0.1)
    for m in (0.2, 0.45, 0.6, 0.7, 0.8, 0.95):
        outside = (m < lower) | (m > upper)
        assert not np.any(outside & (_capital(x, m, 0.1) < 10)), m  # a grid bound never excludes a kept mean
        far = (m < lower - 0.002) | (m > upper + 0.002)
        assert np.array_equal(far, far & (_capital(x, m, 0.1) >= 10)), m
    assert lower[-1] < x.mean() < upper[-1] and upper[-1] - lower[-1] < 0.5


def test_bets_are_predictable(rng):
    x = rng.random(200)
    changed = x.copy()
    changed[120:] = 1 - changed[120:]
    for bets in (plugin_bets, lambda v, _: drop_bets(v, 0.8, 30)):
        a, b = bets(x, 0.05), bets(changed, 0.05)
        assert np.array_equal(a[:121], b[:121]) and not np.array_equal(a, b)


def test_mixture_is_the_weighted_sum_over_start_times(rng):
    x = (rng.random(60) < 0.6).astype(float)
    bets = drop_bets(x, 0.8, 10)
    factors = 1 + bets * (0.8 - x)
    for t in (0, 10, 59):
        brute = sum(np.prod(factors[s - 1 : t + 1]) / (s * (s + 1)) for s in range(1, t + 2)) + 1 / (t + 2)
        assert np.exp(e_process(x, 0.8, bets)[t]) == pytest.approx(brute, rel=1e-9)
    single = e_process(x, 0.8, bets, "single")
    assert np.all(e_process(x, 0.8, bets) >= single - np.log(2) - 1e-12)  # never below half the single process


def test_small_simulation_keeps_coverage_and_type_one_error(rng):
    x = (rng.random((120, 300)) < 0.8).astype(float)
    missed = [np.any((lo > 0.8) | (hi < 0.8)) for lo, hi in (hedged_cs(row, 0.1, grid=200) for row in x)]
    assert np.mean(missed) <= 0.1 + 0.06  # level 0.9 at every n at once; 0.06 ~ 2 binomial sd at 120 streams
    for design in ("mixture", "single"):
        ever = e_process(x, 0.8, drop_bets(x, 0.8, 50), design).max(axis=1) >= np.log(1 / 0.1)
        assert ever.mean() <= 0.1 + 0.06, design  # mean exactly at A: the hardest drift-free case


def test_a_drop_from_90_to_60_percent_is_caught_within_a_few_hundred_labels(rng):
    before = rng.random((40, 800)) < 0.9
    after = rng.random((40, 400)) < 0.6
    x = np.concatenate([before, after], axis=1).astype(float)
    log_e = e_process(x, 0.8, drop_bets(x, 0.8, 50))
    rang = log_e >= np.log(20)
    assert rang[:, :800].any(axis=1).mean() <= 0.1  # few alarms before the drop (0.9 is far above 0.8)
    delay = np.argmax(rang[:, 800:], axis=1) + 1
    assert rang[:, 800:].any(axis=1).all() and np.median(delay) < 200


def _table(n=300, good=150, seed=0):
    rng = np.random.default_rng(seed)
    human = rng.choice(["A", "B"], n)
    agree = np.r_[rng.random(good) < 0.95, rng.random(n - good) < 0.4]
    judge = np.where(agree, human, np.where(human == "A", "B", "A"))
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "judge": judge, "human": human, "day": np.arange(n) // 10})


def test_monitor_rings_after_the_change_and_keeps_batches_in_order():
    result = monitor(_table(), MonitorConfig(order="day", threshold=0.8))
    assert result.alarm is not None and 150 < result.alarm.n < 300
    assert result.alarm.id == result.stream.ids[result.alarm.n - 1]
    assert np.all(np.diff(result.stream.order.astype(int)) >= 0) and result.stream.batches == 30
    frame = result.frame()
    assert list(frame["n"]) == list(range(1, 301)) and (frame["lower"] <= frame["upper"]).all()
    again = monitor(_table(), MonitorConfig(order="day", threshold=0.8))
    other = monitor(_table(), MonitorConfig(order="day", threshold=0.8, seed=1))
    ids = result.stream.ids
    assert np.array_equal(again.stream.ids, ids) and not np.array_equal(other.stream.ids, ids)
    assert set(other.stream.ids[:10]) == set(result.stream.ids[:10])  # a batch is shuffled, never mixed with the next


def test_rows_that_cannot_take_part_are_counted_with_their_reason():
    table = _table(40, 40)
    table.loc[0:4, "human"] = "missing"
    table.loc[5:6, "judge"] = "missing"
    table.loc[7, "day"] = None
    stream = stream_of(table, MonitorConfig(order="day"))
    assert stream.left_out == {NO_LABEL: 5, NO_VERDICT: 2, NO_ORDER: 1} and len(stream.ids) == 32
    result = monitor(table, MonitorConfig(order="day"))
    assert result.report("t")["rows"] == {"read": 40, "labelled": 35, "in_stream": 32, "left_out": stream.left_out}
    assert result.alarm is None and result.e_value is None and "no threshold" in result.notes[0]


def test_order_values_as_times_text_and_their_refusals():
    table = _table(6, 6).assign(when=["2024-01-03", "2024-01-01", "2024-01-02", "2024-1-1", "x", "y"])
    with pytest.raises(ValueError, match="no such column"):
        stream_of(table, MonitorConfig(order="nope"))
    timed = stream_of(table.head(3), MonitorConfig(order="when"))
    assert timed.kind == "time" and list(timed.order) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert stream_of(table, MonitorConfig(order="when")).kind == "text"
    mixed = table.assign(when=pd.Series([1, 2, "b", 3, 4, 5], dtype=object))
    with pytest.raises(ValueError, match="mixed kinds.*'b' at row 3"):
        stream_of(mixed, MonitorConfig(order="when"))
    with pytest.raises(ValueError, match="not estimable: none of the 6 rows"):
        monitor(table.assign(human="missing"), MonitorConfig(order="day"))
    few = monitor(table.head(2), MonitorConfig(order="day", threshold=0.5, alpha=0.01))
    assert any("no alarm possible yet" in n for n in few.notes)


@pytest.mark.parametrize("bad", [{"threshold": 1.0}, {"threshold": 0.0}, {"alpha": 1.5}, {"order": None}])
def test_settings_out_of_range_are_refused(bad):
    with pytest.raises(ValueError):
        MonitorConfig(**{"order": "day", **bad})
