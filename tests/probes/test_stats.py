"""probes.stats: Krippendorff's alpha against the `krippendorff` package, Pearson's CI, CUPED."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.stats import cuped, cuped_sample_size, krippendorff_alpha, pearson, required_sample_size

krippendorff = pytest.importorskip("krippendorff")

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the worked example:
# 4 observers x 12 units, '*' missing; published alpha nominal 0.743, interval 0.849.
KRIPP_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
        [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
    ]
)


def test_published_worked_example():
    assert krippendorff_alpha(KRIPP_2011, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(KRIPP_2011, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(KRIPP_2011, "ordinal") == pytest.approx(
        krippendorff.alpha(KRIPP_2011, level_of_measurement="ordinal"), abs=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    raters=st.integers(2, 5),
    units=st.integers(2, 40),
    missing=st.floats(0, 0.5),
    continuous=st.booleans(),
    level=st.sampled_from(["interval", "ordinal"]),
)
def test_equals_krippendorff_package(seed, raters, units, missing, continuous, level):
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, units).astype(float)
    r = truth + rng.normal(0, 1, (raters, units))
    if not continuous:
        r = np.clip(np.round(r), 1, 5)
    r[rng.random(r.shape) < missing] = np.nan
    try:
        ref = krippendorff.alpha(r, level_of_measurement=level)
    except (ValueError, ZeroDivisionError):
        with pytest.raises(ValueError):
            krippendorff_alpha(r, level)
        return
    if not np.isfinite(ref):
        return
    assert krippendorff_alpha(r, level) == pytest.approx(ref, abs=1e-10)


def test_alpha_basic_properties():
    x = np.arange(1, 11, dtype=float)
    assert krippendorff_alpha(np.vstack([x, x]), "interval") == pytest.approx(1.0)
    assert krippendorff_alpha(np.vstack([x, x]), "ordinal") == pytest.approx(1.0)
    assert krippendorff_alpha(np.vstack([x, x[::-1]]), "interval") == pytest.approx(-0.9)
    with pytest.raises(ValueError, match="fewer than two distinct"):
        krippendorff_alpha(np.ones((2, 5)))
    with pytest.raises(ValueError, match="level must be"):
        krippendorff_alpha(np.vstack([x, x]), "ratio")
    with pytest.raises(ValueError, match="raters, units"):
        krippendorff_alpha(x)


def test_pearson_interval_and_coverage():
    rng = np.random.default_rng(0)
    res = pearson([1, 2, 3, 4, 5.5], [2, 4.1, 5.9, 8, 11])
    assert res.low < res.r < res.high and res.n == 5 and res.p_value < 0.01
    hits = 0
    for _ in range(400):
        x = rng.normal(size=50)
        y = 0.5 * x + np.sqrt(1 - 0.25) * rng.normal(size=50)  # true rho = 0.5
        p = pearson(x, y)
        hits += p.low <= 0.5 <= p.high
    assert 0.90 <= hits / 400 <= 0.99  # nominal 0.95, binomial sd 0.011
    with pytest.raises(ValueError):
        pearson([1, 1, 1], [1, 2, 3])
    assert pearson([1, 2, np.nan, 4], [1, 3, 2, 5]).n == 3


def test_cuped_theta_and_variance_reduction():
    rng = np.random.default_rng(1)
    x = rng.normal(10, 2, 20_000)
    y = 3 + 0.2 * x + rng.normal(0, 1, 20_000)
    res = cuped(y, x)
    assert res.theta == pytest.approx(0.2, abs=0.01)
    assert res.variance_reduction == pytest.approx(res.rho**2, abs=1e-9)  # exact in sample terms
    assert res.adjusted.mean() == pytest.approx(y.mean())
    assert np.var(res.adjusted) < np.var(y)


def test_sample_size_and_seed_example():
    # textbook: std 1, delta 0.1, alpha 0.05, power 0.8 -> 1570 per arm
    assert required_sample_size(1.0, 0.1) == 1570
    # PUAudit §5.3: 4.5 % variance reduction (rho ~ 0.212) turns 235k into ~225k units
    std = 0.1 * 0.002 * np.sqrt(235_000 / (2 * (1.959964 + 0.841621) ** 2))
    base, with_cuped = cuped_sample_size(std / (0.1 * 0.002) * 0.002, 0.002, rho=np.sqrt(0.045))
    assert base == pytest.approx(235_000, rel=1e-3)
    assert with_cuped == pytest.approx(235_000 * 0.955, rel=1e-3)
