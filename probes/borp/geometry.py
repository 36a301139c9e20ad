"""3. Geometry of contrastive vectors (BoRP §3.2 Phase 2, §3.3, Figure 2, Appendix E).

Intensity ||v||_2, outlierness D = ||v - c||_1 (Manhattan distance to the centroid c of a reference
set). `polarization_index` fuses them (below); `mine_polarized` returns the top / bottom PI items for
rubric bootstrapping. `geometric_features` gives the regressor's features [v, ||v||_2, D] (Appendix E:
d + 2 columns). Geometric resampling (`density_resample`, §3.3): resample the training set with
probability proportional to 1 / density(D)^power (histogram density of D, ratio clipped): the dense
centre is down-sampled, the sparse tails up-sampled. Any 1-d array can drive it (e.g. the training
labels).

Polarization index (the paper's Eq. 2 is lost in extraction; this is our definition). With a
reference set (the training items) giving median m_N and median absolute deviation s_N of ||v||
and the empirical CDF F_D of D::

    PI(v) = z(v) * (1 + F_D(D(v))),     z(v) = (||v||_2 - m_N) / (1.4826 s_N).

The sign and the first-order size come from intensity (the paper's Figure 2a: ||v|| grows with the
score, so z < 0 for bad and z > 0 for good items); outlierness (Figure 2b: D is U-shaped in the score,
large at both extremes) multiplies ``|z|`` by a factor between 1 and 2, so items that are both intense
and outlying move furthest into the tails while central items (small D) stay near 0. Rank-based
F_D and the robust z make PI free of the units of v. `orientation=-1` flips the sign for a model
whose ||v|| falls with the score (check it on a few labels; the experiment reports it).
"""

from __future__ import annotations

import numpy as np

__all__ = ["intensity", "outlierness", "polarization_index", "mine_polarized", "geometric_features", "density_resample"]


def intensity(V) -> np.ndarray:
    """||v||_2 per row of V (n, d) -> (n,)."""
    return np.linalg.norm(np.asarray(V, np.float64), axis=1)


def outlierness(V, centroid) -> np.ndarray:
    """Manhattan distance ||v - c||_1 per row of V (n, d) to the centroid c (d,) -> (n,)."""
    return np.abs(np.asarray(V, np.float64) - np.asarray(centroid, np.float64)).sum(axis=1)


def polarization_index(V, reference=None, orientation: float = 1.0) -> np.ndarray:
    """PI(v) = orientation * z(v) * (1 + F_D(D(v))) (module docstring) for V (n, d) -> (n,).

    Args:
        V: contrastive vectors, shape (n, d).
        reference: the (m, d) set that fixes the centroid, the robust scale of ||v|| and the CDF of D
            (default: V itself, i.e. unsupervised on the pool being mined).
        orientation: +1, or -1 for a model whose ||v|| falls with the score.

    Returns:
        The polarization indices, shape (n,) float64.
    """
    V = np.asarray(V, np.float64)
    R = V if reference is None else np.asarray(reference, np.float64)
    c = R.mean(axis=0)
    n_ref = intensity(R)
    med = np.median(n_ref)
    mad = 1.4826 * np.median(np.abs(n_ref - med))
    if mad == 0:
        mad = np.std(n_ref) or 1.0
    z = (intensity(V) - med) / mad
    d_ref = np.sort(outlierness(R, c))
    f_d = np.searchsorted(d_ref, outlierness(V, c), side="right") / len(d_ref)
    return orientation * z * (1.0 + f_d)


def mine_polarized(pi, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the k highest and the k lowest PI (highest first / lowest first)."""
    order = np.argsort(np.asarray(pi), kind="stable")
    k = min(int(k), len(order) // 2)
    return order[::-1][:k], order[:k]


def geometric_features(V, centroid) -> np.ndarray:
    """[v, ||v||_2, ||v - c||_1] for V (n, d) -> (n, d + 2) (seed Appendix E)."""
    V = np.asarray(V)
    return np.concatenate(
        [V, intensity(V)[:, None].astype(V.dtype), outlierness(V, centroid)[:, None].astype(V.dtype)], axis=1
    )


def density_resample(
    values,
    rng: np.random.Generator,
    *,
    power: float = 1.0,
    bins: int = 10,
    max_ratio: float = 5.0,
    size: int | None = None,
) -> np.ndarray:
    """Indices (size,) drawn with replacement with probability proportional to 1 / density(values)^power.

    The density is the histogram count of each value's bin (`bins` equal width bins), weight ratios
    clipped to `max_ratio`. power = 0 is the plain bootstrap; power = 1 makes the resampled values
    near-uniform over their range. With values = D (distance to the centroid) this is the paper's
    geometric resampling.

    Args:
        values: the 1-d array whose density drives the weights, shape (n,).
        rng: the numpy Generator of the draw.
        power: the exponent of 1 / density (0: plain bootstrap).
        bins: equal-width histogram bins of the density.
        max_ratio: the largest ratio of two weights.
        size: indices drawn (default n).

    Returns:
        Indices into the n values, shape (size,) int.
    """
    x = np.asarray(values, np.float64)
    n = len(x)
    size = n if size is None else int(size)
    edges = np.histogram_bin_edges(x, bins=bins)
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    count = np.bincount(which, minlength=bins)[which].astype(float)
    w = count ** (-power)
    w = np.minimum(w, w.min() * max_ratio)
    return rng.choice(n, size=size, replace=True, p=w / w.sum())
