"""Random partial OT problems shared by the OT tests."""

from tests.helpers import unit


def cone_clouds(rng, n, k, d, frac=0.7, spread=0.6):
    """P around a common direction; U a mixture (fraction ``frac`` near it, rest uniform)."""
    zbar = unit(rng.normal(size=(1, d)))[0]
    x = unit(spread * unit(rng.normal(size=(n, d))) + zbar)
    y = unit(rng.normal(size=(k, d)))
    pos = rng.random(k) < frac
    y[pos] = unit(spread * y[pos] + zbar)
    return x, y


def cosine_matrix(x, y):
    return 1.0 - unit(x) @ unit(y).T


def sqeuclidean_matrix(x, y):
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
