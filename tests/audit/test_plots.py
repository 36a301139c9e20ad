"""The audit figures' kernel density equals scipy.stats.gaussian_kde (Scott's bandwidth)."""

from __future__ import annotations

import numpy as np

from puaudit_jax.audit.plots import kde


def test_kernel_density_equals_scipy(rng):
    from scipy.stats import gaussian_kde

    for values in (rng.beta(2, 5, 300), rng.uniform(0.4, 0.6, 3), np.r_[np.zeros(50), np.ones(5)]):
        grid = np.linspace(0, 1, 200)
        np.testing.assert_allclose(kde(values, grid), gaussian_kde(values)(grid), rtol=1e-10, atol=1e-300)
