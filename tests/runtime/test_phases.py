"""Named phases: timed inside a recording, a plain call outside one."""

from __future__ import annotations

import numpy as np
import pytest

from puaudit_runtime import phases


def test_a_phase_is_a_plain_call_outside_a_recording():
    assert not phases.is_recording()
    assert phases.phase("work", lambda v: v + 1, 1) == 2


def test_a_recording_sums_each_phase_in_order_and_gives_shares():
    with phases.recording() as table:
        assert phases.is_recording()
        phases.phase("b", sum, range(10))
        phases.phase("a", sum, range(10))
        phases.phase("b", sum, range(10))
    assert not phases.is_recording()
    assert list(table.seconds) == ["b", "a"] and table.calls == {"b": 2, "a": 1}
    assert table.total == pytest.approx(sum(table.seconds.values()))
    assert sum(table.shares().values()) == pytest.approx(1.0)
    assert table.to_text().splitlines()[0].startswith("b")


def test_nested_recordings_keep_their_own_tables():
    with phases.recording() as outer:
        phases.phase("outer", int, 1)
        with phases.recording() as inner:
            phases.phase("inner", int, 1)
    assert list(outer.seconds) == ["outer"] and list(inner.seconds) == ["inner"]


def test_a_partial_ot_solve_records_where_its_time_goes():
    from puaudit_jax.ot import PartialSinkhorn, solve_partial

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(20, 8)).astype(np.float32), rng.normal(size=(30, 8)).astype(np.float32)
    plain = solve_partial(x, y, 0.5, PartialSinkhorn(certify=True))
    with phases.recording() as table:
        recorded = solve_partial(x, y, 0.5, PartialSinkhorn(certify=True))
    expected = ["validation", "normalisation", "transfer", "iterations", "certificate", "host copies", "finalisation"]
    assert list(table.seconds) == expected
    assert all(s >= 0 for s in table.seconds.values())
    np.testing.assert_array_equal(recorded.col_mass, plain.col_mass)  # recording changes no number
    assert recorded.certificate == plain.certificate
