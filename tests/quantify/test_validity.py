"""Every quantify row is a valid interval or says why not (degenerate tables, boundaries, self-pairs).

A row is either estimable -- an interval of positive width, inside the parameter's range ([0, 1] for
shares) and around its estimate -- or it is "not estimable" with its reason. Random small tables hit
the corners: few labels, one class, one cluster, a judge that never varies, self-comparisons and
models seen only once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from puaudit_jax.quantify import estimators as E
from puaudit_jax.quantify.pipeline import quantify

SHARES = ("agreement m", "share of A wins", "win rate: ")


def _is_share(target: str) -> bool:
    return target.startswith(SHARES)


def _check_row(target: str, est) -> None:
    if not est.estimable:
        assert est.note.startswith("not estimable: ") and len(est.note) > len("not estimable: "), (target, est)
        assert np.isnan(est.estimate) or est.estimator, (target, est)
        return
    assert np.isfinite([est.estimate, est.lower, est.upper]).all(), (target, est)
    assert est.upper > est.lower, f"{target} / {est.estimator}: zero-width interval {est}"
    assert est.lower <= est.estimate <= est.upper, (target, est)
    if _is_share(target):
        assert 0.0 <= est.lower and est.upper <= 1.0, f"{target} / {est.estimator}: outside [0, 1]: {est}"


@st.composite
def tables(draw):
    n = draw(st.integers(3, 40))
    models = draw(st.lists(st.sampled_from(["m1", "m2", "m3", "m4"]), min_size=2, max_size=4, unique=True))
    verdicts = st.sampled_from(["A", "B", "tie"])
    judge = draw(st.sampled_from(["varies", "A", "B", "tie"]))
    human_kind = draw(st.sampled_from(["varies", "A", "B", "tie"]))
    labelled_share = draw(st.sampled_from([0.05, 0.3, 0.7, 1.0]))
    rows = []
    for i in range(n):
        ma, mb = draw(st.sampled_from(models)), draw(st.sampled_from(models))  # self-pairs included
        j = draw(verdicts) if judge == "varies" else judge
        labelled = draw(st.floats(0, 1)) < labelled_share
        h = (draw(verdicts) if human_kind == "varies" else human_kind) if labelled else "missing"
        rows.append(dict(id=f"r{i}", model_a=ma, model_b=mb, judge=j, human=h,
                         prompt=draw(st.sampled_from(["p0", "p0", "p1", "p2"])),
                         question_type=draw(st.sampled_from(["t0", "t1"]))))  # fmt: skip
    return pd.DataFrame(rows), draw(st.sampled_from([None, "prompt", "one"])), draw(st.sampled_from([0.9, 0.999999]))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)  # no shrinking: each example fits leaderboards
@given(tables())
def test_every_row_is_an_interval_in_range_or_not_estimable(case):
    table, cluster_by, level = case
    table = table.assign(one="c")
    result = quantify(table, level=level, cluster_by=cluster_by, style=())
    assert result.rows
    for row in result.rows:
        _check_row(row.target, row.estimate)


def test_one_cluster_is_not_estimable():
    rng = np.random.default_rng(0)
    n = 60
    table = pd.DataFrame(dict(id=[f"r{i}" for i in range(n)], judge=rng.choice(["A", "B"], n),
                              human=np.where(rng.random(n) < 0.5, rng.choice(["A", "B"], n), "missing"),
                              prompt="same"))  # fmt: skip
    rows = quantify(table, cluster_by="prompt", style=()).rows
    from puaudit_jax.quantify.raters import ALPHA_NO_PPI  # alpha has no PPI form, whatever the clusters

    uses_labels = [r for r in rows if r.estimate.estimator != E.JUDGE_ONLY and ALPHA_NO_PPI not in r.estimate.note]
    assert uses_labels and all(not r.estimate.estimable and "1 cluster" in r.estimate.note for r in uses_labels)


def test_outcomes_that_never_vary_get_a_wilson_interval():
    y = np.zeros(40)
    est = E.unit_interval(E.human_only(y, 0.9), y)
    z = E.z_value(0.9)
    assert est.lower == 0.0 and est.upper == pytest.approx(z**2 / (40 + z**2))
    assert "Wilson" in est.caveat
    ties = np.full(40, 0.5)
    assert "all 40 outcomes are 0.5" in E.unit_interval(E.human_only(ties, 0.9), ties).note


def test_share_intervals_are_clipped_to_the_unit_interval():
    y = np.array([0.0, 1.0])
    raw = E.human_only(y, 0.9)
    assert raw.lower < 0 and raw.upper > 1  # the normal interval leaves [0, 1]
    est = E.unit_interval(raw, y)
    assert (est.lower, est.upper) == (0.0, 1.0) and "clipped" in est.caveat


def test_self_comparisons_are_left_out_and_counted():
    rng = np.random.default_rng(1)
    n = 200
    ma, mb = rng.choice(["x", "y", "z"], n), rng.choice(["x", "y", "z"], n)
    table = pd.DataFrame(dict(id=[f"r{i}" for i in range(n)], model_a=ma, model_b=mb,
                              judge=rng.choice(["A", "B"], n),
                              human=np.where(rng.random(n) < 0.6, rng.choice(["A", "B"], n), "missing")))  # fmt: skip
    rows = {(r.target, r.estimate.estimator): r.estimate for r in quantify(table, style=()).rows}
    cross = table[table.model_a != table.model_b]
    same = int((table.model_a == table.model_b).sum())
    assert same > 0
    without = {(r.target, r.estimate.estimator): r.estimate for r in quantify(cross, style=()).rows}
    for key, est in rows.items():
        if key[0].startswith(("win rate: ", "elo: ")):
            assert est.estimate == pytest.approx(without[key].estimate, nan_ok=True), key
            assert est.estimable, key
            assert f"{same} self-comparisons" in est.caveat, key


@st.composite
def split_tables(draw):
    """Two groups of models never compared with each other, response texts present (style rows fitted)."""
    n = draw(st.integers(8, 40))
    verdicts = st.sampled_from(["A", "B", "tie"])
    rows = []
    for i in range(n):
        ma, mb = (("m1", "m2") if i % 2 else ("m3", "m4"))[:: draw(st.sampled_from([1, -1]))]
        labelled = draw(st.booleans())
        rows.append(dict(id=f"r{i}", model_a=ma, model_b=mb, judge=draw(verdicts),
                         human=draw(verdicts) if labelled else "missing",
                         response_a="w " * draw(st.integers(1, 30)),
                         response_b="w " * draw(st.integers(1, 30))))  # fmt: skip
    return pd.DataFrame(rows)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=(Phase.explicit, Phase.reuse, Phase.generate))  # fmt: skip
@given(split_tables())
def test_a_disconnected_comparison_graph_is_never_scored_and_says_why(table):
    result = quantify(table, style=("tokens",))
    labelled = table[table.human != "missing"]
    counts = pd.concat([labelled.model_a, labelled.model_b]).value_counts()
    scored = set(counts.index[counts >= 2])
    apart = bool(scored & {"m1", "m2"}) and bool(scored & {"m3", "m4"})  # both groups keep scored models
    for row in result.rows:
        _check_row(row.target, row.estimate)
        if (
            apart
            and row.target.startswith(("elo", "style"))
            and row.target.removeprefix("elo: ") in scored | {"style: tokens"}
        ):
            assert not row.estimate.estimable and "never compared with each other" in row.estimate.note, row
