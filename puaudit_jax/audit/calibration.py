"""Calibration of audit scores on the human-labelled comparisons.

A labelled comparison says more than "positive": we know whether the judge agreed with the human.
Scored like a pool item (oriented by the judge, against a reference P' that does not contain it),
it is a pair (feature x_i, judge correct c_i). A monotone map x -> P(judge correct | x) fitted on
those pairs turns any scorer's output into a probability, and the decision "flip where
P(judge wrong) > threshold" then has an expected gain that the labelled pairs can estimate.

Everything here is small (numpy, and the jit-compiled float64 Newton solver of
:mod:`puaudit_jax.audit.logistic` for Platt) on at most a few thousand pairs:

- :func:`crossfit_folds`: fold ids stratified by question type, optionally grouped by a cluster
  column (LLMFAO reuses a prompt's responses across many pairs: a cluster must not straddle folds).
- :class:`IsotonicMap` (PAV through :func:`scipy.optimize.isotonic_regression`, linear between
  blocks, flat outside) and :class:`PlattMap` (logistic regression on the feature with
  ridge-shrunk per-group offsets, slope constrained >= 0; solved by
  :func:`puaudit_jax.audit.logistic.penalised_logistic`) and :class:`LogisticMap` (several features:
  the audit's score beside the judge-side evidence of :mod:`puaudit_jax.audit.evidence`, with
  per-group offsets and slopes): ``fit_map(method, x, c, groups)``.
- :func:`bootstrap_indices`: resamples of items or of whole clusters.

Units: features are whatever the scorer's normalised output is (larger = judge more likely
correct); probabilities are in [0, 1]; gains are in agreement points per pool item (fraction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import isotonic_regression
from scipy.special import expit

from .logistic import penalised_logistic

METHODS = ("isotonic", "platt", "logistic")


def crossfit_folds(strata: np.ndarray, clusters: np.ndarray | None, k: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) fold ids in 0..k'-1 with k' = min(k, number of clusters).

    Clusters are dealt round robin to folds after shuffling them within their stratum (the stratum of a
    cluster is that of its first item), so each fold gets about the same share of every question type and
    a cluster never straddles two folds.

    Args:
        strata: each item's stratum (question type), shape (n,).
        clusters: each item's cluster, shape (n,) (None: every item its own).
        k: the folds asked for (at least 1 is used).
        rng: the numpy generator of the shuffle.

    Returns:
        The fold ids, shape (n,) int.

    Raises:
        ValueError: ``clusters`` of another length than ``strata``.
    """
    strata = np.asarray(strata, dtype=object)
    n = len(strata)
    clusters = np.arange(n) if clusters is None else np.asarray(clusters, dtype=object)
    if len(clusters) != n:
        raise ValueError(f"clusters has {len(clusters)} entries for {n} items")
    codes, uniques = pd.factorize(pd.Series(clusters, dtype=object), sort=False)
    k = max(1, min(int(k), len(uniques)))
    first = pd.Series(np.arange(n)).groupby(codes).min().to_numpy()
    cluster_stratum = strata[first]
    order = []
    for s in sorted(pd.unique(cluster_stratum), key=str):
        members = np.flatnonzero(cluster_stratum == s)
        order.extend(rng.permutation(members))
    fold_of_cluster = np.empty(len(uniques), int)
    fold_of_cluster[np.asarray(order, int)] = np.arange(len(order)) % k
    return fold_of_cluster[codes]


@dataclass(frozen=True)
class IsotonicMap:
    """Monotone non-decreasing P(correct | x), an isotonic (PAV) fit.

    The PAV fit at the first and last x of every block, linear between blocks, constant beyond the data
    (sklearn's IsotonicRegression with out_of_bounds="clip").

    Attributes:
        knots: (K,) increasing feature values.
        values: (K,) P(correct) at the knots, in [0, 1].
    """

    knots: np.ndarray
    values: np.ndarray

    def __call__(self, x, groups=None) -> np.ndarray:
        """P(correct) (n,) at the features x (n,); ``groups`` is ignored (one pooled map)."""
        return np.interp(np.asarray(x, np.float64), self.knots, self.values)


def fit_isotonic(x: np.ndarray, c: np.ndarray) -> IsotonicMap:
    """Isotonic regression of c (0/1) on x (ties in x pooled first, so the fit is a function of x)."""
    x, c = np.asarray(x, np.float64), np.asarray(c, np.float64)
    ux, inverse = np.unique(x, return_inverse=True)
    weight = np.bincount(inverse).astype(np.float64)
    mean = np.bincount(inverse, weights=c) / weight
    res = isotonic_regression(mean, weights=weight, increasing=True)
    # knots at both ends of every PAV block: the fitted value at every data point, linear between blocks
    starts, ends = res.blocks[:-1], res.blocks[1:] - 1
    knots = np.unique(np.concatenate([ux[starts], ux[ends]]))
    values = np.asarray(res.x)[np.searchsorted(ux, knots)]
    return IsotonicMap(knots, np.clip(values, 0.0, 1.0))


def per_group(values: dict, groups, default) -> np.ndarray:
    """``values[g]`` for each item's group g, ``default`` where g has no entry: (n,) + shape of a value.

    One table lookup for all items (a map is evaluated on the whole pool for every bootstrap fit).

    Args:
        values: group -> a number or an array (all of one shape).
        groups: each item's group, shape (n,) (a missing group takes ``default``).
        default: the value of the items whose group has no entry (the values' shape).

    Returns:
        The values, shape (n,) + a value's shape, float64.
    """
    codes, seen = pd.factorize(np.asarray(groups, dtype=object))  # code -1: a missing group
    row = {g: k for k, g in enumerate(values)}
    rows = np.array([row.get(g, len(row)) for g in seen] + [len(row)], dtype=np.intp)
    table = np.array([*values.values(), default], dtype=np.float64)  # (G + 1, ...): the last is the default
    return table[rows[codes]]


@dataclass(frozen=True)
class PlattMap:
    """P(correct | x, g) = sigmoid(a + o_g + b x), b >= 0; unknown groups get o = 0.

    Attributes:
        a: intercept (logit scale).
        b: slope on the feature, >= 0.
        offsets: group name -> o_g (ridge-shrunk towards 0).
    """

    a: float
    b: float
    offsets: dict

    def __call__(self, x, groups=None) -> np.ndarray:
        """P(correct) (n,) at the features x (n,) of items in ``groups`` (n,) (None: no offsets)."""
        x = np.asarray(x, np.float64)
        o = np.zeros_like(x) if groups is None else per_group(self.offsets, groups, 0.0)
        return 1.0 / (1.0 + np.exp(-(self.a + o + self.b * x)))


def fit_platt(x: np.ndarray, c: np.ndarray, groups=None, group_ridge: float = 5.0) -> PlattMap:
    """Logistic regression of c on [1, x, one-hot(group)], the group offsets ridge-penalised.

    The slope is clamped at 0 (a score that ranks correct verdicts lower says nothing usable: refit with
    the offsets only).

    Args:
        x: the feature (a score), shape (n,).
        c: whether each verdict is correct, shape (n,), in {0, 1}.
        groups: each item's group (question type), shape (n,), or None for no offsets.
        group_ridge: the ridge penalty of the group offsets (a group with few items stays near the pooled
            rate).

    Returns:
        The :class:`PlattMap` (logit scale).
    """
    x, c = np.asarray(x, np.float64), np.asarray(c, np.float64)
    names = [] if groups is None else sorted(pd.unique(np.asarray(groups, dtype=object)), key=str)
    onehot = (
        (np.asarray(groups, dtype=object)[:, None] == np.array(names, dtype=object)[None, :]).astype(float)
        if names
        else np.zeros((len(x), 0))
    )
    penalty = np.concatenate([[1e-6, 1e-6], np.full(len(names), group_ridge)])
    X = np.column_stack([np.ones_like(x), x, onehot])
    w = penalised_logistic(X, c, penalty)
    if w[1] < 0:
        keep = np.r_[0, np.arange(2, X.shape[1])]
        w_small = penalised_logistic(X[:, keep], c, penalty[keep])
        w = np.r_[w_small[0], 0.0, w_small[1:]]
    return PlattMap(float(w[0]), float(w[1]), {g: float(o) for g, o in zip(names, w[2:])})


@dataclass(frozen=True)
class LogisticMap:
    """P(correct | x, g) = sigmoid(a + o_g + (w + v_g) . z), z = (x - mean) / scale; unknown groups: o = v = 0.

    Attributes:
        a: intercept (logit scale).
        w: (p,) slopes of the standardised features (logit per standard deviation).
        offsets: group -> o_g, ridge-shrunk towards 0.
        slopes: group -> (p,) v_g, the group's deviation from ``w``, ridge-shrunk towards 0.
        mean, scale: (p,) the standardisation of the training features (scale 1 for a constant one).
    """

    a: float
    w: np.ndarray
    offsets: dict
    slopes: dict
    mean: np.ndarray
    scale: np.ndarray

    def __call__(self, x, groups=None) -> np.ndarray:
        """P(correct) (n,) at the features x (n, p) of items in ``groups`` (n,) (None: no group effects)."""
        z = (np.asarray(x, np.float64).reshape(-1, len(self.w)) - self.mean) / self.scale
        logit = self.a + z @ self.w
        if groups is not None:
            logit = logit + per_group(self.offsets, groups, 0.0)
            logit = logit + np.einsum("ij,ij->i", z, per_group(self.slopes, groups, np.zeros(len(self.w))))
        return expit(logit)  # no overflow warning where the logit is huge (separable data)


def fit_logistic(
    x: np.ndarray, c: np.ndarray, groups=None, *, interact=None, ridge: float = 2.0, group_ridge: float = 5.0,
    slope_ridge: float = 10.0,
) -> LogisticMap:  # fmt: skip
    """Penalised logistic regression of c on several features with per-group offsets and slopes.

    The model of P(judge correct) that weighs several kinds of evidence at once: global slopes on the
    standardised features, a ridge-shrunk offset per group (question type) and a ridge-shrunk
    deviation of every slope per group (evidence whose weight depends on the kind of question, e.g.
    length on writing prompts). Penalties are on the sum of the log-losses, so they weigh less as
    the data grow.

    Args:
        x: (n, p) features (larger need not mean "more correct": slopes have either sign).
        c: (n,) 1 where the judge was correct, else 0.
        groups: (n,) group labels, or None for no group effects.
        interact: (p,) bool, the features that get per-group slopes (default all); the others have
            one slope for every group.
        ridge: penalty on the global slopes.
        group_ridge: penalty on the group offsets.
        slope_ridge: penalty on the group slope deviations.

    Returns:
        The fitted :class:`LogisticMap`.
    """
    x = np.asarray(x, np.float64).reshape(len(c), -1)
    c = np.asarray(c, np.float64)
    mean = x.mean(0)
    scale = x.std(0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - mean) / scale
    n, p = z.shape
    names = [] if groups is None else sorted(pd.unique(np.asarray(groups, dtype=object)), key=str)
    if len(names) < 2:
        names = []
    onehot = (np.asarray(groups, dtype=object)[:, None] == np.array(names, dtype=object)[None, :]).astype(float)
    onehot = onehot if names else np.zeros((n, 0))
    inter = np.ones(p, bool) if interact is None else np.asarray(interact, bool)
    q = int(inter.sum())
    interactions = (onehot[:, :, None] * z[:, None, inter]).reshape(n, -1)
    X = np.column_stack([np.ones(n), z, onehot, interactions])
    penalty = np.concatenate([[1e-6], np.full(p, ridge), np.full(len(names), group_ridge),
                              np.full(len(names) * q, slope_ridge)])  # fmt: skip
    coef = penalised_logistic(X, c, penalty)
    dev = np.zeros((len(names), p))
    dev[:, inter] = coef[1 + p + len(names) :].reshape(len(names), q)
    return LogisticMap(
        a=float(coef[0]),
        w=coef[1 : 1 + p],
        offsets={g: float(o) for g, o in zip(names, coef[1 + p : 1 + p + len(names)])},
        slopes={g: dev[k] for k, g in enumerate(names)},
        mean=mean,
        scale=scale,
    )


def fit_map(method: str, x: np.ndarray, c: np.ndarray, groups=None, **options):
    """A calibration map fitted on (x, c).

    Args:
        method: "isotonic" (groups ignored: one pooled monotone map of a 1-D feature), "platt" (1-D
            feature, group offsets) or "logistic" (several features, group offsets and slopes).
        x: (n,) feature, or (n, p) features for "logistic".
        c: (n,) 1 where the judge was correct, else 0.
        groups: (n,) group labels (question types) or None.
        **options: keyword options of :func:`fit_logistic` (e.g. ``interact``).

    Returns:
        A callable map (x, groups) -> P(correct).
    """
    if method == "isotonic":
        return fit_isotonic(x, c)
    if method == "platt":
        return fit_platt(x, c, groups)
    if method == "logistic":
        return fit_logistic(x, c, groups, **options)
    raise ValueError(f"unknown calibration method {method!r}; use one of {METHODS}")


def bootstrap_indices(n: int, clusters: np.ndarray | None, n_boot: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``n_boot`` resamples of range(n): items with replacement, or whole clusters with replacement.

    Args:
        n: the items.
        clusters: each item's cluster, shape (n,), or None (items resampled).
        n_boot: resamples.
        rng: the numpy generator.

    Returns:
        ``n_boot`` index arrays (length n for items; the clusters' total size, which varies, for clusters).
    """
    if clusters is None:
        return [rng.integers(0, n, n) for _ in range(n_boot)]
    codes, uniques = pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), sort=False)
    members = [np.flatnonzero(codes == u) for u in range(len(uniques))]
    out = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(members), len(members))
        out.append(np.concatenate([members[p] for p in pick]))
    return out
