"""Exact partial OT against POT's ot.partial.partial_wasserstein (the reference cost)."""

import numpy as np
import ot
import pytest

from puaudit_jax.ot import SolveOptions, solve_partial
from tests.ot.ot_cases import cosine_matrix, sqeuclidean_matrix

SHAPES = [(7, 11), (40, 25), (60, 90)]


def _weights(rng, n, k, uniform):
    if uniform:
        return np.full(n, 1 / n), np.full(k, 1 / k)
    a, b = rng.random(n) + 0.1, rng.random(k) + 0.1
    return a / a.sum() * 0.8, b / b.sum()  # |a| != |b|


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cost", ["cosine", "sqeuclidean"])
@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize("m_frac", [1e-3, 0.3, 0.999999, 1.0])
def test_exact_equals_pot(shape, cost, uniform, m_frac, rng):
    n, k = shape
    x, y = rng.normal(size=(n, 6)), rng.normal(size=(k, 6))
    a, b = _weights(rng, n, k, uniform)
    m = m_frac * min(a.sum(), b.sum())
    C = cosine_matrix(x, y) if cost == "cosine" else sqeuclidean_matrix(x, y)
    ref = ot.partial.partial_wasserstein(a, b, C, m=m)
    res = solve_partial(x, y, m, options=SolveOptions(method="exact"), a=a, b=b, cost=cost)
    assert res.method == "exact-emd" and res.converged and res.fallback_reason is None
    assert abs(res.cost - (ref * C).sum()) < 1e-7
    assert abs(res.mass - m) < 1e-9
    assert np.all(res.row_mass <= a + 1e-12) and np.all(res.col_mass <= b + 1e-12)
    assert np.all(res.plan >= 0)
    np.testing.assert_allclose(res.plan.sum(0), res.col_mass)


@pytest.mark.parametrize("shape", [(6, 9), (15, 12)])
def test_highs_backend_equals_emd(shape):
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(shape[0], 4)), rng.normal(size=(shape[1], 4))
    a, b = _weights(rng, *shape, uniform=False)
    for m in (0.05, 0.5, 0.8):
        e = solve_partial(x, y, m, options=SolveOptions(method="exact", exact_backend="emd"), a=a, b=b)
        h = solve_partial(x, y, m, options=SolveOptions(method="exact", exact_backend="highs"), a=a, b=b)
        assert h.method == "exact-highs"
        assert abs(e.cost - h.cost) < 1e-8
        assert abs(h.mass - m) < 1e-8


def test_precomputed_matrix_with_negative_costs():
    # The dummy-dummy cost must exceed -min(C); POT's 2 max(C) fails when all costs are < 0.
    rng = np.random.default_rng(4)
    C = -1.0 - rng.random((8, 10))
    res = solve_partial(None, None, 0.4, options=SolveOptions(method="exact"), cost=C)
    assert abs(res.mass - 0.4) < 1e-12
    # Brute-force reference with HiGHS on the LP written directly (no dummy points).
    h = solve_partial(None, None, 0.4, options=SolveOptions(method="exact", exact_backend="highs"), cost=C)
    assert abs(res.cost - h.cost) < 1e-9
