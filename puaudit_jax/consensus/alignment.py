"""Consensus alignment of several judges' score matrices (the UDA appendix's objective).

Inputs: a judges x models matrix R (Elo points, M x N), its baseline consensus C_m = mean_k R_km.

Objective (the appendix's Eq. 3 terms, weighted; computed in standardised units z = (R - mu) / s
with mu, s the mean and std of the baseline matrix, so the weights are scale free)::

    L = w_anchor    * mean_{k,m in mask} (R'_km - A_km)^2 / s^2          anchor alignment (MSE)
      + w_rank      * mean_k (1 - pearson_m(R'_k., A_k.))                  rank fidelity
      + w_consensus * mean_{k,m} (R'_km - mean_j R'_jm)^2 / s^2           collective consensus (MSE)

The anchor A is one of:

- ``"self"``: each judge's own baseline row (fidelity to what the judge said; the consensus term then
  trades against it, which is what the trade-off curve over w_consensus measures);
- ``"consensus"``: the baseline consensus C for every judge (the appendix's Table 4 supervision:
  "we adopt the baseline's mean scores as ground truth"; all three terms then pull towards C);
- a per-model Series (e.g. human scores); models without a value (NaN) are left out of the anchor
  and rank terms (a partially anchored, semi-supervised variant).

Adapter. A small Flax MLP over per-(judge, model) features phi_km = [judge embedding, model
embedding, self-preference flag (judge and model from the same family), optional text features]
outputs one number per cell:

- ``mode="shrink"`` (default): alpha_km = sigmoid(out_km) in (0, 1) and
  R'_km = alpha_km R_km + (1 - alpha_km) C_m, the idealised shrinkage of Theorem 2 with a learned,
  cell-specific alpha;
- ``mode="residual"``: R'_km = R_km + s * out_km (an unconstrained correction, kept small by weight
  decay).

Trained full batch with optax (adamw), a fixed number of steps, parameters initialised from
``jax.random.PRNGKey(seed)``: deterministic under the paper.

The shrinkage view: :func:`shrink` applies R_k <- alpha_k R_k + (1 - alpha_k) C with given alpha
(a scalar or one per judge); :func:`fit_shrinkage` learns one alpha per judge (or one common alpha)
on the same objective. Theorem 2 (``sum_k |bias|`` never increases) holds for a *common* alpha; with
judge-specific alpha it can fail (biases (0, 10), alpha = (0, 1): S goes 10 -> 15);
:func:`theorem2_bound` gives the bound that does hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd

from puaudit_runtime.jit import jit

from .config import ANCHORS, MODES, AlignConfig  # noqa: F401  (MODES re-exported; light, for the CLI)


@dataclass(frozen=True)
class AlignResult:
    """The aligned matrix and how the adapter got there.

    Attributes:
        scores: aligned judges x models matrix (Elo points).
        alpha: per-cell shrink weight (mode "shrink") or None.
        loss: (steps,) training loss.
        terms: final anchor / rank / consensus terms and total.
        config: the config used (with its seed).
        features: the feature names used.
    """

    scores: pd.DataFrame
    alpha: pd.DataFrame | None
    loss: np.ndarray
    terms: dict
    config: AlignConfig
    features: list = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# features


def self_preference_flags(judges, models, family: dict[str, str]) -> pd.DataFrame:
    """Self-preference flags, a judges x models 0/1 matrix: 1 where judge and model belong to the same family.

    Args:
        judges: the judges' names (the rows).
        models: the models' names (the columns).
        family: maps a judge or model name to a family label; names without a label belong to no
            family (never flagged).

    Returns:
        The flags, judges x models floats in {0, 1}, indexed "judge" / "model".
    """
    flags = [[float(j in family and m in family and family[j] == family[m]) for m in models] for j in judges]
    return pd.DataFrame(flags, index=pd.Index(judges, name="judge"), columns=pd.Index(models, name="model"))


class Adapter(nn.Module):
    """phi_km -> one number per cell. Inputs: judge (C,) int, model (C,) int, extra (C, f) float."""

    n_judges: int
    n_models: int
    embed_dim: int = 4
    hidden: int = 16

    @nn.compact
    def __call__(self, judge, model, extra):
        """One number (C,) per cell from judge (C,) int, model (C,) int and extra (C, f) float inputs."""
        e_j = nn.Embed(self.n_judges, self.embed_dim, name="judge_embedding")(judge)
        e_m = nn.Embed(self.n_models, self.embed_dim, name="model_embedding")(model)
        h = jnp.concatenate([e_j, e_m, extra], axis=-1)
        h = nn.gelu(nn.Dense(self.hidden, name="hidden")(h))
        out = nn.Dense(1, kernel_init=nn.initializers.zeros, bias_init=nn.initializers.zeros, name="out")(h)
        return out[..., 0]


# --------------------------------------------------------------------------------------------------
# objective


def _masked_pearson(x, y, mask):
    """Row-wise Pearson of x and y (M, N) over the cells where mask (M, N) is 1."""
    n = jnp.maximum(mask.sum(axis=1, keepdims=True), 1.0)
    xm = x - (x * mask).sum(axis=1, keepdims=True) / n
    ym = y - (y * mask).sum(axis=1, keepdims=True) / n
    cov = (xm * ym * mask).sum(axis=1)
    var = (xm**2 * mask).sum(axis=1) * (ym**2 * mask).sum(axis=1)
    return cov / jnp.sqrt(var + 1e-12)


def loss_terms(aligned, anchor, mask):
    """The three terms on standardised matrices: anchor MSE, 1 - mean Pearson, consensus MSE.

    Args:
        aligned: the aligned scores, shape (M, N) (judges x models), standardised.
        anchor: the anchor scores, shape (M, N), standardised.
        mask: 1 where the anchor counts, 0 where it is left out, shape (M, N).

    Returns:
        (anchor MSE over the masked cells, 1 - mean Pearson to the anchor over the judges with more than
        2 masked cells, mean squared deviation from the aligned consensus), scalars.
    """
    anchor_mse = ((aligned - anchor) ** 2 * mask).sum() / jnp.maximum(mask.sum(), 1.0)
    has = mask.sum(axis=1) > 2
    rank = 1.0 - (jnp.where(has, _masked_pearson(aligned, anchor, mask), 0.0).sum() / jnp.maximum(has.sum(), 1))
    consensus_mse = jnp.mean((aligned - aligned.mean(axis=0, keepdims=True)) ** 2)
    return anchor_mse, rank, consensus_mse


def objective(aligned, anchor, mask, weights):
    """Weighted sum of :func:`loss_terms`.

    Args:
        aligned: the aligned scores, shape (M, N) (judges x models), standardised.
        anchor: the anchor scores, shape (M, N), standardised.
        mask: 1 where the anchor counts, 0 where it is left out, shape (M, N).
        weights: (w_anchor, w_rank, w_consensus), shape (3,).

    Returns:
        The objective (scalar).
    """
    a, r, c = loss_terms(aligned, anchor, mask)
    return weights[0] * a + weights[1] * r + weights[2] * c


def _standardise(scores: pd.DataFrame):
    values = scores.to_numpy(float)
    if not np.isfinite(values).all():
        raise ValueError("scores must be finite")
    if values.shape[0] < 2:
        raise ValueError("consensus alignment needs at least 2 judges")
    mu, s = values.mean(), values.std()
    if s == 0:
        raise ValueError("scores are constant: nothing to align")
    return (values - mu) / s, mu, s


def _anchor_matrix(scores: pd.DataFrame, z: np.ndarray, anchor, mu: float, s: float):
    """(A, mask) in standardised units."""
    if isinstance(anchor, pd.Series):
        missing = [m for m in scores.columns if m not in anchor.index]
        if missing:
            raise ValueError(f"anchor Series has no entry for models {missing[:5]} (use NaN to leave one out)")
        row = (anchor.loc[scores.columns].to_numpy(float) - mu) / s
        mask_row = np.isfinite(row)
        if mask_row.sum() < 3:
            raise ValueError("anchor Series needs finite scores for at least 3 models")
        a = np.broadcast_to(np.where(mask_row, row, 0.0), z.shape)
        return a, np.broadcast_to(mask_row.astype(float), z.shape)
    if anchor == "self":
        return z, np.ones_like(z)
    if anchor == "consensus":
        return np.broadcast_to(z.mean(axis=0), z.shape), np.ones_like(z)
    raise ValueError(f"anchor must be one of {ANCHORS} or a per-model Series, got {anchor!r}")


# --------------------------------------------------------------------------------------------------
# adapter training


def _minimise(loss_fn, init, opt, steps: int):
    """``steps`` optimiser steps on ``loss_fn`` in one jitted ``lax.scan``.

    Returns (final parameters, (steps,) loss history).
    """

    @jit
    def train(p):
        def step(carry, _):
            p, state = carry
            value, grads = jax.value_and_grad(loss_fn)(p)
            updates, state = opt.update(grads, state, p)
            return (optax.apply_updates(p, updates), state), value

        (p, _), history = jax.lax.scan(step, (p, opt.init(p)), None, length=steps)
        return p, history

    return train(init)


def _cell_features(
    scores: pd.DataFrame, self_preference: pd.DataFrame | None, text: np.ndarray | None
) -> tuple[np.ndarray, list[str]]:
    """(M, N, f) extra inputs of each (judge, model) cell and the adapter's input names."""
    n_j, n_m = scores.shape
    extras, names = [], ["judge_id", "model_id"]
    if self_preference is not None:
        flags = self_preference.loc[scores.index, scores.columns].to_numpy(float)
        extras.append(flags[..., None])
        names.append("self_preference")
    if text is not None:
        text = np.asarray(text, float)
        if text.shape[:2] != (n_j, n_m) or text.ndim != 3 or not np.isfinite(text).all():
            raise ValueError(f"text features must be finite with shape ({n_j}, {n_m}, t), got {text.shape}")
        extras.append(text)
        names.append(f"text[{text.shape[2]}]")
    return (np.concatenate(extras, axis=-1) if extras else np.zeros((n_j, n_m, 0))), names


def align(
    scores: pd.DataFrame,
    config: AlignConfig = AlignConfig(),
    *,
    anchor: pd.Series | None = None,
    self_preference: pd.DataFrame | None = None,
    text: np.ndarray | None = None,
) -> AlignResult:
    """Train the adapter on ``scores`` (judges x models, Elo) and return the aligned matrix.

    Args:
        scores: the judges x models score matrix, in Elo points.
        config: the objective's weights, the anchor, the adapter and its training.
        anchor: a per-model Series (Elo points; NaN leaves a model out, at least 3 finite) overriding
            ``config.anchor``, or None.
        self_preference: judges x models 0/1 flags (:func:`self_preference_flags`), an input feature
            of each cell, or None.
        text: features of the (judge, model) cells, shape (M, N, t) (e.g. similarity of the model's
            answers to the judge's own answers), or None.

    Returns:
        The :class:`AlignResult` (aligned scores in Elo points).

    Raises:
        ValueError: an unknown anchor, or an anchor Series without an entry for a model or with fewer
            than 3 finite scores.
    """
    z, mu, s = _standardise(scores)
    n_j, n_m = z.shape
    a_mat, mask = _anchor_matrix(scores, z, config.anchor if anchor is None else anchor, mu, s)
    extra, names = _cell_features(scores, self_preference, text)
    judge_idx, model_idx = np.meshgrid(np.arange(n_j), np.arange(n_m), indexing="ij")
    model = Adapter(n_j, n_m, config.embed_dim, config.hidden)
    inputs = (
        jnp.asarray(judge_idx.ravel()),
        jnp.asarray(model_idx.ravel()),
        jnp.asarray(extra.reshape(n_j * n_m, -1), jnp.float32),
    )
    params = model.init(jax.random.PRNGKey(config.seed), *inputs)
    zj, cj = jnp.asarray(z, jnp.float32), jnp.asarray(z.mean(axis=0), jnp.float32)
    aj, mj = jnp.asarray(a_mat, jnp.float32), jnp.asarray(mask, jnp.float32)
    weights = jnp.asarray([config.w_anchor, config.w_rank, config.w_consensus], jnp.float32)

    def apply(p):
        out = model.apply(p, *inputs).reshape(n_j, n_m)
        if config.mode == "shrink":
            alpha = jax.nn.sigmoid(out)
            return alpha * zj + (1 - alpha) * cj, alpha
        return zj + out, jnp.ones_like(out)

    def loss_fn(p):
        return objective(apply(p)[0], aj, mj, weights)

    opt = optax.adamw(config.learning_rate, weight_decay=config.weight_decay)
    params, history = _minimise(loss_fn, params, opt, config.steps)
    aligned, alpha = apply(params)
    terms = [float(t) for t in loss_terms(aligned, aj, mj)]
    losses = {"anchor_mse": terms[0], "rank": terms[1], "consensus_mse": terms[2],
              "total": float(objective(aligned, aj, mj, weights))}  # fmt: skip
    frame = lambda values: pd.DataFrame(np.asarray(values, float), index=scores.index, columns=scores.columns)
    alpha_frame = frame(alpha) if config.mode == "shrink" else None
    return AlignResult(
        frame(np.asarray(aligned, float) * s + mu), alpha_frame, np.asarray(history, float), losses, config, names
    )


# --------------------------------------------------------------------------------------------------
# the idealised shrinkage


def shrink(scores: pd.DataFrame, alpha) -> pd.DataFrame:
    """Shrink each judge's row towards the consensus: R_k <- alpha_k R_k + (1 - alpha_k) C.

    C is the column mean of ``scores``; alpha a scalar, or one value per judge (array or Series indexed
    by judge), each in [0, 1].
    """
    values = scores.to_numpy(float)
    if isinstance(alpha, pd.Series):
        alpha = alpha.loc[scores.index].to_numpy(float)
    a = np.broadcast_to(np.asarray(alpha, float), (values.shape[0],)).copy()
    if not (np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all()):
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    c = values.mean(axis=0)
    return pd.DataFrame(a[:, None] * values + (1 - a[:, None]) * c, index=scores.index, columns=scores.columns)


@dataclass(frozen=True)
class ShrinkResult:
    """alpha: learned alpha per judge (all equal when common=True); scores: the shrunk matrix; loss."""

    alpha: pd.Series
    scores: pd.DataFrame
    loss: np.ndarray


def fit_shrinkage(
    scores: pd.DataFrame, config: AlignConfig = AlignConfig(), *, anchor: pd.Series | None = None, common: bool = False
) -> ShrinkResult:
    """Learn alpha_k = sigmoid(a_k) (one per judge, or one common alpha) on the objective of :class:`AlignConfig`.

    Trained with adam; a_k starts at 0 (alpha 1/2). A judge's row is shrunk to alpha_k z_k + (1 - alpha_k)
    times the consensus (standardised).

    Args:
        scores: the judges x models score matrix, in Elo points.
        config: the objective's weights, the anchor, the learning rate and the steps.
        anchor: a per-model Series (Elo points) overriding ``config.anchor``, or None.
        common: whether all judges share one alpha.

    Returns:
        The :class:`ShrinkResult` (alpha in (0, 1) per judge, the shrunk matrix in Elo points, the
        training loss per step).

    Raises:
        ValueError: an unknown anchor, or a bad anchor Series (as :func:`align`).
    """
    z, mu, s = _standardise(scores)
    a_mat, mask = _anchor_matrix(scores, z, config.anchor if anchor is None else anchor, mu, s)
    zj, cj = jnp.asarray(z, jnp.float32), jnp.asarray(z.mean(axis=0), jnp.float32)
    aj, mj = jnp.asarray(a_mat, jnp.float32), jnp.asarray(mask, jnp.float32)
    weights = jnp.asarray([config.w_anchor, config.w_rank, config.w_consensus], jnp.float32)
    n_alpha = 1 if common else z.shape[0]

    def loss_fn(logit):
        alpha = jnp.broadcast_to(jax.nn.sigmoid(logit), (z.shape[0],))[:, None]
        return objective(alpha * zj + (1 - alpha) * cj, aj, mj, weights)

    logit, history = _minimise(loss_fn, jnp.zeros(n_alpha, jnp.float32), optax.adam(config.learning_rate), config.steps)
    alpha = np.broadcast_to(np.asarray(jax.nn.sigmoid(logit), float), (z.shape[0],))
    alpha = pd.Series(alpha, index=scores.index, name="alpha")
    return ShrinkResult(alpha, shrink(scores, alpha), np.asarray(history, float))


def theorem2_bound(bias: np.ndarray, alpha) -> np.ndarray:
    """Bound on S_UDA from the triangle inequality, per model, for judge-specific alpha.

    ``sum_k alpha_k |e_k| + |mean e| sum_k (1 - alpha_k)``. bias: (M,) or (M, N). Equals S_base when all
    alpha_k are equal (Theorem 2); above it otherwise in general.
    """
    bias = np.asarray(bias, float)
    a = np.asarray(alpha, float).reshape((-1,) + (1,) * (bias.ndim - 1))
    return (a * np.abs(bias)).sum(axis=0) + np.abs(bias.mean(axis=0)) * (1 - a).sum(axis=0)


# --------------------------------------------------------------------------------------------------
# the trade-off over the consensus weight


def tradeoff_curve(
    scores: pd.DataFrame,
    weights,
    config: AlignConfig = AlignConfig(),
    *,
    human: pd.Series | None = None,
    self_preference: pd.DataFrame | None = None,
    text: np.ndarray | None = None,
    anchor: pd.Series | None = None,
    progress: bool = False,
) -> tuple[pd.DataFrame, dict]:
    """Train the adapter for each consensus weight in ``weights`` (other settings from ``config``).

    Args:
        scores: the judges x models score matrix, in Elo points.
        weights: the consensus weights (``w_consensus``) to train at.
        config: the other settings of each training.
        human: human scores per model (Elo points), for the evaluation columns only, or None.
        self_preference: judges x models 0/1 flags, as :func:`align`.
        text: (M, N, t) cell features, as :func:`align`.
        anchor: a per-model Series overriding ``config.anchor``, as :func:`align`.
        progress: whether to show a progress bar over the weights.

    Returns:
        (table, matrices): one row per weight with :func:`metrics.summary` of the aligned matrix
        (against the baseline consensus and ``human``), the final loss and its terms, and the per-judge
        Pearson to human as columns ``pearson_human[<judge>]``; matrices maps weight -> aligned scores.
    """
    from dataclasses import replace

    from .metrics import consensus, judge_metrics, summary

    base = consensus(scores)
    rows, matrices = [], {}
    iterator = list(weights)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc="consensus weight")
    for w in iterator:
        res = align(
            scores, replace(config, w_consensus=float(w)), anchor=anchor, self_preference=self_preference, text=text
        )
        row = {
            "w_consensus": float(w),
            **summary(res.scores, base_consensus=base, human=human),
            "loss": float(res.loss[-1]),
            **{f"term_{k}": v for k, v in res.terms.items()},
        }
        if res.alpha is not None:
            row["mean_alpha"] = float(res.alpha.to_numpy().mean())
        if human is not None:
            per = judge_metrics(res.scores, human)["pearson"]
            row.update({f"pearson_human[{j}]": float(v) for j, v in per.items()})
        rows.append(row)
        matrices[float(w)] = res.scores
    return pd.DataFrame(rows), matrices
