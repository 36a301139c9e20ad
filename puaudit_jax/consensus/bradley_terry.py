"""Bradley-Terry maximum likelihood on pairwise verdicts, on the Elo scale, with bootstrap intervals.

Model. Each model i has a strength theta_i (natural-log scale). For a comparison of i and j:

- ``ties="half"`` (default): P(i beats j) = sigmoid(theta_i - theta_j); a tie counts as half a win
  for each side (the Chatbot-Arena / choix convention for ties).
- ``ties="davidson"``: Davidson (1970), with a tie parameter nu (log scale):
  P(i > j) = e^{theta_i} / Z, P(tie) = e^{nu + (theta_i + theta_j)/2} / Z,
  Z = e^{theta_i} + e^{theta_j} + e^{nu + (theta_i + theta_j)/2}.

Elo scale. ``elo_i = anchor_value + 400 / ln(10) * (theta_i - theta_ref)``: a 400-point gap means
10:1 odds. ``theta_ref`` is the mean strength (``anchor=None``: the scores average ``anchor_value``,
1000 by default) or the strength of a named model (``anchor="gpt-4"``: that model sits at 1000).

Existence. With ``ridge=0`` the maximum-likelihood estimate is finite iff the directed "beat" graph
(edge j -> i when i beat or tied j) is strongly connected (Zermelo 1929; Ford 1957). Otherwise
:func:`fit_bt` raises :class:`ComparisonGraphError` naming the groups of models (a model that never
lost, a disconnected group, a model never compared). ``ridge > 0`` is the documented regularisation:
a Gaussian prior theta ~ N(0, 1/ridge) (maximum a posteriori), finite for every graph; a model with
no comparison then sits exactly at the reference (theta 0) and the gaps of a disconnected group are
only set by the prior (report them as such). Nothing returns NaN.

Solver. Damped Newton (Levenberg) on the negative log-likelihood, jit-compiled as one
``lax.while_loop`` in float64 (``jax.enable_x64``); the gauge (sum theta = 0) is fixed by a penalty
that vanishes at the optimum. The bootstrap refits ``vmap`` the same solver over resampled count
matrices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from puaudit_runtime.checks import check_fraction, check_int
from puaudit_runtime.jit import jit

from ..datasets.verdicts import JUDGE_VERDICTS, A, B
from .config import BTConfig  # light, for the CLI

ELO_PER_NAT = 400.0 / np.log(10.0)  # Elo points per unit of theta (natural log odds)
WINNERS = JUDGE_VERDICTS


class ComparisonGraphError(ValueError):
    """The comparison graph does not identify the strengths (and no ridge was asked for)."""


@dataclass(frozen=True)
class BTResult:
    """A Bradley-Terry fit.

    scores: Elo points per model (index = model names, in the order given or first seen).
    theta: (n,) strengths on the natural-log scale, mean 0.
    tie_param: Davidson's nu (log scale), None for ties="half".
    n_comparisons: rows used; n_ties: of which ties. log_likelihood: at the estimate (no prior term).
    iterations, converged, grad_norm: of the Newton loop. config: the BTConfig used.
    """

    scores: pd.Series
    theta: np.ndarray
    tie_param: float | None
    n_comparisons: int
    n_ties: int
    log_likelihood: float
    iterations: int
    converged: bool
    grad_norm: float
    config: BTConfig = field(repr=False)


# --------------------------------------------------------------------------------------------------
# input


def encode_comparisons(table: pd.DataFrame, models: list[str] | None = None) -> tuple[list[str], np.ndarray]:
    """Columns ``model_a``, ``model_b``, ``winner`` (A | B | tie) -> (model names, (n_c, 3) int array).

    Rows of the array: index of a, index of b, outcome (1 = a won, 0 = b won, 2 = tie). Every row is
    used; a missing column, an unknown winner, a self-comparison or a model outside ``models`` raises
    ``ValueError`` naming the row.
    """
    missing = [c for c in ("model_a", "model_b", "winner") if c not in table.columns]
    if missing:
        raise ValueError(f"comparison table lacks columns {missing} (need model_a, model_b, winner)")
    if len(table) == 0:
        raise ValueError("no comparisons")
    winner = table["winner"].astype(str).to_numpy()
    bad = ~np.isin(winner, WINNERS)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"row {table.index[k]!r}, column 'winner': {winner[k]!r} is not one of {WINNERS}")
    a, b = table["model_a"].astype(str).to_numpy(), table["model_b"].astype(str).to_numpy()
    same = a == b
    if same.any():
        k = int(np.flatnonzero(same)[0])
        raise ValueError(f"row {table.index[k]!r}: model {a[k]!r} compared with itself")
    if models is None:
        models = list(dict.fromkeys(np.concatenate([a, b]).tolist()))
    index = {m: k for k, m in enumerate(models)}
    for col, names in (("model_a", a), ("model_b", b)):
        unknown = [k for k, m in enumerate(names) if m not in index]
        if unknown:
            raise ValueError(
                f"row {table.index[unknown[0]]!r}, column {col!r}: model {names[unknown[0]]!r} is not in the model list"
            )
    outcome = np.select([winner == A, winner == B], [1, 0], 2)
    codes = np.stack([[index[m] for m in a], [index[m] for m in b], outcome], axis=1).astype(np.int64)
    return list(models), codes


def count_matrices(codes: np.ndarray, n: int, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(wins, ties): wins[i, j] = (weighted) wins of i over j; ties[i, j] = ties between i and j (symmetric).

    Args:
        codes: the comparisons, shape (n_c, 3) int (:func:`encode_comparisons`: index of a, index of b,
            outcome 1 = a won, 0 = b won, 2 = tie).
        n: the number of models.
        weights: a weight per comparison, shape (n_c,) (None: 1 each).

    Returns:
        (wins, ties), each shape (n, n).
    """
    w = np.ones(len(codes)) if weights is None else np.asarray(weights, float)
    wins, ties = np.zeros((n, n)), np.zeros((n, n))
    i, j, o = codes[:, 0], codes[:, 1], codes[:, 2]
    np.add.at(wins, (i[o == 1], j[o == 1]), w[o == 1])
    np.add.at(wins, (j[o == 0], i[o == 0]), w[o == 0])
    np.add.at(ties, (i[o == 2], j[o == 2]), w[o == 2])
    return wins, ties + ties.T


def check_identifiable(wins: np.ndarray, ties: np.ndarray, models: list[str]) -> None:
    """Raise :class:`ComparisonGraphError` unless the beat graph is strongly connected.

    Args:
        wins: wins[i, j] = wins of model i over model j, shape (n, n).
        ties: ties between i and j, shape (n, n), symmetric.
        models: the n model names, to name them in the error.

    Raises:
        ComparisonGraphError: a model never compared, a graph in disconnected groups, or a beat graph
            that is not strongly connected (infinite maximum-likelihood strengths).
    """
    n = len(models)
    seen = (wins + wins.T + ties).sum(axis=1) > 0
    if not seen.all():
        names = [models[k] for k in np.flatnonzero(~seen)][:5]
        raise ComparisonGraphError(
            f"{int((~seen).sum())} model(s) never compared, e.g. {names}; "
            "drop them or fit with ridge > 0 (they then sit at the reference)"
        )
    beat = csr_matrix(((wins.T + ties) > 0).astype(np.int8))  # edge j -> i when i beat or tied j
    n_weak, _ = connected_components(beat, directed=True, connection="weak")
    if n_weak > 1:
        _, labels = connected_components(beat, directed=True, connection="weak")
        groups = [[models[k] for k in np.flatnonzero(labels == g)][:3] for g in range(n_weak)]
        raise ComparisonGraphError(
            f"the comparison graph has {n_weak} disconnected groups (e.g. {groups}); "
            "strengths across groups are not identified: fit each group, or use "
            "ridge > 0 (the prior then sets the gap between groups)"
        )
    n_strong, labels = connected_components(beat, directed=True, connection="strong")
    if n_strong > 1:
        never_lost = [models[k] for k in range(n) if (wins[:, k].sum() + ties[:, k].sum()) == 0]
        never_won = [models[k] for k in range(n) if (wins[k].sum() + ties[k].sum()) == 0]
        detail = []
        if never_lost:
            detail.append(f"never lost: {never_lost[:5]}")
        if never_won:
            detail.append(f"never won: {never_won[:5]}")
        raise ComparisonGraphError(
            f"the maximum-likelihood strengths are infinite: the beat graph splits into {n_strong} strongly "
            f"connected groups ({'; '.join(detail) or 'a group beat every model outside it'}); "
            "use ridge > 0 (a Gaussian prior) for finite scores"
        )


# --------------------------------------------------------------------------------------------------
# likelihood and Newton solver (float64)


def _neg_log_lik(params, wins, ties, davidson: bool):
    """Negative log-likelihood; params = theta (n,) [+ nu]."""
    n = wins.shape[0]
    theta = params[:n]
    diff = theta[:, None] - theta[None, :]
    if not davidson:
        return -jnp.sum(wins * jax.nn.log_sigmoid(diff))
    nu = params[n]
    mid = nu + 0.5 * (theta[:, None] + theta[None, :])
    log_z = jnp.logaddexp(jnp.logaddexp(theta[:, None], theta[None, :]), mid)
    log_win = theta[:, None] - log_z
    log_tie = mid - log_z
    return -(jnp.sum(wins * log_win) + 0.5 * jnp.sum(ties * log_tie))


def _objective(params, wins, ties, ridge, davidson: bool):
    n = wins.shape[0]
    theta = params[:n]
    gauge = 0.5 * jnp.sum(theta) ** 2  # zero at any optimum of the (shift-invariant) likelihood
    return _neg_log_lik(params, wins, ties, davidson) + 0.5 * ridge * jnp.sum(theta**2) + gauge


def _newton_fit(wins, ties, ridge, tol, *, davidson: bool, max_iter: int):
    """Damped Newton; returns (params, iterations, max |grad| / n_comparisons)."""
    n = wins.shape[0]
    size = n + int(davidson)
    total = jnp.maximum(jnp.sum(wins) + 0.5 * jnp.sum(ties), 1.0)
    f = partial(_objective, wins=wins, ties=ties, ridge=ridge, davidson=davidson)
    grad, hess = jax.grad(f), jax.hessian(f)
    eye = jnp.eye(size, dtype=wins.dtype)

    def cond(state):
        _, it, _, gnorm = state
        return (it < max_iter) & (gnorm > tol)

    def body(state):
        params, it, damping, _ = state
        g, h = grad(params), hess(params)
        step = jnp.linalg.solve(h + damping * (jnp.abs(jnp.diag(h)).mean() + 1.0) * eye, g)
        trial = params - step
        better = f(trial) <= f(params)
        params = jnp.where(better, trial, params)
        damping = jnp.where(better, damping * 0.1, damping * 10.0)
        gnorm = jnp.max(jnp.abs(grad(params))) / total
        # a rejected step that is already below the float64 resolution ends the loop
        gnorm = jnp.where(better | (jnp.max(jnp.abs(step)) > 1e-13), gnorm, 0.0)
        return params, it + 1, damping, gnorm

    init = jnp.zeros(size, wins.dtype)
    state = (init, 0, jnp.asarray(0.0, wins.dtype), jnp.asarray(jnp.inf, wins.dtype))
    params, it, _, gnorm = jax.lax.while_loop(cond, body, state)
    return params, it, jnp.max(jnp.abs(grad(params))) / total


_newton = jit(_newton_fit, static_argnames=("davidson", "max_iter"))


@partial(jit, static_argnames=("davidson", "max_iter"))
def _newton_batch(wins, ties, ridge, tol, *, davidson: bool, max_iter: int):
    """``_newton`` of each resample (wins, ties (B, n, n)) at the same ridge and tol, as one program."""
    one = partial(_newton_fit, davidson=davidson, max_iter=max_iter)
    return jax.vmap(one, in_axes=(0, 0, None, None))(wins, ties, ridge, tol)


def _solve(wins: np.ndarray, ties: np.ndarray, config: BTConfig):
    with jax.enable_x64(True):
        params, it, gnorm = _newton(
            jnp.asarray(wins, jnp.float64),
            jnp.asarray(ties, jnp.float64),
            jnp.asarray(config.ridge, jnp.float64),
            jnp.asarray(config.tol, jnp.float64),
            davidson=config.ties == "davidson",
            max_iter=config.max_iter,
        )
        ll = -float(_neg_log_lik(params, jnp.asarray(wins), jnp.asarray(ties), config.ties == "davidson"))
        return np.asarray(params, np.float64), int(it), float(gnorm), ll


def _counts_for_mode(wins: np.ndarray, ties: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    if mode == "half":
        return wins + 0.5 * ties, np.zeros_like(ties)
    return wins, ties


def to_elo(theta: np.ndarray, models: list[str], anchor: str | None = None, anchor_value: float = 1000.0) -> pd.Series:
    """Strengths (natural log) -> Elo points anchored as described in the module docstring.

    Args:
        theta: strengths in natural-log odds, shape (n,) or (B, n) (e.g. bootstrap samples).
        models: the n model names.
        anchor: the model set to ``anchor_value``, or None (the mean is).
        anchor_value: the anchor's Elo score.

    Returns:
        Elo points: a Series indexed by model for (n,) strengths, else a (B, n) array.

    Raises:
        ValueError: an anchor not among the models.
    """
    theta = np.asarray(theta, float)
    if anchor is None:
        ref = theta.mean(axis=-1, keepdims=True)
    else:
        if anchor not in models:
            raise ValueError(f"anchor model {anchor!r} is not among the {len(models)} models")
        ref = theta[..., [models.index(anchor)]]
    elo = anchor_value + ELO_PER_NAT * (theta - ref)
    return pd.Series(elo, index=pd.Index(models, name="model"), name="elo") if elo.ndim == 1 else elo


# --------------------------------------------------------------------------------------------------
# public API


def fit_bt(table: pd.DataFrame, config: BTConfig = BTConfig(), *, models: list[str] | None = None) -> BTResult:
    """Fit Bradley-Terry to a comparison table (``model_a``, ``model_b``, ``winner`` in A | B | tie).

    Args:
        table: one row per comparison; an optional column ``weight`` (>= 0) weights the rows.
        config: the tie model, ridge, anchor and Newton settings.
        models: fixes the order of the models (and may add models without comparisons, which need
            ``ridge > 0``); None: the table's, at their first appearance in
            ``model_a``, then in ``model_b``.

    Returns:
        The :class:`BTResult`: Elo scores per model, the strengths and the fit's diagnostics.

    Raises:
        ValueError: a bad table (:func:`encode_comparisons`) or weight column.
        ComparisonGraphError: with ``ridge = 0``, a comparison graph that does not identify the strengths.
    """
    names, codes = encode_comparisons(table, models)
    weights = table["weight"].to_numpy(float) if "weight" in table.columns else None
    if weights is not None and not (np.isfinite(weights).all() and (weights >= 0).all()):
        raise ValueError("column 'weight' must be finite and >= 0")
    wins, ties = count_matrices(codes, len(names), weights)
    if config.ridge == 0:
        check_identifiable(wins, ties, names)
    w, t = _counts_for_mode(wins, ties, config.ties)
    params, it, gnorm, ll = _solve(w, t, config)
    theta = params[: len(names)]
    theta = theta - theta.mean()
    if not np.isfinite(params).all():  # defensive: the checks above make this unreachable
        raise FloatingPointError("Bradley-Terry fit produced non-finite strengths")
    return BTResult(
        scores=to_elo(theta, names, config.anchor, config.anchor_value),
        theta=theta,
        tie_param=float(params[-1]) if config.ties == "davidson" else None,
        n_comparisons=int(len(codes)),
        n_ties=int((codes[:, 2] == 2).sum()),
        log_likelihood=ll,
        iterations=it,
        converged=bool(gnorm <= config.tol * 10),
        grad_norm=gnorm,
        config=config,
    )


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile bootstrap of BT Elo scores.

    table: one row per model: elo (the full-data fit), lo, hi (percentile bounds), se (bootstrap std).
    samples: (n_used, n_models) Elo scores of the resamples that were identifiable.
    n_boot: resamples drawn; n_degenerate: resamples whose graph was not identifiable (ridge 0 only),
    left out of the intervals (counted, never hidden). level, seed: as requested.
    """

    table: pd.DataFrame
    samples: np.ndarray
    n_boot: int
    n_degenerate: int
    level: float
    seed: int


def _resampled_counts(codes, names, config: BTConfig, n_boot: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wins (B, n, n), ties (B, n, n), identifiable (B,) bool) of ``n_boot`` resamples of ``codes``."""
    n = len(names)
    stacks_w, stacks_t, keep = [], [], []
    for _ in range(n_boot):
        pick = codes[rng.integers(0, len(codes), len(codes))]
        wins, ties = count_matrices(pick, n)
        ok = True
        if config.ridge == 0:
            try:
                check_identifiable(wins, ties, names)
            except ComparisonGraphError:
                ok = False
        keep.append(ok)
        w, t = _counts_for_mode(wins, ties, config.ties)
        stacks_w.append(w)
        stacks_t.append(t)
    return np.stack(stacks_w), np.stack(stacks_t), np.asarray(keep)


def bootstrap_bt(
    table: pd.DataFrame,
    config: BTConfig = BTConfig(),
    *,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    models: list[str] | None = None,
) -> BootstrapResult:
    """Resample the comparisons with replacement ``n_boot`` times (numpy Generator(seed)) and refit.

    All refits run as one ``vmap`` of the Newton solver. With ``ridge = 0`` a resample whose graph is
    not identifiable cannot be fitted: it is counted in ``n_degenerate`` and left out.

    Args:
        table: one row per comparison, as :func:`fit_bt`.
        config: the Bradley-Terry settings, as :func:`fit_bt`.
        n_boot: resamples (>= 1).
        level: coverage of the percentile intervals, in (0, 1).
        seed: the numpy seed (>= 0).
        models: the order of the models, as :func:`fit_bt`.

    Returns:
        The :class:`BootstrapResult`: per model the full fit's Elo and the interval (``lo``, ``hi``) and
        standard error of the resamples, in Elo points; the (kept, n) resampled scores.

    Raises:
        ValueError: ``n_boot`` not an integer >= 1, ``seed`` not an integer >= 0, ``level`` outside (0, 1),
            or a bad table (see :func:`fit_bt`).
        ComparisonGraphError: no resample is identifiable (with ``ridge = 0``).
    """
    check_int("n_boot", n_boot, 1, "bootstrap resamples")
    check_int("seed", seed, 0, "numpy seed")
    check_fraction("level", level)
    full = fit_bt(table, config, models=models)
    names = list(full.scores.index)
    _, codes = encode_comparisons(table, names)
    n = len(names)
    stacks_w, stacks_t, keep = _resampled_counts(codes, names, config, n_boot, np.random.default_rng(seed))
    if not keep.any():
        raise ComparisonGraphError(f"none of the {n_boot} resamples is identifiable; use ridge > 0")
    with jax.enable_x64(True):
        params, _, _ = _newton_batch(
            jnp.asarray(stacks_w[keep]),
            jnp.asarray(stacks_t[keep]),
            jnp.asarray(config.ridge, jnp.float64),
            jnp.asarray(config.tol, jnp.float64),
            davidson=config.ties == "davidson",
            max_iter=config.max_iter,
        )
        theta = np.asarray(params, np.float64)[:, :n]
    samples = np.asarray(to_elo(theta, names, config.anchor, config.anchor_value))
    alpha = (1 - level) / 2
    out = pd.DataFrame(
        {
            "model": names,
            "elo": full.scores.to_numpy(),
            "lo": np.quantile(samples, alpha, axis=0),
            "hi": np.quantile(samples, 1 - alpha, axis=0),
            "se": samples.std(axis=0, ddof=1) if len(samples) > 1 else np.zeros(n),
        }
    )
    return BootstrapResult(out, samples, n_boot, int((~keep).sum()), level, seed)
