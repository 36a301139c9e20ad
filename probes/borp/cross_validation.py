"""5. Cross-validation of a head: grouped folds, out-of-fold predictions, agreement with humans."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["grouped_kfold", "cross_val_predict", "agreement"]


def grouped_kfold(groups, n_splits: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """K folds with whole groups held out (e.g. all responses of one dialogue), groups shuffled by `seed`.

    Args:
        groups: each item's group, shape (n,).
        n_splits: the folds K (at most the number of groups).
        seed: seed of the numpy Generator that shuffles the groups.

    Returns:
        K pairs (train indices, test indices), int arrays into the n items.
    """
    groups = np.asarray(groups)
    uniq = np.unique(groups)
    if len(uniq) < n_splits:
        raise ValueError(f"{len(uniq)} groups cannot make {n_splits} folds")
    perm = np.random.default_rng(seed).permutation(uniq)
    fold_of = {g: i % n_splits for i, g in enumerate(perm)}
    f = np.array([fold_of[g] for g in groups])
    return [(np.nonzero(f != k)[0], np.nonzero(f == k)[0]) for k in range(n_splits)]


def cross_val_predict(make_head: Callable[[], object], V, y, folds) -> np.ndarray:
    """Out-of-fold predictions of heads built by `make_head()`.

    Args:
        make_head: makes a fresh, unfitted head (`fit(V, y)` then `predict(V)`).
        V: contrastive vectors, shape (n, d) (or (n, L, d) for `LayerwiseHeads`).
        y: the human scores, shape (n,).
        folds: (train indices, test indices) pairs covering the n items (`grouped_kfold`).

    Returns:
        The predictions, shape (n,); for `LayerwiseHeads` (n, 3): final, mid, uncertainty. NaN for an
        item no fold tests.
    """
    V, y = np.asarray(V), np.asarray(y, np.float64)
    out = None
    for train, test in folds:
        pred = make_head().fit(V[train], y[train]).predict(V[test])
        pred = np.column_stack(pred) if isinstance(pred, tuple) else np.asarray(pred)
        if out is None:
            out = np.full((len(y),) + pred.shape[1:], np.nan)
        out[test] = pred
    return out


def agreement(y_true, y_pred) -> dict:
    """Agreement of human and predicted scores: K-alpha, Pearson r with its 95 % CI, RMSE.

    K-alpha (interval; ordinal on the values as they are) treats them as two raters.
    """
    from probes.stats import krippendorff_alpha, pearson

    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    r = pearson(y_true, y_pred)
    pair = np.vstack([y_true, y_pred])
    return dict(
        k_alpha=krippendorff_alpha(pair, "interval"),
        k_alpha_ordinal=krippendorff_alpha(pair, "ordinal"),
        pearson=r.r,
        pearson_low=r.low,
        pearson_high=r.high,
        rmse=float(np.sqrt(np.mean((y_true - y_pred) ** 2))),
        n=int(len(y_true)),
    )
