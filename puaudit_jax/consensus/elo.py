"""Online Elo over pairwise verdicts, averaged over shuffled orders.

For each comparison (a, b, s) in order, with s = 1 (a won), 0 (b won), 1/2 (tie):
E = 1 / (1 + 10^((R_b - R_a) / 400)),  R_a += K (s - E),  R_b -= K (s - E).
Online Elo depends on the order of the games; the result is the mean over ``n_orders`` random
permutations (numpy Generator(seed)), with the spread across orders reported. Each order is a
``lax.scan`` over the games; the orders are ``vmap``-ed. All ratings start at ``init`` (1000), so the
mean stays 1000; ``anchor="model"`` shifts the scores so that model sits at ``anchor_value``.
Models never compared stay at ``init`` (reported by ``n_games``).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from puaudit_runtime.jit import jit

from .bradley_terry import encode_comparisons
from .config import EloConfig  # light, for the CLI


@dataclass(frozen=True)
class EloResult:
    """scores: mean Elo over orders per model; spread: std over orders per model; n_games per model."""

    scores: pd.Series
    spread: pd.Series
    n_games: pd.Series
    config: EloConfig


def _run(ratings, a, b, s, k):
    """One pass over the games (a, b, s) in the given order. ratings (n,), a/b (g,) int, s (g,)."""

    def step(r, game):
        i, j, score = game
        expect = 1.0 / (1.0 + 10.0 ** ((r[j] - r[i]) / 400.0))
        delta = k * (score - expect)
        return r.at[i].add(delta).at[j].add(-delta), None

    out, _ = jax.lax.scan(step, ratings, (a, b, s))
    return out


#: ``_run`` over a leading axis of game orders (a, b, s (n_orders, g)), compiled as one program
_runs = jit(jax.vmap(_run, in_axes=(None, 0, 0, 0, None)))


def online_elo(table: pd.DataFrame, config: EloConfig = EloConfig(), *, models: list[str] | None = None) -> EloResult:
    """Online Elo of a comparison table (``model_a``, ``model_b``, ``winner`` in A | B | tie).

    Args:
        table: one row per comparison.
        config: K, the number of orders, shuffle, seed, start rating and anchor.
        models: fixes the order of the models; None: the table's, at their first appearance in
            ``model_a``, then in ``model_b``.

    Returns:
        The :class:`EloResult`: per model the mean over the orders of the final rating (Elo points,
        anchored), its spread (std over the orders) and the games played.

    Raises:
        ValueError: a bad table (:func:`encode_comparisons`) or an anchor not among the models.
    """
    names, codes = encode_comparisons(table, models)
    n, g = len(names), len(codes)
    score = np.where(codes[:, 2] == 1, 1.0, np.where(codes[:, 2] == 0, 0.0, 0.5))
    rng = np.random.default_rng(config.seed)
    orders = np.stack([rng.permutation(g) if config.shuffle else np.arange(g) for _ in range(config.n_orders)])
    with jax.enable_x64(True):
        runs = _runs(
            jnp.full(n, config.init, jnp.float64),
            jnp.asarray(codes[orders, 0]),
            jnp.asarray(codes[orders, 1]),
            jnp.asarray(score[orders]),
            jnp.asarray(config.k, jnp.float64),
        )
        runs = np.asarray(runs, np.float64)
    if config.anchor is not None:
        if config.anchor not in names:
            raise ValueError(f"anchor model {config.anchor!r} is not among the {n} models")
        runs = runs - runs[:, [names.index(config.anchor)]] + config.anchor_value
    else:
        runs = runs - runs.mean(axis=1, keepdims=True) + config.anchor_value
    index = pd.Index(names, name="model")
    games = np.bincount(codes[:, :2].ravel(), minlength=n)
    return EloResult(
        pd.Series(runs.mean(axis=0), index=index, name="elo"),
        pd.Series(runs.std(axis=0), index=index, name="spread"),
        pd.Series(games, index=index, name="n_games"),
        config,
    )
